"""The per-track analysis box (plugins/napari_tracker/_analysis_panel.py, _track_plot.py): the selected track's
speed, intensity and link cost against time, the length and cost filters of the view, the plot's legend.
Needs napari and a display (see test_napari_plugin.py)."""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from napari_helpers import add_widget, open_tracks, tracks_csv, tracks_table, viewer  # noqa: E402, F401 (fixture)

from napari_tracker._analysis_panel import hidden_points, track_series  # noqa: E402
from napari_tracker._edits import TrackEdits  # noqa: E402
from napari_tracker._track_plot import SERIES_COLOURS  # noqa: E402

pytestmark = pytest.mark.napari


def test_track_series_are_speed_intensity_and_cost_per_frame():
    edits = TrackEdits(tracks_table())
    frames, series = track_series(edits, 0)
    np.testing.assert_array_equal(frames, [0, 1, 2, 3, 4])
    names = [name for name, _, _ in series]
    assert names == ["speed", "intensity", "link cost"]
    speed = series[0][2]
    assert np.isnan(speed[0]) and np.allclose(speed[1:], 1.0)  # track 0 moves 1 µm along x per frame
    rows = edits.track_rows(0)
    np.testing.assert_array_equal(series[1][2], edits.column("intensity")[rows])
    np.testing.assert_array_equal(series[2][2], edits.column("link_cost")[rows])


def test_filters_hide_short_and_costly_tracks():
    table = tracks_table()
    table["link_cost"][np.flatnonzero((table["track_id"] == 1) & (table["frame"] == 3))] = 5.0  # one bad link
    edits = TrackEdits(table)
    ids = edits.column("track_id")[edits.rows()]
    assert hidden_points(edits, 1, None) is None
    np.testing.assert_array_equal(hidden_points(edits, 4, None), ids == 2)  # track 2 has 3 points
    hidden = hidden_points(edits, 1, 4.0)
    assert np.all(hidden[ids == 1]) and not np.any(hidden[ids != 1])
    np.testing.assert_array_equal(hidden_points(edits, 4, 4.0), ids != 0)


def test_the_box_plots_the_selected_track_and_filters_the_view(viewer, tracks_csv, qtbot):
    layer = open_tracks(viewer, tracks_csv)
    widget = add_widget(viewer)
    widget.review_panel.tracks_choice.choose(layer)
    panel, review = widget.analysis_panel, widget.review
    review.select(1, review.edits.point_at(1, 3))
    plot = panel.plot
    assert plot.title.startswith("track 1: 5 points")
    assert [text for _, text in plot.legend()] == ["speed (µm/frame)", "intensity (counts)", "link cost (µm²)"]
    assert [colour for colour, _ in plot.legend()] == list(SERIES_COLOURS[:3])
    assert plot.marker == 3.0
    plot.grab()  # paints without error
    viewer.dims.ndisplay = 2
    viewer.dims.set_point(0, 7)
    viewer.reset_view()
    visible = np.asarray(viewer.screenshot(canvas_only=True))
    panel.set_filters(min_length=4)
    features = layer.features
    hidden = features["colour_track"].isna().to_numpy()
    np.testing.assert_array_equal(hidden, layer.data[:, 0] == 2)
    assert panel.shown.text() == "showing 2 of 3 tracks"
    assert len(layer.data) == 13  # the data stay: display only
    filtered = np.asarray(viewer.screenshot(canvas_only=True))
    drawn = lambda image: int(np.count_nonzero(image[..., :3].sum(axis=2)))  # noqa: E731
    assert 0 < drawn(filtered) < drawn(visible)  # track 2 (frames 6-8) is no longer drawn
    panel.set_filters()
    assert not layer.features["colour_track"].isna().any() and panel.shown.text() == "showing all 3 tracks"
    review.clear_selection()
    assert plot.title == "" and len(plot.frames) == 0
