"""Linear assignment problems (LAP): one interface, several exact solvers.

Three problem shapes share one ``solver=`` argument:

* :func:`linear_sum_assignment` — a dense cost matrix, SciPy's semantics;
* :func:`min_weight_full_bipartite_matching` — a sparse biadjacency matrix,
  SciPy's semantics except that stored zeros are edges;
* :func:`solve_gated` — sparse candidate links plus the cost of *not*
  linking each row and column, the problem frame-to-frame tracking solves.

``solver="auto"`` picks the fastest exact GPU solver when CuPy and a GPU are
present, otherwise ``"scipy"`` (and SciPy for gated problems given as NumPy
arrays with fewer than :data:`AUTO_GPU_MIN_GATED_ROWS` rows, where the CPU is
about as fast, and for dense NumPy matrices with fewer than :data:`AUTO_GPU_MIN_DENSE_ROWS` rows).
:func:`available_solvers` lists the names.

Dense problems on the GPU (``auto``) go by what one pass over the matrix tells (:func:`_auto_dense`):

============================================  =======================  ==========================================
matrix                                        solver                   measured (H100, n = 1000 to 20000)
============================================  =======================  ==========================================
integers spanning at most n / 4 (many ties)   ``hungarian-classical``  int [0, n/10]: 1.6-1.9x faster than the
                                                                       auction (n = 20000: 14.0 vs 22.8 ms)
rows' cheapest columns nearly all distinct    ``hungarian-tree``       geometric 3D: 1.4-1.7x faster than the
(>= 80 %: geometric, near-permutations)       (classical: integers)    auction (n = 20000: 13.9 vs 24.1 ms)
anything else (uniform-like costs)            ``auction``              int [0, n], [0, 10n], float [0, 1): 1.5-13x
                                                                       faster than the best Hungarian at n >=
                                                                       4096 (n = 20000: 62 / 114 / 184 ms vs 155
                                                                       / 1277 / 1644 ms)
============================================  =======================  ==========================================

(Random costs leave about 1 - 1/e = 63 % of the rows' cheapest columns distinct; a cloud and its displaced
copy over 90 %.) ``auto`` came within 1.12x of the fastest exact solver in every class and size of
``benchmarks/lap_bench.py --sizes 1000,4096,8192,20000`` (``benchmarks/results/lap_auto_h100.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..backend import get_array_module, is_cupy_array, to_numpy
from . import _gpu_common, _scipy  # noqa: F401  (_scipy registers "scipy")
from ._registry import Solver, available_solvers, get_solver, register_solver
from ._scipy import reduced_problem
from ._warm_up import warm_up

# GPU solvers register themselves on import; each imports CuPy lazily, so
# this works on machines without it.
for _module in ("hungarian_tree", "hungarian_classical", "auction", "dgs"):
    try:
        __import__(f"{__name__}.{_module}")
    except ModuleNotFoundError as _error:  # not written yet / optional
        if _error.name != f"{__name__}.{_module}":
            raise

__all__ = [
    "Solver",
    "available_solvers",
    "linear_sum_assignment",
    "min_weight_full_bipartite_matching",
    "register_solver",
    "solve_gated",
    "warm_up",
]


AUTO_GPU_MIN_GATED_ROWS = 2_000
"""Below this many rows, ``solve_gated(solver="auto")`` on NumPy inputs uses SciPy.

