"""The selected track drawn as a thick line, its selected point as a ring and the two points of the link under
review as magenta rings, in three helper layers over the reviewed layer.

Moving the selection is the review queue's inner loop, so the helper layers are changed the cheap way: the two
Points layers keep a fixed number of points, written in place and shown or hidden through ``shown`` (a data
assignment makes napari measure every layer twice, a ``visible`` change rebuilds the scene graph: some 5 ms
each at 100k track points); the track layer is re-assigned only when another track (or another version of the
tracks) is shown, and hidden as a single point (a one-point track draws nothing). Its ``visible`` is left to
the user.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._edits import TrackEdits
from ._layers import KIND_KEY

SELECTION_COLOUR = "#ffff00"
LINK_COLOUR = "#ff00ff"
"""The two points of the link under review (magenta: apart from every colour mode's palette)."""
LINK_MARK_UM = 0.5
"""Diameter (µm) of the rings on the link's two points: apart at the zoom a link is shown at (12 point sizes,
7 µm, across the canvas) for links from about 0.5 µm (the sample's typical step)."""
SELECTED_MARK_UM = 0.8
"""Diameter (µm) of the ring round the selected point: around the link's ring on it."""

_MARKS = ("point", "link")
"""The Points helper layers: the selected point (one point), the link's two points each in both frames (four)."""


class SelectionOverlay:
    """Three helper layers (a Tracks and two Points layers) that show the selection in ``viewer``.

    They are added by :meth:`prepare` (or on first use), carry ``metadata[KIND_KEY] == "selection"`` (so the
    widget's layer lists skip them) and are removed by :meth:`remove`.
    """

    def __init__(self, viewer):
        self.viewer = viewer
        self._layers: dict[str, Any] = {}
        self._drawn: tuple | None = None  # (the model, its version, the track) on the track layer now

    def show(self, edits: TrackEdits | None, track_id: int | None, row: int | None) -> None:
        """Draw track ``track_id`` whole (every frame of it, whichever frame the viewer shows) and the point in
        ``row`` (None: hide)."""
        if edits is None or track_id is None:
            self.hide()
            return
        rows = edits.track_rows(track_id)
        track_layer = self._layer("track", _points(edits, rows[:1], with_track=True))
        drawn = (id(edits), edits.version, int(track_id))
        if drawn != self._drawn:
            # (coloured by its built-in track_id feature through a one-colour map: no features to set)
            track_layer.data = _points(edits, rows, with_track=True)
            frames = edits.column("frame")[rows]
            span = max(int(frames[-1] - frames[0]), 1)  # tail and head this long: the whole track in every frame
            if track_layer.tail_length < span or track_layer.head_length < span:
                track_layer.tail_length = track_layer.head_length = max(span, track_layer.tail_length)
            self._drawn = drawn
        # (with no point selected, the ring waits hidden on the track's first point: a point of the data)
        at = int(rows[0]) if row is None else int(row)
        point = _points(edits, [at])
        _place(self._layer("point", point), point, shown=row is not None)

    def show_link(self, edits: TrackEdits | None, source: int | None, target: int | None,
                  plane_z: float | None = None) -> None:
        """Mark the two points of the link ``source -> target`` (rows), each drawn in both frames of the link so
        that both show whichever of them the viewer is at (None: hide). ``plane_z`` (µm): draw both in that z
        plane, as a 2D view of z planes projects the tracks (a source in another plane would not show)."""
        if edits is None or source is None or target is None:
            if "link" in self._layers:
                _place(self._layers["link"], None, shown=False)
            return
        xyz = np.array([[edits.column(c)[r] for c in ("z", "y", "x")] for r in (source, target)], dtype=float)
        if plane_z is not None:
            xyz[:, 0] = plane_z
        frames = [float(edits.column("frame")[r]) for r in (source, target)]
        marks = np.array([[t, *p] for t in frames for p in xyz])
        _place(self._layer("link", marks), marks, shown=True)

    def prepare(self, edits: TrackEdits) -> None:
        """Add the helper layers now, drawing nothing, so that the first selection does not pay for adding them
        (a scene-graph rebuild each)."""
        rows = edits.rows()[:1]
        if len(rows):
            self._layer("track", _points(edits, rows, with_track=True))
            self._layer("point", _points(edits, rows))
            self._layer("link", _points(edits, np.repeat(rows, 4)))

    def hide(self) -> None:
        """Draw nothing (the layers stay, for the next selection)."""
        track_layer = self._layers.get("track")
        if track_layer is not None and self._drawn is not None:
            track_layer.data = track_layer.data[:1]  # (a point of the data: the viewer's extent stays)
        self._drawn = None
        for which in _MARKS:
            if which in self._layers:
                _place(self._layers[which], None, shown=False)

    def remove(self) -> None:
        """Take the helper layers out of the viewer."""
        for layer in self._layers.values():
            if layer in self.viewer.layers:
                self.viewer.layers.remove(layer)
        self._layers.clear()
        self._drawn = None

    def _layer(self, which: str, data: np.ndarray):
        """The helper layer ``which`` ("track", "point", "link"), made holding ``data`` (hidden) if missing."""
        layer = self._layers.get(which)
        if layer is not None and layer in self.viewer.layers:
            return layer
        if which == "track":
            self._drawn = None
        from napari.layers import Points, Tracks
        from napari.utils.colormaps import Colormap

        active = self.viewer.layers.selection.active
        metadata = {KIND_KEY: "selection"}
        if which == "track":
            layer = Tracks(
                data, name="selected track", color_by="track_id",
                colormaps_dict={"track_id": Colormap([SELECTION_COLOUR, SELECTION_COLOUR], name="tracker_selected")},
                tail_width=7, tail_length=10, head_length=0, opacity=0.9, blending="translucent",
                metadata=metadata,
            )
        elif which == "link":
            layer = Points(
                data, name="link under review", size=LINK_MARK_UM, symbol="ring", face_color=LINK_COLOUR,
                border_width=0, blending="translucent_no_depth", metadata=metadata, shown=False,
            )
        else:
            layer = Points(
                data, name="selected point", size=SELECTED_MARK_UM, symbol="ring",
                face_color=SELECTION_COLOUR, border_width=0, blending="translucent_no_depth", metadata=metadata,
                shown=False,
            )
        self.viewer.add_layer(layer)
        if active is not None and active in self.viewer.layers:
            self.viewer.layers.selection.active = active  # adding a layer makes it active; keep the user's
        self._layers[which] = layer
        return layer


def _points(edits: TrackEdits, rows, with_track: bool = False) -> np.ndarray:
    """Rows' ``frame, z, y, x`` (``track_id`` first: Tracks layer data)."""
    columns = ("track_id", "frame", "z", "y", "x") if with_track else ("frame", "z", "y", "x")
    return np.column_stack([edits.column(c)[rows] for c in columns]).astype(np.float64)


def _place(layer, data: np.ndarray | None, shown: bool) -> None:
    """Put ``data`` (None: keep the points) into a Points helper layer, ``shown`` or hidden.

    The points are written in place and the layer refreshed (napari's way for data changed in place): unlike an
    assignment of ``data``, this neither makes napari measure every layer nor emits data events.
    """
    if data is not None and not np.array_equal(layer.data, data):
        if layer.data.shape != data.shape or not layer.data.flags.writeable:
            layer.data = data  # (a user changed the layer: take it back to its size)
        else:
            layer.data[...] = data
            layer.refresh(highlight=False)
    if bool(np.all(layer.shown)) != shown or bool(np.any(layer.shown)) != shown:
        layer.shown = shown
