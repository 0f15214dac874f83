"""The gate (largest displacement between frames) estimated from the detections: :func:`estimate_gate`.

Two looks at the data, both against the same null, "the next frame's points placed independently of this
frame's":

1. **Nearest neighbours between frames.** For each point of frame ``t``, the distance ``d`` to the nearest point
   of frame ``t + 1``. Were the frames independent, ``d`` would follow the null distribution ``S₀(r) = P(d > r)``,
   measured on the same points with frame ``t + 1`` shifted along its longest axis by a third and two thirds of
   the field, wrapping around (a toroidal shift, Lotwick & Silverman 1982: density, clustering and edges kept,
   partners sent far away). A fraction ``π`` of the points have a partner displaced by a step with distribution
   ``F``; independence gives ``P(d > r) = (1 - π F(r)) S₀(r)``, so ``π F(r) = 1 - S(r) / S₀(r)`` (the excess of
   short distances over chance), which levels off at ``π`` beyond the steps. Its plateau gives ``π`` and, doubled
   where 99 % of it is reached, a generous provisional gate.
2. **A first linking pass** within the provisional gate: plain frame-to-frame assignment on squared
   displacements (:func:`tracker.linking.frame_pair.link_frame_pair`), one-to-one, so that a step longer than a
   neighbour's distance is still seen. Its false links (a point without a partner linked to a stray point;
   counted as the links beyond the ``π n`` partnered ones, or as those in the gate's outer quarter scaled up,
   whichever is fewer) have lengths that follow the null thinned to the points without a partner,
   ``1 - S₀(r)^(1-π)`` (a Poisson field thinned by ``1 - π``), and are subtracted from the link lengths'
   distribution. What remains are the true steps (localisation noise included). The gate is where they become
   rarer than false links (the Bayes boundary between the two), but at least their 99th percentile and at most
   :data:`GATE_MARGIN` times it.

The gate is bounded below by :data:`MIN_GATE_NN` same-frame nearest-neighbour distances (and by one voxel, up to
half the spacing, where the table has voxel columns), above by :data:`MAX_GATE_NN` of them (beyond that linking is
ambiguous whatever the gate) and by the memory its candidate links need (:func:`tracker.validation.gate_candidates`).
With too few points for that (fewer than :data:`MIN_LINKS` links: one particle, a few frames) it falls back to the
median distance from a point to the next frame's nearest one, taken as the median of Gaussian steps (a χ
distribution in 1-3 dimensions), whose :data:`GATE_QUANTILE` times :data:`GATE_MARGIN` is the gate (within the
same bounds); to :data:`FALLBACK_GATE_UM` only where no frame has a point followed by one. Everything is
deterministic: no random numbers, a fixed choice of frame pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.spatial import cKDTree

GATE_QUANTILE = 0.99
"""Fraction of the true steps (localisation noise included) the gate's base covers."""

GATE_MARGIN = 1.2
"""The gate over the :data:`GATE_QUANTILE` of the steps (room for a step longer than any seen and for directed
runs). Set on ``benchmarks/gate_bench.py``: on the hard cells (noisy detections, 10 false per frame) the best gate
lies between 1.0 and 1.3 times the observed 99th percentile of the steps; on exact detections anything from 1.1
up is as good."""

PROVISIONAL_FACTOR = 2.0
"""The first linking pass's gate over the 99th percentile of the steps seen by the nearest-neighbour excess."""

MIN_GATE_NN = 0.1
"""Lower bound of the gate, in median same-frame nearest-neighbour distances (a gate that small can never link
two particles wrongly, and static, exactly localised points still link)."""

MAX_GATE_NN = 2.0
"""Upper bound of the gate, in median same-frame nearest-neighbour distances: steps beyond twice the spacing
cannot be told from neighbours (the switching family of :mod:`tracker.scenarios` needs 1.5)."""

