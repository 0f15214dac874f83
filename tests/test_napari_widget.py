"""The dock widget (plugins/napari_tracker/_widget.py, _track_panel.py, _review_panel.py, _parameter_form.py):
tracking in a worker, the generated parameter form, and issue 29's crash and convention items.
Needs napari and a display (see test_napari_plugin.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from napari_helpers import (  # noqa: E402
    PLUGIN,
    TRACK_FEATURES,
    add_widget,
    open_tracks,
    run_and_wait,
    run_sample,
    tracks_csv,  # noqa: F401 (fixture)
    viewer,  # noqa: F401 (fixture)
)
from qtpy.QtCore import Qt  # noqa: E402
from tracker.params import DETECTION_DEFAULTS, LINKING_DEFAULTS, DetectionParams, LinkingParams, parameters  # noqa: E402
from tracker.progress import Stage  # noqa: E402

from napari_tracker._track_panel import NO_DETECTIONS, PROGRESS_SHARE  # noqa: E402

pytestmark = pytest.mark.napari


def notifications() -> list[str]:
    from napari.utils.notifications import notification_manager

    return [str(record.message) for record in notification_manager.records]


def noise_image(viewer, name="noise", **kwargs):
    """A (T, Z, Y, X) image of Gaussian noise (no spots), µm scale given."""
    data = np.random.default_rng(0).normal(100, 5, (3, 4, 24, 24)).astype(np.float32)
    return viewer.add_image(data, name=name, scale=kwargs.pop("scale", (1, 0.5, 0.2, 0.2)), **kwargs)


# --------------------------------------------------------------------------- running


def test_widget_runs_tracking_and_adds_layers(viewer, qtbot):
    widget = run_sample(viewer, qtbot)
    assert widget.track_panel.progress_bar.value() == 100
    assert "linking: " in widget.status.text() and "gap closing" in widget.status.text()
    image, points, tracks = viewer.layers["sample"], viewer.layers["sample detections"], viewer.layers["sample tracks"]
    np.testing.assert_allclose(image.scale, (1.0, 0.4, 0.15, 0.15))
    np.testing.assert_allclose(points.scale, 1.0)
    np.testing.assert_allclose(tracks.scale, 1.0)
    result = widget.result
    assert len(points.data) == len(result.detections["frame"]) > 100
    assert tracks.data.shape == (len(result.tracks["frame"]), 5)
    assert TRACK_FEATURES | {"gt_link"} <= set(tracks.features.columns)
    assert set(np.unique(tracks.data[:, 0])) == set(np.unique(result.tracks["track_id"]))
    assert tracks.data[:, 1].min() == 0 and tracks.data[:, 1].max() == 19
    assert np.all(tracks.data[:, 3] <= 95 * 0.15 + 1e-9)
    # the sample's recommended parameters were used, and its ground truth colours the tracks
    assert tracks.metadata["parameters"]["spot_radius_um"] == (0.8, 0.3, 0.3)
    assert widget.review.correct is not None and tracks.color_by == "colour_truth"
    assert (widget.review.correct == 1).mean() > 0.5
    assert "correct link" in widget.review_panel.legend.text()
    # the track table lists every track and sorts (NaN last)
    panel = widget.review_panel
    model = panel.table_model
    assert model.rowCount() == result.n_tracks
    panel.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    lengths = [int(model.data(model.index(r, 1))) for r in range(model.rowCount())]
    assert lengths == sorted(lengths, reverse=True)
    panel.table.sortByColumn(4, Qt.SortOrder.AscendingOrder)
    speeds = [model.data(model.index(r, 4)) for r in range(model.rowCount())]
    finite = [float(s) for s in speeds if s != "–"]
    assert finite == sorted(finite)


def test_table_rows_jump_to_the_worst_link_by_click_and_arrow_keys(viewer, qtbot):
    """Issue 29.5: sorted by max link cost, a click goes to the frame of the costliest link; Up/Down select too."""
    widget = run_sample(viewer, qtbot)
    panel, review = widget.review_panel, widget.review
    model = panel.table_model
    panel.table.sortByColumn(6, Qt.SortOrder.DescendingOrder)  # max link cost
    rect = panel.table.visualRect(model.index(0, 0))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    worst = model.worst_frame_at(0)
    assert review.selected_track == model.track_at(0)
    assert int(viewer.dims.point[0]) == worst != int(review.edits.summary()["start"][
        review.edits.summary()["track_id"] == model.track_at(0)][0])
    assert review.edits.column("frame")[review.selected_row] == worst
    qtbot.keyClick(panel.table, Qt.Key.Key_Down)
    assert review.selected_track == model.track_at(1)
    assert int(viewer.dims.point[0]) == model.worst_frame_at(1)
    # a selection made on the canvas moves the table without jumping
    review.select(model.track_at(5))
    assert panel.table.currentIndex().row() == 5


def test_no_detections_is_reported_not_a_crash(viewer, qtbot):
    """Issue 29.1: noise, a tiny or a huge spot radius: a warning naming what to check, no layers, no pop-up."""
    widget = add_widget(viewer)
    noise_image(viewer)
    panel = widget.track_panel
    for change in ({"threshold": 500.0}, {"spot_radius_um": (0.01, 0.01, 0.01)}):
        panel.detection.set_values({**DETECTION_DEFAULTS.to_dict(), "device": "cpu", **change})
        before = len(notifications())
        run_and_wait(widget, qtbot)
        assert widget.status.text() == NO_DETECTIONS
        assert panel.progress_bar.format() == "no detections"
        assert NO_DETECTIONS in notifications()[before:]
        assert [layer.name for layer in viewer.layers] == ["noise"]


def test_bad_input_is_reported_without_crashing(viewer, qtbot):
    from napari_tracker._widget import TrackerWidget

    widget = TrackerWidget(viewer)
    viewer.window.add_dock_widget(widget)
    widget.run()  # no image: a message, no worker
    assert not widget.running and "open a stack" in widget.status.text()
    viewer.add_image(np.zeros((2, 3, 8, 8), np.uint16), name="blank", scale=(1, 1, 0.5, 0.5))
    run_and_wait(widget, qtbot, 60_000)
    assert "tracking failed" in widget.status.text() and "constant" in widget.status.text()
    widget.track_panel.linking.set_values({"max_displacement_um": 0.0})  # clamped by the box to its minimum
    assert widget.track_panel.parameters()["max_displacement_um"] > 0


def test_cancel_stops_the_run(viewer, qtbot):
    """Issue 29.5: Cancel stops the worker at its next step; nothing is added."""
    widget = add_widget(viewer)
    viewer.open_sample(PLUGIN, "sample")
    panel = widget.track_panel
    panel.detection.set_values({"device": "cpu"})
    steps = []

    def cancel_at_first_step(stage, done, total):
        steps.append((stage, done))
        assert panel.cancel_button.isEnabled() and not panel.run_button.isEnabled()
        panel.cancel_button.click()

    panel.run_job.progressed.connect(cancel_at_first_step)
    widget.run()
    qtbot.waitUntil(lambda: not widget.running, timeout=60_000)
    assert panel.progress_bar.format() == "cancelled" and widget.status.text() == "tracking cancelled"
    # stopped in the estimates or in detection
    assert steps and all(stage in ("estimate", "detect") for stage, _ in steps) and len(steps) < 20
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert "sample tracks" not in viewer.layers and "sample detections" not in viewer.layers


def test_progress_labels_and_shares_come_from_the_stages(viewer):
    widget = add_widget(viewer)
    panel = widget.track_panel
    for stage in Stage:
        low, high = PROGRESS_SHARE[stage]
        panel.show_progress(stage.value, 1, 2)
        assert panel.progress_bar.format() == f"{stage.label} 1/2"
        assert panel.progress_bar.value() == int(low + (high - low) / 2)


# --------------------------------------------------------------------------- the parameter form


def test_the_form_is_generated_from_the_parameter_model(viewer):
    """Every field of DetectionParams and LinkingParams has an input with the model's default, help, unit, range."""
    from qtpy.QtWidgets import QAbstractSpinBox, QCheckBox, QComboBox

    from napari_tracker._axis_boxes import AxisBoxes

    panel = add_widget(viewer).track_panel
    for form, model, defaults in ((panel.detection, DetectionParams, DETECTION_DEFAULTS),
                                  (panel.linking, LinkingParams, LINKING_DEFAULTS)):
        assert list(form.inputs) == [item.name for item in dataclasses.fields(model)]
        assert form.values() == defaults
        for item, meta in parameters(model):
            widget = form.inputs[item.name]
            assert meta.help in widget.toolTip()
            boxes = widget.boxes if isinstance(widget, AxisBoxes) else [widget]
            for box in boxes:
                if isinstance(box, QAbstractSpinBox):
                    assert box.suffix() == (f" {meta.unit}" if meta.unit else "")
                    if meta.minimum is not None:
                        assert box.minimum() >= meta.minimum - (0.1 if meta.optional else 0)
                        assert (box.minimum() > meta.minimum) == (meta.minimum_open and not meta.optional)
                    if meta.maximum is not None:
                        assert box.maximum() == meta.maximum
            if meta.choices:
                assert isinstance(widget, QComboBox)
                assert [widget.itemText(i) for i in range(widget.count())] == list(meta.choices)
            if item.type in (bool, "bool"):
                assert isinstance(widget, QCheckBox)
    # what the form holds reaches the tracker, "auto" is None, and the model refuses what it refuses
    panel.linking.set_values({"motion": "none", "smoothing": False, "max_gap": 0, "persistence": 0.3})
    params = panel.parameters()
    assert (params["motion"], params["smoothing"], params["max_gap"], params["persistence"]) == ("none", False, 0, 0.3)
    panel.linking.set_values({"persistence": None})
    assert panel.parameters()["persistence"] is None
    assert panel.linking.inputs["persistence"].text() == "auto"
    panel.linking.inputs["solver"].addItem("no-such-solver")
    panel.linking.set_values({"solver": "no-such-solver"})
    assert panel.parameters()["solver"] == "no-such-solver"  # checked where it is used, as in the CLI


