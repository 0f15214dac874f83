"""Gated link costs between the detections of two frames.

Costs are always sparse: only pairs closer than the maximum displacement are
candidates, found with a k-d tree (or, for large frames with a GPU present,
a uniform grid on the GPU: :mod:`tracker.gating_gpu`), so memory grows with
the number of plausible links, never with ``n * m``.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.spatial import cKDTree

from ._threads import available_cores, thread_pool
from .backend import gpu_available
from .params import LINKING_DEFAULTS
from .tables import stable_argsort

GPU_GATING_MIN_POINTS = 2_000
""":func:`gated_links_per_source` and :func:`nearest_target` search on the GPU from this many
query points (when CuPy and a GPU are present); the result is identical either way. On one
H100 (``benchmarks/results/link_scale_h100.md``) the grid beats the host's 16-core k-d tree
from 1k points (1.6 vs 2.5 ms; 5k: 3.9 vs 5.9 ms; 50k: 12.9 vs 44.7 ms), and the 100-frame
pipeline's link stage (~4.6k points per frame) took 2.7-2.85 s instead of 3.9 s."""

DEFAULT_NO_LINK_FACTOR = LINKING_DEFAULTS.no_link_factor
""""No link" cost = this factor × the largest candidate link cost (Jaqaman et al. 2008)."""


