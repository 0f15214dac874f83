"""Missing detections: the missing rate, and the "no link" cost and track ends in the frame pairs that follow."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics
from tracker.linking import link_detections, missing_detections
from tracker.linking.motion import DEFAULT_GATE_SIGMAS, MotionModel, chi2_sf
from tracker.linking.prediction import Prediction
from tracker.linking.track_state import TrackState
from linking_cells import dense_cell


def test_no_link_is_cheaper_once_detections_go_missing():
    missing = missing_detections.MissingRate(np.zeros(10))
    assert missing.rate() == 0.0 and missing.scaled_no_link_cost(1.0) == missing_detections.SCALED_NO_LINK_COST
    missing.inner_rows, missing.inner_linked = 1000, 1000 - int(1000 * missing_detections.IN_PAIR_GAPS_MIN_MISSING) - 1
    assert missing.detections_go_missing()
    assert (missing.scaled_no_link_cost(1.0) == missing_detections.SCALED_NO_LINK_COST_MISSING
            < missing_detections.SCALED_NO_LINK_COST)
    # both still above half the largest candidate cost: any candidate beats leaving both ends unlinked
    assert missing_detections.SCALED_NO_LINK_COST_MISSING > 0.5 * DEFAULT_GATE_SIGMAS**2


def test_the_missing_rate_discounts_steps_past_the_search_radius():
    # Brownian steps of per-axis variance 0.01 µm² (no velocity: one class), search radius 4.5 sigma (0.45 µm):
    # a fraction chi2_sf(4.5²) of the steps leaves it, what the rate does not count as missing.
    prediction = Prediction("none", False, 0.45, MotionModel(n_steps=1000, sum_step_sq=30.0))
    state = TrackState.unlinked(np.zeros((1000, 3)), np.zeros(1000, np.int64))
    missing = missing_detections.MissingRate(np.full(1000, 10.0))
    linked = np.arange(1000) >= 50  # 5 % found no link
    missing.count(state, prediction, np.arange(1000), linked, prediction.model)
    assert (missing.inner_rows, missing.inner_linked) == (1000, 950)
    beyond = missing_detections.expected_beyond_radius(state, prediction, np.arange(1000), prediction.model)
    assert missing.inner_beyond_radius == beyond == pytest.approx(1000 * chi2_sf(4.5**2), rel=0.1)
    assert missing.rate() == pytest.approx(0.05 - beyond / 1000, abs=1e-15)
    # Points within one typical step (sqrt(3) sigma) of the volume's edge are not counted.
    near = missing_detections.MissingRate(np.full(1000, 0.1))
    near.count(state, prediction, np.arange(1000), linked, prediction.model)
    assert near.inner_rows == 0 and near.rate() == 0.0


def test_track_ends_in_the_frame_assignment_help_on_blinking_data(monkeypatch):
    truth, detections, step, nn = dense_cell(0.5, 0.0, n=1500, frames=12, blink=0.1)
    gate = 2.5 * step
    with_ends = metrics.evaluate(link_detections(detections, gate, solver="scipy"), truth, 0.5 * nn)
    monkeypatch.setattr(missing_detections, "IN_PAIR_GAPS_MIN_MISSING", 2.0)  # never: gap closing afterwards only
    after_only = metrics.evaluate(link_detections(detections, gate, solver="scipy"), truth, 0.5 * nn)
    assert with_ends["link_f1"] > after_only["link_f1"]


def test_a_dark_frame_shows_as_missed_detections():
    from tracker.linking.missing_detections import dark_frames

    np.testing.assert_array_equal(dark_frames(np.repeat([0, 1, 2, 4, 5, 6], 15)), [3])  # missing from the table
    np.testing.assert_array_equal(dark_frames(np.repeat(np.arange(6), [15, 15, 15, 1, 15, 15])), [3])  # a stray point
    assert len(dark_frames(np.repeat(np.arange(6), [15, 14, 15, 13, 15, 16]))) == 0  # counts that vary a little
    assert len(dark_frames(np.repeat(np.arange(4), [15, 15, 7, 15]))) == 0  # half the spots: for the pair test
    np.testing.assert_array_equal(dark_frames(np.repeat([5, 7], 15)), [6])  # the one frame between them is empty
    assert len(dark_frames(np.repeat([0, 1], 15))) == 0  # no frame between the first and the last to test
    assert len(dark_frames(np.array([], dtype=np.int64))) == 0
