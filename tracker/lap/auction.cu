// Forward auction (Bertsekas) for square min-cost assignment problems with
// int64 costs, on the GPU: Jacobi bidding, one warp per unassigned row (best
// and second-best object by warp shuffles), one winning bid per object
// (atomicMax on the bid, then the lowest row among the highest bids: auction.cuh's
// nominate_step and claim_step), a compacted list of
// unassigned rows (warp-aggregated appends), epsilon-scaling driven from the
// host (auction.py).
//
// Two layouts share the code: CSR (sparse / gated problems) and DENSE
// (row-major n x n, every entry an edge).
//
// Conventions: row i prefers the column minimising cost[i, j] + price[j]; a
// bid raises price[j] to price[j] + (second - best) + eps. Costs are >= 0 and
// at most about 2^51, prices stay far below 2^62 (auction.py checks). Bids are
// > 0, so col_bid == 0 means "no bid" (unsigned atomicMax).


#include "auction.cuh"

// ------------------------------------------------------------- kernels ---

#define KERNELS(SUFFIX, DENSE)                                                                        \
    extern "C" __global__ void auction_bid_##SUFFIX(PROBLEM_ARGS, const i64* price, const int* list,    \
                                                     const int* count, int* zero_count, i64 eps,      \
                                                     int* target, i64* bid, i64* col_bid, int* error) { \
        MAKE_PROBLEM;                                                                                \
        int gtid = blockIdx.x * blockDim.x + threadIdx.x;                                            \
        if (gtid == 0) *zero_count = 0;                                                              \
        bid_step<DENSE>(p, price, list, *count, eps, target, bid, col_bid, gtid >> 5,               \
                        (gridDim.x * blockDim.x) >> 5, threadIdx.x & 31, error);                     \
    }                                                                                                \
    /* Epsilon-CS check at the start of a phase: rows that violate it are unassigned; every         \
       unassigned row is listed. */                                                                  \
    extern "C" __global__ void auction_init_##SUFFIX(PROBLEM_ARGS, const i64* price, i64 eps,           \
                                                      int* assigned, int* owner, int* list,          \
                                                      int* count) {                                  \
        MAKE_PROBLEM;                                                                                \
        int lane = threadIdx.x & 31;                                                                 \
        int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;                                     \
        int nwarps = (gridDim.x * blockDim.x) >> 5;                                                  \
        for (int i = warp; i < p.n; i += nwarps) {                                                   \
            int j = assigned[i];                                                                     \
            bool push = false;                                                                       \
            if (j < 0) {                                                                             \
                push = true;                                                                         \
            } else {                                                                                 \
                i64 b1, b2;                                                                          \
                int j1;                                                                              \
                best_two<DENSE>(p, price, i, lane, b1, j1, b2);                                      \
                /* cost of the assigned edge: dense, read it; CSR, scan the row for it */           \
                i64 mine = LL_INF;                                                                   \
                if (DENSE) {                                                                         \
                    mine = p.cost[(i64)i * p.n + j] + price[j];                                      \
                } else {                                                                             \
                    i64 start, end;                                                                  \
                    row_range<DENSE>(p, i, start, end);                                              \
                    for (i64 k = start + lane; k < end; k += 32)                                     \
                        if (column_of<DENSE>(p, k, start) == j) mine = p.cost[k] + price[j];         \
                    for (int off = 16; off > 0; off >>= 1)                                           \
                        mine = min(mine, __shfl_xor_sync(0xffffffffu, mine, off));                   \
                }                                                                                    \
                if (mine > b1 + eps) {                                                               \
                    push = true;                                                                     \
                    if (lane == 0) {                                                                 \
                        assigned[i] = -1;                                                            \
                        owner[j] = -1;                                                               \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
            if (lane == 0 && push) list[atomicAdd(count, 1)] = i;                                    \
        }                                                                                            \
    }                                                                                                \
    /* The remaining auction of a phase in one block (few unassigned rows): no launches. It stops   \
       once at most stop_count rows are unassigned (0: the end of the phase). */                     \
    extern "C" __global__ void __launch_bounds__(1024) auction_tail_##SUFFIX(PROBLEM_ARGS, i64* price, int* list0, int* list1,  \
                                                      int* counts, int parity, i64 eps, int* target, \
                                                      i64* bid, i64* col_bid, int* winner,           \
                                                      int* owner, int* assigned, int max_iters,      \
                                                      int gs_rows, int stop_count, int* iters_done,  \
                                                      int* error) {                                  \
        MAKE_PROBLEM;                                                                                \
        int tid = threadIdx.x, nthreads = blockDim.x;                                                \
        int lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;                                \
        int it = 0;                                                                                  \
        while (it < max_iters) {                                                                     \
            int* cur = parity ? list1 : list0;                                                       \
            int* nxt = parity ? list0 : list1;                                                       \
            int* cur_count = counts + parity;                                                        \
            int* nxt_count = counts + (1 - parity);                                                  \
            int count = *(volatile int*)cur_count;                                                   \
            /* stop_count > 0: a truncated phase (the dense auction's exact finish takes the rest) */ \
            if (count <= stop_count || *(volatile int*)error) break;                                 \
            if (count <= gs_rows) {                                                                  \
                it = gauss_seidel_tail<DENSE>(p, price, cur, cur_count, eps, owner, assigned, max_iters, \
                                              it, error);                                            \
                break;                                                                               \
            }                                                                                        \
            if (tid == 0) *nxt_count = 0;                                                            \
            bid_step<DENSE>(p, price, cur, count, eps, target, bid, col_bid, warp, nwarps, lane,     \
                            error);                                                                  \
            __syncthreads();                                                                         \
            nominate_step(cur, count, target, bid, col_bid, winner, p.n, tid, nthreads);             \
            __syncthreads();                                                                         \
            claim_step(cur, count, target, bid, col_bid, winner, owner, assigned, price, nxt,        \
                       nxt_count, p.n, tid, nthreads);                                               \
            __syncthreads();                                                                         \
            parity = 1 - parity;                                                                     \
            ++it;                                                                                    \
        }                                                                                            \
        if (tid == 0) {                                                                              \
            iters_done[0] = it;                                                                      \
            iters_done[1] = parity;                                                                  \
        }                                                                                            \
    }

KERNELS(csr, false)
KERNELS(dense, true)

extern "C" __global__ void auction_nominate(const int* list, const int* count, const int* target,
                                            const i64* bid, const i64* col_bid, int* winner, int bound) {
    nominate_step(list, *count, target, bid, col_bid, winner, bound, blockIdx.x * blockDim.x + threadIdx.x,
                  gridDim.x * blockDim.x);
}

extern "C" __global__ void auction_claim(const int* list, const int* count, const int* target,
                                         const i64* bid, i64* col_bid, int* winner, int* owner,
                                         int* assigned, i64* price, int* next, int* next_count, int bound) {
    claim_step(list, *count, target, bid, col_bid, winner, owner, assigned, price, next, next_count, bound,
               blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// Hand-over of the dense auction to the exact Hungarian finish (auction.py, dense_with_exact_finish), in
// one pass over the float64 cost matrix (row-major n x n): the prices as column duals
// v[j] = -price[j] / scale (rounded for integer costs), the row duals u[i] = min_j (c[i, j] - v[j])
// (feasible by construction), and the auction's pair of row i kept when it is tight under them:
// c[i, a] - u[i] - v[a] <= eps + eps_rel * max(|c[i, a]|, |u[i]|, |v[a]|), as the Hungarian's zero test.
// One block of 256 threads per row; row4col is -1 beforehand; kept[0] counts the pairs kept.
__device__ __forceinline__ double price_dual(const i64* price, int j, double scale, int integral) {
    const double v = -(double)price[j] / scale;
    return integral ? rint(v) : v;
}

extern "C" __global__ void dense_handoff(const double* __restrict__ c, const i64* __restrict__ price, double scale,
                                         int integral, int n, double eps, double eps_rel,
                                         const int* __restrict__ assigned, double* __restrict__ u,
                                         double* __restrict__ v, int* __restrict__ col4row, int* row4col,
                                         int* kept) {
    __shared__ double part[256];
    const int i = blockIdx.x;
    for (int j = i * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
        v[j] = price_dual(price, j, scale, integral);
    const double* row = c + (i64)i * n;
    double best = 1.0 / 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) best = fmin(best, row[j] - price_dual(price, j, scale, integral));
    part[threadIdx.x] = best;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] = fmin(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    const double ui = part[0];
    u[i] = ui;
    const int a = assigned[i];
    bool tight = false;
    if (a >= 0) {
        const double ca = row[a], va = price_dual(price, a, scale, integral);
        tight = ca - ui - va <= eps + eps_rel * fmax(fmax(fabs(ca), fabs(ui)), fabs(va));
    }
    col4row[i] = tight ? a : -1;
    if (tight) {
        row4col[a] = i;
        atomicAdd(kept, 1);
    }
}

// The dense auction's int64 costs in one pass (auction.py, _dense_problem_gpu): integer-valued costs
// exactly, (c - lo) * factor (factor = n + 1: eps = 1 is then exact); others rint((c - lo) * scale).
extern "C" __global__ void dense_to_int(const double* __restrict__ c, i64 size, double lo, double scale,
                                        i64 factor, i64* __restrict__ out) {
    for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < size; k += (i64)gridDim.x * blockDim.x)
        out[k] = factor ? (i64)(c[k] - lo) * factor : (i64)rint((c[k] - lo) * scale);
}