MIN_LINKS = 30
"""Fewest links of the first pass from which the gate is estimated; below it, the gate comes from the median
step (:func:`_few_steps_gate`)."""

FALLBACK_GATE_UM = 1.0
"""The gate (µm) where no frame has a point followed by one in the next frame (no step at all to go by): steps of
a few hundred nm per frame, the scale of vesicles and receptors imaged every 0.1-1 s (``sample_data/``)."""

MAX_FRAME_PAIRS = 40
"""Frame pairs the estimate looks at (evenly spread over the movie): enough for thousands of steps."""

MAX_POINTS = 200_000
"""Most points in the frame pairs looked at (fewer pairs are used beyond it): time and memory stay bounded."""

_NULL_SHIFTS = (1 / 3, 2 / 3)
"""Toroidal shifts of the next frame along its longest axis, as fractions of the field (the null)."""

MISSED_STEP_COST = 1.0
"""What a true step left outside the gate costs over what a false candidate inside it costs: the gate ends where
true steps are this many times rarer than false links. 1 (the Bayes boundary): 2 put the gates of the hard cells of
``benchmarks/gate_bench.py`` (seed 1: 10 false detections per frame) 25-50 % past the best gate."""

_OUTER = 0.75
"""The outer part of the first pass's gate, ``[_OUTER × gate, gate]``, where links are counted as false."""

_BINS = 40
"""Bins of the first pass's gate in which true steps and false links are counted (:func:`_true_steps`)."""

Source = Literal["given", "estimated", "fallback"]


@dataclass(frozen=True)
class GateEstimate:
    """The gate used by the linker, and how it was obtained; ``str()`` gives "gate 1.42 µm (estimated)".

    Attributes
    ----------
    value_um : float
        The gate (µm).
    source : {"given", "estimated", "fallback"}
        Given by the user, estimated from the detections, or, with too few points, from their median step
        (:data:`FALLBACK_GATE_UM` with none).
    step_um : float or None
        The :data:`GATE_QUANTILE` of the true steps between frames (µm), net of false links, or where true steps
        become rarer than false links if that comes first (with many false detections the tail's estimate is
        uncertain, the crossing is not).
    partnered : float or None
        Fraction of the points with a partner in the next frame (the nearest-neighbour excess's plateau).
    spacing_um : float or None
        Median distance between a point and its nearest neighbour in the same frame (µm).
    n_links : int
        Links of the first pass the estimate rests on.
    bound : str or None
        ``"lower"``, ``"upper"`` or ``"memory"`` where a bound set the value or cut the first linking pass short,
        else None.
    note : str
        Why the fallback was taken (empty otherwise).
    """

    value_um: float
    source: Source
    step_um: float | None = None
    partnered: float | None = None
    spacing_um: float | None = None
    n_links: int = 0
    bound: str | None = None
    note: str = ""

    def __str__(self) -> str:
        detail = {"estimated": f", {self.bound} bound" if self.bound else "",
                  "fallback": f": {self.note}" if self.note else ""}.get(self.source, "")
        return f"gate {self.value_um:.3g} µm ({self.source}{detail})"

    def evidence(self) -> str:
        """What the estimate rests on, in one line (empty for a given gate)."""
        if self.source != "estimated":
            return self.note
        return (f"{100 * GATE_QUANTILE:.0f} % of {self.n_links} steps within {self.step_um:.3g} µm, "
                f"{100 * self.partnered:.0f} % of points with a partner in the next frame, same-frame spacing "
                f"{self.spacing_um:.3g} µm")

    @classmethod
    def given(cls, value_um: float) -> GateEstimate:
        return cls(float(value_um), "given")


