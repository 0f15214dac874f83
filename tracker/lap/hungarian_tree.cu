// Alternating-tree Hungarian algorithm on the GPU (Date & Nagi 2016, Parallel Computing 57:52-72),
// with a single-block shortest-augmenting-path finisher (our change, see "Step 5" below).
//
// Conventions (all kernels): cost matrix C is row-major float64, n rows <= m columns, every entry
// finite (the Python side replaced +inf by a big-M, see tracker/lap/_gpu_common.py).
// Duals: u (rows), v (columns), float64. Reduced cost ("slack") of (i, j) = C[i,j] - u[i] - v[j] >= 0.
// Assignment: col4row[i] (A_r in the paper), row4col[j] (A_c); -1 = unassigned.
// Predecessors: Pr[i] (column through which row i entered the tree), Pc[j] (row that tightened column j).
// "Zero" slack means slack <= eps (eps = 0.5 for integer costs, where every dual stays an integer, or a
// small multiple of the cost scale for float costs; chosen in _gpu_common.zero_tolerance).
//
// Paper steps and where they live:
//   Alg. 1  initial reduction ............ row_min, col_min_partial, col_min_final
//   Alg. 2  optimality check ............. match count is kept on device (status[ST_MATCHED])
//   (ours)  greedy zero matching ......... greedy_propose / greedy_accept (rounds; the lowest row wins a column)
//   Alg. 4  forward pass (expansion) ..... tree_expand: one thread per column vertex, scans the frontier
//           forward pass (contraction) ... tree_contract: compacts the next frontier
//   Alg. 5  reverse pass + Alg. 6 augmentation ... tree_nominate, tree_augment (one thread per reached free
//           column; the race of Alg. 5 is replaced by a claim of the tree's root by its lowest free column, so
//           exactly one vertex-disjoint path per tree is flipped, the same one on every run)
//   Alg. 9  O(n) dual update ............. tree_dual_update (theta = min slack of unvisited columns)
//   Step 5a (ours): augmenting row reduction (Jonker & Volgenant) in parallel rounds ... arr_bid, arr_resolve,
//           arr_apply, arr_tail(_cluster): shrinks the set of free rows cheaply, keeping the duals exactly feasible.
//   Step 5 (ours): when the multi-tree phases stop paying (few augmentations per host round trip, the
//           typical case for float costs where each dual update makes one column tight), the remaining
//           free rows are finished by tree_sap_K*: ONE thread block grows the alternating tree of one
//           free row at a time in Dijkstra order (exactly Alg. 4 + Alg. 9 with a frontier of one row and
//           theta applied lazily as shortest-path distances), then does the reverse pass and augmentation,
//           all without leaving the kernel. This is the Jonker-Volgenant / Crouse shortest augmenting path
//           used by scipy, parallelised over columns.

#include "hungarian_common.cuh"

// status slots (int64), shared with hungarian_tree.py
#define ST_FRONTIER 0   // size of the current frontier after contraction
#define ST_REVERSE 1    // free columns reached in this phase
#define ST_AUGMENTED 2  // paths augmented by the last tree_augment
#define ST_ERROR 3      // 1: infeasible (theta = inf), 2: iteration cap hit in tree_sap
#define ST_STEPS 4      // tree_sap: Dijkstra steps taken (profiling)
#define ST_THETA_INF 5


// ---------------------------------------------------------------------------------------------
// Multi-tree phase (Date & Nagi Alg. 4, 5, 6, 9). Row state: 0 inactive, 1 active (frontier),
// 2 visited (in a tree, scanned), 3 active next (reached in this expansion).
// ---------------------------------------------------------------------------------------------

// Phase reset ("optimality check" of Alg. 2 is the host's count): free rows become the roots.
extern "C" __global__ void tree_reset(int n, int m, const int* __restrict__ col4row, int* __restrict__ row_state,
                                      int* __restrict__ Pr, int* __restrict__ claim, int* __restrict__ Pc,
                                      int* __restrict__ col_vis, double* __restrict__ slack,
                                      double* __restrict__ mag, int* __restrict__ frontier, long long* status) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t == 0) {
        status[ST_FRONTIER] = 0;
        status[ST_REVERSE] = 0;
        status[ST_AUGMENTED] = 0;
    }
    if (t < m) {
        slack[t] = INF_D;
        mag[t] = 0.0;
        Pc[t] = -1;
        col_vis[t] = 0;
    }
    if (t < n) {
        Pr[t] = -1;
        claim[t] = 0;
        row_state[t] = (col4row[t] == -1) ? 3 : 0;  // becomes the frontier in tree_contract
    }
}

