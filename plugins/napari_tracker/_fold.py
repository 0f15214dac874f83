"""Boxes of the dock that fold away with their check box (the screen keeps room for the boxes in use)."""

from __future__ import annotations

from qtpy.QtCore import Qt
from qtpy.QtWidgets import QGroupBox, QWidget

_UNLIMITED = 16_777_215  # (Qt's QWIDGETSIZE_MAX)


def make_foldable(box: QGroupBox) -> None:
    """Give ``box`` a check box: unticked, its contents hide and it shrinks to its title; ticked, what was shown
    before shows again."""
    box.setCheckable(True)
    box.setChecked(True)
    shown: list[QWidget] = []

    def fold(on: bool) -> None:
        if not on:
            shown[:] = [w for w in box.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                        if w.isVisibleTo(box)]
        for widget in shown:
            widget.setVisible(on)
        box.setMaximumHeight(_UNLIMITED if on else box.fontMetrics().height() * 2)

    box.toggled.connect(fold)
