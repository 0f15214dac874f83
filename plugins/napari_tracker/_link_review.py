"""Link-by-link review on the viewer: step through the doubtful links, accept (pin) or reject (forbid and
re-solve) each, pin a whole track.

:class:`LinkReview` works beside a :class:`~napari_tracker._review.TrackReview` (the layer, its edit model, the
selection, undo): going to a link sets the frame, centres and zooms the camera on the link, selects its track
(drawn whole) and marks both of its points (:meth:`~napari_tracker._selection_overlay.SelectionOverlay.show_link`).
Decisions are edits of the review's model (:class:`~napari_tracker._decisions.LinkDecisions`), undone by its undo.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._decisions import LinkDecisions, relink_options
from ._layers import POINT_SIZE_UM
from ._review import TrackReview
from ._review_queue import ReviewQueue
from ._shortcuts import bind_shortcuts, unbind_shortcuts
from ._view import set_point_once, zoom_to

LINK_CONTEXT_STEPS = 6.0
"""Going to a link zooms to show this many times the link's length across, and at least
:data:`LINK_CONTEXT_POINTS` drawn points' sizes (the neighbours that could have taken the link stay in view)."""
LINK_CONTEXT_POINTS = 12.0


class LinkReview:
    """The review queue of ``review``'s layer and the decisions on its links.

    Parameters
    ----------
    review : TrackReview
    bind_keys : bool
        Bind next / previous / accept / reject / pin-track keys (:data:`~napari_tracker._shortcuts.SHORTCUTS`).
    """

    def __init__(self, review: TrackReview, bind_keys: bool = True):
        self.review = review
        self.viewer = review.viewer
        self.queue: ReviewQueue | None = None
        self.decisions: LinkDecisions | None = None
        self.order = "confidence"
        self.listeners: list[Callable[[str], None]] = []
        self._keys = bind_shortcuts(self.viewer, {
            "next": self.next_link, "previous": self.previous_link, "accept": self.accept,
            "reject": self.reject, "pin_track": self.pin_track,
        }) if bind_keys else {}
        review.listeners.append(self._on_review_changed)
        self._on_review_changed("layer")

    def close(self) -> None:
        unbind_shortcuts(self.viewer, self._keys)
        self._keys = {}
        if self._on_review_changed in self.review.listeners:
            self.review.listeners.remove(self._on_review_changed)
        self.listeners.clear()

    # ---------------------------------------------------------------- state

    def _on_review_changed(self, reason: str) -> None:
        review = self.review
        if reason == "layer":
            if review.edits is None:
                self.queue = self.decisions = None
            elif self.queue is None or self.queue.edits is not review.edits:
                parameters = review.layer.metadata.get("parameters") if review.layer is not None else None
                self.decisions = LinkDecisions(review.edits, relink_options(parameters))
                self.queue = ReviewQueue(review.edits)
                self.order = "confidence"
        if self.queue is not None and reason in ("layer", "edit", "ground_truth"):
            self.queue.set_correct(review.correct)
            self.order = self.queue.order
        self._notify(reason)

    def set_order(self, order: str) -> None:
        """Order the queue by ``order`` (:data:`~napari_tracker._review_queue.ORDERS`)."""
        if self.queue is None:
            raise ValueError("no tracks to review")
        self.queue.set_order(order, self.review.correct)
        self.order = order
        self._notify("order")

    def progress_text(self) -> str:
        return self.queue.progress_text() if self.queue is not None else "no tracks to review"

    @property
    def current(self) -> int | None:
        """Target row of the link under review (the queue's)."""
        return None if self.queue is None else self.queue.current

    @property
    def target(self) -> int | None:
        """The link decisions apply to, by its target row: the selected point's (a click chose it), else the
        queue's."""
        selected = self.review.selected_row
        return selected if selected is not None else self.current

    # ---------------------------------------------------------------- moving

    def next_link(self) -> int | None:
        """Go to the next unreviewed link of the queue."""
        if self.queue is None:
            return None
        row = self.queue.next()
        if row is None:
            self.review.say("every link is reviewed")
            return None
        self.show_link(row)
        return row

    def previous_link(self) -> int | None:
        """Go back to the link before the current one."""
        if self.queue is None:
            return None
        row = self.queue.previous()
        if row is not None:
            self.show_link(row)
        return row

    def show_link(self, row: int) -> None:
        """Go to the link into ``row``: its frame (and plane), the camera on it, its track and points shown."""
        edits = self.review.edits
        if edits is None or self.queue is None:
            return
        self.queue.current = int(row)
        source = int(edits.predecessor_rows()[row])
        xyz = np.array([[edits.column(c)[r] for c in ("z", "y", "x")] for r in (max(source, 0), row)])
        viewer = self.viewer
        frame = int(edits.column("frame")[row])
        # The highlights first: their changes make napari measure every layer, which costs nothing while the
        # layers' extents are still known; the frame change below makes napari measure them again anyway.
        self.review.select(int(edits.column("track_id")[row]), int(row), notify=False)
        self.review.overlay.show_link(edits, source if source >= 0 else None, int(row), self._plane_z(row))
        # (one call slicing once, and none where the view is there: napari slices every layer on each)
        axes, values = ((0, 1), (frame, float(xyz[1, 0]))) if self._plane_z(row) is not None else ((0,), (frame,))
        if not np.allclose([viewer.dims.point[a] for a in axes], values):
            set_point_once(viewer, axes, values)
        displayed = [d - 1 for d in viewer.dims.displayed if d >= 1]
        length = float(np.linalg.norm(xyz[1, displayed] - xyz[0, displayed])) if source >= 0 else 0.0
        zoom_to(viewer, xyz.mean(axis=0), max(LINK_CONTEXT_STEPS * length, LINK_CONTEXT_POINTS * POINT_SIZE_UM),
                self._scene_size(displayed))
        self.review.say(f"link into track {int(edits.column('track_id')[row])} frame "
                        f"{int(edits.column('frame')[row])}: confidence "
                        f"{_format(edits, 'link_confidence', row)}, cost {_format(edits, 'link_cost', row)} µm² — "
                        f"{self.progress_text()}", reason="link")

    def _plane_z(self, row: int) -> float | None:
        """The z plane (µm) a 2D view of z planes shows the link into ``row`` in (its target's); None in 3D."""
        if self.viewer.dims.ndisplay == 2 and self.viewer.dims.ndim >= 4:
            return float(self.review.edits.column("z")[row])
        return None

    def _scene_size(self, displayed: list[int]) -> float:
        """The largest extent (µm) of the live points along the displayed axes (cached per model version)."""
        edits = self.review.edits
        key = (id(edits), edits.version, tuple(displayed))
        if getattr(self, "_scene", (None,))[0] != key:
            rows = edits.rows()
            size = max((float(np.ptp(edits.column(c)[rows])) for c in np.array(["z", "y", "x"])[displayed]),
                       default=0.0) if len(rows) else 0.0
            self._scene = (key, size)
        return self._scene[1]

    # ---------------------------------------------------------------- decisions

    def _decide(self, what: str, decide) -> bool:
        row = self.target if what != "pin_track" else self.review.selected_track
        hint = "select a track to pin (click it)" if what == "pin_track" else "go to a link first (next doubtful link)"
        return self.review.apply_edit(row is not None and self.decisions is not None, hint, lambda: decide(row))

    def accept(self) -> bool:
        """Pin the link into the selected point (the one under review), mark it reviewed, go to the next."""
        if self._decide("accept", lambda row: self.decisions.accept(row)):
            self.next_link()
            return True
        return False

    def reject(self) -> bool:
        """Forbid the link into the selected point (the one under review) and re-solve around it (one undoable
        edit); stays on that point to show what replaced the link."""
        row = self.target
        if not self._decide("reject", lambda r: self.decisions.reject(r)):
            return False
        source = int(self.review.edits.predecessor_rows()[row])
        self.review.overlay.show_link(self.review.edits, source if source >= 0 else None, row, self._plane_z(row))
        return True

    def pin_track(self) -> bool:
        """Pin every link of the selected track."""
        return self._decide("pin_track", lambda track: self.decisions.pin_track(track))

    def _notify(self, reason: str) -> None:
        for listener in list(self.listeners):
            listener(reason)


def _format(edits, name: str, row: int) -> str:
    if name not in edits.column_names or not np.isfinite(edits.column(name)[row]):
        return "—"
    return f"{float(edits.column(name)[row]):.3g}"
