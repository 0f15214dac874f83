"""Gap closing: join track ends to track starts a few frames later.

A particle that is not detected for a frame or two (blinking, focus) ends
one track and starts another. After frame-to-frame linking, one more gated
assignment over all track ends (rows) and track starts (columns) joins them
(Jaqaman et al. 2008): an end at frame ``t`` may link to a start at frame
``t + 1 + g`` for ``1 <= g <= max_gap`` missing frames. The cost is the
squared distance of the start from the end's predicted position after
``g + 1`` frames, in units of the prediction's variance (which grows with
the gap, :func:`tracker.linking.motion.spread_factor`), plus ``gap_penalty`` per
missing frame; every end and start may also stay unlinked.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaincinv

from ..costs import gated_links_per_source
from ..params import LINKING_DEFAULTS
from .confidence import assign
from .motion import own_scatter_cost, predict_positions, spread_factor
from .prediction import Prediction
from .track_state import TrackState

DEFAULT_MAX_GAP = LINKING_DEFAULTS.max_gap
"""Missing frames a gap-closing link may bridge."""

DEFAULT_GAP_PENALTY = LINKING_DEFAULTS.gap_penalty
"""Extra cost per missing frame (squared standard deviations)."""

GAP_CLOSING_QUANTILE = 0.95
"""A gap-closing candidate lies within the standard deviations of the end's predicted position that hold this
fraction of a Gaussian step (:func:`gap_closing_gate_sigmas`: 2.795 in 3D, the square root of the chi-square
(3) quantile 7.81; 2.448 in 2D), where frame-to-frame linking
searches to :data:`tracker.linking.motion.DEFAULT_GATE_SIGMAS` (4.5). Almost every point has a successor in the next
frame, but few track ends are missed detections (most are particles that left or merged with a neighbour's
spot), so a far candidate of a gap is mostly a different particle: on the detected stacks of
``benchmarks/compare_trackers.py`` (missing rate 3-5 %, no blinking) 37 of the 95 gap links at 4.5 sigma
joined different particles or skipped a detection (seed 0)."""

FACE_MAX_SHARE = 0.5
"""The volume's edge counts (tracks that end or start near a face left or entered the volume) only along axes
where at most this share of the points lie within reach of the faces (:func:`face_axes`). Points spread over
the volume put ``2 reach / extent`` of them there, under a half wherever the volume spans four reaches or more;
where most points are at the faces, the box is of the points' own making — two particles moving side by side
span a box that is all edge — and says nothing of where particles leave."""


def face_axes(positions: np.ndarray, bounds: tuple[np.ndarray, np.ndarray], reach_um: float) -> np.ndarray:
    """Boolean mask of the axes whose faces are the volume's (:data:`FACE_MAX_SHARE`) for points ``reach_um``
    (µm) from them."""
    low, high = bounds
    axes = np.zeros(positions.shape[1], dtype=bool)
    for k in range(positions.shape[1]):
        if high[k] > low[k]:
            column = positions[:, k]
            near = np.minimum(column - low[k], high[k] - column) < reach_um
            axes[k] = np.count_nonzero(near) <= FACE_MAX_SHARE * len(column)
    return axes


def gap_closing_gate_sigmas(ndim: int = 3) -> float:
    """Search radius of gap closing in standard deviations of the prediction (:data:`GAP_CLOSING_QUANTILE`)."""
    return float(np.sqrt(2.0 * gammaincinv(ndim / 2.0, GAP_CLOSING_QUANTILE)))  # (the chi-square quantile)


def track_ends_and_starts(predecessor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the points that end a track (no successor) and that start one (no predecessor)."""
    n = len(predecessor)
    has_successor = np.zeros(n, dtype=bool)
    has_successor[predecessor[predecessor >= 0]] = True
    return np.flatnonzero(~has_successor), np.flatnonzero(predecessor < 0)