@dataclass(frozen=True)
class GateInputs:
    """What :func:`estimate_gate` reads of a whole table besides the points of the frames it looks at
    (:meth:`frames_looked_at`, at most :data:`MAX_FRAME_PAIRS` pairs and :data:`MAX_POINTS` points): each frame's
    point count and each position column's extremes. A few numbers per frame, merged from parts of a table
    (:meth:`merge`, e.g. frames detected on Dask workers), so that the gate of a table that no process holds
    whole is estimated exactly as from the whole table, from a bounded part of it.

    Attributes
    ----------
    frames : (F,) int64 array
        Frame numbers with points, increasing.
    counts : (F,) int64 array
        Points in each.
    extremes : Table
        Two rows, the least and the greatest value of each position column (``z, y, x`` or ``y, x``, µm) and of
        its voxel column (``x_vox``, …) where the table has them; no rows for an empty table.
    """

    frames: np.ndarray
    counts: np.ndarray
    extremes: dict[str, np.ndarray]

    @classmethod
    def of(cls, detections: Mapping[str, np.ndarray]) -> GateInputs:
        """The inputs of a checked table (:func:`tracker.validation.check_detections`), or of a part of one."""
        from ..tables import spatial_axes

        frames, counts = np.unique(np.asarray(detections["frame"], dtype=np.int64), return_counts=True)
        columns = [c for axis in spatial_axes(detections) for c in (axis, f"{axis}_vox") if c in detections]
        values = {c: np.asarray(detections[c], dtype=np.float64) for c in columns}
        extremes = {c: (np.array([v.min(), v.max()]) if len(v) else np.empty(0)) for c, v in values.items()}
        return cls(frames, counts.astype(np.int64), extremes)

    @classmethod
    def merge(cls, parts: Sequence[GateInputs]) -> GateInputs:
        """The inputs of the table made of ``parts`` (a frame may be split between parts); at least one part."""
        frames = np.concatenate([part.frames for part in parts])
        present, index = np.unique(frames, return_inverse=True)
        counts = np.zeros(len(present), dtype=np.int64)
        np.add.at(counts, index, np.concatenate([part.counts for part in parts]))
        columns = {tuple(part.extremes) for part in parts}
        if len(columns) > 1:
            raise ValueError(f"the parts of a table have different position columns: {sorted(columns)}")
        filled = [part.extremes for part in parts if len(part.frames)]
        extremes = ({c: np.array([min(e[c][0] for e in filled), max(e[c][1] for e in filled)]) for c in filled[0]}
                    if filled else dict(parts[0].extremes))
        return cls(present, counts, extremes)

    def frames_looked_at(self) -> np.ndarray:
        """The frame numbers whose points :func:`estimate_gate` looks at (the two frames of each pair chosen)."""
        from .linker import frame_steps  # (the linker imports this module)

        steps = frame_steps(self.frames)
        pairs = _chosen_pairs(steps, self.counts)
        return self.frames[np.isin(steps, [*pairs, *(t + 1 for t in pairs)])]


