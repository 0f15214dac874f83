// Gated candidate links on the GPU (driver: gating_gpu.py): a uniform grid (cell size >= the gate
// radius), so every target within the gate of a source lies in one of the 27 cells around the
// source's cell. Every step is a kernel of this module (shipped compiled), so that a fresh machine
// compiles nothing; CuPy only allocates, copies and sorts.
//
// Grid:
//   1. point_bounds: the box of both point sets (min and max per axis), as order-preserving integer
//      keys reduced with atomicMin / atomicMax; non-finite coordinates are flagged.
//   2. target_cells: each target's cell and its rank among its cell's targets (an atomic count per
//      cell: the cell histogram).
//   3. exclusive scan of the histogram (scan_tile_totals, scan_totals, scan_tiles): cell c's targets
//      are [cell_offset[c], cell_offset[c + 1]) of the sorted targets.
//   4. sort_targets: each target to its cell's run (a counting sort; the order inside a cell is that
//      of the atomics, which no result depends on: see the passes below).
// Candidates:
//   5. count_candidates: each source's number of targets within the gate.
//   6. exclusive scan of the counts (the same scan): each source's output range.
//   7. write_candidates: (row, col, squared distance) into that range, then the range sorted by column
//      (the whole output is then sorted by (row, col), whatever the order inside the cells).
// Nearest target:
//   nearest_target scans the same 27 cells for each query's nearest target (the lower index on a tie:
//   independent of the order inside the cells).

#define SCAN_THREADS 256      // threads of every scan block (gating_gpu.py: _SCAN_THREADS)
#define SCAN_ITEMS 8          // values per thread of a scan tile
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)
#define FULL 0xffffffffu

// ---------------------------------------------------------------- 1. bounds --

// Order-preserving map of a double to an unsigned 64-bit key (a < b <=> key(a) < key(b), -0.0 < +0.0);
// the host maps it back (gating_gpu.py: _from_ordered).
__device__ __forceinline__ unsigned long long ordered_key(double x) {
    const long long bits = __double_as_longlong(x);
    return bits >= 0 ? (unsigned long long)bits | 0x8000000000000000ULL : ~(unsigned long long)bits;
}

__device__ __forceinline__ unsigned long long warp_min(unsigned long long v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = min(v, __shfl_xor_sync(FULL, v, offset));
    return v;
}

__device__ __forceinline__ unsigned long long warp_max(unsigned long long v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(FULL, v, offset));
    return v;
}

extern "C" {

// The box of the points of `a` (n_a x 3) and `b` (n_b x 3): keys[0..2] the minimum z, y, x and
// keys[3..5] the maximum, as ordered_key values (the caller sets them to ~0 and 0 first); *nonfinite
// set to 1 if any coordinate is NaN or infinite. Grid-stride; one atomic per warp and key.
__global__ void point_bounds(const double* __restrict__ a, long long n_a, const double* __restrict__ b, long long n_b,
                             unsigned long long* __restrict__ keys, int* __restrict__ nonfinite)
{
    unsigned long long low[3] = {~0ULL, ~0ULL, ~0ULL}, high[3] = {0, 0, 0};
    bool finite = true;
    const long long total = n_a + n_b;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const double* point = i < n_a ? a + 3 * i : b + 3 * (i - n_a);
        for (int axis = 0; axis < 3; ++axis) {
            const double x = point[axis];
            finite = finite && isfinite(x);
            const unsigned long long key = ordered_key(x);
            low[axis] = min(low[axis], key);
            high[axis] = max(high[axis], key);
        }
    }
    for (int axis = 0; axis < 3; ++axis) {
        low[axis] = warp_min(low[axis]);
        high[axis] = warp_max(high[axis]);
    }
    if ((threadIdx.x & 31) == 0) {
        for (int axis = 0; axis < 3; ++axis) {
            atomicMin(&keys[axis], low[axis]);
            atomicMax(&keys[3 + axis], high[axis]);
        }
    }
    if (!finite) atomicExch(nonfinite, 1);
}

}  // extern "C"

// ------------------------------------------------------------------ grid cells --

__device__ __forceinline__ long long cell_of(int cz, int cy, int cx, int ny, int nx) {
    return ((long long)cz * ny + cy) * nx + cx;
}

extern "C" {

// 2. Cell of every target (origin oz, oy, ox; cubic cells of side `cell`; ny x nx cells a plane) and
// its rank in the cell: cell_count[c] ends as the number of targets in cell c (the caller zeroes it).
__global__ void target_cells(const double* __restrict__ target, int n_target, double oz, double oy, double ox,
                             double cell, int ny, int nx, long long* __restrict__ target_cell,
                             long long* __restrict__ target_rank, unsigned long long* __restrict__ cell_count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_target) return;
    // the same arithmetic as the sources' cells in scan_neighbour_cells (and the CPU grid before it)
    const long long cz = (long long)floor((target[3 * i] - oz) / cell);
    const long long cy = (long long)floor((target[3 * i + 1] - oy) / cell);
    const long long cx = (long long)floor((target[3 * i + 2] - ox) / cell);
    const long long c = (cz * ny + cy) * nx + cx;
    target_cell[i] = c;
    target_rank[i] = (long long)atomicAdd(&cell_count[c], 1ULL);
}

