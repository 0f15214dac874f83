"""The dock widget: track a stack in a worker thread, then review and correct the tracks.

Two classes:

* :class:`TrackReview` — the review logic on a napari viewer (selection,
  picking by click, jumping, colouring, edits with undo/redo, keyboard
  shortcuts). It needs napari but no widgets of its own, so tests and the
  benchmark drive it directly.
* :class:`TrackerWidget` — the Qt dock widget: parameters, Run with a
  progress bar, the sortable track table, edit buttons.

Selection: a click (without dragging) on the canvas selects the nearest
track point in the current frame (or the nearest visible tail vertex) and
its track; the previously selected track and point are remembered, so
*join* joins the previous track to the selected one and *reassign* moves the
previously selected point into the selected track.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from qtpy.QtCore import QAbstractTableModel, QModelIndex, QObject, Qt, Signal
from qtpy.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ._edits import EditError, TrackEdits
from ._layers import (
    COLOUR_BY,
    KIND_KEY,
    colormaps,
    points_layer_data,
    table_from_tracks_layer,
    tracks_layer_data,
    tracks_layer_kwargs,
)
from ._reader import detections_kwargs, stack_layer_data

if TYPE_CHECKING:
    import napari

SHORTCUTS = {
    "delete": "Shift-D",
    "split": "Shift-S",
    "join": "Shift-J",
    "reassign": "Shift-R",
    "jump": "Shift-F",
    "undo": "Control-Z",
    "redo": "Control-Shift-Z",
}
"""Viewer key bindings (none of them is a napari default)."""

PICK_TOLERANCE_PX = 10.0
SELECTION_COLOUR = "#ffff00"


# =========================================================================== review logic



def _camera(viewer):
    """The viewer's camera (``viewer.scene.camera`` from napari 0.9, ``viewer.camera`` before)."""
    scene = getattr(viewer, "scene", None)
    return scene.camera if scene is not None and hasattr(scene, "camera") else viewer.camera