// Alg. 4 expansion: one thread per column vertex traverses the frontier rows, keeps the minimum slack
// and its row (Pc; among equal slacks the lowest row, as the frontier's order comes from atomics); a column whose slack reaches zero joins the tree ("visited"); its assigned row
// becomes active for the next frontier, an unassigned one is a reverse-pass candidate.
extern "C" __global__ void tree_expand(const double* __restrict__ c, const double* __restrict__ u,
                                       const double* __restrict__ v, int n, int m, double eps, double eps_rel,
                                       const int* __restrict__ frontier, const long long* status_in,
                                       const int* __restrict__ row4col, int* __restrict__ row_state,
                                       int* __restrict__ Pr, int* __restrict__ Pc, int* __restrict__ col_vis,
                                       double* __restrict__ slack, double* __restrict__ mag, long long* status) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m || col_vis[j]) return;
    const int nf = (int)status_in[ST_FRONTIER];
    const double vj = v[j];
    double s = slack[j];
    int p = Pc[j];
    double mg = mag[j];
    int k = 0;
    for (; k + 4 <= nf; k += 4) {
        const int i0 = frontier[k], i1 = frontier[k + 1], i2 = frontier[k + 2], i3 = frontier[k + 3];
        const double c0 = c[(long long)i0 * m + j], c1 = c[(long long)i1 * m + j];
        const double c2 = c[(long long)i2 * m + j], c3 = c[(long long)i3 * m + j];
        const double u0 = u[i0], u1 = u[i1], u2 = u[i2], u3 = u[i3];
        const double r0 = c0 - u0 - vj, r1 = c1 - u1 - vj, r2 = c2 - u2 - vj, r3 = c3 - u3 - vj;
        if (r0 < s || (r0 == s && i0 < p)) { s = r0; p = i0; mg = fmax(fabs(c0), fabs(u0)); }
        if (r1 < s || (r1 == s && i1 < p)) { s = r1; p = i1; mg = fmax(fabs(c1), fabs(u1)); }
        if (r2 < s || (r2 == s && i2 < p)) { s = r2; p = i2; mg = fmax(fabs(c2), fabs(u2)); }
        if (r3 < s || (r3 == s && i3 < p)) { s = r3; p = i3; mg = fmax(fabs(c3), fabs(u3)); }
    }
    for (; k < nf; ++k) {
        const int i = frontier[k];
        const double ci = c[(long long)i * m + j], ui = u[i];
        const double r = ci - ui - vj;
        if (r < s || (r == s && i < p)) { s = r; p = i; mg = fmax(fabs(ci), fabs(ui)); }
    }
    mg = fmax(mg, fabs(vj));
    slack[j] = s;
    Pc[j] = p;
    mag[j] = mg;
    if (s <= eps + eps_rel * mg) {
        col_vis[j] = 1;
        const int r = row4col[j];
        if (r == -1) {
            atomicAdd((unsigned long long*)&status[ST_REVERSE], 1ull);
        } else {
            Pr[r] = j;
            row_state[r] = 3;
        }
    }
}

// Contraction: frontier rows become visited; rows reached in this expansion become the new frontier.
// One block of 1024 threads (O(n) work, block-level counter, no global atomics).
extern "C" __global__ void tree_contract(int n, int* __restrict__ row_state, int* __restrict__ frontier,
                                         long long* status) {
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
        const int i = i0 + threadIdx.x;
        int st = i < n ? row_state[i] : 0;
        const bool take = (st == 3);
        if (st == 1) row_state[i] = 2;
        if (take) row_state[i] = 1;
        // warp-aggregated append
        const unsigned mask = __ballot_sync(0xffffffffu, take);
        int base = 0;
        if ((threadIdx.x & 31) == 0 && mask) base = atomicAdd(&count, __popc(mask));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (take) frontier[base + __popc(mask & ((1u << (threadIdx.x & 31)) - 1u))] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0) status[ST_FRONTIER] = count;
}

// Alg. 5 + Alg. 6, one thread per column, in two launches: every reached free column walks back to its root
// and nominates itself (the LOWEST such column of each tree is kept: atomicMax of m - j, so the paths flipped
// do not depend on the order of the atomics); then the nominated column flips its path (trees are
// vertex-disjoint, Prop. 1, so the flipped paths are too, Prop. 2). claim[] is 0 at the phase's start.
extern "C" __global__ void tree_nominate(int m, const int* __restrict__ col_vis, const int* __restrict__ Pr,
                                         const int* __restrict__ Pc, int* claim, const int* __restrict__ row4col) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m || !col_vis[j] || row4col[j] != -1) return;
    atomicMax(&claim[tree_root(j, Pr, Pc, m)], m - j);
}

extern "C" __global__ void tree_augment(int m, const int* __restrict__ col_vis, const int* __restrict__ Pr,
                                        const int* __restrict__ Pc, const int* claim, int* col4row, int* row4col,
                                        long long* status) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    // (a flip writes row4col only on its own path: this column's entry is -1 unless j's own flip ran)
    if (j >= m || !col_vis[j] || row4col[j] != -1) return;
    if (claim[tree_root(j, Pr, Pc, m)] != m - j) return;
    flip_path(j, Pr, Pc, col4row, row4col, m);
    atomicAdd((unsigned long long*)&status[ST_AUGMENTED], 1ull);
}