def gated_links(
    source_um: np.ndarray,
    target_um: np.ndarray,
    max_displacement_um: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate links within ``max_displacement_um`` and their costs.

    Parameters
    ----------
    source_um : (n, 3) float array
        Positions ``z, y, x`` (µm) in the earlier frame (or their predicted
        positions in the later frame).
    target_um : (m, 3) float array
        Positions in the later frame (µm).
    max_displacement_um : float
        Gate: the largest plausible displacement between frames (µm).

    Returns
    -------
    rows, cols : (k,) int64 arrays
        Source and target index of each candidate, sorted by ``(row, col)``.
    cost : (k,) float64 array
        Squared Euclidean distance in µm².
    """
    if max_displacement_um <= 0 or not np.isfinite(max_displacement_um):
        raise ValueError(f"maximum displacement must be a positive number of µm, got {max_displacement_um}")
    source_um = np.asarray(source_um, dtype=np.float64).reshape(-1, 3)
    target_um = np.asarray(target_um, dtype=np.float64).reshape(-1, 3)
    empty = np.empty(0, dtype=np.int64)
    if len(source_um) == 0 or len(target_um) == 0:
        return empty, empty.copy(), np.empty(0)
    pairs = cKDTree(source_um).sparse_distance_matrix(
        cKDTree(target_um), max_displacement_um, output_type="ndarray"
    )
    rows = pairs["i"].astype(np.int64)
    cols = pairs["j"].astype(np.int64)
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    # Recompute exactly rather than square the tree's distance (rounding).
    cost = np.sum((source_um[rows] - target_um[cols]) ** 2, axis=1)
    return rows, cols, cost


def no_link_cost(
    link_cost: np.ndarray,
    max_displacement_um: float,
    factor: float = DEFAULT_NO_LINK_FACTOR,
) -> float:
    """Cost of leaving a particle unlinked (µm²).

    ``factor`` × the largest candidate cost (Jaqaman et al. 2008, as in
    TrackMate and LapTrack); ``factor`` × the squared gate when there are no
    candidates. Any candidate link then beats two "no link" choices, so the
    gate alone decides what may link, and the assignment decides which.
    """
    largest = float(np.max(link_cost)) if len(link_cost) else float(max_displacement_um) ** 2
    return factor * largest


def gated_links_per_source(
    source_um: np.ndarray,
    target_um: np.ndarray,
    radius_um: np.ndarray | float,
    *,
    target_tree: cKDTree | None = None,
    source_order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate links within a radius of its own for every source point.

    Like :func:`gated_links`, but source ``i`` (a position, or a predicted
    position) only reaches targets within ``radius_um[i]``. Uses k-nearest
    neighbour queries of one k-d tree over the targets on all cores, growing
    ``k`` only for the sources that need it, so the result is exact; from
    :data:`GPU_GATING_MIN_POINTS` sources on, with a GPU, the grid search of
    :mod:`tracker.gating_gpu` at the largest radius instead. Both end with
    the same exact test on the host, so they return identical arrays.

    ``target_tree``, a k-d tree over exactly ``target_um`` (see
    :func:`target_tree_of`), is used instead of building one.
    ``source_order``, a permutation of the sources that puts nearby ones
    next to each other (such as the ``indices`` of a k-d tree over them),
    is the order in which the k-d tree is queried: successive queries then
    walk the same branches, which took 30-45 % less time for 100k points on
    this project's 2-core machine. The result does not depend on it.

    Returns
    -------
    rows, cols : (k,) int64 arrays, sorted by ``(row, col)``.
    cost : (k,) float64 array
        Squared Euclidean distance in µm².
    """
    source_um = np.asarray(source_um, dtype=np.float64).reshape(-1, 3)
    target_um = np.asarray(target_um, dtype=np.float64).reshape(-1, 3)
    radius = np.broadcast_to(np.asarray(radius_um, dtype=np.float64), (len(source_um),))
    if radius.size and (not np.isfinite(radius).all() or radius.min() <= 0):
        raise ValueError("search radii must be positive numbers of µm")
    empty = np.empty(0, dtype=np.int64)
    if len(source_um) == 0 or len(target_um) == 0:
        return empty, empty.copy(), np.empty(0)
    _check_tree(target_tree, target_um)
    if searches_on_gpu(len(source_um)):
        rows, cols = _candidates_gpu(source_um, target_um, float(radius.max()))
    else:
        tree = target_tree if target_tree is not None else target_tree_of(target_um)
        rows, cols = _candidates_kdtree(source_um, tree, radius, source_order)
    # The exact test, on the host for both searches (the same rounding: identical results).
    return nearest_per_source(*within_radius(source_um, target_um, rows, cols, radius))


def nearest_per_source(rows: np.ndarray, cols: np.ndarray, cost: np.ndarray,
                       most: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidates ``(rows, cols, cost)`` sorted by ``(row, col)`` with at most ``most``
    (:data:`MAX_CANDIDATES_PER_POINT`) per row, the nearest (ties: the lower column); a warning when any row
    had more."""
    most = MAX_CANDIDATES_PER_POINT if most is None else most
    if len(rows) <= most:
        return rows, cols, cost
    counts = np.bincount(rows)
    if counts.max() <= most:
        return rows, cols, cost
    order = np.lexsort((cols, cost, rows))  # by row, then nearest first
    start = np.repeat(np.cumsum(counts) - counts, counts)  # (rows are sorted: each row's first position)
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = np.arange(len(rows)) - start
    keep = rank < most
    _warn_capped(int(np.count_nonzero(counts > most)), most)
    return rows[keep], cols[keep], cost[keep]


def _warn_capped(n_points: int, most: int) -> None:
    warnings.warn(f"{n_points} point(s) had {most} or more candidate links within the gate: their {most} "
                  f"nearest were kept (a smaller --max-displacement searches less)", RuntimeWarning, stacklevel=4)


def within_radius(
    source_um: np.ndarray, target_um: np.ndarray, rows: np.ndarray, cols: np.ndarray, radius_um: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs ``(rows, cols)`` whose target lies within its source's radius, and their squared distances (µm²).

    The exact test that ends :func:`gated_links_per_source`: a search that narrows a superset of its candidates
    down with it gets the same candidates and the same (bitwise) distances.
    """
    # (np.take: row gathers of 2-D arrays are several times faster than fancy indexing.)
    delta = np.take(source_um, rows, axis=0) - np.take(target_um, cols, axis=0)
    delta *= delta
    cost = delta[:, 0] + delta[:, 1] + delta[:, 2]
    inside = cost <= radius_um[rows] ** 2
    return rows[inside], cols[inside], cost[inside]


def nearest_target(
    query_um: np.ndarray,
    target_um: np.ndarray,
    radius_um: float,
    *,
    target_tree: cKDTree | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each query point's nearest target within ``radius_um`` (µm).

    On the GPU grid of :mod:`tracker.gating_gpu` from :data:`GPU_GATING_MIN_POINTS` queries when a GPU
    is present, else with a k-d tree (``target_tree``, over exactly ``target_um``, if given).

    Returns
    -------
    index : (n,) int64 array
        The nearest target, -1 where none lies within the radius.
    distance_sq : (n,) float64 array
        Squared distance to it (µm², computed on the host the same way for both searches), inf where none.
    """
    query_um = np.asarray(query_um, dtype=np.float64).reshape(-1, 3)
    target_um = np.asarray(target_um, dtype=np.float64).reshape(-1, 3)
    radius = float(radius_um)
    if radius <= 0 or not np.isfinite(radius):
        raise ValueError(f"the radius must be a positive number of µm, got {radius_um}")
    _check_tree(target_tree, target_um)
    index = np.full(len(query_um), -1, dtype=np.int64)
    if len(query_um) and len(target_um):
        if searches_on_gpu(len(query_um)):
            from .backend import to_numpy
            from .gating_gpu import nearest_target_gpu

            index = to_numpy(nearest_target_gpu(query_um, target_um, radius)).astype(np.int64)
        else:
            tree = target_tree if target_tree is not None else target_tree_of(target_um)
            _, found = query_tree(tree, query_um, 1, radius)
            index = np.where(found < len(target_um), found, -1).astype(np.int64)
    hit = index >= 0
    distance_sq = np.full(len(query_um), np.inf)
    delta = query_um[hit] - target_um[index[hit]]
    distance_sq[hit] = np.sum(delta * delta, axis=1)
    return index, distance_sq


def _check_tree(tree: cKDTree | None, target_um: np.ndarray) -> None:
    """A given k-d tree must be over ``target_um`` (checked by size: its points are the caller's word)."""
    if tree is not None and tree.n != len(target_um):
        raise ValueError(f"target_tree holds {tree.n} points, target_um {len(target_um)}")


def searches_on_gpu(n_queries: int) -> bool:
    """Whether :func:`gated_links_per_source` and :func:`nearest_target` search ``n_queries`` points on the GPU."""
    return n_queries >= GPU_GATING_MIN_POINTS and gpu_available()


def target_tree_of(target_um: np.ndarray) -> cKDTree:
    """The k-d tree :func:`gated_links_per_source` searches over ``target_um`` (µm), for reuse.

    Not balanced: built in about half the time (20-30 ms instead of 46 ms for 100k points on this
    project's 2-core machine), queried as fast on uniform spots.
    """
    return cKDTree(np.asarray(target_um, dtype=np.float64).reshape(-1, 3), balanced_tree=False)


def _candidates_gpu(source_um: np.ndarray, target_um: np.ndarray, radius_um: float):
    """Pairs within ``radius_um`` (padded by a relative 1e-9) from the GPU grid search, sorted by (row, col)."""
    from .backend import to_numpy
    from .gating_gpu import gated_links_gpu

    rows, cols, _ = gated_links_gpu(source_um, target_um, radius_um * (1 + 1e-9) + 1e-12)  # sorted on the GPU
    return to_numpy(rows).astype(np.int64), to_numpy(cols).astype(np.int64)


MAX_CANDIDATES_PER_POINT = 128
"""At most this many candidate links per point (its nearest within the radius): memory stays bounded (about
137 bytes a candidate, 175 MB for 10k points) however generous the gate. Tracking data have a handful of
candidates per point (about 5 at step / nearest-neighbour distance 0.5 with the adaptive radius; 1-40 with
generous gates, issue 27's family), so the cap binds only where the gate is far larger than the motion, and
a warning says so (the links then favour the nearest candidates, as the costs do anyway)."""

KDTREE_FIRST_K = 8
"""Neighbours asked of the k-d tree per source in the first query round (4 times more in each further round, for
the sources whose last neighbour still lay within their radius)."""

RADIUS_GROUP_RATIO = 1.15
"""Sources whose radii differ by more than this factor are queried in separate groups (at most
:data:`MAX_RADIUS_GROUPS`), each with its own distance bound: a k-d tree query visits every node within its bound
while fewer than ``k`` neighbours are found, so one bound for all (the largest radius, such as a gap-closing row's)
made every query search a volume several times its own."""

MAX_RADIUS_GROUPS = 6

PARALLEL_QUERY_MIN_POINTS = 1_000
"""k-d tree queries of at least twice this many points are split into contiguous chunks of at least this many,
queried at the same time on the calling thread and one persistent thread per further core (SciPy's
query releases the GIL; the result is that of one query). SciPy's own ``workers`` starts new threads on every
call (0.1-0.3 ms a query on this project's 2-core machine, where it only paid from 10k queries); with these,
linking 10k points per frame took 5-14 % less time (identical links), 100k the same."""


def _candidates_kdtree(source_um: np.ndarray, tree: cKDTree, radius: np.ndarray, order: np.ndarray | None = None):
    """Pairs within each source's radius (padded), sorted by (row, col), from k-nearest-neighbour queries.

    The first round queries all sources in ``order`` (default: their own), by groups of similar radius
    (:func:`_radius_groups`); a further round the ones with more candidates than it asked for. Each source's
    candidates come from one query (sorted there); the pairs of all queries are put in row order once, at the
    end, by a stable radix sort (20k pairs: 0.12 ms, against 0.58 ms for a sort of ``row * n_targets + col``).
    """
    n_targets = tree.n
    queried = np.arange(len(source_um)) if order is None else np.asarray(order, dtype=np.int64)
    most = min(n_targets, MAX_CANDIDATES_PER_POINT)
    k = min(KDTREE_FIRST_K, most)
    found_rows, found_cols = [], []
    capped = 0
    while queried.size:
        again = []
        for group in _radius_groups(radius, queried):
            # The bound is padded: the exact test decides.
            bound = float(radius[group].max()) * (1 + 1e-9) + 1e-12
            distance, index = query_tree(tree, np.take(source_um, group, axis=0), k, bound)
            distance, index = distance.reshape(len(group), k), index.reshape(len(group), k)
            reached = (index[:, -1] < n_targets) & (distance[:, -1] <= radius[group] * (1 + 1e-9))
            full = reached & (k < most)
            capped += int(np.count_nonzero(reached)) if k == most < n_targets else 0
            index = np.sort(index, axis=1)  # each row's columns in order; misses (n_targets) last
            hit = index < n_targets
            hit[full] = False  # (asked again)
            found_rows.append(np.repeat(group, hit.sum(axis=1)))
            found_cols.append(index[hit])
            again.append(group[full])
        queried = np.concatenate(again)
        k = min(4 * k, most)
    if capped:
        _warn_capped(capped, most)
    rows, cols = np.concatenate(found_rows), np.concatenate(found_cols)
    by_row = stable_argsort(rows)
    return np.take(rows, by_row), np.take(cols, by_row).astype(np.int64, copy=False)


def query_tree(tree: cKDTree, points: np.ndarray, k: int, distance_upper_bound: float) -> tuple[np.ndarray, np.ndarray]:
    """``tree.query(points, k, distance_upper_bound=...)`` on several cores from ``2 * PARALLEL_QUERY_MIN_POINTS``
    points (see :data:`PARALLEL_QUERY_MIN_POINTS`): the same arrays, ``(n,)`` for ``k = 1``, else ``(n, k)``."""
    cores = available_cores()
    n_chunks = min(len(points) // PARALLEL_QUERY_MIN_POINTS, cores)
    if n_chunks < 2:
        return tree.query(points, k=k, distance_upper_bound=distance_upper_bound)
    bounds = np.linspace(0, len(points), n_chunks + 1).astype(np.int64).tolist()
    helpers = thread_pool("query", cores - 1)
    others = [helpers.submit(tree.query, points[start:stop], k=k, distance_upper_bound=distance_upper_bound)
              for start, stop in zip(bounds[1:-1], bounds[2:])]
    parts = [tree.query(points[:bounds[1]], k=k, distance_upper_bound=distance_upper_bound)]
    parts += [other.result() for other in others]
    return np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts])


def _radius_groups(radius: np.ndarray, queried: np.ndarray) -> list[np.ndarray]:
    """The sources ``queried`` in groups of similar radius (:data:`RADIUS_GROUP_RATIO`, at most
    :data:`MAX_RADIUS_GROUPS`), each in the order of ``queried``."""
    if len(queried) == 0:
        return []
    of_queried = radius[queried]
    level = np.log(float(of_queried.max()) / of_queried) // np.log(RADIUS_GROUP_RATIO)
    level = np.minimum(level, MAX_RADIUS_GROUPS - 1).astype(np.int64)
    present = np.flatnonzero(np.bincount(level, minlength=MAX_RADIUS_GROUPS))
    return [queried] if len(present) == 1 else [queried[level == value] for value in present]