class TrackReview:
    """Review and correction of one Tracks layer in ``viewer``.

    Parameters
    ----------
    viewer : napari.Viewer
    layer : napari.layers.Tracks, optional
        The layer to review; see :meth:`set_layer`.
    bind_keys : bool
        Install the keyboard shortcuts of :data:`SHORTCUTS` on the viewer.
    """

    def __init__(self, viewer: napari.Viewer, layer=None, bind_keys: bool = True):
        self.viewer = viewer
        self.layer = None
        self.edits: TrackEdits | None = None
        self.ground_truth: dict[str, np.ndarray] | None = None
        self.correct: np.ndarray | None = None
        self.colour_by = "track"
        self.selected_track: int | None = None
        self.selected_row: int | None = None
        self.previous_track: int | None = None
        self.previous_row: int | None = None
        self.message = ""
        self.listeners: list = []  # callables(reason: str) run after every change
        self._selection_layers: dict[str, Any] = {}
        self._press_position = None
        if bind_keys:
            self.bind_keys()
        viewer.mouse_drag_callbacks.append(self._on_mouse_drag)
        if layer is not None:
            self.set_layer(layer)

    # ---------------------------------------------------------------- layer

    def set_layer(self, layer) -> None:
        """Review ``layer`` (a Tracks layer): build the edit model from its data and features."""
        self.layer = layer
        self.clear_selection(notify=False)
        if layer is None:
            self.edits = None
            self._notify("layer")
            return
        table = table_from_tracks_layer(layer.data, layer.features, layer.scale, layer.translate)
        self.edits = TrackEdits(table)
        if tuple(np.asarray(layer.scale)[1:]) != (1.0,) * (layer.ndim - 1) or np.any(np.asarray(layer.translate)):
            layer.scale = np.ones(layer.ndim)
            layer.translate = np.zeros(layer.ndim)
        self._update_correctness()
        self.refresh_layer()
        self._notify("layer")

    def set_ground_truth(self, table: dict[str, np.ndarray] | None) -> None:
        """Ground truth (``track_id, frame, z, y, x`` µm, optional ``visible``) for correctness colouring."""
        self.ground_truth = table
        self._update_correctness()
        if self.ground_truth is None and self.colour_by == "ground truth":
            self.colour_by = "track"
        elif self.ground_truth is not None:
            self.colour_by = "ground truth"
        self.refresh_layer()
        self._notify("ground_truth")

    def set_colour_by(self, mode: str) -> None:
        """``"track"``, ``"link cost"`` or ``"ground truth"`` (needs a ground truth)."""
        if mode not in COLOUR_BY:
            raise ValueError(f"colour by one of {', '.join(COLOUR_BY)}, not {mode!r}")
        if mode == "ground truth" and self.correct is None:
            raise ValueError("load a ground truth to colour by correctness")
        self.colour_by = mode
        if self.layer is not None:
            self.layer.color_by = COLOUR_BY[mode][0]
        self._notify("colour")

    def refresh_layer(self) -> None:
        """Push the edit model's live points into the Tracks layer."""
        if self.layer is None or self.edits is None:
            return
        data, features, graph = tracks_layer_data(self.edits, self.correct)
        layer = self.layer
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "color_by key not present" while data and features differ
            if len(data) == 0:
                data = np.zeros((1, 5))  # napari cannot show an empty Tracks layer; hide it instead
                features = {k: np.zeros(1, dtype=np.asarray(v).dtype) for k, v in features.items()}
                layer.visible = False
            layer.data = data
            layer.features = features
            if graph or layer.graph:
                layer.graph = graph
        if not isinstance(layer.colormaps_dict, dict) or "colour_track" not in layer.colormaps_dict:
            layer.colormaps_dict = colormaps()
        layer.color_by = COLOUR_BY[self.colour_by][0]

    def _update_correctness(self) -> None:
        if self.ground_truth is None or self.edits is None:
            self.correct = None
            return
        from tracker.metrics import link_correctness

        table = self.edits.table()
        self.correct = link_correctness(table, self.ground_truth) if len(table["frame"]) else np.empty(0, np.int8)

    # ---------------------------------------------------------------- selection

    @property
    def current_frame(self) -> int:
        return int(round(float(self.viewer.dims.point[0])))

    def select(self, track_id: int | None, row: int | None = None, notify: bool = True) -> None:
        """Select a track (and one of its points; default: its point in the current frame, if any)."""
        if self.edits is None:
            return
        if track_id is not None and len(self.edits.track_rows(int(track_id))) == 0:
            track_id = None
        if track_id is not None and row is None:
            row = self.edits.point_at(int(track_id), self.current_frame)
        if track_id != self.selected_track or row != self.selected_row:
            if self.selected_track is not None:
                self.previous_track, self.previous_row = self.selected_track, self.selected_row
            self.selected_track = None if track_id is None else int(track_id)
            self.selected_row = None if row is None else int(row)
        self._show_selection()
        if notify:
            self._notify("selection")

    def clear_selection(self, notify: bool = True) -> None:
        self.selected_track = self.selected_row = self.previous_track = self.previous_row = None
        self._show_selection()
        if notify:
            self._notify("selection")

    def pick(self, position, view_direction=None, dims_displayed=None) -> tuple[int, int] | None:
        """``(track_id, row)`` of the track point nearest to a click at world ``position`` (µm), or None.

        In 2D the distance is measured in the displayed plane; in 3D, to the
        ray along ``view_direction``. Points of the current frame come first;
        otherwise the nearest vertex of the visible tails.
        """
        if self.edits is None or self.layer is None:
            return None
        rows = self.edits.rows()
        if len(rows) == 0:
            return None
        position = np.asarray(position, dtype=np.float64)
        dims = [d for d in (dims_displayed or self.viewer.dims.displayed) if d >= 1]
        frame_now = self.current_frame
        frames = self.edits.column("frame")[rows]
        xyz = np.column_stack([self.edits.column(c)[rows] for c in ("z", "y", "x")])
        offset = xyz[:, [d - 1 for d in dims]] - position[dims]
        if view_direction is not None and len(dims) == 3:
            direction = np.asarray(view_direction, dtype=np.float64)[dims]
            norm = np.linalg.norm(direction)
            if norm > 0:
                direction = direction / norm
                offset = offset - np.outer(offset @ direction, direction)
        distance = np.linalg.norm(offset, axis=1)
        tolerance = PICK_TOLERANCE_PX / max(float(_camera(self.viewer).zoom), 1e-12)
        tail = int(getattr(self.layer, "tail_length", 30))
        for candidates in (frames == frame_now, (frames <= frame_now) & (frames >= frame_now - tail)):
            index = np.flatnonzero(candidates & (distance <= tolerance))
            if len(index):
                best = index[np.argmin(distance[index])]
                row = int(rows[best])
                return int(self.edits.column("track_id")[row]), row
        return None

    def select_at(self, position, view_direction=None, dims_displayed=None) -> bool:
        """Select what :meth:`pick` finds at ``position``; clears the selection on a miss. True on a hit."""
        hit = self.pick(position, view_direction, dims_displayed)
        if hit is None:
            self.clear_selection()
            return False
        track_id, row = hit
        if self.edits.column("frame")[row] != self.current_frame:
            row = self.edits.point_at(track_id, self.current_frame) or row
        self.select(track_id, row)
        return True

    def _on_mouse_drag(self, viewer, event):
        """Select on a click; let drags (pan, rotate) through."""
        if event.type != "mouse_press" or event.button != 1 or self.layer is None:
            return
        active = viewer.layers.selection.active
        if active is not None and str(getattr(active, "mode", "pan_zoom")) != "pan_zoom":
            return
        start = np.asarray(event.pos, dtype=float)
        moved = False
        yield
        while event.type == "mouse_move":
            if np.linalg.norm(np.asarray(event.pos, dtype=float) - start) > 4:
                moved = True
            yield
        if not moved:
            self.select_at(event.position, getattr(event, "view_direction", None), list(event.dims_displayed))

    def jump_to(self, track_id: int | None = None, frame: int | None = None) -> None:
        """Move to a track: its selected point's frame (or ``frame``, or its first frame), camera centred on it."""
        if self.edits is None:
            return
        track_id = self.selected_track if track_id is None else int(track_id)
        if track_id is None:
            return
        rows = self.edits.track_rows(track_id)
        if len(rows) == 0:
            return
        if frame is not None:
            row = self.edits.point_at(track_id, frame)
        elif track_id == self.selected_track and self.selected_row is not None:
            row = self.selected_row
        else:
            row = self.edits.point_at(track_id, self.current_frame)
        row = int(rows[0]) if row is None else row
        t = int(self.edits.column("frame")[row])
        zyx = [float(self.edits.column(c)[row]) for c in ("z", "y", "x")]
        self.viewer.dims.set_point(0, t)
        if self.viewer.dims.ndisplay == 2 and self.viewer.dims.ndim >= 4:
            self.viewer.dims.set_point(1, zyx[0])
        _camera(self.viewer).center = tuple(zyx)
        self.select(track_id, row)

    def _show_selection(self) -> None:
        """The selected track as a thick yellow line and its selected point as a ring."""
        if self.edits is None or self.selected_track is None:
            for layer in self._selection_layers.values():
                layer.visible = False
            return
        rows = self.edits.track_rows(self.selected_track)
        data = np.column_stack([self.edits.column(c)[rows] for c in ("track_id", "frame", "z", "y", "x")])
        track_layer = self._selection_layer("track")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            track_layer.data = data.astype(np.float64)
            track_layer.features = {"selected": np.ones(len(rows))}
        track_layer.color_by = "selected"
        track_layer.tail_length = getattr(self.layer, "tail_length", 10)
        track_layer.visible = True
        point_layer = self._selection_layer("point")
        if self.selected_row is not None:
            row = self.selected_row
            point_layer.data = np.array([[self.edits.column(c)[row] for c in ("frame", "z", "y", "x")]], float)
            point_layer.visible = True
        else:
            point_layer.visible = False

    def _selection_layer(self, which: str):
        layer = self._selection_layers.get(which)
        if layer is not None and layer in self.viewer.layers:
            return layer
        from napari.layers import Points, Tracks
        from napari.utils.colormaps import Colormap

        active = self.viewer.layers.selection.active
        metadata = {KIND_KEY: "selection"}
        if which == "track":
            layer = Tracks(
                np.zeros((1, 5)), name="selected track", features={"selected": np.ones(1)}, color_by="selected",
                colormaps_dict={"selected": Colormap([SELECTION_COLOUR, SELECTION_COLOUR], name="tracker_selected")},
                tail_width=7, tail_length=10, head_length=0, opacity=0.9, blending="translucent",
                metadata=metadata,
            )
        else:
            layer = Points(
                np.zeros((1, 4)), name="selected point", size=1.2, symbol="ring", face_color=SELECTION_COLOUR,
                border_width=0, blending="translucent_no_depth", metadata=metadata,
            )
        self.viewer.add_layer(layer)
        if active is not None and active in self.viewer.layers:
            self.viewer.layers.selection.active = active
        self._selection_layers[which] = layer
        return layer

    # ---------------------------------------------------------------- edits

    def _apply(self, make_edit) -> bool:
        if self.edits is None:
            self._say("no tracks to edit: run the tracker or pick a Tracks layer")
            return False
        try:
            edit = make_edit()
        except EditError as error:
            self._say(str(error))
            return False
        self._after_edit(edit.description, edit.selection)
        return True

    def _after_edit(self, description: str, selection) -> None:
        self._update_correctness()
        self.refresh_layer()
        track_id, row = selection
        self.selected_track = self.selected_row = None
        self.previous_track = self.previous_row = None
        if track_id is not None:
            self.select(track_id, row, notify=False)
        else:
            self._show_selection()
        self._say(description, reason="edit")

    def delete_track(self, track_id: int | None = None) -> bool:
        """Delete the selected track (or ``track_id``)."""
        track_id = self.selected_track if track_id is None else track_id
        if track_id is None:
            self._say("select a track to delete (click it)")
            return False
        return self._apply(lambda: self.edits.delete_track(track_id))

    def split_track(self, track_id: int | None = None, frame: int | None = None) -> bool:
        """Split the selected track at the current frame: that frame starts a new track."""
        track_id = self.selected_track if track_id is None else track_id
        frame = self.current_frame if frame is None else frame
        if track_id is None:
            self._say("select a track to split (click it), then go to the first frame of its second part")
            return False
        return self._apply(lambda: self.edits.split_track(track_id, frame))

    def join_tracks(self, first: int | None = None, second: int | None = None) -> bool:
        """Join the previously selected track and the selected one (end of the earlier to start of the later)."""
        first = self.previous_track if first is None else first
        second = self.selected_track if second is None else second
        if first is None or second is None:
            self._say("click one track, then the other, then join")
            return False
        return self._apply(lambda: self.edits.join_tracks(first, second))

    def reassign_point(self, row: int | None = None, track_id: int | None = None) -> bool:
        """Move the previously selected point into the selected track (swapping with its point in that frame)."""
        row = self.previous_row if row is None else row
        track_id = self.selected_track if track_id is None else track_id
        if row is None or track_id is None:
            self._say("click the point to move, then the track to move it into, then reassign")
            return False
        return self._apply(lambda: self.edits.reassign_point(row, track_id))

    def undo(self) -> bool:
        if self.edits is None or not self.edits.can_undo:
            self._say("nothing to undo")
            return False
        edit = self.edits.undo()
        self._after_edit(f"undone: {edit.description}", (self.selected_track, None))
        return True

    def redo(self) -> bool:
        if self.edits is None or not self.edits.can_redo:
            self._say("nothing to redo")
            return False
        edit = self.edits.redo()
        self._after_edit(f"redone: {edit.description}", edit.selection)
        return True

    def bind_keys(self) -> None:
        """Viewer-wide keyboard shortcuts (:data:`SHORTCUTS`)."""
        actions = {
            "delete": lambda viewer: self.delete_track(),
            "split": lambda viewer: self.split_track(),
            "join": lambda viewer: self.join_tracks(),
            "reassign": lambda viewer: self.reassign_point(),
            "jump": lambda viewer: self.jump_to(),
            "undo": lambda viewer: self.undo(),
            "redo": lambda viewer: self.redo(),
        }
        for name, action in actions.items():
            self.viewer.bind_key(SHORTCUTS[name], action, overwrite=True)

    # ---------------------------------------------------------------- output

    def save(self, path: str | Path) -> Path:
        """Write the reviewed tracks (the ``track run`` columns) to a CSV file, replacing it."""
        from tracker.io import write_table

        if self.edits is None:
            raise EditError("no tracks to save")
        path = Path(path)
        write_table(path, self.edits.output_table(), overwrite=True)
        self._say(f"saved {len(self.edits.track_ids())} tracks to {path}")
        return path

    def _say(self, message: str, reason: str = "message") -> None:
        self.message = message
        self.viewer.status = message
        self._notify(reason)

    def _notify(self, reason: str) -> None:
        for listener in list(self.listeners):
            listener(reason)