// 4. Every target (its position and its index) to its place in its cell's run.
__global__ void sort_targets(const double* __restrict__ target, int n_target, const long long* __restrict__ target_cell,
                             const long long* __restrict__ target_rank, const long long* __restrict__ cell_offset,
                             double* __restrict__ target_sorted, int* __restrict__ target_index)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_target) return;
    const long long k = cell_offset[target_cell[i]] + target_rank[i];
    target_sorted[3 * k] = target[3 * i];
    target_sorted[3 * k + 1] = target[3 * i + 1];
    target_sorted[3 * k + 2] = target[3 * i + 2];
    target_index[k] = i;
}

}  // extern "C"

// ------------------------------------------------------------------------ scan --
// Exclusive prefix sum of int64 values in place, in three launches: the total of every tile of
// SCAN_TILE values, an exclusive scan of those totals in one block, and each tile's own scan plus
// its offset. Sums in integers: the result does not depend on the order of the additions.

// Exclusive scan of one value per thread over the block (blockDim.x == SCAN_THREADS); *block_total
// (shared) receives the sum of all.
__device__ __forceinline__ long long block_exclusive_scan(long long value, long long* warp_totals,
                                                          long long* block_total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long inclusive = value;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const long long other = __shfl_up_sync(FULL, inclusive, offset);
        if (lane >= offset) inclusive += other;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const int n_warps = blockDim.x >> 5;
        long long total = lane < n_warps ? warp_totals[lane] : 0;
        for (int offset = 1; offset < 32; offset <<= 1) {
            const long long other = __shfl_up_sync(FULL, total, offset);
            if (lane >= offset) total += other;
        }
        if (lane < n_warps) warp_totals[lane] = total;  // inclusive over the warps
        if (lane == 31) *block_total = total;
    }
    __syncthreads();
    const long long before = warp == 0 ? 0 : warp_totals[warp - 1];
    const long long result = before + inclusive - value;
    __syncthreads();  // warp_totals may be reused by the caller
    return result;
}

extern "C" {

// Scan launch 1: totals[t] = the sum of tile t (one block of SCAN_THREADS per tile).
__global__ void scan_tile_totals(const long long* __restrict__ values, long long n, long long* __restrict__ totals)
{
    __shared__ long long warp_totals[32];
    __shared__ long long block_total;
    const long long base = (long long)blockIdx.x * SCAN_TILE;
    long long sum = 0;
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        const long long index = base + k * SCAN_THREADS + threadIdx.x;
        if (index < n) sum += values[index];
    }
    block_exclusive_scan(sum, warp_totals, &block_total);
    if (threadIdx.x == 0) totals[blockIdx.x] = block_total;
}

// Scan launch 2: exclusive scan of the n_tiles tile totals in place, by one block (each thread a
// contiguous run of them).
__global__ void scan_totals(long long* __restrict__ totals, long long n_tiles)
{
    __shared__ long long warp_totals[32];
    __shared__ long long block_total;
    const long long per_thread = (n_tiles + blockDim.x - 1) / blockDim.x;
    const long long begin = min(n_tiles, threadIdx.x * per_thread), end = min(n_tiles, begin + per_thread);
    long long sum = 0;
    for (long long t = begin; t < end; ++t) sum += totals[t];
    long long running = block_exclusive_scan(sum, warp_totals, &block_total);
    for (long long t = begin; t < end; ++t) {
        const long long value = totals[t];
        totals[t] = running;
        running += value;
    }
}

// Scan launch 3: each tile's exclusive scan plus its offset (tile_offsets: launch 2's result), in place.
__global__ void scan_tiles(long long* __restrict__ values, long long n, const long long* __restrict__ tile_offsets)
{
    __shared__ long long tile[SCAN_TILE];
    __shared__ long long warp_totals[32];
    __shared__ long long block_total;
    const long long base = (long long)blockIdx.x * SCAN_TILE;
    for (int k = 0; k < SCAN_ITEMS; ++k) {  // coalesced loads
        const long long index = base + k * SCAN_THREADS + threadIdx.x;
        tile[k * SCAN_THREADS + threadIdx.x] = index < n ? values[index] : 0;
    }
    __syncthreads();
    long long* mine = tile + threadIdx.x * SCAN_ITEMS;  // this thread's SCAN_ITEMS consecutive values
    long long sum = 0;
    for (int k = 0; k < SCAN_ITEMS; ++k) sum += mine[k];
    long long running = tile_offsets[blockIdx.x] + block_exclusive_scan(sum, warp_totals, &block_total);
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        const long long value = mine[k];
        mine[k] = running;
        running += value;
    }
    __syncthreads();
    for (int k = 0; k < SCAN_ITEMS; ++k) {  // coalesced stores
        const long long index = base + k * SCAN_THREADS + threadIdx.x;
        if (index < n) values[index] = tile[k * SCAN_THREADS + threadIdx.x];
    }
}

}  // extern "C"

// ------------------------------------------------------------------ candidates --