Measured on one H100 (``benchmarks/results/lap_sparse_h100.md``, sixth session), GPU auction
(NumPy in and out, transfers included) vs SciPy per component on 3D gated instances at steps of
0.1, 0.3 and 0.5 times the neighbour distance: at 1k rows 1.55 / 1.51 / 5.8 ms vs 0.61 / 1.53 /
7.1 ms; at 2k rows 1.5 / 1.6 / 5.6 ms vs 0.9 / 2.0 / 7.8 ms; at 5k rows 1.7 / 1.7 / 6.9 ms vs
1.4 / 3.4 / 36 ms; at 10k rows 1.7 / 1.8 / 7.3 ms vs 2.3 / 6.0 / 155 ms. From 2k rows on the GPU
costs at most 0.6 ms more on the easiest instances and is up to 5x faster on harder ones.
"""


AUTO_GPU_MIN_DENSE_ROWS = 128
"""Below this many rows (of the smaller side), ``linear_sum_assignment(solver="auto")`` on NumPy input uses
SciPy: SciPy solves 128 x 128 in 0.24-0.32 ms (random floats, int [0, 10n]; the project's 2-core CPU), while
the smallest GPU solve measured on the H100 took 1.4 ms (n = 1000). It also gives SciPy's choice among
equally cheap assignments on tiny matrices, which SciPy's test suite checks."""


def _as_array(xp, array, dtype):
    """``array`` in module ``xp`` (CuPy arrays are copied to the host for NumPy)."""
    return xp.asarray(to_numpy(array) if xp is np else array, dtype=dtype)


def _module_for(solver: Solver):
    if solver.gpu:
        import cupy

        return cupy
    return np


def linear_sum_assignment(cost: Any, maximize: bool = False, *, solver: str = "auto"):
    """Solve the linear sum assignment problem of a dense cost matrix.

    Same semantics as :func:`scipy.optimize.linear_sum_assignment`: a
    rectangular ``(n, m)`` matrix gets ``min(n, m)`` assignments; ``inf``
    entries are forbidden (``-inf`` when ``maximize``); NaN or the other
    infinity raise ``ValueError``, and so does an infeasible matrix.

    Parameters
    ----------
    cost : (n, m) array_like or cupy.ndarray
        Cost of assigning row ``i`` to column ``j``.
    maximize : bool
        Maximise the total instead of minimising it.
    solver : str
        A name from :func:`available_solvers`, or ``"auto"``.

    Returns
    -------
    row_ind, col_ind : (min(n, m),) int64 arrays
        The assignment, sorted by row; NumPy or CuPy like ``cost``.
    """
    xp_in = get_array_module(cost)
    matrix = xp_in.asarray(cost)
    if matrix.ndim != 2:
        raise ValueError(f"expected a matrix (2-D array), got a {matrix.ndim}-D array instead")
    if matrix.dtype.kind not in "biuf":
        # SciPy's exception and wording (its test suite matches "Cannot cast array data")
        raise TypeError(f"Cannot cast array data from {matrix.dtype!r} to dtype('float64') according to the "
                        "rule 'safe'")
    if solver == "auto" and not is_cupy_array(cost) and min(matrix.shape) < AUTO_GPU_MIN_DENSE_ROWS:
        solver = "scipy"
    backend = get_solver(solver, "dense")
    auto_gpu = solver == "auto" and backend.gpu
    xp = _module_for(backend)
    # to the solver's device first (a GPU checks and converts a large matrix much faster than the host)
    matrix = _as_array(xp, matrix, None).astype(np.float64, copy=True)
    if maximize:
        matrix = -matrix
    summary = None
    if xp is np:
        invalid = bool(np.isnan(matrix).any()) or bool(np.isneginf(matrix).any())
    else:  # one pass on the GPU (CuPy's reductions to one value are slow on large matrices)
        summary = _gpu_common.summarize_dense(matrix)
        invalid = summary.n_invalid > 0
    if invalid:
        raise ValueError("matrix contains invalid numeric entries")

    transposed = matrix.shape[0] > matrix.shape[1]
    if transposed:
        matrix = matrix.T
    n = matrix.shape[0]
    if n == 0:
        empty = xp_in.empty(0, dtype=np.int64)
        return empty, empty.copy()

    device_matrix = xp.ascontiguousarray(matrix)
    if auto_gpu:
        backend = get_solver(_auto_dense(xp, device_matrix, summary), "dense")
    col_of_row = backend.dense(device_matrix)
    _check_assignment(xp, col_of_row, device_matrix, "cost matrix is infeasible")
    col_of_row = to_numpy(col_of_row).astype(np.int64)

    rows = np.arange(n, dtype=np.int64)
    if transposed:
        rows, col_of_row = col_of_row, rows
        order = np.argsort(rows)
        rows, col_of_row = rows[order], col_of_row[order]
    return xp_in.asarray(rows), xp_in.asarray(col_of_row)


def min_weight_full_bipartite_matching(biadjacency: Any, maximize: bool = False, *, solver: str = "auto"):
    """Minimum-weight matching of a sparse bipartite graph that matches the smaller side fully.

    Same semantics as :func:`scipy.sparse.csgraph.min_weight_full_bipartite_matching`,
    except that stored zeros are edges of weight zero (SciPy drops them).

    Parameters
    ----------
    biadjacency : (n, m) scipy.sparse array/matrix, cupyx sparse matrix or dense array
        Stored entries are the edges and their weights.
    maximize : bool
        Maximise the total weight instead.
    solver : str
        A name from :func:`available_solvers`, or ``"auto"``.

    Returns
    -------
    row_ind, col_ind : (min(n, m),) int64 arrays, sorted by row.

    Raises
    ------
    ValueError
        If no full matching exists or a weight is NaN or infinite.
    """
    on_gpu = is_cupy_array(getattr(biadjacency, "data", None))
    graph = sp.csr_array(biadjacency.get() if on_gpu else biadjacency, dtype=np.float64)
    graph.sum_duplicates()
    graph.sort_indices()
    if not np.isfinite(graph.data).all():
        raise ValueError("biadjacency matrix contains NaN or infinite weights")
    if maximize:
        graph = sp.csr_array((-graph.data, graph.indices, graph.indptr), shape=graph.shape)
    transposed = graph.shape[0] > graph.shape[1]
    if transposed:
        graph = sp.csr_array(graph.T)
        graph.sort_indices()
    n, m = graph.shape
    xp_out = get_array_module(biadjacency.data) if on_gpu else np
    if n == 0:
        empty = xp_out.empty(0, dtype=np.int64)
        return empty, empty.copy()

    backend = get_solver(solver, "sparse")
    xp = _module_for(backend)
    col_of_row = backend.sparse(
        xp.asarray(graph.indptr.astype(np.int64)),
        xp.asarray(graph.indices.astype(np.int64)),
        xp.asarray(graph.data),
        (n, m),
    )
    col_of_row = to_numpy(col_of_row).astype(np.int64)
    # O(n) checks and re-ordering: np.unique (a hash table in NumPy 2) and argsort took 0.69 s and 0.04 s of
    # the 0.87 s of a GPU solve at 1M nodes (H100, benchmarks/lap_profile.py)
    if (col_of_row < 0).any() or (col_of_row >= m).any() or np.bincount(col_of_row, minlength=m).max() > 1:
        raise ValueError("no full matching exists")
    if not transposed:
        return xp_out.asarray(np.arange(n, dtype=np.int64)), xp_out.asarray(col_of_row)
    row_of_col = np.full(m, -1, dtype=np.int64)  # the original rows are the columns here
    row_of_col[col_of_row] = np.arange(n, dtype=np.int64)
    rows = np.flatnonzero(row_of_col >= 0)
    return xp_out.asarray(rows), xp_out.asarray(row_of_col[rows])



def _all_finite(xp, array) -> bool:
    """Whether ``array`` holds no NaN or infinity; on the GPU by a shipped kernel (CuPy's ``isfinite(...).all()``
    compiles CUB reductions at first use: 10.8 s of a fresh H100's first GPU-linked run,
    ``benchmarks/results/cold_start_h100.md``)."""
    if xp is np:
        return bool(np.isfinite(array).all())
    from ..detect_gpu import all_finite  # (the package's one-pass check kernel)

    return all_finite(array)

def _per_node(xp, value, size: int):
    """A no-link cost (a number, or one per node) as a contiguous float64 array of ``size`` in ``xp``. Host
    values are broadcast on the host and copied once: CuPy's broadcast copy would compile a kernel on a fresh
    machine (``benchmarks/results/cold_start_h100.md``)."""
    if is_cupy_array(value):
        return xp.ascontiguousarray(xp.broadcast_to(xp.asarray(value, dtype=np.float64), (size,)))
    return xp.asarray(np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=np.float64), (size,))))