# =========================================================================== Qt widget


class _TrackTableModel(QAbstractTableModel):
    """Per-track summary (from :meth:`TrackEdits.summary`) for a sortable QTableView."""

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

    def __init__(self, parent=None):
        super().__init__(parent)
        self._table: dict[str, np.ndarray] = {}
        self._order = np.empty(0, dtype=np.int64)
        self._sort = (1, Qt.SortOrder.DescendingOrder)
        self._columns = self.COLUMNS[:-1]

    def set_summary(self, summary: dict[str, np.ndarray] | None, wrong: np.ndarray | None = None) -> None:
        self.beginResetModel()
        self._table = dict(summary or {})
        self._columns = self.COLUMNS if wrong is not None else self.COLUMNS[:-1]
        if wrong is not None:
            self._table["wrong_links"] = wrong
        n = len(self._table.get("track_id", []))
        self._order = np.arange(n)
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
        ids = np.asarray(self._table["track_id"])
        self._order = np.lexsort((ids, -key if descending else key))

    def track_at(self, row: int) -> int:
        return int(self._table["track_id"][self._order[row]])

    def row_of(self, track_id: int) -> int | None:
        hit = np.flatnonzero(np.asarray(self._table.get("track_id", []))[self._order] == track_id)
        return int(hit[0]) if len(hit) else None


