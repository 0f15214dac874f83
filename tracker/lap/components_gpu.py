"""Gated problems split into connected components on the GPU; small components solved in one launch.

Used by the ``auction`` solver's gated entry point (``tracker/lap/auction.py``).
Kernels in ``components_gpu.cu``:

1. edges costlier than (or as costly as) both "no link" choices are dropped
   (never needed for an optimum), in the launch of step 2;
2. connected components of the bipartite graph: one union-find launch over the
   edges (``cc_hook``, hooking with atomicCAS, the root of a component is its
   smallest node), one launch pointing every node at its root and counting rows,
   columns and edges per component (``cc_finalize``), one launch writing every
   edge's sort key ``(class * n_nodes + component) * n_edges + edge``
   (``cc_classify``); one sort of those keys groups the edges by class, then by
   component, in their order within a component (``group_edges``,
   ``component_starts``);
3. components of one edge: the edge is taken (after step 1 it beats "no link");
   components of at most :data:`WARP_MAX` rows and columns (at most 32): ONE
   launch, one warp per component, an exact shortest-augmenting-path solver
   (Jonker-Volgenant, the algorithm of ``scipy.optimize.linear_sum_assignment``)
   on the component's reduced problem in shared memory
   (``solve_small_components``);
4. the remaining edges (large components) go to the caller's solver (the
   sparse auction), which re-indexes rows and columns compactly;
5. the links of all three as one column per row, read back in row order
   (``link_edges``, then ``link_flags``, the exclusive scan of :mod:`tracker.gating_gpu` and
   ``place_links``: no sort).

Everything stays on the GPU; only the chosen ``(row, col)`` edges are returned
(CuPy arrays). CuPy is left allocations, copies and its precompiled sort of
int64 keys: written with CuPy operations (``arange``, ``argsort``'s copy,
fancy indexing, ``searchsorted``, ``flatnonzero``, comparisons), the grouping
was 12 NVRTC compilations, 1.3 s of a fresh H100's first GPU-linked run
(``benchmarks/results/cold_start_h100.md``). ``emulate=True`` runs the same
driver with NumPy versions of the kernels (tests on machines without a GPU).
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np

WARP_MAX = 32
"""Components with at most this many rows and columns go to the warp solver (at most 32)."""
ENABLED = os.environ.get("TRACKER_LAP_COMPONENTS", "1") != "0"
"""Whether ``solve_gated(solver="auction")`` routes through the component split (default on; environment
variable ``TRACKER_LAP_COMPONENTS=0`` turns it off). Measured on an H100 (benchmarks/results/lap_components_h100.md):
1.5-2.5x faster at steps 0.1 / 0.3 (no component left for the auction); at step 0.5 one giant component holds
~85 % of the edges, and the split costs about as much as it saves (1M nodes: 73 vs 71 ms; 10k: 12 vs 6 ms)."""
LAST_STATS: dict = {}
"""Counts and times of the last split (edges per class, components, seconds)."""

_THREADS = 256
_WARPS_PER_BLOCK = 4  # as in components_gpu.cu


# ------------------------------------------------------------------ kernels --

class _CudaKernels:
    def __init__(self):
        import cupy

        from ._cuda import load_module

        self.xp = cupy
        module = load_module("lap/components_gpu.cu")
        self.f = {name: module.get_function(name)
                  for name in ("check_edges", "cc_init", "cc_hook", "cc_finalize", "cc_classify", "group_edges", "start_flags",
                               "place_starts", "solve_small_components", "link_edges", "gather_edges", "link_flags",
                               "place_links")}
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]

    def _grid(self, items):
        return (max(1, min(-(-items // _THREADS), self.sms * 32)),)

    def _launch(self, name, items, *args):
        self.f[name](self._grid(items), (_THREADS,), args)

    def check_edges(self, n_rows, n_cols, rows, cols, cost) -> int:
        """Flags of what is wrong with int64 ``rows``, ``cols`` and float64 ``cost`` (contiguous): 1 a row
        index out of range, 2 a column index, 4 a cost that is not finite; one pass."""
        flags = self.xp.zeros(1, dtype=np.int32)
        if rows.size:
            self._launch("check_edges", rows.size, np.int64(rows.size), np.int64(n_rows), np.int64(n_cols), rows,
                         cols, cost, flags)
        return int(flags.get()[0])

    def keys(self, n_rows, n_cols, rows, cols, cost, row_un, col_un, max_side):
        """Sort key ``(class * n_nodes + component) * n_edges + edge`` of every edge (class 0 single, 1 small,
        2 large, 3 pruned)."""
        xp = self.xp
        n_nodes = n_rows + n_cols
        n_edges = rows.size
        parent = xp.empty(n_nodes, dtype=np.int32)
        counts = xp.zeros((4, n_nodes), dtype=np.int32)  # degree, rows, cols, edges per component
        pruned = xp.empty(n_edges, dtype=np.int8)
        self._launch("cc_init", n_nodes, np.int32(n_nodes), parent)
        self._launch("cc_hook", n_edges, np.int64(n_edges), np.int32(n_rows), rows, cols, cost, row_un, col_un,
                     parent, counts[0], pruned)
        self._launch("cc_finalize", n_nodes, np.int32(n_nodes), np.int32(n_rows), parent, counts[0], counts[1],
                     counts[2], counts[3])
        key = xp.empty(n_edges, dtype=np.int64)
        self._launch("cc_classify", n_edges, np.int64(n_edges), np.int32(n_nodes), rows, pruned, parent, counts[1],
                     counts[2], counts[3], np.int32(max_side), key)
        return key

    def group(self, key, n_nodes):
        """Sorts ``key`` in place; returns the edge at every position and the first positions of classes 1, 2, 3."""
        xp = self.xp
        n_edges = key.size
        perm = xp.empty(n_edges, dtype=np.int64)
        class_start = xp.zeros(3, dtype=np.int64)
        if n_edges:
            key.sort()  # CuPy's precompiled (Thrust) sort: distinct keys, so the order is the stable one
            self._launch("group_edges", n_edges + 1, np.int64(n_edges), np.int32(n_nodes), key, perm, class_start)
        return perm, tuple(int(b) for b in class_start.get())

    def component_starts(self, key, begin, end):
        """First position (relative to ``begin``) of every small component in the sorted keys ``begin:end``, and
        ``end - begin``: int64, ascending (flags, an exclusive scan, each start written at its number)."""
        from ..gating_gpu import exclusive_scan

        xp = self.xp
        number = xp.empty(end - begin + 2, dtype=np.int64)
        args = (np.int64(key.size), np.int64(begin), np.int64(end), key)
        self._launch("start_flags", end - begin + 2, *args, number)
        exclusive_scan(number)
        starts = xp.empty(int(number[-1:].get()[0]), dtype=np.int64)
        self._launch("place_starts", end - begin + 1, *args, number, starts)
        return starts

    def solve_small(self, starts, perm, rows, cols, cost, row_un, col_un):
        """Chosen flag (int8) of every edge position ``perm`` of the small components."""
        xp = self.xp
        n_components = int(starts.size) - 1
        chosen = xp.zeros(perm.size, dtype=np.int8)
        if n_components > 0:
            blocks = min(-(-n_components // _WARPS_PER_BLOCK), self.sms * 64)
            self.f["solve_small_components"](
                (blocks,), (32 * _WARPS_PER_BLOCK,),
                (np.int32(n_components), starts, perm, rows, cols, cost, row_un, col_un, chosen),
            )
        return chosen

    def link(self, index, flags, rows, cols, link_of_row):
        """``link_of_row[rows[e]] = cols[e] + 1`` for the edges ``e = index[k]`` (every edge of ``rows`` if
        ``index`` is None) whose ``flags[k]`` is set (all if ``flags`` is None)."""
        n = int(index.size if index is not None else rows.size)
        if n:
            null = np.uintp(0)
            self._launch("link_edges", n, np.int64(n), null if index is None else index,
                         null if flags is None else flags, rows, cols, link_of_row)

    def gather(self, index, rows, cols, cost):
        """``rows[index], cols[index], cost[index]``."""
        xp = self.xp
        n = int(index.size)
        out = (xp.empty(n, dtype=np.int64), xp.empty(n, dtype=np.int64), xp.empty(n, dtype=np.float64))
        if n:
            self._launch("gather_edges", n, np.int64(n), index, rows, cols, cost, *out)
        return out

    def links(self, link_of_row):
        """``(row_ind, col_ind)`` of the rows with a link, sorted by row (flags, an exclusive scan, each link
        written at its number: no sort)."""
        from ..gating_gpu import exclusive_scan

        xp = self.xp
        n_rows = int(link_of_row.size)
        number = xp.empty(n_rows + 1, dtype=np.int64)
        self._launch("link_flags", n_rows + 1, np.int32(n_rows), link_of_row, number)
        exclusive_scan(number)
        n = int(number[-1:].get()[0])
        row_ind, col_ind = xp.empty(n, dtype=np.int64), xp.empty(n, dtype=np.int64)
        if n:
            self._launch("place_links", n_rows, np.int32(n_rows), link_of_row, number, row_ind, col_ind)
        return row_ind, col_ind


class _EmulatedKernels:
    """The same steps in NumPy (sequential union-find; the warp solver as plain Python)."""

    xp = np

    def keys(self, n_rows, n_cols, rows, cols, cost, row_un, col_un, max_side):
        n_nodes, n_edges = n_rows + n_cols, rows.size
        keep = cost < row_un[rows] + col_un[cols]
        label, cls = self.label(n_rows, n_cols, rows[keep], cols[keep], max_side)
        group = np.full(n_edges, 3 * n_nodes, dtype=np.int64)
        group[keep] = cls.astype(np.int64) * n_nodes + label
        return group * n_edges + np.arange(n_edges, dtype=np.int64)

    def group(self, key, n_nodes):
        n_edges = key.size
        key.sort()
        cls = key // max(n_edges, 1) // n_nodes
        return key % max(n_edges, 1), tuple(int(b) for b in np.searchsorted(cls, [1, 2, 3]))

    def component_starts(self, key, begin, end):
        group = key[begin:end] // key.size
        return np.concatenate([[0], np.flatnonzero(group[1:] != group[:-1]) + 1, [end - begin]]).astype(np.int64)

    def link(self, index, flags, rows, cols, link_of_row):
        edges = np.arange(rows.size) if index is None else index
        if flags is not None:
            edges = edges[flags != 0]
        link_of_row[rows[edges]] = cols[edges] + 1

    def gather(self, index, rows, cols, cost):
        return rows[index], cols[index], cost[index]

    def links(self, link_of_row):
        row_ind = np.flatnonzero(link_of_row > 0).astype(np.int64)
        return row_ind, link_of_row[row_ind] - 1

    def label(self, n_rows, n_cols, rows, cols, max_side):
        """Component label (smallest node) and class of every edge, by a sequential union-find."""
        n_nodes = n_rows + n_cols
        parent = np.arange(n_nodes)
        degree = np.zeros(n_nodes, dtype=np.int64)

        def root(v):
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        for r, c in zip(rows.tolist(), cols.tolist()):
            a, b = n_rows + c, r
            degree[a] += 1
            degree[b] += 1
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
        roots = np.array([root(v) for v in range(n_nodes)], dtype=np.int64)
        has_edge = degree > 0
        is_row = np.arange(n_nodes) < n_rows
        n_comp_rows = np.bincount(roots[has_edge & is_row], minlength=n_nodes)
        n_comp_cols = np.bincount(roots[has_edge & ~is_row], minlength=n_nodes)
        n_comp_edges = np.bincount(roots[:n_rows], weights=degree[:n_rows], minlength=n_nodes).astype(np.int64)
        label = roots[rows]
        cls = np.where(n_comp_edges[label] == 1, 0,
                       np.where((n_comp_rows[label] <= max_side) & (n_comp_cols[label] <= max_side), 1, 2))
        return label.astype(np.int32), cls.astype(np.int8)

    def solve_small(self, starts, perm, rows, cols, cost, row_un, col_un):
        chosen = np.zeros(perm.size, dtype=np.int8)
        for k in range(starts.size - 1):
            lo, hi = int(starts[k]), int(starts[k + 1])
            edges = perm[lo:hi]
            local = solve_component_reduced(rows[edges], cols[edges], cost[edges], row_un, col_un)
            chosen[lo + local] = 1
        return chosen


def solve_component_reduced(rows, cols, cost, row_un, col_un) -> np.ndarray:
    """Positions (in the given edge order) of the chosen edges of one component: the warp solver's algorithm.

    Shortest augmenting paths with potentials (Jonker-Volgenant, as in
    ``scipy.optimize.linear_sum_assignment``) on the reduced ``r x (c + r)``
    problem: column ``j < c`` real with weight ``cost - col_un``, column
    ``c + i`` row ``i``'s private "no link" column with weight ``row_un``.
    Local rows and columns are numbered in order of first appearance, and ties
    are broken as in the kernel (free columns first, then the lowest index).
    """
    rows, cols = np.asarray(rows), np.asarray(cols)
    row_ids = list(dict.fromkeys(rows.tolist()))
    col_ids = list(dict.fromkeys(cols.tolist()))
    nr, nc = len(row_ids), len(col_ids)
    m = nc + nr
    ri = {v: k for k, v in enumerate(row_ids)}
    ci = {v: k for k, v in enumerate(col_ids)}
    weight = np.full((nr, m), np.inf)
    edge = np.full((nr, nc), -1, dtype=np.int64)
    for k, (r, c, w) in enumerate(zip(rows.tolist(), cols.tolist(), np.asarray(cost, dtype=float).tolist())):
        weight[ri[r], ci[c]] = w - col_un[c]
        edge[ri[r], ci[c]] = k
    for i, r in enumerate(row_ids):
        weight[i, nc + i] = row_un[r]
    u, v = np.zeros(nr), np.zeros(m)
    col4row, row4col = np.full(nr, -1), np.full(m, -1)
    for cur in range(nr):
        shortest, path = np.full(m, np.inf), np.full(m, -1)
        visited_c, visited_r = np.zeros(m, bool), np.zeros(nr, bool)
        min_val, i, sink = 0.0, cur, -1
        while sink < 0:
            visited_r[i] = True
            for j in range(m):
                if not visited_c[j]:
                    reduced = min_val + weight[i, j] - u[i] - v[j]
                    if reduced < shortest[j]:
                        shortest[j], path[j] = reduced, i
            best, key = np.inf, 1 << 30
            for j in range(m):
                if not visited_c[j]:
                    k = (64 if row4col[j] >= 0 else 0) + j
                    if shortest[j] < best or (shortest[j] == best and k < key):
                        best, key = shortest[j], k
            j = key & 63
            visited_c[j] = True
            min_val = best
            if row4col[j] < 0:
                sink = j
            else:
                i = row4col[j]
        for r in range(nr):
            if r == cur:
                u[r] += min_val
            elif visited_r[r]:
                u[r] += min_val - shortest[col4row[r]]
        v[visited_c] -= min_val - shortest[visited_c]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break
    linked = np.flatnonzero((col4row >= 0) & (col4row < nc))
    return edge[linked, col4row[linked]]


def _kernels(emulate: bool):
    """The CUDA kernels (compiled once per process), or their NumPy emulation for CPU tests."""
    return _EmulatedKernels() if emulate else _cuda_kernels()


@functools.lru_cache(maxsize=1)
def _cuda_kernels():
    return _CudaKernels()


def check_edges(n_rows, n_cols, rows, cols, cost) -> int:
    """What is wrong with a gated problem's edges (contiguous CuPy int64 ``rows``, ``cols``, float64 ``cost``),
    one pass on the GPU: flags 1 (a row index out of range), 2 (a column index), 4 (a cost not finite)."""
    return _cuda_kernels().check_edges(n_rows, n_cols, rows, cols, cost)


# ------------------------------------------------------------------- driver --

def solve_gated(n_rows, n_cols, rows, cols, cost, row_un, col_un, large_solver, *, emulate=False,
                max_side=None):
    """Chosen edges (row_ind, col_ind sorted by row) of a gated problem.

    ``large_solver(rows, cols, cost) -> (row_ind, col_ind)`` solves the edges
    of the components too large for the warp solver (same global indices,
    same no-link costs). Arrays are CuPy (NumPy with ``emulate=True``).
    """
    kern = _kernels(emulate)
    xp = kern.xp
    max_side = WARP_MAX if max_side is None else int(max_side)
    if not 1 <= max_side <= 32:
        raise ValueError("max_side must be between 1 and 32 (one warp per component)")
    t0 = time.perf_counter()
    rows = xp.ascontiguousarray(xp.asarray(rows, dtype=np.int64))
    cols = xp.ascontiguousarray(xp.asarray(cols, dtype=np.int64))
    cost = xp.ascontiguousarray(xp.asarray(cost, dtype=np.float64))
    row_un = xp.ascontiguousarray(xp.asarray(row_un, dtype=np.float64))
    col_un = xp.ascontiguousarray(xp.asarray(col_un, dtype=np.float64))
    n_nodes = n_rows + n_cols
    n_edges = int(rows.size)
    if 4 * n_nodes * max(n_edges, 1) >= 2**63:
        raise ValueError(f"too large for the component split's int64 sort keys: {n_nodes} nodes, {n_edges} edges")
    # 1-2. pruning, components and each edge's sort key; one sort groups the edges by class, then component
    key = kern.keys(n_rows, n_cols, rows, cols, cost, row_un, col_un, max_side)
    perm, (n_single, n_small_end, n_kept) = kern.group(key, n_nodes)
    stats = {"edges": n_kept}
    link_of_row = xp.zeros(n_rows, dtype=np.int64)  # each row's linked column + 1, 0: none
    # 3. components of one edge: taken; small components: one launch
    kern.link(perm[:n_single], None, rows, cols, link_of_row)
    small = perm[n_single:n_small_end]
    n_components = 0
    if small.size:
        starts = kern.component_starts(key, n_single, n_small_end)
        n_components = int(starts.size) - 1
        flags = kern.solve_small(starts, small, rows, cols, cost, row_un, col_un)
        kern.link(small, flags, rows, cols, link_of_row)
    t_split = time.perf_counter() - t0
    # 4. large components
    large = perm[n_small_end:n_kept]
    if large.size:
        r, c = large_solver(*kern.gather(large, rows, cols, cost))
        kern.link(None, None, xp.ascontiguousarray(xp.asarray(r, dtype=np.int64)),
                  xp.ascontiguousarray(xp.asarray(c, dtype=np.int64)), link_of_row)
    # 5. the links in row order
    row_ind, col_ind = kern.links(link_of_row)
    stats.update(single_edges=n_single, small_edges=int(small.size), small_components=n_components,
                 large_edges=int(large.size), split_s=t_split, total_s=time.perf_counter() - t0)
    LAST_STATS.clear()
    LAST_STATS.update(stats)
    return row_ind, col_ind