# --------------------------------------------------------------------------- images the tracker cannot take as they are


def test_rgb_image_is_refused_with_a_message(viewer):
    """Issue 29.3: an RGB layer is not a (T, Z, Y, X) stack with X = 3."""
    widget = add_widget(viewer)
    viewer.add_image(np.zeros((5, 32, 32, 3), np.uint8), name="photo", rgb=True)
    widget.run()
    assert not widget.running
    assert "RGB" in widget.status.text() and "Split RGB" in widget.status.text()
    assert any("RGB" in message for message in notifications())


def moving_spots_movie(frames: int = 6, size: int = 48) -> np.ndarray:
    """A (T, Y, X) movie: three Gaussian spots (sigma 1.5 px) moving 1 px a frame on a noisy background."""
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[:size, :size]
    movie = rng.normal(100, 4, (frames, size, size))
    for t in range(frames):
        for y0, x0, vy, vx in ((10, 10, 1, 0), (30, 12, 0, 1), (20, 34, 1, 1)):
            movie[t] += 300 * np.exp(-((yy - y0 - vy * t) ** 2 + (xx - x0 - vx * t) ** 2) / (2 * 1.5 ** 2))
    return movie.astype(np.float32)


def test_a_time_series_layer_of_three_dimensions_is_tracked_in_2d(viewer, qtbot):
    """A (T, Y, X) layer (napari's own reader of a 2D series, an array) becomes (T, 1, Y, X) in place and is
    tracked: the layer keeps its name, place and pixel size."""
    widget = add_widget(viewer)
    viewer.add_image(np.zeros((4, 8, 8), np.float32), name="below")
    viewer.add_image(moving_spots_movie(), name="movie", scale=(1, 0.1, 0.1))
    panel = widget.track_panel
    panel.detection.set_values({"device": "cpu"})
    run_and_wait(widget, qtbot)
    movie = viewer.layers["movie"]
    assert movie.ndim == 4 and movie.data.shape == (6, 1, 48, 48)
    assert [layer.name for layer in viewer.layers][:2] == ["below", "movie"]
    np.testing.assert_allclose(movie.scale, (1, 0.1, 0.1, 0.1))
    assert panel.voxel.value() == pytest.approx((0.1, 0.1, 0.1))
    result = widget.result
    assert result is not None and result.n_tracks == 3
    assert np.all(result.tracks["z"] == 0)
    assert any("(T, Y, X)" in message for message in notifications())


