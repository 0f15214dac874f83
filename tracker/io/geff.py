"""Tracks as GEFF, the graph exchange file format of the tracking community (a Zarr group).

Each point is a node with properties ``t`` (frame), ``z`` (2D: absent), ``y``,
``x`` in µm and the table's other per-point columns (``track_id``,
``intensity``, ...); each link is an edge, from the earlier point to the later,
with the ``link_cost`` (µm²) and ``link_confidence`` of the later point. The
axes carry their units (``frame``, ``micrometer``), ``track_id`` is declared the
tracklet and lineage property, and the metadata's ``extra["tracker"]`` holds the
tracker's version and, when given, the parameters of the run. Written and read
through the ``geff`` package (``pip install 'tracker3d[formats]'``); every file
written passes ``geff.validate_structure``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..tables import Table, spatial_axes
from ._atomic import check_writable
from ._graph import check_tracks, track_ids_from_links, track_links, tracks_table
from .tiff import _short

EDGE_COLUMNS = ("link_cost", "link_confidence")
"""Per-point columns that describe the link into the point: stored on the edges."""

COLUMN_INFO = {
    "track_id": ("", "track the point belongs to"),
    "z": ("micrometer", "position along z"),
    "y": ("micrometer", "position along y"),
    "x": ("micrometer", "position along x"),
    "intensity": ("", "spot intensity above background (counts)"),
    "quality": ("", "detection filter response (signal-to-noise ratio)"),
    "link_cost": ("micrometer**2", "squared distance of the later point from where the link predicted it"),
    "link_confidence": ("", "how clearly the assignment preferred this link over its alternatives (0-1)"),
    "visible": ("", "the particle is detectable in this frame (ground truth)"),
}
"""Unit and description of the standard columns, written into the property metadata."""

_LENGTH_TO_UM = {"micrometer": 1.0, "micron": 1.0, "µm": 1.0, "um": 1.0, "nanometer": 1e-3, "nm": 1e-3,
                 "millimeter": 1e3, "mm": 1e3, "centimeter": 1e4, "meter": 1e6, "m": 1e6, "angstrom": 1e-4}


def _geff():
    try:
        import geff
        import geff_spec
    except ImportError:
        raise InputError("GEFF needs the geff package: pip install 'tracker3d[formats]'") from None
    return geff, geff_spec


def write_geff(path: str | os.PathLike, tracks: Mapping[str, Any], overwrite: bool = False, *,
               parameters: Mapping[str, Any] | None = None, zarr_format: int = 2) -> None:
    """Write a tracks table as a GEFF Zarr group (a folder), atomically.

    Parameters
    ----------
    path : path
        The folder to create, e.g. ``tracks.geff``.
    tracks : mapping of str to arrays
        ``track_id, frame, (z,) y, x`` (µm) and any per-point columns.
    overwrite : bool
        Replace an existing folder.
    parameters : mapping, optional
        The run's parameters, stored in ``extra["tracker"]["parameters"]`` of the metadata.
    zarr_format : {2, 3}
        Zarr version of the store (2, geff's default, is read by every GEFF reader).

    Raises
    ------
    InputError
        A required column is missing, a track has two points in one frame, or ``path`` exists.
    """
    _geff()
    from geff.core_io import write_arrays

    table = check_tracks(tracks, what="tracks")
    source, target = track_links(table)
    node_props, edge_props = graph_props(table, target)
    metadata = geff_metadata(spatial_axes(table), node_props, edge_props, parameters)
    n = len(table["frame"])
    with atomic_directory(path, overwrite) as tmp:
        write_arrays(
            str(tmp),
            np.arange(n, dtype=np.uint64),
            {name: {"values": _storable(values), "missing": None} for name, values in node_props.items()},
            np.column_stack([source, target]).astype(np.uint64).reshape(-1, 2),
            {name: {"values": values, "missing": None} for name, values in edge_props.items()},
            metadata,
            zarr_format=zarr_format,
        )


def graph_props(table: Mapping[str, np.ndarray], target: np.ndarray) -> tuple[dict, dict]:
    """The node properties (``t`` for the frame, then the table's other columns but the link's) and the edge
    properties (the link's columns of each edge's ``target`` row) of a tracks table."""
    node_props = {"t": table["frame"]}
    node_props.update({name: column for name, column in table.items() if name not in ("frame", *EDGE_COLUMNS)})
    edge_props = {name: np.asarray(table[name], dtype=np.float64)[target] for name in EDGE_COLUMNS if name in table}
    return node_props, edge_props


def geff_metadata(axes: tuple[str, ...], node_props: Mapping[str, np.ndarray], edge_props: Mapping[str, np.ndarray],
                  parameters: Mapping[str, Any] | None = None) -> Any:
    """The GEFF metadata of the tracks (``geff_spec.GeffMetadata``): axes (without their extent), properties
    (their dtypes from ``node_props`` and ``edge_props``), the track property and the run's ``parameters``."""
    _, geff_spec = _geff()
    from .. import __version__

    return geff_spec.GeffMetadata(
        directed=True,
        axes=[geff_spec.Axis(name="t", type="time", unit="frame"),
              *(geff_spec.Axis(name=a, type="space", unit="micrometer") for a in axes)],
        node_props_metadata=_props_metadata(geff_spec, node_props),
        edge_props_metadata=_props_metadata(geff_spec, edge_props),
        track_node_props={"tracklet": "track_id", "lineage": "track_id"},
        display_hints=geff_spec.DisplayHint(display_horizontal="x", display_vertical="y",
                                            display_depth="z" if "z" in axes else None, display_time="t"),
        extra={"tracker": {"version": __version__, **({"parameters": dict(parameters)} if parameters else {})}},
    )


def _storable(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    return values.astype(str) if values.dtype.kind == "O" else values


def _props_metadata(geff_spec, props: Mapping[str, np.ndarray]) -> dict:
    metadata = {}
    for name, values in props.items():
        unit, description = ("frame", "frame (time point)") if name == "t" else COLUMN_INFO.get(name, ("", None))
        metadata[name] = geff_spec.PropMetadata(identifier=name, dtype=str(_storable(values).dtype),
                                                unit=unit or None, description=description)
    return metadata


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, overwrite: bool) -> Iterator[Path]:
    """A path in a temporary folder beside ``path``, moved onto it on success (replacing it if ``overwrite``)."""
    target = check_writable(path, overwrite)
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    try:
        yield folder / target.name
        if target.exists():  # (a folder cannot be renamed onto another: move the old one aside first)
            os.replace(target, folder / "old")
        os.replace(folder / target.name, target)
    finally:
        shutil.rmtree(folder)


def read_geff(path: str | os.PathLike) -> Table:
    """Read tracks from a GEFF group: one row per node, track ids from the edges.

    The time axis becomes ``frame``; the space axes become ``z, y, x`` (or ``y, x``) in µm, converted
    from their unit (``micrometer``, ``nanometer``, ... or ``pixel`` with a ``scale`` to a length
    unit). 1-D node properties become columns; the edges' ``link_cost`` and ``link_confidence`` go to
    their later point (NaN where a track starts). Track ids are the file's tracklet property where it
    agrees with the edges, otherwise numbered from 0.

    Raises
    ------
    InputError
        Not a GEFF group, no time axis or not two or three space axes, a length unit that is not
        known, or tracks that divide or merge.
    """
    _geff()
    from geff.core_io import read_to_memory

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    try:
        memory = read_to_memory(str(path))
    except Exception as error:  # geff raises ValueError, KeyError, pydantic's ValidationError, zarr errors
        raise InputError(f"{path}: not a readable GEFF ({_short(error)})") from None
    metadata, props = memory["metadata"], memory["node_props"]
    time_axis, space_axes = _axes(path, metadata)
    columns: dict[str, np.ndarray] = {}
    times = np.asarray(props[time_axis.name]["values"], dtype=np.float64)
    if not np.all(times == np.round(times)):
        raise InputError(f"{path}: time axis {time_axis.name!r} does not hold whole frames")
    columns["frame"] = times.astype(np.int64)
    names = ("z", "y", "x")[3 - len(space_axes):]
    for name, axis in zip(names, space_axes):
        columns[name] = np.asarray(props[axis.name]["values"], dtype=np.float64) * _um_per_unit(path, axis)
    used = {time_axis.name, *(axis.name for axis in space_axes)}
    declared = [name for name in metadata.node_props_metadata if name in props]  # (in the order written)
    for name in [*declared, *(name for name in props if name not in declared)]:
        prop = props[name]
        values = np.asarray(prop["values"])
        if name in used or values.ndim != 1 or name in columns:
            continue
        columns[name] = _with_missing(values, prop.get("missing"))
    edges = np.asarray(memory["edge_ids"]).reshape(-1, 2)
    index = {int(node): row for row, node in enumerate(np.asarray(memory["node_ids"]).tolist())}
    source = np.array([index[int(node)] for node in edges[:, 0]], dtype=np.int64)
    target = np.array([index[int(node)] for node in edges[:, 1]], dtype=np.int64)
    tracklet = (metadata.track_node_props or {}).get("tracklet", "track_id")
    given = columns.pop(tracklet, None) if tracklet in columns else None
    columns.pop("track_id", None)
    columns["track_id"] = track_ids_from_links(
        columns["frame"], source, target, str(path),
        given=None if given is None or given.dtype.kind not in "iuf" else np.nan_to_num(given, nan=-1))
    for name in EDGE_COLUMNS:
        if name in memory["edge_props"]:
            prop = memory["edge_props"][name]
            column = np.full(len(columns["frame"]), np.nan)
            column[target] = _with_missing(np.asarray(prop["values"], dtype=np.float64), prop.get("missing"))
            columns[name] = column
    return tracks_table(columns)


def _axes(path: Path, metadata) -> tuple[Any, list]:
    axes = list(metadata.axes or [])
    time = [a for a in axes if a.type == "time"] or [a for a in axes if a.name in ("t", "frame", "time")]
    space = [a for a in axes if a.type == "space"] or [a for a in axes if a.name in ("z", "y", "x")]
    if not time:
        raise InputError(f"{path}: the GEFF has no time axis (tracks need one)")
    if len(space) not in (2, 3):
        raise InputError(f"{path}: the GEFF has {len(space)} space axes; expected 2 (y, x) or 3 (z, y, x)")
    return time[0], space


def _um_per_unit(path: Path, axis) -> float:
    """µm per unit of a space axis (a ``pixel`` axis with a ``scale`` to a length unit is scaled)."""
    unit = (axis.unit or "micrometer").lower()
    if unit in _LENGTH_TO_UM:
        return _LENGTH_TO_UM[unit]
    scaled = (axis.scaled_unit or "").lower()
    if axis.scale is not None and scaled in _LENGTH_TO_UM:
        return float(axis.scale) * _LENGTH_TO_UM[scaled]
    raise InputError(f"{path}: axis {axis.name!r} is in {axis.unit!r}, not a length unit "
                     "(micrometer, nanometer, ... or pixel with a scale)")


def _with_missing(values: np.ndarray, missing: np.ndarray | None) -> np.ndarray:
    if missing is None or not np.any(missing):
        return values
    if values.dtype.kind in "iub":
        values = values.astype(np.float64)
    if values.dtype.kind == "f":
        return np.where(np.asarray(missing, dtype=bool), np.nan, values)
    return values

