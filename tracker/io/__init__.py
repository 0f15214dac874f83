"""File I/O: stacks (TIFF, Zarr) and tables (CSV, Parquet) and tracks (also GEFF, TrackMate XML, ISBI XML).

A layer over the core, which never imports it: :func:`read_stack` gives a
:class:`tracker.stack.Stack` for :func:`tracker.pipeline.track_stack`, tables
are the ``dict`` of columns of :mod:`tracker.tables`. One module per format
(:mod:`.tiff`, :mod:`.zarr`, :mod:`.tables`, :mod:`.geff`, :mod:`.trackmate`,
:mod:`.isbi`); every writer writes atomically. :func:`read_tracks` and
:func:`write_tracks` choose the track format by the extension, or by
``format``:

| format      | extension                              | module            |
| ----------- | -------------------------------------- | ----------------- |
| `csv`       | `.csv` (also `.tsv`, `.txt`)           | `tracker.io.tables`    |
| `parquet`   | `.parquet`, `.pq`                      | `tracker.io.tables`    |
| `geff`      | `.geff`, `.zarr` (a folder)            | `tracker.io.geff`      |
| `trackmate` | `.xml` (read: by its root element)     | `tracker.io.trackmate` |
| `isbi`      | `.isbi.xml` (read: any `.xml`)         | `tracker.io.isbi`      |
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..stack import FrameArray, Stack, as_stack
from ..tables import Table
from ._atomic import atomic_path, check_writable, write_text
from .tables import read_table, write_table
from .tiff import write_stack

TRACK_FORMATS = ("csv", "parquet", "geff", "trackmate", "isbi")
"""The track formats :func:`read_tracks` and :func:`write_tracks` know."""

_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
             ".geff": "geff", ".zarr": "geff", ".xml": "trackmate"}


def track_format(path: str | os.PathLike, format: str | None = None, reading: bool = False) -> str:
    """The track format of ``path``: ``format`` if given, else from the extension (see the table above).

    Reading a ``.xml`` file looks at its root element (``<TrackMate>`` or ISBI's ``<root>``); writing one
    makes TrackMate XML unless the name ends in ``.isbi.xml``.

    Raises
    ------
    InputError
        An unknown ``format`` or extension.
    """
    if format is not None:
        if format.lower() not in TRACK_FORMATS:
            raise InputError(f"unknown track format {format!r}; expected one of {', '.join(TRACK_FORMATS)}")
        return format.lower()
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".xml":
        if path.name.lower().endswith(".isbi.xml"):
            return "isbi"
        return _xml_format(path) if reading and path.is_file() else "trackmate"
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if reading and path.is_dir() and any((path / name).is_file() for name in ("zarr.json", ".zattrs")):
        return "geff"
    raise InputError(f"{path}: cannot tell the track format from the extension {suffix or '(none)'!r}; "
                     f"use --format ({', '.join(TRACK_FORMATS)})")


def _xml_format(path: Path) -> str:
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if b"<TrackMate" in head:
        return "trackmate"
    if b"<TrackContestISBI2012" in head or b"<root" in head:
        return "isbi"
    raise InputError(f"{path}: an XML file that is neither TrackMate XML nor ISBI 2012 challenge XML")


def read_tracks(path: str | os.PathLike, format: str | None = None, *,
                voxel_size: Sequence[float] | None = None) -> Table:
    """Read a tracks table from any track format (see the module's table).

    Parameters
    ----------
    path : path
    format : {"csv", "parquet", "geff", "trackmate", "isbi"}, optional
        Default: from the extension (and an XML file's root element).
    voxel_size : (z, y, x) floats, optional
        µm per voxel, for files with positions in pixels (TrackMate with ``spatialunits="pixel"``,
        the ISBI challenge's ground truth).

    Returns
    -------
    dict of str to numpy.ndarray
        ``track_id``, ``frame``, ``z`` (absent for 2D data), ``y``, ``x`` (µm) and the file's other
        per-point columns, sorted by track and frame.

    Raises
    ------
    InputError
        A missing or unreadable file, a missing column, or tracks the format cannot hold.
    """
    from ._graph import TRACK_REQUIRED, check_tracks

    kind = track_format(path, format, reading=True)
    if kind in ("csv", "parquet"):
        return check_tracks(read_table(path, required=TRACK_REQUIRED), what=str(path))
    if kind == "geff":
        from .geff import read_geff

        return read_geff(path)
    if kind == "trackmate":
        from .trackmate import read_trackmate

        return read_trackmate(path, voxel_size=voxel_size)
    from .isbi import read_isbi

    return read_isbi(path, voxel_size=voxel_size)


def write_tracks(path: str | os.PathLike, tracks: Mapping[str, Any], format: str | None = None, *,
                 overwrite: bool = False, voxel_size: Sequence[float] | None = None,
                 parameters: Mapping[str, Any] | None = None, image_path: str | os.PathLike | None = None) -> str:
    """Write a tracks table in any track format (see the module's table), atomically.

    Parameters
    ----------
    path : path
    tracks : mapping of str to arrays (a ``dict`` or a pandas DataFrame)
        ``track_id, frame, (z,) y, x`` (µm) and per-point columns.
    format : {"csv", "parquet", "geff", "trackmate", "isbi"}, optional
        Default: from the extension.
    overwrite : bool
        Replace an existing file.
    voxel_size : (z, y, x) floats, optional
        ISBI: write positions in voxels; TrackMate: the image's voxel size.
    parameters : mapping, optional
        GEFF: the run's parameters, kept in the metadata.
    image_path : path, optional
        TrackMate: the stack the tracks come from.

    Returns
    -------
    str
        The format written.
    """
    kind = track_format(path, format)
    if kind in ("csv", "parquet"):
        from ._graph import check_tracks

        table = check_tracks(tracks, what="tracks")
        if kind == "parquet" and not str(path).lower().endswith((".parquet", ".pq")):
            raise InputError(f"{path}: a Parquet file needs the extension .parquet or .pq")
        write_table(path, table, overwrite=overwrite)
    elif kind == "geff":
        from .geff import write_geff

        write_geff(path, tracks, overwrite, parameters=parameters)
    elif kind == "trackmate":
        from .trackmate import write_trackmate

        radius = ((parameters or {}).get("detection") or {}).get("spot_radius_um")
        write_trackmate(path, tracks, overwrite, voxel_size=voxel_size, image_path=image_path, radius_um=radius)
    else:
        from .isbi import write_isbi

        write_isbi(path, tracks, overwrite, voxel_size=voxel_size)
    return kind


def read_stack(path: str | os.PathLike, voxel_size: Sequence[float] | None = None,
               axes: str | None = None, channel: int | None = None) -> Stack:
    """Open a time-lapse lazily: a TIFF file, a Zarr / OME-Zarr folder (``.zarr`` or any Zarr group), or a
    folder of TIFF files, one per time point.

    See :func:`tracker.io.tiff.read_stack`, :func:`tracker.io.zarr.read_zarr` and
    :func:`tracker.io.tiff_folder.read_tiff_folder`; ``voxel_size`` (``z, y, x`` in µm) and ``axes`` override
    what the file says; ``channel`` (0-based) chooses one of several channels.
    """
    path = Path(path)
    if path.suffix.lower() == ".zarr" or (path.is_dir() and _is_zarr(path)):
        from .zarr import read_zarr

        return read_zarr(path, voxel_size=voxel_size, axes=axes, channel=channel)
    if path.is_dir():
        from .tiff_folder import read_tiff_folder

        return read_tiff_folder(path, voxel_size=voxel_size, axes=axes, channel=channel)
    from .tiff import read_stack as read_tiff

    return read_tiff(path, voxel_size=voxel_size, axes=axes, channel=channel)


def _is_zarr(path: Path) -> bool:
    return any((path / name).is_file() for name in ("zarr.json", ".zgroup", ".zarray"))


__all__ = [
    "TRACK_FORMATS",
    "FrameArray",
    "InputError",
    "Stack",
    "as_stack",
    "atomic_path",
    "check_writable",
    "read_stack",
    "read_table",
    "read_tracks",
    "track_format",
    "write_stack",
    "write_table",
    "write_text",
    "write_tracks",
]
