"""A combo box of the viewer's layers of one type, kept current as layers come and go."""

from __future__ import annotations

from collections.abc import Callable

from qtpy.QtCore import Signal
from qtpy.QtWidgets import QComboBox

from ._layers import KIND_KEY

NONE = "(none)"


class LayerChoice(QComboBox):
    """Lists the viewer's layers of ``layer_type`` ("image", "tracks", ...) that pass ``accept``.

    The helper layers of the selection overlay are never listed. ``layer_changed`` is emitted with the chosen
    layer (or None) whenever the choice changes, by the user or because the chosen layer went away.

    Parameters
    ----------
    viewer : napari.Viewer
    layer_type : str
        The layer class name in lower case.
    accept : callable, optional
        ``accept(layer) -> bool``; default: every layer of the type.
    with_none : bool
        Offer "(none)" first.
    follow_new : bool
        Choose a layer on offer as it is added (a stack just opened is the one to track).
    """

    layer_changed = Signal(object)

    def __init__(self, viewer, layer_type: str, accept: Callable | None = None, with_none: bool = False,
                 follow_new: bool = False, parent=None):
        super().__init__(parent)
        self.viewer = viewer
        self.layer_type = layer_type
        self.accept = accept or (lambda layer: True)
        self.with_none = with_none
        self.follow_new = follow_new
        self._chosen = None
        self._events = ((viewer.layers.events.inserted, self._on_inserted), (viewer.layers.events.removed, self.refresh),
                        (viewer.layers.events.changed, self.refresh))
        for event, callback in self._events:
            event.connect(callback)
        self.currentIndexChanged.connect(self._on_index_changed)
        self.refresh()

    def close_choice(self) -> None:
        """Stop following the viewer's layers."""
        for event, callback in self._events:
            event.disconnect(callback)

    @property
    def layer(self):
        """The chosen layer, or None."""
        name = self.currentText()
        return self.viewer.layers[name] if name and name != NONE and name in self.viewer.layers else None

    def layers(self) -> list:
        """The layers on offer."""
        return [layer for layer in self.viewer.layers
                if layer.__class__.__name__.lower() == self.layer_type
                and layer.metadata.get(KIND_KEY) != "selection" and self.accept(layer)]

    def choose(self, layer) -> None:
        """Choose ``layer`` (None: "(none)", if offered)."""
        self.setCurrentText(NONE if layer is None else layer.name)

    def refresh(self, event=None) -> None:
        """List the layers again, keeping the choice where it still exists."""
        current = self.currentText()
        names = [layer.name for layer in self.layers()]
        self.blockSignals(True)
        try:
            self.clear()
            self.addItems(([NONE] if self.with_none else []) + names)
            if current in names:
                self.setCurrentText(current)
        finally:
            self.blockSignals(False)
        self._on_index_changed()

    def _on_inserted(self, event) -> None:
        self.refresh()
        if self.follow_new and event.value in self.layers():
            self.choose(event.value)

    def _on_index_changed(self, *args) -> None:
        layer = self.layer
        if layer != self._chosen:  # == (not is): napari hands plugins a new proxy of a layer at each access
            self._chosen = layer
            self.layer_changed.emit(layer)
