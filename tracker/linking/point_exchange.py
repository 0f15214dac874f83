"""Point exchanges: two nearby tracks swap single detections where that makes both more likely.

Two tracks ``a -> x -> c`` and ``a' -> y -> c'`` through detections ``x, y`` of
one frame become ``a -> y -> c`` and ``a' -> x -> c'``. The move changes two
frame pairs at once; the smoothing pass, which re-links one pair given the
others, cannot make it. The pairs tried are those the smoothing pass saw
(:func:`exchange_candidates`); :func:`exchange_points` makes the exchanges in
batches of frames 3 apart (:func:`exchange_batches`), whose exchanges do not
interact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..progress import ProgressCallback, Stage
from .motion import predict_positions
from .prediction import Prediction
from .track_state import FrameRanges, TrackState

EXCHANGE_MAX_CONFIDENCE = 0.9
"""Point exchanges (:func:`exchange_points`) are tried for a detection ``x`` whose link from the smoothing
pass has a confidence below this, and for the other's detection ``y`` only where it has a link into or out of it below
this too: an exchange replaces two links of each track, and a sure link is seldom among the wrong ones.
compare_trackers.py, 10k particles, 20 frames, step/NN 0.5, persistence 0.5 (first trials, with every nearby
pair): 93 % of the gain of trying every pair (0.8: 78 %)."""

EXCHANGE_MARGIN = 9.0
"""... and only where the smoothing pass's cost of the link from ``x``'s source to ``y`` exceeds that of its link to
``x`` by less than this (squared standard deviations). compare_trackers.py, step/NN 0.5, persistence 0.5: 94 % of
the gain of every candidate at 73 % of the time (16: 99 %, 4: 75 %)."""


def exchange_candidates(b, n_sources, rows, cols, cost, chosen_rows, chosen_cols, chosen_edges, confidence):
    """Pairs ``x, y`` of the points ``b`` (of one frame) worth an exchange, from the smoothing pass's assignment
    of ``n_sources`` sources to ``b``: candidates ``rows, cols`` (sorted by row, then column) of ``cost``, the
    chosen links, their indices among the candidates and their confidence.

    ``x``'s link is uncertain (:data:`EXCHANGE_MAX_CONFIDENCE`) and its source's candidates reached ``y``, itself
    linked, at a cost within :data:`EXCHANGE_MARGIN` of the chosen link's; ``y``'s source has ``x`` among its
    candidates too (else the exchange would leave the search radius).

    Returns
    -------
    x, y : int arrays
        Point indices (elements of ``b``).
    """
    uncertain = np.zeros(n_sources, dtype=bool)
    uncertain[chosen_rows] = ~(confidence >= EXCHANGE_MAX_CONFIDENCE)
    edges = np.flatnonzero(uncertain[rows])
    chosen_col = np.empty(n_sources, dtype=np.int64)
    chosen_col[chosen_rows] = chosen_cols
    chosen_cost = np.empty(n_sources)
    chosen_cost[chosen_rows] = cost[chosen_edges]
    linked = np.zeros(len(b), dtype=bool)
    linked[chosen_cols] = True
    edge_rows, edge_cols = rows[edges], cols[edges]
    x = chosen_col[edge_rows]
    candidate = (x != edge_cols) & linked[edge_cols] & (cost[edges] - chosen_cost[edge_rows] < EXCHANGE_MARGIN)
    x, y = x[candidate], edge_cols[candidate]
    # The exchange links y's source to x: only where that is a candidate too.
    chosen_row = np.empty(len(b), dtype=np.int64)
    chosen_row[chosen_cols] = chosen_rows
    key = rows * len(b) + cols  # (sorted: edges come by row, then column)
    wanted = chosen_row[y] * len(b) + x
    found = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
    x, y = x[key[found] == wanted], y[key[found] == wanted]
    return b[x], b[y]


def exchange_batches(frames: FrameRanges) -> list[list[int]]:
    """The frames where exchanges are tried, those with both neighbours, in three batches of frames 3 apart: an
    exchange reads and changes links up to two frames on, so those of one batch do not interact."""
    values = frames.values
    inner = [k for k in range(1, frames.n_pairs) if values[k + 1] == values[k] + 1 == values[k - 1] + 2]
    return [[int(values[k]) for k in inner if values[k] % 3 == offset] for offset in range(3)]


def exchange_pass(state: TrackState, prediction: Prediction, frames: FrameRanges,
                  candidates: dict[int, tuple[np.ndarray, np.ndarray]], progress: ProgressCallback | None = None) -> int:
    """Make the point exchanges of ``candidates`` (by frame, from the smoothing pass) in the three batches of
    :func:`exchange_batches`, reporting ``progress(Stage.EXCHANGE, ...)``; the number made."""
    exchanges = 0
    for done, batch in enumerate(exchange_batches(frames), 1):
        if batch:
            exchanges += exchange_points(state, prediction, candidates, batch)
        if progress is not None:
            progress(Stage.EXCHANGE, done, 3)
    return exchanges


def exchange_points(state: TrackState, prediction: Prediction, candidates: dict[int, tuple[np.ndarray, np.ndarray]],
                    frame_numbers: list[int]) -> int:
    """Exchange single detections between tracks where that makes both tracks more likely, in ``state``.

    ``frame_numbers`` are frames at least 3 apart, each with the frames before and after it; ``candidates``
    holds the pairs ``x, y`` to try by frame (from :func:`exchange_candidates`; those of ``frame_numbers`` are
    taken out). ``state.successor`` must be kept (:meth:`TrackState.start_successors`).

    An exchange is made when the summed costs of the links into ``x, y``, into ``c, c'`` and into the points
    after ``c, c'`` (each the squared distance from its prediction over the track's expected scatter, as in
    the forward pass) fall (compare_trackers.py, 10k particles, persistence 0.5: link F1 +0.0008 to +0.003 at
    step/NN 0.4 to 0.6; persistence 0.9: +0.0002 to +0.0004). Exchanges are chosen greedily by gain, each
    detection in at most one; the new links' confidence is the exchange's share of the likelihood against the
    links it replaced. No exchange puts a link outside its search radius. The tracks' own scatter past an
    exchange keeps what it accumulated through the old detection.

    Returns
    -------
    int
        Number of exchanges made.
    """
    frames, predecessor, successor, confidence = state.frames, state.predecessor, state.successor, state.confidence
    found = [candidates.pop(frame, (np.empty(0, np.int64),) * 2) for frame in frame_numbers]
    if not found:
        return 0
    x = np.concatenate([pair[0] for pair in found])
    y = np.concatenate([pair[1] for pair in found])

    def eligible(point):
        """Whether the track through ``point`` runs through the frames before and after it, with a link into or
        out of it below EXCHANGE_MAX_CONFIDENCE."""
        before, after = predecessor[point], successor[point]
        point_frame = frames[point]
        through = (before >= 0) & (after >= 0)
        through &= frames[np.maximum(before, 0)] == point_frame - 1
        through &= frames[np.maximum(after, 0)] == point_frame + 1
        return through & (~(confidence[point] >= EXCHANGE_MAX_CONFIDENCE)
                          | ~(confidence[np.maximum(after, 0)] >= EXCHANGE_MAX_CONFIDENCE))

    # (A pair may come twice, as (x, y) and (y, x): the greedy choice below takes it once.)
    both = eligible(x) & eligible(y)
    x, y = x[both], y[both]
    if len(x) == 0:
        return 0
    residual_variance = prediction.residual_variance()
    track_x = ThroughTrack.of(state, prediction, x, residual_variance)
    track_y = ThroughTrack.of(state, prediction, y, residual_variance)
    every = slice(None)  # (all of them, without copies)
    gain = (track_x.cost + track_y.cost
            - track_x.through(every, track_y.position) - track_y.through(every, track_x.position))
    better = np.flatnonzero(gain > 0.0)
    chosen, taken = [], set()
    for pair in better[np.argsort(-gain[better], kind="stable")].tolist():
        if x[pair] not in taken and y[pair] not in taken:
            taken.update((x[pair], y[pair]))
            chosen.append(pair)
    if not chosen:
        return 0
    chosen = np.array(chosen, dtype=np.int64)
    # Both tracks at once: track ``x``'s ends take detection ``y`` and the other way round.
    middle = np.concatenate([y[chosen], x[chosen]])
    start, end, after_end, has_after, variance = (
        np.concatenate([getattr(track_x, name)[chosen], getattr(track_y, name)[chosen]])
        for name in ("start", "end", "after_end", "has_after", "variance"))
    parts_x = track_x.parts(chosen, track_y.position[chosen])
    parts_y = track_y.parts(chosen, track_x.position[chosen])
    into_middle, into_end, into_after = (np.concatenate(pair) for pair in zip(parts_x, parts_y))
    share = np.tile(1.0 / (1.0 + np.exp(-0.5 * np.minimum(gain[chosen], 120.0))), 2)
    state.record_links(start, middle, into_middle, variance, share)
    state.record_links(middle, end, into_end, np.full(len(end), residual_variance), share)
    successor[start], successor[middle] = middle, end
    state.link_cost[after_end[has_after]] = into_after[has_after]
    return len(chosen)


@dataclass
class ThroughTrack:
    """Tracks through points of one frame each, as :func:`exchange_points` costs them: the track's points before
    (``start``), after (``end``) and two after (``after_end``, where ``has_after``), positions (µm, ``(n, 3)``),
    where the track predicts its point (``predicted``), the class variance of the link into it (``variance``,
    µm²), the residual variance and own scatter, the search radii (µm) of the link into the point and of the two
    after it (``radius_in``, ``radius_on``), and ``cost``, the cost of the track through its own point."""

    start: np.ndarray
    end: np.ndarray
    after_end: np.ndarray
    has_after: np.ndarray
    position: np.ndarray
    start_um: np.ndarray
    end_um: np.ndarray
    after_um: np.ndarray
    predicted: np.ndarray
    variance: np.ndarray
    residual_variance: float
    scale: np.ndarray
    persistence: float
    radius_in: np.ndarray
    radius_on: np.ndarray
    cost: np.ndarray | None = None
    axis_sd: np.ndarray | None = None  # (whitened positions: Prediction.axis_sd, and the gate in µm)
    gate_um: float | None = None

    @classmethod
    def of(cls, state: TrackState, prediction: Prediction, points: np.ndarray,
           residual_variance: float) -> ThroughTrack:
        """The tracks of ``state`` through ``points``."""
        positions = state.positions
        start, end = state.predecessor[points], state.successor[points]
        after_end = state.successor[end]
        has_after = (after_end >= 0) & (state.frames[np.maximum(after_end, 0)] == state.frames[points] + 2)
        has_v = state.has_velocity[start]
        p = prediction.model.current_persistence()
        start_um = np.take(positions, start, axis=0)
        variance, scale = prediction.class_variance(has_v), prediction.scale(state, start)
        track = cls(start, end, after_end, has_after, np.take(positions, points, axis=0), start_um,
                    np.take(positions, end, axis=0), np.take(positions, np.maximum(after_end, 0), axis=0),
                    predict_positions(start_um, state.velocity[start], has_v, p), variance, residual_variance,
                    scale, p, prediction.radius(variance, scale),
                    prediction.radius(np.full(len(points), residual_variance), scale),
                    axis_sd=prediction.axis_sd, gate_um=prediction.gate_um)
        track.cost = track.through(slice(None), track.position, gated=False)
        return track

    def parts(self, index, middle_um, axis_sd=None):
        """Squared distances (µm²) of ``middle_um``, of the track's next point and of the one after (0 where
        none) from their predictions, for tracks ``index`` (indices or a slice) passing through ``middle_um``;
        each axis multiplied by ``axis_sd`` first where given (whitened positions back in µm)."""
        p = self.persistence
        start_um, end_um = self.start_um[index], self.end_um[index]
        vectors = (middle_um - self.predicted[index], end_um - middle_um - p * (middle_um - start_um),
                   self.after_um[index] - end_um - p * (end_um - middle_um))
        if axis_sd is not None:
            vectors = tuple(vector * axis_sd for vector in vectors)
        into_middle, into_end, into_after = (_squared_norm(vector) for vector in vectors)
        return into_middle, into_end, np.where(self.has_after[index], into_after, 0.0)

    def through(self, index, middle_um, gated: bool = True):
        """Cost (squared standard deviations) of tracks ``index`` passing through ``middle_um`` (µm); with
        ``gated``, infinite where a link would leave its search radius (no link of the linker does)."""
        into_middle, into_end, into_after = self.parts(index, middle_um)
        later = (into_end + into_after) / self.residual_variance
        cost = (into_middle / self.variance[index] + later) / self.scale[index]
        if gated:
            radius_on_sq = self.radius_on[index] ** 2
            inside = (into_middle <= self.radius_in[index] ** 2) & (into_end <= radius_on_sq)
            inside &= into_after <= radius_on_sq
            if self.axis_sd is not None:  # (and within the gate in µm)
                inside &= np.all(np.stack(self.parts(index, middle_um, self.axis_sd)) <= self.gate_um**2, axis=0)
            cost = np.where(inside, cost, np.inf)
        return cost


def _squared_norm(vectors: np.ndarray) -> np.ndarray:
    """Squared length of each row of ``(n, 3)`` ``vectors``."""
    return np.einsum("ij,ij->i", vectors, vectors)
