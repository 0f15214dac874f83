"""The per-track summary as a sortable Qt table model."""

from __future__ import annotations

import numpy as np
from qtpy.QtCore import QAbstractTableModel, QModelIndex, Qt


class TrackTableModel(QAbstractTableModel):
    """Per-track summary (from :meth:`TrackEdits.summary`) for a sortable QTableView.

    Sorting is numeric, NaN last either way; ties keep track-id order.
    """

    COLUMNS = [
        ("track_id", "Track", "{:d}"),
        ("length", "Length", "{:d}"),
        ("start", "Start", "{:d}"),
        ("end", "End", "{:d}"),
        ("mean_speed", "Mean speed (µm/frame)", "{:.3f}"),
        ("mean_link_cost", "Mean link cost (µm²)", "{:.3f}"),
        ("max_link_cost", "Max link cost (µm²)", "{:.3f}"),
        ("wrong_links", "Wrong links", "{:d}"),
    ]
    """(summary column, header, format); "Wrong links" only with a ground truth."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._table: dict[str, np.ndarray] = {}
        self._order = np.empty(0, dtype=np.int64)
        self._sort = (1, Qt.SortOrder.DescendingOrder)
        self._columns = self.COLUMNS[:-1]

    def set_summary(self, summary: dict[str, np.ndarray] | None, wrong: np.ndarray | None = None) -> None:
        """Show ``summary`` (one row per track) and, with a ground truth, each track's ``wrong`` link count."""
        self.beginResetModel()
        self._table = dict(summary or {})
        self._columns = self.COLUMNS if wrong is not None else self.COLUMNS[:-1]
        if wrong is not None:
            self._table["wrong_links"] = wrong
        self._order = np.arange(len(self._table.get("track_id", [])))
        self._apply_sort()
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt API)
        return 0 if parent.isValid() else len(self._order)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self._columns[section][1]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or role not in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.TextAlignmentRole):
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        key, _, fmt = self._columns[index.column()]
        value = self._table[key][self._order[index.row()]]
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):
            return "–"
        return fmt.format(int(value) if "d" in fmt else float(value))

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        self.layoutAboutToBeChanged.emit()
        self._sort = (column, order)
        self._apply_sort()
        self.layoutChanged.emit()

    def _apply_sort(self) -> None:
        column, order = self._sort
        if not len(self._order) or column >= len(self._columns):
            return
        values = np.asarray(self._table[self._columns[column][0]], dtype=np.float64)
        descending = order == Qt.SortOrder.DescendingOrder
        key = np.where(np.isnan(values), -np.inf if descending else np.inf, values)  # NaN last
        self._order = np.lexsort((np.asarray(self._table["track_id"]), -key if descending else key))

    def track_at(self, row: int) -> int:
        """The track id shown in ``row``."""
        return int(self._table["track_id"][self._order[row]])

    def worst_frame_at(self, row: int) -> int:
        """The frame of the costliest link of the track in ``row`` (its start if it has no links)."""
        return int(self._table["worst_frame"][self._order[row]])

    def row_of(self, track_id: int) -> int | None:
        """The row showing ``track_id``, if any."""
        hit = np.flatnonzero(np.asarray(self._table.get("track_id", []))[self._order] == track_id)
        return int(hit[0]) if len(hit) else None
