// Forward/reverse auction with epsilon-scaling for the ASYMMETRIC assignment problem (Bertsekas & Castanon
// 1992) on the GPU: every row is matched, to one of its columns or to its private "no link" option; columns
// may stay unmatched. Driver and algorithm notes: gated_auction.py. Costs are int64 (>= 0, mapped there).
//
// Rows 0..n-1 (CSR: indptr, cols, cost), real columns 0..m-1 (CSC of the same edges: cptr, crows, ccost),
// and priv[i], the cost of row i's private option (INF64: none). The private option's price is always 0
// (only its row can take it), so it is not a column here: assigned[i] == PRIVATE.
//
// One epsilon phase is ONE cooperative launch (ga_phase):
//   1. init: every row whose assigned option is more than eps above its best is released (its column is
//      remembered in `freed`);
//   2. forward auction (Jacobi rounds, grid-wide barriers) while more than `small` rows are unassigned,
//      then block 0 alone (block barriers; Gauss-Seidel, one warp, once <= GS_ROWS rows are left). A bid
//      raises the column's price by max(gap, eps) (gap = second best - best), any increment in
//      [eps, gap + eps] keeps eps-complementary slackness (eps-CS); this one leaves the winner tight (its
//      column exactly at its second best) whenever gap >= eps, so few rows are released by the next phase;
//   3. stale columns: freed columns nobody took back whose price is > 0 (optimality asks price 0 of an
//      unmatched column);
//   4. reverse auction for them (same round structure): a stale column j looks at its rows i, with
//      beta_i = (value of i's assigned option) - cost[i, j]; if beta_1 <= eps its price drops to 0 and it
//      stays unmatched; otherwise it takes row i* (beta_1) at price max(0, beta_2 - eps), and the column
//      i* leaves becomes stale if its price is > 0. Reverse bids keep eps-CS and never unassign a row.
// In both stages, once block 0 has the last bidders (and then every gu_rounds of its rounds), a global price
// update (global_update, below) moves every price at once by its shortest distance to an exit; it keeps
// eps-CS, so it may run at any point of a stage.
// At the end of every phase all rows are assigned, eps-CS holds and unmatched columns have price 0: the
// assignment is within n * eps of the optimum.
//
// Conflicts in a Jacobi round: forward, the highest bid for a column wins (atomicMax), reverse, the lowest
// resulting value for a row (atomicMin); among equal offers the lowest index (nominate, then claim), and the
// Gauss-Seidel tail takes its bidders by index: the same input gives the same assignment on every run, tied
// costs included.

#include <cooperative_groups.h>

// The square auction's best-two search (insert_best_two, warp_best_two) and warp_append.
#include "auction.cuh"

namespace cg = cooperative_groups;

typedef unsigned long long u64;

#define INF64 0x3fffffffffffffffLL
#define UINF64 0xffffffffffffffffULL
#define FREE (-1)
#define PRIVATE (-2)
#define NO_COL 0x7fffffff  // the private option's "column" in comparisons: real columns win ties
#define GS_MAX 64          // capacity of the Gauss-Seidel queue (shared memory)
#define MAX_THREADS 1024  // blocks of 256 (4 per SM) or 1024 threads (1 per SM): gated_auction.THREADS

// counts[] slots (int32), read by gated_auction.py
#define C_LIST0 0
#define C_LIST1 1
#define C_FREED 2
#define C_ERROR 3
#define C_FWD 4
#define C_REV 5
#define C_RELEASED 6
#define C_STALE 7
#define C_FPATH 8   // forward shortest-path searches (the finisher)
#define C_RPATH 9   // reverse shortest-path searches
#define C_FGRID 10  // forward rounds run grid-wide (the rest ran in block 0)
#define C_RGRID 11  // reverse rounds run grid-wide
#define C_FLAB 12   // nodes labelled by the forward searches (summed)
#define C_RLAB 13   // nodes labelled by the reverse searches
#define C_GUPD 14   // global price updates (forward)
#define C_GURND 15  // their label-correcting rounds
#define C_GF 16     // 16, 17, 18: the three rotating frontier counts of a global update
#define C_PARITY 19 // block 0's list parity and rounds, for the grid after a stretch of block rounds
#define C_BROUNDS 20
#define C_TSTAGE 21 // microseconds of the stages (thread 0's GPU clock), of which global updates and block 0's
#define C_TGU 22    // stretches of rounds (the rest: grid-wide rounds)
#define C_TBLOCK 23
#define C_SLACK 24  // 24, 25 (one u64, little-endian): the init's largest own value - best value of a row
#define N_COUNTS 26

