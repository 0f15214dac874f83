"""Review and correction in the viewer (plugins/napari_tracker/_review.py and its helpers): picking, jumping,
edits with undo/redo, shortcuts, colour modes, detaching. Needs napari and a display (see test_napari_plugin.py).
"""

from __future__ import annotations

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from napari_helpers import (  # noqa: E402
    layer_table,
    open_tracks,
    tracks_csv,  # noqa: F401 (fixture)
    tracks_table,
    viewer,  # noqa: F401 (fixture)
)
from tracker.io import read_table  # noqa: E402

from napari_tracker._corrections import TrackCorrections  # noqa: E402
from napari_tracker._live_tracks import OUTPUT_COLUMNS  # noqa: E402
from napari_tracker._review import TrackReview  # noqa: E402
from napari_tracker._view import camera  # noqa: E402
from napari_tracker._writer import write_tracks  # noqa: E402

pytestmark = pytest.mark.napari


def review_of(viewer, layer):
    return TrackReview(viewer, layer)


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
    np.testing.assert_allclose(camera(viewer).center[-2:], (2.0, 8.0))
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
    fix = TrackCorrections(review)

    def frames_of(table, track_id):
        return sorted(table["frame"][table["track_id"] == track_id].tolist())

    # delete
    review.select(1)
    edit_and_undo(review, layer, fix.delete_track, lambda t: frames_of(t, 1) == [] or pytest.fail("not deleted"))
    # split at the current frame
    viewer.dims.set_point(0, 3)
    review.select(0)

    def check_split(table):
        assert frames_of(table, 0) == [0, 1, 2]
        assert frames_of(table, 3) == [3, 4]
    edit_and_undo(review, layer, fix.split_track, check_split)
    # join: previous selection 0, selection 2
    review.select(0)
    review.select(2)

    def check_join(table):
        assert frames_of(table, 0) == [0, 1, 2, 3, 4, 6, 7, 8] and frames_of(table, 2) == []
        cost = table["link_cost"][(table["track_id"] == 0) & (table["frame"] == 6)]
        assert cost == pytest.approx(4.0)
    edit_and_undo(review, layer, fix.join_tracks, check_join)
    # reassign the previously selected point (track 0, frame 4) to the selected track (2)
    viewer.dims.set_point(0, 4)
    review.select(0)
    review.select(2, row=review.edits.point_at(2, 6))

    def check_reassign(table):
        assert frames_of(table, 0) == [0, 1, 2, 3] and frames_of(table, 2) == [4, 6, 7, 8]
    edit_and_undo(review, layer, fix.reassign_point, check_reassign)
    assert not review.edits.can_undo


def test_keyboard_shortcuts(viewer, tracks_csv):
    from napari.utils.key_bindings import KeyBinding

    from napari_tracker._shortcuts import SHORTCUTS

    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)
    TrackCorrections(review)  # binds delete, split, join, reassign

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
    TrackCorrections(review, bind_keys=False).delete_track(1)
    TrackCorrections(review, bind_keys=False).split_track(0, 3)
    out = tmp_path / "edited.csv"
    write_tracks(str(out), *layer.as_layer_data_tuple()[:2])
    saved = read_table(out)
    expected = review.edits.output_table()
    assert list(saved) == list(OUTPUT_COLUMNS)
    for name in OUTPUT_COLUMNS:
        np.testing.assert_allclose(saved[name], expected[name], rtol=1e-8, equal_nan=True, err_msg=name)
    assert sorted(np.unique(saved["track_id"]).tolist()) == [0, 2, 3]


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
    TrackCorrections(review, bind_keys=False).reassign_point(review.edits.point_at(0, 2), 1)  # swap: now wrong links
    assert (layer.features["gt_link"] == 0).sum() == 4
    review.set_colour_by("track")
    assert layer.color_by == "colour_track"