// Alg. 9: theta = min slack over unvisited columns (an O(m) reduction, one block), then rows in the
// forest get u += theta and visited columns v -= theta (the paper's +-theta/2 form shifted by a
// constant), unvisited slacks drop by theta, and columns whose slack reaches zero join the forest.
// The frontier (empty on entry) is rebuilt from their rows.
extern "C" __global__ void tree_dual_update(int n, int m, double eps, double eps_rel, const double* __restrict__ mag,
                                            double* __restrict__ u, double* __restrict__ v,
                                            int* __restrict__ row_state, const int* __restrict__ row4col,
                                            int* __restrict__ Pr, const int* __restrict__ Pc, int* __restrict__ col_vis,
                                            double* __restrict__ slack, int* __restrict__ frontier, long long* status) {
    __shared__ int count;
    __shared__ int nrev;
    double local = INF_D;
    for (int j = threadIdx.x; j < m; j += blockDim.x)
        if (!col_vis[j]) local = fmin(local, slack[j]);
    const double theta = block_min(local);
    if (theta == INF_D) {
        if (threadIdx.x == 0) {
            status[ST_ERROR] = 1;
            status[ST_FRONTIER] = 0;
        }
        return;
    }
    if (threadIdx.x == 0) {
        count = 0;
        nrev = 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (row_state[i] == 2) u[i] += theta;
    for (int j0 = 0; j0 < m; j0 += blockDim.x) {
        const int j = j0 + threadIdx.x;
        int r = -2;
        if (j < m) {
            if (col_vis[j]) {
                v[j] -= theta;
            } else {
                const double s = slack[j] - theta;
                slack[j] = s;
                if (s <= eps + eps_rel * fmax(mag[j], fabs(theta))) {
                    col_vis[j] = 1;
                    r = row4col[j];
                    if (r == -1) atomicAdd(&nrev, 1);
                }
            }
        }
        const bool take = r >= 0;
        if (take) {
            Pr[r] = j;
            row_state[r] = 1;
        }
        const unsigned mask = __ballot_sync(0xffffffffu, take);
        int base = 0;
        if ((threadIdx.x & 31) == 0 && mask) base = atomicAdd(&count, __popc(mask));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (take) frontier[base + __popc(mask & ((1u << (threadIdx.x & 31)) - 1u))] = r;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        status[ST_FRONTIER] = count;
        status[ST_REVERSE] += nrev;
    }
}

// ---------------------------------------------------------------------------------------------
// Step 5a (ours): augmenting row reduction (Jonker & Volgenant 1987, section 4), in parallel Jacobi rounds.
// Every free row i finds its best and second-best column under the current column duals,
//   u1 = min_j (C[i,j] - v[j]) at j1,   u2 = the second smallest,
// and bids for j1 with the new dual v[j1] = C[i,j1] - u2 (JV's "v[j1] -= u2 - u1"; on a tie u1 == u2 with
// j1 taken it bids for the second column instead, as JV does). Of the rows bidding for one column the
// lowest proposed v wins (ties: the lower row), takes the column with u[i] = u2 and evicts its owner.
// This is an auction with epsilon = 0 that keeps the duals *exactly* feasible: v only decreases, so every
// assigned row's column stays its arg-min (slack 0) and every other slack stays >= 0, even for bids made
// against duals another winner lowered in the same round. It cannot promise to end (zero increments can
// cycle), so it runs for a bounded number of rounds and hands what is left to the Dijkstra finisher; on
// float costs it leaves a few dozen of ~n/5 free rows and cuts the finisher's steps several-fold.
// Results do not depend on the order of the free list (minima and atomicMin are order-free).
// ---------------------------------------------------------------------------------------------

// Order-preserving map of a double to an unsigned 64-bit key (smaller double -> smaller key).
__device__ __forceinline__ unsigned long long ordered_key(double x) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(x);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

__device__ __forceinline__ void top2_insert(double d, int j, double& b1, int& j1, double& b2, int& j2) {
    if (d < b1 || (d == b1 && j < j1)) {
        b2 = b1;
        j2 = j1;
        b1 = d;
        j1 = j;
    } else if (d < b2 || (d == b2 && j < j2)) {
        b2 = d;
        j2 = j;
    }
}

// Loads of state that other blocks of a cluster write during the kernel go past L1 (ld.global.cg):
// L1 is not coherent across SMs; the cluster barrier's release/acquire orders the L2 traffic.
template <bool CG, typename T>
__device__ __forceinline__ T load(const T* p) {
    if constexpr (CG) return __ldcg(p);
    else return *p;
}

// Best and second-best of C[i, j] - v[j] over this lane's columns j = first, first + stride, ...
template <bool CG>
__device__ __forceinline__ void lane_top2(const double* __restrict__ row, const double* v, int m, int first,
                                          int stride, double& b1, int& j1, double& b2, int& j2) {
    b1 = b2 = INF_D;
    j1 = j2 = 0x7fffffff;
#pragma unroll 8
    for (int j = first; j < m; j += stride) top2_insert(__ldg(row + j) - load<CG>(v + j), j, b1, j1, b2, j2);
}

// Merge the top-2 lists of the warp's lanes (every lane ends with the warp's).
__device__ __forceinline__ void warp_top2(double& b1, int& j1, double& b2, int& j2) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const double ob1 = __shfl_xor_sync(0xffffffffu, b1, o), ob2 = __shfl_xor_sync(0xffffffffu, b2, o);
        const int oj1 = __shfl_xor_sync(0xffffffffu, j1, o), oj2 = __shfl_xor_sync(0xffffffffu, j2, o);
        top2_insert(ob1, oj1, b1, j1, b2, j2);
        top2_insert(ob2, oj2, b1, j1, b2, j2);
    }
}

