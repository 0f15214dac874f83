#pragma once
// Shortest augmenting paths that finish an auction stage (included by gated_auction.cu; notes and the
// proof sketch in gated_finish.py, whose NumPy emulation computes the same thing).
//
// Block 0 alone, all of its threads. A stage's last few bidders (rows forward, stale columns reverse) are
// settled one at a time by a label-correcting search (Bellman-Ford rounds over a frontier, one warp per
// frontier node) on the reduced costs r(i, k) = cost + price[k] - own(i) clipped at 0, pruned at the best
// terminal found so far (D). Then the path to the terminal is recovered (a predecessor lowered the label
// in an earlier round: no cycles through zero-cost edges), prices move by (D - label), and the path is
// augmented. Both directions keep eps-complementary slackness for whatever eps the phase has, so the
// auction's exactness argument (and its reverse stage) is unchanged.
//
// Forward (FWD): labelled nodes are columns. A free column is a terminal; a column owned by row i leads
// to row i's private option (a terminal) and to i's other columns. Prices of columns labelled below D rise
// by D - label.
// Reverse: labelled nodes are rows. A row on its private option is a terminal; a row on column c leads to
// c's "stay unmatched at price 0" (a terminal at label + price[c]) and to c's other rows. Rows labelled
// below D lower their value by D - label (their columns' prices fall by as much), the path's columns take
// the prices that keep their new rows' values.

#define FIN_NONE 0x7fffffff

struct FinShared {
    i64 D, phi;             // best terminal so far; the source's potential
    int nf[2], ntouched, term, npath, pred, err;
};

// Value of row i's assigned option (as own_value) reading assigned with volatile loads.
__device__ __forceinline__ i64 fin_own(const Prob& p, const State& s, int i) {
    const int a = s.assigned[i];
    if (a == PRIVATE) return p.priv[i];
    return a >= 0 ? s.acost[i] + s.price[a] : INF64;
}

__device__ __forceinline__ i64 clip0(i64 v) { return v > 0 ? v : 0; }

__device__ __forceinline__ void fin_relax(const State& s, FinShared& sh, int x, i64 nd, int round, int* nxt,
                                          int par) {
    if (nd >= *(volatile i64*)&sh.D) return;
    const i64 old = atomicMin((long long*)&s.dist[x], (long long)nd);
    if (nd < old) {
        s.lround[x] = round;
        if (old >= INF64) s.touched[atomicAdd(&sh.ntouched, 1)] = x;
        if (atomicExch(&s.inq[x], 1) != 1) nxt[atomicAdd(&sh.nf[1 - par], 1)] = x;
    }
}

// Expand the partner of node v (label d) or the source's own adjacency (v < 0): relax its neighbours and
// offer its terminal. All lanes of the warp call it.
template <bool FWD>
__device__ void fin_expand(const Prob& p, const State& s, FinShared& sh, int src, int v, i64 d, int round,
                           int* nxt, int par, int lane) {
    i64 phi;
    int partner;
    if (v < 0) {  // the source
        partner = src;
        phi = sh.phi;
    } else if (FWD) {
        partner = s.owner[v];
        if (partner < 0) {  // a free column
            if (lane == 0) atomicMin((long long*)&sh.D, (long long)d);
            return;
        }
        phi = s.acost[partner] + s.price[v];
        if (lane == 0 && p.priv[partner] < INF64)
            atomicMin((long long*)&sh.D, (long long)(d + clip0(p.priv[partner] - phi)));
    } else {
        partner = s.assigned[v];
        if (partner == PRIVATE) {  // a row that can leave its private option
            if (lane == 0) atomicMin((long long*)&sh.D, (long long)d);
            return;
        }
        if (partner < 0) return;  // (never: every row is assigned in the reverse stage)
        phi = s.price[partner];
        if (lane == 0) atomicMin((long long*)&sh.D, (long long)(d + phi));  // partner left at price 0
    }
    if (FWD) {
        const i64 end = p.indptr[partner + 1];
        for (i64 k = p.indptr[partner] + lane; k < end; k += 32) {
            const int x = p.cols[k];
            fin_relax(s, sh, x, d + clip0(p.cost[k] + s.price[x] - phi), round, nxt, par);
        }
    } else {
        const i64 end = p.cptr[partner + 1];
        for (i64 q = p.cptr[partner] + lane; q < end; q += 32) {
            const int x = p.crows[q];
            if (x == v) continue;
            const i64 own = fin_own(p, s, x);
            if (own >= INF64) continue;
            fin_relax(s, sh, x, d + clip0(p.ccost[q] + phi - own), round, nxt, par);
        }
    }
}

