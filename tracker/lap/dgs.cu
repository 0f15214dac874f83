// Deep Greedy Switching (Roverso et al. 2010) on the GPU, for square dense
// min-cost problems, with a cheap start (dgs.py drives the kernels).
//
// Start (float32 copy of the cost scaled to [0, 1]):
//   sk_lse4 / sk_lse8h
//                one log-domain Sinkhorn half-step (one warp per row):
//                out[i] = -e log sum_j exp(-(c[i,j] - other[j]) / e); run on
//                the matrix and its transpose with e annealed, it gives
//                approximate dual prices u, v.
//   sk_anneal_grid (dgs_anneal.cu)
//                all the half-steps of sk_lse4 in one cooperative launch,
//                for moderate n (launch-bound there).
//   gr_propose / gr_accept
//                one round of parallel greedy on the reduced cost
//                c[i,j] - u[i] - v[j] (u = v = 0: plain greedy): every free
//                row proposes its cheapest free column, every column keeps
//                its cheapest proposer (atomicMin of a packed (key, row)).
// Switching (float64, the original cost), one round =
//   dgs_eval     agent difference evaluation, one block per row i: the best
//                2-exchange with any other row k,
//                gain(i,k) = c[i,ti] + c[k,tk] - c[i,tk] - c[k,ti]
//                (row i staged in shared memory when it fits, column ti read
//                contiguously from the transpose);
//   dgs_select   conflict check: each proposal claims both rows with a packed
//                (gain, proposer) atomicMax; a proposal survives only if it
//                holds both claims, so the survivors are disjoint and include
//                the round's best exchange;
//   dgs_apply    parallel switching of the survivors (each improves the
//                objective by exactly its gain: disjoint exchanges do not
//                interact);
//   dgs_check    one thread: counts the round, sets `done` when nothing was
//                applied. Every kernel returns at once once `done` is set, so
//                the host can queue several rounds between synchronisations.
// The job difference evaluation of the paper enumerates the same 2-exchanges
// (the pair of jobs of two agents), so agent evaluation alone is complete.

typedef unsigned long long u64;

#define INT_BIG 0x7fffffff

// ---------------------------------------------------------------- Sinkhorn

#include "dgs.cuh"

extern "C" __global__ void sk_lse4(int n, int ld, const float* __restrict__ c, const float* __restrict__ other,
                                   float* __restrict__ out, float e) {
    lse_rows4(n, ld, c, reinterpret_cast<const float4*>(other), out, e,
              (blockIdx.x * blockDim.x + threadIdx.x) >> 5, (gridDim.x * blockDim.x) >> 5, threadIdx.x & 31);
}

extern "C" __global__ void sk_lse8h(int n, int ld, const unsigned short* __restrict__ c,
                                    const float* __restrict__ other, float* __restrict__ out, float e) {
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    float inv_e = 1.0f / e;
    int nv = ld >> 3;
    for (int i = warp; i < n; i += nwarps) {
        const uint4* row = reinterpret_cast<const uint4*>(c + (long long)i * ld);
        float m = __int_as_float(0x7f800000), s = 0.0f;
        for (int q = lane; q < nv; q += 32) {
            uint4 r = row[q];
            const unsigned short* h = reinterpret_cast<const unsigned short*>(&r);
            const float* o = other + q * 8;
            float x[8];
#pragma unroll
            for (int t = 0; t < 8; ++t) x[t] = h2f(h[t]) - o[t];
            lse_accum(x, 8, m, s, inv_e);
        }
        lse_finish(lane, m, s, e, inv_e, out + i);
    }
}

// ------------------------------------------------------------------ greedy

__device__ __forceinline__ unsigned ord_f32(float x) {  // unsigned order = float order
    unsigned b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

extern "C" __global__ void gr_propose(int n, const float* __restrict__ c, const float* __restrict__ u,
                                      const float* __restrict__ v, const int* __restrict__ tau,
                                      const int* __restrict__ sig, u64* colkey) {
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int i = warp; i < n; i += nwarps) {
        if (tau[i] >= 0) continue;
        const float* row = c + (long long)i * n;
        float best = __int_as_float(0x7f800000);
        int bj = INT_BIG;
        for (int j = lane; j < n; j += 32) {
            if (sig[j] >= 0) continue;
            float x = row[j] - v[j];
            if (x < best || (x == best && j < bj)) {
                best = x;
                bj = j;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, off);
            int oj = __shfl_xor_sync(0xffffffffu, bj, off);
            if (ob < best || (ob == best && oj < bj)) {
                best = ob;
                bj = oj;
            }
        }
        if (lane == 0 && bj != INT_BIG) {
            u64 key = ((u64)ord_f32(best - u[i]) << 32) | (unsigned)i;
            atomicMin(&colkey[bj], key);
        }
    }
}