struct Prob {
    int n, m;
    const i64* indptr;
    const int* cols;
    const i64* cost;
    const i64* cptr;
    const int* crows;
    const i64* ccost;
    const i64* priv;
    i64 single_gap;  // (second - best) of a row with one option
};

// The phase's state, carved from two workspaces (the same layout as gated_auction.py's _Workspace).
struct State {
    i64 *price, *acost, *bid, *tcost, *rval, *rnewp, *rcost;
    u64 *col_bid, *row_bid;
    int *owner, *assigned, *list0, *list1, *freed, *target, *winner, *rtarget, *row_winner, *counts;
    // the shortest-path finisher (gated_finish.cuh): labels (INF64 at rest), round of the last lowering,
    // frontier flags (-1 at rest), labelled nodes, two frontiers, the path found (rows, targets, costs)
    i64 *dist, *pcost;
    int *lround, *inq, *touched, *front0, *front1, *prow, *ptarget;
};

__device__ __forceinline__ State carve(i64* ws64, int* ws32, int n, int m) {
    const int L = n > m ? n : m;
    State s;
    s.price = ws64;
    s.acost = s.price + m;
    s.bid = s.acost + n;
    s.tcost = s.bid + n;
    s.rval = s.tcost + n;
    s.rnewp = s.rval + m;
    s.rcost = s.rnewp + m;
    s.col_bid = (u64*)(s.rcost + m);
    s.row_bid = s.col_bid + m;
    s.counts = ws32;
    s.owner = s.counts + N_COUNTS;
    s.assigned = s.owner + m;
    s.list0 = s.assigned + n;
    s.list1 = s.list0 + L;
    s.freed = s.list1 + L;
    s.target = s.freed + n;
    s.winner = s.target + n;
    s.rtarget = s.winner + m;
    s.row_winner = s.rtarget + m;
    s.dist = (i64*)(s.row_bid + n);
    s.pcost = s.dist + L;
    s.lround = s.row_winner + n;
    s.inq = s.lround + L;
    s.touched = s.inq + L;
    s.front0 = s.touched + L;
    s.front1 = s.front0 + L;
    s.prow = s.front1 + L;
    s.ptarget = s.prow + L + 1;
    return s;
}

// ------------------------------------------------------------------ best two ---

// Best (b1, its column j1; NO_COL = the private option) and second-best value of row i over cost + price;
// every lane of the warp gets the result.
__device__ __forceinline__ void row_best(const Prob& p, const i64* price, int i, int lane, i64& b1, int& j1,
                                         i64& b2) {
    b1 = INF64;
    b2 = INF64;
    j1 = NO_COL;
    const i64 end = p.indptr[i + 1];
    for (i64 k = p.indptr[i] + lane; k < end; k += 32) {
        const int j = p.cols[k];
        insert_best_two(p.cost[k] + price[j], j, b1, j1, b2);
    }
    if (lane == 0 && p.priv[i] < INF64) insert_best_two(p.priv[i], NO_COL, b1, j1, b2);
    warp_best_two(b1, j1, b2);
}

// Value of row i's assigned option (INF64 when unassigned).
__device__ __forceinline__ i64 own_value(const Prob& p, const State& s, int i) {
    const int a = s.assigned[i];
    if (a == PRIVATE) return p.priv[i];
    return a >= 0 ? s.acost[i] + s.price[a] : INF64;
}

