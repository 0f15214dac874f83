// Device helpers and kernels shared by hungarian_tree.cu and hungarian_classical.cu
// (Date & Nagi 2016, Alg. 1 initial reduction, and our greedy zero matching).
// Included textually by tracker.lap._cuda.load_module (and by nvcc when compiling a .cu by hand).

#pragma once

#define INF_D __longlong_as_double(0x7ff0000000000000LL)

// "Zero" slack test: slack <= eps_abs + eps_rel * magnitude of the terms of C - u - v (their rounding
// error is relative to the largest of them). Integer costs: eps_abs = 0.5, eps_rel = 0 (exact);
// float costs: eps_abs = 0, eps_rel = 2^-40.
__device__ __forceinline__ bool is_tight(double s, double c, double u, double v, double eps_abs, double eps_rel) {
    return s <= eps_abs + eps_rel * fmax(fabs(c), fmax(fabs(u), fabs(v)));
}

__device__ __forceinline__ double warp_min(double x) {
    for (int o = 16; o > 0; o >>= 1) x = fmin(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// Minimum over the block (blockDim.x a multiple of 32, <= 1024); result valid in every thread.
__device__ double block_min(double x) {
    __shared__ double red[32];
    __shared__ double result;
    x = warp_min(x);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = x;
    __syncthreads();
    if (warp == 0) {
        const int nw = blockDim.x >> 5;
        double y = lane < nw ? red[lane] : INF_D;
        y = warp_min(y);
        if (lane == 0) result = y;
    }
    __syncthreads();
    const double r = result;
    __syncthreads();
    return r;
}

// ---------------------------------------------------------------------------------------------
// Alg. 1: initial reduction
// ---------------------------------------------------------------------------------------------

// One block per row: u[i] = min_j C[i, j].
extern "C" __global__ void row_min(const double* __restrict__ c, int n, int m, double* __restrict__ u) {
    const int i = blockIdx.x;
    if (i >= n) return;
    const double* row = c + (long long)i * m;
    double best = INF_D;
    for (int j = threadIdx.x; j < m; j += blockDim.x) best = fmin(best, row[j]);
    best = block_min(best);
    if (threadIdx.x == 0) u[i] = best;
}

// Block (32, 8); grid (ceil(m/32), chunks). partial[chunk * m + j] = min over the chunk's rows of C - u.
extern "C" __global__ void col_min_partial(const double* __restrict__ c, const double* __restrict__ u, int n,
                                           int m, int rows_per_chunk, double* __restrict__ partial) {
    __shared__ double s[8][33];
    const int j = blockIdx.x * 32 + threadIdx.x;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = min(n, r0 + rows_per_chunk);
    double best = INF_D;
    if (j < m)
        for (int i = r0 + threadIdx.y; i < r1; i += 8) best = fmin(best, c[(long long)i * m + j] - u[i]);
    s[threadIdx.y][threadIdx.x] = best;
    __syncthreads();
    if (threadIdx.y == 0 && j < m) {
        for (int k = 1; k < 8; ++k) best = fmin(best, s[k][threadIdx.x]);
        partial[(long long)blockIdx.y * m + j] = best;
    }
}

extern "C" __global__ void col_min_final(const double* __restrict__ partial, int chunks, int m,
                                         double* __restrict__ v) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    double best = INF_D;
    for (int k = 0; k < chunks; ++k) best = fmin(best, partial[(long long)k * m + j]);
    v[j] = best;
}

// ---------------------------------------------------------------------------------------------
// Initial primal solution (ours, standard), in rounds launched from the host (hungarian_tree.py,
// GREEDY_ROUNDS): every free row proposes a free zero-slack column, the first at or after its own index
// (cyclically: on a matrix of ties, rows propose different columns), and each column takes its LOWEST
// proposing row (atomicMin): which row wins does not depend on the order of the atomics, so tied costs give
// the same matching on every run. greedy_propose: one warp per row; greedy_accept: one thread per column
// (pick[j] is INT_MAX at rest and put back there).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void greedy_propose(const double* __restrict__ c, const double* __restrict__ u,
                                          const double* __restrict__ v, int n, int m, double eps,
                                          double eps_rel, const int* __restrict__ col4row,
                                          const int* __restrict__ row4col, int* pick) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= n) return;
    const int i = warp;
    if (col4row[i] != -1) return;
    const double ui = u[i];
    const double* row = c + (long long)i * m;
    const int first = i % m;
    for (int k0 = 0; k0 < m; k0 += 32) {
        const int k = k0 + lane;
        const int j = (first + k) % m;
        bool z = false;
        if (k < m) {
            const double cij = row[j], vj = v[j];
            z = row4col[j] == -1 && is_tight(cij - ui - vj, cij, ui, vj, eps, eps_rel);
        }
        const unsigned mask = __ballot_sync(0xffffffffu, z);
        if (mask) {
            if (lane == __ffs(mask) - 1) atomicMin(&pick[j], i);
            return;
        }
    }
}

extern "C" __global__ void greedy_accept(int m, int* pick, int* col4row, int* row4col) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const int i = pick[j];
    if (i == 0x7fffffff) return;
    pick[j] = 0x7fffffff;
    row4col[j] = i;
    col4row[i] = j;
}


// Alg. 5 reverse pass: the root (free row) of the tree that reached column j. Pc[j] is the row that
// reached column j, Pr[i] the column through which row i entered its tree (-1 at the root); max_len
// bounds the walk.
__device__ __forceinline__ int tree_root(int j, const int* Pr, const int* Pc, int max_len) {
    int i = Pc[j];
    for (int g = 0; Pr[i] != -1 && g <= max_len; ++g) i = Pc[Pr[i]];
    return i;
}

// Alg. 6 augmentation: flip the alternating path from free column j back to its root.
__device__ __forceinline__ void flip_path(int j, const int* Pr, const int* Pc, int* col4row, int* row4col,
                                          int max_len) {
    int col = j, row = Pc[j];
    for (int g = 0; g <= max_len; ++g) {
        const int next = Pr[row];
        col4row[row] = col;
        row4col[col] = row;
        if (next == -1) break;
        col = next;
        row = Pc[col];
    }
}
