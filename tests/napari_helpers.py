"""Shared pieces of the napari plugin's tests (tests/test_napari_*.py): a small tracks table, opening it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from napari_tracker._live_tracks import squared_links

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "sample.tif"
SAMPLE_TRUTH = ROOT / "sample_data" / "sample_ground_truth.csv"
TRACK_FEATURES = {"intensity", "quality", "link_cost", "link_confidence", "track_length", "mean_speed"}
PLUGIN = "tracker3d"


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
    from tracker.io import write_table

    path = tmp_path / "tracks.csv"
    write_table(path, tracks_table())
    return path


@pytest.fixture
def viewer(make_napari_viewer):
    return make_napari_viewer()


def open_tracks(viewer, path):
    layers = viewer.open(str(path), plugin=PLUGIN)
    assert len(layers) == 1
    return layers[0]


def layer_table(layer) -> dict[str, np.ndarray]:
    from napari_tracker._layers import table_from_tracks_layer

    return table_from_tracks_layer(layer.data, layer.features, layer.scale, layer.translate)


def add_widget(viewer):
    """The dock widget as napari opens it (Plugins menu)."""
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Particle tracker")
    return widget


def run_and_wait(widget, qtbot, timeout_ms: int = 120_000) -> None:
    widget.run()
    qtbot.waitUntil(lambda: not widget.running, timeout=timeout_ms)


def run_sample(viewer, qtbot):
    """Open the widget and the sample, track it on the CPU; returns the widget."""
    widget = add_widget(viewer)
    viewer.open_sample(PLUGIN, "sample")
    panel = widget.track_panel
    assert panel.image.name == "sample"
    assert panel.voxel.value() == pytest.approx((0.4, 0.15, 0.15))
    panel.detection.set_values({"device": "cpu"})
    widget.run()
    assert widget.running
    qtbot.waitUntil(lambda: not widget.running, timeout=120_000)
    return widget
