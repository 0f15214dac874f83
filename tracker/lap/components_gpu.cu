// Connected components of a gated bipartite graph and an exact batched solve of its small
// components (driver: components_gpu.py). Every step on the device is a kernel of this module (shipped
// compiled, so that a fresh machine compiles nothing); CuPy only allocates, copies and sorts plain int64
// keys with its precompiled (Thrust) sort.
//
// Nodes: rows 0 .. n_rows-1, columns n_rows .. n_rows+n_cols-1; edges (rows[e], cols[e]).
//
// Step 1 (cc_init, cc_hook): every node its own parent; then pruning and union-find over the edges in
//   one launch (ECL-CC style, Jaynes et al. 2018): an edge with cost >= row_unassigned + col_unassigned
//   is never needed for an optimum and is dropped (class 3); every other edge finds the roots of its
//   ends with intermediate pointer jumping and hooks the larger root under the smaller one with
//   atomicCAS (retrying on contention). Parents only ever decrease, so the root of a tree is the
//   smallest node of its component. Also node degrees.
// Step 2 (cc_finalize): every node points straight at its root (the component label) and counts
//   itself (if it has an edge) as a row / column of its component; rows add their degree to the
//   component's edge count.
// Step 3 (cc_classify): sort key (class * n_nodes + component) * n_edges + e of every edge; class 0 =
//   its component has one edge (taken directly), 1 = at most max_side rows and columns (the warp
//   solver), 2 = larger (the sparse auction), 3 = pruned in step 1. The keys are distinct, so sorting
//   them (the driver, CuPy's sort) groups the edges by class, then component, keeping the edges' order
//   within a component: a stable sort by (class, component).
// Step 3b (group_edges): from the sorted keys, every position's edge (perm) and the first position of
//   classes 1, 2 and 3; (start_flags, place_starts) the first position of every small component, in order
//   (flags, the driver's exclusive scan of them, each written at its number).
// Step 4 (solve_small_components): one warp per small component, exact shortest augmenting path
//   (Jonker-Volgenant / the algorithm of scipy's linear_sum_assignment) on the reduced problem
//   r x (c + r): column j < c is real with weight cost - col_unassigned[j] (+inf without edge),
//   column c + i is row i's private "no link" column with weight row_unassigned[i]. Lane i owns
//   row i (potential u, matched column), lane j % 32 owns columns j and j + 32 (potential v,
//   shortest path cost, predecessor, visited flag, matched row). Every row is matched, so every
//   augmenting path ends; the objective differs from the gated one by sum(col_unassigned).
// Step 5 (link_edges, gather_edges, link_flags, place_links): the chosen edges of every class as
//   link_of_row[row] = col + 1 (0: no link); the large components' edges gathered for the caller's
//   solver; at the end the links in row order (flags, the driver's exclusive scan, each link written at
//   its number).

#define WARP_MAX 32           // rows and columns of a component for the warp solver
#define WARPS_PER_BLOCK 4
#define FULL 0xffffffffu

// ------------------------------------------------------------ the input --

// What is wrong with the candidate edges, in one pass (tracker.lap.solve_gated's checks): flags |= 1 for a row
// index outside [0, n_rows), 2 for a column outside [0, n_cols), 4 for a cost that is not finite.
extern "C" __global__ void check_edges(const long long n_edges, const long long n_rows, const long long n_cols,
                                       const long long* __restrict__ rows, const long long* __restrict__ cols,
                                       const double* __restrict__ cost, int* __restrict__ flags)
{
    int wrong = 0;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_edges;
         e += (long long)gridDim.x * blockDim.x) {
        if (rows[e] < 0 || rows[e] >= n_rows) wrong |= 1;
        if (cols[e] < 0 || cols[e] >= n_cols) wrong |= 2;
        if (!isfinite(cost[e])) wrong |= 4;
    }
    if (wrong) atomicOr(flags, wrong);
}

// ---------------------------------------------------------------- step 1 --

