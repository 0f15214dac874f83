"""Missing detections: how often a point finds no partner in the next frame, the "no link" cost that follows,
and whether gaps are worth closing.

The forward frame-pair pass counts, among the points away from the volume's
edge, those that found no link into the next frame, less those whose next
step the motion model puts outside their search radius (:class:`MissingRate`).
What is left is missing detections (blinking, missed spots). Once they show,
leaving a point unlinked gets cheaper (:meth:`MissingRate.scaled_no_link_cost`), track ends
enter the frame-pair assignments (:data:`IN_PAIR_GAPS_MIN_MISSING`).

Whether gaps are closed afterwards is a test of its own
(:func:`missed_detection_evidence`), made on the tracks the frame-to-frame
passes leave: where a detection went missing, a track ends and another starts
a few frames later close by. Chance makes such (end, start) pairs too, and it
makes time-reversed ones (a start, then an end close by a few frames later,
which no missed detection explains) just as often; so missed detections show
as causal pairs in excess of the reversed ones. Gaps are closed where the excess
outnumbers the reversed pairs (:attr:`MissedDetectionEvidence.worth_closing`).
The test needs no miss rate, works the same in 2D and 3D and counts a missing
frame like any missed detection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import gamma, gammainc, gammaincc

from .motion import DEFAULT_GATE_SIGMAS, MotionModel, chi2_sf, spread_factor, truncated_gaussian_variance
from .gap_closing import bounding_box, edge_clearance, face_axes, gap_closing_gate_sigmas
from .prediction import Prediction
from .track_state import TrackState

SCALED_NO_LINK_COST = 0.75 * DEFAULT_GATE_SIGMAS**2
""""No link" cost (times ``no_link_factor``) of a point when costs are squared standard deviations:
above half the largest candidate cost, so any candidate still beats leaving both ends unlinked, but
below it, so that a particle whose detection is missing does not take a neighbour's far-off one as
readily (compare_trackers.py, blinking cells: 0.75 gained 0.003-0.004 F1 over 1.0; 0.6 lost on the
detected stacks)."""

SCALED_NO_LINK_COST_MISSING = 0.64 * DEFAULT_GATE_SIGMAS**2
"""The same once detections are seen to go missing (the missing rate of :data:`IN_PAIR_GAPS_MIN_MISSING`
or more): a point is then more often without a true partner in the next frame, so leaving it unlinked
is cheaper (compare_trackers.py: +0.0006-0.0022 F1 in the Brownian and persistent blinking cells at
step/NN 0.5; 0.75 everywhere lost the 1k-particle Brownian blinking cell to trackpy, 0.64 everywhere
lost the Brownian step/NN 0.2 tie with LapTrack by a link)."""

IN_PAIR_GAPS_MIN_MISSING = 0.06
"""Track ends enter the frame-to-frame assignments (see :func:`tracker.linking.frame_pair.track_ends_before`)
once at least this fraction of the points away from the volume's edge found no link into the next frame
(blinking or missed detections);
below it (about 0.3 % without blinking in the benchmark, 8-12 % with 10 % blinking) gaps are only closed
afterwards."""


@dataclass
class MissingRate:
    """Counts of the forward pass over the points away from the volume's edge.

    Attributes
    ----------
    edge_clearance : (n,) float array
        Each point's distance to the nearest face of the volume's box (µm,
        :func:`tracker.linking.gap_closing.edge_clearance`).
    inner_rows, inner_linked : int
        Such points in linked frame pairs, and those of them that got a link into the next frame.
    inner_beyond_radius : float
        Expected number of those points whose next step left their search radius.
    """

    edge_clearance: np.ndarray
    inner_rows: int = 0
    inner_linked: int = 0
    inner_beyond_radius: float = 0.0

    def rate(self) -> float:
        """Fraction of the points away from the edge that found no link into the next frame so far, less
        the fraction the search radii alone explain (steps past the radius: see :func:`expected_beyond_radius`).

        What is left is missing detections (blinking), the case gap closing is for: a track broken by
        a step past the gate continues in the very next frame, where no gap-closing link can join it.
        """
        if not self.inner_rows:
            return 0.0
        return max(0.0, 1.0 - (self.inner_linked + self.inner_beyond_radius) / self.inner_rows)

    def detections_go_missing(self) -> bool:
        """Whether the rate reached :data:`IN_PAIR_GAPS_MIN_MISSING` (track ends then compete in the frame pairs)."""
        return self.rate() >= IN_PAIR_GAPS_MIN_MISSING

    def scaled_no_link_cost(self, no_link_factor: float) -> float:
        """"No link" cost of a point in squared standard deviations (lower once detections go missing)."""
        return no_link_factor * (SCALED_NO_LINK_COST_MISSING if self.detections_go_missing() else SCALED_NO_LINK_COST)

    def inner(self, points: np.ndarray, prediction: Prediction) -> np.ndarray:
        """Whether ``points`` lie farther than one typical step (:meth:`Prediction.edge_distance`) from the
        edge of the volume (:func:`tracker.linking.gap_closing.near_edge`'s test)."""
        return ~(self.edge_clearance[points] < prediction.edge_distance())

    def count(self, state: TrackState, prediction: Prediction, a: np.ndarray, linked: np.ndarray,
              model: MotionModel) -> None:
        """Count a frame pair's source points ``a``, of which ``linked`` (bool, per point) got a link, predicted
        with ``model``."""
        inner = self.inner(a, prediction)
        self.inner_rows += int(inner.sum())
        self.inner_linked += int((inner & linked).sum())
        self.inner_beyond_radius += expected_beyond_radius(state, prediction, a[inner], model)


def expected_beyond_radius(state: TrackState, prediction: Prediction, points: np.ndarray,
                           model: MotionModel) -> float:
    """Expected number of ``points`` whose next position lies outside their search radius.

    Gaussian steps, with the variances the model's links (found inside the radii) imply once their
    truncation is undone (:func:`tracker.linking.motion.truncated_gaussian_variance`), once per class.
    """
    if model.step_variance() is None or len(points) == 0:
        return 0.0
    has_velocity = np.array([False, True])
    clipped = prediction.class_variance(has_velocity, model)  # what the radii use
    class_radius = prediction.radius(clipped, np.ones(2))
    variance = truncated_gaussian_variance(prediction.class_variance(has_velocity, model, clip=False), class_radius,
                                           ndim=model.ndim)
    has_v = state.has_velocity[points].astype(int)
    if not prediction.adapts_scatter(state):  # one scatter per class
        return float(np.bincount(has_v, minlength=2) @ chi2_sf(class_radius**2 / variance, model.ndim))
    own = prediction.scale(state, points)
    radius = prediction.radius(clipped[has_v], own)
    return float(chi2_sf(radius**2 / (variance[has_v] * own), model.ndim).sum())


EVIDENCE_P_VALUE = 0.00135
"""Gaps are closed when chance makes as many causal pairs as were found with at most this probability (the
one-sided 3-sigma level of a Gaussian): tracks with no missed detection turn gap closing on by chance
about once in 700 runs."""


@dataclass(frozen=True)
class MissedDetectionEvidence:
    """The outcome of :func:`missed_detection_evidence`.

    Attributes
    ----------
    causal_pairs, reversed_pairs : int
        Nearby (end at ``f``, start at ``f + dt``) and (start at ``f``, end at ``f + dt``) pairs of different
        tracks, ``dt = 2 .. max_gap + 1``, away from the volume's edge, with no detection where the particle
        would have been in between.
    chance_by_density : float
        The causal pairs chance alone would make were ends and starts spread uniformly over the volume
        (the points' box). 0 where the box is of the points' own making (no axis spans
        :func:`tracker.linking.gap_closing.face_axes`): a handful of tracks then closes gaps wherever a causal pair shows,
        as the peers always do.
    """

    causal_pairs: int = 0
    reversed_pairs: int = 0
    chance_by_density: float = 0.0

    @property
    def excess(self) -> int:
        """Causal pairs beyond chance: about the number of gaps that closing can join rightly."""
        return self.causal_pairs - self.reversed_pairs

    @property
    def chance(self) -> float:
        """Expected causal pairs by chance alone: the larger of the two estimates."""
        return max(float(self.reversed_pairs), self.chance_by_density)

    @property
    def p_value(self) -> float:
        """Probability that chance makes at least :attr:`causal_pairs` (Poisson with mean :attr:`chance`)."""
        if self.causal_pairs == 0:
            return 1.0
        return float(gammainc(self.causal_pairs, max(self.chance, 1e-12)))  # (Poisson P(X >= k) = P(Gamma(k) <= mean))

    @property
    def worth_closing(self) -> bool:
        """Whether the causal pairs are more than chance makes (:data:`EVIDENCE_P_VALUE`): detections go missing.

        On a handful of tracks one causal pair where chance expects a hundredth suffices (the peers always
        close gaps); in dense data without misses the causal and reversed counts agree and gap closing stays off.
        """
        return self.p_value <= EVIDENCE_P_VALUE


def missed_detection_evidence(state: TrackState, prediction: Prediction, missing: MissingRate,
                              max_gap: int) -> MissedDetectionEvidence:
    """Count the causal and time-reversed (end, start) pairs of the tracks in ``state`` (see the module docstring).

    A pair is counted when its two points lie within gap closing's own search radius over ``dt`` frames
    (:func:`tracker.linking.gap_closing.gap_closing_gate_sigmas` standard deviations of a step without a known
    velocity, grown as the motion model spreads over ``dt`` frames, :func:`tracker.linking.motion.spread_factor`;
    the model's variance, unclipped, as gap closing takes it): the test asks whether the joins gap closing can
    make are more than chance makes. (With the frame-to-frame radius, 4.5 standard deviations, chance filled a
    ball four times larger in 3D: on a third-party stack of 20 frames, 15 particles and one dark frame, 15
    causal pairs against 2.8 by chance became 8 against 0.9, p 3e-7 -> 5e-6; on 8 frames 5 against 2.0, p =
    0.05, became 4 against 0.48, p = 0.0015, where :func:`dark_frames` turns gap closing on.) Points within
    reach of the volume's edge over the longest gap (one typical step times ``sqrt(max_gap + 1)``; flat axes
    have no edge) are left out of both counts: there a track that ends most likely left the volume, and one
    that starts entered it, and a particle that leaves and comes back is a new track, not a missed detection.
    """
    n = len(state)
    if n == 0 or max_gap < 1:
        return MissedDetectionEvidence()
    frames = state.frames
    # Away from the edge by the distance a particle covers over the longest gap: nearer, a track that ends
    # may have left the volume and come back as a new track (a re-entry, not a missed detection). Only
    # along axes whose faces are the volume's (face_axes).
    reach = prediction.edge_distance(clip=False) * np.sqrt(max_gap + 1)
    low, high = bounding_box(state.positions)
    wide = face_axes(state.positions, (low, high), reach)
    ends, starts = _ends_and_starts(state)
    ends = ends[~(edge_clearance(state.positions[ends], (low, high), wide) < reach)]
    starts = starts[~(edge_clearance(state.positions[starts], (low, high), wide) < reach)]
    if len(ends) == 0 or len(starts) == 0:
        return MissedDetectionEvidence()
    step_variance = prediction.step_variance(clip=False)
    p = prediction.persistence()
    ndim = prediction.model.ndim
    gate_sigmas = gap_closing_gate_sigmas(ndim)
    extent = (high - low)[high > low]
    volume = float(np.prod(extent[-ndim:])) if len(extent) else 0.0
    ends_per_frame = np.bincount(frames[ends], minlength=int(frames[-1]) + 1)
    starts_per_frame = np.bincount(frames[starts], minlength=int(frames[-1]) + 1)
    causal = reverse = 0
    chance = 0.0
    for dt in range(2, max_gap + 2):
        spread = float(spread_factor(p, np.array([dt]), np.zeros(1, bool))[0])
        radius = min(gate_sigmas * np.sqrt(step_variance * spread), prediction.gate * np.sqrt(dt))
        # A missed detection leaves nothing where the particle was: no detection within two standard
        # deviations of the midpoint in the frames between (a Brownian bridge: half the gap's spread), else
        # the pair is a link taken by another track.
        empty_radius = 2.0 * np.sqrt(step_variance * spread) / 2.0
        causal += _close_pairs(state, ends, starts, dt, radius, empty_radius, high[0] - low[0])
        reverse += _close_pairs(state, starts, ends, dt, radius, empty_radius, high[0] - low[0])
        if volume > 0 and wide.any():  # (a box of the points' own making gives no density)
            ball = np.pi ** (ndim / 2) / gamma(ndim / 2 + 1) * radius**ndim
            chance += float(ends_per_frame[:-dt] @ starts_per_frame[dt:]) * min(ball / volume, 1.0)
    return MissedDetectionEvidence(causal, reverse, chance)


def dark_frames(frames: np.ndarray) -> np.ndarray:
    """The frames inside the movie that hold far fewer points than the frames on either side of them: dark frames
    (shutter, focus or exposure glitches; a frame with no points at all is missing from the table).

    Particles do not leave all at once, so such a drop is missed detections: gap closing is worth it whatever the
    pair counts of :func:`missed_detection_evidence` (which leaves out the tracks near the volume's edge, most of
    a small volume's), and a track that ends just before a dark frame did not leave the volume
    (:func:`tracker.linking.gap_closing.close_gaps`). The test: a frame's count ``c`` below the mean ``m`` of its
    two neighbours' with Poisson probability ``P(X <= c; m)`` at most :data:`EVIDENCE_P_VALUE` divided by the
    number of frames tested (the counts of real data vary less than a Poisson's: the same particles are there from
    frame to frame).

    ``frames``: the points' frame indices, sorted. Returns the dark frames' indices, ascending (int64).
    """
    if len(frames) == 0:
        return np.empty(0, dtype=np.int64)
    first = int(frames[0])
    counts = np.bincount(frames - first)
    if len(counts) < 3:
        return np.empty(0, dtype=np.int64)
    inside = counts[1:-1]
    expected = 0.5 * (counts[:-2] + counts[2:])
    # Poisson P(X <= c; m) = Q(c + 1, m), the regularised upper incomplete gamma (c >= m never gets that low)
    probability = gammaincc(inside + 1.0, np.maximum(expected, 1e-12))
    return (np.flatnonzero(probability <= EVIDENCE_P_VALUE / len(inside)) + first + 1).astype(np.int64)


CUT_OFF_EXCESS = 10.0
"""The adaptive search radius is abandoned (:func:`radius_cuts_steps`) when the steps it cut off outnumber those
the motion model's Gaussian tail predicts (:func:`expected_beyond_radius`) by this factor, an order of magnitude:
the model's tail is then wrong, as when particles switch from diffusion to directed runs (issue 23's switching
family: 549 cut-offs where the tail predicts 0.5; our own persistent cells: 0-30 where it predicts 3-7, the
microtubule family 26 where it predicts 20)."""


def radius_cuts_steps(state: TrackState, prediction: Prediction, missing: MissingRate) -> bool:
    """Whether the forward pass's search radii cut off true steps far more often than the motion model predicts.

    A step cut off by the radius ends a track at ``f`` and starts another at ``f + 1`` close by (within the
    gate); chance makes as many time-reversed pairs (a start at ``f``, an end at ``f + 1``), and the model's own
    tail some more. The excess over both, among points away from the edge, must be significant
    (:data:`EVIDENCE_P_VALUE`) and outnumber the model's expectation of steps beyond the radius
    (:data:`CUT_OFF_EXCESS`).
    """
    n = len(state)
    if n == 0 or not prediction.adaptive_radius:
        return False
    ends, starts = _ends_and_starts(state)
    ends, starts = ends[missing.inner(ends, prediction)], starts[missing.inner(starts, prediction)]
    if len(ends) == 0 or len(starts) == 0:
        return False
    span = float(np.ptp(state.positions[:, 0]))
    # (Within the gate along every axis: steps past the gate are not the radii's doing.)
    cut = _close_pairs(state, ends, starts, 1, prediction.inner_gate(), 0.0, span)
    # Expected without a wrong tail: chance pairs, and the steps the model's own tail puts past the radius.
    expected = _close_pairs(state, starts, ends, 1, prediction.inner_gate(), 0.0, span) + missing.inner_beyond_radius
    significant = cut > 0 and gammainc(cut, max(expected, 1e-12)) <= EVIDENCE_P_VALUE
    return bool(significant and cut - expected > CUT_OFF_EXCESS * missing.inner_beyond_radius)


def _ends_and_starts(state: TrackState) -> tuple[np.ndarray, np.ndarray]:
    """Points that end a track before the last frame, and points that start one after the first."""
    frames = state.frames
    return (np.flatnonzero(~state.has_successor & (frames < frames[-1])),
            np.flatnonzero((state.predecessor < 0) & (frames > frames[0])))


def _close_pairs(state, early, late, dt, radius, empty_radius, span) -> int:
    """Pairs (an ``early`` point at frame ``f``, a ``late`` one at ``f + dt``) of different tracks within
    ``radius`` (µm), with no detection within ``empty_radius`` of their midpoint in the frames between.

    All frames in one search: a point of frame ``f`` (early) or ``f + dt`` (late) is moved to slab ``f``
    along the first axis, slabs farther apart than the radius, so that only pairs of one slab are found
    (as :func:`tracker.linking.gap_closing.close_gaps` does); ``span`` is the points' extent along that axis.
    """
    positions, frames = state.positions, state.frames
    if len(early) == 0 or len(late) == 0:
        return 0
    sources = positions[early].copy()
    targets = positions[late].copy()
    slab = span + 2.0 * max(radius, empty_radius) + 1.0
    sources[:, 0] += frames[early] * slab
    targets[:, 0] += (frames[late] - dt) * slab
    pairs = cKDTree(sources).sparse_distance_matrix(cKDTree(targets), radius, output_type="ndarray")
    first, second = early[pairs["i"]], late[pairs["j"]]
    # An end before a start belongs to another track; a start before an end, to the same one when the end's
    # track goes back ``dt`` links to the start.
    back = second.copy()
    for _ in range(dt):
        back = np.where(back >= 0, state.predecessor[np.maximum(back, 0)], -1)
    different = back != first
    first, second = first[different], second[different]
    if len(first) == 0 or dt < 2:
        return int(len(first))
    middle = 0.5 * (positions[first] + positions[second])
    empty = np.ones(len(first), dtype=bool)
    for step in range(1, dt):  # each frame between, its points moved to the slab of the pair's first frame
        wanted = np.unique(frames[first]) + step
        lo, hi = np.searchsorted(frames, wanted), np.searchsorted(frames, wanted, side="right")
        between = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)])
        moved = positions[between].copy()
        moved[:, 0] += (frames[between] - step) * slab
        query = middle.copy()
        query[:, 0] += frames[first] * slab
        near = cKDTree(moved).query(query, distance_upper_bound=empty_radius)[0]
        empty &= ~np.isfinite(near)
    return int(empty.sum())
