// Classical Hungarian algorithm on the GPU (Munkres' variant as parallelised by Date & Nagi 2016,
// Alg. 3, 7, 8, with the optimisations of Kawtikwar, Chang & Govind: zero compression with per-row
// counts and a reduction instead of one global atomic, fused kernels, one host read per iteration).
//
// Conventions as in hungarian_tree.cu: square n x n float64 cost (rectangular inputs are padded with
// zero rows by the Python side), finite entries, duals u/v in float64, slack = C - u - v, "zero" means
// slack <= eps. Covers (Munkres): after a forward pass without augmentation the uncovered rows are the
// rows of the alternating forest ("tree rows"), the covered columns are the forest's columns (col_vis).
//
// Paper steps and where they live:
//   Alg. 1  initial reduction ......... row_min, col_min_partial, col_min_final (+ greedy_propose /
//           greedy_accept, ours)
//   compression of zero-slack edges ... cl_compress: one warp per row, ballot compaction into the row's
//           segment of Z, per-row counts (no global atomic at all: Kawtikwar's Opt. 0 taken one step further)
//           and the total via a block reduction + one atomic per block.
//   Alg. 3  forward pass (BFS over Z) + Alg. 5 reverse pass + Alg. 6 augmentation ... cl_search: ONE
//           persistent block runs all BFS levels, the reverse pass and the augmentation of every
//           vertex-disjoint path without returning to the host (Kawtikwar's kernel fusion and
//           cooperative-groups idea, with block-level instead of grid-level barriers); it writes one
//           small status record, the host's single read per iteration. Races are settled by index (a
//           column joins the forest through its lowest reaching row; a tree flips the path of its lowest
//           free column), so tied costs give the same assignment on every run.
//   Alg. 7  min uncovered slack ....... cl_min_partial (warp per forest row, block reduction, per-block
//           partials) and, fused with Alg. 8's dual update, cl_min_update (one block): theta, then
//           u += theta on uncovered rows, v -= theta on covered columns (the paper's +-theta/2 form
//           shifted by a constant, which keeps integer duals integral).

#include "hungarian_common.cuh"


// status slots (int64), shared with hungarian_classical.py
#define CS_FREE 0       // free rows at the start of the search
#define CS_AUG 1        // paths augmented by the search
#define CS_NTREE 2      // rows in the forest (uncovered rows)
#define CS_NREV 3       // free columns reached
#define CS_ERROR 4      // 1: theta = inf (infeasible; cannot happen with finite costs)
#define CS_ZEROS 5      // zero-slack edges after the last compression
#define CS_THETA 6      // last theta (as double bits)

