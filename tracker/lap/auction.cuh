// Device code of the GPU auction shared by auction.cu (the kernels launched once per bidding round)
// and auction_phase.cu (a whole phase in one cooperative launch). See auction.cu for the algorithm.
#pragma once

typedef long long i64;

#define LL_INF 0x3fffffffffffffffLL

struct Problem {
    int n;                    // rows == columns
    const i64* indptr;        // CSR: n + 1 offsets (unused when dense)
    const int* indices;       // CSR: column of each edge (unused when dense)
    const i64* cost;          // CSR: per edge; dense: n * n row-major
    i64 single_gap;           // (second - best) used for a row with one edge
};

template <bool DENSE>
__device__ __forceinline__ void row_range(const Problem& p, int i, i64& start, i64& end) {
    if (DENSE) {
        start = (i64)i * p.n;
        end = start + p.n;
    } else {
        start = p.indptr[i];
        end = p.indptr[i + 1];
    }
}

template <bool DENSE>
__device__ __forceinline__ int column_of(const Problem& p, i64 k, i64 start) {
    return DENSE ? (int)(k - start) : p.indices[k];
}

// Merge another (best value, its column, second-best value) into this lane's (ties: the lower column).
__device__ __forceinline__ void merge_best_two(i64 o1, int oj, i64 o2, i64& b1, int& j1, i64& b2) {
    if (o1 < b1 || (o1 == b1 && oj < j1)) {
        b2 = min(b1, o2);
        b1 = o1;
        j1 = oj;
    } else {
        b2 = min(b2, o1);
    }
}

// Insert the value v of column j into this lane's best two (ties: the lower column).
__device__ __forceinline__ void insert_best_two(i64 v, int j, i64& b1, int& j1, i64& b2) {
    if (v < b1 || (v == b1 && j < j1)) {
        b2 = b1;
        b1 = v;
        j1 = j;
    } else if (v < b2) {
        b2 = v;
    }
}

// The warp's best two: every lane ends with the merge of all 32 lanes' (b1, j1, b2).
__device__ __forceinline__ void warp_best_two(i64& b1, int& j1, i64& b2) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const i64 o1 = __shfl_xor_sync(0xffffffffu, b1, off), o2 = __shfl_xor_sync(0xffffffffu, b2, off);
        const int oj = __shfl_xor_sync(0xffffffffu, j1, off);
        merge_best_two(o1, oj, o2, b1, j1, b2);
    }
}

// Best (value, column) and second-best value of row i over cost + price; all
// lanes of the warp return the same result.
template <bool DENSE>
__device__ __forceinline__ void best_two(const Problem& p, const i64* price, int i, int lane,
                                         i64& b1, int& j1, i64& b2) {
    i64 start, end;
    row_range<DENSE>(p, i, start, end);
    b1 = LL_INF;
    b2 = LL_INF;
    j1 = 0x7fffffff;
    for (i64 k = start + lane; k < end; k += 32) {
        const int j = column_of<DENSE>(p, k, start);
        insert_best_two(p.cost[k] + price[j], j, b1, j1, b2);
    }
    warp_best_two(b1, j1, b2);
}

// Append `push` entries of a warp (all 32 lanes call it) to list/count.
__device__ __forceinline__ void warp_append(bool push, int value, int* list, int* count, int lane) {
    unsigned mask = __ballot_sync(0xffffffffu, push);
    if (mask == 0) return;
    int base = 0;
    if (lane == 0) base = atomicAdd(count, __popc(mask));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (push) list[base + __popc(mask & ((1u << lane) - 1u))] = value;
}

// ---------------------------------------------------------------- steps ---

// Row i's bid from its best value b1 (at column j1) and second-best b2 (one thread).
__device__ __forceinline__ void place_bid(const Problem& p, const i64* price, int i, i64 b1, int j1, i64 b2,
                                          i64 eps, int* target, i64* bid, i64* col_bid, int* error) {
    if (b1 >= LL_INF) {  // a row without edges: infeasible (auction.py prevents this)
        atomicExch(error, 1);
        target[i] = -1;
        return;
    }
    const i64 gap = (b2 >= LL_INF) ? p.single_gap : (b2 - b1);
    const i64 b = price[j1] + gap + eps;
    target[i] = j1;
    bid[i] = b;
    atomicMax((unsigned long long*)&col_bid[j1], (unsigned long long)b);
}

