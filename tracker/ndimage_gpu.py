"""The ``cupyx.scipy.ndimage`` functions detection uses, without compiling kernels on a fresh machine.

:func:`gaussian_filter` and :func:`maximum_filter` take and give what ``cupyx.scipy.ndimage``'s do and, for
float32 arrays with ``mode="nearest"`` (what :mod:`tracker.dog`, :mod:`tracker.detect` and
:mod:`tracker.spot_scale` ask for), return the same values bit for bit from ``ndimage_gpu.cu``, which ships
compiled (:mod:`tracker.lap._cuda`). Why: CuPy generates one kernel per filter length and axis and compiles
each with NVRTC at first use, and the spot-size estimate tries many scales: on a fresh H100 that was 90 of the
104 s of the first ``track run`` of the sample stack (``benchmarks/results/cold_start_h100.md``). Any other
dtype or mode goes to ``cupyx.scipy.ndimage`` unchanged. :func:`median` (``scipy.ndimage.median`` without
labels) sorts with CuPy's precompiled sort instead of ``cupy.median``'s NaN check, a CUB reduction that
NVRTC took 3.4 s to compile there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

_THREADS = 256
_SIGMA_THRESHOLD = 1e-15  # cupyx (and SciPy) skip the axes of smaller sigma


@functools.lru_cache(maxsize=1)
def _kernels():
    from .lap._cuda import load_module

    module = load_module("ndimage_gpu.cu")
    return module.get_function("correlate_nearest"), module.get_function("maximum_nearest")


def _per_axis(value, ndim: int) -> list:
    values = list(value) if isinstance(value, Sequence) or np.ndim(value) else [value] * ndim
    if len(values) != ndim:
        raise RuntimeError("sequence argument must have length equal to input rank")
    return values


def _ours(array, mode) -> bool:
    return array.dtype == np.float32 and mode == "nearest" and array.ndim >= 1 and array.size > 0


def _passes(array, steps):
    """Run ``steps`` (``(axis, launch)`` pairs) one after another, on two float32 buffers in turn."""
    import cupy

    source = cupy.ascontiguousarray(array)
    if not steps:
        return source.copy()
    buffers = [cupy.empty_like(source), cupy.empty_like(source) if len(steps) > 1 else None]
    for index, (axis, launch) in enumerate(steps):
        shape = source.shape
        outer, length, inner = int(np.prod(shape[:axis])), int(shape[axis]), int(np.prod(shape[axis + 1:]))
        target = buffers[index % 2]
        blocks = min(-(-source.size // _THREADS), 1 << 20)
        launch((blocks,), (_THREADS,), source, target, np.int64(outer), np.int32(length), np.int64(inner))
        source = target
    return source


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0, **kwargs):
    """``cupyx.scipy.ndimage.gaussian_filter``; float32 input with ``mode="nearest"`` through our kernel."""
    if not (_ours(input, mode) and order == 0 and output is None and not kwargs):
        import cupyx.scipy.ndimage

        return cupyx.scipy.ndimage.gaussian_filter(input, sigma, order=order, output=output, mode=mode, cval=cval,
                                                   truncate=truncate, **kwargs)
    import cupy

    correlate = _kernels()[0]
    steps = []
    for axis, s in enumerate(_per_axis(sigma, input.ndim)):
        s = float(s)
        radius = int(float(truncate) * s + 0.5)
        if s <= _SIGMA_THRESHOLD or radius <= 0:
            continue
        x = np.arange(-radius, radius + 1)
        weights = np.exp(-0.5 / (s * s) * x**2)  # cupyx's _gaussian_kernel1d, then cast as correlate1d does
        weights = cupy.asarray((weights / weights.sum()).astype(np.float32))
        steps.append((axis, functools.partial(_correlate_launch, correlate, weights, radius)))
    return _passes(input, steps)


def _correlate_launch(kernel, weights, radius, grid, block, source, target, outer, length, inner):
    kernel(grid, block, (source, target, weights, np.int32(radius), outer, length, inner))


def _maximum_launch(kernel, size, grid, block, source, target, outer, length, inner):
    kernel(grid, block, (source, target, np.int32(size), outer, length, inner))


def maximum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0, origin=0, **kwargs):
    """``cupyx.scipy.ndimage.maximum_filter``; float32 input, a box ``size`` and ``mode="nearest"`` through ours."""
    if not (_ours(input, mode) and size is not None and footprint is None and output is None and origin == 0
            and not kwargs):
        import cupyx.scipy.ndimage

        return cupyx.scipy.ndimage.maximum_filter(input, size=size, footprint=footprint, output=output, mode=mode,
                                                  cval=cval, origin=origin, **kwargs)
    maximum = _kernels()[1]
    sizes = [int(n) for n in _per_axis(size, input.ndim)]
    if any(n < 1 for n in sizes):
        raise ValueError("size must be positive")  # (cupyx: "incorrect filter size")
    steps = [(axis, functools.partial(_maximum_launch, maximum, n)) for axis, n in enumerate(sizes) if n > 1]
    return _passes(input, steps)


def median(input, labels=None, index=None):
    """``scipy.ndimage.median`` of a whole CuPy array (no ``labels``): a 0-d float array, NaN if any is NaN.

    The same value as ``cupy.median`` (the middle element, or the mean of the two middle ones in the input's
    float type).
    """
    import cupy

    if labels is not None or index is not None or input.dtype.kind != "f" or input.size == 0:
        return cupy.median(input) if labels is None and index is None else _cupyx_median(input, labels, index)
    ordered = cupy.sort(input.ravel())  # NaN sorts last, as in NumPy
    n = ordered.size
    last, middle = ordered[n - 1:].get(), ordered[(n - 1) // 2:n // 2 + 1].get()
    if np.isnan(last[0]):
        return cupy.asarray(np.array(np.nan, dtype=input.dtype))
    return cupy.asarray(middle.mean(dtype=input.dtype))


def _cupyx_median(input, labels, index):
    import cupyx.scipy.ndimage

    return cupyx.scipy.ndimage.median(input, labels, index)
