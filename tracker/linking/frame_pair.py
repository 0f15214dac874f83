"""The forward pass: frame-to-frame assignment, one pair of consecutive frames at a time.

Each pair is one gated assignment (:func:`tracker.lap.solve_gated`) with a
"no link" alternative for every point (Jaqaman et al. 2008's frame-to-frame
step). Each point of the earlier frame is predicted into the later one by its
track's motion (:class:`tracker.linking.prediction.Prediction`), candidates lie
within its search radius, and a link costs its squared distance from the
prediction in units of the expected scatter. Once detections go missing, the
track ends of the last few frames are extra rows of the same assignment
(:func:`track_ends_before`), so that a particle that reappears competes for its
detection with its neighbours (as trackpy's ``memory`` does). The motion model
learns from every pair's links.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import lap
from ..costs import DEFAULT_NO_LINK_FACTOR, gated_links, no_link_cost
from ..progress import ProgressCallback, Stage
from .candidate_search import CandidateSearch
from .confidence import chosen_edge_index, link_confidence
from .gap_closing import DEFAULT_GAP_PENALTY
from .missing_detections import MissingRate
from .motion import DEFAULT_GATE_SIGMAS, MotionModel, own_scatter_cost, predict_positions, spread_factor
from .prediction import Prediction
from .smoothing import smoothing_applies
from .track_state import FrameRanges, TrackState

IN_PAIR_GAP_PENALTY_FACTOR = 2.5
"""Per missing frame, a track end competing in a frame-to-frame assignment pays this many times
``gap_penalty`` (chosen on benchmarks/compare_trackers.py: 1x-2x lost links to neighbours'
tracks in the detected-stack cells, 4x lost them in the Brownian cells)."""

_NO_POINTS = np.empty(0, dtype=np.int64)
_NO_POINTS.flags.writeable = False  # (shared: no pass writes into it)


def link_frame_pair(
    source_um: np.ndarray,
    target_um: np.ndarray,
    max_displacement_um: float,
    *,
    no_link_factor: float = DEFAULT_NO_LINK_FACTOR,
    solver: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Optimal links between two frames, on squared displacements (no prediction).

    Returns
    -------
    rows, cols : int64 arrays
        Linked source and target indices.
    cost : float64 array
        Cost (µm²) of each link.
    """
    rows, cols, cost = gated_links(source_um, target_um, max_displacement_um)
    if rows.size == 0:
        return rows, cols, cost
    alternative = no_link_cost(cost, max_displacement_um, no_link_factor)
    chosen_rows, chosen_cols = lap.solve_gated(
        rows, cols, cost, (len(source_um), len(target_um)), alternative, solver=solver
    )
    # Edges are sorted by (row, col): find each chosen edge's cost.
    index = chosen_edge_index(rows, cols, chosen_rows, chosen_cols, len(target_um))
    return chosen_rows, chosen_cols, cost[index]


def forward_pass(state: TrackState, prediction: Prediction, search: CandidateSearch, missing: MissingRate,
                 frames: FrameRanges, *, no_link_factor: float = DEFAULT_NO_LINK_FACTOR, solver: str = "auto",
                 max_gap: int = 0, gap_penalty: float = DEFAULT_GAP_PENALTY, keep_for_smoothing: bool = False,
                 progress: ProgressCallback | None = None) -> None:
    """Link every pair of consecutive frames in order (:func:`link_pair`), reporting ``progress(Stage.LINK, ...)``.

    Once detections go missing (:meth:`MissingRate.detections_go_missing`), the track ends of the last ``max_gap``
    frames compete for each pair's detections (not with plain costs, in µm²: there gap closing alone joins them).
    Each frame's k-d tree is built in the background a pair ahead.
    """
    in_pair_gaps = max_gap if prediction.scaled_costs() else 0
    if frames.n_pairs:  # (the first pair's source frame: its tree orders the first searches)
        search.prefetch_tree(frames.points(0))
    for k in range(frames.n_pairs):
        if k + 2 < len(frames.values):  # the next pair's target frame
            search.prefetch_tree(frames.points(k + 2))
        if frames.consecutive(k):
            gap_ends, gap_steps = track_ends_before(state, frames, k,
                                                    in_pair_gaps if missing.detections_go_missing() else 0)
            link_pair(state, prediction, search, missing, frames.points(k), frames.points(k + 1),
                      no_link_factor=no_link_factor, solver=solver, gap_ends=gap_ends, gap_steps=gap_steps,
                      gap_penalty=gap_penalty, keep_for_smoothing=keep_for_smoothing)
        if progress is not None:
            progress(Stage.LINK, k + 1, frames.n_pairs)


