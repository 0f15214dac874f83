"""A folder of TIFF files, one per time point (what many microscopes write), read lazily as one time-lapse.

The files are taken in natural order (``t2`` before ``t10``); each holds one volume (``ZYX``, or ``ZCYX``
with ``channel``) or one plane (``YX``: a 2D time series). Only the first and the last file are opened
when the folder is; each frame's file is opened when the frame is read, and one whose shape or pixel type
differs from the first's stops the run with its name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..stack import FrameArray, Stack, check_voxel_size
from .tiff import _open, tifffile_memmap

TIFF_SUFFIXES = (".tif", ".tiff")


def tiff_files(folder: Path) -> list[Path]:
    """The TIFF files of ``folder`` in natural order (hidden files skipped)."""
    files = [p for p in folder.iterdir() if p.suffix.lower() in TIFF_SUFFIXES and not p.name.startswith(".")
             and p.is_file()]
    return sorted(files, key=_natural_key)


def read_tiff_folder(path: str | os.PathLike, voxel_size: Sequence[float] | None = None,
                     axes: str | None = None, channel: int | None = None) -> Stack:
    """Open a folder of TIFF files, one per time point, as a lazily read ``(T, Z, Y, X)`` :class:`Stack`.

    Parameters
    ----------
    path : path
        The folder.
    voxel_size : (z, y, x) floats, optional
        µm (``y, x`` for files of one plane); overrides the first file's metadata.
    axes : str, optional
        Each file's axes (``"ZYX"``, ``"YX"``, ``"ZCYX"``); default: the first file's metadata, a volume's
        unlabelled first axis being Z.
    channel : int, optional
        The channel to track (0-based) when the files have several.

    Raises
    ------
    InputError
        No TIFF files, files of several time points, or a last file unlike the first.
    """
    folder = Path(path)
    files = tiff_files(folder)
    if not files:
        raise InputError(f"{folder}: a folder with no TIFF files (and not a Zarr store)")
    file_axes = axes
    if file_axes is not None and "T" in file_axes.upper():
        raise InputError(f"{folder}: --axes {file_axes!r} names T; in a folder each file is one time point "
                         "(give the axes of one file, e.g. ZYX or YX)")
    first, notes = _time_point(files[0], file_axes, channel)
    if first.shape[0] != 1:
        first_file = files[0].name
        raise InputError(f"{folder}: {first_file} holds {first.shape[0]} time points; a folder must hold one "
                         "TIFF per time point (open such a file on its own)")
    frame_shape, dtype = first.shape[1:], first.dtype
    for file in {files[-1]} - {files[0]}:
        _same(folder, _time_point(file, file_axes, channel)[0], file, frame_shape, dtype)
    notes = [n for n in notes if not n.startswith("single 3D volume")]
    notes.append(f"folder of {len(files)} TIFF files, one per time point ({files[0].name} … {files[-1].name})")
    if voxel_size is not None:
        voxel = check_voxel_size(voxel_size, frame_shape[0])
    elif first.voxel is not None:
        voxel = first.voxel
    else:
        voxel = (1.0, 1.0, 1.0)
        notes.append("no voxel size in the first file: using 1 µm (set --voxel-size Z,Y,X)")

    def read_frame(t: int) -> np.ndarray:
        layout, tif, _ = _open(files[t], _file_axes(files[t], file_axes), channel, one_plane=True)
        try:
            _same(folder, layout, files[t], frame_shape, dtype)
            try:
                return np.array(layout.view(tifffile_memmap(layout.path))[0])
            except Exception:  # compressed: read plane by plane
                return layout.page_reader(tif)(0)
        finally:
            tif.close()

    return Stack(FrameArray((len(files), *frame_shape), dtype, read_frame), voxel, folder, notes)


def _time_point(file: Path, axes: str | None, channel: int | None):
    layout, tif, notes = _open(file, _file_axes(file, axes), channel, one_plane=True)
    tif.close()
    return layout, notes


def _file_axes(file: Path, axes: str | None) -> str | None:
    """The axes to read ``file`` with: the given ones, or, for a volume whose first axis is unlabelled, Z."""
    if axes is not None:
        return axes
    import tifffile

    try:
        with tifffile.TiffFile(file) as tif:
            found = tif.series[0].axes.upper()
    except Exception:
        return None  # (``_open`` says what is wrong with the file)
    if len(found) == 3 and found.endswith("YX") and found[0] in "QIS":
        return "ZYX"
    return None


def _same(folder: Path, layout, file: Path, frame_shape: tuple[int, ...], dtype: np.dtype) -> None:
    if layout.shape[0] != 1 or layout.shape[1:] != frame_shape or layout.dtype != dtype:
        raise InputError(f"{folder}: {file.name} holds {layout.shape[0]} × {layout.shape[1:]} {layout.dtype}, "
                         f"the first file one {frame_shape} {dtype}: every file must be one time point alike")


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.name)]
