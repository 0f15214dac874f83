"""Gated candidate links on the GPU (CuPy): the GPU counterpart of :func:`tracker.costs.gated_links`.

A uniform grid with cells at least as wide as the gate turns the fixed-radius
neighbour search into a scan of 27 cells per source point (``gating_gpu.cu``);
the same grid answers nearest-neighbour queries within a radius
(:func:`nearest_target_gpu`).
"""

from __future__ import annotations

import functools
import numpy as np

_THREADS = 256
# Grid cells per target point at most; wider cells keep the grid small for
# sparse points in a large box (correct for any cell >= the gate).
_MAX_CELLS_PER_POINT = 8


@functools.lru_cache(maxsize=1)
def _kernels():
    from .lap._cuda import load_module

    module = load_module("gating_gpu.cu")
    return {name: module.get_function(name) for name in ("count_candidates", "write_candidates", "nearest_target")}


def gated_links_gpu(source_um, target_um, max_displacement_um: float):
    """Candidate links within ``max_displacement_um`` (µm), computed on the GPU.

    Parameters
    ----------
    source_um, target_um : (n, 3), (m, 3) array-like (NumPy or CuPy)
        Positions ``z, y, x`` in µm.
    max_displacement_um : float
        The gate (µm).

    Returns
    -------
    rows, cols : (k,) cupy int64 arrays, sorted by ``(row, col)``
    cost : (k,) cupy float64 array
        Squared distances in µm² — the same as the CPU version.
    """
    import cupy

    radius = float(max_displacement_um)
    if radius <= 0 or not np.isfinite(radius):
        raise ValueError(f"maximum displacement must be a positive number of µm, got {max_displacement_um}")
    source = cupy.ascontiguousarray(cupy.asarray(source_um, dtype=cupy.float64).reshape(-1, 3))
    target = cupy.ascontiguousarray(cupy.asarray(target_um, dtype=cupy.float64).reshape(-1, 3))
    n, m = len(source), len(target)
    if n == 0 or m == 0:
        return cupy.empty(0, cupy.int64), cupy.empty(0, cupy.int64), cupy.empty(0, cupy.float64)

    kernels = _kernels()
    grid = ((n + _THREADS - 1) // _THREADS,)
    arrays, geometry = _target_grid(source, target, radius)
    counts = cupy.empty(n, dtype=cupy.int64)
    kernels["count_candidates"](grid, (_THREADS,), (source, np.int32(n), *arrays, *geometry, counts))
    offsets = cupy.cumsum(counts) - counts
    total = int(counts.sum())
    rows = cupy.empty(total, dtype=cupy.int64)
    cols = cupy.empty(total, dtype=cupy.int64)
    cost = cupy.empty(total, dtype=cupy.float64)
    if total:
        kernels["write_candidates"](grid, (_THREADS,), (source, np.int32(n), *arrays, *geometry, offsets, rows, cols,
                                                         cost))
        # Rows are already grouped; order each row's columns.
        order = cupy.lexsort(cupy.stack([cols, rows]))
        rows, cols, cost = rows[order], cols[order], cost[order]
    return rows, cols, cost


def nearest_target_gpu(query_um, target_um, radius_um: float):
    """Index of each query point's nearest target within ``radius_um`` (µm), -1 where none; on the GPU.

    Ties go to the lower target index; any of the tied targets is at the same distance, which is
    what :func:`tracker.costs.nearest_target` returns. Returns a CuPy int64 array.
    """
    import cupy

    radius = float(radius_um)
    if radius <= 0 or not np.isfinite(radius):
        raise ValueError(f"the radius must be a positive number of µm, got {radius_um}")
    query = cupy.ascontiguousarray(cupy.asarray(query_um, dtype=cupy.float64).reshape(-1, 3))
    target = cupy.ascontiguousarray(cupy.asarray(target_um, dtype=cupy.float64).reshape(-1, 3))
    nearest = cupy.full(len(query), -1, dtype=cupy.int64)
    if len(query) == 0 or len(target) == 0:
        return nearest
    arrays, geometry = _target_grid(query, target, radius)
    _kernels()["nearest_target"](((len(query) + _THREADS - 1) // _THREADS,), (_THREADS,),
                                 (query, np.int32(len(query)), *arrays, *geometry, nearest))
    return nearest


def _target_grid(source, target, radius: float):
    """The targets sorted into a uniform grid of cells at least ``radius`` wide over both point sets.

    Returns the kernel arguments: ``(target_sorted, target_index, cell_start, cell_end)`` and the
    geometry ``(origin z, y, x, cell, nz, ny, nx, radius²)``.
    """
    import cupy

    low = cupy.minimum(source.min(axis=0), target.min(axis=0)).get()
    high = cupy.maximum(source.max(axis=0), target.max(axis=0)).get()
    extent = np.maximum(high - low, 1e-12)
    cell = radius
    while np.prod(np.floor(extent / cell) + 1) > _MAX_CELLS_PER_POINT * len(target) + 1000:
        cell *= 1.5
    dims = (np.floor(extent / cell) + 1).astype(np.int64)
    n_cells = int(np.prod(dims))

    # Sort targets by cell; each cell's run of targets is [start, end).
    cells = cupy.floor((target - cupy.asarray(low)) / cell).astype(cupy.int64)
    cell_id = (cells[:, 0] * int(dims[1]) + cells[:, 1]) * int(dims[2]) + cells[:, 2]
    order = cupy.argsort(cell_id)
    sorted_ids = cell_id[order]
    all_cells = cupy.arange(n_cells, dtype=cupy.int64)
    cell_start = cupy.searchsorted(sorted_ids, all_cells, side="left").astype(cupy.int32)
    cell_end = cupy.searchsorted(sorted_ids, all_cells, side="right").astype(cupy.int32)
    arrays = (cupy.ascontiguousarray(target[order]), order.astype(cupy.int32), cell_start, cell_end)
    geometry = (np.float64(low[0]), np.float64(low[1]), np.float64(low[2]), np.float64(cell),
                np.int32(dims[0]), np.int32(dims[1]), np.int32(dims[2]), np.float64(radius * radius))
    return arrays, geometry
