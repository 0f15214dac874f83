"""Gated candidate links on the GPU: the GPU counterpart of :func:`tracker.costs.gated_links`.

A uniform grid with cells at least as wide as the gate turns the fixed-radius
neighbour search into a scan of 27 cells per source point; the same grid answers
nearest-neighbour queries within a radius (:func:`nearest_target_gpu`).

Every step on the device is a kernel of ``gating_gpu.cu`` (the box of the points, the cell histogram,
its scan and the counting sort of the targets into cells, the candidates' counts, their scan, and the
candidates written in order), which ships compiled (:mod:`tracker.lap._cuda`): CuPy is left only
allocations and copies between host and device. Written with CuPy operations (reductions, element-wise
arithmetic, ``searchsorted``, fancy indexing), these steps were 17 NVRTC compilations, 1.9 s of a fresh
H100's first GPU-linked ``track run`` (``benchmarks/results/cold_start_h100.md``).
"""

from __future__ import annotations

import functools

import numpy as np

_THREADS = 256
_MAX_BLOCKS = 1024  # grid-stride kernels (point_bounds): enough blocks to fill any GPU
_SCAN_THREADS = 256  # as in gating_gpu.cu (SCAN_THREADS)
_SCAN_TILE = 256 * 8  # values per scan block (SCAN_TILE)
_SCAN_TOTALS_THREADS = 1024  # the one block that scans the tiles' totals
# Grid cells per target point at most; wider cells keep the grid small for
# sparse points in a large box (correct for any cell >= the gate).
_MAX_CELLS_PER_POINT = 8

_KERNELS = ("point_bounds", "target_cells", "sort_targets", "scan_tile_totals", "scan_totals", "scan_tiles",
            "count_candidates", "write_candidates", "nearest_target")


@functools.lru_cache(maxsize=1)
def _kernels():
    from .lap._cuda import load_module

    module = load_module("gating_gpu.cu")
    return {name: module.get_function(name) for name in _KERNELS}


