"""The motion model: persistence and scatter estimates, predictions, own scatter, and what they do for linking."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics, simulate
from tracker.linking import link_detections, motion, track_state
from linking_cells import dense_cell, noisy_detections


def test_prediction_formula():
    x = np.zeros((2, 3))
    v = np.array([[1.0, 0, 0], [1.0, 0, 0]])
    known = np.array([True, False])
    np.testing.assert_allclose(motion.predict_positions(x, v, known, 0.5), [[0.5, 0, 0], [0, 0, 0]])
    # Two frames ahead: (p + p²) v.
    np.testing.assert_allclose(motion.predict_positions(x, v, known, 0.5, 2)[0], [0.75, 0, 0])
    np.testing.assert_allclose(motion.predict_positions(x, v, known, 1.0, 3)[0], [3.0, 0, 0])


def test_spread_factor():
    # Brownian: variance grows linearly; one step with a known velocity is the unit.
    np.testing.assert_allclose(motion.spread_factor(0.0, np.array([1, 2, 3]), True), [1, 2, 3])
    np.testing.assert_allclose(motion.spread_factor(0.9, np.array([1]), True), [1.0])
    # Without velocity, persistent motion spreads faster than Brownian.
    assert motion.spread_factor(0.9, np.array([3]), False)[0] > 3


@pytest.mark.parametrize("persistence", [0.0, 0.5, 0.9])
def test_motion_model_estimates_persistence(persistence):
    truth = simulate.simulate_tracks(400, 10, (30.0, 30.0, 30.0), 0.5, persistence, margin_um=0.0, seed=1)
    model = motion.MotionModel()
    ids, xyz = truth["track_id"], np.column_stack([truth[a] for a in "zyx"])
    same = ids[1:] == ids[:-1]
    step = np.where(same[:, None], xyz[1:] - xyz[:-1], np.nan)
    v, w = step[:-1], step[1:]
    pairs = np.isfinite(v).all(axis=1) & np.isfinite(w).all(axis=1)
    model.update(w[pairs], v[pairs], np.ones(pairs.sum(), bool))
    assert model.ready
    assert abs(model.current_persistence() - persistence) < 0.05
    # Residual variance per axis: (1 - p²) step² / 3.
    expected = (1 - persistence**2) * 0.5**2 / 3
    assert model.residual_variance() == pytest.approx(expected, rel=0.25, abs=1e-3)  # walls reverse some steps
    assert motion.MotionModel(persistence=0.3).current_persistence() == 0.3


def test_prediction_raises_f1_for_persistent_motion():
    truth, detections, step, nn = dense_cell(0.5, 0.9)
    gate = 2.5 * step
    plain = link_detections(detections, gate, motion="none", adaptive_radius=False, max_gap=0, solver="scipy")
    predicted = link_detections(detections, gate, max_gap=0, solver="scipy")
    f1_plain = metrics.evaluate(plain, truth, 0.5 * nn)["link_f1"]
    f1_predicted = metrics.evaluate(predicted, truth, 0.5 * nn)["link_f1"]
    assert f1_predicted > 0.975
    assert f1_predicted > f1_plain + 0.02


def test_dispersion_and_prior_weight_tell_one_population_from_two():
    rng = np.random.default_rng(0)
    steps = rng.integers(1, 12, 4000).astype(float)
    # Per step r = |residual|² / (3 σ²) ~ chi²(3) / 3; a sum over c steps ~ chi²(3c) / 3.
    one = rng.chisquare(3 * steps) / 3
    d, count = motion.scatter_dispersion(one, steps)
    assert count == 4000 and 0.9 < d < 1.1
    assert motion.own_scatter_prior_steps(one, steps) > 30  # barely adapts, if at all
    wide = rng.random(4000) < 0.5  # half the tracks scatter 3x as much (variance)
    two = np.where(wide, 3.0, 1.0) * one
    assert motion.scatter_dispersion(two, steps)[0] > 3.0
    # True relative scatters 0.5 and 1.5 (V = 0.25): best weight (2/3) / V ≈ 2.7 steps, kept at 4 or more.
    assert 1.5 < steps.mean() / (motion.scatter_dispersion(two, steps)[0] - 1) < 4.5
    assert motion.own_scatter_prior_steps(two, steps) == motion.DEFAULT_PRIOR_STEPS
    assert motion.scatter_dispersion(one, steps, min_steps=12)[1] == 0  # none has 12 steps
    assert motion.own_scatter_prior_steps(two[:20], steps[:20]) == np.inf  # too few tracks: one shared scatter
    assert motion.own_scatter_prior_steps(np.zeros(100), np.ones(100)) == np.inf  # noiseless: one motion


def test_chi2_3_tail_and_truncated_variance(rng):
    from scipy.stats import chi2

    x = np.array([0.0, 0.5, 3.0, 9.77, 20.25, 60.0])
    np.testing.assert_allclose(motion.chi2_sf(x), chi2.sf(x, 3), rtol=1e-12, atol=1e-300)
    for ndim in (1, 2):
        np.testing.assert_allclose(motion.chi2_sf(x, ndim), chi2.sf(x, ndim), rtol=1e-10, atol=1e-300)
    # Gaussian steps (per-axis variance 2) seen only inside a radius: the variance is recovered.
    steps = rng.normal(0.0, np.sqrt(2.0), (400_000, 3))
    for radius in (1.5, 3.0, 6.0, 50.0):
        inside = steps[np.sum(steps**2, axis=1) <= radius**2]
        observed = np.mean(inside**2)
        estimate = float(motion.truncated_gaussian_variance(np.array([observed]), np.array([radius]))[0])
        assert abs(estimate - 2.0) < 0.03, (radius, observed, estimate)
        assert observed < 2.0 or radius > 20


def test_own_scatter_cost_is_a_log_likelihood():
    distance_sq, variance = 0.6, 0.1
    assert motion.own_scatter_cost(distance_sq, variance, 1.0) == pytest.approx(6.0)
    # Minimal at the maximum-likelihood scale |d|² / (3 σ²): a wide scatter is not free.
    scales = np.linspace(0.2, 6.0, 2901)
    best = scales[np.argmin(motion.own_scatter_cost(distance_sq, variance, scales))]
    assert best == pytest.approx(distance_sq / (3 * variance), abs=0.01)


def _mixed_mobility_cell(seed, n=1000, frames=10, steps_um=(0.05, 0.6)):
    """Half the particles move ``steps_um[0]`` per frame (RMS), half ``steps_um[1]``; NN ≈ 1 µm."""
    side = (n / 0.554**3) ** (1 / 3)
    truth = simulate.simulate_tracks(n, frames, (side,) * 3, steps_um, 0.0, margin_um=1.0, seed=seed)
    return truth, noisy_detections(truth, 0.04, seed)


def test_tracks_adapt_to_their_own_scatter_only_when_mobility_differs(monkeypatch):
    mixed_truth, mixed = _mixed_mobility_cell(0)
    single_truth, single, step, nn = dense_cell(0.3, 0.0, n=1000, frames=10)
    weights = []  # the prior weight the linker derives from its own links, after each frame pair

    def spy(ratio_sum, ratio_count, ndim=3):
        weights[-1].append(motion.own_scatter_prior_steps(ratio_sum, ratio_count, ndim))
        return weights[-1][-1]

    monkeypatch.setattr(track_state, "own_scatter_prior_steps", spy)
    f1 = []
    for detections, truth, gate, match in ((mixed, mixed_truth, 1.5, 0.5), (single, single_truth, 2.5 * step,
                                                                           0.5 * nn)):
        weights.append([])
        tracks = link_detections(detections, gate, solver="scipy")
        f1.append(metrics.evaluate(tracks, truth, match)["link_f1"])
    assert max(weights[0][2:]) == motion.DEFAULT_PRIOR_STEPS  # mixed mobility: each track's own scatter
    assert min(weights[1][2:]) > 20.0  # one population: (almost) the population's
    assert f1[0] > 0.97 and f1[1] > 0.98
