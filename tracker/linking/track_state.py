"""The track state: what linking knows about every point, and the tracks its links make.

Every pass of the linker reads and changes one :class:`TrackState`: for each
detection (point) the link into it (its predecessor, the link's cost and
confidence), the velocity that link gives its track, and the running sums of
the track's own scatter. Points are ordered by frame, so a predecessor always
comes first; :func:`track_ids_from_predecessors` turns the predecessors into
track ids at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .motion import DEFAULT_PRIOR_STEPS, own_scatter_prior_steps


@dataclass
class TrackState:
    """Per-point arrays of ``n`` points ordered by frame (positions in µm).

    Attributes
    ----------
    positions : (n, 3) float array
        ``z, y, x`` (µm).
    frames : (n,) int64 array
        Frame of each point, sorted.
    predecessor : (n,) int64 array
        Index of the point linked into each point, -1 at a track start.
    has_successor : (n,) bool array
        Whether a link leaves the point.
    link_cost : (n,) float array
        Squared distance (µm²) of the point from where its link predicted it, per frame spanned; NaN at a start.
    confidence : (n,) float array
        Confidence of the link into the point (0..1, :mod:`tracker.linking.confidence`); NaN at a start.
    velocity, has_velocity : (n, 3), (n,) arrays
        Last displacement of the track up to the point (µm per frame), where known.
    ratio_sum, ratio_count : (n,) float arrays
        The track's own scatter relative to its class's, carried along the track: sum and count of its
        normalised squared residuals ``|residual|² / (3 σ²)``.
    prior_steps : float
        Weight (steps) of the population's scatter in a track's own (:func:`tracker.linking.motion.
        own_scatter_prior_steps`), updated as the tracks grow; ``inf``: one shared scatter (see
        :meth:`tracker.linking.prediction.Prediction.scale`).
    successor : (n,) int64 array or None
        Index of the point each link leads to (-1: none); kept from the smoothing pass on (see
        :meth:`start_successors`), None before.
    """

    positions: np.ndarray
    frames: np.ndarray
    predecessor: np.ndarray
    has_successor: np.ndarray
    link_cost: np.ndarray
    confidence: np.ndarray
    velocity: np.ndarray
    has_velocity: np.ndarray
    ratio_sum: np.ndarray
    ratio_count: np.ndarray
    prior_steps: float = DEFAULT_PRIOR_STEPS
    ndim: int = 3
    successor: np.ndarray | None = None

    @classmethod
    def unlinked(cls, positions: np.ndarray, frames: np.ndarray, ndim: int = 3) -> TrackState:
        """Every point a track of its own (``positions`` ``(n, 3)`` µm, zero on unused axes, ``frames`` sorted;
        ``ndim`` the dimension of the motion)."""
        n = len(frames)
        return cls(positions, frames, predecessor=np.full(n, -1, dtype=np.int64),
                   has_successor=np.zeros(n, dtype=bool), link_cost=np.full(n, np.nan),
                   confidence=np.full(n, np.nan), velocity=np.zeros((n, 3)), has_velocity=np.zeros(n, dtype=bool),
                   ratio_sum=np.zeros(n), ratio_count=np.zeros(n), ndim=ndim)

    def __len__(self) -> int:
        return len(self.predecessor)

    def update_prior_steps(self, points: np.ndarray) -> None:
        """Re-estimate :attr:`prior_steps` from the tracks ending at ``points`` (a frame just linked into)."""
        self.prior_steps = own_scatter_prior_steps(self.ratio_sum[points], self.ratio_count[points], self.ndim)

    def record_links(self, src, dst, residual_sq, variance, confidence, steps=1) -> None:
        """Store links ``src -> dst`` (point indices, spanning ``steps`` frames): predecessor, cost, confidence,
        velocity, own scatter.

        ``residual_sq``: squared distance (µm²) of ``dst`` from its prediction; ``variance``: the per-axis
        variance (µm²) of the prediction's class.
        """
        steps = np.broadcast_to(np.asarray(steps), (len(dst),))
        self.predecessor[dst] = src
        self.has_successor[src] = True
        # A link across missing frames: cost and velocity per frame spanned.
        self.link_cost[dst] = residual_sq / steps
        self.confidence[dst] = confidence
        self.velocity[dst] = (np.take(self.positions, dst, axis=0)
                              - np.take(self.positions, src, axis=0)) / steps[:, None]
        self.has_velocity[dst] = True
        self.ratio_sum[dst] = self.ratio_sum[src] + residual_sq / (self.ndim * variance)
        self.ratio_count[dst] = self.ratio_count[src] + 1

    def unlink(self, points: np.ndarray) -> None:
        """Forget the links into ``points``: their predecessors lose a successor, they lose what the link set."""
        before = self.predecessor[points]
        self.has_successor[before[before >= 0]] = False
        self.predecessor[points] = -1
        self.link_cost[points] = np.nan
        self.confidence[points] = np.nan
        self.velocity[points] = 0.0
        self.has_velocity[points] = False
        self.ratio_sum[points] = 0.0
        self.ratio_count[points] = 0.0

    def successors(self) -> np.ndarray:
        """Index of the point each point's link leads to (-1: none), from the predecessors."""
        successor = np.full(len(self.predecessor), -1, dtype=np.int64)
        linked = self.predecessor >= 0
        successor[self.predecessor[linked]] = np.flatnonzero(linked)
        return successor

    def start_successors(self) -> None:
        """Keep :attr:`successor` from now on (the passes that change it keep it in step)."""
        self.successor = self.successors()


