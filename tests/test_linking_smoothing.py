"""Forward-backward smoothing: every frame pair linked again given the track's future."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics
from tracker.linking import link_detections, smoothing
from tracker.linking.candidate_search import CandidateSearch
from tracker.linking.missing_detections import SCALED_NO_LINK_COST
from linking_cells import dense_cell, two_tracks


@pytest.mark.parametrize("lookahead", [False, True])
def test_smoothing_undoes_a_swap_of_the_forward_pass(lookahead):
    # The forward pass swapped the tracks between frames 1 and 2 (A1 -> B2, B1 -> A2) and went on straight
    # (A2 -> A3, B2 -> B3, :func:`linking_cells.two_tracks`): the steps after frame 2 (or, looking ahead,
    # the detections nearest to where each candidate's track goes next) tell the straight links.
    state, prediction = two_tracks([-1, -1, 0, 1, 3, 2, 4, 5])
    state.start_successors()
    x, y = smoothing.smooth_pair(state, prediction, CandidateSearch(state.positions), np.array([2, 3]),
                                 np.array([4, 5]), lookahead=lookahead, no_link_cost=SCALED_NO_LINK_COST)
    np.testing.assert_array_equal(state.predecessor, [-1, -1, 0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(state.successor, [2, 3, 4, 5, 6, 7, -1, -1])
    np.testing.assert_allclose(state.velocity[4:6], [[0, 0, 0.5]] * 2)
    np.testing.assert_allclose(state.link_cost[4:6], (0.5 - 0.9 * 0.5) ** 2)
    assert np.all(state.confidence[4:6] > 0.9) and len(x) == len(y) == 0  # sure links: nothing to exchange
    # The forward pass's straight links stay.
    before = state.predecessor.copy()
    smoothing.smooth_pair(state, prediction, CandidateSearch(state.positions), np.array([2, 3]), np.array([4, 5]),
                          lookahead=lookahead, no_link_cost=SCALED_NO_LINK_COST)
    np.testing.assert_array_equal(state.predecessor, before)


@pytest.mark.parametrize("persistence", [0.5, 0.9])
def test_smoothing_raises_f1_for_persistent_motion(persistence):
    truth, detections, step, nn = dense_cell(0.5, persistence)
    f1 = [metrics.evaluate(link_detections(detections, 2.5 * step, solver="scipy", smoothing=on), truth,
                           0.5 * nn)["link_f1"] for on in (False, True)]
    assert f1[1] > f1[0] + 0.004


def test_lookahead_raises_f1_where_predictions_are_sharp(monkeypatch):
    # Persistence 0.9: about 0.08 other detections within 3 residual sigmas of a detection.
    truth, detections, step, nn = dense_cell(0.5, 0.9)
    f1 = []
    for crowding in (0.0, smoothing.LOOKAHEAD_MAX_CROWDING):  # 0: never look ahead
        monkeypatch.setattr(smoothing, "LOOKAHEAD_MAX_CROWDING", crowding)
        f1.append(metrics.evaluate(link_detections(detections, 2.5 * step, solver="scipy"), truth,
                                   0.5 * nn)["link_f1"])
    assert f1[1] > f1[0] + 0.001  # 0.9919 -> 0.9942 here


def test_no_lookahead_in_crowded_data(monkeypatch):
    # Persistence 0.5 at step/NN 0.6: about 0.57 other detections within 3 residual sigmas.
    _, detections, step, _ = dense_cell(0.6, 0.5, n=600, frames=8)
    tables = []
    for crowding in (0.0, smoothing.LOOKAHEAD_MAX_CROWDING):
        monkeypatch.setattr(smoothing, "LOOKAHEAD_MAX_CROWDING", crowding)
        tables.append(link_detections(detections, 2.5 * step, solver="scipy"))
    for name in ("track_id", "link_cost"):
        np.testing.assert_array_equal(tables[0][name], tables[1][name])


def test_smoothing_leaves_brownian_motion_alone():
    _, detections, step, _ = dense_cell(0.5, 0.0, n=600, frames=8)
    tables = [link_detections(detections, 2.5 * step, solver="scipy", smoothing=on) for on in (False, True)]
    for name in ("track_id", "frame", "link_cost", "link_confidence"):
        np.testing.assert_array_equal(tables[0][name], tables[1][name])


def test_forward_links_past_the_radius_stay_candidates():
    """The forward pass's link of a point is added to the smoothing pass's candidates where the radius left it
    out, if it lies within the gate; links already among the candidates are not added twice."""
    from tracker.linking.motion import MotionModel
    from tracker.linking.prediction import Prediction
    from tracker.linking.track_state import TrackState

    positions = np.array([[0, 0, 0], [0, 0, 10], [0, 0, 1], [0, 0, 13], [0, 0, 30]], dtype=float)
    state = TrackState.unlinked(positions, np.array([0, 0, 1, 1, 1]))
    state.successor = np.array([2, 4, -1, -1, -1])  # 0 -> 2 (near), 1 -> 4 (20 µm: past the gate)
    a, b = np.array([0, 1]), np.array([2, 3, 4])
    rows, cols, distance_sq = np.array([1]), np.array([1]), np.array([9.0])  # only 1 -> 3 within the radius
    prediction = Prediction("persistent", True, 5.0, MotionModel())
    rows, cols, distance_sq = smoothing.with_forward_links(state, prediction, positions[a], a, b, rows, cols,
                                                           distance_sq)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1] and distance_sq.tolist() == [1.0, 9.0]
    again = smoothing.with_forward_links(state, prediction, positions[a], a, b, rows, cols, distance_sq)
    assert [x.tolist() for x in again] == [[0, 1], [0, 1], [1.0, 9.0]]
