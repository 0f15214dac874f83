"""A folder of TIFF files (one per time point, or one per plane) read lazily as one time-lapse.

Microscopes and challenges write a time-lapse as many files whose names differ by numbers: ``t000.tif``,
``t001.tif`` … (one volume or plane per time point), or one plane per file, ``VIRUS snr 7 density low t000
z00.tif`` (the ISBI 2012 particle tracking challenge), ``img_channel000_position000_time000000000_z000.tif``
(Micro-Manager). The numbers that differ between the names say which file is which:

* a number after ``t``, ``time``, ``frame`` or ``tp`` is the time point, after ``z``, ``slice``, ``plane`` the
  plane, after ``c``, ``ch``, ``channel`` or ``w`` the channel (chosen with ``channel``);
* numbers without such a word are, in their order in the name, the time point, then the plane (a note says so);
* numbers that are the same in every name (``snr 7``) say nothing.

Only the first and the last file are opened when the folder is; each frame's files are opened when the frame is
read, and a file whose shape or pixel type differs from the first's stops the run with its name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..stack import FrameArray, Stack, check_voxel_size
from .tiff import _open, channel_index, tifffile_memmap

TIFF_SUFFIXES = (".tif", ".tiff")

_WORDS = {"T": r"(?:time|frame|tp|(?<![a-z])t)", "Z": r"(?:slice|plane|(?<![a-z])z)",
          "C": r"(?:channel|ch|(?<![a-z])[cw])"}
"""What the text just before a number in a file name says that number is (the separators ``_ -.`` between
word and number aside). Single letters count only as a word of their own (``density low t000`` is time,
``Default_000`` is not)."""


def tiff_files(folder: Path) -> list[Path]:
    """The TIFF files of ``folder`` in natural order (hidden files skipped)."""
    files = [p for p in folder.iterdir() if p.suffix.lower() in TIFF_SUFFIXES and not p.name.startswith(".")
             and p.is_file()]
    return sorted(files, key=_natural_key)


@dataclass(frozen=True)
class FileGrid:
    """Which file holds which time point, plane and channel.

    Attributes
    ----------
    files : dict of (t, z, c) to Path
        0-based indices; ``z`` is 0 and ``c`` 0 where the names do not vary in them.
    shape : (T, Z, C) ints
        Time points, planes (files per time point and channel; 1 where each file holds a whole volume) and
        channels given by the names.
    notes : tuple of str
    """

    files: dict[tuple[int, int, int], Path]
    shape: tuple[int, int, int]
    notes: tuple[str, ...]


def file_grid(folder: Path, files: list[Path]) -> FileGrid:
    """Read the time point, plane and channel of each file from the numbers that vary between the names.

    Raises
    ------
    InputError
        Names of several patterns, numbers whose meaning is ambiguous, or a missing file.
    """
    parts = [re.split(r"(\d+)", file.name) for file in files]
    unnumbered = next((file for file, p in zip(files, parts) if len(p) == 1), None)
    if unnumbered is not None and len(files) > 1:
        raise InputError(f"{folder}: the TIFF file names carry no frame numbers ({unnumbered.name}); number them "
                         "in time order (t000.tif, t001.tif, ...)")
    patterns = {tuple(p[0::2]) for p in parts}
    if len(patterns) > 1:
        other = next(f for f, p in zip(files, parts) if tuple(p[0::2]) != tuple(parts[0][0::2]))
        raise InputError(f"{folder}: the TIFF file names follow different patterns ({files[0].name}, {other.name}); "
                         "keep one time-lapse per folder")
    numbers = np.array([[int(n) for n in p[1::2]] for p in parts], dtype=np.int64).reshape(len(files), -1)
    varying = [k for k in range(numbers.shape[1]) if len(np.unique(numbers[:, k])) > 1]
    labels = {k: _meaning(parts[0][2 * k]) for k in varying}
    named = [label for label in labels.values() if label]
    if len(set(named)) != len(named) or len(varying) > 3:
        raise InputError(f"{folder}: the file names vary in {len(varying)} numbers ({files[0].name} … "
                         f"{files[-1].name}); expected a time point, a plane and a channel at most")
    notes = []
    free = iter(axis for axis in "TZ" if axis not in named)
    for k in varying:
        if not labels[k]:
            labels[k] = next(free, None)
            if labels[k] is None:
                raise InputError(f"{folder}: cannot tell what the numbers in the file names stand for "
                                 f"({files[0].name} … {files[-1].name})")
            notes.append(f"number {k + 1} of the file names taken as the {'time point' if labels[k] == 'T' else 'plane'}")
    index = {}
    for axis in "TZC":
        column = next((k for k, label in labels.items() if label == axis), None)
        values = numbers[:, column] if column is not None else np.zeros(len(files), np.int64)
        index[axis] = np.unique(values, return_inverse=True)
    shape = tuple(len(index[axis][0]) for axis in "TZC")
    grid = {(int(t), int(z), int(c)): file
            for t, z, c, file in zip(index["T"][1], index["Z"][1], index["C"][1], files)}
    if len(grid) != len(files) or len(grid) != int(np.prod(shape)):
        missing = next((t, z, c) for t in range(shape[0]) for z in range(shape[1]) for c in range(shape[2])
                       if (t, z, c) not in grid) if len(grid) < np.prod(shape) else None
        what = (f"no file for time point {index['T'][0][missing[0]]}" + (
            f", plane {index['Z'][0][missing[1]]}" if shape[1] > 1 else "") + (
            f", channel {index['C'][0][missing[2]]}" if shape[2] > 1 else "")) if missing else "two files per index"
        raise InputError(f"{folder}: {what} ({files[0].name} … {files[-1].name})")
    return FileGrid(grid, shape, tuple(notes))  # type: ignore[arg-type]


def read_tiff_folder(path: str | os.PathLike, voxel_size: Sequence[float] | None = None,
                     axes: str | None = None, channel: int | None = None) -> Stack:
    """Open a folder of TIFF files (one per time point, or one per plane) as a lazily read ``(T, Z, Y, X)``
    :class:`Stack`.

    Parameters
    ----------
    path : path
        The folder.
    voxel_size : (z, y, x) floats, optional
        µm (``y, x`` for one plane per time point); overrides the first file's metadata.
    axes : str, optional
        Each file's axes (``"ZYX"``, ``"YX"``, ``"ZCYX"``); default: the first file's metadata, a volume's
        unlabelled first axis being Z.
    channel : int, optional
        The channel to track (0-based) when the files (or the names) have several.

    Raises
    ------
    InputError
        No TIFF files, names that do not say which file is which, files of several time points, or a last
        file unlike the first.
    """
    folder = Path(path)
    files = tiff_files(folder)
    if not files:
        raise InputError(f"{folder}: a folder with no TIFF files (and not a Zarr store)")
    if axes is not None and "T" in axes.upper():
        raise InputError(f"{folder}: --axes {axes!r} names T; in a folder each file is one time point or plane "
                         "(give the axes of one file, e.g. ZYX or YX)")
    grid = file_grid(folder, files)
    n_t, n_z, n_c = grid.shape
    name_channel = channel_index(folder, n_c, channel) if n_c > 1 else None
    file_channel = None if n_c > 1 else channel
    axes = _file_axes(grid.files[(0, 0, name_channel or 0)], axes)  # (every file's: they are alike)
    first, notes = _time_point(grid.files[(0, 0, name_channel or 0)], axes, file_channel)
    if first.shape[0] != 1 or (n_z > 1 and first.shape[1] != 1):
        holds = f"{first.shape[0]} time points" if first.shape[0] != 1 else f"{first.shape[1]} planes"
        raise InputError(f"{folder}: {files[0].name} holds {holds}; a folder must hold one TIFF per time point "
                         "(or per plane, numbered in the names)")
    plane_shape, dtype = first.shape[1:], first.dtype
    frame_shape = (n_z * plane_shape[0], *plane_shape[1:])
    last = grid.files[(n_t - 1, n_z - 1, name_channel or 0)]
    if last != files[0]:
        _same(folder, _time_point(last, axes, file_channel)[0], last, plane_shape, dtype)
    notes = [n for n in notes if not n.startswith("single 3D volume")] + list(grid.notes)
    per = "plane" if n_z > 1 else "time point"
    notes.append(f"folder of {len(files)} TIFF files, one per {per} ({files[0].name} … {files[-1].name})")
    if voxel_size is not None:
        voxel = check_voxel_size(voxel_size, frame_shape[0])
    elif first.voxel is not None:
        voxel = first.voxel
    else:
        voxel = (1.0, 1.0, 1.0)
        notes.append("no voxel size in the first file: using 1 µm (set --voxel-size Z,Y,X)")

    def read_frame(t: int) -> np.ndarray:
        planes = [_read_file(folder, grid.files[(t, z, name_channel or 0)], axes, file_channel, plane_shape, dtype)
                  for z in range(n_z)]
        return planes[0] if n_z == 1 else np.concatenate(planes, axis=0)

    return Stack(FrameArray((n_t, *frame_shape), dtype, read_frame), voxel, folder, notes)


def _read_file(folder: Path, file: Path, axes: str | None, channel: int | None, shape: tuple[int, ...],
               dtype: np.dtype) -> np.ndarray:
    """The ``(Z, Y, X)`` content of one file, checked against the first file's."""
    layout, tif, _ = _open(file, axes, channel, one_plane=True)
    try:
        _same(folder, layout, file, shape, dtype)
        try:
            return np.array(layout.view(tifffile_memmap(layout.path))[0])
        except Exception:  # compressed: read plane by plane
            return layout.page_reader(tif)(0)
    finally:
        tif.close()


def _time_point(file: Path, axes: str | None, channel: int | None):
    layout, tif, notes = _open(file, axes, channel, one_plane=True)
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
                         f"the first file one {frame_shape} {dtype}: every file must be alike")


def _meaning(text: str) -> str | None:
    """``"T"``, ``"Z"``, ``"C"`` or None: what a number after ``text`` in a file name stands for."""
    text = text.lower().rstrip("_-. ")
    return next((axis for axis, word in _WORDS.items() if re.search(word + "$", text)), None)


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.name)]
