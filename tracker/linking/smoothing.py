"""Forward-backward smoothing: every frame pair linked once more, given the track's past and its future.

When the motion is persistent, the forward pass's link of a pair chose each
step knowing only the track's past. The smoothing pass links every pair again
with a cost that adds, to the squared distance from the prediction, how well
the candidate's step continues into the next frame (the step the forward pass
found after it, or, where detections are sparse, the nearest detection to the
track's next prediction: the look-ahead), so that the future resolves what the
past left ambiguous. Its uncertain links are the candidates of the point
exchanges (:mod:`tracker.linking.point_exchange`).
"""

from __future__ import annotations

import numpy as np

from ..progress import ProgressCallback, Stage
from .candidate_search import CandidateSearch
from .confidence import assign
from .motion import MotionModel, own_scatter_cost
from .point_exchange import exchange_candidates
from .prediction import Prediction
from .track_state import FrameRanges, TrackState

SMOOTHING_MIN_PERSISTENCE = 0.2
"""The smoothing pass runs when the estimated (or given) persistence is at least this: below it the
next step says little about the one before (nothing at all for Brownian motion, p = 0), and the pass
would only cost time."""

LOOKAHEAD_MAX_CROWDING = 0.15
"""The smoothing pass looks ahead (see :func:`smooth_pair`) when, on average, fewer than this many
other detections lie within 3 residual standard deviations of a detection: there the detection nearest to where a
candidate link's track would be next is most likely that track's own. compare_trackers.py cells, 10k particles:
at 0.02-0.12 (persistence 0.9, and 0.5 at step/NN 0.2) looking ahead gained 0.0001-0.008 F1, at 0.19-0.57
(persistence 0.5, step/NN 0.4-0.6) it lost 0.0004-0.0013."""

LOOKAHEAD_MAX_TERM = 16.0
"""Cap on the look-ahead cost term (squared standard deviations): a continuation farther than 4 standard
deviations from the prediction counts as none (a blink or the track's end), not as evidence against the link
(9 lost 0.0005 F1 at persistence 0.9, step/NN 0.5; 16 and 25 did the same)."""

def next_step_term_mean(ndim: int) -> float:
    """Expected value of the smoothing pass's second cost term: a squared residual in ``ndim`` dimensions in
    standard deviations, chi-square with ``ndim`` degrees of freedom, whose mean is ``ndim``. A candidate
    whose target has no next step pays it, and so does "no link", so that candidates with and without a
    known future compare fairly."""
    return float(ndim)


def smoothing_applies(prediction: Prediction, model: MotionModel | None = None) -> bool:
    """Whether the motion (``model``, by default the prediction's) calls for the smoothing pass: it predicts,
    with a persistence of :data:`SMOOTHING_MIN_PERSISTENCE` or more."""
    model = model or prediction.model
    return prediction.predicts(model) and model.current_persistence() >= SMOOTHING_MIN_PERSISTENCE


