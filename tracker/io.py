"""Reading stacks and tables, writing them atomically.

Stacks are read lazily: a :class:`Stack` memory-maps uncompressed TIFFs and
reads compressed ones one frame at a time, so the 4D stack is never loaded
whole unless asked for.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import os
import re
import tempfile
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .tables import Table, require_columns, table_length


class InputError(ValueError):
    """Bad user input (a file, a parameter): the message is one line meant for the user."""


# --------------------------------------------------------------------------- atomic writes


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    Nothing is left at ``path`` (and an existing file there is untouched) if
    the body raises. Refuses an existing ``path`` unless ``overwrite``.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError(f"{target} already exists (use --overwrite to replace it)")
    if not target.parent.exists():
        raise InputError(f"folder {target.parent} does not exist")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


# --------------------------------------------------------------------------- tables (CSV)

_INTEGER_COLUMNS = {"frame", "track_id", "parent_track_id"}
_BOOLEAN_COLUMNS = {"visible"}


def write_table(path: str | os.PathLike, table: Mapping[str, np.ndarray], overwrite: bool = False) -> None:
    """Write a table as CSV with a header row, atomically.

    Floats are written with 9 significant digits (sub-nanometre for µm).
    """
    n = table_length(table)
    names = list(table)
    columns = []
    for name in names:
        column = np.asarray(table[name])
        if column.dtype.kind == "f":
            columns.append([f"{v:.9g}" for v in column.tolist()])
        elif column.dtype.kind == "b":
            columns.append(["1" if v else "0" for v in column.tolist()])
        else:
            columns.append([str(v) for v in column.tolist()])
    with atomic_path(path, overwrite) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        writer.writerows(zip(*columns) if n else [])


def _parse_numbers(values: list[str]) -> np.ndarray:
    """Strings to float64 (empty cells → NaN); ``ValueError`` if any is not a number."""
    try:
        return np.asarray(values, dtype=np.float64)  # NumPy parses in C; spaces around numbers are fine
    except ValueError:
        return np.array([float(v) if v.strip() else np.nan for v in values], dtype=np.float64)


def read_table(path: str | os.PathLike, required: Iterable[str] = ()) -> Table:
    """Read a CSV table written by :func:`write_table` (or by hand, or by pandas).

    Columns that parse as numbers become float64, except ``frame`` and
    ``track_id`` (int64) and ``visible`` (bool); others stay strings. An
    unnamed leading index column (as pandas writes it) is dropped.

    Raises
    ------
    InputError
        If the file is missing, not CSV, has ragged rows, non-numeric values
        in a required column, or lacks a ``required`` column.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    table = _read_numeric_table(path, required)
    if table is not None:
        return table
    try:
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
    except (UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"{path}: not a readable CSV file ({error})") from None
    if not rows:
        raise InputError(f"{path}: empty file (expected a header row)")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if r]
    if header and header[0] == "":
        header, body = header[1:], [r[1:] for r in body]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(f"{path}: line {number} has {len(row)} fields, the header has {len(header)}")
    required = list(required)
    try:
        require_columns(dict.fromkeys(header), required, what=str(path))
    except ValueError as error:
        raise InputError(str(error)) from None
    table: Table = {}
    for index, name in enumerate(header):
        values = [row[index] for row in body]
        try:
            column = _parse_numbers(values)
        except ValueError:
            if name in required:
                raise InputError(f"{path}: column {name!r} has non-numeric values") from None
            table[name] = np.array([v.strip() for v in values], dtype=object)
            continue
        table[name] = _typed_column(path, name, column)
    return table


def _typed_column(path: Path, name: str, column: np.ndarray) -> np.ndarray:
    """A parsed float64 column as its table type: int64 ``frame``/``track_id``, bool ``visible``."""
    if name in _INTEGER_COLUMNS:
        if not np.all(np.isfinite(column)) or np.any(column != np.round(column)):
            raise InputError(f"{path}: column {name!r} must hold whole numbers")
        return column.astype(np.int64)
    if name in _BOOLEAN_COLUMNS:
        return column.astype(bool)
    return column