// Reverse: the rows of column j by beta = own value - cost, largest first (ties: the lower row); also the
// cost of (i1, j). Every lane gets the result. b1 = -INF64 when the column has no row.
__device__ __forceinline__ void col_best(const Prob& p, const State& s, int j, int lane, i64& b1, int& i1,
                                         i64& c1, i64& b2) {
    b1 = -INF64;
    b2 = -INF64;
    i1 = 0x7fffffff;
    c1 = 0;
    const i64 end = p.cptr[j + 1];
    for (i64 q = p.cptr[j] + lane; q < end; q += 32) {
        const int i = p.crows[q];
        const i64 c = p.ccost[q];
        const i64 own = own_value(p, s, i);
        if (own >= INF64) continue;  // (never: every row is assigned when columns bid)
        const i64 beta = own - c;
        if (beta > b1 || (beta == b1 && i < i1)) {
            b2 = b1;
            b1 = beta;
            i1 = i;
            c1 = c;
        } else if (beta > b2) {
            b2 = beta;
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const i64 o1 = __shfl_xor_sync(0xffffffffu, b1, off), o2 = __shfl_xor_sync(0xffffffffu, b2, off);
        const i64 oc = __shfl_xor_sync(0xffffffffu, c1, off);
        const int oi = __shfl_xor_sync(0xffffffffu, i1, off);
        if (o1 > b1 || (o1 == b1 && oi < i1)) {
            b2 = max(b1, o2);
            b1 = o1;
            i1 = oi;
            c1 = oc;
        } else {
            b2 = max(b2, o1);
        }
    }
}

// ----------------------------------------------------------------- forward ---

// Warps w, w + nwarps, ... bid for the listed rows. A row whose best option is its private one takes it.
__device__ void fwd_bid(const Prob& p, const State& s, const int* list, int count, i64 eps, int warp, int nwarps,
                        int lane) {
    for (int t = warp; t < count; t += nwarps) {
        const int i = list[t];
        i64 b1, b2;
        int j1;
        row_best(p, s.price, i, lane, b1, j1, b2);
        if (lane != 0) continue;
        if (b1 >= INF64) {  // a row without options (gated_auction.py prevents this)
            atomicExch(&s.counts[C_ERROR], 1);
            s.target[i] = -1;
        } else if (j1 == NO_COL) {
            s.assigned[i] = PRIVATE;
            s.acost[i] = p.priv[i];
            s.target[i] = -1;
        } else {
            const i64 gap = b2 >= INF64 ? p.single_gap : b2 - b1;
            const i64 b = s.price[j1] + max(gap, eps);
            s.target[i] = j1;
            s.bid[i] = b;
            s.tcost[i] = b1 - s.price[j1];
            atomicMax(&s.col_bid[j1], (u64)b);
        }
    }
}

// ----------------------------------------------------------------- reverse ---

__device__ void rev_bid(const Prob& p, const State& s, const int* list, int count, i64 eps, int warp, int nwarps,
                        int lane) {
    for (int t = warp; t < count; t += nwarps) {
        const int j = list[t];
        i64 b1, c1, b2;
        int i1;
        col_best(p, s, j, lane, b1, i1, c1, b2);
        if (lane != 0) continue;
        if (b1 <= eps) {  // no row gains more than eps from it even at price 0 (or it has no row)
            s.price[j] = 0;
            s.rtarget[j] = -1;
        } else {
            const i64 newp = (b2 <= -INF64 || b2 - eps <= 0) ? 0 : b2 - eps;
            const i64 val = c1 + newp;
            s.rtarget[j] = i1;
            s.rval[j] = val;
            s.rnewp[j] = newp;
            s.rcost[j] = c1;
            atomicMin(&s.row_bid[i1], (u64)val);
        }
    }
}

// ------------------------------------------------------- claims (both ways) ---

// The conflicts of a Jacobi round, in two steps with a barrier between them. nominate: every listed entry whose
// offer is its target's best (forward: the highest bid for a column; reverse: the lowest resulting value for a
// row) puts itself forward, and the LOWEST index among equal best offers is kept (atomicMax of `bound - x`, the
// winner at rest being -1): which of several equal offers wins no longer depends on the order of the atomics,
// so tied costs give the same assignment on every run. claim: the nominated entry takes its target (forward:
// the column's owner is evicted; reverse: the column the row leaves is stale again if its price is > 0) and
// puts the target's best offer and winner back at rest (forward: 0 and -1; reverse: UINF64 and -1) for the next
// round; the others, and the evicted, are listed for the next round. (A loser that reads the winner after
// that reset sees -1, never its own `bound - x`: it loses all the same; no barrier is needed for the reset.)
// One thread per listed entry; the loop is warp-uniform (warp_append uses full masks).
template <bool FWD>
__device__ void nominate(const State& s, const int* list, int count, int bound, int tid, int nthreads) {
    const int* target = FWD ? s.target : s.rtarget;
    const i64* offer = FWD ? s.bid : s.rval;
    const u64* best = FWD ? s.col_bid : s.row_bid;
    int* winner = FWD ? s.winner : s.row_winner;
    for (int t = tid; t < count; t += nthreads) {
        const int x = list[t];
        const int y = target[x];
        if (y >= 0 && (u64)offer[x] == best[y]) atomicMax(&winner[y], bound - x);
    }
}

template <bool FWD>
__device__ void claim(const State& s, const int* list, int count, int* next, int* next_count, int bound, int tid,
                      int nthreads) {
    const int* target = FWD ? s.target : s.rtarget;
    int* winner = FWD ? s.winner : s.row_winner;
    u64* best = FWD ? s.col_bid : s.row_bid;
    const int lane = threadIdx.x & 31;
    for (int base = tid - lane; base < count; base += nthreads) {
        const int t = base + lane;
        bool push_self = false, push_old = false;
        int x = -1, old = -1;
        if (t < count) {
            x = list[t];
            const int y = target[x];
            if (y >= 0) {
                if (*(volatile int*)&winner[y] == bound - x) {
                    best[y] = FWD ? 0 : UINF64;  // (the offers were all read by nominate, before a barrier)
                    winner[y] = -1;
                    const int i = FWD ? x : y, j = FWD ? y : x;
                    old = FWD ? s.owner[j] : s.assigned[i];
                    s.owner[j] = i;
                    s.assigned[i] = j;
                    s.price[j] = FWD ? s.bid[i] : s.rnewp[j];
                    s.acost[i] = FWD ? s.tcost[i] : s.rcost[j];
                    if (old >= 0) {
                        if (FWD) s.assigned[old] = FREE;
                        else s.owner[old] = FREE;
                        push_old = FWD || s.price[old] > 0;
                    }
                } else {
                    push_self = true;
                }
            }
        }
        warp_append(push_self, x, next, next_count, lane);
        warp_append(push_old, old, next, next_count, lane);
    }
}

// One Gauss-Seidel bid with the latest prices (warp 0; every lane gets the result): forward, row i takes
// its best column (or its private option) and raises the price by max(gap, eps); reverse, stale column j
// takes its best row at price max(0, beta_2 - eps) or drops to price 0. Returns the entry to queue next (the
// evicted row; the column left stale), or -1.
template <bool FWD>
__device__ int gauss_seidel_bid(const Prob& p, const State& s, int x, i64 eps, int lane) {
    int next = -1;
    if (FWD) {
        i64 b1, b2;
        int j1;
        row_best(p, s.price, x, lane, b1, j1, b2);
        if (lane == 0) {
            if (b1 >= INF64) {
                atomicExch(&s.counts[C_ERROR], 1);
            } else if (j1 == NO_COL) {
                s.assigned[x] = PRIVATE;
                s.acost[x] = p.priv[x];
            } else {
                const i64 gap = b2 >= INF64 ? p.single_gap : b2 - b1;
                s.acost[x] = b1 - s.price[j1];
                s.price[j1] += max(gap, eps);
                next = s.owner[j1];
                s.owner[j1] = x;
                s.assigned[x] = j1;
                if (next >= 0) s.assigned[next] = FREE;
            }
        }
    } else {
        i64 b1, c1, b2;
        int i1;
        col_best(p, s, x, lane, b1, i1, c1, b2);
        if (lane == 0) {
            if (b1 <= eps) {
                s.price[x] = 0;
            } else {
                const i64 newp = (b2 <= -INF64 || b2 - eps <= 0) ? 0 : b2 - eps;
                const int old = s.assigned[i1];
                s.assigned[i1] = x;
                s.acost[i1] = c1;
                s.owner[x] = i1;
                s.price[x] = newp;
                if (old >= 0) {
                    s.owner[old] = FREE;
                    if (s.price[old] > 0) next = old;
                }
            }
        }
    }
    return __shfl_sync(0xffffffffu, next, 0);
}

// Gauss-Seidel rounds (warp 0 of block 0, at most GS_MAX entries listed): one bid at a time with the latest
// prices. Returns the rounds done; entries still queued (max_rounds reached) go back to the list.
template <bool FWD>
__device__ int gauss_seidel(const Prob& p, const State& s, int* list, int* count, i64 eps, int it,
                            int max_rounds) {
    __shared__ int queue[GS_MAX];
    const int lane = threadIdx.x & 31;
    int n_queued = *(volatile int*)count;
    load_queue_by_index(queue, list, n_queued, lane);  // (auction.cuh)
    int head = 0;
    while (n_queued > 0 && it < max_rounds) {
        const int next = gauss_seidel_bid<FWD>(p, s, queue[head], eps, lane);
        head = (head + 1) % GS_MAX;
        --n_queued;
        if (next >= 0) {
            if (lane == 0) queue[(head + n_queued) % GS_MAX] = next;
            ++n_queued;
        }
        __syncwarp();
        ++it;
        if (*(volatile int*)&s.counts[C_ERROR]) break;
    }
    for (int t = lane; t < n_queued; t += 32) list[t] = queue[(head + t) % GS_MAX];
    if (lane == 0) *count = n_queued;
    return it;
}

#include "gated_finish.cuh"

// ------------------------------------------------------------------- phase ---

#define PROB_ARGS                                                                                         \
    int n_, int m_, const i64 *indptr_, const int *cols_, const i64 *cost_, const i64 *cptr_,             \
        const int *crows_, const i64 *ccost_, const i64 *priv_, i64 single_gap_
#define MAKE_PROB                                                                                         \
    Prob p;                                                                                               \
    p.n = n_;                                                                                             \
    p.m = m_;                                                                                             \
    p.indptr = indptr_;                                                                                   \
    p.cols = cols_;                                                                                       \
    p.cost = cost_;                                                                                       \
    p.cptr = cptr_;                                                                                       \
    p.crows = crows_;                                                                                     \
    p.ccost = ccost_;                                                                                     \
    p.priv = priv_;                                                                                       \
    p.single_gap = single_gap_

// ------------------------------------------------------------ global update ---

// Global price update (the global update of Goldberg & Kennedy's cost scaling, in auction terms). With
// generous gates a free row's eviction chain must lift the prices of a whole crowd of columns before it
// reaches an exit, one bid of about eps each: tens of thousands of rounds with a handful of bidders (and the
// reverse stage's stale columns must bring a crowd's prices down likewise). Instead, in one grid-wide search:
//
// Forward (FWD): every column v gets dist(v), the shortest path (on the clipped reduced costs r+ = max(cost +
// price - own, 0)) from v through its owner's other columns to an exit: 0 for a free column, max(priv_i -
// own_i, 0) via owner i's private option. Then price[v] += dist(v). eps-CS survives: for row i on v and any
// column k of i, dist(v) <= r+(i, k) + dist(k), so the new reduced cost r + dist(k) - dist(v) >= r - r+ >=
// -eps; i's private option stays within reach (dist(v) <= priv_i - own_i when that is >= 0).
// Reverse (every row assigned): every row x gets dist(x), the shortest path from x through the other rows of
// its column to an exit: 0 for a row on its private option, price[c] for x's column c left unmatched at
// price 0. Then x's value, and c's price, fall by dist(x) (prices stay >= 0). For row y on k and a column c
// of x, dist(y) <= r+(x, c) + dist(x): the mirror argument.
//
// cap (> 0): labels are min(dist, cap) (any cap keeps eps-CS: min(dist(v), cap) <= r+ + min(dist(k), cap));
// labels at the cap are not propagated, so the search stays near the exits. Label-correcting rounds over a
// frontier (warp per node, its edges by the CSC forward, the CSR reverse), grid-wide; the labels live in the
// finisher's dist/inq/front arrays (left at rest: INF64 / -1). (Small frontiers in block 0 alone, block
// barriers instead of grid ones, were tried: no gain on the H100, lap_generous_h100.md.)

// One label-correcting round of a global update over the frontier of `round` (warps w, w + nwarps, ...):
// every edge out of a frontier node that lowers its target's label below the cap lowers it and lists the
// target (once) in the next frontier; but one lowered target per node goes on in the same warp, up to `hops`
// nodes a chain: the labels travel along the long chains of small reduced costs without waiting for a
// barrier at each hop (label-correcting converges to the same labels in any order: a node lowered again
// later is listed again by whoever lowers it). `leader` resets the count that the round after next appends to.
template <bool FWD>
__device__ __forceinline__ void relax_frontier(const Prob& p, const State& s, i64 cap, int hops, int round,
                                               int warp, int nwarps, int lane, bool leader) {
    const i64* ptr = FWD ? p.cptr : p.indptr;
    const int* other = FWD ? p.crows : p.cols;
    const i64* edge = FWD ? p.ccost : p.cost;
    const int cnt = *(volatile int*)&s.counts[C_GF + round % 3];
    const int* cur = (round & 1) ? s.front1 : s.front0;
    int* nxt = (round & 1) ? s.front0 : s.front1;
    int* nxt_count = &s.counts[C_GF + (round + 1) % 3];
    if (leader) s.counts[C_GF + (round + 2) % 3] = 0;  // read last round, appended to next round
    for (int t = warp; t < cnt; t += nwarps) {
        int k = cur[t];
        for (int hop = 1;; ++hop) {
            const i64 dk = *(volatile i64*)&s.dist[k];
            const i64 base = FWD ? s.price[k] : -own_value(p, s, k);
            const i64 end = ptr[k + 1];
            int chain = -1;  // this lane's first lowered target (the chain's candidate)
            for (i64 q = ptr[k] + lane; q < end; q += 32) {
                // forward: row x of column k, its column v; reverse: column x of row k, its owner v
                const int x = other[q];
                const int v = FWD ? s.assigned[x] : s.owner[x];
                if (v < 0 || v == k) continue;
                const i64 r = FWD ? edge[q] + base - (s.acost[x] + s.price[v]) : edge[q] + s.price[x] + base;
                const i64 nd = dk + clip0(r);
                if (nd < cap && nd < *(volatile i64*)&s.dist[v]) {
                    const i64 old = atomicMin((long long*)&s.dist[v], (long long)nd);
                    if (nd < old) {
                        if (chain < 0 && hop < hops) chain = v;
                        else if (atomicExch(&s.inq[v], round) != round) nxt[atomicAdd(nxt_count, 1)] = v;
                    }
                }
            }
            const unsigned lowered = __ballot_sync(0xffffffffu, chain >= 0);
            if (!lowered) break;
            const int first = __ffs(lowered) - 1;  // goes on here; the other lanes list theirs
            if (chain >= 0 && lane != first && atomicExch(&s.inq[chain], round) != round) {
                nxt[atomicAdd(nxt_count, 1)] = chain;
            }
            k = __shfl_sync(0xffffffffu, chain, first);
        }
    }
}

template <bool FWD>
__device__ void global_update(cg::grid_group& g, const Prob& p, const State& s, i64 cap, int hops) {
    const int gtid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, gwarp = gtid >> 5, nwarps = nthreads >> 5;
    const int N = FWD ? p.m : p.n;
    for (int v = gtid; v < N; v += nthreads) {
        i64 d = INF64;
        if (FWD) {
            const int i = s.owner[v];
            if (i < 0) d = 0;
            else if (p.priv[i] < INF64) d = clip0(p.priv[i] - (s.acost[i] + s.price[v]));
        } else {
            const int a = s.assigned[v];
            if (a == PRIVATE) d = 0;
            else if (a >= 0) d = s.price[a];
        }
        d = d < cap ? d : cap;
        if (d < INF64) s.dist[v] = d;
        if (d < cap) s.front0[atomicAdd(&s.counts[C_GF], 1)] = v;
    }
    g.sync();
    int round = 0;
    while (*(volatile int*)&s.counts[C_GF + round % 3] > 0) {
        relax_frontier<FWD>(p, s, cap, hops, round, gwarp, nwarps, lane, gtid == 0);
        g.sync();
        ++round;
    }
    for (int v = gtid; v < N; v += nthreads) {
        const i64 d = s.dist[v];
        if (d > 0 && d < INF64) {
            if (FWD && s.owner[v] >= 0) s.price[v] += d;
            if (!FWD && s.assigned[v] >= 0) s.price[s.assigned[v]] -= d;
        }
        s.dist[v] = INF64;
        s.inq[v] = -1;
    }
    if (gtid == 0) {
        s.counts[C_GUPD] += 1;
        s.counts[C_GURND] += round;
        s.counts[C_GF] = 0;
        s.counts[C_GF + 1] = 0;
        s.counts[C_GF + 2] = 0;
    }
    g.sync();
}

// Rounds of one stage in block 0 alone (block barriers; Gauss-Seidel, one warp, once <= gs_rows are left;
// shortest augmenting paths for the last `finish`), until none is left or `limit` rounds were run.
template <bool FORWARD>
__device__ void block_rounds(const Prob& p, const State& s, i64 eps, int gs_rows, int finish, int limit,
                             int& parity, int& rounds) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const int bound = FORWARD ? p.n : p.m;  // (nominate: above every listed index)
    while (rounds < limit) {
        const int count = *(volatile int*)&s.counts[parity];
        if (count == 0 || *(volatile int*)&s.counts[C_ERROR]) break;
        int* cur = parity ? s.list1 : s.list0;
        int* nxt = parity ? s.list0 : s.list1;
        if (count <= finish) {  // shortest augmenting paths for the last few (gated_finish.cuh)
            __syncthreads();
            fin_stage<FORWARD>(p, s, cur, count);
            if (tid == 0) s.counts[parity] = 0;
            __syncthreads();
            break;
        }
        if (count <= gs_rows) {
            if (warp == 0) {
                rounds = gauss_seidel<FORWARD>(p, s, cur, &s.counts[parity], eps, rounds, limit);
            }
            __syncthreads();  // (only thread 0's `rounds` is read after this: the others' is stale)
            break;
        }
        __syncthreads();  // every thread has read count before it is reset below (parity swaps)
        if (tid == 0) s.counts[1 - parity] = 0;
        if (FORWARD) fwd_bid(p, s, cur, count, eps, warp, nw, lane);
        else rev_bid(p, s, cur, count, eps, warp, nw, lane);
        __syncthreads();
        nominate<FORWARD>(s, cur, count, bound, tid, blockDim.x);
        __syncthreads();
        claim<FORWARD>(s, cur, count, nxt, &s.counts[1 - parity], bound, tid, blockDim.x);
        __syncthreads();
        parity ^= 1;
        ++rounds;
    }
}