// Calls visit_target(k, d2) for every target k (in cell order) of the 27 cells around the cell of
// (z, y, x), with d2 its squared distance.
template <class Visit>
__device__ __forceinline__ void scan_neighbour_cells(
    double z, double y, double x, const double* __restrict__ target_sorted, const long long* __restrict__ cell_offset,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, Visit visit_target)
{
    const int cz = (int)floor((z - oz) / cell), cy = (int)floor((y - oy) / cell), cx = (int)floor((x - ox) / cell);
    for (int dz = -1; dz <= 1; ++dz) {
        const int kz = cz + dz;
        if (kz < 0 || kz >= nz) continue;
        for (int dy = -1; dy <= 1; ++dy) {
            const int ky = cy + dy;
            if (ky < 0 || ky >= ny) continue;
            for (int dx = -1; dx <= 1; ++dx) {
                const int kx = cx + dx;
                if (kx < 0 || kx >= nx) continue;
                const long long c = cell_of(kz, ky, kx, ny, nx);
                for (long long k = cell_offset[c]; k < cell_offset[c + 1]; ++k) {
                    const double ez = target_sorted[3 * k] - z;
                    const double ey = target_sorted[3 * k + 1] - y;
                    const double ex = target_sorted[3 * k + 2] - x;
                    visit_target((int)k, ez * ez + ey * ey + ex * ex);
                }
            }
        }
    }
}

// One thread per source point: the targets within the gate; if `out_*` are null, only count them.
__device__ __forceinline__ long long visit(
    int i, const double* __restrict__ source, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const long long* __restrict__ cell_offset,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2,
    long long* out_rows, long long* out_cols, double* out_cost, long long offset)
{
    long long found = 0;
    scan_neighbour_cells(source[3 * i], source[3 * i + 1], source[3 * i + 2], target_sorted, cell_offset,
                         oz, oy, ox, cell, nz, ny, nx, [&](int k, double d2) {
        if (d2 <= r2) {
            if (out_rows != nullptr) {
                out_rows[offset + found] = i;
                out_cols[offset + found] = target_index[k];
                out_cost[offset + found] = d2;
            }
            ++found;
        }
    });
    return found;
}

// Heap sort of one row's candidates by column (columns are distinct within a row), costs alongside:
// O(k log k) for a row of k candidates however generous the gate.
__device__ __forceinline__ void sift_down(long long* cols, double* cost, long long root, long long end)
{
    while (true) {
        long long child = 2 * root + 1;
        if (child >= end) return;
        if (child + 1 < end && cols[child + 1] > cols[child]) ++child;
        if (cols[root] >= cols[child]) return;
        const long long c = cols[root];
        cols[root] = cols[child];
        cols[child] = c;
        const double w = cost[root];
        cost[root] = cost[child];
        cost[child] = w;
        root = child;
    }
}

__device__ __forceinline__ void sort_by_column(long long* cols, double* cost, long long k)
{
    for (long long root = k / 2 - 1; root >= 0; --root) sift_down(cols, cost, root, k);
    for (long long end = k - 1; end > 0; --end) {
        const long long c = cols[0];
        cols[0] = cols[end];
        cols[end] = c;
        const double w = cost[0];
        cost[0] = cost[end];
        cost[end] = w;
        sift_down(cols, cost, 0, end);
    }
}

extern "C" {

// 5. counts[i]: the number of targets within the gate (squared radius r2) of source i.
__global__ void count_candidates(
    const double* __restrict__ source, int n_source, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const long long* __restrict__ cell_offset,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2, long long* __restrict__ counts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_source) return;
    counts[i] = visit(i, source, target_sorted, target_index, cell_offset, oz, oy, ox, cell, nz, ny, nx, r2,
                      nullptr, nullptr, nullptr, 0);
}

// 7. Source i's candidates into [offsets[i], offsets[i + 1]) of rows, cols, cost, sorted by column.
__global__ void write_candidates(
    const double* __restrict__ source, int n_source, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const long long* __restrict__ cell_offset,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2,
    const long long* __restrict__ offsets, long long* __restrict__ rows, long long* __restrict__ cols,
    double* __restrict__ cost)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_source) return;
    const long long offset = offsets[i];
    const long long found = visit(i, source, target_sorted, target_index, cell_offset, oz, oy, ox, cell,
                                  nz, ny, nx, r2, rows, cols, cost, offset);
    sort_by_column(cols + offset, cost + offset, found);
}

// One thread per query point: the nearest target within the radius (the lower index on a tie), or -1.
__global__ void nearest_target(
    const double* __restrict__ query, int n_query, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const long long* __restrict__ cell_offset,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2, long long* __restrict__ nearest)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_query) return;
    double best = r2;
    long long best_index = -1;
    scan_neighbour_cells(query[3 * i], query[3 * i + 1], query[3 * i + 2], target_sorted, cell_offset,
                         oz, oy, ox, cell, nz, ny, nx, [&](int k, double d2) {
        const long long t = target_index[k];
        if (d2 < best || (d2 == best && (best_index < 0 || t < best_index))) {
            best = d2;
            best_index = t;
        }
    });
    nearest[i] = best_index;
}

}  // extern "C"
