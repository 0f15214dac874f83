"""The napari plugin's edit model (plugins/napari_tracker/_edits.py): pure Python, no napari or Qt needed."""

from __future__ import annotations

import numpy as np
import pytest

from napari_tracker._edits import EditError, TrackEdits
from napari_tracker._live_tracks import squared_links

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def make_tracks() -> dict[str, np.ndarray]:
    """Track 0: frames 0-4 along x; track 1: frames 0-4 along y; track 2: frames 6-8."""
    rows = []
    for t in range(5):
        rows.append((0, t, 1.0, 0.0, float(t)))
        rows.append((1, t, 2.0, float(t), 10.0))
    for t in range(6, 9):
        rows.append((2, t, 1.0, 0.0, float(t)))
    track_id, frame, z, y, x = (np.array(c) for c in zip(*rows))
    table = {"track_id": track_id.astype(np.int64), "frame": frame.astype(np.int64), "z": z, "y": y, "x": x,
             "intensity": np.arange(len(rows), dtype=float), "quality": np.ones(len(rows))}
    table["link_cost"] = squared_links(table) * 0.5  # "tracker" costs differ from squared distance
    table["link_confidence"] = np.where(np.isnan(table["link_cost"]), np.nan, 0.9)
    return table


def snapshot(edits: TrackEdits) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in edits.output_table().items()}


def assert_same(a, b):
    assert list(a) == list(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def check_consistent(edits: TrackEdits):
    """Invariants: one point per (track, frame); link_cost NaN exactly at starts."""
    table = edits.table()
    keys = table["track_id"] * 10_000 + table["frame"]
    assert len(np.unique(keys)) == len(keys)
    start = np.r_[True, table["track_id"][1:] != table["track_id"][:-1]][: len(keys)]
    np.testing.assert_array_equal(np.isnan(table["link_cost"]), start)


def test_output_columns_match_track_run():
    edits = TrackEdits(make_tracks())
    out = edits.output_table()
    assert list(out) == ["track_id", "frame", "z", "y", "x", "intensity", "quality", "link_cost", "link_confidence"]
    assert np.all(np.diff(out["frame"]) >= 0)


def test_missing_link_cost_is_computed_and_missing_columns_refused():
    table = make_tracks()
    del table["link_cost"]
    edits = TrackEdits(table)
    cost = edits.table()["link_cost"]
    assert np.isnan(cost[0]) and cost[1] == pytest.approx(1.0)
    with pytest.raises(EditError, match="missing"):
        TrackEdits({"track_id": np.array([0]), "frame": np.array([0])})


def test_delete_track_and_undo_redo():
    edits = TrackEdits(make_tracks())
    before = snapshot(edits)
    edits.delete_track(1)
    assert 1 not in edits.track_ids()
    assert len(edits.table()["frame"]) == 8
    check_consistent(edits)
    after = snapshot(edits)
    edits.undo()
    assert_same(snapshot(edits), before)
    edits.redo()
    assert_same(snapshot(edits), after)
    with pytest.raises(EditError):
        edits.delete_track(1)


def test_split_track():
    edits = TrackEdits(make_tracks())
    before = snapshot(edits)
    edit = edits.split_track(0, 3)
    new_id = edit.selection[0]
    assert new_id == 3
    np.testing.assert_array_equal(edits.column("frame")[edits.track_rows(0)], [0, 1, 2])
    np.testing.assert_array_equal(edits.column("frame")[edits.track_rows(new_id)], [3, 4])
    first = edits.track_rows(new_id)[0]
    assert np.isnan(edits.column("link_cost")[first]) and np.isnan(edits.column("link_confidence")[first])
    # the untouched link keeps the tracker's cost
    assert edits.column("link_cost")[edits.track_rows(new_id)[1]] == pytest.approx(0.5)
    check_consistent(edits)
    edits.undo()
    assert_same(snapshot(edits), before)
    edits.redo()
    assert new_id in edits.track_ids()
    with pytest.raises(EditError, match="empty"):
        edits.split_track(0, 0)
    with pytest.raises(EditError, match="empty"):
        edits.split_track(0, 99)


def test_join_tracks_either_order():
    for first, second in ((0, 2), (2, 0)):
        edits = TrackEdits(make_tracks())
        before = snapshot(edits)
        edits.join_tracks(first, second)
        assert second not in edits.track_ids()
        rows = edits.track_rows(first)
        np.testing.assert_array_equal(edits.column("frame")[rows], [0, 1, 2, 3, 4, 6, 7, 8])
        join = rows[5]
        assert edits.column("link_cost")[join] == pytest.approx(4.0)  # x 4 -> 6
        assert edits.column("link_confidence")[join] == 1.0
        check_consistent(edits)
        edits.undo()
        assert_same(snapshot(edits), before)
    with pytest.raises(EditError, match="overlap"):
        edits.join_tracks(0, 1)
    with pytest.raises(EditError, match="different"):
        edits.join_tracks(0, 0)


def test_reassign_point_moves_swaps_and_detaches():
    edits = TrackEdits(make_tracks())
    before = snapshot(edits)
    # track 2 has no point in frame 4: track 0's frame-4 point moves into it (a gap link 4 -> 6)
    row = edits.point_at(0, 4)
    edits.reassign_point(row, 2)
    np.testing.assert_array_equal(edits.column("frame")[edits.track_rows(2)], [4, 6, 7, 8])
    assert edits.column("link_cost")[edits.point_at(2, 6)] == pytest.approx(4.0)
    assert np.isnan(edits.column("link_cost")[row])
    check_consistent(edits)
    edits.undo()
    assert_same(snapshot(edits), before)
    # both tracks have a frame-2 point: they swap
    row0, row1 = edits.point_at(0, 2), edits.point_at(1, 2)
    edits.reassign_point(row0, 1)
    assert edits.point_at(1, 2) == row0 and edits.point_at(0, 2) == row1
    assert edits.column("link_cost")[edits.point_at(0, 3)] == pytest.approx(1 + 4 + 49)  # (1,2,10)->(1,0,3)
    check_consistent(edits)
    edits.undo()
    assert_same(snapshot(edits), before)
    # detach to a new track
    edit = edits.reassign_point(row0, None)
    assert len(edits.track_rows(edit.selection[0])) == 1
    assert edits.column("link_cost")[edits.point_at(0, 3)] == pytest.approx(4.0)  # 1 -> 3 over the gap
    check_consistent(edits)
    edits.undo()
    assert_same(snapshot(edits), before)
    with pytest.raises(EditError, match="already"):
        edits.reassign_point(row0, 0)
    with pytest.raises(EditError, match="no track"):
        edits.reassign_point(row0, 42)


def test_delete_point_links_neighbours():
    edits = TrackEdits(make_tracks())
    edits.delete_point(edits.point_at(0, 2))
    assert edits.column("link_cost")[edits.point_at(0, 3)] == pytest.approx(4.0)
    check_consistent(edits)
    edits.undo()
    assert edits.column("link_cost")[edits.point_at(0, 3)] == pytest.approx(0.5)


def test_new_edit_clears_redo_and_undo_errors():
    edits = TrackEdits(make_tracks())
    with pytest.raises(EditError):
        edits.undo()
    edits.delete_track(2)
    edits.undo()
    assert edits.can_redo
    edits.split_track(0, 2)
    assert not edits.can_redo
    with pytest.raises(EditError):
        edits.redo()
    assert edits.undo_description.startswith("split track 0")


def test_summary():
    edits = TrackEdits(make_tracks())
    summary = edits.summary()
    np.testing.assert_array_equal(summary["track_id"], [0, 1, 2])
    np.testing.assert_array_equal(summary["length"], [5, 5, 3])
    np.testing.assert_allclose(summary["mean_speed"], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(summary["mean_link_cost"], [0.5, 0.5, 0.5])
    edits.join_tracks(0, 2)
    summary = edits.summary()
    np.testing.assert_array_equal(summary["length"], [8, 5])
    np.testing.assert_allclose(summary["mean_speed"][0], 8 / 8)  # 8 µm over 8 frames
    assert summary["max_link_cost"][0] == pytest.approx(4.0)
    np.testing.assert_array_equal(edits.per_point("length")[:8], 8)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["delete", "split", "join", "reassign", "detach", "undo", "redo"]),
                          st.integers(0, 50), st.integers(0, 50)), max_size=12))
