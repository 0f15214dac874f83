"""Per-axis scatter (tracker.linking.axis_scatter): the test of equal variances, the shape, whitened linking."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracker.linking.linker as linker
from tracker.linking import link_detections
from tracker.linking.axis_scatter import anisotropy_p_value, scatter_shape, whiten, whitened_gate
from tracker.linking.motion import MotionModel
from tracker.metrics import evaluate
from tracker.scenarios import degrade, simulate_scenario


def test_equal_variances_give_p_one_and_one_axis_cannot_differ():
    assert anisotropy_p_value(np.array([0.2, 0.2, 0.2]), 100) == 1.0
    assert anisotropy_p_value(np.array([0.2]), 100) == 1.0
    assert anisotropy_p_value(np.array([0.1, 0.3]), 0) == 1.0
    assert anisotropy_p_value(np.array([0.0, 0.3]), 10) == 0.0


def test_p_value_is_calibrated_on_isotropic_gaussian_steps():
    """Under equal variances the p-value is uniform: about 5 % of 400 draws fall below 0.05."""
    rng = np.random.default_rng(0)
    p = [anisotropy_p_value(np.mean(rng.normal(0.0, 0.3, (60, 3)) ** 2, axis=0), 60) for _ in range(400)]
    assert 0.02 <= np.mean(np.array(p) < 0.05) <= 0.09
    assert 0.4 <= np.mean(p) <= 0.6


def test_z_noise_three_times_larger_is_found():
    rng = np.random.default_rng(1)
    values = rng.normal(0.0, 1.0, (500, 3)) * np.array([0.3, 0.1, 0.1])
    assert anisotropy_p_value(np.mean(values**2, axis=0), 500) < 1e-12


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 10.0), st.integers(2, 3), st.integers(60, 2000))
def test_shape_of_isotropic_sums_is_none_and_of_scaled_sums_the_ratio(variance, ndim, n):
    model = MotionModel(ndim=ndim)
    axes = np.zeros(3)
    axes[3 - ndim:] = variance
    model.n_steps, model.axis_step_sq, model.sum_step_sq = n, axes * n, float(axes.sum() * n)
    assert scatter_shape(model, predicting=False) is None
    axes[-1] *= 9.0  # three times the standard deviation along the last axis
    model.axis_step_sq, model.sum_step_sq = axes * n, float(axes.sum() * n)
    shape = scatter_shape(model, predicting=False)
    assert shape is not None
    assert np.all(shape[:3 - ndim] == 1.0)  # flat axes untouched
    assert shape[3 - ndim:].mean() == pytest.approx(1.0)
    assert shape[-1] / shape[-2] == pytest.approx(9.0)


def test_too_few_steps_keep_the_isotropic_fallback():
    model = MotionModel(ndim=3)
    model.update(np.array([[1.0, 0.0, 0.0]] * 10), np.zeros((10, 3)), np.zeros(10, bool))
    assert scatter_shape(model, predicting=False) is None


def test_residual_shape_uses_the_persistence():
    """With prediction, the shape is that of ``w - p v``: a large but predictable x velocity is no scatter."""
    rng = np.random.default_rng(2)
    v = rng.normal(0.0, 1.0, (400, 3)) * np.array([0.1, 0.1, 3.0])
    w = 0.9 * v + rng.normal(0.0, 0.1, (400, 3))
    model = MotionModel(persistence=0.9, ndim=3)
    model.update(w, v, np.ones(400, bool))
    assert scatter_shape(model, predicting=True) is None
    assert scatter_shape(model, predicting=False) is not None


def test_whitened_distances_are_mahalanobis_distances():
    shape = np.array([1.8, 0.6, 0.6])
    a, b = np.array([[0.3, -0.2, 0.5]]), np.array([[0.0, 0.1, 0.1]])
    delta = whiten(a, shape) - whiten(b, shape)
    assert np.sum(delta**2) == pytest.approx(np.sum((a - b) ** 2 / shape))
    assert whitened_gate(2.0, shape) == pytest.approx(2.0 / np.sqrt(0.6))


def _anisotropic_cell(seed=0):
    truth = simulate_scenario("vesicle", 200, 20, ndim=3, seed=seed)
    detections = degrade(truth, "hard", seed=seed + 1000)  # noise 1 px: 0.3 µm along z, 0.1 µm in y, x
    positions = np.column_stack([truth[a] for a in ("z", "y", "x")])
    same = truth["track_id"][1:] == truth["track_id"][:-1]
    gate = 1.5 * float(np.quantile(np.linalg.norm(np.diff(positions, axis=0)[same], axis=1), 0.99))
    return truth, detections, gate


def test_per_axis_scatter_beats_one_variance_on_z_noise(monkeypatch):
    truth, detections, gate = _anisotropic_cell()
    per_axis = evaluate(link_detections(detections, gate, solver="scipy"), truth, 0.9)["link_f1_given_detections"]
    monkeypatch.setattr(linker, "scatter_shape", lambda model, predicting: None)
    isotropic = evaluate(link_detections(detections, gate, solver="scipy"), truth, 0.9)["link_f1_given_detections"]
    assert per_axis > isotropic + 0.005


def test_links_stay_within_the_gate_in_um():
    """Whitened linking keeps the gate a ball in µm (times the root of the frames a link spans), around the last
    position where the linker does not predict (diffusing vesicles)."""
    _, detections, gate = _anisotropic_cell(1)
    tracks, summary = link_detections(detections, gate, solver="scipy", return_summary=True)
    assert summary.persistence is None
    xyz = np.column_stack([tracks[a] for a in ("z", "y", "x")])
    same = tracks["track_id"][1:] == tracks["track_id"][:-1]
    span = np.diff(tracks["frame"])[same]
    length = np.linalg.norm(np.diff(xyz, axis=0)[same], axis=1)
    assert np.any(span > 1)  # gaps were closed too
    assert np.all(length <= gate * np.sqrt(span) * (1 + 1e-9))


def test_isotropic_data_do_not_whiten(monkeypatch):
    """Brownian steps, one variance on every axis: the test finds no difference (at the evidence level)."""
    calls = []
    original = linker.scatter_shape
    monkeypatch.setattr(linker, "scatter_shape", lambda *a: calls.append(original(*a)) or calls[-1])
    rng = np.random.default_rng(3)
    start = rng.uniform(0, 50, (300, 3))
    frames = [start + np.cumsum(rng.normal(0, 0.2, (t + 1, 300, 3)), axis=0)[-1] for t in range(15)]
    table = {"frame": np.repeat(np.arange(15), 300), **dict(zip("zyx", np.concatenate(frames).T))}
    link_detections(table, 1.5, solver="scipy")
    assert calls == [None]


def test_prediction_gate_is_a_ball_in_um_in_whitened_coordinates():
    from tracker.linking.prediction import Prediction

    shape = np.array([4.0, 0.25, 0.25])  # z scatter 4x the y, x scatter's SD
    plain = Prediction("persistent", True, 2.0, MotionModel())
    assert plain.in_gate(np.ones((1, 3))) is None and plain.inner_gate() == 2.0
    whitened = Prediction("persistent", True, whitened_gate(2.0, shape), MotionModel(), np.sqrt(shape), 2.0)
    assert whitened.gate == pytest.approx(4.0)  # the search's cap: the gate along y, x (SD 0.5) in whitened units
    assert whitened.inner_gate() == pytest.approx(1.0)  # the gate along z (SD 2) in whitened units
    um = np.array([[1.9, 0.0, 0.0], [2.1, 0.0, 0.0], [0.0, 1.9, 0.0], [0.0, 1.2, 1.7], [0.0, 0.0, 2.1]])
    inside = whitened.in_gate(whiten(um, shape))
    assert inside.tolist() == [True, False, True, False, False]
    assert whitened.in_gate(whiten(um, shape), n_steps=2).tolist() == [True, True, True, True, True]
