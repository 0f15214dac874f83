"""The napari plugin (plugins/napari_tracker): reader, writer, sample data, widget, review and edits, screenshot.

Needs napari, a Qt binding and a display: in CI, Xvfb (started by pytest-xvfb)
with Mesa's software OpenGL. Skipped cleanly when napari is not installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from tracker.io import read_table, write_table  # noqa: E402

from napari_tracker._edits import OUTPUT_COLUMNS, squared_links  # noqa: E402
from napari_tracker._reader import napari_get_reader  # noqa: E402
from napari_tracker._widget import _camera  # noqa: E402
from napari_tracker._writer import write_tracks  # noqa: E402

pytestmark = pytest.mark.napari

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "sample.tif"
SAMPLE_TRUTH = ROOT / "sample_data" / "sample_ground_truth.csv"
TRACK_FEATURES = {"intensity", "quality", "link_cost", "link_confidence", "track_length", "mean_speed"}


def tracks_table() -> dict[str, np.ndarray]:
    """Tracks as ``track run`` writes them: 0 (frames 0-4, along x), 1 (0-4, along y), 2 (6-8)."""
    rows = []
    for t in range(5):
        rows.append((0, t, 1.0, 2.0, 2.0 + t))
        rows.append((1, t, 2.0, 2.0 + t, 10.0))
    for t in range(6, 9):
        rows.append((2, t, 1.0, 2.0, 2.0 + t))
    track_id, frame, z, y, x = (np.array(c) for c in zip(*rows))
    table = {"track_id": track_id.astype(np.int64), "frame": frame.astype(np.int64), "z": z, "y": y, "x": x,
             "intensity": np.linspace(10, 20, len(rows)), "quality": np.linspace(5, 6, len(rows))}
    table["link_cost"] = squared_links(table) * 0.5
    table["link_confidence"] = np.where(np.isnan(table["link_cost"]), np.nan, 0.9)
    order = np.lexsort((table["track_id"], table["frame"]))
    return {k: v[order] for k, v in table.items()}


@pytest.fixture
def tracks_csv(tmp_path) -> Path:
    path = tmp_path / "tracks.csv"
    write_table(path, tracks_table())
    return path


@pytest.fixture
def viewer(make_napari_viewer):
    return make_napari_viewer()


def open_tracks(viewer, path):
    layers = viewer.open(str(path), plugin="tracker3d")
    assert len(layers) == 1
    return layers[0]


def review_of(viewer, layer):
    from napari_tracker._widget import TrackReview

    return TrackReview(viewer, layer)


def layer_table(layer) -> dict[str, np.ndarray]:
    from napari_tracker._layers import table_from_tracks_layer

    return table_from_tracks_layer(layer.data, layer.features, layer.scale, layer.translate)


# --------------------------------------------------------------------------- manifest, reader, writer


def test_manifest_registers_every_contribution():
    from npe2 import PluginManager

    manager = PluginManager.instance()
    manager.discover()
    manifest = manager.get_manifest("tracker3d")
    contributions = manifest.contributions
    assert len(contributions.readers) == 1 and len(contributions.writers) == 1
    assert {s.key for s in contributions.sample_data} == {"sample", "simulated"}
    assert len(contributions.widgets) == 1


def test_reader_opens_tiff_with_voxel_size_as_scale(viewer):
    layers = viewer.open(str(SAMPLE), plugin="tracker3d")
    (image,) = layers
    assert image.__class__.__name__ == "Image"
    assert image.data.shape == (20, 16, 96, 96)
    np.testing.assert_allclose(image.scale, (1.0, 0.4, 0.15, 0.15))
    assert image.metadata["path"] == str(SAMPLE)


def test_reader_opens_compressed_tiff_lazily(viewer, tmp_path):
    import tifffile

    data = np.random.default_rng(0).integers(0, 1000, size=(3, 4, 16, 16), dtype=np.uint16)
    path = tmp_path / "compressed.tif"
    tifffile.imwrite(path, data, imagej=True, compression="zlib", resolution=(1 / 0.2, 1 / 0.2),
                     metadata={"axes": "TZYX", "spacing": 0.5, "unit": "um"})
    (image,) = viewer.open(str(path), plugin="tracker3d")
    np.testing.assert_allclose(image.scale, (1.0, 0.5, 0.2, 0.2))
    np.testing.assert_array_equal(np.asarray(image.data[1]), data[1])
    np.testing.assert_array_equal(np.asarray(image.data[2, 3]), data[2, 3])
    viewer.dims.set_point(0, 2)
    np.testing.assert_array_equal(image._slice.image.raw, data[2, viewer.dims.current_step[1]])


def test_reader_claims_only_its_files(tmp_path, tracks_csv):
    assert napari_get_reader(str(SAMPLE)) is not None
    assert napari_get_reader(str(tracks_csv)) is not None
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert napari_get_reader(str(other)) is None
    assert napari_get_reader(str(tmp_path / "image.png")) is None


def test_tracks_csv_round_trip_through_reader_and_writer(viewer, tracks_csv, tmp_path):
    layer = open_tracks(viewer, tracks_csv)
    assert layer.__class__.__name__ == "Tracks"
    assert layer.data.shape == (13, 5)
    assert TRACK_FEATURES <= set(layer.features.columns)
    out = tmp_path / "out.csv"
    written = write_tracks(str(out), layer.data, layer._get_state())
    assert written == [str(out)]
    original, back = read_table(tracks_csv), read_table(out)
    assert list(back) == list(OUTPUT_COLUMNS)
    for name in OUTPUT_COLUMNS:
        np.testing.assert_allclose(back[name], original[name], rtol=1e-8, equal_nan=True, err_msg=name)


def test_save_through_napari_uses_the_writer(viewer, tracks_csv, tmp_path):
    layer = open_tracks(viewer, tracks_csv)
    viewer.layers.selection = {layer}
    out = tmp_path / "saved.csv"
    viewer.layers.save(str(out), selected=True, plugin="tracker3d")
    assert list(read_table(out)) == list(OUTPUT_COLUMNS)


def test_detections_csv_opens_as_points(viewer, tmp_path):
    table = {k: v for k, v in tracks_table().items() if k in ("frame", "z", "y", "x", "intensity", "quality")}
    path = tmp_path / "detections.csv"
    write_table(path, table)
    (layer,) = viewer.open(str(path), plugin="tracker3d")
    assert layer.__class__.__name__ == "Points"
    np.testing.assert_allclose(layer.data[:, 1:], np.column_stack([table["z"], table["y"], table["x"]]))
    assert {"intensity", "quality"} <= set(layer.features.columns)


def test_ground_truth_csv_opens_as_tracks(viewer):
    (layer,) = viewer.open(str(SAMPLE_TRUTH), plugin="tracker3d")
    assert layer.__class__.__name__ == "Tracks"
    assert layer.metadata["tracker_kind"] == "ground_truth"
    assert "visible" in layer.features.columns


def test_sample_data(viewer):
    layers = viewer.open_sample("tracker3d", "sample")
    kinds = sorted(layer.__class__.__name__ for layer in layers)
    assert kinds == ["Image", "Tracks"]
    np.testing.assert_allclose(viewer.layers["sample"].scale, (1.0, 0.4, 0.15, 0.15))
    from napari_tracker._sample_data import make_simulated_data

    image, truth = make_simulated_data(seed=3)
    assert image[0].shape == (20, 16, 96, 96) and image[0].dtype == np.uint16
    assert truth[2] == "tracks" and truth[0].shape[1] == 5


# --------------------------------------------------------------------------- widget


def run_widget(viewer, qtbot):
    _, widget = viewer.window.add_plugin_dock_widget("tracker3d", "Particle tracker")
    viewer.open_sample("tracker3d", "sample")
    assert widget.image_combo.currentText() == "sample"
    assert [box.value() for box in widget.voxel] == pytest.approx([0.4, 0.15, 0.15])
    widget.device.setCurrentText("cpu")
    widget.run()
    assert widget.running
    qtbot.waitUntil(lambda: not widget.running, timeout=120_000)
    return widget


def test_widget_runs_tracking_and_adds_layers(viewer, qtbot):
    from qtpy.QtCore import Qt

    widget = run_widget(viewer, qtbot)
    assert widget.progress_bar.value() == 100
    assert "linking: " in widget.status.text() and "gap closing" in widget.status.text()
    image, points, tracks = viewer.layers["sample"], viewer.layers["sample detections"], viewer.layers["sample tracks"]
    np.testing.assert_allclose(image.scale, (1.0, 0.4, 0.15, 0.15))
    np.testing.assert_allclose(points.scale, 1.0)
    np.testing.assert_allclose(tracks.scale, 1.0)
    result = widget.result
    assert len(points.data) == len(result.detections["frame"]) > 100
    assert tracks.data.shape == (len(result.tracks["frame"]), 5)
    assert TRACK_FEATURES | {"gt_link"} <= set(tracks.features.columns)
    # data columns: track_id, t, z, y, x (µm), within the imaged volume
    assert set(np.unique(tracks.data[:, 0])) == set(np.unique(result.tracks["track_id"]))
    assert tracks.data[:, 1].min() == 0 and tracks.data[:, 1].max() == 19
    assert np.all(tracks.data[:, 3] <= 95 * 0.15 + 1e-9)
    # the ground truth of the sample is picked up for correctness colouring
    assert widget.review.correct is not None and tracks.color_by == "colour_truth"
    assert (widget.review.correct == 1).mean() > 0.5
    # the track table lists every track and sorts
    model = widget.table_model
    assert model.rowCount() == result.n_tracks
    widget.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    lengths = [int(model.data(model.index(r, 1))) for r in range(model.rowCount())]
    assert lengths == sorted(lengths, reverse=True)
    widget.table.sortByColumn(4, Qt.SortOrder.AscendingOrder)  # mean speed, NaN last
    speeds = [model.data(model.index(r, 4)) for r in range(model.rowCount())]
    finite = [float(s) for s in speeds if s != "–"]
    assert finite == sorted(finite)
    # clicking a table row jumps to that track
    widget._on_table_clicked(model.index(0, 0))
    assert widget.review.selected_track == model.track_at(0)


def test_widget_linking_options_reach_the_tracker(viewer):
    from napari_tracker._widget import TrackerWidget

    widget = TrackerWidget(viewer)
    params = widget.parameters()
    assert (params["motion"], params["smoothing"], params["max_gap"]) == ("persistent", True, 2)
    widget.smoothing.setChecked(False)
    assert widget.parameters()["smoothing"] is False
    widget.smoothing.setChecked(True)
    widget.predict_motion.setChecked(False)
    widget.max_gap.setValue(0)
    params = widget.parameters()
    assert (params["motion"], params["adaptive_radius"], params["smoothing"], params["max_gap"]) == (
        "none", False, False, 0)
    assert not widget.smoothing.isEnabled()


def test_widget_reports_bad_input_without_crashing(viewer, qtbot):
    from napari_tracker._widget import TrackerWidget

    widget = TrackerWidget(viewer)
    viewer.window.add_dock_widget(widget)
    widget.run()  # no image: a message, no worker
    assert not widget.running and "open a stack" in widget.status.text()
    viewer.add_image(np.zeros((2, 3, 8, 8), np.uint16), name="blank")
    widget.run()
    qtbot.waitUntil(lambda: not widget.running, timeout=60_000)
    assert "tracking failed" in widget.status.text()


# --------------------------------------------------------------------------- review and edits


def test_click_selects_a_track(viewer, tracks_csv, MouseEvent):
    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)
    viewer.dims.set_point(0, 2)
    # 2D: displayed dims y, x; track 1 passes (y=4, x=10) at frame 2
    event = MouseEvent(type="mouse_press", position=(2, 2.0, 4.1, 10.0), dims_displayed=(2, 3), pos=(5, 5), button=1)
    callback = review._on_mouse_drag(viewer, event)
    next(callback)
    event.type = "mouse_release"
    with pytest.raises(StopIteration):
        next(callback)
    assert review.selected_track == 1
    assert review.selected_row == review.edits.point_at(1, 2)
    # 3D: a ray along z through track 0's frame-2 point
    assert review.select_at((2, -5.0, 2.0, 4.0), view_direction=(0, 1, 0, 0), dims_displayed=(1, 2, 3))
    assert review.selected_track == 0 and review.previous_track == 1
    # a drag does not select
    event = MouseEvent(type="mouse_press", position=(2, 2.0, 4.0, 10.0), dims_displayed=(2, 3), pos=(5, 5), button=1)
    callback = review._on_mouse_drag(viewer, event)
    next(callback)
    event.type, event.pos = "mouse_move", (50, 50)
    next(callback)
    event.type = "mouse_release"
    with pytest.raises(StopIteration):
        next(callback)
    assert review.selected_track == 0
    # a click far from everything clears the selection
    assert not review.select_at((2, 0.0, 500.0, 500.0), dims_displayed=(2, 3))
    assert review.selected_track is None


def test_jump_to_track_moves_frame_and_camera(viewer, tracks_csv):
    review = review_of(viewer, open_tracks(viewer, tracks_csv))
    review.jump_to(2)
    assert viewer.dims.point[0] == 6
    np.testing.assert_allclose(_camera(viewer).center[-2:], (2.0, 8.0))
    assert review.selected_track == 2


def edit_and_undo(review, layer, do, check):
    before_data, before_features = layer.data.copy(), layer.features.copy()
    assert do()
    check(layer_table(layer))
    after = layer.data.copy()
    assert review.undo()
    np.testing.assert_array_equal(layer.data, before_data)
    np.testing.assert_allclose(layer.features["link_cost"], before_features["link_cost"], equal_nan=True)
    assert review.redo()
    np.testing.assert_array_equal(layer.data, after)
    assert review.undo()


def test_every_edit_and_its_undo(viewer, tracks_csv):
    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)

    def frames_of(table, track_id):
        return sorted(table["frame"][table["track_id"] == track_id].tolist())

    # delete
    review.select(1)
    edit_and_undo(review, layer, review.delete_track, lambda t: frames_of(t, 1) == [] or pytest.fail("not deleted"))
    # split at the current frame
    viewer.dims.set_point(0, 3)
    review.select(0)

    def check_split(table):
        assert frames_of(table, 0) == [0, 1, 2]
        assert frames_of(table, 3) == [3, 4]
    edit_and_undo(review, layer, review.split_track, check_split)
    # join: previous selection 0, selection 2
    review.select(0)
    review.select(2)

    def check_join(table):
        assert frames_of(table, 0) == [0, 1, 2, 3, 4, 6, 7, 8] and frames_of(table, 2) == []
        cost = table["link_cost"][(table["track_id"] == 0) & (table["frame"] == 6)]
        assert cost == pytest.approx(4.0)
    edit_and_undo(review, layer, review.join_tracks, check_join)
    # reassign the previously selected point (track 0, frame 4) to the selected track (2)
    viewer.dims.set_point(0, 4)
    review.select(0)
    review.select(2, row=review.edits.point_at(2, 6))

    def check_reassign(table):
        assert frames_of(table, 0) == [0, 1, 2, 3] and frames_of(table, 2) == [4, 6, 7, 8]
    edit_and_undo(review, layer, review.reassign_point, check_reassign)
    assert not review.edits.can_undo


def test_keyboard_shortcuts(viewer, tracks_csv):
    from napari.utils.key_bindings import KeyBinding

    from napari_tracker._widget import SHORTCUTS

    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)

    def press(name):
        viewer.keymap[KeyBinding.from_str(SHORTCUTS[name])](viewer)

    n = len(layer.data)
    review.select(2)
    press("delete")
    assert len(layer.data) == n - 3
    press("undo")
    assert len(layer.data) == n
    press("redo")
    assert len(layer.data) == n - 3
    press("undo")
    viewer.dims.set_point(0, 2)
    review.select(1)
    press("split")
    assert len(np.unique(layer.data[:, 0])) == 4
    press("undo")
    review.select(0)
    review.select(2)
    press("join")
    assert len(np.unique(layer.data[:, 0])) == 2
    press("undo")
    review.select(1)
    press("jump")
    assert viewer.dims.point[0] == 2


def test_edits_are_saved_by_the_writer(viewer, tracks_csv, tmp_path):
    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)
    review.delete_track(1)
    review.split_track(0, 3)
    out = tmp_path / "edited.csv"
    write_tracks(str(out), layer.data, layer._get_state())
    saved = read_table(out)
    expected = review.edits.output_table()
    assert list(saved) == list(OUTPUT_COLUMNS)
    for name in OUTPUT_COLUMNS:
        np.testing.assert_allclose(saved[name], expected[name], rtol=1e-8, equal_nan=True, err_msg=name)
    assert sorted(np.unique(saved["track_id"]).tolist()) == [0, 2, 3]
    # the review's own save writes the same
    review.save(tmp_path / "edited2.csv")
    assert (tmp_path / "edited2.csv").read_text() == out.read_text()


def test_colour_modes(viewer, tracks_csv):
    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)
    review.set_colour_by("link cost")
    assert layer.color_by == "colour_cost"
    with pytest.raises(ValueError, match="ground truth"):
        review.set_colour_by("ground truth")
    truth = {k: v for k, v in tracks_table().items() if k in ("track_id", "frame", "z", "y", "x")}
    review.set_ground_truth(truth)
    assert layer.color_by == "colour_truth"
    assert set(np.unique(layer.features["gt_link"])) == {-1, 1}
    review.reassign_point(review.edits.point_at(0, 2), 1)  # swap: now wrong links
    assert (layer.features["gt_link"] == 0).sum() == 4
    review.set_colour_by("track")
    assert layer.color_by == "colour_track"


# --------------------------------------------------------------------------- screenshot


def test_screenshot_shows_image_and_tracks(make_napari_viewer, qtbot, tmp_path):
    import imageio.v3 as iio

    viewer = make_napari_viewer(show=True)  # a hidden viewer renders a blank canvas
    widget = run_widget(viewer, qtbot)
    viewer.window._qt_window.resize(1200, 900)
    viewer.dims.ndisplay = 2
    viewer.dims.set_point(0, 15)
    viewer.reset_view()
    widget.review.set_colour_by("track")
    shot = viewer.screenshot(canvas_only=True, flash=False)
    out = Path(os.environ.get("NAPARI_SCREENSHOT_DIR", tmp_path)) / "napari_tracker_review.png"
    iio.imwrite(out, shot)
    rgb = shot[..., :3].astype(int)
    assert shot.shape[0] > 100 and shot.shape[1] > 100
    assert rgb.std() > 10, "blank canvas"
    grey = np.abs(rgb - rgb.mean(axis=2, keepdims=True)).max(axis=2) < 20
    assert grey.mean() > 0.3, "no image data rendered"
    coloured = (rgb.max(axis=2) - rgb.min(axis=2)) > 80
    assert coloured.sum() > 200, "no tracks rendered"
    viewer.dims.ndisplay = 3
    shot3d = viewer.screenshot(canvas_only=True, flash=False)
    assert shot3d[..., :3].std() > 10
