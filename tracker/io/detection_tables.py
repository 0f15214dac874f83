"""Detections tables of other tools, read as this package's: ``frame`` and ``z, y, x`` (or ``y, x``) in µm.

Recognised without options:

* this package's own (``frame, z, y, x`` in µm), as ``track run --detections`` writes it;
* TrackMate's spot table (``FRAME, POSITION_X, POSITION_Y, POSITION_Z``; the three rows of names, short names
  and units that TrackMate 7 writes under the header are skipped, and a unit of pixels needs the voxel size);
* columns whose name carries a unit, as ThunderSTORM and many scripts write them: ``x [nm]``, ``y (µm)``,
  ``z_um``, ``x_px`` (pixels: needs the voxel size);
* trackpy's features (``frame, x, y[, z]`` with ``mass``, ``ecc``, ``signal`` …), whose positions are in pixels:
  read with the voxel size, refused without it.

Anything else is mapped by name: ``columns={"frame": "T", "x": "PosX", ...}`` (``track link --columns
frame=T,x=PosX``); mapped columns are in µm unless their name carries another unit. Other columns are kept as
they are (TrackMate's ``QUALITY``, trackpy's ``mass``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..tables import Table
from .tables import read_table

AXES = ("z", "y", "x")

LENGTH_UNITS_UM = {"um": 1.0, "µm": 1.0, "μm": 1.0, "micron": 1.0, "microns": 1.0, "micrometer": 1.0,
                   "micrometre": 1.0, "nm": 1e-3, "nanometer": 1e-3, "nanometre": 1e-3, "mm": 1e3}
"""Length units a column name may carry, in µm each."""

PIXEL_UNITS = {"px", "pix", "pixel", "pixels", "vox", "voxel", "voxels"}
"""Units that mean the table is in pixels: the voxel size converts them."""

TRACKPY_COLUMNS = {"mass", "ecc", "signal", "raw_mass", "ep"}
"""Columns only trackpy's ``locate``/``batch`` write beside ``frame, x, y, z`` (whose positions are pixels)."""

_TRACKMATE = {"frame": "FRAME", "z": "POSITION_Z", "y": "POSITION_Y", "x": "POSITION_X"}
_FRAME_NAMES = ("frame", "FRAME", "Frame", "t", "T", "time_point", "timepoint")
_UNIT_SUFFIX = re.compile(r"^(?P<axis>[xyz])\s*(?:[\[(](?P<bracket>[^\])]+)[\])]|_(?P<suffix>[a-zµμ]+))$",
                          re.IGNORECASE)


def read_detections(path: str | os.PathLike, voxel_size: Sequence[float] | None = None,
                    columns: Mapping[str, str] | None = None) -> Table:
    """Read a detections table, ours or another tool's, as ``frame`` and ``z, y, x`` (or ``y, x``) in µm.

    Parameters
    ----------
    path : path
        CSV or Parquet.
    voxel_size : (z, y, x) or (y, x) floats, optional
        µm per pixel along each axis, for tables in pixels (trackpy's, a unit of pixels).
    columns : mapping, optional
        ``{"frame": name, "z": name, "y": name, "x": name}``: the table's columns to read as these (any subset;
        the others found as usual).

    Returns
    -------
    dict of str to numpy.ndarray
        ``frame`` (int64), ``y, x`` and, in 3D, ``z`` (float64, µm), then the table's other columns.

    Raises
    ------
    InputError
        No frame or position columns found, positions in pixels without ``voxel_size``, an unknown unit, or a
        mapped column missing.
    """
    path = Path(path)
    table = _without_unit_rows(read_table(path))
    names = _position_columns(path, table, columns or {})
    scale = _scales(path, table, names, voxel_size)
    frames = np.asarray(table[names["frame"]], dtype=np.float64)
    if not np.all(np.isfinite(frames)) or np.any(frames != np.round(frames)):
        raise InputError(f"{path}: column {names['frame']!r} must hold whole frame numbers")
    out: Table = {"frame": frames.astype(np.int64)}
    for axis in AXES:
        if axis in names:
            out[axis] = np.asarray(table[names[axis]], dtype=np.float64) * scale[axis]
    used = {*names.values(), _UNITS_KEY}
    out.update({name: column for name, column in table.items() if name not in used and name not in out})
    return out


def _position_columns(path: Path, table: Table, given: Mapping[str, str]) -> dict[str, str]:
    """Which column is ``frame``, ``z``, ``y``, ``x`` (``z`` absent in 2D)."""
    unknown = set(given) - {"frame", *AXES}
    if unknown:
        raise InputError(f"--columns: {', '.join(sorted(unknown))} is not one of frame, z, y, x")
    missing = [name for name in given.values() if name not in table]
    if missing:
        raise InputError(f"{path}: no column {missing[0]!r} (columns: {_listing(table)})")
    names = dict(given)
    if all(name in table for name in _TRACKMATE.values() if name != "POSITION_Z") and not set(given) & set(AXES):
        names.update({k: v for k, v in _TRACKMATE.items() if v in table and k not in names})
    for axis in AXES:
        if axis not in names:
            found = [name for name in table if name != _UNITS_KEY and (name.lower() == axis or _unit_match(name, axis))]
            if len(found) > 1 and axis in found and all(_in_pixels(name) for name in found if name != axis):
                found = [axis]  # ours (track run --detections): z, y, x in µm beside z_vox, y_vox, x_vox
            if len(found) > 1:
                raise InputError(f"{path}: columns {', '.join(map(repr, found))} could all be {axis}; "
                                 f"say which with --columns {axis}=NAME")
            if found:
                names[axis] = found[0]
    if "frame" not in names:
        names["frame"] = next((name for name in _FRAME_NAMES if name in table), "")
    absent = [key for key in ("frame", "y", "x") if not names.get(key)]
    if absent:
        raise InputError(f"{path}: missing column(s): {', '.join(absent)} (columns: {_listing(table)}); "
                         "name them with --columns frame=NAME,y=NAME,x=NAME")
    for key, name in names.items():
        if np.asarray(table[name]).dtype == object:
            raise InputError(f"{path}: column {name!r} ({key}) has non-numeric values")
    return names


