"""The GPU detection path's array steps from kernels shipped compiled, so that a fresh machine compiles none.

:mod:`tracker.dog`, :mod:`tracker.detect` and :mod:`tracker.spot_scale` hand their CuPy arrays here: the
conversion to float32, the DoG's difference, the quality map, the robust noise levels, the local maxima, the
values at peaks, the sub-voxel refinement and the spot-size fit's profiles. Written with CuPy operations
(element-wise arithmetic, comparisons, ``where``, ``clip``, ``nonzero``, fancy indexing, sums), these were
about 60 NVRTC compilations of ~0.1 s each at the first ``track run`` on a fresh H100 (the whole difference
between its 9.6 s and a warm run's 3.0 s on the sample, ``benchmarks/results/cold_start_h100.md``). Here they
are a few kernels of ``detect_gpu.cu``, which takes shapes, strides and scalars as arguments and ships as a
fatbin (:mod:`tracker.lap._cuda`); CuPy is left only allocations, copies between host and device and its
precompiled sort (medians).

Each function computes what the CPU code computes, operation by operation in the same precision (the quality
map, the noise levels, the local maxima and the offsets give the CPU's bits for the same input); the profiles'
sums are taken in float64 and rounded to float32. Coordinates and values of peaks come back to the host (NumPy):
they are few, and the callers go on with them there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

_THREADS = 256
_MAX_BLOCKS = 1 << 16  # grid-stride loops: enough blocks to fill any GPU
_PEAKS_PER_VOXEL = 64  # the local maxima's first buffer: one slot per this many voxels (refilled when short)

_TYPES = {np.dtype(t): t for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                    "float32", "float64")}


@functools.lru_cache(maxsize=1)
def _module():
    from .lap._cuda import load_module

    return load_module("detect_gpu.cu")


def _kernel(name: str):
    return _module().get_function(name)


def _launch(name: str, n: int, *args) -> None:
    blocks = max(1, min(-(-int(n) // _THREADS), _MAX_BLOCKS))
    _kernel(name)((blocks,), (_THREADS,), args)


def _view(array) -> tuple:
    """``(n0, n1, n2, s0, s1, s2)`` of a CuPy array of at most 3 dimensions seen as 3-D (strides in elements)."""
    shape, strides = list(array.shape), [s // array.itemsize for s in array.strides]
    while len(shape) < 3:
        shape.insert(0, 1)
        strides.insert(0, 0)
    return tuple(np.int64(v) for v in (*shape, *strides))


def as_float32(array):
    """``array`` as a C-contiguous float32 CuPy array (itself if it already is one), as ``astype`` converts."""
    import cupy

    if array.dtype == np.float32 and array.flags.c_contiguous:
        return array
    if array.dtype not in _TYPES or array.ndim > 3 or array.size == 0:
        return cupy.ascontiguousarray(array, dtype=cupy.float32)  # (CuPy's kernels: not met in detection)
    return _copy_float32(array)


def inspect(volume) -> tuple[bool, bool]:
    """``(finite, constant)``: whether every value of ``volume`` (a CuPy array of at most 3 dimensions, of any
    integer or float type) is finite, and whether all are the same; one pass, nothing compiled."""
    import cupy

    if volume.size == 0:
        return True, True
    if volume.dtype not in _TYPES or volume.ndim > 3:  # (CuPy's kernels: not met in detection)
        finite = bool(cupy.isfinite(volume).all()) if volume.dtype.kind == "f" else True
        return finite, float(volume.max()) == float(volume.min())
    flags = cupy.zeros(1, dtype=cupy.int32)
    _launch(f"inspect_{_TYPES[volume.dtype]}", volume.size, volume, flags, *_view(volume))
    value = int(flags.get()[0])
    return not value & 2, not value & 1


def all_finite(volume) -> bool:
    """Whether ``volume`` holds no NaN or infinite value."""
    return inspect(volume)[0]


def is_constant(volume) -> bool:
    """Whether every voxel of ``volume`` has the same value (a blank frame)."""
    return inspect(volume)[1]


def subtract(a, b):
    """``a - b`` of two float32 arrays of one shape (C-contiguous), a new array."""
    import cupy

    a, b = as_float32(a), as_float32(b)
    out = cupy.empty_like(a)
    _launch("subtract", a.size, a, b, out, np.int64(a.size))
    return out


def standardize(x, centre: float, scale: float):
    """``(x - centre) / scale`` in float32, in place (``x``: our own C-contiguous float32 array); returns ``x``."""
    _launch("standardize", x.size, x, np.float32(centre), np.float32(scale), np.int64(x.size))
    return x


def _median_in_place(sample) -> np.float32:
    """The median of a contiguous float32 sample (sorted in place with CuPy's precompiled sort), as
    :func:`tracker.ndimage_gpu.median`: the middle value, or the mean of the two middle ones; NaN if any is."""
    sample.sort()
    n = sample.size
    if np.isnan(sample[n - 1:].get()[0]):
        return np.float32(np.nan)
    return sample[(n - 1) // 2:n // 2 + 1].get().mean(dtype=np.float32)


def _absolute_deviation(sample, centre):
    """``|sample - centre|`` (float32), in place."""
    _launch("absolute_deviation", sample.size, sample, sample, np.float32(centre), np.int64(sample.size))
    return sample


def _copy_float32(view):
    """A new C-contiguous float32 copy of a CuPy view of at most 3 dimensions of a type of ``_TYPES``."""
    import cupy

    out = cupy.empty(view.shape, dtype=cupy.float32)
    _launch(f"to_float32_{_TYPES[view.dtype]}", view.size, view, out, *_view(view))
    return out


def _background_sample(image, sample_step: int):
    """:func:`tracker.dog.background_sample`, as a contiguous float32 copy of our own (flattened)."""
    return _copy_float32(image[tuple(slice(None, None, sample_step if n > 8 else 1) for n in image.shape)]).ravel()


def sample_median(image, sample_step: int = 2) -> np.float32:
    """The median of :func:`tracker.dog.background_sample` (float32)."""
    return _median_in_place(_background_sample(image, sample_step))


def noise_level(response, sample_step: int = 2) -> tuple[float, float]:
    """:func:`tracker.dog.noise_level` of a CuPy array: robust ``(median, sigma)`` (median absolute deviation)."""
    sample = _background_sample(response, sample_step)
    median = float(_median_in_place(sample))
    sigma = 1.4826 * float(_median_in_place(_absolute_deviation(sample, median)))
    if sigma == 0.0:  # noiseless synthetic data: the standard deviation, as NumPy takes it on the CPU
        sigma = float(_background_sample(response, sample_step).get().std())
    return median, sigma


def quality_map(response, sigma_voxels: Sequence[float], surround: float):
    """:func:`tracker.dog.quality_map` of a CuPy response: ``(response − median) / (σ · relative_noise)``
    (float32), or None for a constant volume; the relative noise is computed in the kernel from its factors."""
    import cupy

    from .dog import relative_noise_factors

    response = as_float32(response)
    coefficients, sums = relative_noise_factors(response.shape, sigma_voxels, surround)
    median, _ = noise_level(response)
    centred = cupy.empty_like(response)
    _launch("centred_response", response.size, response, centred, np.float32(median),
            cupy.asarray(np.concatenate([np.concatenate(s) for s in zip(*sums)]).astype(np.float32)),
            *(np.float64(c) for c in coefficients), *(np.int64(n) for n in response.shape))
    _, sigma = noise_level(centred)
    if sigma == 0.0:
        return None
    return standardize(centred, 0.0, sigma)


def gradient_variance(quality) -> np.ndarray:
    """:func:`tracker.dog.gradient_variance` of a CuPy quality map: (3,) variances of its central differences."""
    import cupy

    from .dog import central_difference_slices

    result = np.zeros(3)
    for axis, ahead, behind in central_difference_slices(quality.shape):
        ahead, behind = quality[ahead], quality[behind]
        sample = cupy.empty(ahead.shape, dtype=cupy.float32)
        _launch("half_difference", sample.size, ahead, behind, sample, *_view(ahead))
        sample = sample.ravel()
        centre = _median_in_place(sample)
        result[axis] = (1.4826 * float(_median_in_place(_absolute_deviation(sample, centre)))) ** 2
    return result


def local_maxima(image, size: Sequence[int], floor: float, other=None) -> tuple[np.ndarray, np.ndarray]:
    """The voxels where ``image`` equals its maximum filter (box ``size``, mode "nearest") and is at least
    ``floor`` (and ``other`` too, where given): host coords (n, 3) int64 in C order, and ``image``'s values
    there (float32), as ``nonzero`` and a boolean mask give them."""
    import cupy

    from .ndimage_gpu import maximum_filter

    image = as_float32(image)
    other = image if other is None else as_float32(other)
    image_max = maximum_filter(image, size=size, mode="nearest")
    count = cupy.zeros(1, dtype=cupy.uint64)
    capacity = max(1024, image.size // _PEAKS_PER_VOXEL)
    while True:
        found = cupy.empty(capacity, dtype=cupy.int64)
        _launch("local_maxima", image.size, image, image_max, np.float32(floor), other, np.float32(floor),
                np.int64(image.size), found, count, np.int64(capacity))
        total = int(count.get()[0])
        if total <= capacity:
            break
        capacity = total
        count = cupy.zeros(1, dtype=cupy.uint64)
    index = np.sort(found[:total].get())
    coords = np.stack(np.unravel_index(index, image.shape), axis=1).astype(np.int64).reshape(-1, image.ndim)
    return coords, _take(image, index)


def _take(image, index: np.ndarray) -> np.ndarray:
    import cupy

    if len(index) == 0:
        return np.empty(0, dtype=np.float32)
    out = cupy.empty(len(index), dtype=cupy.float32)
    _launch("take", len(index), image, cupy.asarray(index, dtype=cupy.int64), out, np.int64(len(index)))
    return out.get()


def values_at(image, coords) -> np.ndarray:
    """``image[tuple(coords.T)]`` on the host (float32), ``coords`` (n, 3) integers (host or device)."""
    from .backend import to_numpy

    coords = to_numpy(coords).astype(np.int64).reshape(-1, image.ndim)
    image = as_float32(image)
    return _take(image, np.ravel_multi_index(tuple(coords.T), image.shape))


def quadratic_offsets(image, coords) -> np.ndarray:
    """:func:`tracker.detect.quadratic_offsets` of a CuPy (Z, Y, X) image: host (n, 3) float64 offsets."""
    import cupy

    from .backend import to_numpy

    coords = np.ascontiguousarray(to_numpy(coords), dtype=np.int64).reshape(-1, 3)
    if len(coords) == 0:
        return np.zeros((0, 3))
    image = as_float32(image)
    out = cupy.empty(coords.shape, dtype=cupy.float64)
    _launch("quadratic_offsets", coords.size, image, cupy.asarray(coords), out, np.int64(len(coords)),
            *(np.int64(n) for n in image.shape))
    return out.get()


def profile_sums(volume, coords: np.ndarray, half: Sequence[int], box: Sequence[int]) -> list[np.ndarray | None]:
    """Per axis, each spot's profile along it summed over ``±box`` voxels in the other two (indices clamped to
    the volume): host (n, 2 half + 1) float64; None for an axis of ``half`` 0 (as :func:`tracker.spot_scale.
    _profiles`' gathered block gives them; ``volume``: a (Z, Y, X) float32 view)."""
    import cupy

    if volume.dtype != np.float32:
        volume = as_float32(volume)
    centres = cupy.asarray(np.ascontiguousarray(coords, dtype=np.int64).reshape(-1, 3))
    result = []
    for axis in range(3):
        if half[axis] == 0:
            result.append(None)
            continue
        b, c = [other for other in range(3) if other != axis]
        out = cupy.empty((len(coords), 2 * half[axis] + 1), dtype=cupy.float32)
        _launch("profile_sums", out.size, volume, centres, out, np.int64(len(coords)), np.int32(axis),
                np.int32(half[axis]), np.int32(box[b]), np.int32(box[c]), *_view(volume))
        result.append(out.get().astype(np.float64))
    return result
