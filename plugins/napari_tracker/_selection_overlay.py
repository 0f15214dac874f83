"""The selected track drawn as a thick line and its selected point as a ring, over the reviewed layer."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._edits import TrackEdits
from ._layers import KIND_KEY

SELECTION_COLOUR = "#ffff00"
LINK_COLOUR = "#ff00ff"
"""The two points of the link under review (magenta: apart from every colour mode's palette)."""


class SelectionOverlay:
    """Two helper layers (a Tracks and a Points layer) that show the selection in ``viewer``.

    They are created on first use, carry ``metadata[KIND_KEY] == "selection"`` (so the widget's layer
    lists skip them) and are removed by :meth:`remove`.
    """

    def __init__(self, viewer):
        self.viewer = viewer
        self._layers: dict[str, Any] = {}
        self._drawn: tuple | None = None  # (the model, its version, the track, tail) on the track layer now

    def show(self, edits: TrackEdits | None, track_id: int | None, row: int | None, tail_length: int = 10) -> None:
        """Draw track ``track_id`` and the point in ``row`` (None: hide)."""
        if edits is None or track_id is None:
            self.hide()
            return
        track_layer = self._layer("track")
        drawn = (id(edits), edits.version, int(track_id), int(tail_length))
        if drawn != self._drawn:  # (each change of a layer makes napari measure every layer again: only if needed)
            rows = edits.track_rows(track_id)
            # (coloured by its built-in track_id feature through a one-colour map: no features to set)
            track_layer.data = np.column_stack([edits.column(c)[rows] for c in ("track_id", "frame", "z", "y", "x")]
                                               ).astype(np.float64)
            if track_layer.tail_length != tail_length:
                track_layer.tail_length = tail_length
            self._drawn = drawn
        _set_visible(track_layer, True)
        point_layer = self._layer("point")
        if row is not None:
            _set_data(point_layer, np.array([[edits.column(c)[row] for c in ("frame", "z", "y", "x")]], float))
            _set_visible(point_layer, True)
        else:
            _set_visible(point_layer, False)

    def show_link(self, edits: TrackEdits | None, source: int | None, target: int | None) -> None:
        """Mark the two points of the link ``source -> target`` (rows), each drawn in both frames of the link so
        that both show whichever of them the viewer is at (None: hide)."""
        if edits is None or source is None or target is None:
            if "link" in self._layers:
                _set_visible(self._layers["link"], False)
            return
        xyz = np.array([[edits.column(c)[r] for c in ("z", "y", "x")] for r in (source, target)], dtype=float)
        frames = [float(edits.column("frame")[r]) for r in (source, target)]
        data = np.array([[t, *p] for t in frames for p in xyz])
        layer = self._layer("link")
        _set_data(layer, data)
        _set_visible(layer, True)

    def hide(self) -> None:
        self._drawn = None
        for layer in self._layers.values():
            _set_visible(layer, False)

    def remove(self) -> None:
        """Take the helper layers out of the viewer."""
        for layer in self._layers.values():
            if layer in self.viewer.layers:
                self.viewer.layers.remove(layer)
        self._layers.clear()
        self._drawn = None

    def _layer(self, which: str):
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
                np.zeros((1, 5)), name="selected track", color_by="track_id",
                colormaps_dict={"track_id": Colormap([SELECTION_COLOUR, SELECTION_COLOUR], name="tracker_selected")},
                tail_width=7, tail_length=10, head_length=0, opacity=0.9, blending="translucent",
                metadata=metadata,
            )
        elif which == "link":
            layer = Points(
                np.zeros((1, 4)), name="link under review", size=0.9, symbol="disc", face_color="transparent",
                border_color=LINK_COLOUR, border_width=0.2, blending="translucent_no_depth", metadata=metadata,
            )
        else:
            layer = Points(
                np.zeros((1, 4)), name="selected point", size=1.2, symbol="ring", face_color=SELECTION_COLOUR,
                border_width=0, blending="translucent_no_depth", metadata=metadata,
            )
        self.viewer.add_layer(layer)
        if active is not None and active in self.viewer.layers:
            self.viewer.layers.selection.active = active  # adding a layer makes it active; keep the user's
        self._layers[which] = layer
        return layer


def _set_visible(layer, visible: bool) -> None:
    """Show or hide ``layer`` only where that changes it (napari refreshes the layer on every assignment)."""
    if layer.visible != visible:
        layer.visible = visible


def _set_data(layer, data: np.ndarray) -> None:
    """Set a small Points layer's data only where it differs (each assignment makes napari measure every layer)."""
    if np.shape(layer.data) != np.shape(data) or not np.array_equal(layer.data, data):
        layer.data = data
