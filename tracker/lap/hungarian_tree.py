"""GPU alternating-tree Hungarian solver (Date & Nagi 2016), registered as ``"hungarian-tree"``.

The CUDA kernels are in ``hungarian_tree.cu`` (step names of the paper in its
comments). The solve stays on the device; the host only reads one small status
array per iteration of the multi-tree phase. Stages:

1. Initial reduction (Alg. 1) and a greedy matching on zero slacks (the lowest row wins a contested column).
2. Multi-tree phases (Alg. 4, 5, 6, 9): alternating trees grown from *all*
   free rows at once, breadth-first over zero-slack edges, with O(m) dual
   updates; every tree that reaches a free column augments one vertex-disjoint
   path. This is what pays on costs with many ties (low-range integers).
3. (Our change) once a phase augments fewer than :data:`MIN_PATHS_PER_PHASE`
   paths or needs more than :data:`MAX_ITERS_PER_PHASE` host round trips, the
   remaining free rows are finished by one persistent thread block that grows
   one alternating tree at a time in Dijkstra order (a shortest augmenting
   path, as in scipy) — no host round trip at all.

Exact: integer costs keep integer duals; float costs use float64 duals and
the tolerance of :func:`tracker.lap._gpu_common.zero_tolerance` for "tight".
Rectangular ``n < m`` problems are solved directly (column duals start at 0
and never become positive, the dual feasibility condition of the rectangular
LP); ``+inf`` becomes a big-M and infeasibility is detected afterwards.
"""

from __future__ import annotations

import time

import numpy as np

from . import _gpu_common
from ._registry import Solver, register_solver

CU_FILE = "lap/hungarian_tree.cu"

# status slots (see hungarian_tree.cu)
ST_FRONTIER, ST_REVERSE, ST_AUGMENTED, ST_ERROR, ST_STEPS = 0, 1, 2, 3, 4

GREEDY_ROUNDS = 6
"""Rounds of the greedy matching of tight pairs after Alg. 1 (``greedy_propose`` / ``greedy_accept`` in
``hungarian_common.cuh``: every free row proposes a tight free column, the lowest proposing row wins, so ties
give the same matching on every run); the rows still free go to the tree phases."""
MIN_PATHS_PER_PHASE = 4
"""Hand over to the single-block finisher when a multi-tree phase augments fewer paths."""
MAX_ITERS_PER_PHASE = 48
"""... or when a phase needs more host round trips (forward-pass levels + dual updates) than this."""
USE_TREE_PHASES = True
"""Run the multi-tree phases at all (``False``: straight to the finisher; for profiling)."""
USE_ARR = True
"""Run the augmenting row reduction before the finisher (``False``: for profiling and comparison)."""

ARR_MIN_FREE = 16
"""Run the augmenting row reduction (step 5a) before the finisher only when at least this many rows are free."""
ARR_TAIL_ROWS = 512
"""Grid-wide rounds (three launches each) while more rows than this are free; then one cluster launch."""
ARR_CLUSTER = 8
"""Blocks in the tail's thread-block cluster (``ARR_CLUSTER`` in hungarian_tree.cu)."""
ARR_USE_CLUSTER = True
"""Run the tail on a cluster where the GPU has them (``False``: one block; for tests and comparison)."""
ARR_MAX_ROUNDS = 2000
"""Rounds at most (a tail round costs about one row scan by one warp) ..."""
ARR_STALL_ROUNDS = 256
"""... and it stops once the free count has not improved for this many rounds (zero increments can cycle)."""

SAP_THREADS = 1024
SAP_CLUSTER = 8
"""Blocks of the cluster finisher (``SAP_CLUSTER`` in hungarian_tree.cu; compute capability >= 9.0)."""
SAP_CLUSTER_KS = (1, 2, 3, 4, 6, 8)
SAP_USE_CLUSTER = True
SAP_CLUSTER_MIN_M = 6144
"""The finisher runs on a cluster from this many columns (one block is as fast on shorter rows)."""
SAP_KS = (1, 2, 4, 8, 12, 16, 20, 24, 32, 48, 64)
SAP_SHARED_LIMIT = 220 * 1024

EXPAND_THREADS = 32


def _module():
    from ._cuda import load_module

    return load_module(CU_FILE)


