"""The "Track" box of the dock widget: pick a stack, set its voxel size and the parameters, run, cancel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from qtpy.QtCore import Signal
from qtpy.QtWidgets import QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QProgressBar, QPushButton, QWidget

from tracker.params import DetectionParams, LinkingParams
from tracker.progress import Stage

from ._axis_boxes import AxisBoxes
from ._fold import make_foldable
from ._layer_choice import LayerChoice
from ._layers import KIND_KEY
from ._parameter_form import UNBOUNDED, ParameterForm
from ._reader import stack_layers
from ._tracking_run import Cancelled, TrackingRun

PROGRESS_SHARE = {Stage.ESTIMATE: (0, 20), Stage.DETECT: (20, 85), Stage.LINK: (85, 93), Stage.SMOOTH: (93, 99),
                  Stage.EXCHANGE: (99, 100)}
"""Where each stage runs on the progress bar (percent): roughly the shares of a CPU run's time on the bundled
sample (detection 0.42 s of 0.47 s; the linker's 0.05 s shared among its passes). The estimates (a spot size or
a threshold not given) sample at most 10 frames whatever the stack's length, so their share varies most: more
than detection's on the sample (0.66 s against 0.24 s), a tenth of it on 30 frames of 32×256×256."""

NO_DETECTIONS = "0 detections — check voxel size, spot radius, threshold"


def voxel_size_assumed(layer) -> bool:
    """Whether an Image layer's voxel size is a guess: no voxel size in its file, or opened without our reader
    (napari's own reader, an array) with unit scale."""
    if "voxel_size_assumed" in layer.metadata:
        return bool(layer.metadata["voxel_size_assumed"])
    return layer.metadata.get(KIND_KEY) != "stack" and bool(np.all(np.asarray(layer.scale)[-3:] == 1))