// Step 1 for free-list entry f of row i, from the row's best (b1 at j1) and second best (b2 at j2): bid
// (atomicMin of the proposed dual's order-preserving key). One thread.
template <bool CG>
__device__ __forceinline__ void arr_place_bid(int f, const double* __restrict__ c, int m, int i, double b1, int j1,
                                              double b2, int j2, const int* row4col, unsigned long long* bid_key,
                                              int* bid_col, double* bid_prop, double* bid_u2) {
    int j = j1;
    if (b1 == b2 && load<CG>(row4col + j1) != -1) j = j2;  // JV: a tie would only swap owners; try the other
    const double prop = __ldg(c + (long long)i * m + j) - b2;
    bid_col[f] = j;
    bid_prop[f] = prop;
    bid_u2[f] = b2;
    atomicMin(&bid_key[j], ordered_key(prop));
}

// Step 2: among the rows whose proposal equals the column's minimum, the lowest row index wins.
template <bool CG>
__device__ __forceinline__ void arr_resolve_one(int f, const int* free_rows, const unsigned long long* bid_key,
                                                const int* bid_col, const double* bid_prop, int* bid_row) {
    const int j = load<CG>(bid_col + f);
    if (load<CG>(bid_key + j) == ordered_key(load<CG>(bid_prop + f))) atomicMin(&bid_row[j], load<CG>(free_rows + f));
}

// Step 3: the winner takes the column (and resets the column's bid slots: a loser reading them
// afterwards still sees "not me"); losers and evicted owners make the next free list.
template <bool CG>
__device__ __forceinline__ void arr_apply_one(int f, const int* free_rows, const int* bid_col,
                                              const double* bid_prop, const double* bid_u2,
                                              unsigned long long* bid_key, int* bid_row, double* u, double* v,
                                              int* col4row, int* row4col, int* next_rows, int* next_count) {
    const int i = load<CG>(free_rows + f);
    const int j = load<CG>(bid_col + f);
    int push = i;
    if (load<CG>(bid_row + j) == i) {
        bid_row[j] = 0x7fffffff;
        bid_key[j] = ~0ull;
        push = load<CG>(row4col + j);
        if (push != -1) col4row[push] = -1;
        row4col[j] = i;
        col4row[i] = j;
        v[j] = load<CG>(bid_prop + f);
        u[i] = load<CG>(bid_u2 + f);
    }
    if (push != -1) next_rows[atomicAdd(next_count, 1)] = push;
}

// Multi-block rounds (while many rows are free): one launch per step, the grid reads the count on device.
extern "C" __global__ void arr_bid(const double* __restrict__ c, int m, const int* __restrict__ free_rows,
                                   const int* __restrict__ count, const double* __restrict__ v,
                                   const int* __restrict__ row4col, unsigned long long* bid_key,
                                   int* __restrict__ bid_col, double* __restrict__ bid_prop,
                                   double* __restrict__ bid_u2) {
    const int f = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;  // one warp per free row
    if (f >= *count) return;
    const int i = free_rows[f];
    double b1, b2;
    int j1, j2;
    lane_top2<false>(c + (long long)i * m, v, m, threadIdx.x & 31, 32, b1, j1, b2, j2);
    warp_top2(b1, j1, b2, j2);
    if ((threadIdx.x & 31) == 0) arr_place_bid<false>(f, c, m, i, b1, j1, b2, j2, row4col, bid_key, bid_col, bid_prop, bid_u2);
}

extern "C" __global__ void arr_resolve(const int* __restrict__ free_rows, const int* __restrict__ count,
                                       const unsigned long long* __restrict__ bid_key,
                                       const int* __restrict__ bid_col, const double* __restrict__ bid_prop,
                                       int* bid_row) {
    const int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f < *count) arr_resolve_one<false>(f, free_rows, bid_key, bid_col, bid_prop, bid_row);
}

extern "C" __global__ void arr_apply(const int* __restrict__ free_rows, const int* __restrict__ count,
                                     const int* __restrict__ bid_col, const double* __restrict__ bid_prop,
                                     const double* __restrict__ bid_u2, unsigned long long* bid_key, int* bid_row,
                                     double* u, double* v, int* col4row, int* row4col, int* next_rows,
                                     int* next_count) {
    const int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f < *count)
        arr_apply_one<false>(f, free_rows, bid_col, bid_prop, bid_u2, bid_key, bid_row, u, v, col4row, row4col,
                             next_rows, next_count);
}