def track_ends_before(state: TrackState, frames: FrameRanges, k: int, max_gap: int) -> tuple[np.ndarray, np.ndarray]:
    """The track ends of the ``max_gap`` frames before the ``k``-th frame with points, and for each the frames
    its link into the ``k + 1``-th would span (``g + 1`` for an end ``g`` frames before)."""
    ends, n_steps = [], []
    for g in range(1, max_gap + 1):
        j = frames.index_of(frames.values[k] - g)
        if j is not None:
            points = frames.points(j)
            points = points[~state.has_successor[points]]
            ends.append(points)
            n_steps.append(np.full(len(points), g + 1, dtype=np.int64))
    if not ends:
        return _NO_POINTS, _NO_POINTS.copy()
    return np.concatenate(ends), np.concatenate(n_steps)


def link_pair(state: TrackState, prediction: Prediction, search: CandidateSearch, missing: MissingRate,
              a: np.ndarray, b: np.ndarray, *, no_link_factor: float = DEFAULT_NO_LINK_FACTOR, solver: str = "auto",
              gap_ends: np.ndarray | None = None, gap_steps: np.ndarray | None = None,
              gap_penalty: float = DEFAULT_GAP_PENALTY, keep_for_smoothing: bool = False) -> None:
    """Link the points ``a`` of one frame to the points ``b`` of the next, in ``state``.

    ``gap_ends`` (track ends ``gap_steps - 1`` frames before ``a``'s, :func:`track_ends_before`) are extra rows of
    the same assignment: a particle that blinked competes for its reappearance with its neighbours, at
    :data:`IN_PAIR_GAP_PENALTY_FACTOR` times ``gap_penalty`` per missing frame. The motion model
    (``prediction.model``) and the missing rate learn from the links; with ``keep_for_smoothing`` the search
    keeps its candidates for the smoothing pass (:data:`tracker.linking.candidate_search.SMOOTHING_SEARCH_MARGIN`).
    """
    if gap_ends is None or len(gap_ends) == 0 or len(b) == 0:
        gap_ends, gap_steps = _NO_POINTS, _NO_POINTS.copy()
    else:
        # Not the ends within a typical step of the edge of the volume:
        # those tracks most likely left it (as in gap closing).
        inner = missing.inner(gap_ends, prediction)
        gap_ends, gap_steps = gap_ends[inner], gap_steps[inner]
    gap_penalties = IN_PAIR_GAP_PENALTY_FACTOR * gap_penalty * (gap_steps - 1)
    model = prediction.model

    def solve(model):
        return _solve(state, prediction, search, a, b, model, gap_ends, gap_steps, gap_penalties,
                      missing.scaled_no_link_cost(no_link_factor), no_link_factor, solver, keep_for_smoothing)

    used_model = model
    result = solve(model)
    if prediction.motion != "none" and not model.ready:
        # Not enough history to predict: learn the motion from these
        # provisional links, and link again with prediction if that helps.
        trial = copy.copy(model)
        frame_rows = result[0] < len(a)
        update_model(trial, state, a, b, result[0][frame_rows], result[1][frame_rows])
        if prediction.predicts(trial):
            used_model = trial
            result = solve(trial)
    rows, cols, residual_sq, variance, confidence = result
    frame_rows = rows < len(a)
    if len(b):
        linked = np.zeros(len(a), dtype=bool)
        linked[rows[frame_rows]] = True
        missing.count(state, prediction, a, linked, used_model)
    update_model(model, state, a, b, rows[frame_rows], cols[frame_rows])
    sources = np.concatenate([a, gap_ends])
    steps = np.concatenate([np.ones(len(a), dtype=np.int64), gap_steps])[rows]
    state.record_links(sources[rows], b[cols], residual_sq, variance, confidence, steps)
    state.update_prior_steps(b)


