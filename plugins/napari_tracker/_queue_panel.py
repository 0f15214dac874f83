"""The "Links" box of the dock widget: the review queue's order and progress, next/previous, accept, reject."""

from __future__ import annotations

from qtpy.QtCore import Signal
from qtpy.QtWidgets import QComboBox, QFormLayout, QGridLayout, QGroupBox, QLabel, QPushButton

from ._link_review import LinkReview
from ._review_queue import ORDERS
from ._shortcuts import SHORTCUTS

BUTTONS = [("previous", "◀ Previous"), ("next", "Next doubtful ▶"), ("accept", "Accept (pin)"),
           ("reject", "Reject + re-solve"), ("pin_track", "Pin whole track")]


class QueuePanel(QGroupBox):
    """Drives a :class:`LinkReview`: order of the queue, progress ("37 of 412 reviewed"), the link's decisions.

    Signals
    -------
    message(text, level)
        For the user (see :class:`~napari_tracker._track_panel.TrackPanel`).
    """

    message = Signal(str, str)

    def __init__(self, links: LinkReview, parent=None):
        super().__init__("Links: doubtful first", parent)
        self.links = links
        self.setCheckable(True)  # (unchecked: the box folds away)
        self.toggled.connect(self._fold)
        form = QFormLayout(self)
        self.order_combo = QComboBox()
        self.order_combo.addItems(list(ORDERS))
        self.order_combo.setToolTip("Lowest link confidence first, or links the ground truth calls wrong first")
        self.order_combo.currentTextChanged.connect(self._on_order)
        form.addRow("Order by", self.order_combo)
        self.progress = QLabel(links.progress_text())
        form.addRow("Progress", self.progress)
        grid = QGridLayout()
        actions = {"previous": links.previous_link, "next": links.next_link, "accept": links.accept,
                   "reject": links.reject, "pin_track": links.pin_track}
        self.buttons: dict[str, QPushButton] = {}
        for i, (name, text) in enumerate(BUTTONS):
            button = QPushButton(text)
            button.setToolTip(f"{text} ({SHORTCUTS[name]})")
            button.clicked.connect((lambda act: lambda: act())(actions[name]))
            self.buttons[name] = button
            grid.addWidget(button, i // 2, i % 2)
        form.addRow(grid)
        self.link_text = QLabel("")
        self.link_text.setWordWrap(True)
        form.addRow(self.link_text)
        self._widgets = [self.order_combo, self.progress, self.link_text, *self.buttons.values()]
        links.listeners.append(self._on_changed)
        links.review.listeners.append(self._on_review_message)
        self._on_changed("layer")

    def _fold(self, on: bool) -> None:
        for widget in self._widgets:
            widget.setVisible(on)
        self.setMaximumHeight(16_777_215 if on else self.fontMetrics().height() * 2)

    def _on_order(self, text: str) -> None:
        if not text or text == self.links.order:
            return
        try:
            self.links.set_order(text)
        except ValueError as error:
            self.message.emit(str(error), "warning")
            self.order_combo.setCurrentText(self.links.order)

    def _on_review_message(self, reason: str) -> None:
        if reason == "link":
            self.link_text.setText(self.links.review.message)

    def _on_changed(self, reason: str) -> None:
        self.progress.setText(self.links.progress_text())
        if self.order_combo.currentText() != self.links.order:
            self.order_combo.blockSignals(True)
            self.order_combo.setCurrentText(self.links.order)
            self.order_combo.blockSignals(False)
        has_queue = self.links.queue is not None
        on_link = has_queue and self.links.target is not None
        for name, button in self.buttons.items():
            button.setEnabled(on_link if name in ("accept", "reject") else
                              (has_queue and self.links.review.selected_track is not None) if name == "pin_track"
                              else has_queue)

    def close_panel(self) -> None:
        if self._on_changed in self.links.listeners:
            self.links.listeners.remove(self._on_changed)
