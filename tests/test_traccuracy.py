"""tracker.metrics agrees with traccuracy (the community's tracking metrics) where both have a measure.

traccuracy reads our GEFF files. It pins click < 8.2, so it is not in the test extras: install it by
hand (``pip install traccuracy``) to run this test; it is skipped without it.
"""

import warnings

import numpy as np
import pytest

from tracker.io import write_tracks
from tracker.metrics import evaluate
from tracker.pipeline import track_stack
from tracker.simulate import render_stack, simulate_tracks

traccuracy = pytest.importorskip("traccuracy")
pytest.importorskip("geff")

VOXEL = (0.4, 0.15, 0.15)


@pytest.fixture(scope="module")
def tracked():
    """A tracked simulated stack with its ground truth; particles enter and leave the field of view."""
    truth = simulate_tracks(60, 8, (2.8, 9.0, 9.0), 0.45, 0.5, seed=11)
    stack = render_stack(truth, (8, 8, 61, 61), VOXEL, (0.45, 0.18, 0.18), snr=5, seed=12)
    result = track_stack(stack, voxel_size_um=VOXEL, spot_radius_um=(0.8, 0.3, 0.3), max_displacement_um=1.2,
                         device="cpu", solver="scipy")
    return result.tracks, truth


@pytest.mark.parametrize("match_distance_um", [0.5, 1.0])
def test_detection_and_link_scores_agree_with_traccuracy(tmp_path, tracked, match_distance_um):
    from traccuracy import run_metrics
    from traccuracy.loaders import load_geff_data
    from traccuracy.matchers import PointMatcher
    from traccuracy.metrics import BasicMetrics

    tracks, truth = tracked
    write_tracks(tmp_path / "tracks.geff", tracks)
    write_tracks(tmp_path / "truth.geff", truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = run_metrics(gt_data=load_geff_data(str(tmp_path / "truth.geff")),
                                 pred_data=load_geff_data(str(tmp_path / "tracks.geff")),
                                 matcher=PointMatcher(threshold=match_distance_um), metrics=[BasicMetrics()])
    theirs = results[0]["results"]
    ours = evaluate(tracks, truth, match_distance_um)
    assert theirs["Total GT Nodes"] == ours["n_ground_truth_points"] and theirs["Total Pred Nodes"] == ours["n_points"]
    assert theirs["Total GT Edges"] == ours["n_ground_truth_links"] and theirs["Total Pred Edges"] == ours["n_links"]
    for name, measure in (("Node Recall", "detection_recall"), ("Node Precision", "detection_precision"),
                          ("Edge Recall", "link_recall"), ("Edge Precision", "link_precision"),
                          ("Edge F1", "link_f1")):
        assert theirs[name] == pytest.approx(ours[measure], abs=1e-12), name
    assert 0.5 < ours["link_f1"] < 1  # a case with errors to count
    assert np.isfinite(ours["rmse_um"])