__device__ __forceinline__ int cc_root(int* parent, int v)
{
    volatile int* p = parent;
    int cur = p[v];
    if (cur != v) {
        int prev = v, next;
        while (cur > (next = p[cur])) {  // intermediate pointer jumping
            p[prev] = next;
            prev = cur;
            cur = next;
        }
    }
    return cur;
}

// Every node its own parent (a forest of single nodes).
extern "C" __global__ void cc_init(const int n_nodes, int* __restrict__ parent)
{
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n_nodes; v += gridDim.x * blockDim.x) parent[v] = v;
}

// Pruning (pruned[e] = 1), node degrees and the union of every kept edge's ends.
extern "C" __global__ void cc_hook(const long long n_edges, const int n_rows, const long long* __restrict__ rows,
                                   const long long* __restrict__ cols, const double* __restrict__ cost,
                                   const double* __restrict__ row_unassigned,
                                   const double* __restrict__ col_unassigned, int* parent, int* __restrict__ degree,
                                   signed char* __restrict__ pruned)
{
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_edges;
         e += (long long)gridDim.x * blockDim.x) {
        int a = (int)rows[e];
        int c = (int)cols[e];
        const bool keep = cost[e] < row_unassigned[a] + col_unassigned[c];
        pruned[e] = keep ? 0 : 1;
        if (!keep) continue;
        int b = n_rows + c;
        atomicAdd(&degree[a], 1);
        atomicAdd(&degree[b], 1);
        int ra = cc_root(parent, a);
        int rb = cc_root(parent, b);
        while (ra != rb) {
            if (ra < rb) {
                int old = atomicCAS(&parent[rb], rb, ra);
                if (old == rb) break;
                rb = old;  // rb was hooked meanwhile: continue from its new parent
            } else {
                int old = atomicCAS(&parent[ra], ra, rb);
                if (old == ra) break;
                ra = old;
            }
        }
    }
}

// ---------------------------------------------------------------- step 2 --

// Every node's parent set to its root; rows, columns and edges counted per component.
extern "C" __global__ void cc_finalize(const int n_nodes, const int n_rows, int* parent, const int* __restrict__ degree,
                                       int* __restrict__ n_comp_rows, int* __restrict__ n_comp_cols,
                                       int* __restrict__ n_comp_edges)
{
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n_nodes; v += gridDim.x * blockDim.x) {
        int deg = degree[v];
        if (deg == 0) continue;  // isolated nodes keep parent[v] == v and are never read
        int root = v;
        volatile int* p = parent;
        while (p[root] != root) root = p[root];
        parent[v] = root;
        if (v < n_rows) {
            atomicAdd(&n_comp_rows[root], 1);
            atomicAdd(&n_comp_edges[root], deg);
        } else {
            atomicAdd(&n_comp_cols[root], 1);
        }
    }
}

// ---------------------------------------------------------------- step 3 --

// The sort key of every edge (see step 3 above).
extern "C" __global__ void cc_classify(const long long n_edges, const int n_nodes, const long long* __restrict__ rows,
                                       const signed char* __restrict__ pruned, const int* __restrict__ parent,
                                       const int* __restrict__ n_comp_rows, const int* __restrict__ n_comp_cols,
                                       const int* __restrict__ n_comp_edges, const int max_side,
                                       long long* __restrict__ key)
{
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_edges;
         e += (long long)gridDim.x * blockDim.x) {
        long long group;  // class * n_nodes + component
        if (pruned[e]) {
            group = 3LL * n_nodes;
        } else {
            const int root = parent[(int)rows[e]];
            long long k;
            if (n_comp_edges[root] == 1) k = 0;
            else if (n_comp_rows[root] <= max_side && n_comp_cols[root] <= max_side) k = 1;
            else k = 2;
            group = k * n_nodes + root;
        }
        key[e] = group * n_edges + e;
    }
}

// --------------------------------------------------------------- step 3b --