// The GPU clock (ns), for the counters of where a stage spent its time.
__device__ __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Rounds of one stage (forward: rows; reverse: columns) on the lists by parity: grid-wide while more than
// `small` entries are listed, then block 0 alone. With gu_rounds > 0 (and tail): a global price update
// (global_update) each time the grid hands over to block 0, and again after every gu_rounds block rounds;
// with gu_grid > 0, also after every gu_grid grid rounds. counts[stat] accumulates the rounds.
template <bool FORWARD>
__device__ void stage(cg::grid_group& g, const Prob& p, const State& s, i64 eps, int small, int gs_rows,
                      int finish, int tail, int max_rounds, int gu_rounds, i64 gu_cap, int gu_hops, int gu_grid,
                      int stat) {
    const int gtid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, gwarp = gtid >> 5, nwarps = nthreads >> 5;
    int parity = 0, rounds = 0, grid_rounds = 0;
    const int bound = FORWARD ? p.n : p.m;  // (nominate: above every listed index)
    const u64 t_stage = gtid == 0 ? now_ns() : 0;  // (thread 0's clocks, for the counters)
    u64 t_gu = 0, t_block = 0, t0 = 0;
    while (true) {
        while (true) {
            const int count = *(volatile int*)&s.counts[parity];
            if (count <= small || rounds >= max_rounds || *(volatile int*)&s.counts[C_ERROR]) break;
            int* cur = parity ? s.list1 : s.list0;
            int* nxt = parity ? s.list0 : s.list1;
            if (gtid == 0) s.counts[1 - parity] = 0;
            if (FORWARD) fwd_bid(p, s, cur, count, eps, gwarp, nwarps, lane);
            else rev_bid(p, s, cur, count, eps, gwarp, nwarps, lane);
            g.sync();
            nominate<FORWARD>(s, cur, count, bound, gtid, nthreads);
            g.sync();
            claim<FORWARD>(s, cur, count, nxt, &s.counts[1 - parity], bound, gtid, nthreads);
            g.sync();
            parity ^= 1;
            ++rounds;
            ++grid_rounds;
            // with many bidders for many rounds (the price wars of large instances), updates in the grid too
            if (gu_grid > 0 && tail && grid_rounds % gu_grid == 0 && *(volatile int*)&s.counts[parity] > 0) {
                if (gtid == 0) t0 = now_ns();
                global_update<FORWARD>(g, p, s, gu_cap, gu_hops);
                if (gtid == 0) t_gu += now_ns() - t0;
            }
        }
        if (gu_rounds <= 0 || !tail) break;
        const int count = *(volatile int*)&s.counts[parity];
        if (count == 0 || rounds >= max_rounds || *(volatile int*)&s.counts[C_ERROR]) break;
        if (gtid == 0) t0 = now_ns();
        global_update<FORWARD>(g, p, s, gu_cap, gu_hops);
        if (gtid == 0) t_gu += now_ns() - t0;
        if (blockIdx.x == 0) {
            const int limit = rounds + gu_rounds < max_rounds ? rounds + gu_rounds : max_rounds;
            if (threadIdx.x == 0) {
                s.counts[C_BROUNDS] = rounds;
                t0 = now_ns();
            }
            __syncthreads();
            block_rounds<FORWARD>(p, s, eps, gs_rows, finish, limit, parity, rounds);
            __syncthreads();
            if (threadIdx.x == 0) {
                t_block += now_ns() - t0;
                s.counts[C_PARITY] = parity;
                s.counts[C_BROUNDS] = rounds;
            }
        }
        g.sync();
        parity = *(volatile int*)&s.counts[C_PARITY];
        rounds = *(volatile int*)&s.counts[C_BROUNDS];
        g.sync();  // every block has read them before block 0 writes them again
    }
    if (blockIdx.x == 0) {  // the rest of the stage in one block
        if (threadIdx.x == 0) {
            s.counts[C_BROUNDS] = rounds;
            t0 = now_ns();
        }
        __syncthreads();
        if (tail) block_rounds<FORWARD>(p, s, eps, gs_rows, finish, max_rounds, parity, rounds);
        if (threadIdx.x == 0) {
            const u64 t_end = now_ns();
            s.counts[C_TSTAGE] += (int)((t_end - t_stage) / 1000);
            s.counts[C_TGU] += (int)(t_gu / 1000);
            s.counts[C_TBLOCK] += (int)((t_block + t_end - t0) / 1000);
            s.counts[FORWARD ? C_FGRID : C_RGRID] += grid_rounds;
            s.counts[stat] += rounds;
            if (tail && *(volatile int*)&s.counts[parity] > 0) atomicExch(&s.counts[C_ERROR], 2);  // round cap
            s.counts[C_LIST0] = 0;  // the next stage starts on list 0
            s.counts[C_LIST1] = 0;
        }
    }
}

