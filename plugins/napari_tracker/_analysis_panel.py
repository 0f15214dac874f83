"""The "Track analysis" box: speed, intensity and link cost of the selected track against time, and filters
that hide short or costly tracks from the view (display only: the tracks and their edits stay)."""

from __future__ import annotations

import numpy as np
from qtpy.QtWidgets import QDoubleSpinBox, QFormLayout, QGroupBox, QLabel, QSpinBox

from ._edits import TrackEdits
from ._review import TrackReview
from ._track_plot import TrackPlot


def track_series(edits: TrackEdits, track_id: int) -> tuple[np.ndarray, list[tuple[str, str, np.ndarray]]]:
    """Frames of a track and its series: speed (µm/frame, from the link into each point; NaN at the start),
    intensity (where the table has it) and link cost (µm²)."""
    rows = edits.track_rows(int(track_id))
    frames = edits.column("frame")[rows].astype(np.float64)
    xyz = np.column_stack([edits.column(c)[rows] for c in ("z", "y", "x")])
    speed = np.full(len(rows), np.nan)
    if len(rows) > 1:
        speed[1:] = np.linalg.norm(np.diff(xyz, axis=0), axis=1) / np.diff(frames)
    series = [("speed", "µm/frame", speed)]
    if "intensity" in edits.column_names:
        series.append(("intensity", "counts", edits.column("intensity")[rows].astype(np.float64)))
    series.append(("link cost", "µm²", edits.column("link_cost")[rows].astype(np.float64)))
    return frames, series


def hidden_points(edits: TrackEdits, min_length: int, max_cost: float | None) -> np.ndarray | None:
    """Per live point (display order), whether its track is filtered out: fewer than ``min_length`` points, or
    a link costing more than ``max_cost`` (µm²); None when nothing is filtered."""
    if min_length <= 1 and max_cost is None:
        return None
    summary = edits.summary()
    out = summary["length"] < min_length
    if max_cost is not None:
        out |= np.nan_to_num(np.asarray(summary["max_link_cost"], dtype=np.float64), nan=0.0) > max_cost
    ids = edits.column("track_id")[edits.rows()]
    return out[np.searchsorted(summary["track_id"], ids)]


class AnalysisPanel(QGroupBox):
    """The selected track's plot and the view's track filters, for ``review``. Collapsible (its checkbox)."""

    def __init__(self, review: TrackReview, parent=None):
        super().__init__("Track analysis", parent)
        self.review = review
        self.setCheckable(True)
        self.toggled.connect(self._fold)
        form = QFormLayout(self)
        self.plot = TrackPlot()
        form.addRow(self.plot)
        self.min_length = QSpinBox()
        self.min_length.setRange(1, 1_000_000)
        self.min_length.setToolTip("Hide tracks with fewer points")
        form.addRow("Min. length (points)", self.min_length)
        self.max_cost = QDoubleSpinBox()
        self.max_cost.setRange(0.0, 1e9)
        self.max_cost.setDecimals(3)
        self.max_cost.setSpecialValueText("off")  # (0: no filter)
        self.max_cost.setToolTip("Hide tracks with a link costlier than this (µm²; 0: off)")
        form.addRow("Max. link cost (µm²)", self.max_cost)
        self.shown = QLabel("")
        form.addRow(self.shown)
        self._widgets = [self.plot, self.min_length, self.max_cost, self.shown]
        self.min_length.valueChanged.connect(self._on_filter)
        self.max_cost.valueChanged.connect(self._on_filter)
        review.listeners.append(self._on_review_changed)
        self._on_review_changed("layer")

    def close_panel(self) -> None:
        if self._on_review_changed in self.review.listeners:
            self.review.listeners.remove(self._on_review_changed)

    def _fold(self, on: bool) -> None:
        for widget in self._widgets:
            widget.setVisible(on)
        self.setMaximumHeight(16_777_215 if on else self.fontMetrics().height() * 2)

    def set_filters(self, min_length: int = 1, max_cost: float | None = None) -> None:
        """Hide tracks shorter than ``min_length`` points or with a link costlier than ``max_cost`` (µm²)."""
        self.min_length.setValue(int(min_length))
        self.max_cost.setValue(0.0 if max_cost is None else float(max_cost))

    def _on_filter(self, *args) -> None:
        min_length = int(self.min_length.value())
        max_cost = float(self.max_cost.value()) or None
        self.review.track_filter = (lambda edits: hidden_points(edits, min_length, max_cost)) \
            if (min_length > 1 or max_cost is not None) else None
        self.review.refresh_layer()
        self._count()

    def _count(self) -> None:
        edits = self.review.edits
        if edits is None:
            self.shown.setText("")
            return
        total = len(edits.track_ids())
        hidden = self.review.track_filter(edits) if self.review.track_filter is not None else None
        if hidden is None:
            self.shown.setText(f"showing all {total} tracks")
            return
        ids = edits.column("track_id")[edits.rows()]
        self.shown.setText(f"showing {len(np.unique(ids[~hidden]))} of {total} tracks")

    def _on_review_changed(self, reason: str) -> None:
        if reason not in ("layer", "edit", "selection", "link"):
            return
        review = self.review
        if reason in ("layer", "edit"):
            self._count()
        track = review.selected_track
        if review.edits is None or track is None or len(review.edits.track_rows(track)) == 0:
            self.plot.set_data("", np.empty(0), [])
            return
        frames, series = track_series(review.edits, track)
        marker = None if review.selected_row is None else float(review.edits.column("frame")[review.selected_row])
        self.plot.set_data(f"track {track}: {len(frames)} points, frames {int(frames[0])}–{int(frames[-1])}",
                           frames, series, marker)
