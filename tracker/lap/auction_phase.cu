// One epsilon phase of the dense GPU auction in ONE cooperative launch (auction.py, auction_square).
//
// The rounds of a phase are the same Jacobi steps as auction.cu's kernels (bid: G warps per row when few
// rows bid; nominate and claim: the highest bid of each column wins, the lowest row among equal ones),
// separated by grid-wide barriers
// (cooperative groups) instead of kernel launches and host reads of the unassigned count. A phase's end is
// a long run of rounds with few rows each, where launching three kernels and reading the count from the
// host cost several times the work of the round. Loaded with cooperative groups enabled; launched with at
// most as many blocks as can be resident at once (cuLaunchCooperativeKernel checks).

#include <cooperative_groups.h>

#include "auction.cuh"

namespace cg = cooperative_groups;

// Rounds until at most stop_count rows are unassigned (0: the end of the phase), an error, or max_rounds.
// counts[parity] is the current count (list0 / list1 by parity, as in auction_tail); info[0] = rounds done,
// info[1] = the parity at the end.
extern "C" __global__ void __launch_bounds__(256, 4)
    auction_phase_dense(PROBLEM_ARGS, i64* price, int* list0, int* list1, int* counts, int parity, i64 eps,
                        int* target, i64* bid, i64* col_bid, int* winner, int* owner, int* assigned,
                        int max_rounds, int stop_count, int* info, int* error) {
    MAKE_PROBLEM;
    cg::grid_group grid = cg::this_grid();
    const int tid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, warp = tid >> 5, nwarps = nthreads >> 5;
    int rounds = 0;
    while (rounds < max_rounds) {
        int* cur = parity ? list1 : list0;
        int* nxt = parity ? list0 : list1;
        int* nxt_count = counts + (1 - parity);
        const int count = *(volatile int*)(counts + parity);  // written before the last barrier
        if (count <= stop_count || *(volatile int*)error) break;
        if (tid == 0) *nxt_count = 0;  // the previous round read it at its top, three barriers ago
        bid_step<true>(p, price, cur, count, eps, target, bid, col_bid, warp, nwarps, lane, error);
        grid.sync();
        nominate_step(cur, count, target, bid, col_bid, winner, p.n, tid, nthreads);
        grid.sync();
        claim_step(cur, count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count, p.n, tid,
                   nthreads);
        grid.sync();
        parity = 1 - parity;
        ++rounds;
    }
    if (tid == 0) {
        info[0] = rounds;
        info[1] = parity;
    }
}