__device__ __forceinline__ void cluster_barrier() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The tail: the three steps in one launch, a barrier between them (the block's, or with CLUSTER the
// hardware barrier of a thread-block cluster, whose blocks share the rows), for up to max_rounds rounds or
// until the free count has not improved for stall_rounds rounds. counter[0..2]: the current count and
// two alternating "next" counters. status[0] = rounds, status[1] = free rows left.
template <bool CLUSTER>
__device__ void arr_rounds(const double* __restrict__ c, int m, int* free_a, int* free_b, int* counter,
                           double* u, double* v, int* col4row, int* row4col, unsigned long long* bid_key,
                           int* bid_row, int* bid_col, double* bid_prop, double* bid_u2, int max_rounds,
                           int stall_rounds, long long* status) {
    __shared__ double s_b1[32], s_b2[32];
    __shared__ int s_j1[32], s_j2[32];
    const int T = gridDim.x * blockDim.x;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int warp = t >> 5, nw = T >> 5;
    int count = load<CLUSTER>(counter), best = count, since_best = 0, rounds = 0;
    int* cur = free_a;
    int* nxt = free_b;
    while (count > 0 && rounds < max_rounds && since_best < stall_rounds) {
        int* next_count = counter + 1 + (rounds & 1);
        // step 1: G warps per free row (G a power of two <= 32, so a group stays in one block), as many as
        // the count allows: a warp alone would scan a long row with too few loads in flight
        int G = 1;
        while (G < 32 && G * 2 * count <= nw) G *= 2;
        const int groups = nw / G, group = warp / G, rank = warp % G, wib = threadIdx.x >> 5, lane = threadIdx.x & 31;
        for (int base = 0; base < count; base += groups) {  // the same trip count in every thread
            const int f = base + group;
            const int i = f < count ? load<CLUSTER>(cur + f) : -1;
            double b1 = INF_D, b2 = INF_D;
            int j1 = 0x7fffffff, j2 = 0x7fffffff;
            if (i >= 0) lane_top2<CLUSTER>(c + (long long)i * m, v, m, rank * 32 + lane, 32 * G, b1, j1, b2, j2);
            warp_top2(b1, j1, b2, j2);
            if (G > 1) {
                if (lane == 0) {
                    s_b1[wib] = b1;
                    s_b2[wib] = b2;
                    s_j1[wib] = j1;
                    s_j2[wib] = j2;
                }
                __syncthreads();
                if (rank == 0) {
                    b1 = b2 = INF_D;
                    j1 = j2 = 0x7fffffff;
                    if (lane < G) {
                        b1 = s_b1[wib + lane];
                        b2 = s_b2[wib + lane];
                        j1 = s_j1[wib + lane];
                        j2 = s_j2[wib + lane];
                    }
                    warp_top2(b1, j1, b2, j2);
                }
                __syncthreads();
            }
            if (i >= 0 && rank == 0 && lane == 0)
                arr_place_bid<CLUSTER>(f, c, m, i, b1, j1, b2, j2, row4col, bid_key, bid_col, bid_prop, bid_u2);
        }
        if constexpr (CLUSTER) cluster_barrier();
        else __syncthreads();
        // everyone has read the count of the last round, which used the other counter: reset it for the next
        if (t == 0) counter[1 + ((rounds + 1) & 1)] = 0;
        for (int f = t; f < count; f += T) arr_resolve_one<CLUSTER>(f, cur, bid_key, bid_col, bid_prop, bid_row);
        if constexpr (CLUSTER) cluster_barrier();
        else __syncthreads();
        for (int f = t; f < count; f += T)
            arr_apply_one<CLUSTER>(f, cur, bid_col, bid_prop, bid_u2, bid_key, bid_row, u, v, col4row, row4col,
                                   nxt, next_count);
        if constexpr (CLUSTER) cluster_barrier();
        else __syncthreads();
        count = load<CLUSTER>(next_count);
        int* swap = cur;
        cur = nxt;
        nxt = swap;
        ++rounds;
        if (count < best) {
            best = count;
            since_best = 0;
        } else {
            ++since_best;
        }
    }
    if (t == 0) {
        status[0] = rounds;
        status[1] = count;
    }
}

extern "C" __global__ void __launch_bounds__(1024, 1)
    arr_tail(const double* __restrict__ c, int m, int* free_a, int* free_b, int* counter, double* u, double* v,
             int* col4row, int* row4col, unsigned long long* bid_key, int* bid_row, int* bid_col,
             double* bid_prop, double* bid_u2, int max_rounds, int stall_rounds, long long* status) {
    arr_rounds<false>(c, m, free_a, free_b, counter, u, v, col4row, row4col, bid_key, bid_row, bid_col, bid_prop,
                      bid_u2, max_rounds, stall_rounds, status);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // clusters: sm_90 and later (NVRTC compiles device code only)
#define ARR_CLUSTER 8
extern "C" __global__ void __cluster_dims__(ARR_CLUSTER, 1, 1) __launch_bounds__(1024, 1)
    arr_tail_cluster(const double* __restrict__ c, int m, int* free_a, int* free_b, int* counter, double* u,
                     double* v, int* col4row, int* row4col, unsigned long long* bid_key, int* bid_row,
                     int* bid_col, double* bid_prop, double* bid_u2, int max_rounds, int stall_rounds,
                     long long* status) {
    arr_rounds<true>(c, m, free_a, free_b, counter, u, v, col4row, row4col, bid_key, bid_row, bid_col, bid_prop,
                     bid_u2, max_rounds, stall_rounds, status);
}
#endif

// ---------------------------------------------------------------------------------------------
// Step 5: single-block alternating-tree growth in Dijkstra order for the remaining free rows.
// Thread t owns columns t, t + T, t + 2T, ... (K of them); their tentative distances d (the slack of
// Alg. 4 measured from the root, i.e. with Alg. 9's theta updates applied lazily) live in registers,
// the column duals in shared memory when they fit. One step = scan the newly reached row (Alg. 4 with a
// frontier of one row), a block arg-min (theta of Alg. 9), and the column that becomes tight joins the
// tree; an unassigned one ends the search (reverse pass + augmentation of Alg. 5/6 by thread 0).
// The dual update at the end is the accumulated Alg. 9 update: u[i] += minVal - d[col4row[i]],
// v[j] -= minVal - d[j] for the tree's columns (Crouse 2016 / scipy's rectangular_lsap).
// Ties prefer an unassigned column (ends the search early on integer costs), then the lower index.
// ---------------------------------------------------------------------------------------------

struct Cand {
    double d;
    int key;  // (taken << 31) | j  ->  smaller is better: free first, then lower index
};

__device__ __forceinline__ bool better(double d1, int k1, double d2, int k2) {
    return d1 < d2 || (d1 == d2 && k1 < k2);
}

// (best, key) <- the arg-min over the warp, ties to the smaller key; valid in every lane.
__device__ __forceinline__ void warp_argmin(double& best, int& key) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const double other = __shfl_xor_sync(0xffffffffu, best, o);
        const int other_key = __shfl_xor_sync(0xffffffffu, key, o);
        if (better(other, other_key, best, key)) {
            best = other;
            key = other_key;
        }
    }
}

