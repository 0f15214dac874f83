"""The time-lapse the pipeline tracks: lazily read ``(T, Z, Y, X)`` frames and their voxel size in µm.

A :class:`Stack` holds its frames as an array-like (a memory map, an array in
memory, a CuPy array, or a :class:`FrameArray` that reads one frame per index),
so a 4D stack is never loaded whole unless asked for. File formats live in
:mod:`tracker.io`; this module reads no files itself.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError
from .validation import InputWarning

PLANE_DEPTH_UM = 1.0
"""The z voxel size of a 2D time series (one plane per frame) whose voxel size is given as ``(y, x)``: a single
plane's depth enters no computation (detection and linking ignore flat axes); 1 µm, as for files without
metadata."""


class FrameArray:
    """A read-only ``(T, Z, Y, X)`` array-like that reads a frame each time it is indexed.

    For stacks that cannot be memory-mapped (compressed TIFFs): ``frames[t]`` calls
    ``read_frame(t)``; slices and lists of frames read each frame and stack them;
    ``numpy.asarray(frames)`` reads them all. Viewers (napari) take it as image data.

    Parameters
    ----------
    shape : (T, Z, Y, X) ints
    dtype : numpy dtype
    read_frame : callable
        ``read_frame(t)`` returns frame ``t`` (``0 <= t < T``) as a ``(Z, Y, X)`` array.
    """

    def __init__(self, shape: Sequence[int], dtype: Any, read_frame: Callable[[int], np.ndarray]):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self._read_frame = read_frame

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        first, rest = key[0], key[1:]
        if isinstance(first, (int, np.integer)):
            t = int(first) + (self.shape[0] if first < 0 else 0)
            if not 0 <= t < self.shape[0]:
                raise IndexError(f"frame {int(first)} out of range for {self.shape[0]} frames")
            volume = np.asarray(self._read_frame(t))
            return volume[rest] if rest else volume
        if first is Ellipsis:
            return self[:][key]
        if isinstance(first, slice):
            frames = list(range(*first.indices(self.shape[0])))
        else:  # a list or array of frame numbers, or a boolean mask
            frames = np.arange(self.shape[0])[np.asarray(first)].tolist()
        block = np.stack([self[t] for t in frames]) if frames else np.empty((0, *self.shape[1:]), self.dtype)
        return block[(slice(None), *rest)] if rest else block

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self[:]
        return array.astype(dtype) if dtype is not None else array

    def __repr__(self) -> str:
        return f"FrameArray(shape={self.shape}, dtype={self.dtype})"


@dataclass(frozen=True)
class Stack:
    """A ``(T, Z, Y, X)`` time-lapse, read lazily, with its voxel size.

    Attributes
    ----------
    data : array-like, shape (T, Z, Y, X)
        The frames: a memory map, an array in memory (NumPy or CuPy) or a :class:`FrameArray`.
        Indexing ``data[t]`` reads frame ``t`` only; give it to a viewer as image data.
    voxel_size : (float, float, float)
        Voxel size ``z, y, x`` in µm.
    path : Path or None
        Source file, if any.
    notes : tuple of str
        What was assumed while reading (shown to the user), e.g. "no voxel size in the file".
    """

    data: Any
    voxel_size: tuple[float, float, float]
    path: Path | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.data.shape) != 4:
            raise InputError(f"expected a (T, Z, Y, X) array (or (T, Y, X) for a 2D time series), got shape "
                             f"{tuple(self.data.shape)}")
        if 0 in tuple(self.data.shape)[1:]:  # (a corrupted file's header can say so; nothing to detect in it)
            raise InputError(f"the frames have no voxels: shape {tuple(self.data.shape)} (T, Z, Y, X)")
        object.__setattr__(self, "voxel_size", check_voxel_size(self.voxel_size))
        unlikely = voxel_size_unit_note(self.voxel_size)
        object.__setattr__(self, "notes", tuple(self.notes) + ((unlikely,) if unlikely else ()))

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(T, Z, Y, X)`` in voxels."""
        return tuple(int(s) for s in self.data.shape)  # type: ignore[return-value]

    @property
    def n_frames(self) -> int:
        """``T``."""
        return self.shape[0]

    @property
    def dtype(self) -> np.dtype:
        """The pixel type."""
        return np.dtype(self.data.dtype)

    def __len__(self) -> int:
        return self.n_frames

    def frame(self, t: int) -> Any:
        """Volume ``t`` as a ``(Z, Y, X)`` array, read now (a CuPy array if the stack is on the GPU)."""
        volume = self.data[t]
        return volume if hasattr(volume, "__cuda_array_interface__") else np.asarray(volume)

    def __iter__(self) -> Iterator[Any]:
        for t in range(self.n_frames):
            yield self.frame(t)