// The predecessor of node v on a shortest path: the lowest partner (forward: row; reverse: column) among
// v's edges whose label plus the clipped edge equals v's label and that was lowered in an earlier round.
// Warp 0 calls it; returns the partner and (lane 0) the edge cost.
template <bool FWD>
__device__ int fin_pred(const Prob& p, const State& s, const FinShared& sh, int src, int v, i64& cost_out,
                        int lane) {
    const i64 dv = s.dist[v];
    const int rv = s.lround[v];
    int best = FIN_NONE;
    i64 best_cost = 0;
    // forward: column v's rows x (by the CSC), x's label that of its column; reverse: row v's columns x (by
    // the CSR), x's label that of its owner
    const i64* ptr = FWD ? p.cptr : p.indptr;
    const int* other = FWD ? p.crows : p.cols;
    const i64* edge = FWD ? p.ccost : p.cost;
    const i64 own = FWD ? 0 : fin_own(p, s, v);
    for (i64 q = ptr[v] + lane; q < ptr[v + 1]; q += 32) {
        const int x = other[q];
        i64 lab, phi;
        if (x == src) {
            lab = 0;
            phi = sh.phi;
        } else {
            const int y = FWD ? s.assigned[x] : s.owner[x];
            if (y < 0 || s.dist[y] >= INF64 || s.lround[y] >= rv) continue;
            lab = s.dist[y];
            phi = FWD ? s.acost[x] + s.price[y] : s.price[x];
        }
        const i64 reduced = FWD ? edge[q] + s.price[v] - phi : edge[q] + phi - own;
        if (lab + clip0(reduced) == dv && x < best) {
            best = x;
            best_cost = edge[q];
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const int ob = __shfl_xor_sync(0xffffffffu, best, off);
        const i64 oc = __shfl_xor_sync(0xffffffffu, best_cost, off);
        if (ob < best) {
            best = ob;
            best_cost = oc;
        }
    }
    cost_out = best_cost;
    return best;
}

// One search from src (forward: a free row; reverse: a stale column) and its augmentation.
template <bool FWD>
__device__ void fin_one(const Prob& p, const State& s, FinShared& sh, int src) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const int N = FWD ? p.m : p.n;
    // the source's potential and own terminal
    if (warp == 0) {
        i64 phi, term;
        if (FWD) {
            i64 b2;
            int j1;
            row_best(p, s.price, src, lane, phi, j1, b2);
            term = p.priv[src] < INF64 ? p.priv[src] - phi : INF64;
        } else {
            i64 b1, c1, b2;
            int i1;
            col_best(p, s, src, lane, b1, i1, c1, b2);
            phi = b1 > 0 ? b1 : 0;
            term = phi;
        }
        if (lane == 0) {
            sh.phi = phi;
            sh.D = term;
            sh.nf[0] = 0;
            sh.nf[1] = 0;
            sh.ntouched = 0;
            sh.term = FIN_NONE;
            sh.npath = 0;
            if (FWD && phi >= INF64) sh.err = 1;
        }
    }
    __syncthreads();
    if (sh.err) return;
    if (warp == 0) fin_expand<FWD>(p, s, sh, src, -1, 0, 0, s.front0, 1, lane);  // into front0 (nf[0])
    int par = 0, round = 1;
    while (true) {
        __syncthreads();
        const int cnt = sh.nf[par];
        if (cnt == 0) break;
        int* cur = par ? s.front1 : s.front0;
        int* nxt = par ? s.front0 : s.front1;
        // the labels as they stood at the end of the last round (pcost is free until the path is recovered):
        // a node expanded in round r was lowered before it, so predecessors come from earlier rounds
        for (int t = tid; t < cnt; t += blockDim.x) {
            s.inq[cur[t]] = -1;
            s.pcost[t] = s.dist[cur[t]];
        }
        __syncthreads();  // every thread has read nf[par] and cleared the flags before anyone appends
        if (tid == 0) sh.nf[1 - par] = 0;
        __syncthreads();
        for (int t = warp; t < cnt; t += nw) {
            const int v = cur[t];
            const i64 d = s.pcost[t];
            if (d >= *(volatile i64*)&sh.D) continue;
            fin_expand<FWD>(p, s, sh, src, v, d, round, nxt, par, lane);
        }
        par ^= 1;
        ++round;
    }
    // the terminal: the lowest code reaching D (codes: a node; N + partner for its private / price-0 option;
    // N + src for the source's own)
    const i64 D = sh.D;
    if (D >= INF64) {
        if (tid == 0) sh.err = 1;
        __syncthreads();
        return;
    }
    if (tid == 0 && (FWD ? (p.priv[src] < INF64 && p.priv[src] - sh.phi == D) : sh.phi == D))
        atomicMin(&sh.term, N + src);
    const int nt = sh.ntouched;
    for (int t = tid; t < nt; t += blockDim.x) {
        const int v = s.touched[t];
        const i64 dv = s.dist[v];
        if (FWD) {
            const int i = s.owner[v];
            if (i < 0) {
                if (dv == D) atomicMin(&sh.term, v);
            } else if (dv <= D && p.priv[i] < INF64 && dv + clip0(p.priv[i] - (s.acost[i] + s.price[v])) == D) {
                atomicMin(&sh.term, N + i);
            }
        } else {
            const int a = s.assigned[v];
            if (a == PRIVATE) {
                if (dv == D) atomicMin(&sh.term, v);
            } else if (a >= 0 && dv <= D && dv + s.price[a] == D) {
                atomicMin(&sh.term, N + a);
            }
        }
    }
    __syncthreads();
    // the path, from the terminal back to the source (warp 0): rows and their new columns (PRIVATE) or,
    // reverse, rows and the columns that take them; a reverse terminal column is recorded as (-1, column)
    if (sh.term == FIN_NONE) {  // (never: D was offered by a labelled node or the source)
        if (tid == 0) sh.err = 1;
        __syncthreads();
        return;
    }
    if (warp == 0) {
        // forward: (row, its new column or PRIVATE); reverse: (row, the column that takes it), and a terminal
        // column left unmatched as (-1, column). Next node: the partner's old column (forward) / row (reverse).
        int np = 0;
        const int t = sh.term;
        int v = t;  // the node whose predecessor is wanted next; -1: done
        if (t >= N) {  // a terminal partner: forward, a row's private option; reverse, a column left at price 0
            const int x = t - N;
            if (lane == 0) {
                s.prow[0] = FWD ? x : -1;
                s.ptarget[0] = FWD ? PRIVATE : x;
            }
            np = 1;
            v = x == src ? -1 : (FWD ? s.assigned[x] : s.owner[x]);
        }
        while (v >= 0) {
            i64 c;
            const int x = fin_pred<FWD>(p, s, sh, src, v, c, lane);
            if (x == FIN_NONE) {
                if (lane == 0) sh.err = 1;
                break;
            }
            if (lane == 0) {
                s.prow[np] = FWD ? x : v;
                s.ptarget[np] = FWD ? v : x;
                s.pcost[np] = c;
            }
            ++np;
            v = x == src ? -1 : (FWD ? s.assigned[x] : s.owner[x]);
        }
        if (lane == 0) sh.npath = np;
    }
    __syncthreads();
    if (sh.err) return;
    // prices (forward) / the rows' new values (reverse, kept in dist) before the path changes owners
    for (int t = tid; t < nt; t += blockDim.x) {
        const int v = s.touched[t];
        const i64 dv = s.dist[v];
        if (FWD) {
            if (dv < D) s.price[v] += D - dv;
            s.dist[v] = INF64;
        } else {
            s.dist[v] = fin_own(p, s, v) - (dv < D ? D - dv : 0);
        }
    }
    __syncthreads();
    const int np = sh.npath;
    for (int k = tid; k < np; k += blockDim.x) {
        const int i = s.prow[k], target = s.ptarget[k];
        if (i < 0) {  // reverse: the terminal column, left unmatched at price 0
            s.owner[target] = FREE;
            s.price[target] = 0;
        } else if (target == PRIVATE) {
            s.assigned[i] = PRIVATE;
            s.acost[i] = p.priv[i];
        } else {
            s.assigned[i] = target;
            s.acost[i] = s.pcost[k];
            s.owner[target] = i;
        }
    }
    __syncthreads();
    if (!FWD) {
        for (int t = tid; t < nt; t += blockDim.x) {
            const int v = s.touched[t];
            const int a = s.assigned[v];
            if (a >= 0) s.price[a] = s.dist[v] - s.acost[v];
            s.dist[v] = INF64;
        }
        if (tid == 0 && s.owner[src] < 0) s.price[src] = 0;  // the source stays unmatched (D == its best)
    }
    __syncthreads();
}

// Settle the `count` entries of `list` one search each (block 0). Forward: free rows; reverse: stale
// columns (skipped when already matched or at price 0).
template <bool FWD>
__device__ void fin_stage(const Prob& p, const State& s, const int* list, int count) {
    __shared__ FinShared sh;
    if (threadIdx.x == 0) sh.err = 0;
    __syncthreads();
    for (int t = 0; t < count; ++t) {
        const int src = list[t];
        if (!FWD && (s.owner[src] >= 0 || s.price[src] <= 0)) continue;
        if (FWD && s.assigned[src] != FREE) continue;
        fin_one<FWD>(p, s, sh, src);
        if (threadIdx.x == 0) s.counts[FWD ? C_FLAB : C_RLAB] += sh.ntouched;
        if (sh.err) break;
    }
    if (threadIdx.x == 0) {
        if (sh.err) atomicExch(&s.counts[C_ERROR], 1);
        s.counts[FWD ? C_FPATH : C_RPATH] += count;
    }
    __syncthreads();
}