def bounding_box(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest coordinate along each axis of ``(n, d)`` positions, ``n >= 1``.

    Column by column: NumPy's reduction along axis 0 of an ``(n, 3)`` array is some 20 times slower
    (180k points: 4.7 ms against 0.23 ms).
    """
    positions = np.asarray(positions)
    columns = range(positions.shape[1])
    return (np.array([positions[:, k].min() for k in columns]), np.array([positions[:, k].max() for k in columns]))


def edge_clearance(points: np.ndarray, bounds: tuple[np.ndarray, np.ndarray],
                   axes: np.ndarray | None = None) -> np.ndarray:
    """Distance of each of the ``(n, d)`` ``points`` to the nearest face of the box ``bounds = (low, high)``,
    along the axes (negative outside the box). A flat axis (``low == high``: 2D data, or a constant ``z``)
    has no faces: it does not count; nor does an axis left out of ``axes`` (a boolean mask; see :func:`face_axes`)."""
    low, high = bounds
    clearance = None
    for k in range(points.shape[1]):  # (column by column: broadcasting (d,) over (n, d) is several times slower)
        column = points[:, k]
        if high[k] == low[k] or (axes is not None and not axes[k]):
            continue
        gap = np.minimum(column - low[k], high[k] - column)
        clearance = gap if clearance is None else np.minimum(clearance, gap)
    return np.full(len(points), np.inf) if clearance is None else clearance


def near_edge(positions: np.ndarray, index: np.ndarray, distance_um: float,
              bounds: tuple[np.ndarray, np.ndarray] | None = None, axes: np.ndarray | None = None) -> np.ndarray:
    """Whether points ``index`` lie within ``distance_um`` of a face of the bounding box.

    ``bounds`` is ``(low, high)`` (µm); by default the box of all ``positions``.
    """
    bounds = bounding_box(positions) if bounds is None else bounds
    return edge_clearance(np.take(positions, index, axis=0), bounds, axes) < distance_um


def close_track_gaps(state: TrackState, prediction: Prediction, *, max_gap: int = DEFAULT_MAX_GAP,
                     gap_penalty: float = DEFAULT_GAP_PENALTY, no_link_factor: float = LINKING_DEFAULTS.no_link_factor,
                     solver: str = "auto", dark_frames: np.ndarray | None = None) -> int:
    """:func:`close_gaps` on the tracks of ``state``, with the motion of ``prediction``; the number of gaps closed.

    The variances are the motion model's own, not clipped to the frame-to-frame gate (see
    :meth:`tracker.linking.prediction.Prediction.class_variance`): a gap's radius is capped by the gate times
    ``sqrt(g + 1)`` instead."""
    predicts = prediction.motion != "none"
    return close_gaps(
        state.positions, state.frames, state.predecessor, state.link_cost, state.confidence,
        velocity=state.velocity, has_velocity=state.has_velocity,
        persistence=prediction.model.current_persistence() if predicts else 0.0,
        step_variance=prediction.step_variance(clip=False),
        residual_variance=prediction.residual_variance(clip=False) if predicts else None,
        scale=prediction.scale(state, np.arange(len(state))),
        max_displacement_um=prediction.gate if prediction.axis_sd is None else prediction.gate_um,
        max_gap=max_gap, gap_penalty=gap_penalty, no_link_factor=no_link_factor, solver=solver,
        ndim=prediction.model.ndim, axis_sd=prediction.axis_sd, dark_frames=dark_frames,
    )


def close_gaps(
    positions: np.ndarray,
    frames: np.ndarray,
    predecessor: np.ndarray,
    link_cost: np.ndarray,
    confidence: np.ndarray,
    *,
    velocity: np.ndarray,
    has_velocity: np.ndarray,
    persistence: float,
    step_variance: float,
    residual_variance: float | None,
    scale: np.ndarray,
    max_displacement_um: float,
    max_gap: int = DEFAULT_MAX_GAP,
    gap_penalty: float = DEFAULT_GAP_PENALTY,
    no_link_factor: float = LINKING_DEFAULTS.no_link_factor,
    solver: str = "auto",
    ndim: int = 3,
    axis_sd: np.ndarray | None = None,
    dark_frames: np.ndarray | None = None,
) -> int:
    """Join track ends to later track starts, in place.

    Parameters
    ----------
    positions : (n, 3) float array
        Point positions (µm).
    frames : (n,) int array
    predecessor, link_cost, confidence : (n,) arrays
        Updated in place for the starts that get joined: predecessor index,
        squared residual divided by the frames spanned (µm²), confidence.
    velocity, has_velocity : (n, 3), (n,) arrays
        Last displacement of each point's track, where known.
    persistence : float
        ``p`` of the motion model (0 for none).
    step_variance, residual_variance : float
        Per-axis one-frame variance (µm²) of a displacement without and of a
        prediction error with a known velocity (None: no prediction).
    scale : (n,) float array
        Each track's own scatter relative to its class.
    max_displacement_um : float
        One-frame gate; a gap of ``g`` frames allows ``sqrt(g + 1)`` times it.
    max_gap : int
        Most missing frames to bridge.
    ndim : int
        Dimension of the motion (3, or 2 for 2D data; ``positions`` zero on unused axes).
    axis_sd : (3,) float array, optional
        Where the axes' scatters differ: ``positions``, the velocities and the variances are whitened (each axis
        divided by ``axis_sd``, :mod:`tracker.linking.axis_scatter`), the gate ``max_displacement_um`` still µm.
    dark_frames : (k,) int array, optional
        Frames where most detections went missing (:func:`tracker.linking.missing_detections.dark_frames`): a
        track that ends just before one, or starts just after one, is joined even near the volume's edge.

    Returns
    -------
    int
        Number of gaps closed.
    """
    ends, starts = track_ends_and_starts(predecessor)
    if max_gap < 1 or len(ends) == 0 or len(starts) == 0:
        return 0
    # A track that ends (starts) within one typical step of the edge of the
    # imaged volume most likely left (entered) it: no gap to close there
    # (along the axes whose faces are the volume's: see face_axes).
    edge = np.sqrt(ndim * step_variance)
    bounds = bounding_box(positions)
    axes = face_axes(positions, bounds, edge * np.sqrt(max_gap + 1))
    # ... except next to a dark frame, where every track ends (starts) whether it is near the edge or not.
    dark = np.empty(0, dtype=np.int64) if dark_frames is None else np.asarray(dark_frames)
    ends = ends[~near_edge(positions, ends, edge, bounds, axes) | np.isin(frames[ends] + 1, dark)]
    starts = starts[~near_edge(positions, starts, edge, bounds, axes) | np.isin(frames[starts] - 1, dark)]
    if max_gap < 1 or len(ends) == 0 or len(starts) == 0:
        return 0
    predicts = residual_variance is not None
    gate_sigmas = gap_closing_gate_sigmas(ndim)
    reach = max_displacement_um if axis_sd is None else max_displacement_um / float(np.min(axis_sd))
    edge_rows, edge_cols, edge_cost, edge_residual = [], [], [], []
    end_frames, start_frames = frames[ends], frames[starts]
    for n_steps in range(2, max_gap + 2):
        # All frames in one search: frame t's ends and frame t + n_steps's
        # starts are moved to slab t along z, slabs farther apart than any
        # search radius, so that only pairs of the same slab can be found.
        e = np.flatnonzero(np.isin(end_frames + n_steps, start_frames))
        s = np.flatnonzero(np.isin(start_frames - n_steps, end_frames))
        if len(e) == 0 or len(s) == 0:
            continue
        end_points = ends[e]
        with_v = has_velocity[end_points] & predicts
        predicted = predict_positions(
            positions[end_points], velocity[end_points], with_v, persistence if predicts else 0.0, n_steps
        )
        one_step = np.where(with_v, residual_variance if predicts else step_variance, step_variance)
        variance = one_step * spread_factor(persistence if predicts else 0.0, n_steps, with_v)
        own = scale[end_points]
        radius = np.minimum(gate_sigmas * np.sqrt(variance * own), reach * np.sqrt(n_steps))
        targets = positions[starts[s]]
        low = min(predicted[:, 0].min(), targets[:, 0].min())
        slab = max(predicted[:, 0].max(), targets[:, 0].max()) - low + 2.0 * float(radius.max()) + 1.0
        first = int(end_frames[e].min())
        moved_sources = predicted.copy()
        moved_sources[:, 0] += (end_frames[e] - first) * slab
        moved_targets = targets.copy()
        moved_targets[:, 0] += (start_frames[s] - n_steps - first) * slab
        rows, cols, _ = gated_links_per_source(moved_sources, moved_targets, radius)
        delta = predicted[rows] - targets[cols]
        if axis_sd is not None:  # (the gate is a ball in µm)
            inside = np.sum((delta * axis_sd) ** 2, axis=1) <= max_displacement_um**2 * n_steps
            rows, cols, delta = rows[inside], cols[inside], delta[inside]
        distance_sq = np.sum(delta * delta, axis=1)
        edge_rows.append(e[rows])
        edge_cols.append(s[cols])
        edge_cost.append(own_scatter_cost(distance_sq, variance[rows], own[rows], ndim) + gap_penalty * (n_steps - 1))
        edge_residual.append(distance_sq / n_steps)
    if not edge_rows:
        return 0
    rows, cols = np.concatenate(edge_rows), np.concatenate(edge_cols)
    cost, residual = np.concatenate(edge_cost), np.concatenate(edge_residual)
    if rows.size == 0:
        return 0
    order = np.lexsort((cols, rows))
    rows, cols, cost, residual = rows[order], cols[order], cost[order], residual[order]
    # Above every candidate's cost, as in frame-to-frame linking.
    alternative = no_link_factor * max(float(cost.max()), gate_sigmas**2 + gap_penalty * max_gap)
    chosen_rows, chosen_cols, index, chosen_confidence = assign(rows, cols, cost, (len(ends), len(starts)),
                                                                alternative, solver)
    joined_from, joined_to = ends[chosen_rows], starts[chosen_cols]
    predecessor[joined_to] = joined_from
    link_cost[joined_to] = residual[index]
    confidence[joined_to] = chosen_confidence
    return len(chosen_rows)
