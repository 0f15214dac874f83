import numpy as np
import pytest

from tracker import metrics, simulate


@pytest.fixture
def truth():
    return simulate.simulate_tracks(40, 12, (8.0, 15.0, 15.0), 0.3, blink_probability=0.1, seed=5)


def test_perfect_tracks_score_one(truth):
    visible = {k: v[truth["visible"]] for k, v in truth.items()}
    scores = metrics.evaluate(visible, truth, 0.5)
    for name in ("detection_recall", "detection_precision", "link_recall", "link_precision", "link_f1",
                 "link_recall_given_detections", "link_precision_given_detections", "link_f1_given_detections",
                 "alpha", "beta", "jsc", "jsc_theta"):
        assert scores[name] == pytest.approx(1.0), name


def test_swapped_and_missing_links_are_penalised(truth):
    tracks = {k: v[truth["visible"]].copy() for k, v in truth.items()}
    # Split every track in two halves: half-way links are lost.
    split = (tracks["frame"] >= 6).astype(np.int64)
    tracks["track_id"] = tracks["track_id"] * 2 + split
    scores = metrics.evaluate(tracks, truth, 0.5)
    assert scores["link_precision"] == pytest.approx(1.0)
    assert 0.8 < scores["link_recall"] < 1.0
    assert scores["jsc_theta"] < 1.0 and scores["alpha"] < 1.0
    assert scores["beta"] <= scores["alpha"]
    correctness = metrics.link_correctness(tracks, truth, 0.5)
    assert set(np.unique(correctness)) <= {-1, 1}
    # every visible point detected: the measures given the detections are the same
    for name in ("link_recall", "link_precision", "link_f1"):
        assert scores[f"{name}_given_detections"] == scores[name]


def test_spurious_points_lower_precision_and_beta(truth):
    visible = {k: v[truth["visible"]] for k, v in truth.items()}
    extra = {k: np.concatenate([v, v[:20]]) for k, v in visible.items()}
    extra["x"][-20:] += 5.0
    extra["track_id"][-20:] = 10_000 + np.arange(20)
    scores = metrics.evaluate(extra, truth, 0.5)
    assert scores["detection_precision"] < 1.0 and scores["detection_recall"] == pytest.approx(1.0)
    assert scores["alpha"] == pytest.approx(1.0) and scores["beta"] < 1.0


def test_localisation_error_lowers_alpha(truth):
    shifted = {k: v[truth["visible"]].copy() for k, v in truth.items()}
    shifted["x"] = shifted["x"] + 0.1
    scores = metrics.evaluate(shifted, truth, 0.5)
    assert scores["rmse_um"] == pytest.approx(0.1)
    assert scores["alpha"] == pytest.approx(1 - 0.1 / 0.5)


def test_wrong_link_detected():
    truth = {"track_id": np.array([0, 0, 1, 1]), "frame": np.array([0, 1, 0, 1]), "z": np.zeros(4),
             "y": np.zeros(4), "x": np.array([0.0, 0.1, 5.0, 5.1])}
    tracks = dict(truth, track_id=np.array([0, 1, 1, 0]))
    assert metrics.link_correctness(tracks, truth, 0.5).tolist() == [-1, 0, -1, 0]
    assert metrics.evaluate(tracks, truth, 0.5)["link_f1"] == 0.0


def test_links_across_missed_detections_given_the_detections():
    """Particle 0 seen in frames 0-3, detected in 0, 2, 3 (missed in 1); particle 1 far away in frames 0-1."""
    truth = {"track_id": np.array([0, 0, 0, 0, 1, 1]), "frame": np.array([0, 1, 2, 3, 0, 1]), "z": np.zeros(6),
             "y": np.zeros(6), "x": np.array([0.0, 0.1, 0.2, 0.3, 9.0, 9.1])}
    detected = np.array([0, 2, 3, 4, 5])
    gap_closed = {k: v[detected] for k, v in truth.items()}  # frame 0 -> 2 joined across the miss
    split = dict(gap_closed, track_id=np.array([0, 7, 7, 1, 1]))  # the track ends at the miss, restarts
    closed, ended = metrics.evaluate(gap_closed, truth, 0.5), metrics.evaluate(split, truth, 0.5)
    # against every visible point, the link across the miss is wrong and two true links are missed
    assert closed["link_precision"] == pytest.approx(2 / 3) and closed["link_recall"] == pytest.approx(2 / 4)
    assert ended["link_precision"] == 1.0 and ended["link_recall"] == pytest.approx(2 / 4)
    # given the detections, it is the link to find
    assert closed["link_f1_given_detections"] == 1.0
    assert ended["link_precision_given_detections"] == 1.0
    assert ended["link_recall_given_detections"] == pytest.approx(2 / 3)
