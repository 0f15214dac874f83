"""Hand corrections of a tracks table, with undo and redo. No napari, no Qt.

:class:`TrackEdits` holds a tracks table (``track_id, frame, z, y, x`` in µm,
plus any other columns such as ``intensity, quality, link_cost,
link_confidence``) and applies the corrections a reviewer makes:

* :meth:`~TrackEdits.delete_track` (and :meth:`~TrackEdits.delete_point`),
* :meth:`~TrackEdits.split_track` at a frame (that frame starts a new track),
* :meth:`~TrackEdits.join_tracks` (the end of one track to the start of another),
* :meth:`~TrackEdits.reassign_point` to another track (swapping with that
  track's point in the same frame, if it has one) or to a new track.

Rows are never physically removed: the model keeps every row of the original
table and an ``alive`` mask, and every edit is recorded as the few cells it
changed (``track_id``, ``alive``, ``link_cost``, ``link_confidence``), so an
edit and its undo cost O(rows touched) plus one vectorised pass, whatever
the size of the table (100k points: milliseconds).

Links that an edit creates get ``link_cost`` = squared displacement (µm²,
the linker's cost without a motion model) and ``link_confidence`` = 1 (a
person made them); points that an edit makes a track start get NaN in both,
as the linker writes them. Links an edit does not touch keep their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

REQUIRED_COLUMNS = ("track_id", "frame", "z", "y", "x")
OUTPUT_COLUMNS = ("track_id", "frame", "z", "y", "x", "intensity", "quality", "link_cost", "link_confidence")
"""The columns ``track run`` writes, in its order."""


class EditError(ValueError):
    """An edit that cannot be applied; the message is one line for the user."""


@dataclass
class Edit:
    """One recorded edit: the cells it changed (column, rows, old values, new values)."""

    description: str
    changes: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    selection: tuple[int | None, int | None] = (None, None)
    """``(track_id, row)`` a viewer should select after applying the edit."""


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


class TrackEdits:
    """A tracks table under review: edits, undo/redo, per-track summaries.

    Parameters
    ----------
    table : mapping of column name to 1-D array
        Must hold ``track_id, frame, z, y, x``. ``link_cost`` is computed as
        squared displacement when missing.
    max_undo : int
        How many edits the undo history keeps.
    """

    def __init__(self, table: Mapping[str, np.ndarray], max_undo: int = 1000):
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
        self._next_id = int(columns["track_id"].max()) + 1 if self._n else 0
        self._undo: list[Edit] = []
        self._redo: list[Edit] = []
        self._max_undo = max_undo
        self.version = 0
        """Increases with every change (edit, undo, redo); views cache on it."""
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
        """The live points in the column set and row order that ``track run`` writes."""
        table = self.table()
        order = np.lexsort((table["track_id"], table["frame"]))
        names = [c for c in OUTPUT_COLUMNS if c in table] + [c for c in table if c not in OUTPUT_COLUMNS]
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

    def summary(self) -> dict[str, np.ndarray]:
        """One row per live track.

        Columns: ``track_id``, ``length`` (points), ``start``, ``end`` (frames),
        ``mean_speed`` (µm per frame: path length / frames spanned, NaN for a
        single point), ``mean_link_cost``, ``max_link_cost`` (µm², NaN
        without links), ``worst_frame`` (the frame the costliest link leads
        into; the start without links).
        """
        cached = self._cache.get("summary")
        if cached is not None:
            return cached  # type: ignore[return-value]
        rows = self.rows()
        ids = self._columns["track_id"][rows]
        frames = self._columns["frame"][rows]
        if len(rows) == 0:
            empty_f = np.empty(0)
            empty_i = np.empty(0, np.int64)
            result = {"track_id": empty_i, "length": empty_i, "start": empty_i, "end": empty_i,
                      "mean_speed": empty_f, "mean_link_cost": empty_f, "max_link_cost": empty_f,
                      "worst_frame": empty_i}
            self._cache["summary"] = result
            return result
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(rows)] - 1
        length = ends - starts + 1
        xyz = self._xyz[rows]
        step = np.r_[0.0, np.linalg.norm(xyz[1:] - xyz[:-1], axis=1)]
        step[starts] = 0.0
        path = np.add.reduceat(step, starts)
        span = frames[ends] - frames[starts]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_speed = np.where(span > 0, path / np.maximum(span, 1), np.nan)
        cost = self._columns["link_cost"][rows].copy()
        cost[starts] = np.nan
        has = np.isfinite(cost)
        n_links = np.add.reduceat(has.astype(np.int64), starts)
        total = np.add.reduceat(np.where(has, cost, 0.0), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_cost = np.where(n_links > 0, total / np.maximum(n_links, 1), np.nan)
        max_cost = np.maximum.reduceat(np.where(has, cost, -np.inf), starts)
        max_cost[n_links == 0] = np.nan
        # Within each track (contiguous in ``rows``), costliest link first; ties: the earliest frame.
        worst = np.lexsort((-np.where(has, cost, -np.inf), ids))[starts]
        result = {
            "track_id": ids[starts],
            "length": length.astype(np.int64),
            "start": frames[starts],
            "end": frames[ends],
            "mean_speed": mean_speed,
            "mean_link_cost": mean_cost,
            "max_link_cost": max_cost,
            "worst_frame": frames[worst],
        }
        self._cache["summary"] = result
        return result

    def per_point(self, name: str) -> np.ndarray:
        """A per-track summary column broadcast to the live points (display order)."""
        summary = self.summary()
        rows = self.rows()
        ids = self._columns["track_id"][rows]
        index = np.searchsorted(summary["track_id"], ids)
        return np.asarray(summary[name])[index]

    # ------------------------------------------------------------------ history

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    @property
    def undo_description(self) -> str | None:
        return self._undo[-1].description if self._undo else None

    @property
    def redo_description(self) -> str | None:
        return self._redo[-1].description if self._redo else None

    @property
    def n_edits(self) -> int:
        """Edits in the undo history."""
        return len(self._undo)

    def undo(self) -> Edit:
        """Revert the last edit; returns it."""
        if not self._undo:
            raise EditError("nothing to undo")
        edit = self._undo.pop()
        for name, rows, old, _new in reversed(edit.changes):
            self._set(name, rows, old)
        self._redo.append(edit)
        self._changed()
        return edit

    def redo(self) -> Edit:
        """Apply the last undone edit again; returns it."""
        if not self._redo:
            raise EditError("nothing to redo")
        edit = self._redo.pop()
        for name, rows, _old, new in edit.changes:
            self._set(name, rows, new)
        self._undo.append(edit)
        self._changed()
        return edit

    # ------------------------------------------------------------------ edits

    def delete_track(self, track_id: int) -> Edit:
        """Remove every point of a track."""
        rows = self._require_track(track_id)
        return self._commit(f"delete track {track_id}", rows, alive=np.zeros(len(rows), bool),
                            selection=(None, None))

    def delete_point(self, row: int) -> Edit:
        """Remove one point; the points either side of it are linked directly."""
        row = self._require_row(row)
        track_id = int(self._columns["track_id"][row])
        frame = int(self._columns["frame"][row])
        return self._commit(f"delete point of track {track_id} in frame {frame}", np.array([row]),
                            alive=np.zeros(1, bool), selection=(track_id, None))

    def split_track(self, track_id: int, frame: int) -> Edit:
        """Cut a track before ``frame``: its points from ``frame`` on become a new track.

        Returns the edit; the new track's id is ``edit.selection[0]``.
        """
        rows = self._require_track(track_id)
        frames = self._columns["frame"][rows]
        after = rows[frames >= frame]
        if len(after) == 0 or len(after) == len(rows):
            raise EditError(
                f"track {track_id} spans frames {frames[0]}–{frames[-1]}: "
                f"splitting at frame {frame} leaves one part empty"
            )
        new_id = self._new_id()
        return self._commit(f"split track {track_id} at frame {frame} (new track {new_id})", after,
                            track_id=np.full(len(after), new_id), selection=(new_id, int(after[0])))

    def join_tracks(self, first: int, second: int) -> Edit:
        """Link the end of one track to the start of the other; the joined track keeps ``first``'s id.

        The track that ends first is the head, whichever order the ids come in.
        """
        if first == second:
            raise EditError("select two different tracks to join")
        rows_a = self._require_track(first)
        rows_b = self._require_track(second)
        frame = self._columns["frame"]
        if not (frame[rows_a[-1]] < frame[rows_b[0]] or frame[rows_b[-1]] < frame[rows_a[0]]):
            raise EditError(
                f"tracks {first} (frames {frame[rows_a[0]]}–{frame[rows_a[-1]]}) and {second} "
                f"(frames {frame[rows_b[0]]}–{frame[rows_b[-1]]}) overlap in time: split one first"
            )
        return self._commit(f"join tracks {first} and {second}", rows_b,
                            track_id=np.full(len(rows_b), first), selection=(first, None))

    def reassign_point(self, row: int, track_id: int | None) -> Edit:
        """Move one point into another track (``None``: a new track of its own).

        If the target track already has a point in that frame, the two points
        swap tracks (the usual fix of an identity swap between two crossing
        tracks).
        """
        row = self._require_row(row)
        source = int(self._columns["track_id"][row])
        frame = int(self._columns["frame"][row])
        if track_id is None:
            if len(self.track_rows(source)) == 1:
                raise EditError(f"the point is already a track of its own ({source})")
            new_id = self._new_id()
            return self._commit(f"detach point of track {source} in frame {frame} (new track {new_id})",
                                np.array([row]), track_id=np.array([new_id]), selection=(new_id, row))
        track_id = int(track_id)
        if track_id == source:
            raise EditError(f"the point already belongs to track {track_id}")
        if len(self.track_rows(track_id)) == 0:
            raise EditError(f"there is no track {track_id}")
        other = self.point_at(track_id, frame)
        if other is None:
            return self._commit(f"move point of track {source} in frame {frame} to track {track_id}",
                                np.array([row]), track_id=np.array([track_id]), selection=(track_id, row))
        return self._commit(
            f"swap the frame-{frame} points of tracks {source} and {track_id}",
            np.array([row, other]), track_id=np.array([track_id, source]), selection=(track_id, row),
        )

    # ------------------------------------------------------------------ internals

    def _new_id(self) -> int:
        new_id = self._next_id
        self._next_id += 1
        return new_id

    def _require_track(self, track_id: int) -> np.ndarray:
        rows = self.track_rows(int(track_id))
        if len(rows) == 0:
            raise EditError(f"there is no track {track_id}")
        return rows

    def _require_row(self, row: int) -> int:
        row = int(row)
        if not (0 <= row < self._n) or not self._alive[row]:
            raise EditError(f"there is no point {row}")
        return row

    def _set(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        if name == "alive":
            self._alive[rows] = values
        else:
            self._columns[name][rows] = values

    def _changed(self) -> None:
        self.version += 1
        self._cache.clear()

    def _predecessors(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows under ``mask`` (alive, of the affected tracks) and the row before each in its track (-1: none)."""
        rows = np.flatnonzero(mask)
        order = np.lexsort((self._columns["frame"][rows], self._columns["track_id"][rows]))
        rows = rows[order]
        ids = self._columns["track_id"][rows]
        pred = np.full(len(rows), -1, dtype=np.int64)
        same = ids[1:] == ids[:-1]
        pred[1:][same] = rows[:-1][same]
        return rows, pred

    def _commit(
        self,
        description: str,
        rows: np.ndarray,
        *,
        track_id: np.ndarray | None = None,
        alive: np.ndarray | None = None,
        selection: tuple[int | None, int | None] = (None, None),
    ) -> Edit:
        rows = np.asarray(rows, dtype=np.int64)
        ids = self._columns["track_id"]
        affected = np.unique(np.concatenate([ids[rows], track_id if track_id is not None else []]).astype(np.int64))
        before_rows, before_pred = self._predecessors(self._alive & np.isin(ids, affected))
        edit = Edit(description, selection=selection)
        if track_id is not None:
            edit.changes.append(("track_id", rows, ids[rows].copy(), np.asarray(track_id, dtype=np.int64)))
            ids[rows] = track_id
        if alive is not None:
            edit.changes.append(("alive", rows, self._alive[rows].copy(), np.asarray(alive, dtype=bool)))
            self._alive[rows] = alive
        after_rows, after_pred = self._predecessors(self._alive & np.isin(ids, affected))
        # Links into a row change where its predecessor changed.
        previous = np.full(self._n, -2, dtype=np.int64)
        previous[before_rows] = before_pred
        changed = previous[after_rows] != after_pred
        target, source = after_rows[changed], after_pred[changed]
        if len(target):
            linked = source >= 0
            cost = np.full(len(target), np.nan)
            cost[linked] = np.sum((self._xyz[target[linked]] - self._xyz[source[linked]]) ** 2, axis=1)
            old = self._columns["link_cost"][target].copy()
            edit.changes.append(("link_cost", target, old, cost))
            self._columns["link_cost"][target] = cost
            if "link_confidence" in self._columns:
                confidence = np.where(linked, 1.0, np.nan)
                old = self._columns["link_confidence"][target].copy()
                edit.changes.append(("link_confidence", target, old, confidence))
                self._columns["link_confidence"][target] = confidence
        self._undo.append(edit)
        del self._undo[: -self._max_undo]
        self._redo.clear()
        self._changed()
        return edit
