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
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..stack import FrameArray, Stack, check_voxel_size
from ._atomic import atomic_path

_UNIT_TO_UM = {"um": 1.0, "µm": 1.0, "\\u00B5m": 1.0, "micron": 1.0, "microns": 1.0, "micrometer": 1.0,
               "nm": 1e-3, "nanometer": 1e-3, "mm": 1e3, "m": 1e6, "pixel": None, "": None}


def read_stack(
    path: str | os.PathLike,
    voxel_size: Sequence[float] | None = None,
    axes: str | None = None,
) -> Stack:
    """Open a TIFF time-lapse as a lazily read ``(T, Z, Y, X)`` :class:`Stack`.

    Axes and voxel size come from ImageJ or OME metadata; ``voxel_size``
    (``z, y, x`` in µm) and ``axes`` (e.g. ``"TZYX"``, ``"ZYX"``, ``"TYX"``)
    override them. A single 3D volume becomes one frame; a 2D time series
    becomes volumes of one plane (``Z = 1``). Singleton channel axes are
    dropped.

    Raises
    ------
    InputError
        Not a TIFF, corrupt or truncated, a single 2D image, several
        channels, or axes that cannot be told apart without ``axes``.
    """
    import tifffile

    path = Path(path)
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

    stack_axes = _normalise_axes(path, axes.upper() if axes else file_axes, shape, explicit=axes is not None)
    n_planes_expected = int(np.prod(shape[:-2]))
    keep = [i for i, a in enumerate(stack_axes) if a != "C"]  # singleton channel axes are dropped
    kept_axes = "".join(stack_axes[i] for i in keep)
    kept_shape = tuple(shape[i] for i in keep)
    if kept_axes == "ZYX":
        notes.append("single 3D volume: treated as one frame (nothing to link)")
        kept_shape, kept_axes = (1, *kept_shape), "TZYX"
    elif kept_axes == "TYX":
        notes.append("2D time series: each frame is a volume of one plane (Z = 1)")
        kept_shape, kept_axes = (kept_shape[0], 1, *kept_shape[1:]), "TZYX"
    assert kept_axes == "TZYX", kept_axes
    n_z = kept_shape[1]

    if voxel_size is not None:
        voxel = check_voxel_size(voxel_size, n_z)
    elif found_voxel is not None:
        voxel = found_voxel
    else:
        voxel = (1.0, 1.0, 1.0)
        notes.append("no voxel size in the file: using 1 µm (set --voxel-size Z,Y,X)")

    try:
        data = tifffile.memmap(path, mode="r").reshape(kept_shape)
    except Exception:  # compressed or tiled: read plane by plane, one frame at a time (the file stays open)
        if len(tif.pages) < n_planes_expected:
            tif.close()
            raise InputError(f"{path}: truncated TIFF ({len(tif.pages)} of {n_planes_expected} planes)") from None

        def read_frame(t: int) -> np.ndarray:
            try:
                planes = tif.asarray(key=range(t * n_z, (t + 1) * n_z), series=0)
            except Exception as error:
                raise InputError(f"{path}: cannot read frame {t} ({_short(error)})") from None
            return np.asarray(planes).reshape(kept_shape[1:])

        return Stack(FrameArray(kept_shape, dtype, read_frame), voxel, path, notes)
    tif.close()
    return Stack(data, voxel, path, notes)


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
    if len(axes) != len(shape):
        raise InputError(f"{path}: axes {axes!r} do not match the image shape {shape}")
    axes = axes.replace("I", "T") if "T" not in axes and "Z" in axes else axes
    if "C" in axes and shape[axes.index("C")] > 1:
        raise InputError(f"{path}: {shape[axes.index('C')]} channels; save the channel to track as its own file")
    core = axes.replace("C", "")
    if len(core) < 3:
        raise InputError(f"{path}: a single 2D image (shape {shape}) has nothing to track")
    if core in ("TZYX", "ZYX", "TYX"):
        return axes
    unknown = {"Q", "I", "S"}
    if len(core) == 4 and set(core[:2]) <= unknown | {"T", "Z"} and core[2:] == "YX":
        return axes.replace(core, "TZYX") if explicit is False else axes
    if len(core) == 3 and core[0] in unknown:
        raise InputError(
            f"{path}: cannot tell whether the first axis ({shape[0]}) is time or depth; "
            "pass --axes TYX or --axes ZYX"
        )
    raise InputError(f"{path}: unsupported axes {axes!r} (shape {shape}); expected T,Z,Y,X")


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
        factor = _UNIT_TO_UM.get(unit, 1.0 if unit else None)
        try:
            x_res = page.tags["XResolution"].value
            y_res = page.tags["YResolution"].value
            dx = x_res[1] / x_res[0]
            dy = y_res[1] / y_res[0]
        except (KeyError, ZeroDivisionError):
            return None, notes
        dz = float(meta.get("spacing", dx))
        if factor is None or (dx == 1.0 and dy == 1.0 and "spacing" not in meta):
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