// From the sorted keys: perm[p] = the edge at position p, and class_start[c - 1] = the first position
// of class c or later (c = 1, 2, 3). Positions p = 0 .. n_edges (the last one stands for a class 4 after
// every edge), each writing the class starts that fall between its predecessor's class and its own.
extern "C" __global__ void group_edges(const long long n_edges, const int n_nodes,
                                       const long long* __restrict__ sorted_key, long long* __restrict__ perm,
                                       long long* __restrict__ class_start)
{
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p <= n_edges;
         p += (long long)gridDim.x * blockDim.x) {
        const long long cls = p < n_edges ? sorted_key[p] / n_edges / n_nodes : 4;
        const long long before = p > 0 ? sorted_key[p - 1] / n_edges / n_nodes : 0;
        if (p < n_edges) perm[p] = sorted_key[p] % n_edges;
        for (long long c = before + 1; c <= min(cls, 3LL); ++c) class_start[c - 1] = p;
    }
}

// The start of every small component, relative to the small class's first position `begin`, and the
// end `end - begin` (positions begin .. end of the sorted keys), in order: start_flags marks them (flag[k] for
// position begin + k, flag[end - begin + 1] = 0), the driver's exclusive scan numbers them, place_starts
// writes each at its number.
__device__ __forceinline__ bool is_start(const long long n_edges, const long long begin, const long long end,
                                         const long long* __restrict__ sorted_key, const long long p)
{
    return p == begin || p == end || sorted_key[p] / n_edges != sorted_key[p - 1] / n_edges;
}

extern "C" __global__ void start_flags(const long long n_edges, const long long begin, const long long end,
                                       const long long* __restrict__ sorted_key, long long* __restrict__ flag)
{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k <= end - begin + 1;
         k += (long long)gridDim.x * blockDim.x)
        flag[k] = k <= end - begin && is_start(n_edges, begin, end, sorted_key, begin + k) ? 1 : 0;
}

extern "C" __global__ void place_starts(const long long n_edges, const long long begin, const long long end,
                                        const long long* __restrict__ sorted_key,
                                        const long long* __restrict__ number, long long* __restrict__ starts)
{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k <= end - begin;
         k += (long long)gridDim.x * blockDim.x)
        if (is_start(n_edges, begin, end, sorted_key, begin + k)) starts[number[k]] = k;
}

// ---------------------------------------------------------------- step 4 --

__device__ __forceinline__ double dinf() { return __longlong_as_double(0x7ff0000000000000LL); }

// Local index (0..31) of `node` among the distinct nodes seen so far in `list` (count `*n`), adding
// it if new. Lanes with valid == false take part but get -1.
__device__ __forceinline__ int local_index(int node, bool valid, int* list, int* n, int lane)
{
    int found = -1;
    const int count = *n;
    if (valid)
        for (int t = 0; t < count; ++t)
            if (list[t] == node) found = t;
    const bool is_new = valid && found < 0;
    const unsigned group = __match_any_sync(FULL, is_new ? node : -1 - (int)valid);
    const int leader = __ffs(group) - 1;
    const unsigned leaders = __ballot_sync(FULL, is_new && lane == leader);
    int index = found;
    if (is_new && lane == leader) {
        index = count + __popc(leaders & ((1u << lane) - 1));
        list[index] = node;
    }
    int from_leader = __shfl_sync(FULL, index, leader);
    if (is_new) index = from_leader;
    __syncwarp();
    if (lane == 0) *n = count + __popc(leaders);
    __syncwarp();
    return index;
}

// Value of lane-distributed column data (slot j / 32 of lane j % 32) for a column j common to the warp
// or private to each lane (both shuffles are executed by every lane).
__device__ __forceinline__ double col_get(double a0, double a1, int j)
{
    double x0 = __shfl_sync(FULL, a0, j & 31);
    double x1 = __shfl_sync(FULL, a1, j & 31);
    return (j >> 5) ? x1 : x0;
}
__device__ __forceinline__ int col_get(int a0, int a1, int j)
{
    int x0 = __shfl_sync(FULL, a0, j & 31);
    int x1 = __shfl_sync(FULL, a1, j & 31);
    return (j >> 5) ? x1 : x0;
}

extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
solve_small_components(const int n_components, const long long* __restrict__ starts,
                       const long long* __restrict__ perm, const long long* __restrict__ rows,
                       const long long* __restrict__ cols, const double* __restrict__ cost,
                       const double* __restrict__ row_unassigned, const double* __restrict__ col_unassigned,
                       signed char* __restrict__ chosen)
{
    __shared__ double s_cost[WARPS_PER_BLOCK][WARP_MAX][WARP_MAX];
    __shared__ short s_edge[WARPS_PER_BLOCK][WARP_MAX][WARP_MAX];
    __shared__ int s_rows[WARPS_PER_BLOCK][WARP_MAX];
    __shared__ int s_cols[WARPS_PER_BLOCK][WARP_MAX];
    __shared__ int s_count[WARPS_PER_BLOCK][2];

    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const double INF = dinf();
    double (*C)[WARP_MAX] = s_cost[w];
    short (*E)[WARP_MAX] = s_edge[w];

    for (int comp = blockIdx.x * WARPS_PER_BLOCK + w; comp < n_components; comp += gridDim.x * WARPS_PER_BLOCK) {
        // -- 4a. local rows / columns and the dense block of weights
        const long long start = starts[comp];
        const int n_edges = (int)(starts[comp + 1] - start);
        for (int t = lane; t < WARP_MAX * WARP_MAX; t += 32) (&C[0][0])[t] = INF;
        if (lane == 0) { s_count[w][0] = 0; s_count[w][1] = 0; }
        __syncwarp();
        for (int base = 0; base < n_edges; base += 32) {
            const int k = base + lane;
            const bool valid = k < n_edges;
            long long e = valid ? perm[start + k] : 0;
            int r = valid ? (int)rows[e] : -1;
            int c = valid ? (int)cols[e] : -1;
            int li = local_index(r, valid, s_rows[w], &s_count[w][0], lane);
            int lj = local_index(c, valid, s_cols[w], &s_count[w][1], lane);
            if (valid) {
                C[li][lj] = cost[e] - col_unassigned[c];
                E[li][lj] = (short)k;
            }
        }
        __syncwarp();
        const int nr = s_count[w][0];
        const int nc = s_count[w][1];
        const int m = nc + nr;
        const double my_row_un = lane < nr ? row_unassigned[s_rows[w][lane]] : INF;

        // -- 4b. shortest augmenting paths; lane i: row i; lane l: columns l and l + 32
        double u = 0.0;
        int col4row = -1;
        double v0 = 0.0, v1 = 0.0;
        int row4col0 = -1, row4col1 = -1;
        for (int cur = 0; cur < nr; ++cur) {
            double sp0 = INF, sp1 = INF;
            int path0 = -1, path1 = -1;
            bool sc0 = lane >= m, sc1 = lane + 32 >= m;  // visited (or absent) columns
            bool sr = false;
            double min_val = 0.0;
            int i = cur, sink = -1;
            while (sink < 0) {
                if (lane == i) sr = true;
                const double ui = __shfl_sync(FULL, u, i);
                const double run_i = __shfl_sync(FULL, my_row_un, i);
                // relax the columns of row i
                #pragma unroll
                for (int s = 0; s < 2; ++s) {
                    const int j = lane + 32 * s;
                    const bool done = s ? sc1 : sc0;
                    if (!done) {
                        double w_ij = j < nc ? C[i][j] : (j - nc == i ? run_i : INF);
                        double r_ij = min_val + w_ij - ui - (s ? v1 : v0);
                        if (s) { if (r_ij < sp1) { sp1 = r_ij; path1 = i; } }
                        else { if (r_ij < sp0) { sp0 = r_ij; path0 = i; } }
                    }
                }
                // unvisited column of least path cost (free columns first on ties, then the lowest index)
                double best = INF;
                int key = 1 << 30;
                if (!sc0) { best = sp0; key = (row4col0 >= 0 ? 64 : 0) + lane; }
                if (!sc1) {
                    int k1 = (row4col1 >= 0 ? 64 : 0) + lane + 32;
                    if (sp1 < best || (sp1 == best && k1 < key)) { best = sp1; key = k1; }
                }
                #pragma unroll
                for (int off = 16; off > 0; off >>= 1) {
                    double ob = __shfl_xor_sync(FULL, best, off);
                    int ok = __shfl_xor_sync(FULL, key, off);
                    if (ob < best || (ob == best && ok < key)) { best = ob; key = ok; }
                }
                if (key >= (1 << 30) || !(best < INF)) { sink = -2; break; }  // cannot happen (private columns)
                const int j = key & 63;
                if ((j & 31) == lane) { if (j >> 5) sc1 = true; else sc0 = true; }
                min_val = best;
                const int owner = col_get(row4col0, row4col1, j);
                if (owner < 0) sink = j;
                else i = owner;
            }
            if (sink < 0) break;
            // potentials
            const int my_col = col4row < 0 ? 0 : col4row;
            const double sp_my = col_get(sp0, sp1, my_col);
            if (lane == cur) u += min_val;
            else if (sr && lane < nr) u += min_val - sp_my;
            if (sc0 && lane < m) v0 -= min_val - sp0;
            if (sc1 && lane + 32 < m) v1 -= min_val - sp1;
            // augment along the predecessor path
            int j = sink;
            while (true) {
                const int i2 = col_get(path0, path1, j);
                if ((j & 31) == lane) { if (j >> 5) row4col1 = i2; else row4col0 = i2; }
                const int prev = __shfl_sync(FULL, col4row, i2);
                if (lane == i2) col4row = j;
                j = prev;
                if (i2 == cur) break;
            }
        }
        // -- 4c. rows matched to a real column take their edge
        if (lane < nr && col4row >= 0 && col4row < nc) chosen[start + E[lane][col4row]] = 1;
        __syncwarp();
    }
}