def estimate_gate(detections: Mapping[str, np.ndarray], *, solver: str = "scipy",
                  memory_budget: int | None = None, whole: GateInputs | None = None) -> GateEstimate:
    """The gate (largest displacement between consecutive frames, µm) from the detections themselves.

    Parameters
    ----------
    detections : Table
        ``frame`` and ``z, y, x`` (or ``y, x``) in µm, checked (:func:`tracker.validation.check_detections`).
        Axes on which every point has the same coordinate are ignored; frame numbers need not be contiguous
        (one stride is one step, :func:`tracker.linking.linker.frame_steps`).
    solver : str
        Assignment solver of the first linking pass.
    memory_budget : int, optional
        Bytes the candidate links may take (default: :func:`tracker.validation.memory_budget`).
    whole : GateInputs, optional
        The inputs of the whole table, where ``detections`` is only a part of it holding (at least) the frames
        :meth:`GateInputs.frames_looked_at`, whole: the estimate is then the whole table's.

    Returns
    -------
    GateEstimate
        ``source="estimated"``, or ``"fallback"`` where the points are too few: the gate of the median step
        (:func:`_few_steps_gate`), or :data:`FALLBACK_GATE_UM` without a step.

    Raises
    ------
    ValueError
        ``detections`` lacks a frame that the estimate looks at (with ``whole``).
    """
    from .linker import frame_steps, motion_space  # (the linker imports this module)
    from ..tables import positions_um

    whole = GateInputs.of(detections) if whole is None else whole
    # The axes along which points move are the whole table's: its extremes join the points for motion_space.
    n_rows = len(detections["frame"])
    positions, _ = motion_space(np.concatenate([positions_um(detections), positions_um(whole.extremes)]))
    positions = positions[:n_rows]
    present = frame_steps(whole.frames)  # (the whole table's frames as steps, and its points in each)
    frame_numbers = np.asarray(detections["frame"], dtype=np.int64)
    slot = np.minimum(np.searchsorted(whole.frames, frame_numbers), max(len(whole.frames) - 1, 0))
    if n_rows and (not len(whole.frames) or not np.array_equal(whole.frames[slot], frame_numbers)):
        raise ValueError("the detections have frames that the whole table's inputs (GateInputs) do not count")
    steps = present[slot] if n_rows else frame_numbers
    pairs = _chosen_pairs(present, whole.counts)
    if not pairs:
        return GateEstimate(FALLBACK_GATE_UM, "fallback", note="no two consecutive frames with points")
    here, counts = np.unique(steps, return_counts=True)
    order = np.argsort(steps, kind="stable")
    starts = np.searchsorted(steps[order], here)
    ends = starts + counts
    where = dict(zip(here.tolist(), zip(starts.tolist(), ends.tolist())))
    whole_count = dict(zip(present.tolist(), whole.counts.tolist()))
    looked_at = sorted({*pairs, *(t + 1 for t in pairs)})
    if any(where.get(t, (0, 0))[1] - where.get(t, (0, 0))[0] != whole_count[t] for t in looked_at):
        raise ValueError("the detections lack points of a frame the gate estimate looks at "
                         "(GateInputs.frames_looked_at)")
    frame = {t: positions[order[slice(*where[t])]] for t in looked_at}
    spacing = _median_spacing([frame[t + 1] for t in pairs])
    source_points = sum(len(frame[t]) for t in pairs)
    near, null = _cross_frame_distances(frame, pairs)
    if spacing is None or len(near) < MIN_LINKS:
        return _few_steps_gate(near, spacing, positions.shape[1],
                               f"{source_points} points in {len(pairs)} frame pair(s)")
    partnered, provisional = _nearest_neighbour_excess(near, null)
    lower = max(MIN_GATE_NN * spacing, min(_voxel_scale(whole.extremes), 0.5 * spacing))
    if np.quantile(near, GATE_QUANTILE) == 0.0:  # (still, exactly localised points: no step to measure)
        return GateEstimate(float(lower), "estimated", step_um=0.0, partnered=float(partnered),
                            spacing_um=float(spacing), n_links=len(near), bound="lower")
    upper = MAX_GATE_NN * spacing
    memory = _largest_fitting_gate(whole, upper, memory_budget)
    ceiling, ceiling_name = (memory, "memory") if memory < upper else (upper, "upper")
    provisional = max(provisional, MIN_GATE_NN * spacing)
    truncated = provisional > ceiling  # (the first pass cannot look as far as the steps may reach)
    provisional = min(provisional, ceiling)
    lengths = _first_pass_lengths(frame, pairs, provisional, solver)
    if len(lengths) < MIN_LINKS:
        return _few_steps_gate(near, spacing, positions.shape[1],
                               f"{len(lengths)} links between {source_points} points")
    step, crossing = _true_steps(lengths, null, partnered, provisional)
    if PROVISIONAL_FACTOR * min(crossing, GATE_MARGIN * step) < provisional:  # (tighter: fewer false links)
        provisional = PROVISIONAL_FACTOR * min(crossing, GATE_MARGIN * step)
        lengths = _first_pass_lengths(frame, pairs, provisional, solver)
        step, crossing = _true_steps(lengths, null, partnered, provisional)
    step = min(step, crossing)  # (past the crossing, true steps cannot be told from false links)
    value, bound = min(crossing, GATE_MARGIN * step), None
    if value < lower:
        value, bound = lower, "lower"
    if value > ceiling or truncated:
        value, bound = min(value, ceiling), ceiling_name
    return GateEstimate(float(value), "estimated", step_um=float(step), partnered=float(partnered),
                        spacing_um=float(spacing), n_links=len(lengths), bound=bound)


