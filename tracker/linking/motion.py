"""Motion prediction for linking: persistent (biased correlated) motion.

Particles in biased correlated motion (Vasconcelos & Rosenhahn 2009) keep a
fraction ``p`` of their velocity from one frame to the next: the expected
next displacement is ``p`` times the last one. A particle whose last
displacement ``v`` is known is therefore expected at ``x + p v``, with a
smaller scatter around that prediction than around ``x`` when ``p > 0``.

:class:`MotionModel` estimates ``p`` and both scatters from the links made
so far (a running least-squares regression of each displacement on the one
before), so the linker can predict positions, weigh candidate links by how
surprising they are (squared Mahalanobis distance) and give every particle a
search radius that fits its motion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import erfc, gammainc, gammaincc

DEFAULT_GATE_SIGMAS = 4.5
"""Search radius in standard deviations of the predicted position (chi with
3 degrees of freedom: P(> 4.5 σ) ≈ 5e-4; with 2: 4e-5)."""

DEFAULT_PRIOR_STEPS = 4.0
"""Least weight (in steps) of the population's scatter in a particle's own scatter estimate, and the
weight while there are too few tracks to estimate it (:func:`own_scatter_prior_steps`)."""

MIN_PRIOR_TRACKS = 50
"""Fewer linked tracks than this: :func:`own_scatter_prior_steps` returns ``inf`` (one shared scatter)."""

MIN_VELOCITY_PAIRS = 50
"""Fewer pairs of successive displacements than this: the persistence estimate is not used yet."""

MIN_STEPS = 50
"""Fewer linked steps than this: the step variance is not used yet (:meth:`MotionModel.step_variance` is None),
and the linker searches and costs links as plain LAP does, within the gate. The variance of ``k`` steps in ``d``
dimensions is off by ``sqrt(2 / (k d))`` (relative SD): 10-14 % at 50 steps, where a search radius of 4.5 SDs is
within 5-7 % of its value; from one or two steps (trackpy's random-walk scenarios, the first frames of a handful of
particles) a radius would cut off true steps far inside the gate."""


@dataclass
class MotionModel:
    """Running estimates of persistence and scatter, from accepted links.

    Attributes
    ----------
    persistence : float or None
        Fixed persistence ``p`` in [0, 1], or None to estimate it.
    ndim : int
        Spatial dimension of the motion (3, or 2 for 2D data): the variances are per axis.
    n_steps, sum_step_sq : running count and sum of ``|v|²`` over all links.
    n_pairs, sum_vv, sum_vw, sum_ww : over pairs of successive displacements
        ``(v, w)``: count, ``Σ v·v``, ``Σ v·w``, ``Σ w·w``.
    axis_step_sq, axis_vv, axis_vw, axis_ww : (3,) float arrays
        The same sums per axis (``z, y, x``; µm²), for the per-axis scatter
        (:mod:`tracker.linking.axis_scatter`).
    """

    persistence: float | None = None
    ndim: int = 3
    n_steps: int = 0
    sum_step_sq: float = 0.0
    n_pairs: int = 0
    sum_vv: float = 0.0
    sum_vw: float = 0.0
    sum_ww: float = 0.0
    axis_step_sq: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis_vv: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis_vw: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis_ww: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def update(self, step: np.ndarray, previous_step: np.ndarray, has_previous: np.ndarray) -> None:
        """Add the displacements of new links (``(k, 3)``, zero on unused axes), and the ones before where known."""
        self.n_steps += len(step)
        step_sq = step**2
        self.sum_step_sq += float(np.sum(step_sq))
        v, w = previous_step[has_previous], step[has_previous]
        self.n_pairs += len(v)
        vv, vw, ww = v * v, v * w, w * w
        self.sum_vv += float(np.sum(vv))
        self.sum_vw += float(np.sum(vw))
        self.sum_ww += float(np.sum(ww))
        # Per axis through BLAS (a column sum of a (k, 3) array is 50x slower). New arrays, not in place: a
        # copy.copy of the model, a trial, must not change the model's sums.
        ones = np.ones(len(step))
        self.axis_step_sq = self.axis_step_sq + ones @ step_sq
        ones = ones[:len(v)]
        self.axis_vv, self.axis_vw = self.axis_vv + ones @ vv, self.axis_vw + ones @ vw
        self.axis_ww = self.axis_ww + ones @ ww

    @property
    def ready(self) -> bool:
        """Whether enough successive displacements were seen to predict."""
        return self.persistence is not None or self.n_pairs >= MIN_VELOCITY_PAIRS

    def current_persistence(self) -> float:
        """``p``: fixed, or the least-squares slope of ``w`` on ``v`` clipped to [0, 1] (0 until ready)."""
        if self.persistence is not None:
            return float(self.persistence)
        if self.n_pairs < MIN_VELOCITY_PAIRS or self.sum_vv <= 0:
            return 0.0
        return float(np.clip(self.sum_vw / self.sum_vv, 0.0, 1.0))

    def step_variance(self) -> float | None:
        """Per-axis variance of a displacement with no prediction (µm²), None before :data:`MIN_STEPS` links."""
        if self.n_steps < MIN_STEPS:
            return None
        return self.sum_step_sq / (self.ndim * self.n_steps)

    def residual_variance(self) -> float | None:
        """Per-axis variance of ``w - p v`` (µm²), None until ready."""
        if self.n_pairs < MIN_VELOCITY_PAIRS and self.persistence is None:
            return None
        if self.n_pairs == 0:
            return None
        p = self.current_persistence()
        residual = self.sum_ww - 2 * p * self.sum_vw + p * p * self.sum_vv
        return max(residual, 0.0) / (self.ndim * self.n_pairs)

    def axis_variances(self, predicting: bool) -> tuple[np.ndarray, int] | None:
        """Variance (µm², ``(3,)``, ``z, y, x``) along each axis of the prediction error, and the number of
        displacements it is estimated from.

        ``predicting``: of ``w - p v`` (with the model's persistence, over the pairs of successive
        displacements), else of a step. None where the scalar variance would be None too
        (:meth:`step_variance`, :meth:`residual_variance`): too few displacements to tell.
        """
        if not predicting:
            return (self.axis_step_sq / self.n_steps, self.n_steps) if self.step_variance() is not None else None
        if self.residual_variance() is None:
            return None
        p = self.current_persistence()
        residual = self.axis_ww - 2 * p * self.axis_vw + p * p * self.axis_vv
        return np.maximum(residual, 0.0) / self.n_pairs, self.n_pairs


def predict_positions(
    position_um: np.ndarray,
    velocity_um: np.ndarray,
    has_velocity: np.ndarray,
    persistence: float,
    n_steps: int | np.ndarray = 1,
) -> np.ndarray:
    """Expected positions ``n_steps`` frames later: ``x + (p + p² + … + p^n) v``.

    Particles without a known velocity stay where they are.
    """
    n_steps = np.asarray(n_steps)
    if persistence >= 1.0:
        factor = n_steps.astype(np.float64)
    else:
        factor = persistence * (1.0 - persistence**n_steps) / (1.0 - persistence)
    factor = np.where(has_velocity, factor, 0.0)
    return position_um + factor[..., None] * velocity_um if np.ndim(factor) else position_um + factor * velocity_um


def spread_factor(persistence: float, n_steps: np.ndarray, has_velocity: np.ndarray) -> np.ndarray:
    """Variance of the prediction error after ``n_steps`` frames, in units of its one-step value.

    With velocity (AR(1) velocity, innovations of variance ``σ²``): the error
    is ``Σ_j b_j (1 - p^(n-j+1)) / (1 - p)``, so the factor is
    ``Σ_{m=1..n} ((1 - p^m) / (1 - p))²``; ``n`` for ``p = 0``. Without
    velocity the displacement over ``n`` frames of a stationary AR(1)
    velocity has variance ``n + 2 Σ_{m=1..n-1} (n - m) p^m`` steps.
    """
    n_steps = np.asarray(n_steps, dtype=np.int64)
    largest = int(n_steps.max()) if n_steps.size else 1
    m = np.arange(1, largest + 1)
    p = float(min(persistence, 0.999999))
    with_v = np.cumsum(((1 - p**m) / (1 - p)) ** 2)
    without_v = np.array([n + 2 * np.sum((n - np.arange(1, n)) * p ** np.arange(1, n)) for n in m])
    return np.where(has_velocity, with_v[n_steps - 1], without_v[n_steps - 1])


def scatter_dispersion(ratio_sum: np.ndarray, ratio_count: np.ndarray, min_steps: int = 1,
                       ndim: int = 3) -> tuple[float, int]:
    """How much more the tracks' own scatters differ than chance allows (1: as chance; more: heterogeneous).

    Each step of a track adds ``r = |residual|² / (d σ²)`` to ``ratio_sum``
    (σ² the per-axis variance of its class, ``d = ndim``): for Gaussian motion
    shared by all particles ``r`` has mean 1 and variance 2/d, so a track's
    mean over ``c`` steps scatters with variance ``2 / (d c)`` around the
    common mean. Returns the mean of ``(m - m̄)² · d c / 2`` over the tracks
    with at least ``min_steps`` steps (the index of dispersion) and how many
    there were.
    """
    counted = ratio_count >= min_steps
    count = ratio_count[counted]
    if len(count) == 0:
        return float("nan"), 0
    mean = ratio_sum[counted] / count
    common = ratio_sum[counted].sum() / count.sum()
    if not common > 0.0:  # every residual exactly zero (noiseless synthetic data): nothing differs
        return 0.0, int(len(count))
    return float(np.mean((mean - common) ** 2 * (ndim / 2.0) * count / common**2)), int(len(count))


def chi2_sf(x: np.ndarray, ndim: int = 3) -> np.ndarray:
    """P(X > x) for X chi-square with ``ndim`` degrees of freedom: the chance that a Gaussian step in
    ``ndim`` dimensions lies outside ``sqrt(x)`` standard deviations (per axis)."""
    x = np.asarray(x, dtype=np.float64)
    if ndim == 3:  # (the closed form, exact to the last bit the 3D linker has always used)
        return erfc(np.sqrt(x / 2.0)) + np.sqrt(2.0 * x / np.pi) * np.exp(-x / 2.0)
    return gammaincc(ndim / 2.0, x / 2.0)


def chi2_mean_inside(c: float, ndim: int) -> float:
    """E[X | X < c] / d for X chi-square with ``d = ndim`` degrees of freedom: ``F_{d+2}(c) / F_d(c)``."""
    inside = float(gammainc(ndim / 2.0, c / 2.0))
    return float(gammainc(ndim / 2.0 + 1.0, c / 2.0)) / max(inside, 1e-300)


def truncated_gaussian_variance(observed: np.ndarray, radius: np.ndarray, iterations: int = 40,
                                ndim: int = 3) -> np.ndarray:
    """Per-axis variance (µm²) of 3D Gaussian steps whose steps *inside* ``radius`` (µm) have per-axis
    mean square ``observed`` (µm²): what a motion model fitted to gated links underestimates.

    Inside ``c = radius² / s`` squared standard deviations a chi-square(3) has mean ``3 F5(c) / F3(c)``
    (``Fk`` its CDF with k degrees of freedom), so the inside mean square ``s F5(c) / F3(c)`` grows with
    ``s``; it is solved for by bisection on ``log s`` in ``[observed, 100 observed]`` (the upper end
    where no Gaussian explains ``observed``: at most ``radius² / 5``, a uniform ball's). Meant for a
    few values (one per class of points): a loop in plain floats.
    """
    observed, radius = np.broadcast_arrays(np.asarray(observed, dtype=np.float64),
                                           np.asarray(radius, dtype=np.float64))

    def inside_mean_square(s: float, radius_sq: float) -> float:
        c = radius_sq / s
        if ndim != 3:
            return s * chi2_mean_inside(c, ndim)
        tail_3 = math.erfc(math.sqrt(c / 2.0)) + math.sqrt(2.0 * c / math.pi) * math.exp(-c / 2.0)
        inside_3 = 1.0 - tail_3
        inside_5 = inside_3 - math.sqrt(2.0 / math.pi) * math.exp(-c / 2.0) * c**1.5 / 3.0
        return s * max(inside_5, 0.0) / max(inside_3, 1e-300)

    out = np.empty(observed.shape)
    for k, (value, r) in enumerate(zip(observed.ravel().tolist(), radius.ravel().tolist())):
        low, high = math.log(value), math.log(100.0 * value)
        for _ in range(iterations):
            middle = 0.5 * (low + high)
            if inside_mean_square(math.exp(middle), r * r) < value:
                low = middle
            else:
                high = middle
        out.flat[k] = math.exp(0.5 * (low + high))
    return out


def own_scatter_cost(distance_sq: np.ndarray, variance: np.ndarray, scale: np.ndarray, ndim: int = 3) -> np.ndarray:
    """Cost of a displacement from the prediction under a track's own scatter (squared standard deviations).

    ``distance_sq`` (µm²) over the track's own per-axis variance ``variance * scale`` (µm²), plus
    ``d ln scale`` (``d = ndim``): twice the negative log-likelihood of a Gaussian up to a constant shared by all,
    so that a track of wide scatter does not take far candidates for free. ``scale = 1``: plain
    squared Mahalanobis distance.
    """
    scale = np.asarray(scale, dtype=float)
    return distance_sq / (variance * scale) + ndim * np.log(scale)


def own_scatter_prior_steps(ratio_sum: np.ndarray, ratio_count: np.ndarray, ndim: int = 3) -> float:
    """Weight (in steps) of the population's scatter in each track's own scatter estimate (empirical Bayes).

    A track's own scatter, relative to its class's, is estimated as
    ``(k + ratio_sum) / (k + ratio_count)``: its mean ``r`` shrunk towards 1
    with the weight of ``k`` steps. The best ``k`` is ``(2/3) / V``, ``V``
    the variance of the true relative scatters across tracks, and the tracks'
    index of dispersion ``D`` (:func:`scatter_dispersion`) measures it:
    ``D ≈ 1 + 1.5 V c̄`` for tracks of ``c̄`` steps on average, so
    ``k = c̄ / (D - 1)``. One shared motion (``D <= 1``) gives ``inf``: no
    track adapts. Particles of different mobility give a small ``k``, kept
    at :data:`DEFAULT_PRIOR_STEPS` or more: a few steps' squared residuals
    (chi-square with 3 degrees of freedom each) are too noisy to trust more
    (trusting them fully lost 0.0002-0.0003 F1 in 4 of the 5 cells of
    ``benchmarks/mixed_mobility.py``).
    ``inf`` (one shared scatter, as plain LAP) while fewer than
    :data:`MIN_PRIOR_TRACKS` tracks are linked: a handful of tracks cannot show
    that mobilities differ.
    """
    dispersion, n_tracks = scatter_dispersion(ratio_sum, ratio_count, ndim=ndim)
    if n_tracks < MIN_PRIOR_TRACKS:  # too few tracks to tell mobilities apart: one shared scatter
        return float("inf")
    if not dispersion > 1.0:
        return float("inf")
    return max(float(np.mean(ratio_count[ratio_count >= 1])) / (dispersion - 1.0), DEFAULT_PRIOR_STEPS)