// warp_argmin that also carries the row matched to the best column (the cluster finisher's candidates).
__device__ __forceinline__ void warp_argmin_row(double& best, int& key, int& row) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const double other = __shfl_xor_sync(0xffffffffu, best, o);
        const int other_key = __shfl_xor_sync(0xffffffffu, key, o);
        const int other_row = __shfl_xor_sync(0xffffffffu, row, o);
        if (better(other, other_key, best, key)) {
            best = other;
            key = other_key;
            row = other_row;
        }
    }
}

template <int K>
__device__ void sap_body(const double* __restrict__ c, int n, int m, const int* __restrict__ free_rows, int n_free,
                         double* u_g, double* v_g, int* col4row, int* r4c_g, int* pred,
                         long long max_steps, int use_shared, long long* status) {
    // dynamic shared memory: v (m doubles) if use_shared & 1; then u (n doubles) and row4col (m ints)
    // if use_shared & 2 (all hot per-step state on chip: no dependent global load in a step but the row).
    extern __shared__ double v_s[];
    __shared__ double red_d[32];
    __shared__ int red_k[32];
    __shared__ double s_min;
    __shared__ int s_j;
    __shared__ int s_row;
    const int T = blockDim.x;
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5, nw = T >> 5;
    double* v = (use_shared & 1) ? v_s : v_g;
    double* u = (use_shared & 2) ? (v_s + m) : u_g;
    int* row4col = (use_shared & 2) ? (int*)(v_s + m + n) : r4c_g;
    if (use_shared & 1)
        for (int j = tid; j < m; j += T) v_s[j] = v_g[j];
    if (use_shared & 2) {
        for (int i = tid; i < n; i += T) u[i] = u_g[i];
        for (int j = tid; j < m; j += T) row4col[j] = r4c_g[j];
    }
    // taken bit per owned column (column assigned); columns never become free again here.
    unsigned long long taken = 0ull;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int j = tid + k * T;
        if (j < m && row4col[j] != -1) taken |= (1ull << k);
    }
    __syncthreads();
    long long steps = 0;
    double d[K];
    for (int f = 0; f < n_free; ++f) {
        const int cur = free_rows[f];
        unsigned long long done = 0ull;
#pragma unroll
        for (int k = 0; k < K; ++k) d[k] = INF_D;
        double minVal = 0.0;
        int i = cur;
        int sink = -1;
        while (true) {
            const double ui = u[i];
            const double* row = c + (long long)i * m;
            double best = INF_D;
            int bkey = 0x7fffffff;
            // issue every load of this thread's part of the row before using any (K loads in flight)
            double cv[K];
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int j = tid + k * T;
                cv[k] = (j < m && !((done >> k) & 1ull)) ? __ldcs(row + j) : 0.0;
            }
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int j = tid + k * T;
                if (j < m && !((done >> k) & 1ull)) {
                    const double r = minVal + cv[k] - ui - v[j];
                    if (r < d[k]) {
                        d[k] = r;
                        pred[j] = i;
                    }
                    const int key = (((taken >> k) & 1ull) ? (1 << 30) : 0) | j;
                    if (better(d[k], key, best, bkey)) {
                        best = d[k];
                        bkey = key;
                    }
                }
            }
            // block arg-min
            warp_argmin(best, bkey);
            if (lane == 0) {
                red_d[warp] = best;
                red_k[warp] = bkey;
            }
            __syncthreads();
            if (warp == 0) {
                best = lane < nw ? red_d[lane] : INF_D;
                bkey = lane < nw ? red_k[lane] : 0x7fffffff;
                warp_argmin(best, bkey);
                if (lane == 0) {
                    const int jm = bkey & ((1 << 30) - 1);
                    s_min = best;
                    s_j = jm;
                    s_row = (best == INF_D) ? -1 : row4col[jm];
                }
            }
            __syncthreads();
            minVal = s_min;
            const int jmin = s_j;
            const int nxt = s_row;
            if (minVal == INF_D) {  // cannot happen with finite costs
                if (tid == 0) status[ST_ERROR] = 1;
                return;
            }
            if (jmin % T == tid) done |= (1ull << (jmin / T));
            ++steps;
            if (nxt == -1) {
                sink = jmin;
                break;
            }
            if (steps > max_steps) {
                if (tid == 0) status[ST_ERROR] = 2;
                return;
            }
            i = nxt;
        }
        // dual update (before the augmentation changes row4col)
        if (tid == 0) u[cur] += minVal;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int j = tid + k * T;
            if (j < m && ((done >> k) & 1ull) && j != sink) {
                const double delta = minVal - d[k];
                v[j] -= delta;
                u[row4col[j]] += delta;
            }
        }
        if (sink % T == tid) taken |= (1ull << (sink / T));
        __syncthreads();
        // reverse pass + augmentation along pred (thread 0; the path is short compared to the search)
        if (tid == 0) {
            int j = sink;
            for (int g = 0; g <= n; ++g) {
                const int r = pred[j];
                row4col[j] = r;
                const int old = col4row[r];
                col4row[r] = j;
                if (r == cur) break;
                j = old;
            }
        }
        __syncthreads();
    }
    if (use_shared & 1)
        for (int j = tid; j < m; j += T) v_g[j] = v_s[j];
    if (use_shared & 2) {
        for (int i = tid; i < n; i += T) u_g[i] = u[i];
        for (int j = tid; j < m; j += T) r4c_g[j] = row4col[j];
    }
    if (tid == 0) status[ST_STEPS] = steps;
}