// One epsilon phase (see the top of the file). first: all rows start unassigned at the current prices (no
// init, no reverse stage: no column was ever freed); else init releases the rows that violate eps-CS.
// max_rounds caps each stage (counts[C_ERROR] = 2 when reached, rows may then be left unassigned).
// tail = 0 (the phases before the last): each stage stops once at most `small` bidders are left; the rows
// stay free and the columns stale into the next phase (only the last phase must end complete; its init
// lists the free rows, its reverse stage every unmatched column above price 0). tail = 1: the stage ends
// in block 0, with shortest augmenting paths for its last `finish` bidders.
extern "C" __global__ void __launch_bounds__(MAX_THREADS, 1)
    ga_phase(PROB_ARGS, i64* ws64, int* ws32, i64 eps, int first, int small, int gs_rows, int finish,
             int tail, int max_rounds, int gu_rounds, i64 gu_cap, int gu_reverse, int gu_grid, int gu_hops) {
    MAKE_PROB;
    cg::grid_group g = cg::this_grid();
    const State s = carve(ws64, ws32, n_, m_);
    const int gtid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, gwarp = gtid >> 5, nwarps = nthreads >> 5;
    if (first) {
        for (int i = gtid; i < p.n; i += nthreads) {
            if (s.assigned[i] == FREE) s.list0[atomicAdd(&s.counts[C_LIST0], 1)] = i;
        }
    } else {
        i64 slack = 0;  // (lane 0's: how far from eps-CS the rows are, for the driver to skip idle phases)
        for (int i = gwarp; i < p.n; i += nwarps) {
            i64 b1, b2;
            int j1;
            row_best(p, s.price, i, lane, b1, j1, b2);
            if (lane == 0) {
                const i64 own = own_value(p, s, i);
                slack = max(slack, own >= INF64 ? INF64 : own - b1);
                if (own > b1 + eps) {
                    const int a = s.assigned[i];
                    if (a >= 0) {
                        s.owner[a] = FREE;
                        s.freed[atomicAdd(&s.counts[C_FREED], 1)] = a;
                    }
                    s.assigned[i] = FREE;
                    s.list0[atomicAdd(&s.counts[C_LIST0], 1)] = i;
                    atomicAdd(&s.counts[C_RELEASED], 1);
                }
            }
        }
        if (lane == 0 && slack > 0) atomicMax((u64*)&s.counts[C_SLACK], (u64)slack);
    }
    g.sync();
    stage<true>(g, p, s, eps, small, gs_rows, finish, tail, max_rounds, gu_rounds, gu_cap, gu_hops, gu_grid,
                C_FWD);
    g.sync();
    if (first || s.counts[C_ERROR]) return;
    // stale columns: unmatched ones at a price above 0 (freed by this phase's init, or left by an earlier
    // phase that stopped early)
    for (int j = gtid; j < p.m; j += nthreads) {
        if (s.owner[j] == FREE && s.price[j] > 0) {
            s.list0[atomicAdd(&s.counts[C_LIST0], 1)] = j;
            atomicAdd(&s.counts[C_STALE], 1);
        }
    }
    g.sync();
    stage<false>(g, p, s, eps, small, gs_rows, finish, tail, max_rounds, gu_reverse ? gu_rounds : 0, gu_cap,
                 gu_hops, gu_reverse ? gu_grid : 0, C_REV);
}

// The CSR (CSC) offsets of edges sorted by row (column): ptr[k] = the first position whose key is k or more
// (ptr[size] = n_edges), key[order[e]] being the e-th smallest key. One thread per boundary between positions.
extern "C" __global__ void ga_offsets(const int* __restrict__ key, const i64* __restrict__ order, i64 n_edges,
                                      int size, i64* __restrict__ ptr) {
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e <= n_edges; e += (i64)gridDim.x * blockDim.x) {
        const int before = e == 0 ? -1 : key[order[e - 1]];
        const int here = e == n_edges ? size : key[order[e]];
        for (int k = before + 1; k <= here; ++k) ptr[k] = e;
    }
}