def _read_numeric_table(path: Path, required: Iterable[str]) -> Table | None:
    """The fast path of :func:`read_table`: a plain CSV of numbers only, parsed in C by ``np.loadtxt``.

    None when the file is anything else (quotes, strings, empty cells, ragged rows, an index column):
    the general parser then reads it and reports what is wrong.
    """
    try:
        with open(path, newline="") as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": a header-only file
            header = next(csv.reader([handle.readline()]), [])
            data = np.loadtxt(handle, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except (ValueError, UnicodeDecodeError, csv.Error):
        return None
    header = [h.strip() for h in header]
    if not header or "" in header or len(set(header)) != len(header):
        return None
    if data.size == 0:
        data = data.reshape(0, len(header))
    if data.shape[1] != len(header) or not set(required) <= set(header):
        return None
    return {name: _typed_column(path, name, np.ascontiguousarray(data[:, i])) for i, name in enumerate(header)}


# --------------------------------------------------------------------------- stacks (TIFF)


@dataclass
class Stack:
    """A lazily read ``(T, Z, Y, X)`` time-lapse.

    Attributes
    ----------
    data : array-like, shape (T, Z, Y, X)
        A memory map or an in-memory array; ``frame(t)`` is the way to read.
    voxel_size : (float, float, float)
        Voxel size ``z, y, x`` in micrometres.
    path : Path or None
        Source file, if any.
    notes : list of str
        What was assumed while reading (shown to the user).
    """

    data: Any
    voxel_size: tuple[float, float, float]
    path: Path | None = None
    notes: list[str] = field(default_factory=list)
    _read_frame: Any = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(int(s) for s in self.data.shape)  # type: ignore[return-value]

    @property
    def n_frames(self) -> int:
        return self.shape[0]

    def frame(self, t: int) -> np.ndarray:
        """Volume ``t`` as a ``(Z, Y, X)`` array, read from disk now."""
        if self._read_frame is not None:
            return self._read_frame(t)
        return np.asarray(self.data[t])

    def __iter__(self) -> Iterator[np.ndarray]:
        for t in range(self.n_frames):
            yield self.frame(t)


def as_stack(data: Any, voxel_size: Sequence[float] | None = None) -> Stack:
    """Wrap an in-memory ``(T, Z, Y, X)`` array (or a ``Stack``) as a :class:`Stack`."""
    if isinstance(data, Stack):
        return data if voxel_size is None else replace(data, voxel_size=_check_voxel_size(voxel_size))
    array = np.asarray(data) if not hasattr(data, "__cuda_array_interface__") else data
    if array.ndim != 4:
        raise InputError(f"expected a (T, Z, Y, X) array, got shape {tuple(array.shape)}")
    return Stack(array, _check_voxel_size(voxel_size or (1.0, 1.0, 1.0)))


def _check_voxel_size(voxel_size: Sequence[float]) -> tuple[float, float, float]:
    values = tuple(float(v) for v in voxel_size)
    if len(values) != 3 or not all(np.isfinite(v) and v > 0 for v in values):
        raise InputError(f"voxel size must be three positive numbers z,y,x in µm, got {voxel_size}")
    return values  # type: ignore[return-value]


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
    n_frames, n_z = kept_shape[0], kept_shape[1]

    if voxel_size is not None:
        voxel = _check_voxel_size(voxel_size)
    elif found_voxel is not None:
        voxel = found_voxel
    else:
        voxel = (1.0, 1.0, 1.0)
        notes.append("no voxel size in the file: using 1 µm (set --voxel-size Z,Y,X)")

    data: Any
    try:
        data = tifffile.memmap(path, mode="r").reshape(kept_shape)
        read_frame = None
    except Exception:
        data = _LazyFrames(kept_shape, dtype)
        if len(tif.pages) < n_planes_expected:
            tif.close()
            raise InputError(f"{path}: truncated TIFF ({len(tif.pages)} of {n_planes_expected} planes)") from None

        def read_frame(t: int) -> np.ndarray:
            if not 0 <= t < n_frames:
                raise IndexError(t)
            try:
                planes = tif.asarray(key=range(t * n_z, (t + 1) * n_z), series=0)
            except Exception as error:
                raise InputError(f"{path}: cannot read frame {t} ({_short(error)})") from None
            return np.asarray(planes).reshape(kept_shape[1:])

    stack = Stack(data, voxel, path, notes, read_frame)
    if read_frame is None:
        tif.close()
    return stack


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


class _LazyFrames:
    """Shape/dtype holder for stacks read frame by frame (compressed TIFFs)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)


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
    dz, dy, dx = _check_voxel_size(voxel_size)
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