// ---------------------------------------------------------------- step 5 --

// Links of n edges: edge e = index ? index[k] : k, taken if flags is null or flags[k] != 0;
// link_of_row[rows[e]] = cols[e] + 1. (A row is linked by at most one edge.)
extern "C" __global__ void link_edges(const long long n, const long long* __restrict__ index,
                                      const signed char* __restrict__ flags, const long long* __restrict__ rows,
                                      const long long* __restrict__ cols, long long* __restrict__ link_of_row)
{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        if (flags != nullptr && flags[k] == 0) continue;
        const long long e = index != nullptr ? index[k] : k;
        link_of_row[rows[e]] = cols[e] + 1;
    }
}

// The edges index[0 .. n) of (rows, cols, cost), gathered for the large components' solver.
extern "C" __global__ void gather_edges(const long long n, const long long* __restrict__ index,
                                        const long long* __restrict__ rows, const long long* __restrict__ cols,
                                        const double* __restrict__ cost, long long* __restrict__ out_rows,
                                        long long* __restrict__ out_cols, double* __restrict__ out_cost)
{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        const long long e = index[k];
        out_rows[k] = rows[e];
        out_cols[k] = cols[e];
        out_cost[k] = cost[e];
    }
}

// The links in row order: link_flags marks the linked rows (flag[n_rows] = 0), the driver's exclusive scan
// numbers them, place_links writes row and column at each number.
extern "C" __global__ void link_flags(const int n_rows, const long long* __restrict__ link_of_row,
                                      long long* __restrict__ flag)
{
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r <= n_rows;
         r += (long long)gridDim.x * blockDim.x)
        flag[r] = r < n_rows && link_of_row[r] > 0 ? 1 : 0;
}

extern "C" __global__ void place_links(const int n_rows, const long long* __restrict__ link_of_row,
                                       const long long* __restrict__ number, long long* __restrict__ row_ind,
                                       long long* __restrict__ col_ind)
{
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n_rows;
         r += (long long)gridDim.x * blockDim.x) {
        if (link_of_row[r] > 0) {
            row_ind[number[r]] = r;
            col_ind[number[r]] = link_of_row[r] - 1;
        }
    }
}
