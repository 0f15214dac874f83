"""Array-module selection: NumPy on the CPU, CuPy on a CUDA GPU.

All GPU-only code in the package asks this module, and nothing else, whether
a GPU can be used, so that ``solver="auto"`` and ``device="auto"`` behave the
same everywhere.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np


@functools.lru_cache(maxsize=1)
def cupy_or_none() -> ModuleType | None:
    """The ``cupy`` module if it imports and sees at least one GPU, else ``None``."""
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA library that fails to load
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:
        return None
    return cupy


def gpu_available() -> bool:
    """True when CuPy imports and a CUDA device is present."""
    return cupy_or_none() is not None


def is_cupy_array(array: Any) -> bool:
    """True for a ``cupy.ndarray`` (without importing CuPy when absent)."""
    return type(array).__module__.startswith("cupy")


def get_array_module(array: Any) -> ModuleType:
    """``cupy`` for CuPy arrays, ``numpy`` for everything else."""
    if is_cupy_array(array):
        import cupy

        return cupy
    return np


def to_numpy(array: Any) -> np.ndarray:
    """Copy a CuPy array to the host; pass NumPy arrays (and array-likes) through."""
    if is_cupy_array(array):
        return array.get()
    return np.asarray(array)


def resolve_device(device: str) -> ModuleType:
    """Array module for ``device`` in ``{"auto", "cpu", "gpu"}``.

    ``"auto"`` picks CuPy when a GPU is present; ``"gpu"`` raises a clear
    ``RuntimeError`` when it is not.
    """
    if device == "cpu":
        return np
    cupy = cupy_or_none()
    if device == "gpu":
        if cupy is None:
            raise RuntimeError(
                "device='gpu' needs CuPy and a CUDA GPU; install the 'cuda12' or 'cuda13' extra"
            )
        return cupy
    if device == "auto":
        return cupy if cupy is not None else np
    raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', not {device!r}")
