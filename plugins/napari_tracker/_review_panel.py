"""The "Review" box of the dock widget: which layer, colours and their legend, the track table, edit buttons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from qtpy.QtCore import Qt, Signal
from qtpy.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
)

from ._corrections import TrackCorrections
from ._fold import make_foldable
from ._layer_choice import LayerChoice
from ._layers import COLOUR_BY, KIND_KEY, legend, table_from_tracks_layer
from ._review import TrackReview
from ._shortcuts import SHORTCUTS
from ._track_table import TrackTableModel

BUTTONS = [("jump", "Jump to track"), ("delete", "Delete track"), ("split", "Split at frame"),
           ("join", "Join previous → selected"), ("reassign", "Reassign previous point"),
           ("undo", "Undo"), ("redo", "Redo"), ("save", "Save tracks…")]


def legend_html(mode: str) -> str:
    """The colour legend of ``mode`` as rich text: a coloured square and its meaning per entry."""
    entries = legend(mode)
    if not entries:
        return "one colour per track"
    return "&nbsp;&nbsp;".join(f'<span style="color:{colour}">■</span>&nbsp;{text}' for colour, text in entries)


class ReviewPanel(QGroupBox):
    """Drives a :class:`TrackReview` and its :class:`TrackCorrections`: the reviewed and ground-truth layers, colour
    mode, table and edits.

    Choosing a row of the table (click, or Up/Down) selects its track and jumps to its costliest link.

    Signals
    -------
    message(text, level)
        For the user (see :class:`~napari_tracker._track_panel.TrackPanel`); "status" for the selection.
    """

    message = Signal(str, str)
    saved = Signal(str)
    """The path the reviewed tracks were just saved to (the widget saves the session beside it)."""

    def __init__(self, viewer, review: TrackReview, corrections: TrackCorrections, parent=None):
        super().__init__("Review", parent)
        make_foldable(self)
        self.viewer = viewer
        self.review = review
        self._syncing = False
        form = QFormLayout(self)
        self.tracks_choice = LayerChoice(viewer, "tracks", accept=lambda l: l.metadata.get(KIND_KEY) != "ground_truth",
                                         with_none=True)
        self.tracks_choice.layer_changed.connect(self._on_tracks_changed)
        form.addRow("Tracks layer", self.tracks_choice)
        self.truth_choice = LayerChoice(viewer, "tracks", with_none=True)
        self.truth_choice.layer_changed.connect(self._on_truth_changed)
        form.addRow("Ground truth", self.truth_choice)
        self.colour_combo = QComboBox()
        self.colour_combo.addItems(list(COLOUR_BY))
        self.colour_combo.currentTextChanged.connect(self._on_colour_changed)
        form.addRow("Colour by", self.colour_combo)
        self.legend = QLabel(legend_html(review.colour_by))
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        form.addRow("", self.legend)

        self.table_model = TrackTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(200)
        self.table.setToolTip("Choose a track (click, or Up/Down) to see its costliest link")
        self.table.clicked.connect(lambda index: self.show_row(index.row()))
        self.table.selectionModel().currentRowChanged.connect(lambda current, _: self.show_row(current.row()))
        form.addRow(self.table)

        grid = QGridLayout()
        actions = {"jump": review.jump_to, "delete": corrections.delete_track, "split": corrections.split_track,
                   "join": corrections.join_tracks, "reassign": corrections.reassign_point, "undo": review.undo,
                   "redo": review.redo, "save": self._save_dialog}
        self.buttons: dict[str, QPushButton] = {}
        for i, (name, text) in enumerate(BUTTONS):
            button = QPushButton(text)
            if name in SHORTCUTS:
                button.setToolTip(f"{text} ({SHORTCUTS[name]})")
            button.clicked.connect((lambda act: lambda: act())(actions[name]))
            self.buttons[name] = button
            grid.addWidget(button, i // 2, i % 2)
        form.addRow(grid)
        help_text = QLabel("Click a track to select it (click another to keep the first as 'previous'). "
                           + ", ".join(f"{k} {v}" for k, v in SHORTCUTS.items()))
        help_text.setWordWrap(True)
        form.addRow(help_text)
        review.listeners.append(self._on_review_changed)
        self._update_buttons()

    def close_panel(self) -> None:
        """Stop following the viewer's layers."""
        self.tracks_choice.close_choice()
        self.truth_choice.close_choice()

    def pick_up_existing(self) -> None:
        """Review the newest tracks layer already in the viewer (the dock opened after a run), with its truth."""
        layers = self.tracks_choice.layers()
        if self.review.layer is None and layers:
            self.tracks_choice.choose(layers[-1])
            image = layers[-1].metadata.get("image")
            if image and f"{image} ground truth" in self.viewer.layers:
                self.truth_choice.choose(self.viewer.layers[f"{image} ground truth"])

    # ---------------------------------------------------------------- choices

    def _on_tracks_changed(self, layer) -> None:
        if layer != self.review.layer:  # proxies of one layer are equal, not identical
            self.review.set_layer(layer)

    def _on_truth_changed(self, layer) -> None:
        if layer is None or layer == self.review.layer:
            self.review.set_ground_truth(None)
        else:
            self.review.set_ground_truth(table_from_tracks_layer(layer.data, layer.features, layer.scale,
                                                                 layer.translate))

    def _on_colour_changed(self, text: str) -> None:
        if self._syncing or not text:
            return
        try:
            self.review.set_colour_by(text)
        except ValueError as error:
            self.message.emit(str(error), "warning")
            self._sync_colour()

    def _sync_colour(self) -> None:
        self._syncing = True
        self.colour_combo.setCurrentText(self.review.colour_by)
        self._syncing = False
        self.legend.setText(legend_html(self.review.colour_by))

    # ---------------------------------------------------------------- table

    def show_row(self, row: int) -> None:
        """Select the track of table row ``row`` and jump to the frame of its costliest link."""
        if self._syncing or not 0 <= row < self.table_model.rowCount():
            return
        self.review.jump_to(self.table_model.track_at(row), frame=self.table_model.worst_frame_at(row))

    def _select_table_row(self, track_id: int | None) -> None:
        self._syncing = True  # a selection made elsewhere moves the table, without jumping
        try:
            row = None if track_id is None else self.table_model.row_of(track_id)
            if row is None:
                self.table.clearSelection()
            else:
                self.table.selectRow(row)
                self.table.scrollTo(self.table_model.index(row, 0))
        finally:
            self._syncing = False

    def _on_review_changed(self, reason: str) -> None:
        review = self.review
        if reason in ("layer", "edit", "ground_truth"):
            wrong = None
            if review.correct is not None and review.edits is not None:
                ids = review.edits.column("track_id")[review.edits.rows()]
                summary_ids = review.edits.summary()["track_id"]
                wrong = np.bincount(np.searchsorted(summary_ids, ids), weights=(review.correct == 0),
                                    minlength=len(summary_ids)).astype(np.int64)
            self._syncing = True
            self.table_model.set_summary(review.edits.summary() if review.edits is not None else None, wrong)
            self._syncing = False
        if reason in ("selection", "edit", "layer"):
            self._select_table_row(review.selected_track)
        if reason in ("ground_truth", "colour", "layer"):
            self._sync_colour()
        if reason == "layer" and review.layer != self.tracks_choice.layer:
            self.tracks_choice.choose(review.layer)
        parts = []
        if review.selected_track is not None:
            parts.append(f"selected track {review.selected_track}")
            if review.selected_row is not None:
                parts.append(f"point in frame {int(review.edits.column('frame')[review.selected_row])}")
        if review.previous_track is not None:
            parts.append(f"previous track {review.previous_track}")
        text = "; ".join(parts)
        if reason in ("edit", "message") and review.message:
            text = review.message + ("\n" + text if text else "")
        self.message.emit(text, "status")
        self._update_buttons()

    def _update_buttons(self) -> None:
        review = self.review
        edits = review.edits
        selected = edits is not None and review.selected_track is not None
        enabled = {"jump": selected, "delete": selected, "split": selected,
                   "join": selected and review.previous_track is not None,
                   "reassign": selected and review.previous_row is not None,
                   "undo": edits is not None and edits.can_undo, "redo": edits is not None and edits.can_redo,
                   "save": edits is not None}
        for name, on in enabled.items():
            self.buttons[name].setEnabled(on)
        if edits is not None and edits.can_undo:
            self.buttons["undo"].setToolTip(f"Undo {edits.undo_description} ({SHORTCUTS['undo']})")
        if edits is not None and edits.can_redo:
            self.buttons["redo"].setToolTip(f"Redo {edits.redo_description} ({SHORTCUTS['redo']})")

    # ---------------------------------------------------------------- saving

    def save(self, path: str | Path) -> Path:
        """Write the reviewed tracks (the ``track run`` columns) to a CSV file, replacing it."""
        from tracker.io import write_table

        if self.review.edits is None:
            raise ValueError("no tracks to save")
        path = Path(path)
        write_table(path, self.review.edits.output_table(), overwrite=True)
        self.message.emit(f"saved {len(self.review.edits.track_ids())} tracks to {path}", "info")
        self.saved.emit(str(path))
        return path

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save tracks", "tracks.csv", "CSV (*.csv)")
        if path:
            try:
                self.save(path)
            except (ValueError, OSError) as error:
                self.message.emit(str(error), "error")