def _check_edges(xp, rows, cols, cost, n_rows: int, n_cols: int) -> tuple[bool, bool]:
    """``(every index in range, every cost finite)`` of the candidate edges; on the GPU one pass of a shipped
    kernel (four reductions and a check were five launches and five waits: 0.3-0.4 ms of a 1.7-ms solve at 10k
    nodes, H100, ``lap_generous_h100.md``)."""
    if rows.size == 0:
        return True, True
    if xp is np:
        in_range = rows.min() >= 0 and rows.max() < n_rows and cols.min() >= 0 and cols.max() < n_cols
        return bool(in_range), bool(np.isfinite(cost).all())
    from .components_gpu import check_edges

    flags = check_edges(n_rows, n_cols, xp.ascontiguousarray(rows), xp.ascontiguousarray(cols),
                        xp.ascontiguousarray(cost))
    return not flags & 3, not flags & 4


def _no_link_costs(xp, row_value, col_value, n_rows: int, n_cols: int):
    """The rows' and columns' "no link" costs as float64 arrays of ``xp`` (shapes ``(n_rows,)``, ``(n_cols,)``),
    checked finite. Host values (numbers, NumPy arrays) are broadcast and checked on the host and go to the GPU
    in one copy."""
    if xp is not np and not (is_cupy_array(row_value) or is_cupy_array(col_value)):
        both = np.concatenate([np.broadcast_to(np.asarray(row_value, dtype=np.float64), (n_rows,)),
                               np.broadcast_to(np.asarray(col_value, dtype=np.float64), (n_cols,))])
        if not np.isfinite(both).all():
            raise ValueError("unassigned (no-link) costs must be finite")
        both = xp.asarray(both)
        return both[:n_rows], both[n_rows:]
    row_un = _per_node(xp, row_value, n_rows)
    col_un = _per_node(xp, col_value, n_cols)
    if not (_all_finite(xp, row_un) and _all_finite(xp, col_un)):
        raise ValueError("unassigned (no-link) costs must be finite")
    return row_un, col_un


