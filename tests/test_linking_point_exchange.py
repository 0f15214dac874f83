"""Point exchanges: nearby tracks give each other back their detections."""

from __future__ import annotations

import numpy as np

from tracker import metrics
from tracker.linking import link_detections, point_exchange
from tracker.linking.point_exchange import exchange_batches, exchange_candidates, exchange_points
from tracker.linking.track_state import FrameRanges
from linking_cells import dense_cell, two_tracks


def _swapped_tracks(gate_um):
    """Two particles whose links swapped their frame-1 detections (A0 -> B1 -> A2 -> A3, B0 -> A1 -> B2 -> B3,
    :func:`linking_cells.two_tracks`): the state after smoothing, the prediction, and the exchange candidates
    the smoothing pass leaves."""
    state, prediction = two_tracks([-1, -1, 1, 0, 3, 2, 4, 5], gate_um)
    state.start_successors()
    return state, prediction, {1: (np.array([2]), np.array([3]))}


def test_point_exchange_gives_two_tracks_back_their_detections():
    # Exchanging A1 and B1 straightens both tracks.
    state, prediction, candidates = _swapped_tracks(1.0)
    assert exchange_points(state, prediction, candidates, [1]) == 1
    np.testing.assert_array_equal(state.predecessor, [-1, -1, 0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(state.successor, [2, 3, 4, 5, 6, 7, -1, -1])
    np.testing.assert_allclose(state.velocity[2:6], [[0, 0, 0.5]] * 4)
    # The links into the frame-3 points kept their source; their cost follows the new velocities.
    np.testing.assert_allclose(state.link_cost[6:], (0.5 - 0.9 * 0.5) ** 2)
    assert np.all((state.confidence[2:6] > 0.5) & (state.confidence[2:6] <= 1.0))
    assert not candidates
    # Nothing left to gain: the straight tracks stay.
    assert exchange_points(state, prediction, {1: (np.array([2]), np.array([3]))}, [1]) == 0


def test_point_exchange_keeps_links_within_the_gate():
    # A gate below the 0.5 µm step: A0 -> A1 (no velocity known at A0, so predicted where A0 is) would leave it.
    state, prediction, candidates = _swapped_tracks(0.45)
    before = state.predecessor.copy()
    assert exchange_points(state, prediction, candidates, [1]) == 0
    np.testing.assert_array_equal(state.predecessor, before)


def test_exchange_candidates_are_uncertain_links_with_a_close_rival():
    # Sources 0, 1 chose targets 0, 1 (points 10, 11) of a 2 x 2 assignment; each also reached the other target.
    rows, cols = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    b, chosen = np.array([10, 11]), np.array([0, 1])

    def candidates(cost, confidence):
        x, y = exchange_candidates(b, 2, rows, cols, np.array(cost, float), chosen, chosen, np.array([0, 3]),
                                   np.array(confidence, float))
        return sorted(zip(x.tolist(), y.tolist()))

    assert candidates([1, 2, 2, 1], [0.5, 0.5]) == [(10, 11), (11, 10)]
    assert candidates([1, 2, 2, 1], [0.5, 0.95]) == [(10, 11)]  # (from the uncertain link's source only)
    assert candidates([1, 2, 2, 1], [0.95, 0.95]) == []
    assert candidates([1, 12, 12, 1], [0.5, 0.5]) == []  # rivals beyond EXCHANGE_MARGIN


def test_exchange_batches_are_inner_frames_three_apart():
    frames = FrameRanges.of(np.repeat([0, 1, 2, 3, 4, 5, 6, 8, 9, 10], 2))
    assert exchange_batches(frames) == [[3, 9], [1, 4], [2, 5]]  # (not 6 and 8: a neighbour frame is empty)


def test_point_exchanges_improve_crowded_persistent_linking(monkeypatch):
    # Step/NN 0.5, persistence 0.5: the smoothing pass leaves detections swapped between crossing tracks.
    gains = []
    for seed in (3, 4, 5):
        truth, detections, step, nn = dense_cell(0.5, 0.5, n=1500, frames=10, seed=seed)
        with_exchanges, summary = link_detections(detections, 2.5 * step, solver="scipy", return_summary=True)
        assert summary.exchanges > 0
        with monkeypatch.context() as patch:
            patch.setattr(point_exchange, "exchange_points", lambda *args: 0)
            without = link_detections(detections, 2.5 * step, solver="scipy")
        gains.append(metrics.evaluate(with_exchanges, truth, 0.5 * nn)["link_f1"]
                     - metrics.evaluate(without, truth, 0.5 * nn)["link_f1"])
    assert min(gains) > 0
