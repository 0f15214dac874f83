// One pass over a dense cost matrix for the input checks of every dense GPU solver
// (_gpu_common.summarize_dense): min and max of the finite entries, and counts of +inf,
// of invalid entries (NaN, -inf) and of finite entries that are not integers below `lim`.
//
// Why a kernel of its own: CuPy's generic reductions to a single value run in one thread block,
// so each of the five checks cost a full pass at a fraction of the bandwidth (~70 ms per pass at
// n = 20000, 3.2 GB). Here the grid strides over the matrix once; every block writes its partial
// results into one array, which the host reads once and combines (a few thousand values).

#define SUMMARY_THREADS 256
#define INF_D __longlong_as_double(0x7ff0000000000000LL)

struct Partial {
    double lo, hi;
    long long posinf, invalid, nonintegral;
};

__device__ __forceinline__ void combine(Partial& a, const Partial& b) {
    a.lo = fmin(a.lo, b.lo);
    a.hi = fmax(a.hi, b.hi);
    a.posinf += b.posinf;
    a.invalid += b.invalid;
    a.nonintegral += b.nonintegral;
}

__device__ __forceinline__ Partial shuffle_down(const Partial& a, int offset) {
    Partial b;
    b.lo = __shfl_down_sync(0xffffffffu, a.lo, offset);
    b.hi = __shfl_down_sync(0xffffffffu, a.hi, offset);
    b.posinf = __shfl_down_sync(0xffffffffu, a.posinf, offset);
    b.invalid = __shfl_down_sync(0xffffffffu, a.invalid, offset);
    b.nonintegral = __shfl_down_sync(0xffffffffu, a.nonintegral, offset);
    return b;
}

// partial: five doubles per block: lo, hi and the counts of +inf, invalid and non-integral entries (exact as
// doubles: a count never exceeds the 2^53 entries a double counts exactly).
extern "C" __global__ void __launch_bounds__(SUMMARY_THREADS)
dense_summary(const double* __restrict__ cost, long long size, double lim, double* __restrict__ partial) {
    Partial mine = {INF_D, -INF_D, 0, 0, 0};
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < size; k += stride) {
        double x = cost[k];
        if (isfinite(x)) {
            mine.lo = fmin(mine.lo, x);
            mine.hi = fmax(mine.hi, x);
            mine.nonintegral += (x != rint(x) || fabs(x) >= lim);
        } else if (x > 0) {
            mine.posinf += 1;
        } else {
            mine.invalid += 1;  // NaN or -inf
        }
    }
    // warp, then block
    for (int offset = 16; offset > 0; offset >>= 1) combine(mine, shuffle_down(mine, offset));
    __shared__ Partial per_warp[SUMMARY_THREADS / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) per_warp[warp] = mine;
    __syncthreads();
    if (warp == 0) {
        mine = lane < SUMMARY_THREADS / 32 ? per_warp[lane] : Partial{INF_D, -INF_D, 0, 0, 0};
        for (int offset = 16; offset > 0; offset >>= 1) combine(mine, shuffle_down(mine, offset));
        if (lane == 0) {
            double* out = partial + 5 * (long long)blockIdx.x;
            out[0] = mine.lo;
            out[1] = mine.hi;
            out[2] = (double)mine.posinf;
            out[3] = (double)mine.invalid;
            out[4] = (double)mine.nonintegral;
        }
    }
}

// How many columns are some row's cheapest (solver="auto", tracker/lap/__init__.py _auto_dense): one warp per
// row finds its first cheapest column (row-major n x m); the first row to mark a column in hit[] (zeroed
// before) counts it in distinct[0]. Rows without a finite entry count nothing.
extern "C" __global__ void distinct_row_minima(const double* __restrict__ cost, int n, int m, int* __restrict__ hit,
                                               int* __restrict__ distinct) {
    const int lane = threadIdx.x & 31;
    const int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += nwarps) {
        const double* row = cost + (long long)i * m;
        double best = INF_D;
        int arg = 0x7fffffff;
        for (int j = lane; j < m; j += 32) {
            const double x = row[j];
            if (x < best) {  // strict: each lane keeps its first cheapest column
                best = x;
                arg = j;
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const double other = __shfl_xor_sync(0xffffffffu, best, offset);
            const int other_arg = __shfl_xor_sync(0xffffffffu, arg, offset);
            if (other < best || (other == best && other_arg < arg)) {
                best = other;
                arg = other_arg;
            }
        }
        if (lane == 0 && arg < m && atomicExch(&hit[arg], 1) == 0) atomicAdd(distinct, 1);
    }
}