#define SAP_INSTANCE(K)                                                                                          \
    extern "C" __global__ void __launch_bounds__(1024, 1)                                                        \
        tree_sap_K##K(const double* __restrict__ c, int n, int m, const int* __restrict__ free_rows, int n_free, \
                      double* __restrict__ u, double* v, int* col4row, int* row4col, int* pred,                  \
                      long long max_steps, int use_shared, long long* status) {                                 \
        sap_body<K>(c, n, m, free_rows, n_free, u, v, col4row, row4col, pred, max_steps, use_shared, status);    \
    }

SAP_INSTANCE(1)
SAP_INSTANCE(2)
SAP_INSTANCE(4)
SAP_INSTANCE(8)
SAP_INSTANCE(12)
SAP_INSTANCE(16)
SAP_INSTANCE(20)
SAP_INSTANCE(24)
SAP_INSTANCE(32)
SAP_INSTANCE(48)
SAP_INSTANCE(64)

// ---------------------------------------------------------------------------------------------
// Step 5 on a thread-block cluster (sm_90+): the same Dijkstra-order tree growth, with the columns spread
// over the SAP_CLUSTER blocks of one cluster, so one step reads its row with 8 SMs instead of one (a
// single block is bandwidth- and register-bound on long rows: ~15 us a step at m = 20000).
// Thread (b, t) owns columns b * T + t + k * SAP_CLUSTER * T; their v and row4col live in the owner's
// shared memory (row4col is written remotely, through distributed shared memory, by the augmentation).
// A step: every block scans its part of the row and reduces to its best candidate (d, key, row of that
// column), publishes it in a shared slot (two slots, alternating by step parity), one cluster barrier,
// then each block reads the 8 slots and reduces them the same way: every block takes the same step.
// Same keys and the same arithmetic per column as tree_sap_K*: the same augmenting paths and duals.
// ---------------------------------------------------------------------------------------------
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SAP_CLUSTER 8

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Address of `p` (this block's shared memory) in the shared memory of cluster block `rank`.
__device__ __forceinline__ unsigned dsmem(const void* p, unsigned rank) {
    unsigned out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(out)
                 : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank));
    return out;
}

__device__ __forceinline__ double dsmem_ld_f64(unsigned a) {
    double x;
    asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(x) : "r"(a) : "memory");
    return x;
}

__device__ __forceinline__ int dsmem_ld_s32(unsigned a) {
    int x;
    asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(x) : "r"(a) : "memory");
    return x;
}

__device__ __forceinline__ void dsmem_st_s32(unsigned a, int x) {
    asm volatile("st.shared::cluster.s32 [%0], %1;" ::"r"(a), "r"(x) : "memory");
}

