"""Saving the review session as it goes (autosave) and restoring where the review was.

:class:`SessionKeeper` follows a :class:`~napari_tracker._review.TrackReview` and its
:class:`~napari_tracker._link_review.LinkReview`: every edit (decisions, undo and redo included) schedules a
save of the session (:mod:`~napari_tracker._session`) :data:`AUTOSAVE_DELAY_MS` later, to the layer's session
file: the one it was opened from, the one beside its tracks file, or the one written by *Save tracks…*.
Tracks that were never saved (a fresh run) have no file yet: *Save tracks…* gives them one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qtpy.QtCore import QTimer

from ._link_review import LinkReview
from ._review import TrackReview
from ._session import save_session, session_path

AUTOSAVE_DELAY_MS = 1000
"""An edit is saved this long after it (edits in a burst are saved once)."""


class SessionKeeper:
    """Autosave and restore of the review session of ``review``'s layer."""

    def __init__(self, review: TrackReview, links: LinkReview, delay_ms: int = AUTOSAVE_DELAY_MS):
        self.review = review
        self.links = links
        self.last_saved: Path | None = None
        self.last_error: str | None = None
        self._due = False
        self._timer = QTimer()
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.flush)
        review.listeners.append(self._on_review_changed)
        self._restore()

    def close(self) -> None:
        """Save what is pending and stop following the review."""
        self.flush()
        if self._on_review_changed in self.review.listeners:
            self.review.listeners.remove(self._on_review_changed)

    def target(self) -> Path | None:
        """Where the session of the reviewed layer goes (None: its tracks were never saved)."""
        layer = self.review.layer
        if layer is None:
            return None
        if layer.metadata.get("session"):
            return Path(layer.metadata["session"])
        if layer.metadata.get("path"):
            return session_path(layer.metadata["path"])
        return None

    @property
    def pending(self) -> bool:
        """Whether an edit waits to be saved."""
        return self._due

    def state(self) -> dict[str, Any]:
        """What the session keeps besides the edit model: parameters, queue order and link, colour mode."""
        layer = self.review.layer
        return {"parameters": dict(layer.metadata.get("parameters") or {}) if layer is not None else {},
                "queue_order": self.links.order, "current_link": self.links.current,
                "colour_by": self.review.colour_by}

    def save(self, path: str | Path | None = None) -> Path | None:
        """Save the session now (to ``path``, which becomes the layer's session file, or to :meth:`target`)."""
        self._timer.stop()
        self._due = False
        path = Path(path) if path is not None else self.target()
        if path is None or self.review.edits is None:
            return None
        save_session(path, self.review.edits, self.state())
        self.review.layer.metadata["session"] = str(path)
        self.last_saved = path
        return path

    def save_beside(self, tracks_path: str | Path) -> Path | None:
        """The tracks were saved to ``tracks_path``: their session goes beside them from now on."""
        if self.review.layer is None:
            return None
        self.review.layer.metadata["path"] = str(tracks_path)
        return self.save(session_path(tracks_path))

    def flush(self) -> None:
        """Write a pending autosave now (the dock closes, a test)."""
        if not self._due:
            return
        try:
            self.save()
            self.last_error = None
        except (OSError, ValueError) as error:  # (a read-only folder: said once, the review goes on)
            self.last_error = f"autosave failed: {error}"
            self.review.say(self.last_error)

    def _on_review_changed(self, reason: str) -> None:
        if reason == "edit" and self.target() is not None:
            self._due = True
            self._timer.start()
        elif reason == "layer":
            self._restore()

    def _restore(self) -> None:
        """Where the review of a restored session was: queue order, the link under review, colour mode."""
        layer = self.review.layer
        state = layer.metadata.get("review_state") if layer is not None else None
        if not state or self.links.queue is None:
            return
        order = state.get("queue_order", "confidence")
        if order == "ground truth" and self.review.correct is None:
            order = "confidence"
        self.links.set_order(order)
        current = state.get("current_link")
        if current is not None and 0 <= int(current) < self.review.edits.n_rows:
            self.links.queue.current = int(current)
        if state.get("colour_by") and (state["colour_by"] != "ground truth" or self.review.correct is not None):
            self.review.set_colour_by(state["colour_by"])
