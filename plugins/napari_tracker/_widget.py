"""The dock widget: the "Track" box over the "Review" box, a status line, and the layers a run adds.

The parts live beside it: :class:`~napari_tracker._track_panel.TrackPanel`
(stack, voxel size, parameter forms generated from :mod:`tracker.params`,
run/cancel), :class:`~napari_tracker._review_panel.ReviewPanel` (layer
choice, colours and legend, track table, edit buttons) and
:class:`~napari_tracker._review.TrackReview` (the review logic on the viewer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qtpy.QtCore import QEvent, QSize, Qt
from qtpy.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from ._edits import TrackEdits
from ._analysis_panel import AnalysisPanel
from ._layers import points_layer_data, tracks_layer_data, tracks_layer_kwargs, was_edited
from ._corrections import TrackCorrections
from ._link_review import LinkReview
from ._queue_panel import QueuePanel
from ._reader import detections_kwargs
from ._session_keeper import SessionKeeper
from ._review import TrackReview
from ._review_panel import ReviewPanel
from ._track_panel import TrackPanel

if TYPE_CHECKING:
    import napari


class _Scroll(QScrollArea):
    """The dock's boxes, scrolled up and down where the screen is shorter than they are; as wide as the boxes
    need at least (their minimum, not their preferred width: the canvas keeps the room)."""

    def __init__(self, content: QWidget):
        super().__init__()
        self.setWidget(content)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def _width(self) -> int:
        return self.widget().minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(self._width(), super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(self._width(), self.widget().sizeHint().height())


def linking_text(linking: Any) -> str:
    """The linker's one-line report (a :class:`tracker.linking.LinkSummary` prints itself)."""
    return str(linking)


class TrackerWidget(QWidget):
    """Track a stack and review the tracks (dock widget of the napari plugin).

    Closing the dock detaches the review from the viewer (mouse callback, shortcuts, helper layers);
    a widget opened later picks up the tracks layer and, through the layer, its edit history.
    """

    def __init__(self, napari_viewer: napari.Viewer, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self.review = TrackReview(napari_viewer)
        self.corrections = TrackCorrections(self.review)
        self.result = None
        self._closed = False
        self._had_parent = parent is not None
        self.track_panel = TrackPanel(napari_viewer)
        self.review_panel = ReviewPanel(napari_viewer, self.review, self.corrections)
        self.links = LinkReview(self.review)
        self.queue_panel = QueuePanel(self.links)
        self.sessions = SessionKeeper(self.review, self.links)
        self.analysis_panel = AnalysisPanel(self.review)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.addWidget(self.track_panel)
        layout.addWidget(self.review_panel)
        layout.addWidget(self.queue_panel)
        layout.addWidget(self.analysis_panel)
        layout.addWidget(self.status)
        layout.addStretch(1)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(_Scroll(content))
        self.track_panel.message.connect(self.show_message)
        self.review_panel.message.connect(self.show_message)
        self.queue_panel.message.connect(self.show_message)
        self.review_panel.saved.connect(self._on_saved)
        self.track_panel.tracked.connect(self._on_tracked)
        self.track_panel.show_image_settings(self.track_panel.image)
        self.review_panel.pick_up_existing()

    def show_message(self, text: str, level: str = "status") -> None:
        """Show ``text`` in the status line; "info", "warning" and "error" also as a napari notification."""
        from napari.utils.notifications import show_error, show_info, show_warning

        self.status.setText(text)
        notify = {"info": show_info, "warning": show_warning, "error": show_error}.get(level)
        if notify is not None and text:
            notify(text)

    @property
    def running(self) -> bool:
        return self.track_panel.running

    def run(self) -> None:
        """Track the chosen stack (see :meth:`TrackPanel.run`)."""
        self.track_panel.run()

    # ---------------------------------------------------------------- results

    def _on_tracked(self, image, params: dict[str, Any], result) -> None:
        """Add the run's detections and tracks; tracks someone has edited stay, the new ones come beside them."""
        self.result = result
        image.scale = (1.0, *result.voxel_size)
        name = image.name
        if f"{name} detections" in self.viewer.layers:
            self.viewer.layers.remove(f"{name} detections")
        kept = None
        if f"{name} tracks" in self.viewer.layers:
            old = self.viewer.layers[f"{name} tracks"]
            if was_edited(old):
                kept = old  # napari gives the new layer a free name ("... tracks [1]")
            else:
                self.viewer.layers.remove(old)
        data, features = points_layer_data(result.detections)
        kwargs = detections_kwargs(f"{name} detections", features)
        kwargs["metadata"]["parameters"] = dict(params)
        self.viewer.add_points(data, **kwargs)
        data, features, graph = tracks_layer_data(TrackEdits(result.tracks))
        layer = self.viewer.add_tracks(data, **tracks_layer_kwargs(f"{name} tracks", features, graph,
                                                                   parameters=params, image=name))
        self.review_panel.tracks_choice.choose(layer)
        truth = f"{name} ground truth"
        if truth in self.viewer.layers:
            self.review_panel.truth_choice.choose(self.viewer.layers[truth])
        timings = ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items())
        text = (f"{len(result.detections['frame'])} detections, {result.n_tracks} tracks ({timings})\n"
                f"{linking_text(result.linking)}")
        if kept is not None:
            text += f"\nyour edited tracks stay in '{kept.name}'; this run's are in '{layer.name}'"
        self.show_message(text, "info" if kept is not None else "status")

    def _on_saved(self, path: str) -> None:
        try:
            session = self.sessions.save_beside(path)
        except (OSError, ValueError) as error:
            self.show_message(f"the review session was not saved: {error}", "warning")
            return
        if session is not None:
            n_tracks = len(self.review.edits.track_ids())
            self.show_message(f"saved {n_tracks} tracks to {path}, the review session to {session.name}", "info")

    # ---------------------------------------------------------------- closing

    def close_widget(self) -> None:
        """Detach from the viewer (idempotent): the review's callbacks and helper layers, layer lists, a run."""
        if self._closed:
            return
        self._closed = True
        self.track_panel.close_panel()
        self.review_panel.close_panel()
        self.queue_panel.close_panel()
        self.analysis_panel.close_panel()
        self.sessions.close()
        self.links.close()
        self.corrections.close()
        self.review.close()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        # napari closes a dock by taking the widget out of it (parent None) without closing the widget
        if event.type() == QEvent.Type.ParentChange:
            if self.parent() is not None:
                self._had_parent = True
            elif self._had_parent:
                self.close_widget()
        super().changeEvent(event)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        self.close_widget()
        super().closeEvent(event)