// Bidding. CSR rows are short: warp w handles list entries w, w + nwarps, ... Dense rows are long: when
// few rows bid, G warps of one block share a row (G a power of two up to the block's warps, as many as
// the count allows), so that a round of the phase's tail is not one warp's latency-bound scan of n
// entries. All threads of a block make the same number of trips (the group merge uses block barriers).
template <bool DENSE>
__device__ void bid_step(const Problem& p, const i64* price, const int* list, int count, i64 eps,
                         int* target, i64* bid, i64* col_bid, int warp, int nwarps, int lane, int* error) {
    if constexpr (!DENSE) {
        for (int t = warp; t < count; t += nwarps) {
            int i = list[t];
            i64 b1, b2;
            int j1;
            best_two<DENSE>(p, price, i, lane, b1, j1, b2);
            if (lane == 0) place_bid(p, price, i, b1, j1, b2, eps, target, bid, col_bid, error);
        }
    } else {
        __shared__ i64 s_b1[32], s_b2[32];
        __shared__ int s_j1[32];
        const int per_block = blockDim.x >> 5, wib = threadIdx.x >> 5;
        int G = 1;
        while (G < per_block && G * 2 * count <= nwarps) G *= 2;
        const int groups = nwarps / G, group = warp / G, rank = warp % G;
        for (int base = 0; base < count; base += groups) {
            const int t = base + group;
            const int i = t < count ? list[t] : -1;
            i64 b1 = LL_INF, b2 = LL_INF;
            int j1 = 0x7fffffff;
            if (i >= 0) {
                const i64* row = p.cost + (i64)i * p.n;
#pragma unroll 4
                for (int j = rank * 32 + lane; j < p.n; j += 32 * G) insert_best_two(row[j] + price[j], j, b1, j1, b2);
            }
            warp_best_two(b1, j1, b2);
            if (G > 1) {
                if (lane == 0) {
                    s_b1[wib] = b1;
                    s_b2[wib] = b2;
                    s_j1[wib] = j1;
                }
                __syncthreads();
                if (rank == 0) {  // the group's first warp merges its G warps
                    b1 = b2 = LL_INF;
                    j1 = 0x7fffffff;
                    if (lane < G) {
                        b1 = s_b1[wib + lane];
                        b2 = s_b2[wib + lane];
                        j1 = s_j1[wib + lane];
                    }
                    warp_best_two(b1, j1, b2);
                }
                __syncthreads();
            }
            if (i >= 0 && rank == 0 && lane == 0) place_bid(p, price, i, b1, j1, b2, eps, target, bid, col_bid, error);
        }
    }
}

// The conflicts of a Jacobi round, in two steps with a barrier between them (as the gated auction's, in
// gated_auction.cu). nominate: every listed row whose bid is its column's highest puts itself forward, and the
// LOWEST row among equal highest bids is kept (atomicMax of `bound - i`, the winner at rest being -1), so which
// of several equal bids wins does not depend on the order of the atomics and tied costs give the same
// assignment on every run. claim: the nominated row takes its column (the previous owner is evicted) and puts
// the column's highest bid and winner back at rest (0 and -1) for the next round; the others, and the evicted,
// go to `next`. (A loser that reads the winner after that reset sees -1, never its own `bound - i`: it loses
// all the same, so the reset needs no barrier of its own.) One thread per list entry.
__device__ void nominate_step(const int* list, int count, const int* target, const i64* bid, const i64* col_bid,
                              int* winner, int bound, int tid, int nthreads) {
    for (int t = tid; t < count; t += nthreads) {
        const int i = list[t];
        const int j = target[i];
        if (j >= 0 && bid[i] == col_bid[j]) atomicMax(&winner[j], bound - i);
    }
}

