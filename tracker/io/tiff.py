"""TIFF time-lapses: read lazily as a :class:`tracker.stack.Stack`, written as ImageJ hyperstacks.

Uncompressed TIFFs are memory-mapped; compressed ones are read one frame at a
time (:class:`tracker.stack.FrameArray`), so the 4D stack is never loaded whole
unless asked for. Axes and voxel size come from ImageJ or OME metadata.
"""

from __future__ import annotations

import logging
import os
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, SeveralChannelsError
from ..stack import FrameArray, Stack, check_voxel_size
from ._atomic import atomic_path

_UNIT_TO_UM = {"um": 1.0, "µm": 1.0, "\\u00B5m": 1.0, "micron": 1.0, "microns": 1.0, "micrometer": 1.0,
               "nm": 1e-3, "nanometer": 1e-3, "mm": 1e3, "cm": 1e4, "m": 1e6, "inch": 25400.0, "pixel": None,
               "pixels": None, "": None}


def read_stack(
    path: str | os.PathLike,
    voxel_size: Sequence[float] | None = None,
    axes: str | None = None,
    channel: int | None = None,
) -> Stack:
    """Open a TIFF time-lapse as a lazily read ``(T, Z, Y, X)`` :class:`Stack`.

    Axes and voxel size come from ImageJ or OME metadata; ``voxel_size``
    (``z, y, x`` in µm) and ``axes`` (e.g. ``"TZYX"``, ``"ZTYX"``, ``"ZYX"``,
    ``"TYX"``, ``"TZCYX"``) override them. The axes may come in any order
    (OME files often have Z outside T); frames are read in the file's order
    and given as ``(Z, Y, X)`` volumes. A single 3D volume becomes one frame;
    a 2D time series becomes volumes of one plane (``Z = 1``). Of several
    channels, ``channel`` (0-based) is tracked; a single channel needs none.

    Raises
    ------
    InputError
        Not a TIFF, corrupt or truncated, a single 2D image, several
        channels and no (or a wrong) ``channel``, or axes that cannot be told
        apart without ``axes``.
    """
    layout, tif, notes = _open(Path(path), axes, channel)
    frame_shape = layout.shape[1:]
    n_z = frame_shape[0]
    if voxel_size is not None:
        voxel = check_voxel_size(voxel_size, n_z)
    elif layout.voxel is not None:
        voxel = layout.voxel
    else:
        voxel = (1.0, 1.0, 1.0)
        notes.append("no voxel size in the file: using 1 µm (set --voxel-size Z,Y,X)")
    try:
        data = layout.view(tifffile_memmap(layout.path))
    except Exception:  # compressed or tiled: read plane by plane, one frame at a time (the file stays open)
        return Stack(FrameArray(layout.shape, layout.dtype, layout.page_reader(tif)), voxel, layout.path, notes)
    tif.close()
    return Stack(data, voxel, layout.path, notes)


def tifffile_memmap(path: Path) -> np.ndarray:
    """The file's first series as a read-only memory map (raises for compressed or tiled files)."""
    import tifffile

    return tifffile.memmap(path, mode="r")


class _Layout:
    """Where the planes of frame ``t`` lie in a TIFF whose plane axes (all but Y, X) come in any order.

    Attributes
    ----------
    path : Path
    axes : str
        The file's axes, letters of ``TZCYX``, ending in ``YX``.
    file_shape : tuple of int
        The series' shape, in ``axes`` order.
    channel : int
        The channel read (0 without a ``C`` axis).
    shape : (T, Z, Y, X) ints
    dtype : numpy dtype
    voxel : (z, y, x) floats or None
        From the metadata, µm.
    """

    def __init__(self, path: Path, axes: str, file_shape: tuple[int, ...], channel: int, dtype: np.dtype,
                 voxel: tuple[float, float, float] | None):
        self.path, self.axes, self.file_shape, self.channel = path, axes, file_shape, channel
        self.dtype, self.voxel = dtype, voxel
        sizes = dict(zip(axes, file_shape))
        self.shape = (sizes.get("T", 1), sizes.get("Z", 1), sizes["Y"], sizes["X"])

    def view(self, memmap: np.ndarray) -> np.ndarray:
        """The ``(T, Z, Y, X)`` view of the series' memory map (no copy)."""
        array = memmap.reshape(self.file_shape)[tuple(self.channel if a == "C" else slice(None) for a in self.axes)]
        kept = self.axes.replace("C", "")
        array = np.transpose(array, [kept.index(a) for a in "TZYX" if a in kept])
        for position, axis in enumerate("TZ"):
            if axis not in kept:
                array = np.expand_dims(array, position)
        return array

    def planes(self, t: int) -> list[int]:
        """The page numbers of frame ``t``'s planes, z = 0, 1, …"""
        plane_axes = self.axes[:-2]
        sizes = self.file_shape[:-2]
        index = {"T": t, "C": self.channel}
        return [int(np.ravel_multi_index(tuple(z if a == "Z" else index[a] for a in plane_axes), sizes))
                if plane_axes else 0 for z in range(self.shape[1])]

    def page_reader(self, tif: Any) -> Callable[[int], np.ndarray]:
        """``read_frame(t)`` for a file that cannot be memory-mapped; checks that the planes are there."""
        n_planes = int(np.prod(self.file_shape[:-2]))
        if len(tif.pages) < n_planes:
            tif.close()
            raise InputError(f"{self.path}: truncated TIFF ({len(tif.pages)} of {n_planes} planes)") from None

        def read_frame(t: int) -> np.ndarray:
            try:
                planes = tif.asarray(key=self.planes(t), series=0)
            except Exception as error:
                raise InputError(f"{self.path}: cannot read frame {t} ({_short(error)})") from None
            return np.asarray(planes).reshape(self.shape[1:])

        return read_frame


