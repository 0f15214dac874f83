"""Gated link costs between the detections of two frames.

Costs are always sparse: only pairs closer than the maximum displacement are
candidates, found with a k-d tree (or, for large frames with a GPU present,
a uniform grid on the GPU: :mod:`tracker.gating_gpu`), so memory grows with
the number of plausible links, never with ``n * m``.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from .backend import gpu_available

GPU_GATING_MIN_POINTS = 50_000
""":func:`gated_links_per_source` searches on the GPU from this many source points
(when CuPy and a GPU are present); the result is identical either way."""

DEFAULT_NO_LINK_FACTOR = 1.05
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate links within a radius of its own for every source point.

    Like :func:`gated_links`, but source ``i`` (a position, or a predicted
    position) only reaches targets within ``radius_um[i]``. Uses k-nearest
    neighbour queries of one k-d tree over the targets on all cores, growing
    ``k`` only for the sources that need it, so the result is exact; from
    :data:`GPU_GATING_MIN_POINTS` sources on, with a GPU, the grid search of
    :mod:`tracker.gating_gpu` at the largest radius instead. Both end with
    the same exact test on the host, so they return identical arrays.

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
    if len(source_um) >= GPU_GATING_MIN_POINTS and gpu_available():
        rows, cols = _candidates_gpu(source_um, target_um, float(radius.max()))
    else:
        rows, cols = _candidates_kdtree(source_um, target_um, radius)
    # The exact test, on the host for both searches (the same rounding: identical results).
    delta = source_um[rows] - target_um[cols]
    delta *= delta
    cost = delta[:, 0] + delta[:, 1] + delta[:, 2]
    inside = cost <= radius[rows] ** 2
    rows, cols, cost = rows[inside], cols[inside], cost[inside]
    order = np.argsort(rows * len(target_um) + cols)  # keys are distinct: (row, col) order
    return rows[order], cols[order], cost[order]


def _candidates_gpu(source_um: np.ndarray, target_um: np.ndarray, radius_um: float):
    """Pairs within ``radius_um`` (padded by a relative 1e-9) from the GPU grid search."""
    from .backend import to_numpy
    from .gating_gpu import gated_links_gpu

    rows, cols, _ = gated_links_gpu(source_um, target_um, radius_um * (1 + 1e-9) + 1e-12)
    return to_numpy(rows), to_numpy(cols)


def _candidates_kdtree(source_um: np.ndarray, target_um: np.ndarray, radius: np.ndarray):
    """Pairs within each source's radius (padded) from k-nearest-neighbour queries of one k-d tree."""
    tree = cKDTree(target_um)
    pending = np.arange(len(source_um))
    k = min(8, len(target_um))
    found_rows, found_cols = [], []
    while pending.size:
        # The bound is padded: the exact test below decides.
        bound = float(radius[pending].max()) * (1 + 1e-9) + 1e-12
        distance, index = tree.query(source_um[pending], k=k, distance_upper_bound=bound, workers=-1)
        distance, index = distance.reshape(len(pending), k), index.reshape(len(pending), k)
        hit = index < len(target_um)
        full = hit[:, -1] & (distance[:, -1] <= radius[pending] * (1 + 1e-9)) & (k < len(target_um))
        keep = hit & ~full[:, None]
        found_rows.append(np.repeat(pending, keep.sum(axis=1)))
        found_cols.append(index[keep])
        pending = pending[full]
        k = min(4 * k, len(target_um))
    return np.concatenate(found_rows).astype(np.int64), np.concatenate(found_cols).astype(np.int64)