template <int K>
__device__ void sap_cluster_body(const double* __restrict__ c, int n, int m, const int* __restrict__ free_rows,
                                 int n_free, double* u, double* v_g, int* col4row, int* r4c_g, int* pred,
                                 long long max_steps, long long* status) {
    extern __shared__ double v_s[];            // K * T doubles: v of the owned columns
    int* r4c_s = (int*)(v_s + K * blockDim.x);  // K * T ints: row4col of the owned columns
    __shared__ double red_d[32];
    __shared__ int red_k[32], red_r[32];
    __shared__ double slot_d[2];
    __shared__ int slot_k[2], slot_r[2];
    __shared__ double s_min;
    __shared__ int s_j, s_row;
    const int T = blockDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = T >> 5;
    const unsigned rank = cluster_rank();
    const int stride = SAP_CLUSTER * T;  // columns j = rank * T + tid + k * stride
    const int base = (int)rank * T + tid;
    unsigned long long taken = 0ull;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int j = base + k * stride;
        if (j < m) {
            v_s[k * T + tid] = v_g[j];
            r4c_s[k * T + tid] = r4c_g[j];
            if (r4c_g[j] != -1) taken |= (1ull << k);
        }
    }
    __syncthreads();
    cluster_barrier();
    long long steps = 0;
    double d[K];
    for (int f = 0; f < n_free; ++f) {
        const int cur = free_rows[f];
        unsigned long long done = 0ull;
#pragma unroll
        for (int k = 0; k < K; ++k) d[k] = INF_D;
        double minVal = 0.0;
        int i = cur;
        int sink = -1;
        while (true) {
            const double ui = __ldcg(u + i);
            const double* row = c + (long long)i * m;
            double best = INF_D;
            int bkey = 0x7fffffff, brow = -1;
            double cv[K];
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int j = base + k * stride;
                cv[k] = (j < m && !((done >> k) & 1ull)) ? __ldcs(row + j) : 0.0;
            }
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int j = base + k * stride;
                if (j < m && !((done >> k) & 1ull)) {
                    const double r = minVal + cv[k] - ui - v_s[k * T + tid];
                    if (r < d[k]) {
                        d[k] = r;
                        pred[j] = i;
                    }
                    const int key = (((taken >> k) & 1ull) ? (1 << 30) : 0) | j;
                    if (better(d[k], key, best, bkey)) {
                        best = d[k];
                        bkey = key;
                        brow = r4c_s[k * T + tid];
                    }
                }
            }
            // block arg-min, carrying the row of the best column
            warp_argmin_row(best, bkey, brow);
            if (lane == 0) {
                red_d[warp] = best;
                red_k[warp] = bkey;
                red_r[warp] = brow;
            }
            __syncthreads();
            const int parity = (int)(steps & 1);
            if (warp == 0) {
                best = lane < nw ? red_d[lane] : INF_D;
                bkey = lane < nw ? red_k[lane] : 0x7fffffff;
                brow = lane < nw ? red_r[lane] : -1;
                warp_argmin_row(best, bkey, brow);
                if (lane == 0) {
                    slot_d[parity] = best;
                    slot_k[parity] = bkey;
                    slot_r[parity] = brow;
                }
            }
            cluster_barrier();  // every block's candidate is published
            if (warp == 0) {
                best = INF_D;
                bkey = 0x7fffffff;
                brow = -1;
                if (lane < SAP_CLUSTER) {
                    best = dsmem_ld_f64(dsmem(&slot_d[parity], lane));
                    bkey = dsmem_ld_s32(dsmem(&slot_k[parity], lane));
                    brow = dsmem_ld_s32(dsmem(&slot_r[parity], lane));
                }
                warp_argmin_row(best, bkey, brow);
                if (lane == 0) {
                    s_min = best;
                    s_j = bkey & ((1 << 30) - 1);
                    s_row = (best == INF_D) ? -1 : brow;
                }
            }
            __syncthreads();
            minVal = s_min;
            const int jmin = s_j;
            const int nxt = s_row;
            if (minVal == INF_D) {  // cannot happen with finite costs
                if (rank == 0 && tid == 0) status[ST_ERROR] = 1;
                break;
            }
            if (jmin % stride == base) done |= (1ull << (jmin / stride));
            ++steps;
            if (nxt == -1) {
                sink = jmin;
                break;
            }
            if (steps > max_steps) {
                if (rank == 0 && tid == 0) status[ST_ERROR] = 2;
                break;
            }
            i = nxt;
        }
        if (sink < 0) break;  // error: every block leaves the same way
        // dual update (before the augmentation changes row4col)
        if (rank == 0 && tid == 0) u[cur] += minVal;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int j = base + k * stride;
            if (j < m && ((done >> k) & 1ull) && j != sink) {
                const double delta = minVal - d[k];
                v_s[k * T + tid] -= delta;
                u[r4c_s[k * T + tid]] += delta;
            }
        }
        if (sink % stride == base) taken |= (1ull << (sink / stride));
        cluster_barrier();  // pred and u are written
        // reverse pass + augmentation along pred by one thread; row4col lives with the column's owner
        if (rank == 0 && tid == 0) {
            int j = sink;
            for (int g = 0; g <= n; ++g) {
                const int r = __ldcg(pred + j);
                const int g_col = j % stride;
                const unsigned owner = (unsigned)(g_col / T);
                dsmem_st_s32(dsmem(&r4c_s[(j / stride) * T + g_col % T], owner), r);
                const int old = col4row[r];
                col4row[r] = j;
                if (r == cur) break;
                j = old;
            }
        }
        cluster_barrier();  // row4col is updated everywhere
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int j = base + k * stride;
        if (j < m) {
            v_g[j] = v_s[k * T + tid];
            r4c_g[j] = r4c_s[k * T + tid];
        }
    }
    if (rank == 0 && tid == 0) status[ST_STEPS] = steps;
    cluster_barrier();  // no block leaves while another may still read its shared memory
}

#define SAP_CLUSTER_INSTANCE(K)                                                                                   \
    extern "C" __global__ void __cluster_dims__(SAP_CLUSTER, 1, 1) __launch_bounds__(1024, 1)                     \
        tree_sap_cluster_K##K(const double* __restrict__ c, int n, int m, const int* __restrict__ free_rows,      \
                              int n_free, double* u, double* v, int* col4row, int* row4col, int* pred,             \
                              long long max_steps, long long* status) {                                           \
        sap_cluster_body<K>(c, n, m, free_rows, n_free, u, v, col4row, row4col, pred, max_steps, status);        \
    }

SAP_CLUSTER_INSTANCE(1)
SAP_CLUSTER_INSTANCE(2)
SAP_CLUSTER_INSTANCE(3)
SAP_CLUSTER_INSTANCE(4)
SAP_CLUSTER_INSTANCE(6)
SAP_CLUSTER_INSTANCE(8)
#endif