def initial_reduction(cp, mod, c, n: int, m: int, eps: float, eps_rel: float, square: bool):
    """Alg. 1 (row and, for square problems, column reduction) and the greedy matching.

    Returns ``u, v, col4row, row4col`` (float64, float64, int32, int32 CuPy arrays).
    """
    u = cp.empty(n, dtype=cp.float64)
    mod.get_function("row_min")((n,), (256,), (c, np.int32(n), np.int32(m), u))
    if square:
        rows_per_chunk = 256
        chunks = (n + rows_per_chunk - 1) // rows_per_chunk
        partial = cp.empty((chunks, m), dtype=cp.float64)
        mod.get_function("col_min_partial")(((m + 31) // 32, chunks), (32, 8),
                                            (c, u, np.int32(n), np.int32(m), np.int32(rows_per_chunk), partial))
        v = cp.empty(m, dtype=cp.float64)
        mod.get_function("col_min_final")(((m + 255) // 256,), (256,), (partial, np.int32(chunks), np.int32(m), v))
    else:
        v = cp.zeros(m, dtype=cp.float64)
    col4row = cp.full(n, -1, dtype=cp.int32)
    row4col = cp.full(m, -1, dtype=cp.int32)
    pick = cp.full(m, np.iinfo(np.int32).max, dtype=cp.int32)
    propose, accept = mod.get_function("greedy_propose"), mod.get_function("greedy_accept")
    args = (c, u, v, np.int32(n), np.int32(m), np.float64(eps), np.float64(eps_rel), col4row, row4col, pick)
    for _ in range(GREEDY_ROUNDS):
        propose(((n * 32 + 255) // 256,), (256,), args)
        accept(((m + 255) // 256,), (256,), (np.int32(m), pick, col4row, row4col))
    return u, v, col4row, row4col


def augmenting_row_reduction(cp, mod, c, n: int, m: int, u, v, col4row, row4col, stats: dict | None = None) -> None:
    """Step 5a: Jonker-Volgenant augmenting row reduction in parallel rounds (in place; see the .cu file).

    Keeps ``u, v`` exactly dual feasible and every assigned pair tight, so the
    finisher can start from the result; it only shrinks the set of free rows.
    While more than :data:`ARR_TAIL_ROWS` rows are free, a round is three
    grid-wide launches; the rest runs in one launch of an 8-block cluster
    (compute capability >= 9.0; one block before).
    """
    free = cp.flatnonzero(col4row == -1).astype(cp.int32)
    n_free = int(free.size)
    if n_free < ARR_MIN_FREE or m < 2:
        return
    i32 = cp.int32
    free_a, free_b = cp.empty(n, dtype=i32), cp.empty(n, dtype=i32)
    free_a[:n_free] = free
    bid_key = cp.full(m, np.iinfo(np.uint64).max, dtype=cp.uint64)
    bid_row = cp.full(m, np.iinfo(np.int32).max, dtype=i32)
    bid_col, bid_prop, bid_u2 = cp.empty(n, dtype=i32), cp.empty(n, dtype=cp.float64), cp.empty(n, dtype=cp.float64)
    counter = cp.zeros(3, dtype=i32)  # the current count, then two alternating "next" counts
    counter[0] = n_free
    count_now, count_next = counter[0:1], counter[1:2]
    rounds = 0
    k_bid, k_resolve, k_apply = (mod.get_function(name) for name in ("arr_bid", "arr_resolve", "arr_apply"))
    while n_free > ARR_TAIL_ROWS and rounds < ARR_MAX_ROUNDS:
        # the grid is sized for the count at the last host read; kernels read the current count on device
        before = n_free
        for _ in range(4):
            count_next.fill(0)
            k_bid(((n_free * 32 + 255) // 256,), (256,),
                  (c, np.int32(m), free_a, count_now, v, row4col, bid_key, bid_col, bid_prop, bid_u2))
            k_resolve(((n_free + 255) // 256,), (256,), (free_a, count_now, bid_key, bid_col, bid_prop, bid_row))
            k_apply(((n_free + 255) // 256,), (256,),
                    (free_a, count_now, bid_col, bid_prop, bid_u2, bid_key, bid_row, u, v, col4row, row4col,
                     free_b, count_next))
            count_now[...] = count_next
            free_a, free_b = free_b, free_a
            rounds += 1
        n_free = int(count_now.get()[0])
        if n_free == before:
            break  # stalled: the tail decides (cheaper rounds, same stall rule)
    status = cp.zeros(2, dtype=cp.int64)
    if n_free > 0:
        counter[1:] = 0
        if ARR_USE_CLUSTER and int(cp.cuda.Device().compute_capability) >= 90:
            tail, blocks = mod.get_function("arr_tail_cluster"), ARR_CLUSTER
        else:
            tail, blocks = mod.get_function("arr_tail"), 1
        tail((blocks,), (1024,),
             (c, np.int32(m), free_a, free_b, counter, u, v, col4row, row4col, bid_key, bid_row, bid_col, bid_prop,
              bid_u2, np.int32(ARR_MAX_ROUNDS - rounds), np.int32(ARR_STALL_ROUNDS), status))
    tail_rounds, free_left = (int(x) for x in status.get())
    if stats is not None:
        stats.update(arr_rows=int(free.size), arr_rounds=rounds + tail_rounds,
                     arr_free_left=free_left if n_free > 0 else 0)


def sap_finish(cp, mod, c, n: int, m: int, u, v, col4row, row4col, stats: dict | None = None) -> None:
    """Step 5: shrink the free set (step 5a), then finish every free row with the Dijkstra-order tree
    growth (in place): one block, or an 8-block cluster for long rows where the GPU has clusters."""
    if USE_ARR:
        augmenting_row_reduction(cp, mod, c, n, m, u, v, col4row, row4col, stats)
    free = cp.flatnonzero(col4row == -1).astype(cp.int32)
    n_free = int(free.size)
    if stats is not None:
        stats["sap_rows"] = n_free
    if n_free == 0:
        return
    pred = cp.empty(m, dtype=cp.int32)
    status = cp.zeros(8, dtype=cp.int64)
    max_steps = n * m + 16
    k = next((k for k in SAP_CLUSTER_KS if k * SAP_CLUSTER * SAP_THREADS >= m), None)
    if (SAP_USE_CLUSTER and m >= SAP_CLUSTER_MIN_M and k is not None
            and int(cp.cuda.Device().compute_capability) >= 90):
        func = mod.get_function(f"tree_sap_cluster_K{k}")
        smem = k * SAP_THREADS * 12  # v (double) and row4col (int) of each block's columns
        if smem > 48 * 1024:
            func.max_dynamic_shared_size_bytes = smem
        func((SAP_CLUSTER,), (SAP_THREADS,),
             (c, np.int32(n), np.int32(m), free, np.int32(n_free), u, v, col4row, row4col, pred,
              np.int64(max_steps), status), shared_mem=smem)
        _check_sap_status(status, max_steps, stats)
        return
    k = next((k for k in SAP_KS if k * SAP_THREADS >= m), None)
    if k is None:
        raise ValueError(f"hungarian-tree supports at most {SAP_KS[-1] * SAP_THREADS} columns, got {m}")
    func = mod.get_function(f"tree_sap_K{k}")
    if m * 12 + n * 8 <= SAP_SHARED_LIMIT:
        use_shared, smem = 3, m * 12 + n * 8  # v, u and row4col on chip
    elif m * 8 <= SAP_SHARED_LIMIT:
        use_shared, smem = 1, m * 8  # v on chip
    else:
        use_shared, smem = 0, 0
    if smem > 48 * 1024:
        func.max_dynamic_shared_size_bytes = smem
    func((1,), (SAP_THREADS,),
         (c, np.int32(n), np.int32(m), free, np.int32(n_free), u, v, col4row, row4col, pred,
          np.int64(max_steps), np.int32(use_shared), status), shared_mem=smem)
    _check_sap_status(status, max_steps, stats)


def _check_sap_status(status, max_steps: int, stats: dict | None) -> None:
    st = status.get()
    if stats is not None:
        stats["sap_steps"] = int(st[ST_STEPS])
    if st[ST_ERROR] == 1:
        raise RuntimeError("hungarian-tree: no augmenting path (internal error: costs should be finite)")
    if st[ST_ERROR] == 2:
        raise RuntimeError(f"hungarian-tree: iteration cap ({max_steps} tree-growth steps) exceeded; "
                           "the cost matrix may contain NaN-like values or be badly scaled")


def tree_phases(cp, mod, c, n: int, m: int, eps: float, eps_rel: float, u, v, col4row, row4col, stats: dict | None = None) -> int:
    """Stage 2: multi-tree phases; returns the number of rows still free (handed to the finisher)."""
    n_free = int((col4row == -1).sum())
    if n_free == 0 or not USE_TREE_PHASES:
        return n_free
    i32, f64 = cp.int32, cp.float64
    row_state = cp.empty(n, dtype=i32)
    Pr = cp.empty(n, dtype=i32)
    claim = cp.empty(n, dtype=i32)
    Pc = cp.empty(m, dtype=i32)
    col_vis = cp.empty(m, dtype=i32)
    slack = cp.empty(m, dtype=f64)
    mag = cp.empty(m, dtype=f64)
    frontier = cp.empty(n, dtype=i32)
    status = cp.zeros(8, dtype=cp.int64)
    k_reset = mod.get_function("tree_reset")
    k_expand = mod.get_function("tree_expand")
    k_contract = mod.get_function("tree_contract")
    k_nominate = mod.get_function("tree_nominate")
    k_augment = mod.get_function("tree_augment")
    k_dual = mod.get_function("tree_dual_update")
    ni, mi, e, er = np.int32(n), np.int32(m), np.float64(eps), np.float64(eps_rel)
    grid_nm = ((max(n, m) + 255) // 256,)
    grid_expand = ((m + EXPAND_THREADS - 1) // EXPAND_THREADS,)
    grid_m = ((m + 255) // 256,)
    phases = iters_total = duals = 0
    while n_free > 0:
        phases += 1
        k_reset(grid_nm, (256,), (ni, mi, col4row, row_state, Pr, claim, Pc, col_vis, slack, mag, frontier, status))
        k_contract((1,), (1024,), (ni, row_state, frontier, status))
        iters = 0
        augmented = -1
        while True:
            k_expand(grid_expand, (EXPAND_THREADS,),
                     (c, u, v, ni, mi, e, er, frontier, status, row4col, row_state, Pr, Pc, col_vis, slack, mag, status))
            k_contract((1,), (1024,), (ni, row_state, frontier, status))
            st = status.get()  # the one host read of this iteration
            iters += 1
            if st[ST_ERROR]:
                raise RuntimeError("hungarian-tree: dual update found no finite slack (internal error)")
            if st[ST_FRONTIER] > 0:
                continue
            if st[ST_REVERSE] > 0:
                k_nominate(grid_m, (256,), (mi, col_vis, Pr, Pc, claim, row4col))
                k_augment(grid_m, (256,), (mi, col_vis, Pr, Pc, claim, col4row, row4col, status))
                augmented = int(status[ST_AUGMENTED].get())
                break
            if iters >= MAX_ITERS_PER_PHASE:
                break
            k_dual((1,), (1024,), (ni, mi, e, er, mag, u, v, row_state, row4col, Pr, Pc, col_vis, slack, frontier, status))
            duals += 1
        iters_total += iters
        if augmented > 0:
            n_free -= augmented
        if augmented < MIN_PATHS_PER_PHASE:
            break
    if stats is not None:
        stats.update(tree_phases=phases, tree_iters=iters_total, tree_duals=duals, tree_free_left=n_free)
    return n_free


def solve_dense(cost, *, stats: dict | None = None):
    """Backend entry point (see :mod:`tracker.lap._registry`): column of each row, or -1s if infeasible."""
    import cupy as cp

    t0 = time.perf_counter()
    n, m = cost.shape
    problem = _gpu_common.prepare_dense(cost)
    if problem.infeasible:
        return _gpu_common.infeasible_result(n, cp)
    c = cp.ascontiguousarray(problem.cost, dtype=cp.float64)
    mod = _module()
    u, v, col4row, row4col = initial_reduction(cp, mod, c, n, m, problem.eps, problem.eps_rel, square=(n == m))
    if stats is not None:
        stats["greedy_free"] = int((col4row == -1).sum())
    n_free = tree_phases(cp, mod, c, n, m, problem.eps, problem.eps_rel, u, v, col4row, row4col, stats)
    if n_free > 0:
        sap_finish(cp, mod, c, n, m, u, v, col4row, row4col, stats)
    if stats is not None:
        stats["seconds"] = time.perf_counter() - t0
    return _gpu_common.finish(problem, cost, col4row)


register_solver(
    Solver(
        name="hungarian-tree",
        description="GPU alternating-tree Hungarian (Date & Nagi 2016: multi-tree BFS, vertex-disjoint "
        "augmentation, O(n) dual update) finished by a single-block Dijkstra-order tree growth; CUDA via CuPy",
        gpu=True,
        exact=True,
        dense=solve_dense,
        auto_priority={"dense": 10},
    )
)
