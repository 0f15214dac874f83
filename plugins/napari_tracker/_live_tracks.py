"""The live points of a tracks table whose rows may be deleted: columns, display order, per-track summary.

:class:`LiveTracks` is the read side of :class:`~napari_tracker._edits.TrackEdits`:
every row of the original table is kept with an ``alive`` mask, and views
(the live rows in ``(track_id, frame)`` order, tables, summaries) are cached
until the next change. No napari, no Qt.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._track_summary import track_summary

REQUIRED_COLUMNS = ("track_id", "frame", "z", "y", "x")
OUTPUT_COLUMNS = ("track_id", "frame", "z", "y", "x", "intensity", "quality", "link_cost", "link_confidence")
"""The columns ``track run`` writes, in its order."""
REVIEW_FLAGS = ("pinned", "reviewed")
"""Per-row review flags (see :data:`napari_tracker._edits.FLAG_COLUMNS`): not written with the tracks."""


class EditError(ValueError):
    """An edit that cannot be applied; the message is one line for the user."""


def squared_links(table: Mapping[str, np.ndarray]) -> np.ndarray:
    """Squared displacement (µm²) into each row from the previous point of its track; NaN at starts."""
    track_id = np.asarray(table["track_id"])
    frame = np.asarray(table["frame"])
    n = len(track_id)
    cost = np.full(n, np.nan)
    if n < 2:
        return cost
    order = np.lexsort((frame, track_id))
    xyz = np.column_stack([np.asarray(table[c], dtype=np.float64) for c in ("z", "y", "x")])[order]
    same = track_id[order][1:] == track_id[order][:-1]
    step = np.sum((xyz[1:] - xyz[:-1]) ** 2, axis=1)
    cost[order[1:][same]] = step[same]
    return cost


class LiveTracks:
    """A tracks table with an ``alive`` mask over its rows (z, y, x in µm).

    Parameters
    ----------
    table : mapping of column name to 1-D array
        Must hold ``track_id, frame, z, y, x``. ``link_cost`` is computed as
        squared displacement when missing.
    """

    def __init__(self, table: Mapping[str, np.ndarray]):
        missing = [c for c in REQUIRED_COLUMNS if c not in table]
        if missing:
            raise EditError(f"tracks table is missing column(s): {', '.join(missing)}")
        columns = {name: np.array(column, copy=True) for name, column in table.items()}
        lengths = {len(c) for c in columns.values()}
        if len(lengths) > 1:
            raise EditError(f"tracks table columns have different lengths: {sorted(lengths)}")
        columns["track_id"] = columns["track_id"].astype(np.int64)
        columns["frame"] = columns["frame"].astype(np.int64)
        for name in ("z", "y", "x"):
            columns[name] = columns[name].astype(np.float64)
        if "link_cost" not in columns:
            columns["link_cost"] = squared_links(columns)
        else:
            columns["link_cost"] = columns["link_cost"].astype(np.float64)
        if "link_confidence" in columns:
            columns["link_confidence"] = columns["link_confidence"].astype(np.float64)
        self._columns = columns
        self._n = len(columns["track_id"])
        self._alive = np.ones(self._n, dtype=bool)
        self._xyz = np.column_stack([columns["z"], columns["y"], columns["x"]])
        self.version = 0
        """Increases with every change; views cache on it."""
        self._cache: dict[str, object] = {}

    # ------------------------------------------------------------------ views

    @property
    def n_rows(self) -> int:
        """Rows of the original table, deleted ones included (row indices run up to this)."""
        return self._n

    def column(self, name: str) -> np.ndarray:
        """A column over *all* rows (deleted included), indexed by row; read-only by convention."""
        if name == "alive":
            return self._alive
        return self._columns[name]

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    def rows(self) -> np.ndarray:
        """Row indices of the live points, sorted by ``(track_id, frame)`` (the display order)."""
        rows = self._cache.get("rows")
        if rows is None:
            alive = np.flatnonzero(self._alive)
            order = np.lexsort((self._columns["frame"][alive], self._columns["track_id"][alive]))
            rows = alive[order]
            self._cache["rows"] = rows
        return rows  # type: ignore[return-value]

    def table(self, columns: list[str] | tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
        """The live points as a table sorted by ``(track_id, frame)``."""
        rows = self.rows()
        names = columns if columns is not None else list(self._columns)
        return {name: self._columns[name][rows] for name in names if name in self._columns}

    def output_table(self) -> dict[str, np.ndarray]:
        """The live points in the column set and row order that ``track run`` writes (the review's flags stay in
        its session file)."""
        table = self.table()
        order = np.lexsort((table["track_id"], table["frame"]))
        names = [c for c in OUTPUT_COLUMNS if c in table] + [c for c in table
                                                             if c not in OUTPUT_COLUMNS and c not in REVIEW_FLAGS]
        return {name: table[name][order] for name in names}

    def track_ids(self) -> np.ndarray:
        """Sorted ids of the live tracks."""
        return np.unique(self._columns["track_id"][self.rows()])

    def track_rows(self, track_id: int) -> np.ndarray:
        """Rows of one track sorted by frame (empty if there is no such track)."""
        rows = self.rows()
        ids = self._columns["track_id"][rows]
        lo, hi = np.searchsorted(ids, [track_id, track_id + 1])
        return rows[lo:hi]

    def point_at(self, track_id: int, frame: int) -> int | None:
        """Row of ``track_id``'s point in ``frame``, if any."""
        rows = self.track_rows(track_id)
        hit = rows[self._columns["frame"][rows] == frame]
        return int(hit[0]) if len(hit) else None

    def predecessor_rows(self) -> np.ndarray:
        """For every row, the row of the previous live point of its track (-1: a start, or a deleted row);
        cached until the next change (read-only by convention)."""
        out = self._cache.get("predecessor_rows")
        if out is None:  # (from the cached display order, by track then frame: no sort of its own)
            rows = self.rows()
            ids = self._columns["track_id"][rows]
            same = ids[1:] == ids[:-1]
            out = np.full(self._n, -1, dtype=np.int64)
            out[rows[1:][same]] = rows[:-1][same]
            self._cache["predecessor_rows"] = out
        return out  # type: ignore[return-value]

    def summary(self) -> dict[str, np.ndarray]:
        """One row per live track (see :func:`~napari_tracker._track_summary.track_summary`)."""
        if "summary" not in self._cache:
            rows = self.rows()
            self._cache["summary"] = track_summary(self._columns["track_id"][rows], self._columns["frame"][rows],
                                                   self._xyz[rows], self._columns["link_cost"][rows])
        return self._cache["summary"]  # type: ignore[return-value]

    def per_point(self, name: str) -> np.ndarray:
        """A per-track summary column broadcast to the live points (display order)."""
        summary = self.summary()
        rows = self.rows()
        ids = self._columns["track_id"][rows]
        index = np.searchsorted(summary["track_id"], ids)
        return np.asarray(summary[name])[index]

    def _changed(self) -> None:
        self.version += 1
        self._cache.clear()