def _blocks(n: int) -> tuple[int]:
    return (max(1, -(-int(n) // _THREADS)),)


def _on_device(points):
    """``points`` as a C-contiguous ``(n, 3)`` float64 CuPy array; NumPy input is converted on the host (a
    copy to the device compiles nothing, a conversion on the device would)."""
    import cupy

    if not isinstance(points, cupy.ndarray):
        points = np.ascontiguousarray(np.asarray(points, dtype=np.float64).reshape(-1, 3))
    return cupy.ascontiguousarray(cupy.asarray(points, dtype=cupy.float64).reshape(-1, 3))


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
    source, target = _on_device(source_um), _on_device(target_um)
    n, m = len(source), len(target)
    if n == 0 or m == 0:
        return cupy.empty(0, cupy.int64), cupy.empty(0, cupy.int64), cupy.empty(0, cupy.float64)

    kernels = _kernels()
    arrays, geometry = _target_grid(source, target, radius)
    # 5-6. candidates per source, then each source's output range (one more slot: the total)
    offsets = cupy.zeros(n + 1, dtype=cupy.int64)
    kernels["count_candidates"](_blocks(n), (_THREADS,), (source, np.int32(n), *arrays, *geometry, offsets))
    exclusive_scan(offsets)
    total = int(offsets[n:].get()[0])
    rows = cupy.empty(total, dtype=cupy.int64)
    cols = cupy.empty(total, dtype=cupy.int64)
    cost = cupy.empty(total, dtype=cupy.float64)
    if total:
        # 7. each source's candidates into its range, ordered by column
        kernels["write_candidates"](_blocks(n), (_THREADS,), (source, np.int32(n), *arrays, *geometry, offsets,
                                                              rows, cols, cost))
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
    query, target = _on_device(query_um), _on_device(target_um)
    if len(query) == 0 or len(target) == 0:
        return cupy.asarray(np.full(len(query), -1, dtype=np.int64))
    arrays, geometry = _target_grid(query, target, radius)
    nearest = cupy.empty(len(query), dtype=cupy.int64)  # every entry written by the kernel
    _kernels()["nearest_target"](_blocks(len(query)), (_THREADS,),
                                 (query, np.int32(len(query)), *arrays, *geometry, nearest))
    return nearest


def exclusive_scan(values) -> None:
    """Replace a C-contiguous int64 CuPy array by its exclusive prefix sums, in place (``values[i]`` becomes
    the sum of ``values[:i]``), with the scan kernels of ``gating_gpu.cu``. Integer sums: exact."""
    import cupy

    n = int(values.size)
    if n == 0:
        return
    if values.dtype != cupy.int64 or not values.flags.c_contiguous:
        raise ValueError("exclusive_scan takes a C-contiguous int64 array")
    kernels = _kernels()
    n_tiles = -(-n // _SCAN_TILE)
    totals = cupy.empty(n_tiles, dtype=cupy.int64)
    kernels["scan_tile_totals"]((n_tiles,), (_SCAN_THREADS,), (values, np.int64(n), totals))
    kernels["scan_totals"]((1,), (_SCAN_TOTALS_THREADS,), (totals, np.int64(n_tiles)))
    kernels["scan_tiles"]((n_tiles,), (_SCAN_THREADS,), (values, np.int64(n), totals))


def _from_ordered(keys: np.ndarray) -> np.ndarray:
    """The float64 values of ``point_bounds``' order-preserving uint64 keys (its ``ordered_key`` undone)."""
    keys = np.asarray(keys, dtype=np.uint64)
    sign = np.uint64(1 << 63)
    bits = np.where(keys & sign, keys ^ sign, ~keys)
    return bits.view(np.float64)


def _target_grid(source, target, radius: float):
    """The targets sorted into a uniform grid of cells at least ``radius`` wide over both point sets.

    Returns the kernel arguments: ``(target_sorted, target_index, cell_offset)`` (cell ``c``'s targets are
    ``target_sorted[cell_offset[c]:cell_offset[c + 1]]``) and the geometry
    ``(origin z, y, x, cell, nz, ny, nx, radius²)``.
    """
    import cupy

    kernels = _kernels()
    n, m = len(source), len(target)
    # 1. the box of both point sets (keys start at the identities of min and max)
    keys = cupy.asarray(np.array([2**64 - 1] * 3 + [0] * 3, dtype=np.uint64))
    nonfinite = cupy.zeros(1, dtype=cupy.int32)
    blocks = (max(1, min(-(-(n + m) // _THREADS), _MAX_BLOCKS)),)
    kernels["point_bounds"](blocks, (_THREADS,), (source, np.int64(n), target, np.int64(m), keys, nonfinite))
    if int(nonfinite.get()[0]):
        raise ValueError("positions must be finite (NaN or infinite coordinates given)")
    bounds = _from_ordered(keys.get())
    low, high = bounds[:3], bounds[3:]
    extent = np.maximum(high - low, 1e-12)
    cell = radius
    while np.prod(np.floor(extent / cell) + 1) > _MAX_CELLS_PER_POINT * m + 1000:
        cell *= 1.5
    dims = (np.floor(extent / cell) + 1).astype(np.int64)
    n_cells = int(np.prod(dims))
    origin = (np.float64(low[0]), np.float64(low[1]), np.float64(low[2]), np.float64(cell))

    # 2-4. counting sort of the targets by cell: histogram, its exclusive scan (one more slot: the total),
    # each target to its place
    target_cell = cupy.empty(m, dtype=cupy.int64)
    target_rank = cupy.empty(m, dtype=cupy.int64)
    cell_offset = cupy.zeros(n_cells + 1, dtype=cupy.int64)
    kernels["target_cells"](_blocks(m), (_THREADS,), (target, np.int32(m), *origin, np.int32(dims[1]),
                                                       np.int32(dims[2]), target_cell, target_rank, cell_offset))
    exclusive_scan(cell_offset)
    target_sorted = cupy.empty((m, 3), dtype=cupy.float64)
    target_index = cupy.empty(m, dtype=cupy.int32)
    kernels["sort_targets"](_blocks(m), (_THREADS,), (target, np.int32(m), target_cell, target_rank, cell_offset,
                                                       target_sorted, target_index))
    geometry = (*origin, np.int32(dims[0]), np.int32(dims[1]), np.int32(dims[2]), np.float64(radius * radius))
    return (target_sorted, target_index, cell_offset), geometry
