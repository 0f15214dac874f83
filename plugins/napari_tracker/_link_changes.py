"""What an edit of track ids or of deleted points does to the links, and the cells that follow from it.

A link is named by its target row (the link *into* a point from the previous point of its track). An edit
changes the links into the points whose previous point changed; those links get ``link_cost`` = squared
displacement (µm², the linker's cost without a motion model) and ``link_confidence`` = 1 (a person made them),
or NaN in both where the point now starts its track, as the linker writes them; their review flags are cleared
(a pin or review was of the link that is gone). No napari, no Qt.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._live_tracks import REVIEW_FLAGS


def track_links(track_id: np.ndarray, frame: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows under ``mask`` sorted by (track, frame), and the row before each in its track (-1: none)."""
    rows = np.flatnonzero(mask)
    rows = rows[np.lexsort((frame[rows], track_id[rows]))]
    ids = track_id[rows]
    pred = np.full(len(rows), -1, dtype=np.int64)
    same = ids[1:] == ids[:-1]
    pred[1:][same] = rows[:-1][same]
    return rows, pred


def changed_links(before: tuple[np.ndarray, np.ndarray], after: tuple[np.ndarray, np.ndarray],
                  n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The target rows whose link changed between two :func:`track_links` of the same tracks, and their new
    source rows (-1: the point now starts its track)."""
    previous = np.full(n_rows, -2, dtype=np.int64)
    previous[before[0]] = before[1]
    rows, pred = after
    changed = previous[rows] != pred
    return rows[changed], pred[changed]


def link_cells(columns: Mapping[str, np.ndarray], xyz: np.ndarray, target: np.ndarray,
               source: np.ndarray) -> dict[str, np.ndarray]:
    """New values, column by column, of the ``target`` rows whose links now come from ``source`` (-1: none)."""
    linked = source >= 0
    cost = np.full(len(target), np.nan)
    cost[linked] = np.sum((xyz[target[linked]] - xyz[source[linked]]) ** 2, axis=1)
    cells = {"link_cost": cost}
    if "link_confidence" in columns:
        cells["link_confidence"] = np.where(linked, 1.0, np.nan)
    for flag in REVIEW_FLAGS:
        if flag in columns:
            cells[flag] = np.zeros(len(target), dtype=bool)
    return cells
