"""Hand corrections of a tracks table, with undo and redo. No napari, no Qt.

:class:`TrackEdits` holds a tracks table (``track_id, frame, z, y, x`` in µm,
plus any other columns such as ``intensity, quality, link_cost,
link_confidence``) and applies the corrections a reviewer makes:

* :meth:`~TrackEdits.delete_track` (and :meth:`~TrackEdits.delete_point`),
* :meth:`~TrackEdits.split_track` at a frame (that frame starts a new track),
* :meth:`~TrackEdits.join_tracks` (the end of one track to the start of another),
* :meth:`~TrackEdits.reassign_point` to another track (swapping with that
  track's point in the same frame, if it has one) or to a new track.

Reading (live rows, tables, per-track summary) is :class:`~napari_tracker._live_tracks.LiveTracks`'s part.
Rows are never physically removed: the model keeps every row of the original
table and an ``alive`` mask, and every edit is recorded as the few cells it
changed (``track_id``, ``alive``, ``link_cost``, ``link_confidence``), so an
edit and its undo cost O(rows touched) plus one vectorised pass, whatever
the size of the table (100k points: milliseconds).

What an edit does to the links (costs, confidences, review flags of the links
it makes or breaks) is :mod:`~napari_tracker._link_changes`'s; links an edit
does not touch keep their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ._link_changes import changed_links, link_cells, track_links
from ._live_tracks import REVIEW_FLAGS, EditError, LiveTracks

FLAG_COLUMNS = REVIEW_FLAGS
"""Per-row review flags of the link *into* the row: a reviewer pinned it (a re-solve keeps it), or looked at it.
Added on first use; an edit that changes the link clears them."""

@dataclass
class Edit:
    """One recorded edit: the cells it changed (column, rows, old values, new values)."""

    description: str
    changes: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    selection: tuple[int | None, int | None] = (None, None)
    """``(track_id, row)`` a viewer should select after applying the edit."""
    forbid: list[tuple[int, int]] = field(default_factory=list)
    """Links ``(source row, target row)`` the edit forbade (see :attr:`TrackEdits.forbidden`)."""


class TrackEdits(LiveTracks):
    """A tracks table under review: edits and undo/redo over :class:`~napari_tracker._live_tracks.LiveTracks`.

    Parameters
    ----------
    table : mapping of column name to 1-D array
        Must hold ``track_id, frame, z, y, x``. ``link_cost`` is computed as
        squared displacement when missing.
    max_undo : int
        How many edits the undo history keeps.
    """

    def __init__(self, table: Mapping[str, np.ndarray], max_undo: int = 1000):
        super().__init__(table)
        self._next_id = int(self._columns["track_id"].max()) + 1 if self._n else 0
        self._undo: list[Edit] = []
        self._redo: list[Edit] = []
        self._max_undo = max_undo
        self.forbidden: set[tuple[int, int]] = set()
        """Links ``(source row, target row)`` a reviewer marked wrong: a re-solve never makes them."""

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
        self.forbidden.difference_update(edit.forbid)
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
        self.forbidden.update(edit.forbid)
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

    def change_cells(self, description: str, cells: Mapping[str, tuple[np.ndarray, np.ndarray]], *,
                     forbid: list[tuple[int, int]] | None = None,
                     selection: tuple[int | None, int | None] = (None, None)) -> Edit:
        """Set ``cells`` (column name -> ``(rows, new values)``; a missing ``pinned`` or ``reviewed`` column is
        added, all False) and forbid links, as one edit. The caller keeps ``link_cost`` and
        ``link_confidence`` consistent with the links it changes (a re-solve brings its own)."""
        edit = Edit(description, selection=selection, forbid=[(int(a), int(b)) for a, b in (forbid or [])])
        for name, (rows, values) in cells.items():
            if name not in self._columns:
                if name not in FLAG_COLUMNS:
                    raise EditError(f"no column {name!r}")
                self._columns[name] = np.zeros(self._n, dtype=bool)
            rows = np.asarray(rows, dtype=np.int64)
            values = np.asarray(values, dtype=self._columns[name].dtype)
            edit.changes.append((name, rows, self._columns[name][rows].copy(), values))
            self._columns[name][rows] = values
        self.forbidden.update(edit.forbid)
        self._push(edit)
        return edit

    def new_id(self) -> int:
        """A track id no row has had."""
        return self._new_id()

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
        ids, frame = self._columns["track_id"], self._columns["frame"]
        affected = np.unique(np.concatenate([ids[rows], track_id if track_id is not None else []]).astype(np.int64))
        before = track_links(ids, frame, self._alive & np.isin(ids, affected))
        edit = Edit(description, selection=selection)
        if track_id is not None:
            edit.changes.append(("track_id", rows, ids[rows].copy(), np.asarray(track_id, dtype=np.int64)))
            ids[rows] = track_id
        if alive is not None:
            edit.changes.append(("alive", rows, self._alive[rows].copy(), np.asarray(alive, dtype=bool)))
            self._alive[rows] = alive
        target, source = changed_links(before, track_links(ids, frame, self._alive & np.isin(ids, affected)), self._n)
        if len(target):
            for name, values in link_cells(self._columns, self._xyz, target, source).items():
                edit.changes.append((name, target, self._columns[name][target].copy(), values))
                self._columns[name][target] = values
        self._push(edit)
        return edit

    def _push(self, edit: Edit) -> None:
        self._undo.append(edit)
        del self._undo[: -self._max_undo]
        self._redo.clear()
        self._changed()