class _Failed:
    """A worker's expected failure (bad input), returned rather than raised (superqt re-raises exceptions)."""

    def __init__(self, error: Exception):
        self.error = error


class _Progress(QObject):
    changed = Signal(str, int, int)


def _spin(value: float, minimum: float, maximum: float, step: float, decimals: int = 3, special: str = ""):
    box = QDoubleSpinBox()
    box.setRange(minimum, maximum)
    box.setDecimals(decimals)
    box.setSingleStep(step)
    box.setValue(value)
    if special:
        box.setSpecialValueText(special)
    return box


class TrackerWidget(QWidget):
    """Track a stack and review the tracks (dock widget of the ``tracker3d`` napari plugin)."""

    def __init__(self, napari_viewer: napari.Viewer, parent=None):
        super().__init__(parent)
        from tracker.backend import gpu_available
        from tracker.gaps import DEFAULT_MAX_GAP
        from tracker.lap import available_solvers
        from tracker.pipeline import DEFAULT_MAX_DISPLACEMENT_UM, DEFAULT_SPOT_RADIUS_UM

        self.viewer = napari_viewer
        self.review = TrackReview(napari_viewer)
        self.review.listeners.append(self._on_review_changed)
        self.worker = None
        self.result = None
        self._progress = _Progress()
        self._progress.changed.connect(self._on_progress)
        self._updating = False

        layout = QVBoxLayout(self)

        # ---- tracking
        box = QGroupBox("Track")
        form = QFormLayout(box)
        self.image_combo = QComboBox()
        self.open_button = QPushButton("Open TIFF…")
        self.open_button.clicked.connect(self._open_dialog)
        row = QHBoxLayout()
        row.addWidget(self.image_combo, 1)
        row.addWidget(self.open_button)
        form.addRow("Stack", row)
        self.voxel = [_spin(v, 1e-4, 1e4, 0.01, 4) for v in (1.0, 1.0, 1.0)]
        form.addRow("Voxel size z, y, x (µm)", self._triple(self.voxel))
        # 0 shows "auto": the radius is estimated from the stack (DEFAULT_SPOT_RADIUS_UM is None).
        self.spot_radius = [_spin(DEFAULT_SPOT_RADIUS_UM or 0.0, 0.0, 100.0, 0.05, special="auto") for _ in range(3)]
        form.addRow("Spot radius z, y, x (µm)", self._triple(self.spot_radius))
        self.threshold = _spin(0.0, 0.0, 1000.0, 0.5, 2, special="auto")
        self.threshold.setToolTip("Detection threshold in units of the filter's noise; 'auto' chooses it per frame.")
        form.addRow("Threshold (× noise)", self.threshold)
        self.max_displacement = _spin(DEFAULT_MAX_DISPLACEMENT_UM, 0.01, 1000.0, 0.1)
        form.addRow("Max displacement (µm)", self.max_displacement)
        self.predict_motion = QCheckBox("predict from recent motion")
        self.predict_motion.setChecked(True)
        self.predict_motion.setToolTip("Persistence-aware prediction and a per-particle search radius; "
                                       "off: nearest-neighbour linking.")
        form.addRow("Motion", self.predict_motion)
        self.smoothing = QCheckBox("re-link with the next step too")
        self.smoothing.setChecked(True)
        self.smoothing.setToolTip("Forward-backward: with persistent motion, link every frame pair again, "
                                  "weighing how each candidate link continues into the next frame, then "
                                  "exchange single detections between tracks where that fits both better.")
        self.predict_motion.toggled.connect(self.smoothing.setEnabled)
        form.addRow("Smoothing", self.smoothing)
        self.max_gap = QSpinBox()
        self.max_gap.setRange(0, 20)
        self.max_gap.setValue(DEFAULT_MAX_GAP)
        self.max_gap.setToolTip("Close gaps of up to this many missing frames (0: off).")
        form.addRow("Max gap (frames)", self.max_gap)
        self.solver = QComboBox()
        self.solver.addItems(available_solvers("gated"))
        form.addRow("Solver", self.solver)
        self.device = QComboBox()
        self.device.addItems(["auto", "cpu", "gpu"])
        if not gpu_available():
            self.device.setToolTip("No CUDA GPU found: 'auto' runs on the CPU.")
        form.addRow("Device", self.device)
        self.run_button = QPushButton("Run tracking")
        self.run_button.clicked.connect(self.run)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 100)
        self.progress_bar.setValue(0)
        form.addRow(self.run_button, self.progress_bar)
        layout.addWidget(box)

        # ---- review
        box = QGroupBox("Review")
        form = QFormLayout(box)
        self.tracks_combo = QComboBox()
        form.addRow("Tracks layer", self.tracks_combo)
        self.truth_combo = QComboBox()
        form.addRow("Ground truth", self.truth_combo)
        self.colour_combo = QComboBox()
        self.colour_combo.addItems(list(COLOUR_BY))
        form.addRow("Colour by", self.colour_combo)
        self.table_model = _TrackTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(200)
        self.table.clicked.connect(self._on_table_clicked)
        form.addRow(self.table)
        grid = QGridLayout()
        self.buttons: dict[str, QPushButton] = {}
        labels = [("jump", "Jump to track"), ("delete", "Delete track"), ("split", "Split at frame"),
                  ("join", "Join previous → selected"), ("reassign", "Reassign previous point"),
                  ("undo", "Undo"), ("redo", "Redo"), ("save", "Save tracks…")]
        for i, (name, text) in enumerate(labels):
            shortcut = SHORTCUTS.get(name)
            button = QPushButton(text)
            if shortcut:
                button.setToolTip(f"{text} ({shortcut})")
            self.buttons[name] = button
            grid.addWidget(button, i // 2, i % 2)
        self.buttons["jump"].clicked.connect(lambda: self.review.jump_to())
        self.buttons["delete"].clicked.connect(lambda: self.review.delete_track())
        self.buttons["split"].clicked.connect(lambda: self.review.split_track())
        self.buttons["join"].clicked.connect(lambda: self.review.join_tracks())
        self.buttons["reassign"].clicked.connect(lambda: self.review.reassign_point())
        self.buttons["undo"].clicked.connect(lambda: self.review.undo())
        self.buttons["redo"].clicked.connect(lambda: self.review.redo())
        self.buttons["save"].clicked.connect(self._save_dialog)
        form.addRow(grid)
        help_text = QLabel(
            "Click a track to select it (click another to keep the first as 'previous'). "
            + ", ".join(f"{k} {v}" for k, v in SHORTCUTS.items())
        )
        help_text.setWordWrap(True)
        form.addRow(help_text)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        form.addRow(self.status)
        layout.addWidget(box)
        layout.addStretch(1)

        self.image_combo.currentIndexChanged.connect(self._on_image_changed)
        self.tracks_combo.currentIndexChanged.connect(self._on_tracks_changed)
        self.truth_combo.currentIndexChanged.connect(self._on_truth_changed)
        self.colour_combo.currentTextChanged.connect(self._on_colour_changed)
        self.viewer.layers.events.inserted.connect(self._refresh_combos)
        self.viewer.layers.events.removed.connect(self._refresh_combos)
        self.viewer.layers.events.changed.connect(self._refresh_combos)
        self._refresh_combos()
        self._update_buttons()

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def _triple(boxes) -> QWidget:
        holder = QWidget()
        row = QHBoxLayout(holder)
        row.setContentsMargins(0, 0, 0, 0)
        for box in boxes:
            row.addWidget(box)
        return holder

    def _layers_of(self, layer_type: str, kinds: tuple[str, ...] | None = None) -> list:
        out = []
        for layer in self.viewer.layers:
            if layer.__class__.__name__.lower() != layer_type:
                continue
            kind = layer.metadata.get(KIND_KEY)
            if kind == "selection" or (kinds is not None and kind not in kinds):
                continue
            out.append(layer)
        return out

    def _layer_named(self, name: str | None):
        return self.viewer.layers[name] if name and name in self.viewer.layers else None

    def _refresh_combos(self, event=None) -> None:
        previous_image = self.image_combo.currentText()
        self._updating = True
        try:
            for combo, names, keep_none in (
                (self.image_combo, [layer.name for layer in self._layers_of("image")], False),
                (self.tracks_combo,
                 [layer.name for layer in self._layers_of("tracks") if layer.metadata.get(KIND_KEY) != "ground_truth"],
                 True),
                (self.truth_combo, [layer.name for layer in self._layers_of("tracks")], True),
            ):
                current = combo.currentText()
                combo.clear()
                if keep_none:
                    combo.addItem("(none)")
                combo.addItems(names)
                if current in names:
                    combo.setCurrentText(current)
        finally:
            self._updating = False
        if self.review.layer is not None and self.review.layer not in self.viewer.layers:
            self.review.set_layer(None)
        if self.review.layer is not None:
            self._updating = True
            self.tracks_combo.setCurrentText(self.review.layer.name)
            self._updating = False
        if self.image_combo.currentText() != previous_image:
            self._on_image_changed()

    def _on_image_changed(self, *args) -> None:
        if self._updating:
            return
        layer = self._layer_named(self.image_combo.currentText())
        if layer is None:
            return
        scale = np.asarray(layer.scale, dtype=float)
        if len(scale) >= 3:
            for box, value in zip(self.voxel, scale[-3:]):
                box.setValue(float(value))
        recommended = layer.metadata.get("recommended")
        if recommended:
            for box, value in zip(self.spot_radius, recommended["spot_radius"]):
                box.setValue(value)
            self.max_displacement.setValue(recommended["max_displacement"])

    def _on_tracks_changed(self, *args) -> None:
        if self._updating:
            return
        layer = self._layer_named(self.tracks_combo.currentText())
        if layer is not self.review.layer:
            self.review.set_layer(layer)
            truth = self._layer_named(self.truth_combo.currentText())
            if truth is not None and truth is not layer:
                self._on_truth_changed()

    def _on_truth_changed(self, *args) -> None:
        if self._updating:
            return
        layer = self._layer_named(self.truth_combo.currentText())
        if layer is None or layer is self.review.layer:
            self.review.set_ground_truth(None)
        else:
            self.review.set_ground_truth(table_from_tracks_layer(layer.data, layer.features, layer.scale,
                                                                 layer.translate))
        self._sync_colour_combo()

    def _on_colour_changed(self, text: str) -> None:
        if self._updating or not text:
            return
        try:
            self.review.set_colour_by(text)
        except ValueError as error:
            self.status.setText(str(error))
            self._sync_colour_combo()

    def _sync_colour_combo(self) -> None:
        self._updating = True
        self.colour_combo.setCurrentText(self.review.colour_by)
        self._updating = False

    # ---------------------------------------------------------------- tracking

    def open_stack(self, path: str | Path):
        """Open a TIFF stack as an Image layer (scale from its voxel size) and select it for tracking."""
        data, kwargs, _ = stack_layer_data(Path(path))
        layer = self.viewer.add_image(data, **kwargs)
        self.image_combo.setCurrentText(layer.name)
        self._on_image_changed()
        return layer

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a TIFF stack", "", "TIFF (*.tif *.tiff)")
        if path:
            try:
                self.open_stack(path)
            except ValueError as error:
                self.status.setText(str(error))

    def parameters(self) -> dict[str, Any]:
        """Keyword arguments for :func:`tracker.pipeline.track_stack` from the form."""
        threshold = self.threshold.value()
        return {
            "voxel_size_um": tuple(box.value() for box in self.voxel),
            "spot_radius_um": (None if any(box.value() == box.minimum() for box in self.spot_radius)
                               else tuple(box.value() for box in self.spot_radius)),
            "threshold": None if threshold == self.threshold.minimum() else threshold,
            "max_displacement_um": self.max_displacement.value(),
            "motion": "persistent" if self.predict_motion.isChecked() else "none",
            "adaptive_radius": self.predict_motion.isChecked(),
            "smoothing": self.predict_motion.isChecked() and self.smoothing.isChecked(),
            "max_gap": self.max_gap.value(),
            "solver": self.solver.currentText(),
            "device": self.device.currentText(),
        }

    @property
    def running(self) -> bool:
        return self.worker is not None

    def run(self) -> None:
        """Track the selected Image layer in a worker thread; the viewer stays responsive."""
        if self.running:
            return
        from napari.qt.threading import create_worker

        image = self._layer_named(self.image_combo.currentText())
        if image is None:
            self.status.setText("open a stack first (Open TIFF…, File › Open, or File › Open Sample)")
            return
        params = self.parameters()
        source = self._stack_source(image, params["voxel_size_um"])
        progress = self._progress.changed.emit

        def work():
            from tracker.pipeline import track_stack

            try:
                return track_stack(source(), progress=progress, **params)
            except (ValueError, RuntimeError, OSError, MemoryError) as error:  # InputError is a ValueError
                return _Failed(error)  # reported in the widget, not as a crash

        self.worker = create_worker(work)
        self.worker.returned.connect(lambda result: self._on_returned(image, params, result))
        self.worker.errored.connect(self._on_error)
        self.worker.finished.connect(self._on_finished)
        self.run_button.setEnabled(False)
        self.progress_bar.setValue(0)
        self.status.setText("tracking…")
        self.worker.start()

    @staticmethod
    def _stack_source(image, voxel_size):
        """A callable run in the worker that returns a :class:`tracker.io.Stack` (read lazily from its file)."""
        path = image.metadata.get("path")
        data = image.data

        def source():
            from tracker.io import Stack, as_stack, read_stack

            if path and Path(path).is_file():
                return read_stack(path, voxel_size)
            if hasattr(data, "_stack"):
                return data._stack
            if isinstance(data, Stack):
                return data
            return as_stack(data, voxel_size)

        return source

    def _on_progress(self, stage: str, done: int, total: int) -> None:
        share = {"detect": (0, 85), "link": (85, 93), "smooth": (93, 99), "exchange": (99, 100)}.get(stage, (0, 100))
        fraction = done / total if total else 1.0
        self.progress_bar.setValue(int(share[0] + (share[1] - share[0]) * fraction))
        self.progress_bar.setFormat(f"{stage} {done}/{total}")

    def _on_error(self, error: Exception) -> None:
        self.progress_bar.setFormat("failed")
        self.status.setText(f"tracking failed: {error}")

    def _on_returned(self, image, params, result) -> None:
        if isinstance(result, _Failed):
            self._on_error(result.error)
        else:
            self._on_tracked(image, params, result)

    def _on_finished(self) -> None:
        self.worker = None
        self.run_button.setEnabled(True)

    def _on_tracked(self, image, params, result) -> None:
        self.result = result
        image.scale = (1.0, *result.voxel_size)
        self.progress_bar.setValue(100)
        self.progress_bar.setFormat("done")
        name = image.name
        for suffix in (" detections", " tracks"):
            if f"{name}{suffix}" in self.viewer.layers:
                self.viewer.layers.remove(f"{name}{suffix}")
        data, features = points_layer_data(result.detections)
        kwargs = detections_kwargs(f"{name} detections", features)
        kwargs["metadata"]["parameters"] = {k: v for k, v in params.items()}
        self.viewer.add_points(data, **kwargs)
        edits = TrackEdits(result.tracks)
        data, features, graph = tracks_layer_data(edits)
        layer = self.viewer.add_tracks(data, **tracks_layer_kwargs(f"{name} tracks", features, graph,
                                                                   parameters=params))
        self._refresh_combos()
        self.tracks_combo.setCurrentText(layer.name)
        if self.review.layer is not layer:
            self.review.set_layer(layer)
        truth = self._layer_named(f"{name} ground truth")
        if truth is not None:
            self.truth_combo.setCurrentText(truth.name)  # triggers _on_truth_changed
            if self.review.ground_truth is None:
                self._on_truth_changed()
        from tracker.link import summary_text

        timings = ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items())
        self.status.setText(
            f"{len(result.detections['frame'])} detections, {result.n_tracks} tracks ({timings})\n"
            f"{summary_text(result.linking)}"
        )

    # ---------------------------------------------------------------- review

    def _on_review_changed(self, reason: str) -> None:
        review = self.review
        if reason in ("layer", "edit", "ground_truth"):
            wrong = None
            if review.correct is not None and review.edits is not None:
                rows_ids = review.edits.column("track_id")[review.edits.rows()]
                summary_ids = review.edits.summary()["track_id"]
                wrong = np.bincount(np.searchsorted(summary_ids, rows_ids), weights=(review.correct == 0),
                                    minlength=len(summary_ids)).astype(np.int64)
            self.table_model.set_summary(review.edits.summary() if review.edits is not None else None, wrong)
        if reason in ("selection", "edit", "layer"):
            self._select_table_row(review.selected_track)
        if reason == "ground_truth" or reason == "colour":
            self._sync_colour_combo()
        parts = []
        if review.selected_track is not None:
            parts.append(f"selected track {review.selected_track}")
            if review.selected_row is not None:
                parts.append(f"point in frame {int(review.edits.column('frame')[review.selected_row])}")
        if review.previous_track is not None:
            parts.append(f"previous track {review.previous_track}")
        text = "; ".join(parts)
        if reason in ("edit", "message") and review.message:
            text = review.message + ("\n" + text if text else "")
        self.status.setText(text)
        self._update_buttons()

    def _select_table_row(self, track_id: int | None) -> None:
        if track_id is None:
            self.table.clearSelection()
            return
        row = self.table_model.row_of(track_id)
        if row is None:
            return
        self.table.selectRow(row)
        self.table.scrollTo(self.table_model.index(row, 0))

    def _on_table_clicked(self, index) -> None:
        track_id = self.table_model.track_at(index.row())
        self.review.jump_to(track_id)

    def _update_buttons(self) -> None:
        review = self.review
        has = review.edits is not None
        self.buttons["jump"].setEnabled(has and review.selected_track is not None)
        self.buttons["delete"].setEnabled(has and review.selected_track is not None)
        self.buttons["split"].setEnabled(has and review.selected_track is not None)
        self.buttons["join"].setEnabled(has and review.selected_track is not None and review.previous_track is not None)
        self.buttons["reassign"].setEnabled(
            has and review.previous_row is not None and review.selected_track is not None)
        self.buttons["undo"].setEnabled(has and review.edits.can_undo)
        self.buttons["redo"].setEnabled(has and review.edits.can_redo)
        self.buttons["save"].setEnabled(has)
        if has and review.edits.can_undo:
            self.buttons["undo"].setToolTip(f"Undo {review.edits.undo_description} ({SHORTCUTS['undo']})")
        if has and review.edits.can_redo:
            self.buttons["redo"].setToolTip(f"Redo {review.edits.redo_description} ({SHORTCUTS['redo']})")

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save tracks", "tracks.csv", "CSV (*.csv)")
        if path:
            try:
                self.review.save(path)
            except ValueError as error:
                self.status.setText(str(error))
