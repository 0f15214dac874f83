"""The ISBI-2012-like scenario families and detection levels (tracker.scenarios)."""

import numpy as np
import pytest

from tracker.metrics import evaluate
from tracker.scenarios import DETECTION_LEVELS, SCENARIOS, degrade, simulate_scenario
from tracker.tables import positions_um, spatial_axes


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_shapes_and_determinism(name):
    truth = simulate_scenario(name, 50, 12, seed=3)
    assert spatial_axes(truth) == (("z", "y", "x") if name == "virus" else ("y", "x"))
    again = simulate_scenario(name, 50, 12, seed=3)
    assert all(np.array_equal(truth[k], again[k]) for k in truth)
    # One point per track and frame, frames contiguous within a track, density steady.
    key = truth["track_id"] * 1000 + truth["frame"]
    assert len(np.unique(key)) == len(key)
    same = truth["track_id"][1:] == truth["track_id"][:-1]
    assert np.all(np.diff(truth["frame"])[same] == 1)
    per_frame = np.bincount(truth["frame"])
    assert per_frame.min() >= 40 and per_frame.max() <= 50


def test_motion_families_differ():
    """Microtubule tips run straight and fast; vesicles diffuse (successive steps uncorrelated)."""
    def step_stats(name):
        truth = simulate_scenario(name, 200, 30, seed=1)
        p = positions_um(truth)
        same = truth["track_id"][1:] == truth["track_id"][:-1]
        steps = np.diff(p, axis=0)
        steps[~same] = np.nan
        both = same[1:] & same[:-1]
        a, b = steps[:-1][both], steps[1:][both]
        cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        return np.nanmean(np.linalg.norm(steps, axis=1)), np.mean(cos)

    tip_speed, tip_cos = step_stats("microtubule")
    vesicle_speed, vesicle_cos = step_stats("vesicle")
    assert tip_speed > 2 * vesicle_speed
    assert tip_cos > 0.8 and abs(vesicle_cos) < 0.1


def test_2d_and_3d_variants():
    assert spatial_axes(simulate_scenario("vesicle", 20, 5, ndim=3)) == ("z", "y", "x")
    assert spatial_axes(simulate_scenario("virus", 20, 5, ndim=2)) == ("y", "x")
    with pytest.raises(ValueError, match="unknown scenario"):
        simulate_scenario("bacteria")


@pytest.mark.parametrize("level", DETECTION_LEVELS)
def test_degrade_levels(level):
    truth = simulate_scenario("receptor", 200, 20, seed=0)
    detections = degrade(truth, level, seed=1)
    spec = DETECTION_LEVELS[level]
    n_truth, n_found = len(truth["frame"]), len(detections["frame"])
    expected = n_truth * (1 - spec.miss_fraction) + 20 * spec.false_per_frame
    assert abs(n_found - expected) < 0.05 * n_truth + 4 * np.sqrt(20 * spec.false_per_frame + 1)
    assert "track_id" not in detections and np.all(np.diff(detections["frame"]) >= 0)
    # Detections as tracks of one point each: every true point found within 5 noise sigmas.
    singles = dict(detections, track_id=np.arange(n_found))
    scores = evaluate(singles, truth, match_distance_um=max(5 * spec.sigma_px * 0.1, 1e-6))
    assert scores["detection_recall"] >= (1 - spec.miss_fraction) - 0.03