def test_a_layer_of_two_dimensions_is_refused_with_a_message(viewer):
    widget = add_widget(viewer)
    viewer.add_image(np.zeros((32, 32), np.uint16), name="picture", scale=(0.1, 0.1))
    widget.run()
    assert not widget.running
    assert "2 dimensions" in widget.status.text() and "(T, Y, X)" in widget.status.text()


def test_missing_voxel_size_is_warned_and_typed_in(viewer, qtbot, tmp_path):
    """Issue 29.3: an image without voxel size (napari's own reader, an array, a TIFF without it) is warned
    about; typing the voxel size rescales the image and resets the view."""
    import tifffile

    from napari_tracker._view import camera

    widget = add_widget(viewer)
    panel = widget.track_panel
    before = len(notifications())
    layer = noise_image(viewer, name="bare", scale=None)
    assert panel.image == layer and panel.voxel.value() == (1.0, 1.0, 1.0)
    assert any("no voxel size" in m and "bare" in m for m in notifications()[before:])
    zoom = camera(viewer).zoom
    panel.voxel.boxes[2].setValue(0.2)  # as typing does
    panel.voxel.boxes[1].setValue(0.2)
    np.testing.assert_allclose(layer.scale, (1, 1, 0.2, 0.2))
    assert camera(viewer).zoom > 2 * zoom  # the view was fitted to the now smaller image
    assert not layer.metadata["voxel_size_assumed"]
    # a TIFF without voxel size, through this plugin's reader
    path = tmp_path / "bare.tif"
    tifffile.imwrite(path, np.zeros((2, 3, 8, 8), np.uint16), imagej=True, metadata={"axes": "TZYX"})
    before = len(notifications())
    (image,) = viewer.open(str(path), plugin=PLUGIN)
    assert image.metadata["voxel_size_assumed"]
    assert any("no voxel size" in m for m in notifications()[before:])
    # the sample has one: no warning
    before = len(notifications())
    viewer.open_sample(PLUGIN, "sample")
    panel.image_choice.choose(viewer.layers["sample"])
    assert not any("voxel size" in m for m in notifications()[before:])


