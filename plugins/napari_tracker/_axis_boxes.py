"""Three spin boxes for a value per axis (z, y, x), e.g. a voxel size or an anisotropic spot radius."""

from __future__ import annotations

from collections.abc import Sequence

from qtpy.QtCore import Signal
from qtpy.QtWidgets import QAbstractSpinBox, QDoubleSpinBox, QHBoxLayout, QWidget

AXES = ("z", "y", "x")


class AxisBoxes(QWidget):
    """One decimal spin box per axis z, y, x, side by side (label it "(z, y, x)"), without step buttons;
    ``valueChanged`` when any changes."""

    valueChanged = Signal()  # noqa: N815 (Qt naming)

    def __init__(self, minimum: float, maximum: float, step: float, decimals: int, unit: str = "",
                 auto_text: str | None = None, parent=None):
        """``auto_text``: an optional value; each box's lowest entry, one step below ``minimum``, shows this text
        and stands for None (all boxes at it: :meth:`value` is None)."""
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.boxes: list[QDoubleSpinBox] = []
        for _ in AXES:
            box = QDoubleSpinBox()
            box.setDecimals(decimals)
            box.setRange(minimum - step if auto_text else minimum, maximum)
            if auto_text:
                box.setSpecialValueText(auto_text)
            box.setSingleStep(step)
            box.setButtonSymbols(QAbstractSpinBox.ButtonSymbols.NoButtons)  # (three in a row: room for the values;
            # the arrow keys and the wheel still step)
            if unit:
                box.setSuffix(f" {unit}")
            box.valueChanged.connect(lambda *args: self.valueChanged.emit())
            row.addWidget(box)
            self.boxes.append(box)

    def setToolTip(self, text: str) -> None:  # noqa: N802 (Qt API)
        super().setToolTip(text)
        for box in self.boxes:
            box.setToolTip(text)

    def value(self) -> tuple[float, float, float] | None:
        """The values ``(z, y, x)``; None when the value is optional and every box shows its "auto" entry."""
        if all(box.specialValueText() and box.value() == box.minimum() for box in self.boxes):
            return None
        return tuple(box.value() for box in self.boxes)  # type: ignore[return-value]

    def setValue(self, value: float | Sequence[float]) -> None:  # noqa: N802 (Qt naming)
        """One number for every axis, ``(z, y, x)``, or ``(y, x)`` (z takes y's); None: every box at "auto"."""
        if value is None:
            value = self.boxes[0].minimum()
        numbers = tuple(value) if isinstance(value, (tuple, list)) or hasattr(value, "__len__") else (value,)
        numbers = (numbers[0],) * (len(self.boxes) - len(numbers)) + numbers
        self.blockSignals(True)
        try:
            for box, number in zip(self.boxes, numbers):
                box.setValue(float(number))
        finally:
            self.blockSignals(False)
        self.valueChanged.emit()
