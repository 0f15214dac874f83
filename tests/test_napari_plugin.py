"""The napari plugin (plugins/napari_tracker): manifest, reader, writer, sample data, a screenshot.

Needs napari, a Qt binding and a display: in CI, Xvfb (started by pytest-xvfb)
with Mesa's software OpenGL. Skipped cleanly when napari is not installed.
The widget and the review have their own files (test_napari_widget.py,
test_napari_review.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from napari_helpers import (  # noqa: E402
    PLUGIN,
    ROOT,
    SAMPLE,
    SAMPLE_TRUTH,
    TRACK_FEATURES,
    add_widget,
    open_tracks,
    run_and_wait,
    run_sample,
    tracks_csv,  # noqa: F401 (fixture)
    tracks_table,
    viewer,  # noqa: F401 (fixture)
)
from tracker.io import read_table, write_table  # noqa: E402

from napari_tracker._live_tracks import OUTPUT_COLUMNS  # noqa: E402
from napari_tracker._reader import napari_get_reader  # noqa: E402
from napari_tracker._writer import write_tracks  # noqa: E402

pytestmark = pytest.mark.napari


# --------------------------------------------------------------------------- manifest, reader, writer


def test_manifest_registers_every_contribution():
    from npe2 import PluginManager

    manager = PluginManager.instance()
    manager.discover()
    manifest = manager.get_manifest(PLUGIN)
    contributions = manifest.contributions
    assert len(contributions.readers) == 1 and len(contributions.writers) == 1
    assert {s.key for s in contributions.sample_data} == {"sample", "simulated"}
    assert len(contributions.widgets) == 1


def test_reader_opens_tiff_with_voxel_size_as_scale(viewer):
    layers = viewer.open(str(SAMPLE), plugin=PLUGIN)
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
    (image,) = viewer.open(str(path), plugin=PLUGIN)
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


def test_reader_leaves_files_it_cannot_track_to_others(tmp_path):
    """Issue 29.4: a TIFF or CSV it cannot open gets None (napari asks other readers), not a reader that raises."""
    import tifffile

    flat = tmp_path / "photo.tif"
    tifffile.imwrite(flat, np.zeros((16, 16), np.uint8))  # one 2D image: nothing to track
    broken = tmp_path / "broken.tif"
    broken.write_bytes(b"II*\x00garbage")
    bad_values = tmp_path / "bad.csv"
    bad_values.write_text("track_id,frame,z,y,x\n0,0,1,2,three\n")
    for path in (flat, broken, bad_values, tmp_path / "missing.tif"):
        assert napari_get_reader(str(path)) is None, path.name
    # a list is taken only if every file can be read
    assert napari_get_reader([str(SAMPLE), str(flat)]) is None


def test_reader_opens_each_channel_as_a_layer_and_tracks_the_one_chosen(viewer, qtbot, tmp_path):
    """A multi-channel stack opens as one layer per channel (napari's habit); Run tracks the selected layer's
    channel, read from the file, with the tracks of that channel alone."""
    import tifffile

    from tracker.io import read_stack

    sample = read_stack(SAMPLE)
    data = np.asarray(sample.data)[:4]
    path = tmp_path / "two.tif"
    dz, dy, dx = sample.voxel_size
    tifffile.imwrite(path, np.stack([np.zeros_like(data), data], axis=2), imagej=True, resolution=(1 / dx, 1 / dy),
                     metadata={"axes": "TZCYX", "spacing": dz, "unit": "um"})
    first, second = viewer.open(str(path), plugin=PLUGIN)
    assert (first.name, second.name) == ("two [0]", "two [1]") and second.metadata["channel"] == 1
    np.testing.assert_array_equal(np.asarray(second.data[2]), data[2])
    assert second.blending == "additive"
    widget = add_widget(viewer)
    widget.track_panel.image_choice.choose(second)
    widget.track_panel.detection.set_values({"device": "cpu"})
    run_and_wait(widget, qtbot)
    assert len(widget.result.detections["frame"]) > 50  # (channel 0 is empty: nothing would be found there)
    assert "two [1] tracks" in viewer.layers


def test_one_plugin_name_everywhere():
    """Issue 29.4: the manifest's name, the package name and the entry point's name agree (npe2 refuses a
    manifest whose name differs from its package's), and every command id is under it."""
    import tomllib

    import yaml

    manifest = yaml.safe_load((ROOT / "plugins" / "napari_tracker" / "napari.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert manifest["name"] == project["name"] == PLUGIN
    assert list(project["entry-points"]["napari.manifest"]) == [PLUGIN]
    ids = [c["id"] for c in manifest["contributions"]["commands"]]
    assert ids and all(i.startswith(PLUGIN + ".") for i in ids)


def test_tracks_csv_round_trip_through_reader_and_writer(viewer, tracks_csv, tmp_path):
    layer = open_tracks(viewer, tracks_csv)
    assert layer.__class__.__name__ == "Tracks"
    assert layer.data.shape == (13, 5)
    assert TRACK_FEATURES <= set(layer.features.columns)
    out = tmp_path / "out.csv"
    written = write_tracks(str(out), *layer.as_layer_data_tuple()[:2])
    assert written == [str(out)]
    original, back = read_table(tracks_csv), read_table(out)
    assert list(back) == list(OUTPUT_COLUMNS)
    for name in OUTPUT_COLUMNS:
        np.testing.assert_allclose(back[name], original[name], rtol=1e-8, equal_nan=True, err_msg=name)


def test_save_through_napari_uses_the_writer(viewer, tracks_csv, tmp_path):
    layer = open_tracks(viewer, tracks_csv)
    viewer.layers.selection = {layer}
    out = tmp_path / "saved.csv"
    viewer.layers.save(str(out), selected=True, plugin=PLUGIN)
    assert list(read_table(out)) == list(OUTPUT_COLUMNS)


def test_detections_csv_opens_as_points(viewer, tmp_path):
    table = {k: v for k, v in tracks_table().items() if k in ("frame", "z", "y", "x", "intensity", "quality")}
    path = tmp_path / "detections.csv"
    write_table(path, table)
    (layer,) = viewer.open(str(path), plugin=PLUGIN)
    assert layer.__class__.__name__ == "Points"
    np.testing.assert_allclose(layer.data[:, 1:], np.column_stack([table["z"], table["y"], table["x"]]))
    assert {"intensity", "quality"} <= set(layer.features.columns)


def test_ground_truth_csv_opens_as_tracks(viewer):
    (layer,) = viewer.open(str(SAMPLE_TRUTH), plugin=PLUGIN)
    assert layer.__class__.__name__ == "Tracks"
    assert layer.metadata["tracker_kind"] == "ground_truth"
    assert "visible" in layer.features.columns


def test_sample_data(viewer):
    layers = viewer.open_sample(PLUGIN, "sample")
    kinds = sorted(layer.__class__.__name__ for layer in layers)
    assert kinds == ["Image", "Tracks"]
    np.testing.assert_allclose(viewer.layers["sample"].scale, (1.0, 0.4, 0.15, 0.15))
    from napari_tracker._sample_data import make_simulated_data

    image, truth = make_simulated_data(seed=3)
    assert image[0].shape == (20, 16, 96, 96) and image[0].dtype == np.uint16
    assert truth[2] == "tracks" and truth[0].shape[1] == 5


# --------------------------------------------------------------------------- screenshot


def test_screenshot_shows_image_and_tracks(make_napari_viewer, qtbot, tmp_path):
    import imageio.v3 as iio

    viewer = make_napari_viewer(show=True)  # a hidden viewer renders a blank canvas
    widget = run_sample(viewer, qtbot)
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