// Compression of the zero-slack edges: one warp per row, Z[i * m + k] = k-th zero column of row i.
extern "C" __global__ void cl_compress(const double* __restrict__ c, const double* __restrict__ u,
                                       const double* __restrict__ v, int n, int m, double eps, double eps_rel,
                                       int* __restrict__ Z, int* __restrict__ zcnt, long long* status) {
    __shared__ int block_total;
    if (threadIdx.x == 0) block_total = 0;
    __syncthreads();
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (i < n) {
        const double ui = u[i];
        const double* row = c + (long long)i * m;
        int* zrow = Z + (long long)i * m;
        int cnt = 0;
        for (int j0 = 0; j0 < m; j0 += 32) {
            const int j = j0 + lane;
            bool z = false;
            if (j < m) {
                const double cij = row[j], vj = v[j];
                z = is_tight(cij - ui - vj, cij, ui, vj, eps, eps_rel);
            }
            const unsigned mask = __ballot_sync(0xffffffffu, z);
            if (z) zrow[cnt + __popc(mask & ((1u << lane) - 1u))] = j;
            cnt += __popc(mask);
        }
        if (lane == 0) {
            zcnt[i] = cnt;
            atomicAdd(&block_total, cnt);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && block_total) atomicAdd((unsigned long long*)&status[CS_ZEROS], (unsigned long long)block_total);
}

// f(i, j) for every zero-slack column j of every frontier row i (one thread per row, the block's T threads).
template <class F>
__device__ __forceinline__ void for_each_zero(const int* fin, int nf, const int* Z, const int* zcnt, int m, int tid,
                                              int T, F f) {
    for (int k = tid; k < nf; k += T) {
        const int i = fin[k];
        const int* zrow = Z + (long long)i * m;
        const int cnt = zcnt[i];
        for (int t = 0; t < cnt; ++t) f(i, zrow[t]);
    }
}

// Alg. 3 + 5 + 6 in one persistent block (see header). Arrays fa, fb, tree_rows: n ints; rev, pick: m ints.
extern "C" __global__ void __launch_bounds__(1024, 1)
cl_search(int n, int m, const int* __restrict__ Z, const int* __restrict__ zcnt, int* col4row, int* row4col,
          int* Pr, int* Pc, int* col_vis, int* claim, int* fa, int* fb, int* tree_rows, int* rev, int* pick,
          long long* status) {
    __shared__ int s_front, s_next, s_tree, s_rev, s_aug;
    const int T = blockDim.x, tid = threadIdx.x, lane = tid & 31;
    if (tid == 0) {
        s_front = 0; s_next = 0; s_tree = 0; s_rev = 0; s_aug = 0;
    }
    for (int j = tid; j < m; j += T) {
        col_vis[j] = 0;
        pick[j] = 0x7fffffff;
    }
    __syncthreads();
    // roots: the free rows (Alg. 2's optimality check counts them)
    for (int i0 = 0; i0 < n; i0 += T) {
        const int i = i0 + tid;
        bool take = false;
        if (i < n) {
            Pr[i] = -1;
            claim[i] = 0;
            take = col4row[i] == -1;
        }
        const unsigned mask = __ballot_sync(0xffffffffu, take);
        int base = 0;
        if (lane == 0 && mask) base = atomicAdd(&s_front, __popc(mask));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (take) {
            const int k = base + __popc(mask & ((1u << lane) - 1u));
            fa[k] = i;
            tree_rows[k] = i;
        }
    }
    __syncthreads();
    const int n_free = s_front;
    if (tid == 0) s_tree = n_free;
    __syncthreads();
    int* fin = fa;
    int* fout = fb;
    for (int level = 0; level <= n; ++level) {
        const int nf = s_front;
        if (nf == 0) break;
        // expansion: one thread per frontier row walks its zero list (Alg. 3), twice: every row reaching an
        // unvisited column bids for it (the lowest row is kept), then the winners take their columns
        for_each_zero(fin, nf, Z, zcnt, m, tid, T, [&](int i, int j) {
            if (!col_vis[j]) atomicMin(&pick[j], i);
        });
        __syncthreads();
        for_each_zero(fin, nf, Z, zcnt, m, tid, T, [&](int i, int j) {
            if (col_vis[j] || pick[j] != i) return;  // (only j's winner writes col_vis[j])
            col_vis[j] = 1;
            Pc[j] = i;
            const int r = row4col[j];
            if (r == -1) {
                rev[atomicAdd(&s_rev, 1)] = j;  // reverse-pass candidate
            } else {
                Pr[r] = j;
                fout[atomicAdd(&s_next, 1)] = r;
                tree_rows[atomicAdd(&s_tree, 1)] = r;
            }
        });
        __syncthreads();
        // contraction: the gathered rows are the next frontier (each row is reached once)
        if (tid == 0) {
            s_front = s_next;
            s_next = 0;
        }
        int* tmp = fin; fin = fout; fout = tmp;
        __syncthreads();
    }
    // reverse pass + augmentation: one path per tree, vertex-disjoint (Date & Nagi Prop. 1, 2): each reached
    // free column nominates itself to its tree's root (the lowest column is kept; roots in fa, free now),
    // then the nominated ones flip their paths
    const int nrev = s_rev;
    for (int k = tid; k < nrev; k += T) {
        const int j = rev[k];
        const int root = tree_root(j, Pr, Pc, n);
        fa[k] = root;
        atomicMax(&claim[root], m - j);
    }
    __syncthreads();
    for (int k = tid; k < nrev; k += T) {
        const int j = rev[k];
        if (claim[fa[k]] != m - j) continue;
        flip_path(j, Pr, Pc, col4row, row4col, n);
        atomicAdd(&s_aug, 1);
    }
    __syncthreads();
    if (tid == 0) {
        status[CS_FREE] = n_free;
        status[CS_AUG] = s_aug;
        status[CS_NTREE] = s_tree;
        status[CS_NREV] = nrev;
        status[CS_ZEROS] = 0;  // the next compression recounts
    }
}

// Alg. 7 stage 1: min slack over (forest rows) x (columns outside the forest); one warp per forest row,
// block reduction, one partial per block (no atomics).
extern "C" __global__ void cl_min_partial(const double* __restrict__ c, const double* __restrict__ u,
                                          const double* __restrict__ v, int m, const int* __restrict__ tree_rows,
                                          const int* __restrict__ col_vis, const long long* status,
                                          double* __restrict__ partial) {
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int ntree = (int)status[CS_NTREE];
    double best = INF_D;
    if (w < ntree) {
        const int i = tree_rows[w];
        const double ui = u[i];
        const double* row = c + (long long)i * m;
        for (int j = lane; j < m; j += 32)
            if (!col_vis[j]) best = fmin(best, row[j] - ui - v[j]);
    }
    best = block_min(best);
    if (threadIdx.x == 0) partial[blockIdx.x] = best;
}

// Alg. 7 stage 2 fused with Alg. 8 (one block): theta = min of the partials, then the dual update.
extern "C" __global__ void cl_min_update(int m, int n_partial, const double* __restrict__ partial,
                                         const int* __restrict__ tree_rows, const int* __restrict__ col_vis,
                                         double* __restrict__ u, double* __restrict__ v, long long* status) {
    double local = INF_D;
    for (int k = threadIdx.x; k < n_partial; k += blockDim.x) local = fmin(local, partial[k]);
    const double theta = block_min(local);
    if (theta == INF_D) {
        if (threadIdx.x == 0) status[CS_ERROR] = 1;
        return;
    }
    const int ntree = (int)status[CS_NTREE];
    for (int k = threadIdx.x; k < ntree; k += blockDim.x) u[tree_rows[k]] += theta;
    for (int j = threadIdx.x; j < m; j += blockDim.x)
        if (col_vis[j]) v[j] -= theta;
    if (threadIdx.x == 0) status[CS_THETA] = __double_as_longlong(theta);
}
