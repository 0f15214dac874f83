"""The plugin's link decisions and review queue (plugins/napari_tracker/_decisions.py, _review_queue.py): pure
Python over the edit model, no napari or Qt needed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from napari_tracker._decisions import LinkDecisions, relink_options
from napari_tracker._edits import EditError, TrackEdits
from napari_tracker._review_queue import ReviewQueue
from tracker.linking import link_detections, relink
from tracker.simulate import simulate_tracks

OPTIONS = {"max_displacement_um": 1.5}


@pytest.fixture(scope="module")
def linked():
    truth = simulate_tracks(n_particles=60, n_frames=12, field_of_view_um=(6.0, 12.0, 12.0), step_um=0.5, seed=3)
    return link_detections({k: truth[k] for k in ("frame", "z", "y", "x")}, 1.5)


def snapshot(edits):
    return {k: v.copy() for k, v in edits.output_table().items()}


def links_of(edits):
    """The set of links (source row, target row) of the live tracks."""
    pred = edits.predecessor_rows()
    return {(int(pred[j]), int(j)) for j in np.flatnonzero(pred >= 0)}


def test_reject_forbids_relinks_as_the_api_does_and_undoes_in_one_step(linked):
    edits = TrackEdits(linked)
    decisions = LinkDecisions(edits, OPTIONS)
    before = snapshot(edits)
    row = int(np.nanargmin(edits.column("link_confidence")))
    source = decisions.source_of(row)
    pred_before = edits.predecessor_rows().copy()
    edit = decisions.reject(row)
    n_changed = int(np.count_nonzero(edits.predecessor_rows() != pred_before))
    assert n_changed >= 1 and f"re-solved: {n_changed} link" in edit.description
    assert (source, row) in edits.forbidden and (source, row) not in links_of(edits)
    # The same re-solve through the public API on the same table (rows in the same order) gives the same links.
    expected = relink(linked, forbidden=[(source, row)], **OPTIONS)
    got = TrackEdits(expected)
    assert links_of(edits) == links_of(got)
    np.testing.assert_allclose(edits.column("link_cost"), expected["link_cost"], equal_nan=True)
    assert "re-solved" in edit.description and edits.n_edits == 1
    edits.undo()
    after = snapshot(edits)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert not edits.forbidden
    edits.redo()
    assert (source, row) in edits.forbidden and (source, row) not in links_of(edits)


def test_a_pinned_link_survives_a_nearby_rejection(linked):
    edits = TrackEdits(linked)
    decisions = LinkDecisions(edits, OPTIONS)
    row = int(np.nanargmin(edits.column("link_confidence")))
    # Pin every other link of the same frame pair (within the window), then reject the doubtful one.
    frame = edits.column("frame")
    pred = edits.predecessor_rows()
    same = [int(j) for j in np.flatnonzero((frame == frame[row]) & (pred >= 0)) if j != row]
    for j in same:
        decisions.accept(j)
    kept = {(int(pred[j]), j) for j in same}
    decisions.reject(row)
    assert kept <= links_of(edits)
    assert np.all(edits.column("pinned")[same]) and np.all(edits.column("reviewed")[same])


def test_edits_that_change_a_pinned_link_clear_its_flags(linked):
    edits = TrackEdits(linked)
    decisions = LinkDecisions(edits, OPTIONS)
    track = int(edits.column("track_id")[0])
    rows = edits.track_rows(track)
    decisions.pin_track(track)
    assert np.all(edits.column("pinned")[rows[1:]]) and not edits.column("pinned")[rows[0]]
    edits.split_track(track, int(edits.column("frame")[rows[2]]))
    assert not edits.column("pinned")[rows[2]] and edits.column("pinned")[rows[1]]
    with pytest.raises(EditError, match="starts its track"):
        decisions.accept(int(rows[0]))


def test_the_queue_orders_by_confidence_skips_reviewed_and_counts(linked):
    edits = TrackEdits(linked)
    queue = ReviewQueue(edits)
    links = queue.links()
    confidence = edits.column("link_confidence")[links]
    assert len(links) == len(links_of(edits))
    assert np.all(np.diff(confidence[np.isfinite(confidence)]) >= 0)
    first = queue.next()
    assert first == links[0]
    assert queue.next() == links[1]
    assert queue.previous() == links[0]
    LinkDecisions(edits, OPTIONS).accept(int(links[1]))  # reviewed: skipped from now on
    assert queue.next() == links[2]
    assert queue.progress_text() == f"1 of {len(links)} reviewed"


def test_the_queue_puts_wrong_links_first_by_ground_truth(linked):
    edits = TrackEdits(linked)
    live = edits.rows()
    correct = np.ones(len(live), dtype=np.int8)
    links = ReviewQueue(edits).links()
    wrong_row = int(links[-1])  # the most confident link, said to be wrong
    correct[np.flatnonzero(live == wrong_row)[0]] = 0
    queue = ReviewQueue(edits, "ground truth", correct)
    assert queue.links()[0] == wrong_row
    with pytest.raises(ValueError, match="ground truth"):
        ReviewQueue(edits, "ground truth")


def test_relink_options_take_the_runs_linking_parameters():
    assert relink_options({"max_displacement_um": 2.0, "spot_radius_um": 0.4, "persistence": None,
                           "max_gap": 2}) == {"max_displacement_um": 2.0, "max_gap": 2}


def test_new_pieces_of_a_re_solve_get_distinct_fresh_ids():
    """Two new pieces whose re-solve ids (above the live ids) meet the model's next ids stay two tracks."""
    rows = [(0, t, 0.0, 0.0, float(t)) for t in range(4)] + [(1, t, 0.0, 5.0, float(t)) for t in range(4)] \
        + [(2, 9, 0.0, 9.0, 9.0)]
    table = {name: np.array(column) for name, column in zip(("track_id", "frame", "z", "y", "x"), zip(*rows))}
    edits = TrackEdits(table)
    edits.delete_track(2)  # the model's next id is 3; the live ids are 0 and 1
    live = edits.rows()
    before = {name: edits.column(name)[live].copy() for name in ("track_id", "link_cost")}
    after = {"track_id": before["track_id"].copy(), "link_cost": before["link_cost"].copy(),
             "link_confidence": np.full(len(live), np.nan)}
    frames = edits.column("frame")[live]
    after["track_id"][(before["track_id"] == 0) & (frames >= 2)] = 2  # relink's new pieces: 2 and 3
    after["track_id"][(before["track_id"] == 1) & (frames >= 2)] = 3
    LinkDecisions(edits, OPTIONS)._commit("split both", live, before, after, (int(live[1]), int(live[2])))
    assert len(edits.track_ids()) == 4