def _solve(state, prediction, search, a, b, model, gap_ends, gap_steps, gap_penalties, scaled_no_link,
           no_link_factor, solver, keep_for_smoothing):
    """One assignment of :func:`link_pair` with ``model``: chosen rows (``a``, then ``gap_ends``) and columns
    (``b``), each link's squared distance from its prediction (µm²), its class variance and its confidence."""
    p = prediction.persistence(model)
    predicted, variance, own, radius = prediction.predict(state, a, model)
    penalty = np.zeros(len(a))
    if len(gap_ends):
        # Predicted ``gap_steps`` frames ahead, with the variance growing
        # with the gap, and a penalty per missing frame.
        gap_v = state.has_velocity[gap_ends] & prediction.predicts(model)
        gap_predicted = predict_positions(state.positions[gap_ends], state.velocity[gap_ends], gap_v, p, gap_steps)
        gap_variance = prediction.class_variance(gap_v, model) * spread_factor(p, gap_steps, gap_v)
        gap_own = prediction.scale(state, gap_ends)
        gap_radius = np.minimum(DEFAULT_GATE_SIGMAS * np.sqrt(gap_variance * gap_own),
                                prediction.gate * np.sqrt(gap_steps))
        predicted = np.concatenate([predicted, gap_predicted])
        variance = np.concatenate([variance, gap_variance])
        own = np.concatenate([own, gap_own])
        radius = np.concatenate([radius, gap_radius])
        penalty = np.concatenate([penalty, gap_penalties])
    n_rows = len(predicted)
    keep = keep_for_smoothing and smoothing_applies(prediction, model)
    rows, cols, distance_sq = search.search(predicted, radius, a, a, b, b, keep=keep)
    if prediction.axis_sd is not None and rows.size:  # (whitened positions: the gate is a ball in µm)
        frames_spanned = np.concatenate([np.ones(len(a), dtype=np.int64), gap_steps])[rows]
        inside = prediction.in_gate(np.take(predicted, rows, axis=0) - np.take(state.positions, b[cols], axis=0),
                                    frames_spanned)
        rows, cols, distance_sq = rows[inside], cols[inside], distance_sq[inside]
    if rows.size == 0:
        return _NO_POINTS, _NO_POINTS.copy(), np.empty(0), np.empty(0), np.empty(0)
    scaled = own_scatter_cost(distance_sq, variance[rows], own[rows], model.ndim) + penalty[rows]  # (squared SDs)
    plain = not prediction.scaled_costs()
    cost = distance_sq if plain else scaled
    # Scaled costs never exceed DEFAULT_GATE_SIGMAS² inside the radius (plus
    # a gap row's penalty): any candidate costs less than leaving both of
    # its ends unlinked (see SCALED_NO_LINK_COST).
    alternative = no_link_cost(cost, prediction.gate, no_link_factor) if plain else scaled_no_link
    if not plain and not prediction.adaptive_radius:
        # The radius is the gate, beyond DEFAULT_GATE_SIGMAS standard deviations: the alternative keeps its place
        # relative to the dearest candidate the radius admits, as SCALED_NO_LINK_COST sets it at the adaptive radius.
        reach = own_scatter_cost(radius**2, variance, own, model.ndim) + penalty
        alternative = scaled_no_link * max(1.0, float(reach.max()) / DEFAULT_GATE_SIGMAS**2)
    chosen_rows, chosen_cols = lap.solve_gated(rows, cols, cost, (n_rows, len(b)), alternative, solver=solver)
    unassigned_scaled = alternative / (variance if plain else 1.0)
    index = chosen_edge_index(rows, cols, chosen_rows, chosen_cols, len(b))
    confidence = link_confidence(
        rows, cols, scaled, np.broadcast_to(unassigned_scaled, (n_rows,)),
        np.full(len(b), alternative / np.median(variance) if plain else alternative),
        chosen_rows, chosen_cols, index,
    )
    return chosen_rows, chosen_cols, distance_sq[index], variance[chosen_rows], confidence


def update_model(model: MotionModel, state: TrackState, a: np.ndarray, b: np.ndarray, rows: np.ndarray,
                 cols: np.ndarray) -> None:
    """Add the steps of the links ``a[rows] -> b[cols]`` (and the steps before them, where known) to ``model``."""
    src, dst = a[rows], b[cols]
    model.update(np.take(state.positions, dst, axis=0) - np.take(state.positions, src, axis=0),
                 np.take(state.velocity, src, axis=0), state.has_velocity[src])