class TrackPanel(QGroupBox):
    """Pick an Image layer, set voxel size and parameters (forms generated from :mod:`tracker.params`), run.

    Signals
    -------
    tracked(image, params, result)
        A run found detections: the Image layer, the ``track_stack`` keyword arguments, the ``TrackingResult``.
    message(text, level)
        For the user: ``level`` is "info", "warning" or "error" (the widget shows it).
    """

    tracked = Signal(object, object, object)
    message = Signal(str, str)

    def __init__(self, viewer, parent=None):
        super().__init__("Track", parent)
        make_foldable(self)
        from tracker.backend import gpu_available
        from tracker.lap import available_solvers

        self.viewer = viewer
        self._updating = False
        self.run_job = TrackingRun(self)
        self.run_job.progressed.connect(self.show_progress)
        self.run_job.done.connect(self._on_done)
        layout = QFormLayout(self)
        self.image_choice = LayerChoice(viewer, "image", follow_new=True)
        self.image_choice.layer_changed.connect(self.show_image_settings)
        self.open_button = QPushButton("Open TIFF…")
        self.open_button.clicked.connect(self._open_dialog)
        layout.addRow("Stack", _row(self.image_choice, self.open_button))
        self.voxel = AxisBoxes(1e-4, UNBOUNDED, 0.01, 4, "µm")
        self.voxel.setToolTip("The stack's voxel size z, y, x, from its file; set it where the file has none.")
        self.voxel.valueChanged.connect(self._on_voxel_edited)
        layout.addRow("Voxel size (z, y, x)", self.voxel)
        self.detection = ParameterForm(DetectionParams)
        if not gpu_available():
            device = self.detection.inputs["device"]
            device.setToolTip(device.toolTip() + "\nNo CUDA GPU found: 'auto' runs on the CPU.")
        self.linking = ParameterForm(LinkingParams, choices={"solver": available_solvers("gated")})
        layout.addRow(self.detection)
        layout.addRow(self.linking)

        self.run_button = QPushButton("Run tracking")
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 100)
        self.progress_bar.setValue(0)
        layout.addRow(_row(self.run_button, self.cancel_button, self.progress_bar))

    def close_panel(self) -> None:
        """Stop listening to the viewer and cancel a run (the dock is closing)."""
        self.image_choice.close_choice()
        self.run_job.cancel()

    # ---------------------------------------------------------------- the stack

    @property
    def image(self):
        """The Image layer to track, or None."""
        return self.image_choice.layer

    def open_stack(self, path: str | Path):
        """Open a TIFF stack as an Image layer (scale from its voxel size; one per channel) and select the first
        for tracking."""
        layers = [self.viewer.add_image(data, **kwargs) for data, kwargs, _ in stack_layers(Path(path))]
        self.image_choice.choose(layers[0])
        return layers[0]

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a TIFF stack", "", "TIFF (*.tif *.tiff)")
        if path:
            try:
                self.open_stack(path)
            except ValueError as error:
                self.message.emit(str(error), "error")

    def show_image_settings(self, layer) -> None:
        """Fill in the voxel size of Image ``layer`` (and its recommended parameters); warn if it is a guess."""
        if layer is None or getattr(layer, "rgb", False) or layer.ndim != 4:
            return  # refused (with the reason) when Run is pressed
        self._updating = True
        try:
            self.voxel.setValue(tuple(np.asarray(layer.scale, dtype=float)[-3:]))
        finally:
            self._updating = False
        self.detection.set_values({k: v for k, v in layer.metadata.get("recommended", {}).items()
                                   if k in self.detection.inputs})
        self.linking.set_values({k: v for k, v in layer.metadata.get("recommended", {}).items()
                                 if k in self.linking.inputs})
        if voxel_size_assumed(layer):
            self.message.emit(f"'{layer.name}' has no voxel size: 1 µm is assumed. Set the voxel size "
                              "(z, y, x) before tracking.", "warning")

    def _on_voxel_edited(self, *args) -> None:
        """The user set the voxel size: scale the image to it and show it whole."""
        layer = self.image
        if self._updating or layer is None or layer.ndim != 4 or getattr(layer, "rgb", False):
            return
        layer.scale = (float(layer.scale[0]), *self.voxel.value())
        layer.metadata["voxel_size_assumed"] = False
        self.viewer.reset_view()

    # ---------------------------------------------------------------- running

    def parameters(self) -> dict[str, Any]:
        """Keyword arguments for :func:`tracker.pipeline.track_stack` (ValueError: a value out of range)."""
        return {"voxel_size_um": self.voxel.value(), **self.detection.values().to_dict(),
                **self.linking.values().to_dict()}

    @property
    def running(self) -> bool:
        return self.run_job.running

    def run(self) -> None:
        """Track the selected Image layer in a worker thread; the viewer stays responsive."""
        image = self.image
        if self.running:
            return
        if image is None:
            self.message.emit("open a stack first (Open TIFF…, File › Open, or File › Open Sample)", "error")
            return
        if getattr(image, "rgb", False):
            self.message.emit(f"'{image.name}' is an RGB image: tracking needs one channel, a (T, Z, Y, X) stack "
                              "(right-click the layer › Split RGB)", "warning")
            return
        if image.ndim == 3 and not image.multiscale:
            image = self._as_time_series(image)
        if image.ndim != 4:
            self.message.emit(f"'{image.name}' has {image.ndim} dimensions: tracking needs a (T, Z, Y, X) layer, "
                              "or a (T, Y, X) one (a 2D time series); open the stack with this plugin's reader",
                              "warning")
            return
        try:
            params = self.parameters()
        except ValueError as error:
            self.message.emit(str(error), "error")
            return
        if voxel_size_assumed(image):
            self.message.emit(f"tracking '{image.name}' with an assumed voxel size of "
                              f"{', '.join(f'{v:g}' for v in params['voxel_size_um'])} µm", "warning")
        path, data, voxel_size = image.metadata.get("path"), image.data, params["voxel_size_um"]
        channel = image.metadata.get("channel")

        def stack_source():  # runs in the worker: opening a file may take a while
            from tracker.io import as_stack, read_stack

            if path and Path(path).exists():
                return read_stack(path, voxel_size, channel=channel)
            return as_stack(data, voxel_size)

        self._job = (image, params)
        self.run_job.start(stack_source, params)
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("starting…")

    def _as_time_series(self, layer):
        """A (T, Y, X) Image layer (napari's own reader of a 2D time series, an array) replaced by the
        (T, 1, Y, X) layer this plugin's reader gives such a series: the same data (a view where the array allows
        one), one plane a frame, in the same place of the layer list; its z scale is its y scale (one plane: no
        distance along z is ever measured). Returns the new layer, now the one to track."""
        from napari.layers import Image

        try:
            planes = layer.data[:, np.newaxis]
        except (TypeError, IndexError, ValueError):  # array-likes without newaxis indexing (e.g. zarr)
            planes = np.asarray(layer.data)[:, np.newaxis]
        dt, dy, dx = (float(v) for v in layer.scale)
        t0, y0, x0 = (float(v) for v in layer.translate)
        replacement = Image(planes, name=layer.name, scale=(dt, dy, dy, dx), translate=(t0, 0.0, y0, x0),
                            colormap=layer.colormap, contrast_limits=layer.contrast_limits, opacity=layer.opacity,
                            blending=layer.blending, visible=layer.visible, metadata=dict(layer.metadata))
        index = self.viewer.layers.index(layer)
        self.viewer.layers.remove(layer)
        self.viewer.layers.insert(index, replacement)
        self.image_choice.choose(replacement)
        self.message.emit(f"'{layer.name}' is a (T, Y, X) series: tracked in 2D, one plane a frame "
                          "(the layer is now (T, 1, Y, X))", "info")
        return replacement

    def cancel(self) -> None:
        """Stop the run at its next step."""
        if self.running:
            self.run_job.cancel()
            self.progress_bar.setFormat("cancelling…")

    def show_progress(self, stage: str, done: int, total: int) -> None:
        stage = Stage(stage)
        low, high = PROGRESS_SHARE[stage]
        self.progress_bar.setValue(int(low + (high - low) * (done / total if total else 1.0)))
        self.progress_bar.setFormat(f"{stage.label} {done}/{total}")

    def _on_done(self, outcome) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        image, params = self._job
        if isinstance(outcome, Cancelled):
            self.progress_bar.setFormat("cancelled")
            self.message.emit("tracking cancelled", "info")
        elif isinstance(outcome, BaseException):
            self.progress_bar.setFormat("failed")
            self.message.emit(f"tracking failed: {outcome}", "error")
        elif len(outcome.detections["frame"]) == 0:
            self.progress_bar.setFormat("no detections")
            self.message.emit(NO_DETECTIONS, "warning")
        else:
            self.progress_bar.setValue(100)
            self.progress_bar.setFormat("done")
            self.tracked.emit(image, params, outcome)


def _row(*widgets: QWidget) -> QWidget:
    holder = QWidget()
    row = QHBoxLayout(holder)
    row.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        row.addWidget(widget, 1 if isinstance(widget, (QProgressBar, LayerChoice)) else 0)
    return holder