def test_colour_by_confidence_leaves_no_track_invisible(viewer, tracks_csv):
    """Issue 29.5: link_confidence is NaN at track starts, and napari draws nothing where a colour value is
    NaN; the confidence mode gives every vertex a colour (starts: their first link's; no link at all: grey)."""
    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)
    TrackCorrections(review, bind_keys=False).split_track(2, 8)  # a one-point track (frame 8): no link anywhere
    review.set_colour_by("link confidence")
    assert layer.color_by == "colour_confidence"
    values = np.asarray(layer.features["colour_confidence"])
    assert np.isfinite(values).all()
    table = layer_table(layer)
    single = table["track_id"] == review.selected_track
    assert values[single] == pytest.approx([0.0])  # grey
    assert values[~single] == pytest.approx(0.1 + 0.9 * 0.9)  # starts take their first link's 0.9
    colours = np.asarray(layer.track_colors)
    assert np.isfinite(colours).all() and (colours[:, 3] > 0).all()
    np.testing.assert_allclose(colours[single, :3], [[0.5, 0.5, 0.5]], atol=0.01)


def test_correct_and_wrong_differ_for_red_green_colour_blindness():
    """Issue 29.5: the ground-truth colours differ along the blue-yellow axis, which red-green colour
    blindness keeps (pure red and green would differ by ~0.03 there)."""
    from napari_tracker._layers import colormaps

    truth = colormaps()["colour_truth"]
    wrong, correct = (truth.map(np.array([v]))[0, :3] for v in (0.5, 1.0))
    blue_yellow = [c[2] - (c[0] + c[1]) / 2 for c in (wrong, correct)]
    assert abs(blue_yellow[0] - blue_yellow[1]) > 0.5


def test_jump_goes_to_the_costliest_link_and_zooms(viewer, tmp_path):
    """Issue 29.5: the table's jump goes to the frame of the track's worst link, centred and zoomed in."""
    from tracker.io import write_table

    table = tracks_table()
    table["link_cost"][(table["track_id"] == 0) & (table["frame"] == 3)] = 50.0  # a bad link into frame 3
    write_table(tmp_path / "tracks.csv", table)
    layer = open_tracks(viewer, tmp_path / "tracks.csv")
    viewer.add_image(np.zeros((9, 4, 40, 40)), name="room")  # a scene larger than the tracks
    review = review_of(viewer, layer)
    assert review.edits.summary()["worst_frame"].tolist() == [3, 1, 7]  # equal costs: the first link
    row = review.edits.point_at(0, 3)
    viewer.reset_view()
    zoom_all = camera(viewer).zoom
    review.jump_to(0, frame=int(review.edits.summary()["worst_frame"][0]))
    assert viewer.dims.point[0] == 3
    assert review.selected_track == 0 and review.selected_row == row
    np.testing.assert_allclose(camera(viewer).center[-2:], (2.0, 5.0))
    assert camera(viewer).zoom > 2 * zoom_all


def test_close_detaches_from_the_viewer(viewer, tracks_csv):
    """Issue 29.2: a closed review leaves no mouse callback, shortcut or helper layer behind."""
    from napari.utils.key_bindings import KeyBinding

    from napari_tracker._shortcuts import SHORTCUTS

    layer = open_tracks(viewer, tracks_csv)
    callbacks = list(viewer.mouse_drag_callbacks)
    review = review_of(viewer, layer)
    review.select(1)
    assert len(viewer.mouse_drag_callbacks) == len(callbacks) + 1
    assert "selected track" in viewer.layers
    review.close()
    assert list(viewer.mouse_drag_callbacks) == callbacks
    assert "selected track" not in viewer.layers and "selected point" not in viewer.layers
    assert all(KeyBinding.from_str(key) not in viewer.keymap for key in SHORTCUTS.values())