# --------------------------------------------------------------------------- keeping the review


def test_a_second_run_keeps_edited_tracks(viewer, qtbot):
    """Issue 29.2: Run over an edited tracks layer adds a new layer; the edited one and its undo history stay.
    Over an unedited one, the layer is replaced."""
    widget = run_sample(viewer, qtbot)
    first = viewer.layers["sample tracks"]
    run_and_wait(widget, qtbot)  # not edited: replaced
    assert first not in viewer.layers
    edited = viewer.layers["sample tracks"]
    review = widget.review
    victim = int(review.edits.track_ids()[0])
    assert widget.corrections.delete_track(victim)
    n_edited = len(edited.data)
    run_and_wait(widget, qtbot)
    assert edited in viewer.layers and len(edited.data) == n_edited
    new = review.layer
    assert new != edited and new.name == "sample tracks [1]" and len(new.data) > n_edited
    assert "your edited tracks stay in 'sample tracks'" in widget.status.text()
    widget.review_panel.tracks_choice.choose(edited)
    assert review.layer == edited and review.edits.can_undo
    assert review.undo() and victim in review.edits.track_ids()


def test_closing_the_dock_detaches_and_a_new_dock_picks_up_the_tracks(viewer, tracks_csv):
    """Issue 29.2: closing the dock removes the review's mouse callback and shortcuts; opening it again reviews
    the existing tracks layer, undo history included."""
    layer = open_tracks(viewer, tracks_csv)
    callbacks = list(viewer.mouse_drag_callbacks)
    widget = add_widget(viewer)
    assert widget.review.layer == layer  # picked up (napari gives plugins proxies: ==, not is)
    assert widget.review_panel.tracks_choice.currentText() == layer.name
    assert widget.corrections.delete_track(1)
    viewer.window.remove_dock_widget(widget)
    assert list(viewer.mouse_drag_callbacks) == callbacks
    assert "selected track" not in viewer.layers
    viewer.layers.remove(layer)
    viewer.layers.append(layer)  # the old widget no longer follows the layer list (it would re-review)
    assert widget.review.layer == layer
    again = add_widget(viewer)
    assert again is not widget and again.review.layer == layer
    assert len(viewer.mouse_drag_callbacks) == len(callbacks) + 1
    assert again.review.edits.can_undo and again.review_panel.buttons["undo"].isEnabled()
    assert again.review.undo() and 1 in again.review.edits.track_ids()


