"""The Python API with pandas: the core's functions taking and returning DataFrames.

A thin layer over :mod:`tracker.pipeline`, :mod:`tracker.linking` and
:mod:`tracker.io`, which keep their tables as ``dict`` of NumPy arrays. Every
function here accepts a pandas DataFrame or a ``dict`` of arrays, and returns
DataFrames with the columns the core documents (positions in µm):

detections
    ``frame`` (int), ``z, y, x`` (µm; no ``z`` in 2D), ``intensity`` (counts above
    background), ``quality`` (filter response, a signal-to-noise ratio), ``z_vox,
    y_vox, x_vox`` (voxels).
tracks
    the detections' columns, ``track_id`` (int), ``link_cost`` (µm², squared
    distance of the point from where its link predicted it; NaN where a track
    starts) and ``link_confidence`` (0-1; NaN where a track starts).

Stacks may be a :class:`tracker.stack.Stack`, a path (TIFF, Zarr, OME-Zarr) or
any ``(T, Z, Y, X)`` array-like (NumPy, Dask, Zarr, a memory map): only one
frame is read at a time. The functions are importable from :mod:`tracker`
itself (``tracker.track_stack``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .params import LINKING_DEFAULTS

if TYPE_CHECKING:
    import pandas

    from .pipeline import TrackingResult
    from .stack import Stack

__all__ = ["detect_stack", "link_detections", "read_stack", "read_tracks", "relink", "track_stack", "write_tracks"]


def as_table(data: Any) -> dict[str, np.ndarray]:
    """A DataFrame or a mapping of columns as the core's ``dict`` of 1-D NumPy arrays (no copy where possible).

    Raises
    ------
    TypeError
        If ``data`` is neither a DataFrame nor a mapping of columns.
    """
    if hasattr(data, "columns") and hasattr(data, "__getitem__"):  # a pandas (or pandas-like) DataFrame
        return {str(name): np.asarray(data[name]) for name in data.columns}
    if isinstance(data, Mapping):
        return {str(name): np.asarray(column) for name, column in data.items()}
    raise TypeError(f"expected a pandas DataFrame or a dict of columns, got {type(data).__name__}")


def as_dataframe(table: Mapping[str, Any]) -> pandas.DataFrame:
    """The core's ``dict`` of columns as a pandas DataFrame (columns in the same order)."""
    import pandas

    return pandas.DataFrame({name: np.asarray(column) for name, column in table.items()})


def _stack(stack: Any, voxel_size_um: Sequence[float] | None) -> Stack:
    """A :class:`Stack` from a Stack, a path or an array-like, never reading the frames here."""
    from .stack import as_stack

    if isinstance(stack, (str, os.PathLike)):
        from .io import read_stack

        return read_stack(stack, voxel_size=voxel_size_um)
    return as_stack(stack, voxel_size_um)


def read_stack(path: str | os.PathLike, voxel_size_um: Sequence[float] | None = None,
               axes: str | None = None, channel: int | None = None) -> Stack:
    """Open a time-lapse lazily: TIFF (ImageJ, OME), Zarr or OME-Zarr.

    Parameters
    ----------
    path : path
        A ``.tif`` file, a ``.zarr`` folder, or a folder of TIFF files, one per time point.
    voxel_size_um : (z, y, x) floats, optional
        Overrides the voxel size in the file's metadata (µm).
    axes : str, optional
        The file's axes when its metadata is ambiguous or wrong (``"TZYX"``, ``"ZTYX"``, ``"TZCYX"``, ``"ZYX"``,
        ``"TYX"``; for a folder, one file's: ``"ZYX"``, ``"YX"``).
    channel : int, optional
        The channel to track (0-based) in a stack of several.

    Returns
    -------
    tracker.stack.Stack
        ``(T, Z, Y, X)`` frames read one at a time, with ``voxel_size`` (µm) and ``notes``.
    """
    from .io import read_stack as read

    return read(path, voxel_size=voxel_size_um, axes=axes, channel=channel)


def detect_stack(stack: Any, *, voxel_size_um: Sequence[float] | None = None, **options: Any) -> pandas.DataFrame:
    """Detect spots in every frame of a stack.

    Parameters
    ----------
    stack : Stack, path or (T, Z, Y, X) array-like
        Read one frame at a time.
    voxel_size_um : (z, y, x) floats, optional
        Overrides the stack's voxel size (µm; an array's default is 1 µm).
    **options
        ``spot_radius_um``, ``threshold``, ``device`` (:class:`tracker.params.DetectionParams`),
        ``detection`` (all of them as one object), ``progress``, ``workers`` (frames the CPU detects at once).

    Returns
    -------
    pandas.DataFrame
        One row per spot: ``frame``, ``z, y, x`` (µm), ``intensity``, ``quality``, ``z_vox, y_vox, x_vox``.
    """
    from .pipeline import detect_stack as detect

    return as_dataframe(detect(_stack(stack, voxel_size_um), **options))