def test_a_new_review_continues_the_edit_history(viewer, tracks_csv):
    """Issue 29.2: the dock closed and opened again: the new review of the layer can undo the old one's edits;
    a layer changed by something else since starts afresh."""
    layer = open_tracks(viewer, tracks_csv)
    first = review_of(viewer, layer)
    TrackCorrections(first, bind_keys=False).delete_track(1)
    first.close()
    second = review_of(viewer, layer)
    assert second.edits is first.edits and second.edits.can_undo
    assert second.undo()
    assert len(np.unique(layer.data[:, 0])) == 3
    second.close()
    layer.data = layer.data[layer.data[:, 0] != 2]
    third = review_of(viewer, layer)
    assert third.edits is not first.edits and not third.edits.can_undo
    assert sorted(third.edits.track_ids().tolist()) == [0, 1]


def test_the_selection_highlights_move_without_data_events_or_visibility_changes(viewer, tracks_csv):
    """The review queue's inner loop: moving the selection writes the marks in place (no data event, which makes
    napari measure every layer), hides them through ``shown`` and never touches ``visible`` (a scene-graph
    rebuild), so a user's hidden highlight stays hidden; the track highlight is re-assigned only for a new track."""
    layer = open_tracks(viewer, tracks_csv)
    review = review_of(viewer, layer)
    edits = review.edits
    review.select(0, edits.point_at(0, 2))
    point, track = viewer.layers["selected point"], viewer.layers["selected track"]
    events = []
    for helper in (point, track):
        helper.events.data.connect(lambda event, name=helper.name: events.append(("data", name)))
        helper.events.visible.connect(lambda event, name=helper.name: events.append(("visible", name)))
    review.select(0, edits.point_at(0, 3))
    np.testing.assert_allclose(point.data, [[3, 1.0, 2.0, 5.0]])  # frame, z, y, x of track 0 at frame 3
    assert np.all(point.shown) and events == []
    review.select(1, edits.point_at(1, 1))
    assert events == [("data", "selected track")]  # another track: its points, once
    np.testing.assert_allclose(track.data[:, 4], 10.0)
    assert track.tail_length >= 4 and track.head_length >= 4  # drawn whole (frames 0-4) in every frame
    review.clear_selection()
    assert not np.any(point.shown) and len(track.data) == 1  # a one-point track draws nothing
    assert point.visible and track.visible
    track.visible = False  # the user hides the highlight: it stays hidden
    review.select(0)
    assert not track.visible and len(track.data) == 5 and np.all(point.shown)
    review.close()


def test_moving_frame_and_plane_slices_the_layers_once_and_right(viewer, monkeypatch):
    """napari slices the layers on the ``point`` event and again on ``current_step``, measuring the layers each
    time (15 ms at 100k track points): set_point_once measures them once, slices at the new position, and still
    slices where the point moved within its step."""
    from napari.layers import Tracks

    from napari_tracker._view import set_point_once

    layer = viewer.add_points(np.array([[t, z, 5.0, 5.0] for t in range(6) for z in range(6)]), size=1)
    viewer.add_tracks(np.array([[k, t, 2.0 * k, 5.0 + k, 5.0] for k in range(3) for t in range(6)], float))
    measured = []
    extent = Tracks._extent_data.fget
    monkeypatch.setattr(Tracks, "_extent_data", property(lambda self: measured.append(1) or extent(self)))
    slicings = []
    layer.events.set_data.connect(lambda event: slicings.append(tuple(viewer.dims.point[:2])))
    set_point_once(viewer, (0, 1), (3, 4))
    assert viewer.dims.current_step[:2] == (3, 4) and slicings == [(3.0, 4.0)] and len(measured) == 1
    np.testing.assert_allclose(layer._slice_input.world_slice.point[:2], (3, 4))
    assert len(layer._view_data) == 1  # the point of frame 3, plane 4
    slicings.clear()
    set_point_once(viewer, (1,), (4.3,))  # within the step: no current_step event, sliced all the same
    assert viewer.dims.current_step[1] == 4 and slicings == [(3.0, 4.3)]
    measured.clear()
    viewer.dims.set_point((0, 1), (2, 1))  # (napari's own)
    assert len(measured) >= 2
