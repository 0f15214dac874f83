"""GPU classical Hungarian solver (Munkres' variant, Date & Nagi 2016 Alg. 3, 7, 8, with the
optimisations of Kawtikwar, Chang & Govind), registered as ``"hungarian-classical"``.

Kernels in ``hungarian_classical.cu``. One iteration is: forward pass + reverse
pass + augmentation in one persistent block (``cl_search``), ONE host read of
a small status record, and, when no path was found, the dual update
(``cl_min_partial`` + ``cl_min_update``) followed by the zero compression
(``cl_compress``). After an augmentation the zero lists are reused (duals did
not change), as the paper recommends.

Float costs make this variant slow: each dual update makes about one new zero
and costs two passes over the matrix. With :data:`HANDOFF` (default) the
solver therefore hands the remaining free rows to the single-block
Dijkstra-order finisher of :mod:`tracker.lap.hungarian_tree` once it augments
fewer than :data:`HANDOFF_MIN_AUG_PER_ITER` paths per iteration (averaged
over :data:`HANDOFF_WINDOW` iterations). ``HANDOFF = False`` gives the pure
classical algorithm (with an iteration cap).

Rectangular problems are padded to square with zero rows
(:func:`tracker.lap._gpu_common.pad_square`).
"""

from __future__ import annotations

import time

import numpy as np

from . import _gpu_common
from ._registry import Solver, register_solver

CU_FILE = "lap/hungarian_classical.cu"

CS_FREE, CS_AUG, CS_NTREE, CS_NREV, CS_ERROR, CS_ZEROS = 0, 1, 2, 3, 4, 5

HANDOFF = True
HANDOFF_WINDOW = 8
HANDOFF_MIN_AUG_PER_ITER = 2.0


def _module():
    from ._cuda import load_module

    return load_module(CU_FILE)


def solve_dense(cost, *, stats: dict | None = None):
    """Backend entry point (see :mod:`tracker.lap._registry`): column of each row, or -1s if infeasible."""
    import cupy as cp

    from . import hungarian_tree

    t0 = time.perf_counter()
    n0, m0 = cost.shape
    problem = _gpu_common.prepare_dense(cost)
    if problem.infeasible:
        return _gpu_common.infeasible_result(n0, cp)
    c = cp.ascontiguousarray(_gpu_common.pad_square(problem.cost, 0.0), dtype=cp.float64)
    n = c.shape[0]
    # Alg. 1 + greedy (same kernels as the tree variant, duplicated in this module's .cu)
    u, v, col4row, row4col = hungarian_tree.initial_reduction(cp, _module(), c, n, n, problem.eps, problem.eps_rel,
                                                                square=True)
    classical_phases(cp, c, problem.eps, problem.eps_rel, u, v, col4row, row4col, stats)
    if stats is not None:
        stats["seconds"] = time.perf_counter() - t0
    return _gpu_common.finish(problem, cost, col4row[:n0])


def classical_phases(cp, c, eps: float, eps_rel: float, u, v, col4row, row4col, stats: dict | None = None) -> None:
    """Complete a partial assignment of the square float64 CuPy matrix ``c`` (in place).

    ``u, v``: feasible duals (``c - u - v >= 0`` within the zero tolerance ``eps, eps_rel``), and every
    pair of ``col4row`` / ``row4col`` (int32, ``-1``: free) tight under them, as Alg. 1 + greedy leave
    them or as the dense auction hands them over. Classical iterations (search, then a dual update when
    no path was found) until every row is matched, or the hand-off to the Dijkstra finisher
    (:data:`HANDOFF`).
    """
    from . import hungarian_tree

    n = m = c.shape[0]
    mod = _module()
    i32 = cp.int32
    Z = cp.empty(n * m, dtype=i32)
    zcnt = cp.empty(n, dtype=i32)
    Pr, Pc = cp.empty(n, dtype=i32), cp.empty(m, dtype=i32)
    col_vis, claim = cp.empty(m, dtype=i32), cp.empty(n, dtype=i32)
    fa, fb, tree_rows = cp.empty(n, dtype=i32), cp.empty(n, dtype=i32), cp.empty(n, dtype=i32)
    rev, pick = cp.empty(m, dtype=i32), cp.empty(m, dtype=i32)
    status = cp.zeros(8, dtype=cp.int64)
    warps_per_block = 8
    n_partial = (n + warps_per_block - 1) // warps_per_block
    partial = cp.empty(n_partial, dtype=cp.float64)
    k_compress = mod.get_function("cl_compress")
    k_search = mod.get_function("cl_search")
    k_min = mod.get_function("cl_min_partial")
    k_update = mod.get_function("cl_min_update")
    ni, mi, e, er = np.int32(n), np.int32(m), np.float64(eps), np.float64(eps_rel)
    grid_rows = ((n * 32 + 255) // 256,)

    def compress():
        k_compress(grid_rows, (256,), (c, u, v, ni, mi, e, er, Z, zcnt, status))

    compress()
    max_iters = (n + 1) * (m + 1) + 16
    iters = duals = 0
    recent: list[int] = []
    handed_off = False
    while True:
        k_search((1,), (1024,), (ni, mi, Z, zcnt, col4row, row4col, Pr, Pc, col_vis, claim, fa, fb, tree_rows, rev,
                                 pick, status))
        st = status.get()  # the one host read of this iteration
        iters += 1
        if st[CS_ERROR]:
            raise RuntimeError("hungarian-classical: dual update found no finite slack (internal error)")
        free = int(st[CS_FREE] - st[CS_AUG])
        if free == 0:
            break
        if iters > max_iters:
            raise RuntimeError(f"hungarian-classical: iteration cap ({max_iters}) exceeded without convergence")
        recent.append(int(st[CS_AUG]))
        if HANDOFF and len(recent) >= HANDOFF_WINDOW:
            if sum(recent[-HANDOFF_WINDOW:]) < HANDOFF_MIN_AUG_PER_ITER * HANDOFF_WINDOW:
                handed_off = True
                break
        if st[CS_AUG] > 0:
            continue  # duals unchanged: reuse the zero lists
        k_min((n_partial,), (32 * warps_per_block,), (c, u, v, mi, tree_rows, col_vis, status, partial))
        k_update((1,), (1024,), (mi, np.int32(n_partial), partial, tree_rows, col_vis, u, v, status))
        compress()
        duals += 1
    if handed_off:
        tree_mod = hungarian_tree._module()
        hungarian_tree.sap_finish(cp, tree_mod, c, n, m, u, v, col4row, row4col, stats)
    if stats is not None:
        stats.update(classical_iters=iters, classical_duals=duals, handed_off=handed_off)
    if int(status[CS_ERROR].get()):
        raise RuntimeError("hungarian-classical: dual update found no finite slack (internal error)")


register_solver(
    Solver(
        name="hungarian-classical",
        description="GPU classical Hungarian (Munkres; Date & Nagi 2016 Alg. 3/7/8 with Kawtikwar et al.'s "
        "compression/fusion optimisations, one host read per iteration); CUDA via CuPy",
        gpu=True,
        exact=True,
        dense=solve_dense,
        auto_priority={"dense": 20},
    )
)
