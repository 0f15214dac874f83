"""Checks at the boundary of the core: detection tables, frame numbers, and the memory a request would need.

Each check raises :class:`tracker.errors.InputError` with one line naming what is wrong and what is accepted,
before any work is done. Tables come back cleaned: frame numbers as int64, duplicated rows dropped (with an
:class:`InputWarning`). Requests whose memory estimate exceeds what the machine can spare
(:func:`memory_budget`) are refused up front, with a value that would fit, instead of failing (or being killed)
half-way.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .errors import InputError
from .params import DetectionParams, LinkingParams, meta
from .tables import Table, spatial_axes, table_length

FRAME_LIMIT = 2**31
"""Frame numbers must satisfy ``|frame| < FRAME_LIMIT`` (int32 range): larger ones are corrupt input, e.g. a
``1e20`` that a cast to int64 would silently wrap."""

CANDIDATE_BYTES = 140
"""Peak memory (bytes) of :func:`tracker.linking.link_detections` per candidate link of its largest frame pair:
137 measured with ``tracemalloc`` on 3 frames of 1,500 and of 3,000 uniform random points, with a gate that makes
every pair a candidate (``solver="scipy"``; the same with the defaults and with smoothing and gap closing off)."""

DETECTION_BYTES_PER_VOXEL = 48
"""Peak memory (bytes) of :func:`tracker.detect.detect_spots` per voxel of a frame on the CPU: 18-46 measured
with ``tracemalloc`` on uint16 Poisson noise of (32, 128, 128), (16, 256, 256) and (1, 512, 512) voxels."""

MEMORY_FRACTION = 0.5
"""Share of the available memory (``MemAvailable``) one request may plan for: estimates are within a factor of
two, and the rest of the process (the stack's frames, the tables) needs room too."""

_GIB = 1024**3


class InputWarning(UserWarning):
    """Input that was accepted with a change or a doubt (duplicated rows dropped, a voxel size assumed)."""


def available_memory() -> int:
    """Bytes of memory available to a new allocation: Linux's ``MemAvailable``, else the physical memory."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 8 * _GIB  # (no way to know: a laptop's)


def memory_budget() -> int:
    """Bytes one request may plan for: :data:`MEMORY_FRACTION` of :func:`available_memory`."""
    return int(MEMORY_FRACTION * available_memory())


def format_bytes(n_bytes: float) -> str:
    """``"1.5 GiB"``, ``"300 MiB"``, ``"12 KiB"``."""
    for unit, size in (("TiB", 1024**4), ("GiB", _GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return f"{int(n_bytes)} bytes"


def check_memory(n_bytes: float, what: str, hint: str, budget: int | None = None) -> None:
    """Refuse (:class:`InputError`) a request estimated to need ``n_bytes``, more than ``budget``.

    ``what`` names the request ("a frame of 2000 × 2000 × 2000 voxels"), ``hint`` what to change.
    """
    budget = memory_budget() if budget is None else budget
    if n_bytes > budget:
        raise InputError(f"{what} would need about {format_bytes(n_bytes)} of memory, more than the "
                         f"{format_bytes(budget)} this machine can spare: {hint}")


def check_detections(table: Mapping[str, np.ndarray], what: str = "detections", *,
                     drop_duplicates: bool = True) -> Table:
    """A detections (or tracks) table checked at the boundary: whole frame numbers, finite positions, no duplicates.

    Parameters
    ----------
    table : Table or pandas.DataFrame
        ``frame`` and ``z, y, x`` (µm; ``y, x`` for 2D tables), other columns carried over.
    what : str
        How messages name the table (a file name, "detections").
    drop_duplicates : bool
        Rows with the same frame and position as an earlier row are dropped with an :class:`InputWarning`
        (they would become parallel duplicate tracks); False keeps them (tracks of a tracks file may share
        points).

    Returns
    -------
    Table
        A new table (a dict of arrays): ``frame`` as int64, positions as float64, the other columns as given, rows
        in their order.

    Raises
    ------
    InputError
        A missing column, columns of different lengths, a frame number that is not a whole number below
        :data:`FRAME_LIMIT` in magnitude (0.5, NaN, 1e20), or a position that is not a finite number.
    """
    checked = {name: np.asarray(table[name]) for name in table}  # (a dict, also of a pandas.DataFrame)
    axes = spatial_axes(checked)
    missing = [name for name in ("frame", *axes) if name not in checked]
    if missing:
        raise InputError(f"{what} is missing column(s): {', '.join(missing)}")
    try:
        n_rows = table_length(checked)
    except ValueError as error:
        raise InputError(f"{what}: {error}") from None
    checked["frame"] = _frame_numbers(checked["frame"], what)
    for name in axes:
        column = _numbers(checked[name], what, name)
        bad = ~np.isfinite(column)
        if bad.any():
            raise InputError(f"{what}: column {name!r} has missing or non-finite values "
                             f"(first at row {int(np.argmax(bad)) + 1})")
        checked[name] = column
    if drop_duplicates and n_rows > 1:
        duplicate = _repeated_rows([checked[name] for name in ("frame", *axes)])
        if duplicate.any():
            warnings.warn(f"{what}: {int(duplicate.sum())} duplicated row(s) (the same frame and position as an "
                          f"earlier row, first at row {int(np.argmax(duplicate)) + 1}) dropped", InputWarning,
                          stacklevel=2)
            keep = ~duplicate
            checked = {name: np.asarray(column)[keep] for name, column in checked.items()}
    return checked


def _numbers(column: np.ndarray, what: str, name: str) -> np.ndarray:
    if column.dtype.kind not in "iuf":
        try:
            return column.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{what}: column {name!r} must hold numbers") from None
    return column.astype(np.float64, copy=False)


def _frame_numbers(column: np.ndarray, what: str) -> np.ndarray:
    """``column`` as int64 frame numbers; :class:`InputError` unless whole numbers of magnitude below the limit."""
    values = column if column.dtype.kind in "iu" else _numbers(column, what, "frame")
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(values.astype(np.float64))
        bad = ~(magnitude < FRAME_LIMIT) | (values != np.round(values))  # (NaN compares False: bad)
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(f"{what}: frame numbers must be whole numbers with |frame| < 2**31, got "
                         f"{values[row].item()!r} at row {row + 1}")
    return values.astype(np.int64)


def _repeated_rows(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Boolean mask of the rows equal (in every column) to an earlier row.

    A 64-bit hash of each row first: where no two hashes agree (the usual case) no row repeats, and the full
    sort (40 ms for 200k rows) is skipped (5 ms); else the rows are sorted and compared exactly."""
    mixed = np.zeros(len(columns[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k, column in enumerate(columns):
            bits = np.ascontiguousarray(column, dtype=np.float64 if column.dtype.kind == "f" else np.int64)
            bits = np.where(bits == 0, 0, bits) if column.dtype.kind == "f" else bits  # (-0.0 equals 0.0)
            mixed = (mixed ^ bits.view(np.uint64)) * np.uint64(0x9E3779B97F4A7C15 + 2 * k)
    hashes = np.sort(mixed)
    if not np.any(hashes[1:] == hashes[:-1]):
        return np.zeros(len(mixed), dtype=bool)
    order = np.lexsort(columns[::-1])  # stable: equal rows keep their order, the earliest first
    same = np.ones(len(order) - 1, dtype=bool)
    for column in columns:
        ordered = column[order]
        same &= ordered[1:] == ordered[:-1]
    repeated = np.zeros(len(order), dtype=bool)
    repeated[order[1:][same]] = True
    return repeated


def gate_candidates(detections: Mapping[str, np.ndarray], max_displacement_um: float, *,
                    frame_counts: np.ndarray | None = None) -> tuple[float, int, int]:
    """Estimated candidate links of the largest consecutive frame pair within the gate ``max_displacement_um``.

    Points are taken as spread uniformly over the bounding box of all of them; a point's candidates are the next
    frame's points inside the cube of side ``2 max_displacement_um`` around it (within the box): at most
    6/π ≈ 1.9 times the points in the gate's ball (1.0-1.7 times on uniform points, ``tests/test_validation.py``).

    ``frame_counts`` (the points of each frame with points, in frame order), where given, stands for the table's
    frames, and ``detections`` need only hold its extreme positions (:class:`tracker.linking.gate.GateInputs`).

    Returns
    -------
    candidates : float
        Estimated candidates of the frame pair with the most.
    n_first, n_second : int
        Points in that pair's two frames.
    """
    if frame_counts is None:
        _, counts = np.unique(np.asarray(detections["frame"]), return_counts=True)
    else:
        counts = np.asarray(frame_counts)
    if len(counts) == 0:
        return 0.0, 0, 0
    if len(counts) < 2:
        return 0.0, int(counts[0]), 0
    pairs = counts[:-1].astype(np.float64) * counts[1:]
    worst = int(np.argmax(pairs))
    return float(pairs[worst]) * _gate_fraction(detections, max_displacement_um), int(counts[worst]), int(
        counts[worst + 1])


def _extents(detections: Mapping[str, np.ndarray]) -> np.ndarray:
    positions = [np.asarray(detections[name], dtype=np.float64) for name in spatial_axes(detections)]
    return np.array([float(p.max() - p.min()) for p in positions])


def _gate_fraction(detections: Mapping[str, np.ndarray], radius: float, extents: np.ndarray | None = None) -> float:
    extents = _extents(detections) if extents is None else extents
    # Two points uniform on [0, e] are closer than r with probability 1 - (1 - r/e)² (r <= e).
    return float(np.prod([1.0 - (1.0 - min(1.0, radius / e)) ** 2 if e > 0 else 1.0 for e in extents]))


def check_gate(detections: Mapping[str, np.ndarray], max_displacement_um: float, *,
               budget: int | None = None) -> None:
    """Refuse (:class:`InputError`) a gate whose candidate links (:func:`gate_candidates`) cannot fit in memory.

    The message gives the largest ``max_displacement_um`` that would fit (the gate should be a few times the
    largest step between frames, usually far below that).
    """
    budget = memory_budget() if budget is None else budget
    candidates, n_first, n_second = gate_candidates(detections, max_displacement_um)
    if candidates * CANDIDATE_BYTES <= budget:
        return
    extents = _extents(detections)
    allowed = budget / (CANDIDATE_BYTES * n_first * n_second)  # the largest gate fraction that fits
    low, high = 0.0, float(max_displacement_um)
    for _ in range(60):  # bisection: the fraction grows with the radius
        middle = 0.5 * (low + high)
        low, high = (middle, high) if _gate_fraction(detections, middle, extents) <= allowed else (low, middle)
    suggestion = _round_down(low)
    flag = meta(LinkingParams, "max_displacement_um").cli
    raise InputError(f"{flag} {max_displacement_um:g} µm admits about {candidates:.2g} candidate links between "
                     f"two frames of {n_first} and {n_second} points, ~{format_bytes(candidates * CANDIDATE_BYTES)} "
                     f"of memory, more than the {format_bytes(budget)} this machine can spare: give {flag} "
                     f"{suggestion:.2g} or less (a few times the largest step between frames)")


def _round_down(value: float) -> float:
    """``value`` rounded down to two significant digits."""
    if value <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    return math.floor(value / scale) * scale


def check_detection_scale(frame_shape: Sequence[int], voxel_size_um: Sequence[float],
                          spot_radius_um: float | Sequence[float], *, budget: int | None = None) -> None:
    """Refuse a spot radius and voxel size that imply an absurd filter, or a frame too large to filter in memory.

    The spot radius in voxels (along every axis of more than one plane) must not exceed the volume's size: a
    voxel size in the wrong unit (``1e-9`` for nanometres in metres) would otherwise ask for filters of
    billions of voxels. A spot under half a voxel along every axis cannot be told from noise: an
    :class:`InputWarning`.

    Parameters
    ----------
    frame_shape : (Z, Y, X) ints
    voxel_size_um : (3,) floats
    spot_radius_um : float, (3,) or, for a single-plane frame, (2,) floats
    budget : int, optional
        Bytes the detection of one frame may use (default :func:`memory_budget`).

    Raises
    ------
    InputError
        One line naming ``--spot-radius`` and ``--voxel-size``, or the frame's size.
    """
    from .detect import radius_per_axis  # (scipy.spatial: not for every importer of this module)

    shape = [int(n) for n in frame_shape]
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    radius_flag = meta(DetectionParams, "spot_radius_um").cli
    try:
        radius = radius_per_axis(spot_radius_um, shape)  # (y, x) of a single-plane frame included
    except ValueError as error:
        raise InputError(f"{radius_flag}: {error}") from None
    in_voxels = radius / voxel
    filtered = [axis for axis in range(3) if shape[axis] > 1]
    for axis in filtered:
        if in_voxels[axis] > shape[axis]:
            raise InputError(
                f"{radius_flag} {radius[axis]:g} µm is {in_voxels[axis]:.3g} voxels along {'zyx'[axis]} at a voxel "
                f"size of {voxel[axis]:g} µm, more than the volume's {shape[axis]} voxels: check {radius_flag} and "
                f"--voxel-size (both in µm)")
    if filtered and all(in_voxels[axis] < 0.5 for axis in filtered):
        warnings.warn(f"{radius_flag} {_numbers_text(radius)} µm is under half a voxel (voxel size "
                      f"{_numbers_text(voxel)} µm): spots that small cannot be told from noise; check "
                      f"{radius_flag} and --voxel-size (both in µm)", InputWarning, stacklevel=2)
    check_memory(math.prod(shape) * DETECTION_BYTES_PER_VOXEL,
                 f"detecting spots in a frame of {' × '.join(map(str, shape))} voxels",
                 "crop or bin the stack", budget)


def _numbers_text(values: np.ndarray) -> str:
    """``"0.5"`` for equal values, ``"0.8,0.3,0.3"`` otherwise (as the options take them)."""
    return f"{values[0]:g}" if np.all(values == values[0]) else ",".join(f"{v:g}" for v in values)
