"""The review session file (plugins/napari_tracker/_session.py): a save/restore round trip of tracks, edit
history, flags, forbidden links and state. Needs neither napari nor Qt (the viewer's part:
test_napari_session.py)."""

from __future__ import annotations

import numpy as np
import pytest

from napari_tracker._decisions import LinkDecisions
from napari_tracker._edits import TrackEdits
from napari_tracker._session import load_session, save_session, session_path
from tracker.linking import link_detections
from tracker.simulate import simulate_tracks


@pytest.fixture(scope="module")
def linked():
    truth = simulate_tracks(n_particles=40, n_frames=10, field_of_view_um=(6.0, 12.0, 12.0), step_um=0.5, seed=5)
    return link_detections({k: truth[k] for k in ("frame", "z", "y", "x")}, 1.5)


def reviewed_model(linked):
    edits = TrackEdits(linked)
    decisions = LinkDecisions(edits, {"max_displacement_um": 1.5})
    order = np.argsort(np.nan_to_num(edits.column("link_confidence"), nan=2.0))
    decisions.accept(int(order[1]))
    decisions.reject(int(order[0]))
    track = int(edits.track_ids()[3])
    edits.split_track(track, int(edits.column("frame")[edits.track_rows(track)[2]]))
    edits.delete_track(int(edits.track_ids()[0]))
    edits.undo()  # one edit on the redo stack
    return edits


def assert_same_model(a: TrackEdits, b: TrackEdits):
    ta, tb = a.output_table(), b.output_table()
    assert "pinned" not in ta and "reviewed" not in ta  # (flags live in the session, not the tracks file)
    assert list(ta) == list(tb)
    for name in ta:
        np.testing.assert_array_equal(ta[name], tb[name], err_msg=name)
    assert a.forbidden == b.forbidden and a.n_edits == b.n_edits
    assert a.undo_description == b.undo_description and a.redo_description == b.redo_description


def test_a_session_round_trip_keeps_tracks_history_flags_and_state(linked, tmp_path):
    edits = reviewed_model(linked)
    path = save_session(tmp_path / "t.review.json", edits, {"parameters": {"max_displacement_um": 1.5},
                                                            "queue_order": "confidence", "current_link": 7})
    restored, state = load_session(path)
    assert_same_model(edits, restored)
    assert state == {"parameters": {"max_displacement_um": 1.5}, "queue_order": "confidence", "current_link": 7}
    assert np.array_equal(edits.column("pinned"), restored.column("pinned"))
    assert np.array_equal(edits.column("reviewed"), restored.column("reviewed"))
    # The history works the same on both: redo, then undo everything.
    for model in (edits, restored):
        model.redo()
    assert_same_model(edits, restored)
    while edits.can_undo:
        edits.undo()
        restored.undo()
        assert_same_model(edits, restored)
    assert not restored.forbidden
    fresh = TrackEdits(linked)
    np.testing.assert_array_equal(restored.output_table()["track_id"], fresh.output_table()["track_id"])
    # New ids after a restore do not reuse an id an undone edit gave out.
    assert restored.new_id() == edits.new_id()


def test_a_file_that_is_not_a_session_is_refused(tmp_path):
    path = tmp_path / "x.review.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a review session"):
        load_session(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        load_session(path)


def test_session_path_is_beside_the_tracks():
    assert session_path("/a/b/tracks.csv").as_posix() == "/a/b/tracks.review.json"