def _open(path: Path, axes: str | None, channel: int | None, one_plane: bool = False) -> tuple[_Layout, Any, list[str]]:
    """Open the TIFF at ``path``: its layout, the open file and the notes on what was assumed.

    ``one_plane``: a single 2D image is accepted (one time point of a folder of 2D images).
    """
    import tifffile

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with _TiffWarnings() as warnings:
        try:
            tif = tifffile.TiffFile(path)
        except Exception as error:  # tifffile raises several types for bad files
            raise InputError(f"{path}: not a readable TIFF file ({_short(error)})") from None
        try:
            series = tif.series[0]
            file_axes = series.axes.upper()
            shape = tuple(int(s) for s in series.shape)
            dtype = np.dtype(series.dtype)
            found_voxel, notes = _voxel_size_from_metadata(tif)
        except Exception as error:
            tif.close()
            raise InputError(f"{path}: corrupt TIFF metadata ({_short(error)})") from None
    if warnings.messages:
        tif.close()
        raise InputError(f"{path}: truncated or corrupt TIFF ({warnings.messages[0]})")
    if dtype.kind not in "uif":
        tif.close()
        raise InputError(f"{path}: unsupported pixel type {dtype}")
    try:
        if one_plane and len(shape) == 2 and axes is None:
            stack_axes = "YX"
        else:
            stack_axes = _normalise_axes(path, axes.upper() if axes else file_axes, shape, explicit=axes is not None)
        if stack_axes[-2:] != "YX":
            raise InputError(f"{path}: axes {stack_axes!r}: the last two must be Y, X (the TIFF's planes)")
        index = channel_index(path, dict(zip(stack_axes, shape)).get("C", 1), channel)
    except InputError:
        tif.close()
        raise
    kept = stack_axes.replace("C", "")
    if kept == "ZYX" and not one_plane:
        notes.append("single 3D volume: treated as one frame (nothing to link; a 2D time series saved as slices? "
                     "give --axes TYX)")
    elif kept == "TYX":
        notes.append("2D time series: each frame is a volume of one plane (Z = 1)")
    return _Layout(path, stack_axes, shape, index, dtype, found_voxel), tif, notes


def channel_index(path: Path, n_channels: int, channel: int | None) -> int:
    """The channel to track, 0-based: ``channel``, or the only one.

    Raises
    ------
    SeveralChannelsError
        Several channels and none chosen (an ``InputError``).
    InputError
        A channel the stack does not have.
    """
    if channel is None:
        if n_channels > 1:
            raise SeveralChannelsError(f"{path}: {n_channels} channels; choose the one to track with --channel "
                                       f"(0 to {n_channels - 1})", n_channels)
        return 0
    if not 0 <= channel < n_channels:
        have = f"channels 0 to {n_channels - 1}" if n_channels > 1 else "one channel (0)"
        raise InputError(f"{path}: no channel {channel}; the stack has {have}")
    return int(channel)


