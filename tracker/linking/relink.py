"""Local re-solve of linked tracks with a reviewer's decisions: pinned links forced, forbidden links removed.

A reviewer marks links as *correct* (pinned) or *wrong* (forbidden). :func:`relink` solves again only the
frame pairs around those links, and there only the points near them (the *window*): every link with both ends
in the window is undone, then the window's frame pairs are linked again in order, each one gated assignment
(:func:`tracker.lap.solve_gated`, Jaqaman et al. 2008: every point may stay unlinked) in which

* a pinned link ``i -> j`` is taken as it is (its row and column leave the assignment),
* a forbidden link ``i -> j`` is not a candidate (infinite cost),
* the track ends of the ``max_gap`` frames before compete for the pair's detections as extra rows, as in the
  linker's forward pass (:func:`tracker.linking.frame_pair.track_ends_before`): the gap-closing window.

Costs are the ones the tracks table reports (``link_cost``): the squared distance (µm²) of the target from the
source's predicted position ``x + (p + … + p^n) v`` (:func:`tracker.linking.motion.predict_positions`, ``v`` the
source's last step per frame, ``n`` the frames spanned), divided by ``n``; candidates lie within the gate,
``max_displacement_um`` times ``sqrt(n)``, of the prediction (:func:`tracker.costs.gated_links_per_source`), and
staying unlinked costs ``no_link_factor`` times the largest candidate cost (:func:`tracker.costs.no_link_cost`).
In the assignment a link across ``g`` missing frames also pays, per missing frame, the forward pass's
:data:`~tracker.linking.frame_pair.IN_PAIR_GAP_PENALTY_FACTOR` times ``gap_penalty`` squared SDs of a step
(``variance_um2``), so that a track end does not take a detection from a particle seen in the frame before.
This is the linker's plain (unscaled) cost model with a fixed persistence; the passes that need the whole
movie (smoothing, point exchanges, the motion model's per-track scatter) do not run, which is why the window
is small by default (:data:`DEFAULT_RADIUS_STEPS`). Links outside the window are never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.spatial import cKDTree

from .. import lap
from ..costs import DEFAULT_NO_LINK_FACTOR, gated_links_per_source, no_link_cost
from ..params import LINKING_DEFAULTS
from ..tables import Table, positions_um, require_columns, stable_argsort
from .confidence import chosen_edge_index, link_confidence
from .frame_pair import IN_PAIR_GAP_PENALTY_FACTOR
from .gap_closing import DEFAULT_GAP_PENALTY, DEFAULT_MAX_GAP
from .linker import frame_steps, motion_space
from .motion import MotionModel, predict_positions
from .track_state import tracks_in_order

DEFAULT_WINDOW = 0
"""Frames re-solved before the first and after the last edited link (0: the edited links' own frame pairs, and
those of the links into and out of their points)."""

DEFAULT_RADIUS_STEPS = 0.5
"""The window reaches this many typical steps (the tracks' root-mean-square step per frame) from an edited
link's points and the points linked to them: the neighbours that may take over one of its detections.
Measured with ``benchmarks/relink_review.py`` (``benchmarks/results/relink_review.md``: a simulated reviewer
rejects, one at a time, the 100 least confident links a ground truth calls wrong; 1,400 particles x 30 frames,
steps of 0.6 and 0.9 µm): the larger the window, the more rejections re-decide good links of neighbours with the
frame-pair model alone (the linker's smoothing and point exchanges do not run) and add wrong links. At 0.5 steps
96 and 94 of the 100 rejections left fewer wrong links and 0 and 1 left more (link F1 +0.0022, +0.0019); at
1.7 and 1.1 steps (1 µm) 78 and 60 left fewer, 10 and 21 more; two frames either side and three gates of
reach (the first default) added more wrong links than they removed (55 and 67 rejections against 36 and 20)
and lowered the link F1 (0.9842 -> 0.9824, 0.9447 -> 0.9350)."""

def relink(
    tracks: Mapping[str, np.ndarray],
    detections: Mapping[str, np.ndarray] | None = None,
    *,
    pinned: Sequence[tuple[int, int]] | np.ndarray = (),
    forbidden: Sequence[tuple[int, int]] | np.ndarray = (),
    around: Sequence[tuple[int, int]] | np.ndarray | None = None,
    max_displacement_um: float | None = LINKING_DEFAULTS.max_displacement_um,
    persistence: float | None = LINKING_DEFAULTS.persistence,
    max_gap: int = DEFAULT_MAX_GAP,
    gap_penalty: float = DEFAULT_GAP_PENALTY,
    no_link_factor: float = DEFAULT_NO_LINK_FACTOR,
    variance_um2: float | None = None,
    window: int = DEFAULT_WINDOW,
    radius_um: float | None = None,
    solver: str = LINKING_DEFAULTS.solver,
) -> Table:
    """Link the tracks again around the reviewer's decisions.

    Parameters
    ----------
    tracks : Table
        ``track_id``, ``frame`` and ``z, y, x`` (µm; ``y, x`` in 2D), as :func:`link_detections` returns them;
        other columns are carried over.
    detections : Table, optional
        The detections the tracks were linked from, when some are not in ``tracks`` (deleted in review): those
        inside the window join the re-solve as unlinked points and are appended to the result. Matched to the
        tracks' points by frame and exact position.
    pinned, forbidden : (k, 2) int arrays or sequences of pairs
        Links ``(source row, target row)``, rows being positions (0-based) in ``tracks`` (then the appended
        detections). A pinned link is kept whatever it costs and however many frames it spans (its target in a
        later frame than its source); no two pins may share a source or a target. A forbidden link is never made.
    around : (k, 2) int array, optional
        The links (as above) the window is built around; default: every pinned and forbidden one. Pinned and
        forbidden links elsewhere then constrain the re-solve where the window takes in both their ends (a
        review's earlier decisions: outside the window no link changes anyway).
    max_displacement_um : float, optional
        The gate (µm per frame); None: the longest one-frame step of the tracks.
    persistence : float in [0, 1], optional
        ``p`` of the prediction; None: estimated from the tracks' steps (:class:`~tracker.linking.motion.
        MotionModel`, 0 with fewer than 50 pairs of successive steps).
    max_gap : int
        Track ends up to this many missing frames back compete in each frame pair.
    gap_penalty : float
        Price of a missing frame in a link across a gap (squared SDs of a step, as in the linker).
    no_link_factor : float
        "No link" cost as a multiple of the pair's largest candidate cost.
    variance_um2 : float, optional
        Per-axis variance of a step around its prediction (µm²), the unit of ``gap_penalty`` and of the
        confidences; None: estimated from the tracks' steps (the residual variance of the motion model).
    window : int
        Frames re-solved before the first and after the last edited link (:data:`DEFAULT_WINDOW`).
    radius_um : float, optional
        The window's reach around the edited links' points (µm); default :data:`DEFAULT_RADIUS_STEPS` typical
        steps of the tracks.
    solver : str
        Assignment solver (:func:`tracker.lap.available_solvers`; "auto": the GPU for large pairs when present).

    Returns
    -------
    Table
        ``tracks`` (rows in the same order, then the appended detections) with ``track_id``, ``link_cost`` (µm²)
        and ``link_confidence`` updated in the window (1 on a pinned link). A track keeps its id when its first
        point does; a new piece of a track gets a new id above the largest.
    """
    require_columns(tracks, ("track_id", "frame"), "tracks")
    table = _with_detections({name: np.asarray(column) for name, column in tracks.items()}, detections)
    n = len(table["frame"])
    pinned, forbidden = _pairs(pinned, n, "pinned"), _pairs(forbidden, n, "forbidden")
    around = np.concatenate([pinned, forbidden]) if around is None else _pairs(around, n, "around")
    if not len(around):
        return table
    if window < 0 or max_gap < 0:
        raise ValueError("window and max_gap must be at least 0")
    order = stable_argsort(np.asarray(table["frame"], dtype=np.int64))  # (internal order: by frame)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    problem = _Problem.of(table, order, max_displacement_um, persistence, variance_um2)
    problem.gap_price = IN_PAIR_GAP_PENALTY_FACTOR * float(gap_penalty) * problem.variance
    problem.solve_window(rank[pinned], rank[forbidden], rank[around], max_gap=max_gap, no_link_factor=no_link_factor,
                         window=window, radius_um=radius_um, solver=solver)
    return problem.result(table, order)


def track_links(tracks: Mapping[str, np.ndarray], track_id: int) -> np.ndarray:
    """The links ``(source row, target row)`` of one track, ``(k, 2)``: pin them all to pin the track."""
    ids, frames = np.asarray(tracks["track_id"]), np.asarray(tracks["frame"])
    rows = np.flatnonzero(ids == track_id)
    rows = rows[np.argsort(frames[rows], kind="stable")]
    return np.stack([rows[:-1], rows[1:]], axis=1).astype(np.int64)


def predecessors(track_id: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Index of the previous point of the same track (-1 at a start), for points in any order; a negative
    ``track_id`` is a point of no track."""
    by_track = np.lexsort((frames, track_id))
    by_track = by_track[track_id[by_track] >= 0]
    same = track_id[by_track][1:] == track_id[by_track][:-1]
    if np.any(same & (frames[by_track][1:] == frames[by_track][:-1])):
        raise ValueError("a track has two points in one frame")
    predecessor = np.full(len(track_id), -1, dtype=np.int64)
    predecessor[by_track[1:][same]] = by_track[:-1][same]
    return predecessor


class _Problem:
    """The tracks as per-point arrays ordered by frame: positions (µm, ``(n, 3)``), steps, links."""

    def __init__(self, positions, steps, ndim, predecessor, link_cost, confidence, gate, persistence, variance,
                 step_rms):
        self.positions, self.steps, self.ndim = positions, steps, ndim
        self.predecessor, self.link_cost, self.confidence = predecessor, link_cost, confidence
        self.has_successor = np.zeros(len(steps), dtype=bool)
        self.has_successor[predecessor[predecessor >= 0]] = True
        self.gate, self.persistence, self.variance = gate, persistence, variance
        self.step_rms = step_rms  # (µm: the tracks' root-mean-square step per frame)
        self.gap_price = 0.0  # (µm² per missing frame in the assignment's costs)

    @classmethod
    def of(cls, table: Table, order: np.ndarray, max_displacement_um: float | None,
           persistence: float | None, variance_um2: float | None = None) -> _Problem:
        positions, ndim = motion_space(np.take(positions_um(table), order, axis=0))
        steps = frame_steps(np.asarray(table["frame"], dtype=np.int64)[order])
        track_id = np.asarray(table["track_id"], dtype=np.int64)[order]
        predecessor = predecessors(track_id, steps)
        linked = np.flatnonzero(predecessor >= 0)
        spans = steps[linked] - steps[predecessor[linked]]
        step = (positions[linked] - positions[predecessor[linked]]) / spans[:, None]
        one = spans == 1
        if max_displacement_um is None:
            if not np.any(one):
                raise ValueError("no one-frame links to take the gate from: give max_displacement_um")
            max_displacement_um = float(np.sqrt(np.max(np.sum(step[one] ** 2, axis=1))))
        if not (max_displacement_um > 0 and np.isfinite(max_displacement_um)):
            raise ValueError(f"max_displacement_um must be a positive number of µm, got {max_displacement_um}")
        model = MotionModel(persistence=persistence, ndim=ndim)
        previous = np.full(len(steps), -1, dtype=np.int64)  # (each link's previous one-frame step, where known)
        previous[linked[one]] = np.arange(len(linked))[one]
        before = previous[predecessor[linked[one]]]
        model.update(step[one], step[np.maximum(before, 0)], before >= 0)
        p = model.current_persistence()
        # Costs in squared SDs for the confidences: the residual (or step) variance of the tracks' own motion.
        variance = variance_um2 if variance_um2 is not None else (
            model.residual_variance() if p > 0 else model.step_variance())
        if not variance or not np.isfinite(variance) or variance <= 0:
            variance = (max_displacement_um / 3.0) ** 2 / ndim
        step_variance = model.step_variance()
        step_rms = float(np.sqrt(ndim * step_variance)) if step_variance else max_displacement_um / 3.0
        carried = (lambda name: np.asarray(table[name], dtype=np.float64)[order] if name in table
                   else np.full(len(steps), np.nan))
        return cls(positions, steps, ndim, predecessor, carried("link_cost").copy(),
                   carried("link_confidence").copy(), float(max_displacement_um), p, float(variance), step_rms)

    def successors(self) -> np.ndarray:
        """The point each point links to (-1: none)."""
        successor = np.full(len(self.steps), -1, dtype=np.int64)
        linked = np.flatnonzero(self.predecessor >= 0)
        successor[self.predecessor[linked]] = linked
        return successor

    def window_points(self, edges: np.ndarray, window: int, radius_um: float) -> tuple[np.ndarray, int, int]:
        """The points of the window around the links ``edges`` (a boolean mask) and its first and last step."""
        ends = edges.ravel()
        successor = self.successors()
        around = np.concatenate([ends, self.predecessor[ends], successor[ends]])
        ends = np.unique(around[around >= 0])  # (the edited points and the points they are linked to now)
        first = int(self.steps[ends].min()) - window
        last = int(self.steps[ends].max()) + window
        lo, hi = np.searchsorted(self.steps, [first, last + 1])
        near = np.zeros(len(self.steps), dtype=bool)
        found = cKDTree(self.positions[ends]).query(self.positions[lo:hi], distance_upper_bound=radius_um)[0]
        near[lo:hi] = np.isfinite(found)
        near[ends] = True
        return near, first, last

    def solve_window(self, pinned: np.ndarray, forbidden: np.ndarray, around: np.ndarray, *, max_gap: int,
                     no_link_factor: float,
                     window: int, radius_um: float | None, solver: str) -> None:
        """Undo the links inside the window and link its frame pairs again with the pins and forbids."""
        steps = self.steps
        spans = steps[pinned[:, 1]] - steps[pinned[:, 0]] if len(pinned) else np.zeros(0, dtype=np.int64)
        if np.any(spans < 1):
            raise ValueError("a pinned link must join a point to one in a later frame")
        if len(np.unique(pinned[:, 0])) < len(pinned) or len(np.unique(pinned[:, 1])) < len(pinned):
            raise ValueError("two pinned links share a source or a target")
        key = self._keys(forbidden)
        if len(pinned) and np.any(np.isin(self._keys(pinned), key)):
            raise ValueError("a link is both pinned and forbidden")
        radius = DEFAULT_RADIUS_STEPS * self.step_rms if radius_um is None else float(radius_um)
        inside, first, last = self.window_points(around, window, radius)
        pinned = pinned[inside[pinned[:, 0]] & inside[pinned[:, 1]]]
        forbidden = forbidden[inside[forbidden[:, 0]] & inside[forbidden[:, 1]]]
        key = self._keys(forbidden)
        undone = np.flatnonzero(inside & (self.predecessor >= 0))
        undone = undone[inside[self.predecessor[undone]]]
        # (a pin's ends are freed even where the link into its target, or out of its source, reaches outside)
        also = np.concatenate([pinned[:, 1], self.successors()[pinned[:, 0]]])
        undone = np.union1d(undone, also[(also >= 0)])
        undone = undone[self.predecessor[undone] >= 0]
        self.has_successor[self.predecessor[undone]] = False
        self.predecessor[undone] = -1
        self.link_cost[undone] = np.nan
        self.confidence[undone] = np.nan
        pin_step = np.full(len(steps), -1, dtype=np.int64)  # (a pinned source waits for its pin's pair)
        pin_step[pinned[:, 0]] = steps[pinned[:, 1]]
        window_points = np.flatnonzero(inside)
        for step in range(first + 1, last + 1):
            self._link_pair(window_points, step, pinned, pin_step, key, max_gap, no_link_factor, solver)

    def _keys(self, pairs: np.ndarray) -> np.ndarray:
        return pairs[:, 0] * len(self.steps) + pairs[:, 1]

    def _link_pair(self, window_points, step, pinned, pin_step, forbidden_keys, max_gap, no_link_factor, solver):
        """Link the window's free track ends of the ``max_gap + 1`` steps before ``step`` to its free points of
        ``step``: the pins of this pair as they are, the rest by one gated assignment."""
        steps = self.steps[window_points]
        here = pinned[self.steps[pinned[:, 1]] == step] if len(pinned) else pinned
        for source, target in here:
            self._record(np.array([source]), np.array([target]), None, np.array([1.0]))
        cols = window_points[(steps == step)]
        cols = cols[self.predecessor[cols] < 0]
        rows = window_points[(steps < step) & (steps >= step - 1 - max_gap)]
        rows = rows[~self.has_successor[rows] & (pin_step[rows] < 0)]
        if len(rows) == 0 or len(cols) == 0:
            return
        n_steps = step - self.steps[rows]
        source = np.take(self.positions, rows, axis=0)
        velocity, has_velocity = self.velocity(rows)
        predicted = predict_positions(source, velocity, has_velocity, self.persistence, n_steps)
        r, c, distance_sq = gated_links_per_source(predicted, np.take(self.positions, cols, axis=0),
                                                   self.gate * np.sqrt(n_steps))
        if len(forbidden_keys):
            allowed = ~np.isin(rows[r] * len(self.steps) + cols[c], forbidden_keys)
            r, c, distance_sq = r[allowed], c[allowed], distance_sq[allowed]
        if r.size == 0:
            return
        cost = distance_sq / n_steps[r]  # (the table's link_cost)
        price = cost + self.gap_price * (n_steps[r] - 1)  # (the assignment's)
        alternative = no_link_cost(price, self.gate, no_link_factor)
        chosen_r, chosen_c = lap.solve_gated(r, c, price, (len(rows), len(cols)), alternative, solver=solver)
        index = chosen_edge_index(r, c, chosen_r, chosen_c, len(cols))
        unlinked = alternative / self.variance
        confidence = link_confidence(r, c, price / self.variance, np.full(len(rows), unlinked),
                                     np.full(len(cols), unlinked), chosen_r, chosen_c, index)
        self._record(rows[chosen_r], cols[chosen_c], cost[index], confidence)

    def velocity(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each point's last step per frame (µm, ``(k, 3)``) and whether it has one (a predecessor)."""
        before = self.predecessor[points]
        has = before >= 0
        velocity = np.zeros((len(points), 3))
        span = (self.steps[points[has]] - self.steps[before[has]])[:, None]
        velocity[has] = (self.positions[points[has]] - self.positions[before[has]]) / span
        return velocity, has

    def _record(self, sources, targets, cost, confidence) -> None:
        if cost is None:  # (a pin: its cost as the model prices it, however high)
            velocity, has_velocity = self.velocity(sources)
            n_steps = self.steps[targets] - self.steps[sources]
            predicted = predict_positions(self.positions[sources], velocity, has_velocity, self.persistence, n_steps)
            cost = np.sum((self.positions[targets] - predicted) ** 2, axis=1) / n_steps
        self.predecessor[targets] = sources
        self.has_successor[sources] = True
        self.link_cost[targets] = cost
        self.confidence[targets] = confidence

    def result(self, table: Table, order: np.ndarray) -> Table:
        """``table`` with the new ``track_id``, ``link_cost`` and ``link_confidence`` (rows in its order)."""
        old = np.asarray(table["track_id"], dtype=np.int64)[order]
        new_track, _ = tracks_in_order(self.predecessor)
        starts = np.flatnonzero(self.predecessor < 0)  # (in the order of the new ids)
        wanted = old[starts]
        first_use = np.zeros(len(starts), dtype=bool)
        _, first = np.unique(wanted, return_index=True)
        first_use[first] = True
        keep = first_use & (wanted >= 0)
        label = np.where(keep, wanted, -1)
        fresh = np.flatnonzero(~keep)
        label[fresh] = max(int(old.max(initial=-1)), -1) + 1 + np.arange(len(fresh))
        out = dict(table)
        n = len(order)
        for name, values in (("track_id", label[new_track]), ("link_cost", self.link_cost),
                             ("link_confidence", self.confidence)):
            column = np.empty(n, dtype=np.int64 if name == "track_id" else np.float64)
            column[order] = values
            out[name] = column
        return out


def _pairs(pairs, n: int, what: str) -> np.ndarray:
    array = np.asarray(pairs, dtype=np.int64).reshape(-1, 2) if len(pairs) else np.zeros((0, 2), dtype=np.int64)
    if array.size and (array.min() < 0 or array.max() >= n):
        raise ValueError(f"{what} links must be pairs of row numbers from 0 to {n - 1}")
    return array


def _with_detections(table: Table, detections: Mapping[str, np.ndarray] | None) -> Table:
    """``table`` with the rows of ``detections`` it lacks (frame and position) appended, ``track_id`` -1."""
    if detections is None:
        return table
    detections = {name: np.asarray(column) for name, column in detections.items()}
    require_columns(detections, ("frame",), "detections")
    keys = ("frame", *(axis for axis in ("z", "y", "x") if axis in table))
    require_columns(detections, keys, "detections")
    ours = {tuple(row) for row in np.column_stack([np.asarray(table[k], dtype=np.float64) for k in keys])}
    theirs = np.column_stack([np.asarray(detections[k], dtype=np.float64) for k in keys])
    extra = np.array([tuple(row) not in ours for row in theirs], dtype=bool)
    if not np.any(extra):
        return table
    out = {}
    for name, column in table.items():
        if name in detections:
            added = np.asarray(detections[name])[extra].astype(column.dtype, copy=False)
        elif name == "track_id":
            added = np.full(int(extra.sum()), -1, dtype=column.dtype)
        else:
            added = np.full(int(extra.sum()), np.nan if column.dtype.kind == "f" else 0).astype(column.dtype)
        out[name] = np.concatenate([column, added])
    return out
