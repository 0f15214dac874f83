"""Missing detections: how often a point finds no partner in the next frame, and the "no link" cost that follows.

The forward frame-pair pass counts, among the points away from the volume's
edge, those that found no link into the next frame, less those whose next
step the motion model puts outside their search radius (:class:`MissingRate`).
What is left is missing detections (blinking, missed spots). Once they show,
leaving a point unlinked gets cheaper (:meth:`MissingRate.scaled_no_link_cost`), track ends
enter the frame-pair assignments (:data:`IN_PAIR_GAPS_MIN_MISSING`) and gaps
are closed afterwards (:data:`tracker.linking.gap_closing.GAP_CLOSING_MIN_MISSING`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .motion import DEFAULT_GATE_SIGMAS, MotionModel, chi2_3_sf, truncated_gaussian_variance
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
(blinking or missed detections; the same rate as :data:`tracker.linking.gap_closing.GAP_CLOSING_MIN_MISSING`'s);
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
    variance = truncated_gaussian_variance(prediction.class_variance(has_velocity, model, clip=False), class_radius)
    has_v = state.has_velocity[points].astype(int)
    if not prediction.adapts_scatter(state):  # one scatter per class
        return float(np.bincount(has_v, minlength=2) @ chi2_3_sf(class_radius**2 / variance))
    own = prediction.scale(state, points)
    radius = prediction.radius(clipped[has_v], own)
    return float(chi2_3_sf(radius**2 / (variance[has_v] * own)).sum())