def as_stack(data: Any, voxel_size: Sequence[float] | None = None) -> Stack:
    """A :class:`Stack` from a ``(T, Z, Y, X)`` or ``(T, Y, X)`` array-like, or a ``Stack`` with another voxel size.

    Array-likes with ``shape``, ``dtype`` and indexing (NumPy and CuPy arrays, memory maps,
    :class:`FrameArray`, Dask or Zarr arrays) are kept as they are, so nothing is read here;
    anything else (nested lists) goes through ``numpy.asarray``. A ``(T, Y, X)`` array is a 2D time
    series: each frame a volume of one plane (Z = 1), as a ``TYX`` TIFF is read.

    Parameters
    ----------
    data : Stack or array-like, shape (T, Z, Y, X) or (T, Y, X)
    voxel_size : (3,) or (2,) floats, optional
        ``z, y, x`` in µm, or ``y, x`` for a stack of one plane per frame (:data:`PLANE_DEPTH_UM` deep);
        default: the stack's own, or 1 µm for an array, with an
        :class:`~tracker.validation.InputWarning` (every size in µm depends on it).

    Raises
    ------
    InputError
        If ``data`` is neither 4D nor 3D, or the voxel size is not three (or, for one plane, two) positive
        numbers.
    """
    if isinstance(data, Stack):
        return data if voxel_size is None else replace(data, voxel_size=check_voxel_size(voxel_size,
                                                                                          data.shape[1]))
    if not all(hasattr(data, name) for name in ("shape", "dtype", "__getitem__")):
        data = np.asarray(data)
    if len(data.shape) == 3:
        data = _one_plane_per_frame(data)
    if voxel_size is None:
        warnings.warn("no voxel size given for an array: assuming 1 µm voxels; give voxel_size_um=(z, y, x) in µm "
                      "(spot radii and displacements are in µm)", InputWarning, stacklevel=3)
        voxel_size = (1.0, 1.0, 1.0)
    shape = tuple(data.shape)
    return Stack(data, check_voxel_size(voxel_size, shape[1] if len(shape) == 4 else None))


def _one_plane_per_frame(data: Any) -> Any:
    """A ``(T, Y, X)`` array-like as ``(T, 1, Y, X)``: a view of NumPy and CuPy arrays, else a
    :class:`FrameArray` reading one frame per index (Zarr and Dask arrays take no ``None`` index)."""
    if isinstance(data, np.ndarray) or hasattr(data, "__cuda_array_interface__"):
        return data[:, None]
    return FrameArray((data.shape[0], 1, *data.shape[1:]), data.dtype, lambda t: np.asarray(data[t])[None])


LIGHT_MICROSCOPE_VOXEL_UM = (1e-3, 100.0)
"""Voxel sizes (µm) a light microscope can make: 1 nm (far below any super-resolution pixel) to 100 µm (beyond
the depth of a thick section). Outside, the size was most likely given in nm or in m (an outside tester's
``--voxel-size 500,100,100`` gave a 606 µm spot radius and positions 1000x too large, without a word)."""


def voxel_size_unit_note(voxel_size: tuple[float, float, float]) -> str | None:
    """A note for the user when ``voxel_size`` (µm) lies outside :data:`LIGHT_MICROSCOPE_VOXEL_UM`: the unit is
    likely wrong (the sizes are still used as given). None when it lies inside."""
    low, high = LIGHT_MICROSCOPE_VOXEL_UM
    shown = ", ".join(f"{v:g}" for v in voxel_size)
    if max(voxel_size) > high:
        unit, factor = "nm", 1e-3
    elif min(voxel_size) < low:
        unit, factor = "m", 1e6
    else:
        return None
    suggested = ",".join(f"{v * factor:g}" for v in voxel_size)
    return (f"voxel size {shown} µm is outside a light microscope's range ({low:g}-{high:g} µm): if it was in "
            f"{unit}, give --voxel-size {suggested} (sizes are in µm)")


def check_voxel_size(voxel_size: Sequence[float], n_planes: int | None = None) -> tuple[float, float, float]:
    """``(z, y, x)`` as floats (µm).

    Parameters
    ----------
    voxel_size : (3,) or (2,) floats
        ``z, y, x``; or ``y, x`` where the stack has ``n_planes`` = 1 (a 2D time series), given the depth
        :data:`PLANE_DEPTH_UM`.
    n_planes : int, optional
        Planes per frame (Z), where known.

    Raises
    ------
    InputError
        Unless three (or, for one plane, two) positive finite numbers.
    """
    try:
        values = tuple(float(v) for v in voxel_size)
    except (TypeError, ValueError):
        values = ()
    if len(values) == 2 and n_planes == 1:
        values = (PLANE_DEPTH_UM, *values)
    if len(values) != 3 or not all(math.isfinite(v) and v > 0 for v in values):
        either = " (or y,x for a stack of one plane per frame)" if n_planes == 1 else ""
        raise InputError(f"voxel size must be three positive numbers z,y,x in µm{either}, got {voxel_size}")
    return values  # type: ignore[return-value]
