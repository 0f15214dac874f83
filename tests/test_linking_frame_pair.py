"""The forward pass: one frame pair's assignment, with track ends of earlier frames as extra rows."""

from __future__ import annotations

import numpy as np

from tracker.linking.candidate_search import CandidateSearch
from tracker.linking.frame_pair import link_pair, track_ends_before
from tracker.linking.missing_detections import MissingRate
from tracker.linking.motion import MotionModel
from tracker.linking.prediction import Prediction
from tracker.linking.track_state import FrameRanges, TrackState


def _pass(positions, frames, persistence=None):
    """State, prediction, search and missing rate for the points (none of them near the volume's edge)."""
    state = TrackState.unlinked(positions, frames)
    prediction = Prediction("persistent", True, 1.0, MotionModel(persistence=persistence))
    return state, prediction, CandidateSearch(positions), MissingRate(np.full(len(frames), 100.0))


def test_links_one_frame_pair():
    # Three particles 3 µm apart, each moving 0.2-0.3 µm: each links to its own next position.
    start = np.array([[0.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]])
    moved = start[[2, 0, 1]] + np.array([[0.0, 0.2, 0.0], [0.3, 0.0, 0.0], [0.0, 0.0, 0.25]])
    state, prediction, search, missing = _pass(np.concatenate([start, moved]), np.repeat([0, 1], 3))
    link_pair(state, prediction, search, missing, np.arange(3), np.arange(3, 6), solver="scipy")
    np.testing.assert_array_equal(state.predecessor, [-1, -1, -1, 2, 0, 1])
    np.testing.assert_allclose(state.link_cost[3:], [0.04, 0.09, 0.0625])
    np.testing.assert_allclose(state.velocity[3:], moved - start[[2, 0, 1]])
    assert np.all(state.confidence[3:] > 0.99) and np.all(state.has_successor[:3])
    assert prediction.model.n_steps == 3 and (missing.inner_rows, missing.inner_linked) == (3, 3)


def test_a_track_end_competes_in_a_later_frame_pair():
    # P moves 0.25 µm per frame along x and is not detected in frame 2; Q, 5 µm away, is seen throughout.
    # Points: P0, Q0, P1, Q1, Q2, P3, Q3.
    frames = np.array([0, 0, 1, 1, 2, 3, 3])
    positions = np.stack([np.full(7, 5.0), [0.0, 5.0, 0.0, 5.0, 5.0, 0.0, 5.0], 5.0 + 0.25 * frames], axis=1)
    ranges = FrameRanges.of(frames)
    for with_ends in (True, False):
        state, prediction, search, missing = _pass(positions, frames, persistence=1.0)
        for k in range(2):
            link_pair(state, prediction, search, missing, ranges.points(k), ranges.points(k + 1), solver="scipy")
        assert state.predecessor[4] == 3 and not state.has_successor[2]  # P1 ends
        gap_ends, gap_steps = track_ends_before(state, ranges, 2, 2 if with_ends else 0)
        np.testing.assert_array_equal(gap_ends, [2] if with_ends else [])
        np.testing.assert_array_equal(gap_steps, [2] if with_ends else [])
        link_pair(state, prediction, search, missing, ranges.points(2), ranges.points(3), solver="scipy",
                  gap_ends=gap_ends, gap_steps=gap_steps)
        assert state.predecessor[6] == 4
        if with_ends:  # P1 -> P3, its cost and velocity per frame spanned
            assert state.predecessor[5] == 2 and state.link_cost[5] == 0.0
            np.testing.assert_array_equal(state.velocity[5], [0.0, 0.0, 0.25])
            assert 0.0 < state.confidence[5] <= 1.0
        else:
            assert state.predecessor[5] == -1