def test_random_edit_sequences_undo_to_the_start(operations):
    edits = TrackEdits(make_tracks())
    before = snapshot(edits)
    for operation, a, b in operations:
        ids = edits.track_ids()
        rows = edits.rows()
        try:
            if operation == "undo":
                edits.undo()
            elif operation == "redo":
                edits.redo()
            elif not len(ids):
                continue
            elif operation == "delete":
                edits.delete_track(ids[a % len(ids)])
            elif operation == "split":
                edits.split_track(ids[a % len(ids)], b % 10)
            elif operation == "join":
                edits.join_tracks(ids[a % len(ids)], ids[b % len(ids)])
            elif operation == "reassign":
                edits.reassign_point(rows[a % len(rows)], ids[b % len(ids)])
            elif operation == "detach":
                edits.reassign_point(rows[a % len(rows)], None)
        except EditError:
            pass
        check_consistent(edits)
    while edits.can_undo:
        edits.undo()
    assert_same(snapshot(edits), before)


def test_summary_names_the_frame_of_each_tracks_costliest_link():
    table = make_tracks()
    table["link_cost"][(table["track_id"] == 1) & (table["frame"] == 3)] = 99.0
    edits = TrackEdits(table)
    summary = edits.summary()
    assert summary["worst_frame"].tolist() == [1, 3, 7]  # ties: the earliest link
    edits.split_track(2, 7)  # track 2 keeps frame 6 only (no links): its start
    summary = edits.summary()
    assert summary["worst_frame"][summary["track_id"] == 2].tolist() == [6]
    assert np.isnan(summary["max_link_cost"][summary["track_id"] == 2]).all()