extern "C" __global__ void gr_accept(int n, u64* colkey, int* tau, int* sig, int* count) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        u64 key = colkey[j];
        if (key == ~0ull) continue;
        int i = (int)(key & 0xffffffffu);
        tau[i] = j;
        sig[j] = i;
        colkey[j] = ~0ull;
        atomicAdd(count, 1);
    }
}

// --------------------------------------------------------------- switching

// (best, key) <- the arg-max over the warp, ties to the smaller key; valid in every lane.
__device__ __forceinline__ void warp_argmax(double& best, int& key) {
    for (int off = 16; off > 0; off >>= 1) {
        const double other = __shfl_xor_sync(0xffffffffu, best, off);
        const int other_key = __shfl_xor_sync(0xffffffffu, key, off);
        if (other > best || (other == best && other_key < key)) {
            best = other;
            key = other_key;
        }
    }
}

extern "C" __global__ void dgs_eval(int n, const double* __restrict__ cost, const double* __restrict__ cost_t,
                                    const int* __restrict__ tau, const double* __restrict__ cur, double* gain,
                                    int* partner, u64* claim, double tol, int use_smem,
                                    const int* __restrict__ done) {
    if (*done) return;
    extern __shared__ double srow[];
    __shared__ double red_g[32];
    __shared__ int red_k[32];
    int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, nw = blockDim.x >> 5;
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        const double* row = cost + (long long)i * n;
        if (use_smem) {
            for (int j = tid; j < n; j += blockDim.x) srow[j] = row[j];
            __syncthreads();
        }
        int a = tau[i];
        double ci = cur[i];
        const double* col_a = cost_t + (long long)a * n;  // cost[., a]
        double best = tol;
        int bk = INT_BIG;
        for (int k = tid; k < n; k += blockDim.x) {
            int b = tau[k];
            double cib = use_smem ? srow[b] : row[b];
            double d = ci + cur[k] - cib - col_a[k];
            if (d > best && k != i) {
                best = d;
                bk = k;
            }
        }
        warp_argmax(best, bk);
        if (lane == 0) {
            red_g[wid] = best;
            red_k[wid] = bk;
        }
        __syncthreads();
        if (wid == 0) {
            best = lane < nw ? red_g[lane] : tol;
            bk = lane < nw ? red_k[lane] : INT_BIG;
            warp_argmax(best, bk);
            if (lane == 0) {
                bool found = bk != INT_BIG;
                gain[i] = found ? best : 0.0;
                partner[i] = found ? bk : -1;
                claim[i] = 0ull;
            }
        }
        __syncthreads();  // shared row and reduction slots are reused by the next row
    }
}

__device__ __forceinline__ u64 dgs_key(double gain, int i) {
    float g = (float)gain;  // gain > 0: IEEE bits order like the values
    return ((u64)__float_as_uint(g) << 32) | (unsigned)i;
}

extern "C" __global__ void dgs_select(int n, const double* gain, const int* partner, u64* claim,
                                      const int* done) {
    if (*done) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int p = partner[i];
        if (p < 0) continue;
        u64 key = dgs_key(gain[i], i);
        atomicMax(&claim[i], key);
        atomicMax(&claim[p], key);
    }
}

extern "C" __global__ void dgs_apply(int n, const double* __restrict__ cost, const double* gain,
                                     const int* partner, const u64* claim, int* tau, double* cur, int* applied,
                                     const int* done) {
    if (*done) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int p = partner[i];
        if (p < 0) continue;
        u64 key = dgs_key(gain[i], i);
        if (claim[i] != key || claim[p] != key) continue;
        int a = tau[i], b = tau[p];
        tau[i] = b;
        tau[p] = a;
        cur[i] = cost[(long long)i * n + b];
        cur[p] = cost[(long long)p * n + a];
        atomicAdd(applied, 1);
    }
}

// stats[0] = rounds run, stats[1] = exchanges applied
extern "C" __global__ void dgs_check(int* applied, int* done, long long* stats) {
    if (*done) return;
    int a = *applied;
    stats[0] += 1;
    stats[1] += a;
    if (a == 0) *done = 1;
    *applied = 0;
}
