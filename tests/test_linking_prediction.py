"""Prediction: when the linker predicts, class variances and search radii."""

from __future__ import annotations

import numpy as np

from tracker.linking import motion
from tracker.linking.prediction import Prediction
from tracker.linking.track_state import TrackState


def test_a_tiny_estimated_persistence_predicts_nothing(rng):
    """Below PREDICTION_MIN_PERSISTENCE the linker does not predict (one variance class), unless given."""
    previous = rng.normal(size=(5000, 3))
    prediction = Prediction("persistent", True, 1.0, motion.MotionModel())
    for target, expected in ((0.02, False), (0.3, True)):
        step = target * previous + np.sqrt(1 - target**2) * rng.normal(size=(5000, 3))
        estimated = motion.MotionModel()
        estimated.update(step, previous, np.ones(len(step), bool))
        assert abs(estimated.current_persistence() - target) < 0.03
        assert prediction.predicts(estimated) is expected
        assert prediction.persistence(estimated) == (estimated.current_persistence() if expected else 0.0)
        given = motion.MotionModel(persistence=target)
        given.update(step, previous, np.ones(len(step), bool))
        assert prediction.predicts(given)
    assert not Prediction("none", True, 1.0, given).predicts()


def test_class_variances_and_radii():
    # Steps of per-axis variance 0.04 µm², residuals (with a velocity) of 0.01 µm² at persistence 0.5.
    model = motion.MotionModel(persistence=0.5, n_steps=100, sum_step_sq=12.0, n_pairs=100, sum_vv=12.0,
                               sum_vw=6.0, sum_ww=6.0)
    prediction = Prediction("persistent", True, 2.0, model)
    np.testing.assert_allclose(prediction.class_variance(np.array([False, True])), [0.04, 0.01])
    assert prediction.step_variance() == 0.04 and prediction.residual_variance() == 0.01
    np.testing.assert_allclose(prediction.radius(np.array([0.04, 0.01]), np.array([1.0, 4.0])), [0.9, 0.9])
    # Never beyond the gate: the variances are clipped to (gate / 4.5)², the radii to the gate.
    narrow = Prediction("persistent", True, 0.45, model)
    np.testing.assert_allclose(narrow.class_variance(np.array([False, True])), [0.01, 0.01])
    np.testing.assert_allclose(narrow.class_variance(np.array([False]), clip=False), [0.04])
    np.testing.assert_allclose(narrow.radius(np.array([0.01]), np.array([4.0])), [0.45])
    # Without adaptive radii, every radius is the gate; without motion, one class.
    np.testing.assert_allclose(Prediction("persistent", False, 2.0, model).radius(np.array([0.01]), np.ones(1)), [2.0])
    np.testing.assert_allclose(Prediction("none", True, 2.0, model).class_variance(np.array([True])), [0.04])


def test_predictions_use_each_track_s_velocity_and_own_scatter():
    positions = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    state = TrackState.unlinked(positions, np.array([1, 1]))
    state.velocity[0], state.has_velocity[0] = [0.0, 0.0, 0.4], True
    state.ratio_sum[:], state.ratio_count[:] = [8.0, 0.0], [4.0, 0.0]  # track 0 scatters twice its class's
    model = motion.MotionModel(persistence=0.5, n_steps=100, sum_step_sq=12.0, n_pairs=100, sum_vv=12.0,
                               sum_vw=6.0, sum_ww=6.0)
    prediction = Prediction("persistent", True, 2.0, model)
    predicted, variance, own, radius = prediction.predict(state, np.array([0, 1]))
    np.testing.assert_allclose(predicted, [[0.0, 0.0, 0.2], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(variance, [0.01, 0.04])
    np.testing.assert_allclose(own, [(4.0 + 8.0) / (4.0 + 4.0), 1.0])  # shrunk towards 1 (prior of 4 steps)
    np.testing.assert_allclose(radius, 4.5 * np.sqrt(variance * own))
    state.prior_steps = np.inf  # one shared scatter
    np.testing.assert_allclose(prediction.predict(state, np.array([0, 1]))[2], [1.0, 1.0])
