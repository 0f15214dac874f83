// All Sinkhorn half-steps of the DGS start (dgs.py, _sinkhorn) in ONE cooperative launch over the whole
// GPU: grid-wide barriers (cooperative groups) between half-steps instead of one sk_lse4 launch each
// (dgs.cu), whose launch cost exceeds the arithmetic of a half-step up to a few thousand rows. Loaded with
// cooperative groups enabled; launched with at most as many blocks as can be resident at once
// (cuLaunchCooperativeKernel checks).

#include <cooperative_groups.h>

#include "dgs.cuh"

namespace cg = cooperative_groups;

// Every half-step of the annealing (temps[0..iters)), the rows of each split over all warps of the launch.
// Each block stages the other side's prices in shared memory, read past L1 (ld.global.cg) because other
// blocks wrote them. The same arithmetic as one sk_lse4 launch per half-step, row for row: the same prices.
extern "C" __global__ void __launch_bounds__(512, 2)
sk_anneal_grid(int n, int ld, const float* __restrict__ c, const float* __restrict__ c_t, float* u, float* v,
               const float* __restrict__ temps, int iters) {
    extern __shared__ float4 staged[];  // ld / 4 float4: the other side's prices
    cg::grid_group grid = cg::this_grid();
    int nv = ld >> 2;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int k = 0; k < iters; ++k) {
        float e = temps[k];
        for (int half = 0; half < 2; ++half) {
            const float* other = half ? u : v;
            for (int q = threadIdx.x; q < nv; q += blockDim.x)
                staged[q] = __ldcg(reinterpret_cast<const float4*>(other) + q);
            __syncthreads();
            lse_rows4(n, ld, half ? c_t : c, staged, half ? v : u, e, warp, nwarps, threadIdx.x & 31);
            grid.sync();  // also keeps `staged` until every warp of the block is done with it
        }
    }
}