class _TiffWarnings(logging.Handler):
    """Collects tifffile's warnings (it logs, rather than raises, on truncated files)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(_short(Exception(record.getMessage())))

    def __enter__(self) -> "_TiffWarnings":
        logger = logging.getLogger("tifffile")
        self._propagate = logger.propagate
        logger.addHandler(self)
        logger.propagate = False
        return self

    def __exit__(self, *exc) -> None:
        logger = logging.getLogger("tifffile")
        logger.removeHandler(self)
        logger.propagate = self._propagate


def _normalise_axes(path: Path, axes: str, shape: tuple[int, ...], explicit: bool) -> str:
    """The file's axes in letters of ``TZCYX``, in the file's order.

    ImageJ's ``I`` (an image sequence) is time beside a ``Z`` axis. Of two plane axes before ``Y, X``,
    one unlabelled (``Q``, ``I``, ``S``) takes the letter (``T`` or ``Z``) the other does not have, both
    unlabelled are read ``T, Z``; given ``axes`` are taken as they are.
    """
    axes = axes.upper()
    if len(axes) != len(shape):
        raise InputError(f"{path}: axes {axes!r} do not match the image shape {shape}")
    if explicit and (set(axes) - set("TZCYX") or len(set(axes)) != len(axes) or not axes.endswith("YX")):
        raise InputError(f"{path}: --axes {axes!r}: give each of T, Z, C at most once, then Y, X "
                         "(e.g. TZYX, ZTYX, TZCYX or TYX)")
    axes = axes.replace("I", "T") if "T" not in axes and "Z" in axes else axes
    core = axes.replace("C", "")
    if len(core) < 3:
        raise InputError(f"{path}: a single 2D image (shape {shape}) has nothing to track")
    if core in ("TZYX", "ZTYX", "ZYX", "TYX"):
        return axes
    unknown = {"Q", "I", "S"}
    lead = core[:-2]
    if len(core) == 4 and core[2:] == "YX" and set(lead) <= unknown | {"T", "Z"} and not explicit:
        free = iter(a for a in "TZ" if a not in lead)
        named = "".join(a if a in "TZ" else next(free) for a in lead)
        if sorted(named) == ["T", "Z"]:
            return axes.replace(core, named + "YX")
    if len(core) == 3 and core[0] in unknown:
        raise InputError(
            f"{path}: cannot tell whether the first axis ({shape[0]}) is time or depth; "
            "pass --axes TYX or --axes ZYX"
        )
    raise InputError(f"{path}: unsupported axes {axes!r} (shape {shape}); expected T, Z, Y, X")


def _voxel_size_from_metadata(tif) -> tuple[tuple[float, float, float] | None, list[str]]:
    notes: list[str] = []
    if tif.is_ome and tif.ome_metadata:
        try:
            root = ElementTree.fromstring(tif.ome_metadata)
            pixels = next(el for el in root.iter() if el.tag.endswith("Pixels"))
            sizes = []
            for axis in "ZYX":
                value = pixels.get(f"PhysicalSize{axis}")
                unit = pixels.get(f"PhysicalSize{axis}Unit", "µm")
                factor = _UNIT_TO_UM.get(unit, 1.0)
                sizes.append(float(value) * (factor or 1.0) if value else None)
            if sizes[1] and sizes[2]:
                if sizes[0] is None:
                    notes.append("OME metadata has no Z spacing: using the XY pixel size")
                return (sizes[0] or sizes[2], sizes[1], sizes[2]), notes
        except (ElementTree.ParseError, StopIteration, ValueError):
            notes.append("unreadable OME metadata ignored")
    if tif.is_imagej:
        meta = tif.imagej_metadata or {}
        page = tif.pages[0]
        unit = str(meta.get("unit", "")).strip()
        factor = _UNIT_TO_UM.get(unit.lower(), 1.0 if unit else None)
        if unit and unit.lower() not in _UNIT_TO_UM:
            notes.append(f"unknown length unit {unit!r} in the file: read as µm (set --voxel-size Z,Y,X otherwise)")
        try:
            x_res = page.tags["XResolution"].value
            y_res = page.tags["YResolution"].value
            dx = x_res[1] / x_res[0]
            dy = y_res[1] / y_res[0]
        except (KeyError, ZeroDivisionError):
            return None, notes
        dz = float(meta.get("spacing", dx))
        if dx == 1.0 and dy == 1.0 and "spacing" not in meta:
            return None, notes  # ImageJ's uncalibrated image
        if factor is None and not unit:  # (sizes written by a program that gave no unit)
            notes.append(f"the voxel size {dz:g}, {dy:g}, {dx:g} has no unit in the file: read as µm "
                         "(set --voxel-size Z,Y,X otherwise)")
            factor = 1.0
        if factor is None:
            return None, notes
        return (dz * factor, dy * factor, dx * factor), notes
    return None, notes


def write_stack(
    path: str | os.PathLike,
    data: np.ndarray,
    voxel_size: Sequence[float],
    overwrite: bool = False,
) -> None:
    """Write a ``(T, Z, Y, X)`` stack as an ImageJ hyperstack carrying the voxel size (µm), atomically."""
    import tifffile

    data = np.asarray(data)
    if data.ndim != 4:
        raise InputError(f"expected a (T, Z, Y, X) array, got shape {data.shape}")
    dz, dy, dx = check_voxel_size(voxel_size)
    with atomic_path(path, overwrite) as tmp:
        tifffile.imwrite(
            tmp,
            data,
            imagej=True,
            resolution=(1.0 / dx, 1.0 / dy),
            metadata={"axes": "TZYX", "spacing": dz, "unit": "um"},
        )


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return re.sub(r"\s+", " ", text)[:200]