def crowding(state: TrackState, prediction: Prediction, search: CandidateSearch, sample_size: int = 2000) -> float:
    """Mean number of other detections within 3 residual standard deviations of a detection.

    Counted in the most populous frame (the first of them), around at most ``sample_size`` of its points.
    """
    frames = state.frames
    if len(frames) == 0:
        return 0.0
    starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]])
    counts = np.diff(np.r_[starts, len(frames)])
    if counts.max() < 2:
        return 0.0
    start, count = int(starts[np.argmax(counts)]), int(counts.max())
    points = state.positions[start:start + count]
    radius = 3.0 * np.sqrt(prediction.residual_variance())
    sample = points[:: max(1, len(points) // sample_size)]
    tree = search.frame_tree(np.arange(start, start + count))
    return float(tree.query_ball_point(sample, radius, return_length=True).mean() - 1.0)


def looks_ahead(state: TrackState, prediction: Prediction, search: CandidateSearch) -> bool:
    """Whether the smoothing pass looks ahead: detections are sparse for the prediction
    (:data:`LOOKAHEAD_MAX_CROWDING`)."""
    return crowding(state, prediction, search) < LOOKAHEAD_MAX_CROWDING


def smoothing_pass(state: TrackState, prediction: Prediction, search: CandidateSearch, frames: FrameRanges, *,
                   no_link_cost: float, solver: str = "auto", progress: ProgressCallback | None = None,
                   ) -> tuple[bool, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Link every pair of consecutive frames once more (:func:`smooth_pair`), reporting
    ``progress(Stage.SMOOTH, ...)``; from here on ``state.successor`` is kept.

    Returns whether the pass looked ahead (:func:`looks_ahead`), and the point exchanges to try, by frame.
    """
    state.start_successors()
    lookahead = looks_ahead(state, prediction, search)
    candidates = {}
    for k in range(frames.n_pairs):
        if frames.consecutive(k):
            candidates[int(frames.values[k + 1])] = smooth_pair(
                state, prediction, search, frames.points(k), frames.points(k + 1), lookahead=lookahead,
                no_link_cost=no_link_cost, solver=solver)
        if progress is not None:
            progress(Stage.SMOOTH, k + 1, frames.n_pairs)
    return lookahead, candidates


def smooth_pair(state: TrackState, prediction: Prediction, search: CandidateSearch, a: np.ndarray, b: np.ndarray,
                *, lookahead: bool, no_link_cost: float, solver: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Link the points ``a`` of one frame to the points ``b`` of the next once more, past and future.

    ``state.successor`` must be kept (:meth:`TrackState.start_successors`); it is updated. The cost of
    ``a -> b`` (step ``s``) is the forward cost of :func:`tracker.linking.frame_pair.link_pair` (squared
    distance of ``b`` from ``a``'s prediction over ``a``'s variance) plus ``|w - p s|²`` over the residual
    variance, where ``w`` is the step from ``b`` to its successor in the next frame (:func:`next_step_term_mean`
    when ``b`` has none). Under biased correlated motion both are independent Gaussian residuals, so the sum
    is the negative log-likelihood of the step given the track's past and future. Links across missing
    frames stay as they are: ``a`` points joined to a later frame and ``b`` points joined from an earlier one
    are left out. ``no_link_cost`` (squared standard deviations) is the forward pass's, to which the
    expected second term is added. Each point's forward-pass link stays a candidate even past the search
    radius (:func:`with_forward_links`).

    With ``lookahead`` (where detections are sparse for the prediction: :data:`LOOKAHEAD_MAX_CROWDING`),
    ``w`` leads instead to the detection nearest to ``b + p s`` in the next frame, the term capped at
    :data:`LOOKAHEAD_MAX_TERM`: each candidate link is judged by its own best continuation, not by the
    forward pass's successor of ``b``, which belonged to another track whenever the forward pass swapped
    two tracks (then the plain term would only move the swap one frame earlier).

    Returns
    -------
    x, y : int arrays
        Candidates of point exchanges between tracks through points of ``b``
        (:func:`tracker.linking.point_exchange.exchange_candidates`).
    """
    frame_a, frame_b_points = a, b
    frame_b = state.frames[b[0]] if len(b) else 0
    successor, frames, positions = state.successor, state.frames, state.positions
    a = a[(successor[a] < 0) | (frames[np.maximum(successor[a], 0)] == frame_b)]
    before = state.predecessor[b]
    b = b[(before < 0) | (frames[np.maximum(before, 0)] == frame_b - 1)]
    no_exchanges = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    if len(a) == 0 or len(b) == 0:
        return no_exchanges
    p = prediction.model.current_persistence()
    predicted, variance, own, radius = prediction.predict(state, a)
    rows, cols, distance_sq = search.search(predicted, radius, frame_a, a, frame_b_points, b)
    if prediction.axis_sd is not None:  # (whitened positions: the gate is a ball in µm)
        inside = prediction.in_gate(np.take(predicted, rows, axis=0) - np.take(positions, b[cols], axis=0))
        rows, cols, distance_sq = rows[inside], cols[inside], distance_sq[inside]
    rows, cols, distance_sq = with_forward_links(state, prediction, predicted, a, b, rows, cols, distance_sq)
    residual_variance = prediction.residual_variance()
    target_um = np.take(positions, b[cols], axis=0)
    step = target_um - np.take(positions, a[rows], axis=0)
    start, stop = np.searchsorted(frames, [frame_b + 1, frame_b + 2])
    if lookahead and stop > start:
        # Only continuations within the cap's distance matter: farther ones cost the cap.
        continuation_sq = search.nearest_continuation(
            target_um + p * step, b[cols] - frame_b_points[0], frame_b_points, np.arange(start, stop),
            np.sqrt(LOOKAHEAD_MAX_TERM * residual_variance))
        future = np.minimum(continuation_sq / residual_variance, LOOKAHEAD_MAX_TERM)
    else:
        after = successor[b]
        has_next = (after >= 0) & (frames[np.maximum(after, 0)] == frame_b + 1)
        next_step = np.take(positions, np.maximum(after, 0), axis=0) - np.take(positions, b, axis=0)
        surprise = np.take(next_step, cols, axis=0) - p * step
        surprise *= surprise
        future = (surprise[:, 0] + surprise[:, 1] + surprise[:, 2]) / residual_variance  # (np.sum's order)
        future = np.where(has_next[cols], future, next_step_term_mean(prediction.model.ndim))
    cost = own_scatter_cost(distance_sq, variance[rows], own[rows], prediction.model.ndim) + future
    alternative = no_link_cost + next_step_term_mean(prediction.model.ndim)

    # Undo the forward pass's links between a and b.
    before = state.predecessor[b]
    successor[before[before >= 0]] = -1
    state.unlink(b)
    if rows.size == 0:
        return no_exchanges
    chosen_rows, chosen_cols, index, confidence = assign(rows, cols, cost, (len(a), len(b)), alternative, solver)
    successor[a[chosen_rows]] = b[chosen_cols]
    state.record_links(a[chosen_rows], b[chosen_cols], distance_sq[index], variance[chosen_rows], confidence)
    return exchange_candidates(b, len(a), rows, cols, cost, chosen_rows, chosen_cols, index, confidence)


def with_forward_links(state: TrackState, prediction: Prediction, predicted: np.ndarray, a: np.ndarray,
                       b: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                       distance_sq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidates ``rows`` (into ``a``), ``cols`` (into ``b``; sorted by row, then column) with squared distances
    (µm²) from ``predicted``, plus each point's forward-pass link into ``b`` where it is not among them (past
    the point's search radius) but lies within the gate.

    The smoothing pass predicts with the persistence and scatter learnt from the whole forward pass; a step the
    forward pass linked while the motion was still being learnt (a turn, a change of speed) can lie past that
    radius. The pass then weighs it against the other candidates instead of cutting it off unseen: its cost
    (squared standard deviations past the radius) decides.
    """
    if len(b) == 0:
        return rows, cols, distance_sq
    column = np.full(int(b[-1] - b[0]) + 2, -1, dtype=np.int64)  # (b sorted: a point's column, -1 if not in b)
    column[b - b[0]] = np.arange(len(b))
    forward = column[np.clip(state.successor[a] - b[0], -1, len(column) - 1)]  # (-1: no successor in b)
    among = np.zeros(len(a), dtype=bool)
    among[rows[np.take(forward, rows) == cols]] = True
    linked = np.flatnonzero((forward >= 0) & ~among)  # (past the radius, or past the gate)
    if len(linked) == 0:
        return rows, cols, distance_sq
    col = forward[linked]
    delta = np.take(predicted, linked, axis=0) - np.take(state.positions, b[col], axis=0)
    sq = np.einsum("ij,ij->i", delta, delta)
    in_gate = prediction.in_gate(delta)
    keep = (sq <= prediction.gate**2) if in_gate is None else in_gate
    if not keep.any():
        return rows, cols, distance_sq
    rows, cols = np.concatenate([rows, linked[keep]]), np.concatenate([cols, col[keep]])
    distance_sq = np.concatenate([distance_sq, sq[keep]])
    order = np.lexsort((cols, rows))
    return rows[order], cols[order], distance_sq[order]
