"""The backward relink: the first frame pair linked again, backwards in time.

The forward pass links the first frame pair before any velocity is known, so
its links are plain nearest-neighbour ones. Once the second pair is linked,
each point of the second frame has a next step; under persistent motion that
step, reversed, predicts where the point came from (time-reversed persistence),
and the first pair is linked again from those predictions. (When the smoothing
pass follows, it links the first pair again anyway, and this pass is skipped.)
"""

from __future__ import annotations

import numpy as np

from .candidate_search import CandidateSearch
from .confidence import assign
from .motion import predict_positions
from .prediction import Prediction
from .track_state import FrameRanges, TrackState


def relink_first_pair(state: TrackState, prediction: Prediction, search: CandidateSearch, frames: FrameRanges, *,
                      no_link_cost: float, solver: str = "auto") -> bool:
    """Relink the first frame pair backwards (:func:`relink_backwards`) where the linker predicts and the first
    three frames are consecutive (each point of the second frame may have a next step); whether it did."""
    if not (frames.n_pairs >= 2 and prediction.predicts() and frames.values[2] == frames.values[0] + 2):
        return False
    relink_backwards(state, prediction, search, frames.points(0), frames.points(1), no_link_cost=no_link_cost,
                     solver=solver)
    return True


def relink_backwards(state: TrackState, prediction: Prediction, search: CandidateSearch, a: np.ndarray,
                     b: np.ndarray, *, no_link_cost: float, solver: str = "auto") -> None:
    """Link the points ``b`` of the second frame back to the points ``a`` of the first, in ``state``, each
    predicted from its next displacement.

    Costs are squared distances from the backward prediction over its class variance; ``no_link_cost``
    (squared standard deviations) is the forward pass's. Points of ``a`` already joined across a gap to a
    later frame keep that link.
    """
    positions, frames = state.positions, state.frames
    successor = state.successors()
    has_next = successor[b] >= 0
    after = np.maximum(successor[b], 0)
    # Per frame, also across a gap closed after ``b``.
    span = np.where(has_next, frames[after] - frames[b], 1)
    next_step = np.where(has_next[:, None], (positions[after] - positions[b]) / span[:, None], 0.0)
    predicted = predict_positions(positions[b], -next_step, has_next, prediction.model.current_persistence())
    variance = prediction.class_variance(has_next)
    radius = prediction.radius(variance, np.ones(len(b)))
    rows, cols, distance_sq = search.search(predicted, radius, b, b, a, a)
    a_successor = successor[a]
    free = (a_successor < 0) | np.isin(a_successor, b)
    keep = free[cols]
    if prediction.axis_sd is not None:  # (whitened positions: the gate is a ball in µm)
        keep &= prediction.in_gate(np.take(predicted, rows, axis=0) - np.take(positions, a[cols], axis=0))
    rows, cols, distance_sq = rows[keep], cols[keep], distance_sq[keep]
    state.unlink(b)
    if rows.size == 0:
        return
    cost = distance_sq / variance[rows]
    chosen_rows, chosen_cols, index, confidence = assign(rows, cols, cost, (len(b), len(a)), no_link_cost, solver)
    state.record_links(a[chosen_cols], b[chosen_rows], distance_sq[index], variance[chosen_rows], confidence)