def _few_steps_gate(near: np.ndarray, spacing: float | None, dims: int, what: str) -> GateEstimate:
    """The gate from the median distance to the next frame's nearest point, when too few for the full estimate.

    The steps are taken as Gaussian (their lengths χ-distributed with ``dims`` degrees of freedom, as for
    Brownian motion), so the :data:`GATE_QUANTILE` of the lengths is the median times the χ quantiles' ratio
    (2.19 in 3D, 2.57 in 2D); times :data:`GATE_MARGIN`, as the full estimate. The median keeps the few points
    without a partner (appearing, leaving) from moving it. Bounded by :data:`MIN_GATE_NN` and
    :data:`MAX_GATE_NN` same-frame spacings where a frame has two points. :data:`FALLBACK_GATE_UM` without a
    positive distance.
    """
    from scipy.special import gammaincinv

    median = float(np.median(near)) if len(near) else 0.0
    if not median > 0:
        return GateEstimate(FALLBACK_GATE_UM, "fallback", spacing_um=spacing, n_links=len(near),
                            note=f"{what}, no step to estimate from")
    dims = max(int(dims), 1)
    ratio = np.sqrt(gammaincinv(dims / 2, GATE_QUANTILE) / gammaincinv(dims / 2, 0.5))  # (χ quantiles)
    value = GATE_MARGIN * ratio * median
    if spacing is not None:
        value = min(max(value, MIN_GATE_NN * spacing), MAX_GATE_NN * spacing)
    return GateEstimate(float(value), "fallback", step_um=float(ratio * median), spacing_um=spacing,
                        n_links=len(near), note=f"{what}, too few for the full estimate: from their median step "
                                                f"{median:.3g} µm")


def _frame_pairs(steps: np.ndarray) -> list[int]:
    """The steps ``t`` with points at ``t`` and ``t + 1``."""
    present = np.unique(steps)
    return [int(t) for t in present[:-1][np.diff(present) == 1]]


def _chosen_pairs(present: np.ndarray, counts: np.ndarray) -> list[int]:
    """The frame pairs (steps ``t`` with points at ``t`` and ``t + 1``) the estimate looks at, from the steps with
    points and their points (:func:`_spread`)."""
    pairs = _frame_pairs(present)
    count = dict(zip(present.tolist(), counts.tolist()))
    return _spread(pairs, [count[t] + count[t + 1] for t in pairs]) if pairs else []


