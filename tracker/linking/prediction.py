"""Prediction and search radius: where each point's track is expected next, with what scatter.

The motion model (:class:`tracker.linking.motion.MotionModel`, estimated from
the links so far) predicts each point at ``x + p v`` from its track's last
displacement ``v``; the prediction error has a per-axis variance of its class
(with or without a known velocity), times the track's own scatter
(:meth:`Prediction.scale`). A point's candidates
lie within :data:`tracker.linking.motion.DEFAULT_GATE_SIGMAS` standard
deviations of its prediction (Jaqaman et al. 2008's search radius), never
beyond the gate ``max_displacement_um``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .motion import DEFAULT_GATE_SIGMAS, MotionModel, predict_positions
from .track_state import TrackState

PREDICTION_MIN_PERSISTENCE = 0.05
"""An estimated persistence below this predicts nothing (each point at its last position): the shift
is under 5 % of a step, less than localisation noise adds, and would only split the points into two
variance classes (with and without a velocity) that differ by noise. Brownian data estimate 0 (noise
makes successive steps anti-correlated); at step/NN 0.1 with noise of 0.04 NN, persistence 0.5 shows
as 0.01 (compare_trackers.py: the split cost 3 links of 170k there)."""


@dataclass
class Prediction:
    """How the linker predicts: the motion (``"persistent"`` or ``"none"``), whether search radii fit each
    track's scatter (``adaptive_radius``), the gate (µm) and the running :class:`MotionModel`.

    Methods taking a ``model`` use :attr:`model` when it is None (a trial model may stand in for it).
    """

    motion: str
    adaptive_radius: bool
    gate: float
    model: MotionModel
    axis_sd: np.ndarray | None = None
    """Where the axes' scatters differ (:mod:`tracker.linking.axis_scatter`): each axis's standard deviation
    relative to the root mean per-axis variance (``(3,)``). The linker's positions are then whitened (divided by
    it), :attr:`gate` is the search's cap there (the µm gate along the axis of least scatter) and
    :meth:`in_gate` keeps the displacements within the gate in µm. None: isotropic, positions in µm."""
    gate_um: float | None = None
    """With :attr:`axis_sd`: the gate ``max_displacement_um`` (µm)."""

    def predicts(self, model: MotionModel | None = None) -> bool:
        """Whether links are predicted from velocities: persistent motion, a model that has seen enough
        steps, and a persistence that was given or estimated at :data:`PREDICTION_MIN_PERSISTENCE` or more."""
        model = model or self.model
        return self.motion != "none" and model.ready and (
            model.persistence is not None or model.current_persistence() >= PREDICTION_MIN_PERSISTENCE)

    def persistence(self, model: MotionModel | None = None) -> float:
        """``p`` of the predictions: the model's, 0 where it does not predict."""
        model = model or self.model
        return model.current_persistence() if self.predicts(model) else 0.0

    def scaled_costs(self) -> bool:
        """Whether link costs are in squared standard deviations (not plain µm²)."""
        return not (self.motion == "none" and not self.adaptive_radius)

    def class_variance(self, has_velocity: np.ndarray, model: MotionModel | None = None,
                       clip: bool = True) -> np.ndarray:
        """Per-axis variance (µm²) of the prediction error of each point's class.

        Clipped (``clip``) so that :data:`DEFAULT_GATE_SIGMAS` standard deviations never exceed the gate: the
        frame-to-frame search. Gap closing takes the model's own variance (``clip=False``): a gate estimated at
        3 standard deviations of the steps instead of 4.5 would otherwise shrink the variance a gap spreads from
        to half the steps' (a 15-particle stack, D = 0.02 µm²/frame, gate 0.62 µm: 0.019 against 0.039 µm²
        seen in the links), and gap closing lose 40 % of its joins.
        """
        model = model or self.model
        fallback = (self.gate / DEFAULT_GATE_SIGMAS) ** 2
        cap = fallback if clip else np.inf
        step = model.step_variance()
        step = fallback if step is None else min(max(step, 1e-12), cap)
        residual = model.residual_variance() if self.motion != "none" else None
        residual = step if residual is None else min(max(residual, 1e-12), cap)
        return np.where(has_velocity & self.predicts(model), residual, step)

    def step_variance(self, clip: bool = True) -> float:
        """Per-axis variance (µm²) of a step without a known velocity (``clip``: see :meth:`class_variance`)."""
        return float(self.class_variance(np.zeros(1, bool), clip=clip)[0])

    def residual_variance(self, clip: bool = True) -> float:
        """Per-axis variance (µm²) of the prediction error with a known velocity (a step's without prediction)."""
        return float(self.class_variance(np.ones(1, bool), clip=clip)[0])

    def edge_distance(self, clip: bool = True) -> float:
        """One typical step (µm): a track ending closer than this to the volume's edge most likely left it
        (``clip``: see :meth:`class_variance`)."""
        return float(np.sqrt(self.model.ndim * self.step_variance(clip=clip)))

    def radius(self, variance: np.ndarray, own: np.ndarray) -> np.ndarray:
        """Search radius (µm) of points with class variance ``variance`` (µm²) and own scatter ``own``."""
        if self.adaptive_radius:
            return np.minimum(DEFAULT_GATE_SIGMAS * np.sqrt(variance * own), self.gate)
        return np.full(len(variance), self.gate)

    def in_gate(self, delta: np.ndarray, n_steps: np.ndarray | int = 1) -> np.ndarray | None:
        """Which displacements ``delta`` (``(k, 3)``, whitened) lie within the gate in µm, times the root of
        ``n_steps`` (frames spanned; the gate of a link across missing frames); None where the gate is a ball
        of radius :attr:`gate` (isotropic scatter: the search's radius cap already is the gate)."""
        if self.axis_sd is None:
            return None
        delta_um = delta * self.axis_sd
        return np.einsum("ij,ij->i", delta_um, delta_um) <= self.gate_um**2 * np.asarray(n_steps)

    def inner_gate(self) -> float:
        """Radius of the largest ball around a prediction within the gate: :attr:`gate` (µm), or with whitened
        positions (:attr:`axis_sd`) the µm gate along the axis of most scatter, in whitened units."""
        return self.gate if self.axis_sd is None else self.gate_um / float(np.max(self.axis_sd))

    def adapts_scatter(self, state: TrackState) -> bool:
        """Whether tracks differ in scatter: adaptive radii, and the tracks' dispersion shows it
        (:attr:`TrackState.prior_steps` finite)."""
        return self.adaptive_radius and not np.isinf(state.prior_steps)

    def scale(self, state: TrackState, points: np.ndarray) -> np.ndarray:
        """Each track's own scatter relative to its class (1 without adaptation), at ``points``."""
        if not self.adapts_scatter(state):
            return np.ones(len(points))
        prior = state.prior_steps
        return (prior + state.ratio_sum[points]) / (prior + state.ratio_count[points])

    def predict(self, state: TrackState, points: np.ndarray, model: MotionModel | None = None):
        """Predicted positions (µm, ``(k, 3)``) of ``points`` one frame on, their class variance (µm², per
        axis), own scatter (:meth:`scale`) and search radii (µm).

        The own scatter, relative to the class's variance, enters the costs and the search radius.
        """
        has_v = state.has_velocity[points]
        predicted = predict_positions(np.take(state.positions, points, axis=0),
                                      np.take(state.velocity, points, axis=0), has_v, self.persistence(model))
        variance = self.class_variance(has_v, model)
        own = self.scale(state, points)
        return predicted, variance, own, self.radius(variance, own)
