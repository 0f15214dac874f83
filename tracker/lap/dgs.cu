// Deep Greedy Switching (Roverso et al. 2010) on the GPU, for square dense
// min-cost problems (float64).
//
// One round: difference evaluation (one warp per agent: the best 2-exchange
// with every other agent), conflict check (each proposal claims both agents
// with a packed (gain, proposer) atomicMax; a proposal survives only if it
// holds both claims, so surviving 2-exchanges are disjoint and include the
// best one), and parallel switching of the survivors. Each survivor improves
// the objective by exactly its gain because disjoint exchanges do not
// interact. Agent difference evaluation covers every 2-exchange (the job view
// of the paper enumerates the same exchanges).

typedef unsigned long long u64;

extern "C" __global__ void dgs_eval(int n, const double* __restrict__ cost, const double* __restrict__ cost_t,
                                    const int* __restrict__ tau, const int* __restrict__ sigma,
                                    const double* __restrict__ cur, double* gain, int* partner, u64* claim,
                                    double tol) {
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int i = warp; i < n; i += nwarps) {
        int a = tau[i];
        double cia = cur[i];
        const double* row = cost + (long long)i * n;
        const double* col_a = cost_t + (long long)a * n;  // cost[., a]
        double best = tol;
        int best_b = 0x7fffffff;
        for (int b = lane; b < n; b += 32) {
            int ip = sigma[b];
            double d = cia + cur[ip] - row[b] - col_a[ip];
            if (b != a && d > best) {
                best = d;
                best_b = b;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            double od = __shfl_xor_sync(0xffffffffu, best, off);
            int ob = __shfl_xor_sync(0xffffffffu, best_b, off);
            if (od > best || (od == best && ob < best_b)) {
                best = od;
                best_b = ob;
            }
        }
        if (lane == 0) {
            bool found = best_b != 0x7fffffff;
            gain[i] = found ? best : 0.0;
            partner[i] = found ? sigma[best_b] : -1;
            claim[i] = 0ull;
        }
    }
}

__device__ __forceinline__ u64 dgs_key(double gain, int i) {
    float g = (float)gain;  // gain > 0: IEEE bits order like the values
    return ((u64)__float_as_uint(g) << 32) | (unsigned)i;
}

extern "C" __global__ void dgs_select(int n, const double* gain, const int* partner, u64* claim) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int p = partner[i];
        if (p < 0) continue;
        u64 key = dgs_key(gain[i], i);
        atomicMax(&claim[i], key);
        atomicMax(&claim[p], key);
    }
}

extern "C" __global__ void dgs_apply(int n, const double* __restrict__ cost, const double* gain,
                                     const int* partner, const u64* claim, int* tau, int* sigma, double* cur,
                                     int* applied) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int p = partner[i];
        if (p < 0) continue;
        u64 key = dgs_key(gain[i], i);
        if (claim[i] != key || claim[p] != key) continue;
        int a = tau[i], b = tau[p];
        tau[i] = b;
        tau[p] = a;
        sigma[a] = p;
        sigma[b] = i;
        cur[i] = cost[(long long)i * n + b];
        cur[p] = cost[(long long)p * n + a];
        atomicAdd(applied, 1);
    }
}
