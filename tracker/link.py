"""Linking detections into trajectories, one frame pair at a time.

For every pair of consecutive frames the gated costs of :mod:`tracker.costs`
and the "no link" alternative make one assignment problem, solved exactly by
:func:`tracker.lap.solve_gated`; the chosen links are chained into tracks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from . import lap
from .costs import DEFAULT_NO_LINK_FACTOR, gated_links, no_link_cost
from .tables import Table, positions_um, require_columns, sort_table, table_length

ProgressCallback = Callable[[str, int, int], None]


def link_detections(
    detections: Mapping[str, np.ndarray],
    max_displacement_um: float,
    *,
    no_link_factor: float = DEFAULT_NO_LINK_FACTOR,
    solver: str = "auto",
    progress: ProgressCallback | None = None,
) -> Table:
    """Link detections of consecutive frames into tracks.

    Parameters
    ----------
    detections : Table
        At least ``frame`` and ``z, y, x`` (µm); other columns are carried
        over. Frames need not be contiguous: a missing frame ends all tracks.
    max_displacement_um : float
        Gate: the largest displacement between consecutive frames (µm).
    no_link_factor : float
        "No link" cost as a multiple of the largest candidate cost.
    solver : str
        Assignment solver (see :func:`tracker.lap.available_solvers`).
    progress : callable, optional
        Called as ``progress("link", done, total)`` after each frame pair.

    Returns
    -------
    Table
        The detections with ``track_id`` first and ``link_cost`` (µm², the
        cost of the link into each point; NaN where a track starts), sorted by
        ``track_id, frame``. Track ids are 0, 1, … in order of first
        appearance, so the same input always gives the same table.
    """
    require_columns(detections, ("frame", "z", "y", "x"), what="detections")
    table = sort_table(dict(detections), ["frame"])
    n = table_length(table)
    frames = np.asarray(table["frame"], dtype=np.int64)
    positions = positions_um(table)
    predecessor = np.full(n, -1, dtype=np.int64)
    link_cost = np.full(n, np.nan)

    frame_values, starts = np.unique(frames, return_index=True)
    bounds = np.append(starts, n)
    n_pairs = max(len(frame_values) - 1, 0)
    for k in range(n_pairs):
        if frame_values[k + 1] == frame_values[k] + 1:
            a = slice(bounds[k], bounds[k + 1])
            b = slice(bounds[k + 1], bounds[k + 2])
            rows, cols, costs = link_frame_pair(
                positions[a], positions[b], max_displacement_um, no_link_factor=no_link_factor, solver=solver
            )
            predecessor[b.start + cols] = a.start + rows
            link_cost[b.start + cols] = costs
        if progress is not None:
            progress("link", k + 1, n_pairs)

    carried = {name: column for name, column in table.items() if name not in ("track_id", "link_cost")}
    table = {"track_id": track_ids_from_predecessors(predecessor), **carried, "link_cost": link_cost}
    return sort_table(table, ["track_id", "frame"])


def link_frame_pair(
    source_um: np.ndarray,
    target_um: np.ndarray,
    max_displacement_um: float,
    *,
    no_link_factor: float = DEFAULT_NO_LINK_FACTOR,
    solver: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Optimal links between two frames.

    Returns
    -------
    rows, cols : int64 arrays
        Linked source and target indices.
    cost : float64 array
        Cost (µm²) of each link.
    """
    rows, cols, cost = gated_links(source_um, target_um, max_displacement_um)
    if rows.size == 0:
        return rows, cols, cost
    alternative = no_link_cost(cost, max_displacement_um, no_link_factor)
    chosen_rows, chosen_cols = lap.solve_gated(
        rows, cols, cost, (len(source_um), len(target_um)), alternative, solver=solver
    )
    # Edges are sorted by (row, col): find each chosen edge's cost.
    index = np.searchsorted(rows * len(target_um) + cols, chosen_rows * len(target_um) + chosen_cols)
    return chosen_rows, chosen_cols, cost[index]


def track_ids_from_predecessors(predecessor: np.ndarray) -> np.ndarray:
    """Track id of every point from its predecessor index (-1 at a start).

    Points must be ordered so that a predecessor comes first; ids number the
    starts in order. Pointer jumping makes this O(n log L) for tracks of
    length L, without a Python loop over points.
    """
    n = len(predecessor)
    head = np.where(predecessor < 0, np.arange(n), predecessor)
    while True:
        jumped = head[head]
        if np.array_equal(jumped, head):
            break
        head = jumped
    _, track_id = np.unique(head, return_inverse=True)
    return track_id.astype(np.int64)