@dataclass(frozen=True)
class FrameRanges:
    """Where each frame's points lie in the frame-sorted points: frame ``values[k]`` holds the points
    ``bounds[k]`` up to ``bounds[k + 1]``."""

    values: np.ndarray
    bounds: np.ndarray

    @classmethod
    def of(cls, frames: np.ndarray) -> FrameRanges:
        """From the sorted frame of every point."""
        values, starts = np.unique(frames, return_index=True)
        return cls(values, np.append(starts, len(frames)))

    @property
    def n_pairs(self) -> int:
        """Number of pairs of successive frames with points (consecutive or not)."""
        return max(len(self.values) - 1, 0)

    def points(self, k: int) -> np.ndarray:
        """Indices of the points of the ``k``-th frame with points."""
        return np.arange(self.bounds[k], self.bounds[k + 1])

    def consecutive(self, k: int) -> bool:
        """Whether the ``k``-th and ``k + 1``-th frames with points are consecutive frames."""
        return bool(self.values[k + 1] == self.values[k] + 1)

    def index_of(self, frame: int) -> int | None:
        """Position of ``frame`` among the frames with points (None if it has none)."""
        j = int(np.searchsorted(self.values, frame))
        return j if j < len(self.values) and self.values[j] == frame else None


def track_ids_from_predecessors(predecessor: np.ndarray) -> np.ndarray:
    """Track id of every point from its predecessor index (-1 at a start).

    Points must be ordered so that a predecessor comes first; ids number the
    starts in order. Pointer jumping makes this O(n log L) for tracks of
    length L, without a Python loop over points.
    """
    return tracks_in_order(predecessor)[0]


def tracks_in_order(predecessor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Track id of every point (as :func:`track_ids_from_predecessors`) and the order that sorts the points
    by (track id, position along the track).

    Pointer jumping finds each point's track start and its distance from it; a counting sort on these
    replaces a sort of the whole table (a predecessor always lies in an earlier frame, so the distance
    orders a track's points by frame).
    """
    n = len(predecessor)
    starts = predecessor < 0
    head = np.where(starts, np.arange(n), predecessor)
    depth = (~starts).astype(np.int64)
    while True:
        jumped = head[head]
        if np.array_equal(jumped, head):
            break
        depth += depth[head]
        head = jumped
    # Ids number the starts in order, as the points are ordered by frame.
    track_id = (np.cumsum(starts) - 1)[head]
    length = np.bincount(track_id, minlength=int(starts.sum()))
    first_slot = np.cumsum(length) - length
    order = np.empty(n, dtype=np.int64)
    order[first_slot[track_id] + depth] = np.arange(n)
    return track_id.astype(np.int64), order
