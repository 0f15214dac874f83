"""Review of a Tracks layer in a napari viewer (no widgets of its own): the layer and its edit model, colours,
the selection, edits applied with undo and redo, messages.

Selection: a click (without dragging) on the canvas selects the nearest
track point in the current frame (or the nearest visible tail vertex) and
its track; the previously selected track and point are remembered, so
*join* joins the previous track to the selected one and *reassign* moves the
previously selected point into the selected track (the hand corrections are
:mod:`~napari_tracker._corrections`'s, the link decisions :mod:`~napari_tracker._link_review`'s).

The edit model of each reviewed layer (with its undo history) outlives the
review: a new review of the same layer (the dock closed and opened again)
continues it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ._edits import Edit, EditError, TrackEdits
from ._layers import COLOUR_BY, edits_of_layer, show_tracks
from ._selection_overlay import SelectionOverlay
from ._shortcuts import bind_shortcuts, unbind_shortcuts
from ._view import click_callback, current_frame, pick_row, pick_tolerance_um, show_point

if TYPE_CHECKING:
    import napari


class TrackReview:
    """Review and correction of one Tracks layer in ``viewer``.

    Parameters
    ----------
    viewer : napari.Viewer
    layer : napari.layers.Tracks, optional
        The layer to review; see :meth:`set_layer`.
    bind_keys : bool
        Bind the jump, undo and redo keys of :data:`~napari_tracker._shortcuts.SHORTCUTS` on the viewer
        (until :meth:`close`).
    """

    def __init__(self, viewer: napari.Viewer, layer=None, bind_keys: bool = True):
        self.viewer = viewer
        self.layer = None
        self.edits: TrackEdits | None = None
        self.ground_truth: dict[str, np.ndarray] | None = None
        self.correct: np.ndarray | None = None
        self.colour_by = "track"
        self.track_filter: Callable[[TrackEdits], np.ndarray | None] | None = None
        """Which live points (display order) the view hides, from the edit model (None: all shown)."""
        self.selected_track: int | None = None
        self.selected_row: int | None = None
        self.previous_track: int | None = None
        self.previous_row: int | None = None
        self.message = ""
        self.listeners: list[Callable[[str], None]] = []  # run after every change with its reason
        self.overlay = SelectionOverlay(viewer)
        self._keys = bind_shortcuts(viewer, {"jump": self.jump_to, "undo": self.undo, "redo": self.redo}) \
            if bind_keys else {}
        self._on_mouse_drag = click_callback(self._on_click)
        viewer.mouse_drag_callbacks.append(self._on_mouse_drag)
        if layer is not None:
            self.set_layer(layer)

    def close(self) -> None:
        """Detach from the viewer: mouse callback, key bindings and the selection layers go."""
        if self._on_mouse_drag in self.viewer.mouse_drag_callbacks:
            self.viewer.mouse_drag_callbacks.remove(self._on_mouse_drag)
        unbind_shortcuts(self.viewer, self._keys)
        self._keys = {}
        self.overlay.remove()
        self.listeners.clear()

    # ---------------------------------------------------------------- layer and colours

    def set_layer(self, layer) -> None:
        """Review ``layer`` (a Tracks layer), continuing its earlier review if nothing changed it since."""
        self.layer = layer
        self.clear_selection(notify=False)
        if layer is None:
            self.edits = None
            self._notify("layer")
            return
        self.edits = edits_of_layer(layer)
        if np.any(np.asarray(layer.scale) != 1) or np.any(np.asarray(layer.translate)):
            layer.scale = np.ones(layer.ndim)  # the table holds world coordinates now
            layer.translate = np.zeros(layer.ndim)
        self._update_correctness()
        self.refresh_layer()
        self.overlay.prepare(self.edits)
        self._notify("layer")

    def set_ground_truth(self, table: dict[str, np.ndarray] | None) -> None:
        """Ground truth (``track_id, frame, z, y, x`` µm, optional ``visible``) for correctness colouring."""
        self.ground_truth = table
        self._update_correctness()
        if self.ground_truth is None and self.colour_by == "ground truth":
            self.colour_by = "track"
        elif self.ground_truth is not None:
            self.colour_by = "ground truth"
        self.refresh_layer()
        self._notify("ground_truth")

    def set_colour_by(self, mode: str) -> None:
        """One of :data:`~napari_tracker._layers.COLOUR_BY` ("ground truth" needs a ground truth)."""
        if mode not in COLOUR_BY:
            raise ValueError(f"colour by one of {', '.join(COLOUR_BY)}, not {mode!r}")
        if mode == "ground truth" and self.correct is None:
            raise ValueError("load a ground truth to colour by correctness")
        self.colour_by = mode
        if self.layer is not None:
            self.layer.color_by = COLOUR_BY[mode]
        self._notify("colour")

    def refresh_layer(self) -> None:
        """Push the edit model's live points into the Tracks layer."""
        if self.layer is not None and self.edits is not None:
            hidden = self.track_filter(self.edits) if self.track_filter is not None else None
            show_tracks(self.layer, self.edits, self.correct, self.colour_by, hidden)

    def _update_correctness(self) -> None:
        if self.ground_truth is None or self.edits is None:
            self.correct = None
            return
        from tracker.metrics import link_correctness

        table = self.edits.table()
        self.correct = link_correctness(table, self.ground_truth) if len(table["frame"]) else np.empty(0, np.int8)

    # ---------------------------------------------------------------- selection

    @property
    def tail_length(self) -> int:
        """How many frames back the reviewed layer draws each track."""
        return int(getattr(self.layer, "tail_length", 10))

    def select(self, track_id: int | None, row: int | None = None, notify: bool = True) -> None:
        """Select a track (and one of its points; default: its point in the current frame, if any)."""
        if self.edits is None:
            return
        if track_id is not None and len(self.edits.track_rows(int(track_id))) == 0:
            track_id = None
        if track_id is not None and row is None:
            row = self.edits.point_at(int(track_id), current_frame(self.viewer))
        if track_id != self.selected_track or row != self.selected_row:
            if self.selected_track is not None:
                self.previous_track, self.previous_row = self.selected_track, self.selected_row
            self.selected_track = None if track_id is None else int(track_id)
            self.selected_row = None if row is None else int(row)
        self._show_selection()
        if notify:
            self._notify("selection")

    def clear_selection(self, notify: bool = True) -> None:
        self.selected_track = self.selected_row = self.previous_track = self.previous_row = None
        self._show_selection()
        if notify:
            self._notify("selection")

    def select_at(self, position, view_direction=None, dims_displayed=None) -> bool:
        """Select the track point nearest to a click at world ``position``; a miss clears. True on a hit."""
        if self.edits is None:
            return False
        frame = current_frame(self.viewer)
        row = pick_row(self.edits, position, frame, pick_tolerance_um(self.viewer),
                       self.tail_length, list(dims_displayed or self.viewer.dims.displayed),
                       view_direction)
        if row is None:
            self.clear_selection()
            return False
        track_id = int(self.edits.column("track_id")[row])
        in_frame = self.edits.point_at(track_id, frame)  # a tail vertex picks the track's point of this frame
        self.select(track_id, row if in_frame is None else in_frame)
        return True

    def _on_click(self, viewer, event) -> None:
        active = viewer.layers.selection.active
        if self.layer is not None and str(getattr(active, "mode", "pan_zoom")) == "pan_zoom":  # not while drawing
            self.select_at(event.position, getattr(event, "view_direction", None), list(event.dims_displayed))

    def jump_to(self, track_id: int | None = None, frame: int | None = None) -> None:
        """Show a track: go to ``frame`` (default: its selected point's, or the current), centre and zoom on it."""
        track_id = self.selected_track if track_id is None else int(track_id)
        if self.edits is None or track_id is None or len(self.edits.track_rows(track_id)) == 0:
            return
        rows = self.edits.track_rows(track_id)
        if frame is not None:
            row = self.edits.point_at(track_id, frame)
        elif track_id == self.selected_track and self.selected_row is not None:
            row = self.selected_row
        else:
            row = self.edits.point_at(track_id, current_frame(self.viewer))
        row = int(rows[0]) if row is None else row
        show_point(self.viewer, self.edits, row, self.tail_length)
        self.select(track_id, row)

    def _show_selection(self) -> None:
        self.overlay.show(self.edits, self.selected_track, self.selected_row)

    # ---------------------------------------------------------------- edits

    def apply_edit(self, possible: bool, hint: str, make_edit: Callable[[], Edit]) -> bool:
        """Apply ``make_edit()`` (an edit of :attr:`edits`) if ``possible``, else say ``hint``; an
        :class:`EditError` is said, not raised. The corrections and link decisions apply their edits here."""
        if self.edits is None or not possible:
            self.say(hint if self.edits is not None else "no tracks to edit: run the tracker or pick a Tracks layer")
            return False
        try:
            edit = make_edit()
        except EditError as error:
            self.say(str(error))
            return False
        self._after_edit(edit.description, edit.selection)
        return True

    def _after_edit(self, description: str, selection) -> None:
        self._update_correctness()
        self.refresh_layer()
        track_id, row = selection
        self.selected_track = self.selected_row = self.previous_track = self.previous_row = None
        if track_id is not None:
            self.select(track_id, row, notify=False)
        else:
            self._show_selection()
        self.say(description, reason="edit")

    def undo(self) -> bool:
        """Revert the last edit."""
        if self.edits is None or not self.edits.can_undo:
            self.say("nothing to undo")
            return False
        edit = self.edits.undo()
        self._after_edit(f"undone: {edit.description}", (self.selected_track, None))
        return True

    def redo(self) -> bool:
        """Apply the last undone edit again."""
        if self.edits is None or not self.edits.can_redo:
            self.say("nothing to redo")
            return False
        edit = self.edits.redo()
        self._after_edit(f"redone: {edit.description}", edit.selection)
        return True

    # ---------------------------------------------------------------- messages

    def say(self, message: str, reason: str = "message") -> None:
        """Show ``message`` in the viewer's status bar and tell the listeners."""
        self.message = message
        self.viewer.status = message
        self._notify(reason)

    def _notify(self, reason: str) -> None:
        for listener in list(self.listeners):
            listener(reason)
