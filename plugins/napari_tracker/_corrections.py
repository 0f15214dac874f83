"""Hand corrections of the reviewed tracks: delete a track, split it at a frame, join two tracks, move a point
into another track.

:class:`TrackCorrections` works beside a :class:`~napari_tracker._review.TrackReview` (the layer, its edit model,
the selection, undo), as :class:`~napari_tracker._link_review.LinkReview` does for link decisions: each correction
reads the selection (the selected and the previously selected track or point), is one edit of the review's model
and is undone by the review's undo.
"""

from __future__ import annotations

from ._review import TrackReview
from ._shortcuts import bind_shortcuts, unbind_shortcuts
from ._view import current_frame


class TrackCorrections:
    """Delete, split, join and reassign on ``review``'s tracks.

    Parameters
    ----------
    review : TrackReview
    bind_keys : bool
        Bind the corrections' keys (:data:`~napari_tracker._shortcuts.SHORTCUTS`) on the viewer until :meth:`close`.
    """

    def __init__(self, review: TrackReview, bind_keys: bool = True):
        self.review = review
        self._keys = bind_shortcuts(review.viewer, {
            "delete": self.delete_track, "split": self.split_track, "join": self.join_tracks,
            "reassign": self.reassign_point,
        }) if bind_keys else {}

    def close(self) -> None:
        unbind_shortcuts(self.review.viewer, self._keys)
        self._keys = {}

    def delete_track(self, track_id: int | None = None) -> bool:
        """Delete the selected track (or ``track_id``)."""
        review = self.review
        track_id = review.selected_track if track_id is None else track_id
        return review.apply_edit(track_id is not None, "select a track to delete (click it)",
                             lambda: review.edits.delete_track(track_id))

    def split_track(self, track_id: int | None = None, frame: int | None = None) -> bool:
        """Split the selected track at the current frame: that frame starts a new track."""
        review = self.review
        track_id = review.selected_track if track_id is None else track_id
        frame = current_frame(review.viewer) if frame is None else frame
        return review.apply_edit(track_id is not None,
                             "select a track to split (click it), then go to the first frame of its second part",
                             lambda: review.edits.split_track(track_id, frame))

    def join_tracks(self, first: int | None = None, second: int | None = None) -> bool:
        """Join the previously selected track and the selected one (end of the earlier to start of the later)."""
        review = self.review
        first = review.previous_track if first is None else first
        second = review.selected_track if second is None else second
        return review.apply_edit(first is not None and second is not None, "click one track, then the other, then join",
                             lambda: review.edits.join_tracks(first, second))

    def reassign_point(self, row: int | None = None, track_id: int | None = None) -> bool:
        """Move the previously selected point into the selected track (swapping with its point in that frame)."""
        review = self.review
        row = review.previous_row if row is None else row
        track_id = review.selected_track if track_id is None else track_id
        return review.apply_edit(row is not None and track_id is not None,
                             "click the point to move, then the track to move it into, then reassign",
                             lambda: review.edits.reassign_point(row, track_id))
