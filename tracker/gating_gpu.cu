// Gated candidate links on the GPU: a uniform grid (cell size >= the gate
// radius), so every target within the gate of a source lies in one of the
// 27 cells around the source's cell.
//
// Two passes with the same loop: count_candidates sizes each source's output
// range (an exclusive scan on the host side gives the offsets), and
// write_candidates fills (row, col, squared distance) into that range.
// Targets are sorted by cell; cell_start/cell_end delimit each cell's run.
// nearest_target scans the same 27 cells for each query's nearest target.

__device__ __forceinline__ long long cell_of(int cz, int cy, int cx, int ny, int nx) {
    return ((long long)cz * ny + cy) * nx + cx;
}

// Calls visit_target(k, d2) for every target k (in cell order) of the 27 cells around the cell of
// (z, y, x), with d2 its squared distance.
template <class Visit>
__device__ __forceinline__ void scan_neighbour_cells(
    double z, double y, double x, const double* __restrict__ target_sorted, const int* __restrict__ cell_start,
    const int* __restrict__ cell_end, double oz, double oy, double ox, double cell, int nz, int ny, int nx,
    Visit visit_target)
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
                for (int k = cell_start[c]; k < cell_end[c]; ++k) {
                    const double ez = target_sorted[3 * k] - z;
                    const double ey = target_sorted[3 * k + 1] - y;
                    const double ex = target_sorted[3 * k + 2] - x;
                    visit_target(k, ez * ez + ey * ey + ex * ex);
                }
            }
        }
    }
}

// One thread per source point: the targets within the gate; if `out_*` are null, only count them.
__device__ __forceinline__ int visit(
    int i, const double* __restrict__ source, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const int* __restrict__ cell_start, const int* __restrict__ cell_end,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2,
    long long* out_rows, long long* out_cols, double* out_cost, long long offset)
{
    int found = 0;
    scan_neighbour_cells(source[3 * i], source[3 * i + 1], source[3 * i + 2], target_sorted, cell_start, cell_end,
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

extern "C" {

__global__ void count_candidates(
    const double* __restrict__ source, int n_source, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const int* __restrict__ cell_start, const int* __restrict__ cell_end,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2, long long* __restrict__ counts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_source) return;
    counts[i] = visit(i, source, target_sorted, target_index, cell_start, cell_end, oz, oy, ox, cell,
                      nz, ny, nx, r2, nullptr, nullptr, nullptr, 0);
}

__global__ void write_candidates(
    const double* __restrict__ source, int n_source, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const int* __restrict__ cell_start, const int* __restrict__ cell_end,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2,
    const long long* __restrict__ offsets, long long* __restrict__ rows, long long* __restrict__ cols,
    double* __restrict__ cost)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_source) return;
    visit(i, source, target_sorted, target_index, cell_start, cell_end, oz, oy, ox, cell, nz, ny, nx, r2,
          rows, cols, cost, offsets[i]);
}

// One thread per query point: the nearest target within the radius (the lower index on a tie), or -1.
__global__ void nearest_target(
    const double* __restrict__ query, int n_query, const double* __restrict__ target_sorted,
    const int* __restrict__ target_index, const int* __restrict__ cell_start, const int* __restrict__ cell_end,
    double oz, double oy, double ox, double cell, int nz, int ny, int nx, double r2, long long* __restrict__ nearest)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_query) return;
    double best = r2;
    long long best_index = -1;
    scan_neighbour_cells(query[3 * i], query[3 * i + 1], query[3 * i + 2], target_sorted, cell_start, cell_end,
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
