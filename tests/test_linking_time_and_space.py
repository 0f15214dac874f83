"""2D and 3D alike, frame numbers as they are, and the missed-detection test that switches gap closing on."""

from __future__ import annotations

import numpy as np
import pytest

from tracker.linking import link_detections
from tracker.errors import InputError
from tracker.linking.linker import frame_steps, motion_space
from tracker.metrics import evaluate
from tracker.scenarios import degrade, simulate_scenario


def _vesicles_2d(level="exact", n=300, frames=20, seed=0):
    truth = simulate_scenario("vesicle", n, frames, seed=seed)
    return truth, degrade(truth, level, seed=seed + 1)


def test_2d_tables_link_and_a_flat_z_is_2d():
    truth, detections = _vesicles_2d()
    tracks_2d, summary = link_detections(detections, 0.6, return_summary=True)
    assert "z" not in tracks_2d
    assert evaluate(tracks_2d, truth, 0.3)["link_f1"] > 0.99
    flat = dict(detections, z=np.zeros(len(detections["frame"])))
    tracks_flat = link_detections(flat, 0.6)
    for column in ("track_id", "frame", "y", "x", "link_cost"):
        np.testing.assert_array_equal(tracks_flat[column], tracks_2d[column])


def test_motion_space_counts_the_axes_points_move_along():
    positions = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 1.0], [0.0, 2.0, 5.0]])
    padded, ndim = motion_space(positions)
    assert ndim == 2 and np.array_equal(padded[:, 1:], positions[:, 1:]) and np.all(padded[:, 0] == 0)
    padded, ndim = motion_space(positions[:, 1:])  # a 2D table
    assert ndim == 2 and padded.shape == (3, 3)


def test_frame_numbers_with_a_stride_are_one_step_each():
    assert np.array_equal(frame_steps(np.array([0, 0, 3, 6, 6, 9])), [0, 0, 1, 2, 2, 3])
    assert np.array_equal(frame_steps(np.array([5, 6, 8])), [0, 1, 3])  # frame 7 missing: a gap
    truth, detections = _vesicles_2d(n=100, frames=10)
    strided = dict(detections, frame=detections["frame"] * 3 + 100)
    tracks = link_detections(strided, 0.6)
    reference = link_detections(detections, 0.6)
    np.testing.assert_array_equal(tracks["track_id"], reference["track_id"])
    np.testing.assert_array_equal(tracks["frame"], reference["frame"] * 3 + 100)  # frame numbers kept


def test_a_dark_frame_is_bridged_by_gap_closing():
    truth, detections = _vesicles_2d(n=200, frames=12)
    dark = detections["frame"] != 6
    tracks, summary = link_detections({k: v[dark] for k, v in detections.items()}, 0.6, return_summary=True)
    assert summary.gap_closing
    across = (tracks["track_id"][1:] == tracks["track_id"][:-1]) & (tracks["frame"][:-1] == 5)
    alive = np.isin(truth["track_id"][truth["frame"] == 5], truth["track_id"][truth["frame"] == 7])
    # Most of the tracks that go on across the dark frame are found again (the gap-closing gate holds 95 % of
    # the steps, and ends near the edge are left alone).
    assert across.sum() >= 0.85 * alive.sum()


def test_frames_must_be_whole_numbers():
    detections = {"frame": np.array([0.0, 1.0, 2.0]), "y": np.zeros(3), "x": np.arange(3.0)}
    assert link_detections(detections, 2.0)["frame"].dtype == np.int64
    for bad in (0.5, np.nan, 1e20):
        with pytest.raises(InputError, match="frame"):
            link_detections(dict(detections, frame=np.array([0.0, bad, 2.0])), 2.0)


@pytest.mark.parametrize("level,closes", [("exact", False), ("hard", True)])
def test_gap_closing_turns_on_where_detections_are_missed(level, closes):
    truth, detections = _vesicles_2d(level, n=400, frames=20)
    _, summary = link_detections(detections, 0.6, return_summary=True)
    assert summary.gap_closing is closes


def test_gap_closing_wins_the_hard_2d_cell():
    """20 % missed detections in 2D: with gap closing on by itself, at least plain LAP's link F1."""
    truth, detections = _vesicles_2d("hard", n=400, frames=20)
    ours = evaluate(link_detections(detections, 0.6), truth, 0.3)["link_f1_given_detections"]
    plain = evaluate(link_detections(detections, 0.6, motion="none", adaptive_radius=False, max_gap=0), truth,
                     0.3)["link_f1_given_detections"]
    assert ours > plain + 0.02


def test_switching_motion_is_not_cut_off_by_the_adaptive_radius():
    """Particles that switch from slow diffusion to fast directed runs (the ``switching`` family): radii
    fitted to the diffusion would cut every run's first step off; the linker sees it in its own tracks (ends
    followed next frame by a start close by) and searches the whole gate."""
    truth = simulate_scenario("switching", 300, 40, seed=3)
    detections = degrade(truth, "exact", seed=4)
    tracks, summary = link_detections(detections, 1.5, return_summary=True)
    plain = link_detections(detections, 1.5, motion="none", adaptive_radius=False, max_gap=0)
    assert summary.radius_abandoned and "the gate" in str(summary)
    ours, theirs = (evaluate(t, truth, 0.3)["link_f1"] for t in (tracks, plain))
    assert ours > 0.985 and ours > theirs + 0.02