def _spread(pairs: list[int], sizes: list[int]) -> list[int]:
    """At most :data:`MAX_FRAME_PAIRS` pairs, evenly spread, whose points stay under :data:`MAX_POINTS` (at least
    one pair)."""
    count = min(len(pairs), MAX_FRAME_PAIRS)
    while True:
        chosen = np.unique(np.round(np.linspace(0, len(pairs) - 1, count)).astype(int))
        if count == 1 or sum(sizes[k] for k in chosen) <= MAX_POINTS:
            return [pairs[k] for k in chosen]
        count = max(1, count // 2)


def _median_spacing(frames: list[np.ndarray]) -> float | None:
    """Median distance (µm) from a point to its nearest neighbour in the same frame; None with no two points."""
    distances = [cKDTree(points).query(points, k=2)[0][:, 1] for points in frames if len(points) > 1]
    distances = np.concatenate(distances) if distances else np.empty(0)
    distances = distances[np.isfinite(distances)]
    return float(np.median(distances)) if len(distances) and np.median(distances) > 0 else None


def _cross_frame_distances(frame: dict[int, np.ndarray], pairs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Distances (µm) from each point of frame ``t`` to the nearest of frame ``t + 1``, and the same to frame
    ``t + 1`` shifted (toroidally, along its longest axis) by each of :data:`_NULL_SHIFTS` of the field."""
    near, null = [], []
    for t in pairs:
        source, target = frame[t], frame[t + 1]
        if not len(source) or not len(target):
            continue
        near.append(cKDTree(target).query(source)[0])
        low = np.minimum(source.min(0), target.min(0))
        extent = np.maximum(source.max(0), target.max(0)) - low
        axis = int(np.argmax(extent))
        for shift in _NULL_SHIFTS:
            moved = target.copy()
            if extent[axis] > 0:
                moved[:, axis] = low[axis] + np.mod(moved[:, axis] - low[axis] + shift * extent[axis], extent[axis])
            null.append(cKDTree(moved).query(source)[0])
    empty = np.empty(0)
    return (np.concatenate(near) if near else empty), (np.concatenate(null) if null else empty)


def _survival(sorted_values: np.ndarray, r: np.ndarray) -> np.ndarray:
    return 1.0 - np.searchsorted(sorted_values, r, side="right") / max(len(sorted_values), 1)


def _nearest_neighbour_excess(near: np.ndarray, null: np.ndarray) -> tuple[float, float]:
    """The fraction ``π`` of points with a partner in the next frame and the provisional gate (µm).

    ``π F(r) = 1 - S(r) / S₀(r)`` on a grid of the null's quantiles (up to its 98th); ``π`` is its median where
    ``S₀`` is between 0.05 and 0.3 (beyond the steps, before the null's tail gets noisy); the provisional gate is
    :data:`PROVISIONAL_FACTOR` times the distance where the running maximum of the excess reaches 99 % of ``π``.
    """
    near, null = np.sort(near), np.sort(null)
    r = np.quantile(null, np.linspace(0.0, 0.98, 400))
    null_survival = _survival(null, r)
    excess = 1.0 - _survival(near, r) / np.maximum(null_survival, 1e-12)
    plateau = (null_survival >= 0.05) & (null_survival <= 0.3)
    partnered = float(np.median(excess[plateau])) if plateau.any() else float(excess[-1])
    partnered = min(max(partnered, 0.0), 1.0)
    reached = np.maximum.accumulate(excess) >= GATE_QUANTILE * partnered
    step = float(r[int(np.argmax(reached))]) if reached.any() else float(r[-1])
    return partnered, PROVISIONAL_FACTOR * max(step, float(r[-1]) * 1e-3)


def _first_pass_lengths(frame: dict[int, np.ndarray], pairs: list[int], gate: float, solver: str) -> np.ndarray:
    """Lengths (µm) of the links of plain frame-to-frame assignment within ``gate`` (no prediction)."""
    from .frame_pair import link_frame_pair

    lengths = []
    for t in pairs:
        source, target = frame[t], frame[t + 1]
        if len(source) and len(target):
            _, _, cost = link_frame_pair(source, target, gate, solver=solver)
            lengths.append(np.sqrt(cost))
    return np.concatenate(lengths) if lengths else np.empty(0)


def _true_steps(lengths: np.ndarray, null: np.ndarray, partnered: float, gate: float) -> tuple[float, float]:
    """The :data:`GATE_QUANTILE` of the true steps' lengths (µm), and where true steps become rarer than false
    links (µm; ``inf`` where they never do).

    The link lengths' distribution less the false links'. False links follow the null thinned to the
    unpartnered points (exponent ``1 - π``), scaled to the links in the outer quarter of the gate (:data:`_OUTER`;
    past the true steps, as the gate is twice their 99th percentile). The crossing is the edge of :data:`_BINS`
    bins of ``[0, gate]``, past the true steps' median, where the true steps left out (times
    :data:`MISSED_STEP_COST`) plus the false links let in are fewest: the Bayes decision boundary between the two,
    where true steps become rarer than false links for good.
    """
    lengths, null = np.sort(lengths), np.sort(null)
    r = np.unique(np.concatenate([lengths, [gate]]))
    exponent = max(1.0 - partnered, 1e-3)
    thinned = 1.0 - _survival(null, r) ** exponent
    outer = 1.0 - _survival(null, np.array([_OUTER * gate])) ** exponent
    in_outer = len(lengths) - np.searchsorted(lengths, _OUTER * gate, side="left")
    scale = in_outer / max(float(thinned[-1] - outer[0]), 1e-12)
    true_within = np.maximum.accumulate(np.searchsorted(lengths, r, side="right") - scale * thinned)
    total = true_within[-1]
    if total <= 0:
        return float(lengths[int(GATE_QUANTILE * (len(lengths) - 1))]), np.inf
    quantile = float(r[int(np.argmax(true_within >= GATE_QUANTILE * total))])
    median = float(r[int(np.argmax(true_within >= 0.5 * total))])
    edges = np.linspace(0.0, gate, _BINS + 1)
    false_within = scale * (1.0 - _survival(null, edges) ** exponent)
    true_within_edges = np.searchsorted(lengths, edges, side="right") - false_within
    # The gate's expected cost at each edge past the median: true steps it leaves out, false links it lets in.
    # Its minimum, not the first bin with fewer true steps than false links: with a few hundred links a tail bin
    # is often empty by chance (an outside tester's 15 particles: an empty bin at 1.65 µm cut the gate below the
    # steps' 99th percentile, 1.83 µm, with true steps in the bins after it).
    cost = MISSED_STEP_COST * (true_within_edges[-1] - true_within_edges) + false_within
    past = np.flatnonzero(edges >= median)
    best = int(past[len(past) - 1 - np.argmin(cost[past][::-1])])  # (the widest of equal costs: no false link
    # past the true steps keeps the cost flat to the end, the gate then is the steps' own, as before)
    crossing = float(edges[best]) if best < len(edges) - 1 else np.inf
    return quantile, crossing


def _voxel_scale(detections: Mapping[str, np.ndarray]) -> float:
    """The smallest voxel side (µm) of the axes along which points move, where the table has voxel columns
    (``x`` and ``x_vox``: a detector's output); 0 otherwise. No gate below it (nor below half the spacing): a
    detector localises to a fraction of a voxel, so shorter steps cannot be told from its noise."""
    sides = []
    for axis in ("z", "y", "x"):
        if axis in detections and f"{axis}_vox" in detections:
            um = np.asarray(detections[axis], dtype=np.float64)
            vox = np.asarray(detections[f"{axis}_vox"], dtype=np.float64)
            moving = len(um) > 1 and um.max() != um.min()
            if moving and vox.max() != vox.min():
                sides.append(abs((um.max() - um.min()) / (vox.max() - vox.min())))
    return float(min(sides)) if sides else 0.0


def _largest_fitting_gate(whole: GateInputs, gate: float, budget: int | None) -> float:
    """``gate``, or the largest gate whose candidate links fit the memory budget (halving, then bisecting)."""
    from ..validation import CANDIDATE_BYTES, gate_candidates, memory_budget

    budget = memory_budget() if budget is None else budget

    def fits(value: float) -> bool:
        return gate_candidates(whole.extremes, value, frame_counts=whole.counts)[0] * CANDIDATE_BYTES <= budget

    if fits(gate):
        return gate
    low, high = 0.0, gate
    for _ in range(40):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