__device__ void claim_step(const int* list, int count, const int* target, const i64* bid, i64* col_bid,
                           int* winner, int* owner, int* assigned, i64* price, int* next, int* next_count,
                           int bound, int tid, int nthreads) {
    int lane = threadIdx.x & 31;
    // warp-uniform loop so that warp_append can use full masks
    for (int base = tid - lane; base < count; base += nthreads) {
        int t = base + lane;
        bool push_self = false, push_old = false;
        int i = -1, old = -1;
        if (t < count) {
            i = list[t];
            int j = target[i];
            if (j >= 0) {
                if (*(volatile int*)&winner[j] == bound - i) {
                    col_bid[j] = 0;  // (the bids were all read by nominate, before a barrier)
                    winner[j] = -1;
                    old = owner[j];
                    owner[j] = i;
                    price[j] = bid[i];
                    assigned[i] = j;
                    if (old >= 0) {
                        assigned[old] = -1;
                        push_old = true;
                    }
                } else {
                    push_self = true;
                }
            }
        }
        warp_append(push_self, i, next, next_count, lane);
        warp_append(push_old, old, next, next_count, lane);
    }
}

// The queue of a warp's Gauss-Seidel tail (shared memory): the n listed entries, sorted by index (lane 0,
// insertion sort: a few dozen entries). The list's order comes from atomics, and one bid at a time depends on it,
// so the same input gives the same assignment on every run. All 32 lanes call it.
__device__ __forceinline__ void load_queue_by_index(int* queue, const int* list, int n, int lane) {
    for (int t = lane; t < n; t += 32) queue[t] = list[t];
    __syncwarp();
    if (lane == 0) {
        for (int a = 1; a < n; ++a) {
            const int x = queue[a];
            int b = a;
            for (; b > 0 && queue[b - 1] > x; --b) queue[b] = queue[b - 1];
            queue[b] = x;
        }
    }
    __syncwarp();
}

// Gauss-Seidel finish of a phase (at most GS_MAX_ROWS rows unassigned): warp 0 bids for one row at a
// time with the latest prices. Late in a phase the unassigned rows form chains of single displacements
// (a winning bid evicts an owner, who bids next), and a Jacobi round costs three block barriers per link
// of such a chain. The bid is the same as bid_step's; the queue is FIFO, from the rows in index order (the
// list's order comes from atomics, and one bid at a time depends on it: so the same input gives the same
// assignment on every run). Returns the rounds done (one bid each) in warp 0; the rows still queued (only when
// max_iters is reached) go back to list/count.
#define GS_MAX_ROWS 64

template <bool DENSE>
__device__ int gauss_seidel_tail(const Problem& p, i64* price, int* list, int* count, i64 eps, int* owner,
                                 int* assigned, int max_iters, int it, int* error) {
    __shared__ int queue[GS_MAX_ROWS];
    if (threadIdx.x >= 32) return it;
    const int lane = threadIdx.x;
    int n_queued = *(volatile int*)count;
    load_queue_by_index(queue, list, n_queued, lane);
    int head = 0;
    while (n_queued > 0 && it < max_iters) {
        const int i = queue[head];
        i64 b1, b2;
        int j1;
        best_two<DENSE>(p, price, i, lane, b1, j1, b2);
        if (b1 >= LL_INF) {  // a row without edges: infeasible (auction.py prevents this)
            if (lane == 0) atomicExch(error, 1);
            break;
        }
        int evicted = -1;
        if (lane == 0) {
            const i64 gap = (b2 >= LL_INF) ? p.single_gap : (b2 - b1);
            price[j1] += gap + eps;
            evicted = owner[j1];
            owner[j1] = i;
            assigned[i] = j1;
            if (evicted >= 0) assigned[evicted] = -1;
        }
        evicted = __shfl_sync(0xffffffffu, evicted, 0);
        head = (head + 1) % GS_MAX_ROWS;
        --n_queued;
        if (evicted >= 0) {
            if (lane == 0) queue[(head + n_queued) % GS_MAX_ROWS] = evicted;
            ++n_queued;
        }
        __syncwarp();  // the new price, owner and queue entry are seen by the whole warp
        ++it;
    }
    for (int t = lane; t < n_queued; t += 32) list[t] = queue[(head + t) % GS_MAX_ROWS];
    if (lane == 0) *count = n_queued;
    return it;
}

// Kernels take the problem as separate arguments (CuPy passes no structs).
#define PROBLEM_ARGS int n_, const i64* indptr_, const int* indices_, const i64* cost_, i64 single_gap_
#define MAKE_PROBLEM Problem p; p.n = n_; p.indptr = indptr_; p.indices = indices_; p.cost = cost_; \
    p.single_gap = single_gap_