def test_colour_mode_choice_and_legend(viewer, tracks_csv):
    layer = open_tracks(viewer, tracks_csv)
    widget = add_widget(viewer)
    panel = widget.review_panel
    for mode, feature, word in (("link confidence", "colour_confidence", "no link"),
                                ("link cost", "colour_cost", "low cost"), ("track", "colour_track", "per track")):
        panel.colour_combo.setCurrentText(mode)
        assert layer.color_by == feature and word in panel.legend.text()
    panel.colour_combo.setCurrentText("ground truth")  # none loaded: refused, the combo goes back
    assert panel.colour_combo.currentText() == "track" and "ground truth" in widget.status.text()


def test_open_and_save_buttons_paths(viewer, tracks_csv, tmp_path):
    """What the Open TIFF… and Save tracks… dialogs call: the stack is chosen; the saved CSV is the writer's."""
    from tracker.io import read_table

    from napari_helpers import SAMPLE
    from napari_tracker._writer import write_tracks

    widget = add_widget(viewer)
    image = widget.track_panel.open_stack(SAMPLE)
    assert widget.track_panel.image == image and widget.track_panel.voxel.value() == pytest.approx((0.4, 0.15, 0.15))
    layer = open_tracks(viewer, tracks_csv)
    panel = widget.review_panel
    panel.tracks_choice.choose(layer)
    widget.corrections.delete_track(1)
    panel.save(tmp_path / "panel.csv")
    assert "saved 2 tracks" in widget.status.text()
    write_tracks(str(tmp_path / "writer.csv"), *layer.as_layer_data_tuple()[:2])
    assert (tmp_path / "panel.csv").read_text() == (tmp_path / "writer.csv").read_text()
    assert sorted(set(read_table(tmp_path / "panel.csv")["track_id"].tolist())) == [0, 2]


def test_the_dock_is_narrow_and_scrolls_on_a_short_screen(viewer):
    """Issue 29: the dock asks for the boxes' minimum width (the canvas keeps the room; the voxel boxes still show
    their values whole) and scrolls where the screen is shorter than its boxes (they overlapped)."""
    from qtpy.QtWidgets import QScrollArea

    widget = add_widget(viewer)
    assert widget.sizeHint().width() <= 520  # (the boxes' preferred width was 722 px)
    assert widget.minimumSizeHint().height() < 200
    box = widget.track_panel.voxel.boxes[0]
    assert box.width() >= box.fontMetrics().horizontalAdvance(box.text()) or not box.isVisible()
    scroll = widget.findChild(QScrollArea)
    widget.resize(widget.width(), 400)
    scroll.resize(scroll.width(), 400)
    assert scroll.verticalScrollBar().maximum() > 0


def test_every_box_of_the_dock_folds_and_unfolds_as_it_was(viewer):
    """Issue 29: a collapsible dock: each box folds to its title and unfolds with what it showed (a row hidden
    before stays hidden)."""
    from qtpy.QtWidgets import QWidget

    widget = add_widget(viewer)
    panel = widget.track_panel

    def shown():
        return {w for w in panel.findChildren(QWidget) if w.isVisibleTo(panel)}

    before, tall = shown(), panel.sizeHint().height()
    for box in (widget.track_panel, widget.review_panel, widget.queue_panel, widget.analysis_panel):
        assert box.isCheckable() and box.isChecked()
    panel.setChecked(False)
    assert panel.maximumHeight() < tall / 4 and not panel.voxel.isVisibleTo(panel)
    panel.setChecked(True)
    assert shown() == before