def test_links_without_a_confidence_come_after_costliest_first():
    rows = [(0, t, 0.0, 0.0, float(t) * (1 + t)) for t in range(4)]
    table = {name: np.array(column) for name, column in zip(("track_id", "frame", "z", "y", "x"), zip(*rows))}
    table["link_confidence"] = np.array([np.nan, 0.7, np.nan, np.nan])
    table["link_cost"] = np.array([np.nan, 1.0, 4.0, 9.0])
    queue = ReviewQueue(TrackEdits(table))
    np.testing.assert_array_equal(queue.links(), [1, 3, 2])


def _stepped(links, reviewed, current, forward):
    """The queue's move, from its sorted order: the next unreviewed link after ``current`` (wrapping), or the
    link before it."""
    position = None if current is None or current not in links else list(links).index(current)
    if not forward:
        return None if not position else int(links[position - 1])
    start = 0 if position is None else position + 1
    for index in [*range(start, len(links)), *range(start)]:
        if not reviewed[index]:
            return int(links[index])
    return None


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_stepping_through_the_queue_follows_its_sorted_order(data):
    """next / previous walk :meth:`ReviewQueue.links` (ties in row order) with reviewed links skipped, though
    they find their way in one pass over the links, without the sort."""
    n_tracks = data.draw(st.integers(1, 5))
    lengths = data.draw(st.lists(st.integers(1, 6), min_size=n_tracks, max_size=n_tracks))
    rows = [(k, t, 0.0, float(k), float(t)) for k, n in enumerate(lengths) for t in range(n)]
    table = {name: np.array(column) for name, column in zip(("track_id", "frame", "z", "y", "x"), zip(*rows))}
    # few distinct confidences (ties), some missing (ordered by cost after the others)
    table["link_confidence"] = np.array(data.draw(st.lists(st.sampled_from([0.1, 0.5, 0.9, np.nan]),
                                                           min_size=len(rows), max_size=len(rows))))
    edits = TrackEdits(table)
    queue = ReviewQueue(edits)
    links = queue.links()
    if len(links):
        flags = data.draw(st.lists(st.booleans(), min_size=len(links), max_size=len(links)))
        reviewed = links[np.array(flags, dtype=bool)]
        if len(reviewed):
            edits.change_cells("review", {"reviewed": (reviewed, np.ones(len(reviewed), bool))})
    reviewed = queue.reviewed()
    for forward in data.draw(st.lists(st.booleans(), max_size=12)):
        expected = _stepped(queue.links(), reviewed, queue.current, forward)
        before = queue.current
        moved = queue.next() if forward else queue.previous()
        assert moved == expected
        assert queue.current == (before if moved is None else moved)
