"""A small plot of one track's measurements against time, drawn with Qt's painter (no plotting library).

Stacked panels share the frame axis, one per series, each with its own value range, its name and unit in its
colour (the legend) and a marker at the selected frame. Colours are Okabe & Ito's (told apart with every
common colour-vision deficiency).
"""

from __future__ import annotations

import numpy as np
from qtpy.QtCore import QPointF, QRectF, Qt
from qtpy.QtGui import QColor, QPainter, QPen
from qtpy.QtWidgets import QSizePolicy, QWidget

SERIES_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7")
"""Okabe & Ito: blue, orange, bluish green, reddish purple."""
PANEL_HEIGHT = 56
MARGIN = 6


class TrackPlot(QWidget):
    """Series ``(name, unit, values)`` against ``frames``; NaN values leave gaps."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.frames = np.empty(0)
        self.series: list[tuple[str, str, np.ndarray, str]] = []
        self.marker: float | None = None
        self.title = ""
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(180)
        self._resize()

    def set_data(self, title: str, frames: np.ndarray, series: list[tuple[str, str, np.ndarray]],
                 marker: float | None = None) -> None:
        """Show ``series`` (name, unit, values per frame) of one track; an empty ``frames`` clears."""
        self.title = title
        self.frames = np.asarray(frames, dtype=np.float64)
        self.series = [(name, unit, np.asarray(values, dtype=np.float64), SERIES_COLOURS[i % len(SERIES_COLOURS)])
                       for i, (name, unit, values) in enumerate(series)]
        self.marker = marker
        self._resize()
        self.update()

    def _resize(self) -> None:
        self.setFixedHeight(18 + max(len(self.series), 1) * (PANEL_HEIGHT + MARGIN))

    def legend(self) -> list[tuple[str, str]]:
        """``(colour, "name (unit)")`` of each series."""
        return [(colour, f"{name} ({unit})") for name, unit, _, colour in self.series]

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt API)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().color(self.foregroundRole())
        painter.setPen(text)
        painter.drawText(QRectF(0, 0, self.width(), 16), Qt.AlignmentFlag.AlignLeft, self.title or "no track selected")
        if len(self.frames) == 0:
            painter.end()
            return
        lo, hi = float(self.frames.min()), float(self.frames.max())
        span = hi - lo if hi > lo else 1.0
        for k, (name, unit, values, colour) in enumerate(self.series):
            top = 18 + k * (PANEL_HEIGHT + MARGIN)
            box = QRectF(2, top, self.width() - 4, PANEL_HEIGHT)
            painter.setPen(QPen(QColor(text.red(), text.green(), text.blue(), 60)))
            painter.drawRect(box)
            finite = np.isfinite(values)
            label = f"{name} ({unit})"
            if finite.any():
                v_lo, v_hi = float(values[finite].min()), float(values[finite].max())
                label += f"  {v_lo:.3g}–{v_hi:.3g}"
                v_span = v_hi - v_lo if v_hi > v_lo else 1.0

                def point(i):
                    x = box.left() + 4 + (self.frames[i] - lo) / span * (box.width() - 8)
                    y = box.bottom() - 4 - (values[i] - v_lo) / v_span * (box.height() - 20)
                    return QPointF(x, y)

                painter.setPen(QPen(QColor(colour), 2))
                for i in range(len(values) - 1):
                    if finite[i] and finite[i + 1]:
                        painter.drawLine(point(i), point(i + 1))
                for i in np.flatnonzero(finite & ~(np.r_[False, finite[:-1]] | np.r_[finite[1:], False])):
                    painter.drawEllipse(point(i), 2.0, 2.0)  # (a value without neighbours: a dot)
            painter.setPen(QColor(colour))
            painter.drawText(QRectF(box.left() + 4, box.top() + 1, box.width() - 8, 14),
                             Qt.AlignmentFlag.AlignLeft, label)
            if self.marker is not None:
                x = box.left() + 4 + (self.marker - lo) / span * (box.width() - 8)
                painter.setPen(QPen(text, 1, Qt.PenStyle.DashLine))
                painter.drawLine(QPointF(x, box.top() + 14), QPointF(x, box.bottom()))
        painter.end()