def link_detections(detections: Any, max_displacement_um: float | None = LINKING_DEFAULTS.max_displacement_um, *,
                    return_summary: bool = False, **options: Any):
    """Link detections into tracks.

    Parameters
    ----------
    detections : pandas.DataFrame or dict of arrays
        ``frame`` and ``z, y, x`` (µm; ``y, x`` for 2D data); other columns are carried over.
    max_displacement_um : float, optional
        The gate: the largest displacement between consecutive frames (µm); None (the default): estimated
        from the detections, reported in the summary (``summary.gate``).
    return_summary : bool
        Also return what the linker measured and decided (gate, persistence, smoothing, gap closing).
    **options
        The other fields of :class:`tracker.params.LinkingParams` (``motion``, ``persistence``,
        ``max_gap``, ``solver``, ...) and ``progress``.

    Returns
    -------
    tracks : pandas.DataFrame
        The detections' columns with ``track_id``, ``link_cost`` (µm²) and ``link_confidence``.
    summary : tracker.linking.LinkSummary
        Only with ``return_summary=True``.
    """
    table = as_table(detections)
    from .linking import link_detections as link

    result = link(table, max_displacement_um, return_summary=return_summary, **options)
    return (as_dataframe(result[0]), result[1]) if return_summary else as_dataframe(result)


def relink(tracks: Any, detections: Any = None, *, pinned: Any = (), forbidden: Any = (),
           **options: Any) -> pandas.DataFrame:
    """Link tracks again around a reviewer's decisions: pinned links kept, forbidden links never made.

    Only the frame pairs around the edited links, and there only the points near them, are linked again
    (:func:`tracker.linking.relink.relink`); every other link stays as it is.

    Parameters
    ----------
    tracks : pandas.DataFrame or dict of arrays
        ``track_id``, ``frame``, ``z, y, x`` (µm), as :func:`link_detections` returns them.
    detections : pandas.DataFrame or dict of arrays, optional
        The detections, when some are not in ``tracks``: those near the edits join the re-solve.
    pinned, forbidden : (k, 2) ints
        Links as ``(source row, target row)``, rows being positions (``iloc``) in ``tracks``.
    **options
        ``max_displacement_um``, ``persistence``, ``max_gap``, ``no_link_factor``, ``solver`` (as for
        :func:`link_detections`), ``window`` (frames each side), ``radius_um`` (reach around the edits).

    Returns
    -------
    pandas.DataFrame
        ``tracks`` in the same row order with ``track_id``, ``link_cost`` and ``link_confidence`` updated.
    """
    from .linking import relink as solve

    table = solve(as_table(tracks), None if detections is None else as_table(detections), pinned=pinned,
                  forbidden=forbidden, **options)
    return as_dataframe(table)


def track_stack(stack: Any, **options: Any) -> TrackingResult:
    """Detect spots in a stack and link them into tracks.

    Parameters
    ----------
    stack : Stack, path or (T, Z, Y, X) array-like
        Read one frame at a time.
    **options
        ``voxel_size_um`` and the fields of :class:`tracker.params.DetectionParams` and
        :class:`tracker.params.LinkingParams` as keywords (or ``detection=``, ``linking=`` objects),
        ``progress``; see :func:`tracker.pipeline.track_stack`.

    Returns
    -------
    tracker.pipeline.TrackingResult
        With ``detections`` and ``tracks`` as DataFrames, ``voxel_size``, ``timings`` (s per stage)
        and ``linking`` (what the linker decided).
    """
    from .pipeline import track_stack as track

    voxel_size_um = options.pop("voxel_size_um", None)
    result = track(_stack(stack, voxel_size_um), **options)
    return dataclasses.replace(result, detections=as_dataframe(result.detections), tracks=as_dataframe(result.tracks))


def read_tracks(path: str | os.PathLike, format: str | None = None, *,
                voxel_size_um: Sequence[float] | None = None) -> pandas.DataFrame:
    """Read tracks from CSV, Parquet, GEFF, TrackMate XML or ISBI 2012 XML (see :func:`tracker.io.read_tracks`).

    Returns
    -------
    pandas.DataFrame
        ``track_id``, ``frame``, ``z`` (absent for 2D data), ``y``, ``x`` (µm) and the file's other
        per-point columns, sorted by track and frame.
    """
    from .io import read_tracks as read

    return as_dataframe(read(path, format, voxel_size=voxel_size_um))


def write_tracks(path: str | os.PathLike, tracks: Any, format: str | None = None, **options: Any) -> str:
    """Write tracks (a DataFrame or a dict of arrays) as CSV, Parquet, GEFF, TrackMate XML or ISBI 2012 XML.

    The format follows the extension or ``format``; ``options`` are those of
    :func:`tracker.io.write_tracks` (``overwrite``, ``voxel_size``, ``parameters``, ``image_path``).

    Returns
    -------
    str
        The format written.
    """
    from .io import write_tracks as write

    return write(path, as_table(tracks), format, **options)
