"""A reviewer's decisions on single links: accept (pin), reject (forbid and re-solve around it), pin a track.

Each decision is one edit of :class:`~napari_tracker._edits.TrackEdits` (one undo step). A rejection forbids
the link and re-solves the frame pairs around it with :func:`tracker.linking.relink` (through
:mod:`tracker.lap`, on the GPU where present), the review's earlier pins and forbids as constraints; the
re-solve's new track ids, link costs and confidences are the cells the edit changes. No napari, no Qt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ._edits import Edit, EditError, TrackEdits

RELINK_OPTIONS = ("max_displacement_um", "max_gap", "persistence", "no_link_factor", "solver")
"""The run's linking parameters a re-solve takes over (the rest are :func:`tracker.linking.relink`'s defaults)."""


def relink_options(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments of :func:`tracker.linking.relink` among a run's ``parameters`` (None values left
    out: the re-solve then takes them from the tracks)."""
    return {k: v for k, v in (parameters or {}).items() if k in RELINK_OPTIONS and v is not None}


class LinkDecisions:
    """Accept, reject and pin links of ``edits``; ``options`` go to :func:`tracker.linking.relink`.

    A link is named by its target row (the link *into* that point from the previous point of its track).
    """

    def __init__(self, edits: TrackEdits, options: Mapping[str, Any] | None = None):
        self.edits = edits
        self.options = dict(options or {})
        self.last_relink_s = 0.0
        """Seconds the last re-solve took (the relink call and the edit)."""

    def source_of(self, row: int) -> int:
        """The row linked into ``row``; :class:`EditError` where ``row`` starts its track."""
        source = int(self.edits.predecessor_rows()[int(row)])
        if source < 0:
            raise EditError("this point starts its track: there is no link into it to decide on")
        return source

    def _describe(self, row: int) -> str:
        column = self.edits.column
        return f"track {int(column('track_id')[row])} frame {int(column('frame')[row])}"

    def accept(self, row: int) -> Edit:
        """Pin the link into ``row`` (a re-solve keeps it) and mark it reviewed."""
        self.source_of(row)
        rows = np.array([int(row)])
        return self.edits.change_cells(f"accept link into {self._describe(row)}",
                                       {"pinned": (rows, [True]), "reviewed": (rows, [True])},
                                       selection=(int(self.edits.column("track_id")[row]), int(row)))

    def pin_track(self, track_id: int) -> Edit:
        """Pin (and mark reviewed) every link of a track."""
        rows = self.edits.track_rows(int(track_id))
        if len(rows) < 2:
            raise EditError(f"track {track_id} has no links to pin" if len(rows) else f"there is no track {track_id}")
        links = rows[1:]
        flags = np.ones(len(links), dtype=bool)
        return self.edits.change_cells(f"pin the {len(links)} links of track {track_id}",
                                       {"pinned": (links, flags), "reviewed": (links, flags)},
                                       selection=(int(track_id), None))

    def reject(self, row: int) -> Edit:
        """Forbid the link into ``row`` and re-solve the frame pairs around it (one edit)."""
        import time

        start = time.perf_counter()
        source = self.source_of(row)
        edit = self._relink(f"reject link into {self._describe(row)}", (source, int(row)))
        self.last_relink_s = time.perf_counter() - start
        return edit

    def _relink(self, description: str, forbid: tuple[int, int]) -> Edit:
        from tracker.linking import relink

        edits = self.edits
        live = edits.rows()
        position = np.full(edits.n_rows, -1, dtype=np.int64)
        position[live] = np.arange(len(live))
        predecessor = edits.predecessor_rows()
        names = [n for n in ("track_id", "frame", "z", "y", "x", "link_cost", "link_confidence")
                 if n in edits.column_names]
        table = {name: edits.column(name)[live] for name in names}
        pinned_rows = live[edits.column("pinned")[live] & (predecessor[live] >= 0)] \
            if "pinned" in edits.column_names else np.empty(0, dtype=np.int64)
        pinned = np.column_stack([position[predecessor[pinned_rows]], position[pinned_rows]])
        forbidden = [(position[a], position[b]) for a, b in edits.forbidden | {forbid}
                     if position[a] >= 0 and position[b] >= 0]
        around = [(position[forbid[0]], position[forbid[1]])]
        try:
            out = relink(table, pinned=pinned, forbidden=forbidden, around=around, **self.options)
        except ValueError as error:  # (said to the reviewer, as edits' errors are)
            raise EditError(f"cannot re-solve: {error}") from error
        return self._commit(description, live, table, out, forbid)

    def _commit(self, description: str, live: np.ndarray, before: dict[str, np.ndarray],
                after: dict[str, np.ndarray], forbid: tuple[int, int]) -> Edit:
        """The re-solve's changes to ``live`` rows as one edit; new track pieces get fresh ids of the model."""
        edits = self.edits
        solved = np.asarray(after["track_id"], dtype=np.int64)
        new_ids = solved.copy()
        fresh = np.unique(solved[~np.isin(solved, before["track_id"])])
        for value in fresh:  # (relink numbers new pieces above the live ids; the model knows deleted ones too)
            new_ids[solved == value] = edits.new_id()  # (looked up in relink's ids: a new id may equal a later one)
        cells: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, values in (("track_id", new_ids), ("link_cost", after["link_cost"]),
                             ("link_confidence", after["link_confidence"])):
            if name not in before:
                continue
            old = before[name]
            differ = ~((old == values) | (np.isnan(old) & np.isnan(values))) if old.dtype.kind == "f" \
                else old != values
            if np.any(differ):
                cells[name] = (live[differ], np.asarray(values)[differ])
        # The links that changed: the previous point of the track (by position in ``live``) differs.
        frames = edits.column("frame")[live]
        changed = _previous(before["track_id"], frames) != _previous(new_ids, frames)
        if "reviewed" in edits.column_names:  # a link the re-solve changed is a new one: not reviewed yet
            redo = live[changed & edits.column("reviewed")[live] & ~_flag(edits, "pinned", live)]
            if len(redo):
                cells["reviewed"] = (redo, np.zeros(len(redo), dtype=bool))
        row = int(forbid[1])
        n_changed = int(np.count_nonzero(changed))
        track = cells["track_id"][1][cells["track_id"][0] == row] if "track_id" in cells else []
        track = int(track[0]) if len(track) else int(edits.column("track_id")[row])
        return edits.change_cells(f"{description} (re-solved: {n_changed} link{'s' * (n_changed != 1)} changed)",
                                  cells, forbid=[forbid], selection=(track, row))


def _previous(track_id: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """For each point, the index of the previous point of its track (-1 at a start)."""
    order = np.lexsort((frames, track_id))
    same = track_id[order][1:] == track_id[order][:-1]
    previous = np.full(len(track_id), -1, dtype=np.int64)
    previous[order[1:][same]] = order[:-1][same]
    return previous


def _flag(edits: TrackEdits, name: str, rows: np.ndarray) -> np.ndarray:
    return edits.column(name)[rows] if name in edits.column_names else np.zeros(len(rows), dtype=bool)