def _scales(path: Path, table: Table, names: Mapping[str, str], voxel_size: Sequence[float] | None) -> dict:
    """µm per table unit for each position axis."""
    units = {axis: _unit(path, names[axis], table) for axis in AXES if axis in names}
    pixels = [axis for axis, unit in units.items() if unit is None]
    if not pixels:
        return units
    if voxel_size is None:
        why = ("trackpy's output (columns " + ", ".join(sorted(TRACKPY_COLUMNS & set(table))) + ")"
               if TRACKPY_COLUMNS & set(table) else "in pixels")
        raise InputError(f"{path}: positions {', '.join(names[a] for a in pixels)} are {why}: give the voxel "
                         "size (--voxel-size Z,Y,X in µm; Y,X in 2D) to convert them to µm")
    sizes = [float(v) for v in voxel_size]
    axes = [axis for axis in AXES if axis in names]
    if len(sizes) == 3 and len(axes) == 2:
        sizes = sizes[1:]
    if len(sizes) != len(axes) or not all(np.isfinite(sizes)) or min(sizes) <= 0:
        raise InputError(f"voxel size must be {len(axes)} positive numbers "
                         f"({','.join(a.upper() for a in axes)} in µm), got {tuple(voxel_size)}")
    per_pixel = dict(zip(axes, sizes))
    return {axis: per_pixel[axis] if unit is None else unit for axis, unit in units.items()}


def _unit(path: Path, name: str, table: Table) -> float | None:
    """µm per unit of column ``name`` (None: pixels): from its name, TrackMate's units row, or, for trackpy's
    ``x, y, z``, pixels; µm otherwise."""
    unit = _name_unit(name)
    unit = table.get(_UNITS_KEY, {}).get(name) if unit is None else unit
    if unit is None:
        return None if TRACKPY_COLUMNS & set(table) and name in AXES else 1.0
    unit = unit.strip().strip("()").strip().lower()
    if unit in PIXEL_UNITS:
        return None
    if unit not in LENGTH_UNITS_UM:
        raise InputError(f"{path}: column {name!r} is in {unit!r}, not a length unit this reader knows "
                         f"({', '.join(sorted(LENGTH_UNITS_UM))} or pixels)")
    return LENGTH_UNITS_UM[unit]


def _name_unit(name: str) -> str | None:
    """The unit a column's name carries (``x_px``: ``px``; ``y [nm]``: ``nm``), or None."""
    match = _UNIT_SUFFIX.match(name)
    return (match.group("bracket") or match.group("suffix")) if match else None


def _in_pixels(name: str) -> bool:
    """Whether column ``name``'s unit suffix is a pixel unit (``x_px``, ``z_vox``, ``y [pixel]``)."""
    unit = _name_unit(name)
    return unit is not None and unit.strip().lower() in PIXEL_UNITS


def _unit_match(name: str, axis: str) -> bool:
    match = _UNIT_SUFFIX.match(name)
    return bool(match) and match.group("axis").lower() == axis


_UNITS_KEY = "\0units"
"""Where :func:`_without_unit_rows` keeps TrackMate's units row (a key no CSV column can have)."""


def _without_unit_rows(table: Table) -> Table:
    """TrackMate 7's spot table without the three rows under its header (names, short names, units), its
    columns parsed as numbers; the units row kept under :data:`_UNITS_KEY`. Other tables are returned as
    they are."""
    frame = table.get("FRAME")
    if frame is None or frame.dtype != object or len(frame) < 3:
        return table
    if not all(str(v).strip() and _number(v) is None for v in frame[:2]):  # (the rows of names)
        return table
    parsed: Table = {}
    units = {}
    for name, column in table.items():
        units[name] = str(column[2]) if column.dtype == object else ""
        rest = column[3:]
        if column.dtype == object:
            values = np.array([_number(v) for v in rest], dtype=object)
            rest = values.astype(np.float64) if all(v is not None for v in values) else rest
        parsed[name] = rest
    parsed[_UNITS_KEY] = {name: unit for name, unit in units.items() if unit.strip("() ")}
    return parsed


def _number(text: object) -> float | None:
    """``text`` as a number (an empty cell: NaN), or None."""
    try:
        return float(str(text))
    except ValueError:
        return None if str(text).strip() else float("nan")


def _listing(table: Table) -> str:
    names = [name for name in table if name != _UNITS_KEY]
    return ", ".join(names[:12]) + (" …" if len(names) > 12 else "")
