"""Simulated detections for the linking tests (not a test module)."""

from __future__ import annotations

import numpy as np

from tracker import simulate
from tracker.linking.motion import MotionModel
from tracker.linking.prediction import Prediction
from tracker.linking.track_state import TrackState


def noisy_detections(truth, sigma, seed=0):
    """The visible points of a ground truth, each coordinate moved by Gaussian noise of ``sigma`` (µm)."""
    rng = np.random.default_rng(seed)
    visible = np.asarray(truth["visible"])
    table = {name: np.asarray(truth[name])[visible] for name in ("frame", "z", "y", "x")}
    for axis in "zyx":
        table[axis] = table[axis] + rng.normal(0, sigma, len(table[axis]))
    return table


def dense_cell(ratio, persistence, n=1500, frames=12, seed=3, blink=0.0):
    """Detections at a given step / nearest-neighbour distance; returns truth, detections, step, NN."""
    side = (n / 0.554**3) ** (1 / 3)
    first = simulate.simulate_tracks(n, 1, (side,) * 3, 1.0, persistence, margin_um=1.0, seed=seed)
    nn = simulate.mean_nearest_neighbour_distance(first)
    truth = simulate.simulate_tracks(n, frames, (side,) * 3, ratio * nn, persistence, margin_um=1.0,
                                     blink_probability=blink, seed=seed)
    return truth, noisy_detections(truth, 0.04 * nn, seed), ratio * nn, nn


def two_tracks(predecessor, gate_um=1.0, persistence=0.9):
    """Two particles ``A, B`` moving 0.5 µm per frame along x, 0.4 µm apart (along y), through frames 0-3:
    points ``A0, B0, A1, B1, A2, B2, A3, B3`` linked by ``predecessor`` (velocities from those links), and a
    prediction with the given persistence and gate (µm) that has seen no step yet."""
    frames = np.repeat(np.arange(4), 2)
    positions = np.stack([np.zeros(8), np.tile([0.0, 0.4], 4), 0.5 * frames], axis=1)
    state = TrackState.unlinked(positions, frames)
    predecessor = np.asarray(predecessor)
    linked = predecessor >= 0
    state.predecessor[:] = predecessor
    state.has_successor[predecessor[linked]] = True
    state.velocity[linked] = positions[linked] - positions[predecessor[linked]]
    state.has_velocity[:] = linked
    state.confidence[linked] = 0.5
    return state, Prediction("persistent", True, gate_um, MotionModel(persistence=persistence))
