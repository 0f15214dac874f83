"""link_detections end to end: the table it returns, its options, progress, summary and log."""

import logging
import multiprocessing

import numpy as np
import pytest

from tracker import metrics, simulate
from tracker.linking import LinkSummary, link_detections
from tracker.progress import Stage
from linking_cells import dense_cell, noisy_detections


def test_links_simulated_particles():
    truth = simulate.simulate_tracks(80, 15, (10.0, 25.0, 25.0), 0.4, 0.5, seed=1)
    tracks = link_detections(noisy_detections(truth, 0.03), 1.5, solver="scipy")
    scores = metrics.evaluate(tracks, truth, 0.5)
    assert scores["link_f1"] > 0.98
    assert list(tracks)[:2] == ["track_id", "frame"] and "link_cost" in tracks
    starts = np.r_[True, np.diff(tracks["track_id"]) != 0]
    assert np.all(np.isnan(tracks["link_cost"][starts])) and np.all(tracks["link_cost"][~starts] <= 1.5**2)


def test_gate_and_appearance():
    detections = {"frame": np.array([0, 0, 1, 1]), "z": np.zeros(4), "y": np.zeros(4),
                  "x": np.array([0.0, 10.0, 0.5, 30.0])}
    tracks = link_detections(detections, 1.0, solver="scipy")
    # (0 → 0.5) links; 10 ends, 30 starts.
    assert len(np.unique(tracks["track_id"])) == 3
    linked = tracks["x"][tracks["track_id"] == tracks["track_id"][tracks["x"] == 0.0][0]]
    assert sorted(linked.tolist()) == [0.0, 0.5]


def test_empty_frames_and_single_detection():
    detections = {"frame": np.array([0, 2, 3]), "z": np.zeros(3), "y": np.zeros(3), "x": np.array([0.0, 0.1, 0.2])}
    tracks = link_detections(detections, 1.0, max_gap=0, solver="scipy")
    # Frame 1 is empty and gaps are not closed: frame 0 cannot link to frame 2.
    assert tracks["track_id"].tolist() == [0, 1, 1]
    none, summary = link_detections({"frame": np.empty(0, int), "z": np.empty(0), "y": np.empty(0),
                                     "x": np.empty(0)}, 1.0, return_summary=True)
    assert len(none["track_id"]) == 0
    assert str(summary) == "linking: no prediction, smoothing off, 0.0 % of points unlinked, gap closing off"


def test_deterministic_and_order_independent():
    truth = simulate.simulate_tracks(60, 10, (10.0, 20.0, 20.0), 0.5, seed=2)
    detections = noisy_detections(truth, 0.05)
    a = link_detections(detections, 1.5, solver="scipy")
    b = link_detections(detections, 1.5, solver="scipy")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_requires_positions():
    with pytest.raises(ValueError, match="missing column"):
        link_detections({"frame": np.array([0])}, 1.0)


def test_fixed_persistence_and_bad_options():
    truth, detections, step, nn = dense_cell(0.4, 0.9, n=400, frames=8)
    tracks = link_detections(detections, 2.5 * step, persistence=0.9, solver="scipy")
    assert metrics.evaluate(tracks, truth, 0.5 * nn)["link_f1"] > 0.97
    with pytest.raises(ValueError, match="persistence"):
        link_detections(detections, 1.0, persistence=1.5)
    with pytest.raises(ValueError, match="motion"):
        link_detections(detections, 1.0, motion="kalman-ish")
    with pytest.raises(ValueError, match="max.gap"):
        link_detections(detections, 1.0, max_gap=-1)
    with pytest.raises(ValueError, match="max.displacement"):
        link_detections(detections, 0.0)


def test_unsorted_input_gives_the_sorted_result():
    truth = simulate.simulate_tracks(60, 10, (10.0, 20.0, 20.0), 0.5, seed=3)
    detections = noisy_detections(truth, 0.05)
    shuffled = np.random.default_rng(0).permutation(len(detections["frame"]))
    a = link_detections(detections, 1.5, solver="scipy")
    b = link_detections({k: v[shuffled] for k, v in detections.items()}, 1.5, solver="scipy")
    assert np.all(np.diff(a["track_id"]) >= 0)
    np.testing.assert_array_equal(np.lexsort((a["frame"], a["track_id"])), np.arange(len(a["frame"])))
    assert len(a["frame"]) == len(b["frame"]) == len(detections["frame"])


@pytest.mark.parametrize("persistence, stages, smoothing", [
    (0.9, {"link": 5, "smooth": 5, "exchange": 3}, "look-ahead"),
    (0.0, {"link": 5}, "off"),
])
def test_progress_and_summary_report_each_pass(persistence, stages, smoothing):
    _, detections, step, _ = dense_cell(0.5, persistence, n=300, frames=6)
    calls = []
    tracks, summary = link_detections(detections, 2.5 * step, solver="scipy", return_summary=True,
                                      progress=lambda *call: calls.append(call))
    assert all(isinstance(stage, Stage) for stage, _, _ in calls)
    assert [stage for stage, _, _ in calls] == [stage for stage, total in stages.items() for _ in range(total)]
    for stage, total in stages.items():
        assert [(done, n) for s, done, n in calls if s == stage] == [(k, total) for k in range(1, total + 1)]
    assert isinstance(summary, LinkSummary)
    assert summary.smoothing == smoothing and summary.persistence_estimated
    assert summary.exchanges >= 0 if smoothing != "off" else summary.exchanges == 0
    assert (summary.persistence is None) == (persistence == 0.0)  # Brownian: nothing to predict with
    assert summary.gap_closing is False and 0.0 <= summary.missing_rate < 0.01
    # The same table without the summary.
    alone = link_detections(detections, 2.5 * step, solver="scipy")
    assert list(alone) == list(tracks)
    for name in tracks:
        np.testing.assert_array_equal(alone[name], tracks[name])


def test_the_summary_is_logged(caplog):
    _, detections, step, _ = dense_cell(0.5, 0.9, n=300, frames=6)
    with caplog.at_level(logging.INFO, logger="tracker.linking"):
        _, summary = link_detections(detections, 2.5 * step, persistence=0.9, solver="scipy", return_summary=True)
    assert [record.getMessage() for record in caplog.records if record.name == "tracker.linking"] == [str(summary)]
    assert str(summary).startswith("linking: persistence 0.90 (given), smoothing look-ahead")


def _link_in_child(detections):
    return link_detections(detections, 1.5, solver="scipy")["track_id"]


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
def test_links_in_a_process_forked_after_linking():
    # The linker's helper threads (k-d tree builds, shared queries) do not exist in a forked child: it must
    # make its own instead of waiting forever on the parent's.
    truth = simulate.simulate_tracks(300, 6, (12.0, 25.0, 25.0), 0.5, 0.7, seed=4)
    detections = noisy_detections(truth, 0.04)
    expected = link_detections(detections, 1.5, solver="scipy")["track_id"]  # the parent's threads start
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_link_in_child, (detections,)).get(timeout=60)
    np.testing.assert_array_equal(got, expected)