def solve_gated(
    rows: Any,
    cols: Any,
    cost: Any,
    shape: tuple[int, int],
    row_unassigned_cost: Any,
    col_unassigned_cost: Any = None,
    *,
    solver: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Optimal links of a gated assignment where any row or column may stay unlinked.

    Minimises ``sum(cost[chosen edges]) + sum(row_unassigned_cost[unlinked rows])
    + sum(col_unassigned_cost[unlinked cols])`` over one-to-one sets of the
    candidate edges. This is the frame-to-frame linking problem of Jaqaman et
    al. (2008): a particle may end (row unlinked) or start (column unlinked).

    Parameters
    ----------
    rows, cols : (k,) int arrays
        Candidate edges (row index, column index); no duplicates. NumPy or
        CuPy: CuPy inputs stay on the GPU when the solver runs there.
    cost : (k,) float array
        Finite edge costs.
    shape : (int, int)
        ``(n_rows, n_cols)``.
    row_unassigned_cost, col_unassigned_cost : float or array
        Cost of leaving each row (``(n_rows,)``) / column (``(n_cols,)``)
        unlinked; the column costs default to the row costs when scalar.
    solver : str
        A name from :func:`available_solvers`, or ``"auto"``.

    Returns
    -------
    row_ind, col_ind : int64 NumPy arrays
        The chosen edges, sorted by row.
    """
    n_rows, n_cols = (int(s) for s in shape)
    if col_unassigned_cost is None:
        if np.ndim(row_unassigned_cost) != 0:
            raise ValueError("col_unassigned_cost is required when row_unassigned_cost is an array")
        col_unassigned_cost = row_unassigned_cost
    on_gpu = any(is_cupy_array(a) for a in (rows, cols, cost))
    if solver == "auto" and not on_gpu and n_rows < AUTO_GPU_MIN_GATED_ROWS:
        solver = "scipy"
    backend = get_solver(solver, "gated")
    # Inputs already on the GPU stay there for a GPU solver; the generic sparse route builds a
    # SciPy matrix on the host.
    xp = np if backend.gated is None and backend.sparse is not None else _module_for(backend)
    rows, cols = _as_array(xp, rows, np.int64), _as_array(xp, cols, np.int64)
    cost = _as_array(xp, cost, np.float64)
    if not (rows.shape == cols.shape == cost.shape and rows.ndim == 1):
        raise ValueError("rows, cols and cost must be 1-D arrays of the same length")
    indices_in_range, costs_finite = _check_edges(xp, rows, cols, cost, n_rows, n_cols)
    if not indices_in_range:
        raise ValueError(f"edge indices out of range for shape {shape}")
    if not costs_finite:
        raise ValueError("edge costs must be finite (leave forbidden links out instead)")
    row_un, col_un = _no_link_costs(xp, row_unassigned_cost, col_unassigned_cost, n_rows, n_cols)
    empty = np.empty(0, dtype=np.int64)
    if rows.size == 0:
        return empty, empty.copy()

    if backend.gated is not None:
        row_ind, col_ind = backend.gated(n_rows, n_cols, rows, cols, cost, row_un, col_un)
        row_ind = to_numpy(row_ind).astype(np.int64)
        col_ind = to_numpy(col_ind).astype(np.int64)
    elif backend.sparse is None:
        row_ind, col_ind = _gated_through_dense(backend, xp, rows, cols, cost, row_un, col_un)
        row_ind = to_numpy(row_ind).astype(np.int64)
        col_ind = to_numpy(col_ind).astype(np.int64)
    else:
        # Generic route through a sparse solver: the reduced rectangular
        # problem with one private "no link" column per row.
        r_rows, r_cols, weights, r_shape = reduced_problem(rows, cols, cost, row_un, col_un)
        graph = sp.csr_array((weights, (r_rows, r_cols)), shape=r_shape)
        row_ind, col_ind = min_weight_full_bipartite_matching(graph, solver=backend.name)
        linked = col_ind < n_cols
        row_ind, col_ind = row_ind[linked], col_ind[linked]
    if np.any(row_ind[1:] < row_ind[:-1]):  # (SciPy's gated solver returns them in order)
        order = np.argsort(row_ind, kind="stable")
        row_ind, col_ind = row_ind[order], col_ind[order]
    return row_ind, col_ind


DENSE_GATED_MAX_ENTRIES = 1 << 27
"""Largest matrix (entries; 1 GiB of float64) a dense-only solver builds for a gated problem."""


def _gated_through_dense(backend: Solver, xp, rows, cols, cost, row_un, col_un):
    """A gated problem solved by a dense-only backend (the Hungarian solvers).

    The reduced problem (:func:`tracker.lap._scipy.reduced_problem`) of the
    ``r`` rows and ``c`` columns that have candidates, as one ``r x (c + r)``
    matrix: real columns weigh ``cost - col_unassigned``, each row's private
    "no link" column ``row_unassigned``, everything else is forbidden (inf).
    Rows and columns without candidates stay unlinked whatever happens.
    """
    used_rows, local_rows = xp.unique(rows, return_inverse=True)
    used_cols, local_cols = xp.unique(cols, return_inverse=True)
    r, c = len(used_rows), len(used_cols)
    if r * (c + r) > DENSE_GATED_MAX_ENTRIES:
        raise ValueError(
            f"solver {backend.name!r} solves dense problems: this gated problem ({r} rows and {c} columns "
            f"with candidates) would need a {r} x {c + r} matrix; use 'auction' or 'scipy' for large gated problems"
        )
    dense = xp.full((r, c + r), xp.inf)
    dense[local_rows.ravel(), local_cols.ravel()] = cost - col_un[cols]
    dense[xp.arange(r), c + xp.arange(r)] = row_un[used_rows]
    col_of_row = backend.dense(dense)
    _check_assignment(xp, col_of_row, dense,
                      f"solver {backend.name!r} ended on a forbidden link; use an exact solver")
    linked = col_of_row < c
    return used_rows[linked], used_cols[col_of_row[linked]]


AUTO_DENSE_TIE_RANGE = 0.25
"""Integer matrices spanning at most this times n go to ``hungarian-classical`` (see the table above)."""
AUTO_DENSE_DISTINCT = 0.8
"""... and so do matrices whose rows' cheapest columns are at least this fraction distinct."""


def _auto_dense(xp, cost, summary) -> str:
    """The dense GPU solver of ``auto`` for an ``(n, m)`` matrix (``n <= m``): the module docstring's table."""
    n, m = cost.shape
    if summary.integral and summary.hi - summary.lo <= AUTO_DENSE_TIE_RANGE * n:
        return "hungarian-classical"
    if distinct_row_minima(xp, cost) >= AUTO_DENSE_DISTINCT * n:
        return "hungarian-classical" if summary.integral else "hungarian-tree"
    return "auction"


def distinct_row_minima(xp, cost) -> int:
    """How many columns of a C-contiguous float64 ``(n, m)`` matrix are some row's (first) cheapest.

    On the GPU one kernel (``dense_input.cu``) and one read: CuPy's ``argmin(axis=1)`` alone took about 1 ms
    at n = 1000, a quarter of the auction's solve (H100).
    """
    n, m = cost.shape
    if xp is np:
        finite = np.isfinite(cost).any(axis=1)
        return int(np.unique(np.argmin(cost, axis=1)[finite]).size)
    from ._cuda import load_module

    hit = xp.zeros(m + 1, dtype=xp.int32)  # the last slot counts
    blocks = int(min(-(-n * 32 // 256), 65535))
    load_module("lap/dense_input.cu").get_function("distinct_row_minima")(
        (blocks,), (256,), (cost, np.int32(n), np.int32(m), hit, hit[m:]))
    return int(hit[m])


def _check_assignment(xp, col_of_row, cost, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``col_of_row`` is a feasible one-to-one assignment.

    Runs in the solver's array module so that a GPU matrix never crosses to the host.
    """
    n, m = cost.shape
    if col_of_row.shape != (n,):
        raise ValueError(message)
    in_range = (col_of_row >= 0) & (col_of_row < m)
    chosen = cost[xp.arange(n), xp.where(in_range, col_of_row, 0)]
    ordered = xp.sort(col_of_row)
    # The three verdicts in one read (on a GPU each read is a synchronisation).
    feasible, allowed, repeated = (bool(flag) for flag in to_numpy(xp.stack([
        in_range.all(), xp.isfinite(chosen).all(), (ordered[1:] == ordered[:-1]).any()])))
    if not (feasible and allowed):
        raise ValueError(message)
    if repeated:
        raise RuntimeError("solver returned a column twice; please report this as a bug")
