"""The stack's threshold from the quality distribution of its maxima: noise maxima and spots, fitted over frames.

A frame's rule (:func:`tracker.threshold.automatic_threshold`) sees one frame:
where it holds ~10 faint spots among a million voxels, no level's maxima exceed
the noise's count significantly, and the frame gets the ceiling. Over a
time-lapse the spots' count and brightness and the noise hardly change, so the
evidence of several frames can be pooled. The maxima (quality ≥
:data:`FIT_FLOOR`) of a few frames spread over the stack are counted in bins
of quality and fitted, by Poisson maximum likelihood, as the sum of

* noise maxima: ``c`` times the smooth-field count
  (:func:`tracker.dog.expected_noise_maxima`) of every frame; ``c``, the noise
  excess, is fitted within :data:`NOISE_EXCESS_RANGE` (the frame rule uses its
  upper end throughout, a bound), and
* spots: ``N`` maxima of normally distributed quality (mean ``μ``, spread
  ``s``), ``N`` counting the spots too faint to reach the floor.

Where this explains the maxima better than noise alone by a likelihood ratio
of at least :data:`EVIDENCE` (the stack holds spots), the stack's threshold
maximises the model's F1, ``2 S(u) / (c m(u) + S(u) + N)`` (``S(u)``: spots
above ``u``; ``m(u)``: noise maxima), over the thresholds' range (3.5-8), or
under it where the range's maximum is its floor, as far as the fitted spots
still outnumber the fitted noise maxima (:func:`mixture_threshold`). Each frame's threshold is then the lower
of its own and the stack's (:func:`tracker.threshold.frame_thresholds`): the
model only lowers thresholds, where the pooled evidence says the frame rule was
too strict. Otherwise (no evidence; or a filter under
:data:`tracker.threshold.SMOOTH_SIGMA` voxels, where the noise count does not
hold) each frame keeps its own rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import ndtr

from .backend import get_array_module
from .dog import expected_noise_maxima, gradient_variance, quality_map, smoothed_and_dog
from .threshold import NOISE_EXCESS, SMOOTH_SIGMA, THRESHOLD_RANGE

FIT_FLOOR = 2.5
"""Lowest quality of the maxima fitted. Below the thresholds' range (3.5), where noise maxima outnumber faint
spots, so that their count sets the noise excess ``c``: on the benchmark's six sparse (3 µm) 150-photon stacks
2-5 % of the maxima above 2.5 were spots, 5-12 % above 3. The smooth-field count is an Euler characteristic,
which counts maxima only at high levels; from 2.5 to 4 the ratio of the noise maxima to it fell, or rose by at
most 15 %, on 14 pure-noise camera stacks of 30 frames (1-20 photons of background per voxel, spot σ 0.7-3.2
voxels). Above 4 the counts are small; on the most skewed noise (σ 0.7 voxels, 2 photons per voxel) the ratio
reached 2.9 at 4.5, above the fit's bound of 2 (:data:`NOISE_EXCESS_RANGE`) as above the frame rule's."""

BIN_WIDTH = 0.1
"""Width of the quality bins counted (the maxima above :data:`BIN_TOP` share one bin)."""

BIN_TOP = 10.0
"""Quality above which the maxima are counted in one bin (spots clear of all noise)."""

NOISE_EXCESS_RANGE = (0.3, NOISE_EXCESS)
"""Bounds of the fitted noise excess ``c``. The upper: the frame rule's bound
(:data:`tracker.threshold.NOISE_EXCESS`, measured 0.6-2.1 on pure noise). The lower: where spots fill much of
the volume, noise has less room for maxima (fits of 0.3-0.5 on the benchmark's dense bright stacks)."""

SPOT_MEAN_RANGE = (THRESHOLD_RANGE[0], 60.0)
"""Bounds of the spots' mean quality ``μ``: a population centred below the thresholds' floor is not one the
detector can find (and the noise's own departures from the smooth-field count at low levels are not spots)."""

SPOT_SPREAD_RANGE = (0.3, 20.0)
"""Bounds of the spots' quality spread ``s`` (a spot's quality scatters by about 1 with the noise alone)."""

EVIDENCE = 16.27
"""Likelihood ratio (``2 Δ log L``) of noise-plus-spots over noise alone above which the stack holds spots: the
0.999 quantile of χ² with 3 degrees of freedom (the spots' ``N, μ, s``), a conventional level, not tuned. At the
true radius: on 14 pure-noise camera stacks of 30 frames (10 sampled) the ratio was 0-9.2; on the benchmark's
36 stacks and 18 of other families, all with spots, 21.6 (100 spots of σ 0.8/0.25 µm at 200 photons, 10
frames) and up. At a wrong radius spots show less: 8.7 on that stack filtered at σ 2 voxels instead of 3.2/2.5."""

_STARTS = ((4.0, 0.05), (4.0, 0.3), (5.0, 0.05), (5.0, 0.3), (7.0, 0.05), (7.0, 0.3), (12.0, 0.05),
           (12.0, 0.3), (25.0, 0.05), (25.0, 0.3))  # (μ, spots' share of the maxima) where the fit starts


@dataclass(frozen=True)
class FrameMaxima:
    """One frame's local maxima, as the automatic threshold sees them.

    Attributes
    ----------
    quality : (n,) floats
        Quality of the maxima at or above :data:`FIT_FLOOR`.
    n_voxels : int
        Voxels of the frame.
    gradient_var : (3,) floats
        :func:`tracker.dog.gradient_variance` of its quality map.
    """

    quality: np.ndarray
    n_voxels: int
    gradient_var: np.ndarray

    def noise_maxima(self, levels: np.ndarray) -> np.ndarray:
        """The smooth-field count of noise maxima above each of ``levels`` (without the noise excess)."""
        return expected_noise_maxima(self.n_voxels, self.gradient_var, levels)


@dataclass(frozen=True)
class QualityMixture:
    """The maxima's quality distribution, fitted over a stack's frames, and the threshold it gives.

    Attributes
    ----------
    threshold : float or None
        The stack's threshold (quality units), or None where the fit shows no spots (each frame keeps its rule).
    noise_excess : float
        ``c``: the noise maxima per smooth-field one.
    n_spots : float
        ``N``: spots over the frames fitted (also those below :data:`FIT_FLOOR`).
    spot_mean, spot_spread : float
        ``μ`` and ``s`` of the spots' quality.
    evidence : float
        Likelihood ratio ``2 Δ log L`` of the fit over noise alone.
    n_frames : int
        Frames fitted.
    """

    threshold: float | None
    noise_excess: float
    n_spots: float
    spot_mean: float
    spot_spread: float
    evidence: float
    n_frames: int

    def __str__(self) -> str:
        if self.threshold is None and self.n_frames == 0:  # (threshold_from_maxima: TOO_FINE)
            return (f"threshold: each frame's own (the spot filter is under {SMOOTH_SIGMA:g} voxels along an axis: "
                    f"too fine for the pooled fit)")
        if self.threshold is None:
            return (f"threshold: each frame's own (the maxima of {self.n_frames} frames pooled show no spots beyond "
                    f"the noise's)")
        # Under the frame rule's floor every frame gets the stack's threshold.
        which = (f"{self.threshold:.2f} in every frame" if self.threshold < THRESHOLD_RANGE[0]
                 else f"each frame's, at most {self.threshold:.2f}")
        return (f"threshold: {which} (the maxima of {self.n_frames} frames "
                f"pooled: about {self.n_spots / max(self.n_frames, 1):.0f} spots a frame of quality "
                f"{self.spot_mean:.1f} ± {self.spot_spread:.1f}, noise maxima {self.noise_excess:.2f} × the "
                f"smooth field's)")


def frame_maxima(volume, voxel_size_um: Sequence[float], spot_radius_um: Sequence[float]) -> FrameMaxima:
    """The maxima of one frame's quality map at or above :data:`FIT_FLOOR`, found as :func:`tracker.detect.detect_spots`
    finds them (the same filter, noise map and neighbourhood); NumPy or CuPy."""
    from .detect import local_maxima, maxima_footprint, radius_per_axis, spot_sigma_voxels

    volume = get_array_module(volume).asarray(volume)
    radius = radius_per_axis(spot_radius_um, volume.shape)
    sigma = spot_sigma_voxels(radius, voxel_size_um)
    _, response = smoothed_and_dog(volume, sigma)
    quality = quality_map(response, sigma)
    n_voxels = int(np.prod(volume.shape))
    if quality is None:  # a constant frame
        return FrameMaxima(np.empty(0), n_voxels, np.zeros(3))
    footprint = maxima_footprint(radius, voxel_size_um, volume.shape)
    values = local_maxima(quality, footprint, FIT_FLOOR)[1]  # (on the GPU: shipped kernels, nothing compiled)
    return FrameMaxima(np.asarray(values, dtype=np.float64), n_voxels, gradient_variance(quality))


def fit_quality_mixture(frames: Sequence[FrameMaxima]) -> QualityMixture:
    """Fit noise maxima plus normally distributed spots to the maxima of ``frames`` (see the module's text).

    Returns
    -------
    QualityMixture
        With ``threshold`` None where the evidence is under :data:`EVIDENCE`.
    """
    edges = np.concatenate([np.arange(FIT_FLOOR, BIN_TOP - 1e-9, BIN_WIDTH), [np.inf]])
    quality = np.concatenate([f.quality for f in frames]) if frames else np.empty(0)
    observed = np.histogram(quality[quality >= FIT_FLOOR], edges)[0].astype(np.float64)
    noise_above = sum((f.noise_maxima(np.minimum(edges, 1e3)) for f in frames), np.zeros(len(edges)))
    noise_bins = noise_above[:-1] - noise_above[1:]
    none = QualityMixture(None, NOISE_EXCESS, 0.0, float("nan"), float("nan"), 0.0, len(frames))
    if observed.sum() == 0 or noise_bins.sum() <= 0:
        return none

    def expected(p: np.ndarray) -> np.ndarray:
        above = np.exp(p[1]) * ndtr((p[2] - edges) / np.exp(p[3]))
        return np.exp(p[0]) * noise_bins + (above[:-1] - above[1:])

    def negative_log_likelihood(p: np.ndarray) -> float:
        rate = np.maximum(expected(p), 1e-300)
        return float(np.sum(rate - observed * np.log(rate)))

    log_c = (np.log(NOISE_EXCESS_RANGE[0]), np.log(NOISE_EXCESS_RANGE[1]))
    total = observed.sum()
    # Spots: at most 100 times the maxima seen (most of them below the floor), which keeps exp() finite.
    bounds = [log_c, (np.log(1e-3), np.log(100.0 * total)), SPOT_MEAN_RANGE, tuple(np.log(SPOT_SPREAD_RANGE))]
    fits = [minimize(negative_log_likelihood, [np.log(1.2), np.log(share * total + 1.0), mean, 0.0],
                     method="L-BFGS-B", bounds=bounds) for mean, share in _STARTS]
    best = min(fits, key=lambda fit: fit.fun)
    # Noise alone: c only (the spots' count at its lower bound).
    alone = minimize(lambda p: negative_log_likelihood(np.array([p[0], np.log(1e-3), 10.0, 0.0])), [np.log(1.2)],
                     method="L-BFGS-B", bounds=[log_c])
    evidence = 2.0 * (alone.fun - best.fun)
    c, n_spots, mean, spread = np.exp(best.x[0]), np.exp(best.x[1]), best.x[2], np.exp(best.x[3])
    threshold = None
    if evidence >= EVIDENCE:
        threshold = mixture_threshold(frames, float(c), float(n_spots), float(mean), float(spread))
    return QualityMixture(threshold, float(c), float(n_spots), float(mean), float(spread), float(evidence),
                          len(frames))


def mixture_threshold(frames: Sequence[FrameMaxima], noise_excess: float, n_spots: float, spot_mean: float,
                      spot_spread: float, floor: bool = True) -> float:
    """The threshold (quality units) that maximises a fitted mixture's F1, below the thresholds' range where the
    mixture itself says the spots still outnumber the noise maxima there.

    The model's F1, ``2 S(u) / (c m(u) + S(u) + N)``, is maximised over
    :func:`tracker.threshold.threshold_levels` (3.5-8). Where that maximum is at the range's
    floor, it is sought down to :data:`FIT_FLOOR`, but not below the
    :func:`even_level`, where a maximum of that quality is as likely noise as
    a spot: the floor moves only as far as the fitted spots still outnumber the
    fitted noise maxima (the fit sees the maxima down to :data:`FIT_FLOOR`, so
    it is evidence, not an extrapolation). The result is never above the range's
    own F1 maximum: the extension only lowers thresholds. Measured
    (``benchmarks/results/threshold_floor.md``): on ISBI-2012-like 2D stacks at SNR 1.5-2, detection F1 +0.02 to
    +0.27, within 0.004 of the best fixed threshold on four of five (0.033 under it on 500 particles a frame,
    where the best, 2.5, is under the even level), link F1 +0.06 to +0.33; on the 80 stacks of the detection
    grid and its held-out sets the threshold is unchanged.

    Parameters
    ----------
    frames : sequence of FrameMaxima
        The frames fitted (their volumes and smoothness give the noise count ``m(u)``).
    noise_excess, n_spots, spot_mean, spot_spread : float
        The fit's ``c``, ``N``, ``μ`` and ``s`` (:class:`QualityMixture`).
    floor : bool
        False: the range's F1 maximum alone (the rule before the extension; for comparison).
    """
    levels = np.round(np.arange(FIT_FLOOR, THRESHOLD_RANGE[1] + 1e-9, 0.05), 2)
    noise = noise_excess * sum(f.noise_maxima(levels) for f in frames)
    spots = n_spots * ndtr((spot_mean - levels) / spot_spread)
    f1 = 2.0 * spots / (noise + spots + n_spots)

    def best(first: int) -> float:  # the F1 maximum over levels[first:] (ties: the highest level)
        return float(levels[len(levels) - 1 - int(np.argmax(f1[first:][::-1]))])

    in_range = best(int(np.searchsorted(levels, THRESHOLD_RANGE[0] - 1e-9)))
    if not floor or in_range > THRESHOLD_RANGE[0]:
        return in_range
    even = even_level(levels, noise, spots, spot_mean)
    return min(in_range, max(best(0), even))


def even_level(levels: np.ndarray, noise_above: np.ndarray, spots_above: np.ndarray, spot_mean: float) -> float:
    """The lowest of ``levels`` from which, up to the spots' mean quality, the spots' density of quality is at
    least the noise maxima's (a maximum there is at least as likely a spot as noise); the spots' mean where the
    noise dominates up to it.

    Parameters
    ----------
    levels : (n,) floats
        Increasing quality levels, evenly spaced.
    noise_above, spots_above : (n,) floats
        The fitted numbers of noise maxima and spots above each level.
    spot_mean : float
        The spots' mean quality ``μ``: only the crossing below it counts (far above it both densities vanish,
        and which is the smaller there says nothing about the threshold).
    """
    noise_density = noise_above[:-1] - noise_above[1:]  # (per bin [levels[i], levels[i + 1]))
    spot_density = spots_above[:-1] - spots_above[1:]
    below_mean = levels[:-1] < spot_mean
    noise_wins = np.flatnonzero(below_mean & (spot_density < noise_density))
    if len(noise_wins) == 0:
        return float(levels[0])
    return float(min(levels[noise_wins[-1] + 1], spot_mean))


TOO_FINE = "too fine"
""":func:`threshold_frame_maxima`'s answer where the spot filter is under :data:`tracker.threshold.SMOOTH_SIGMA`
voxels on an axis: the maxima of such a filter are not fitted, and each frame keeps its own rule."""


def threshold_frame_maxima(volume: Any, voxel_size_um: Sequence[float],
                           spot_radius_um: float | Sequence[float]) -> FrameMaxima | str | None:
    """One frame's part of :func:`estimate_threshold`: its :func:`frame_maxima`; None for a frame with non-finite
    values (detection stops on it with a clear error); :data:`TOO_FINE` where the filter is too fine to fit.
    Frames are independent: :func:`tracker.pipeline.estimate_stack_threshold` runs them on several cores."""
    from .detect import all_finite, radius_per_axis, spot_sigma_voxels

    if volume.dtype.kind == "f" and not all_finite(volume):
        return None
    radius = radius_per_axis(spot_radius_um, volume.shape)
    filtered = [s for s, n in zip(spot_sigma_voxels(radius, voxel_size_um), volume.shape) if n > 1]
    if min(filtered, default=SMOOTH_SIGMA) < SMOOTH_SIGMA:
        return TOO_FINE
    return frame_maxima(volume, voxel_size_um, radius)


def threshold_from_maxima(maxima: Sequence[FrameMaxima | str | None]) -> QualityMixture:
    """:func:`estimate_threshold`'s fit of the frames' :func:`threshold_frame_maxima` (in frame order)."""
    if any(isinstance(m, str) for m in maxima):
        return QualityMixture(None, NOISE_EXCESS, 0.0, float("nan"), float("nan"), 0.0, 0)
    return fit_quality_mixture([m for m in maxima if m is not None])


def estimate_threshold(frames: Iterable, voxel_size_um: Sequence[float],
                       spot_radius_um: float | Sequence[float]) -> QualityMixture:
    """The stack's threshold from a few of its frames (:func:`fit_quality_mixture` of their :func:`frame_maxima`).

    Parameters
    ----------
    frames : iterable of (Z, Y, X) arrays, NumPy or CuPy
        Frames spread over the stack (e.g. :func:`tracker.spot_scale.frames_to_sample`'s).
    voxel_size_um : (3,) floats
        Voxel size ``z, y, x`` in µm.
    spot_radius_um : float or (3,) or (2,) floats
        The spot radius detection uses (µm), as :func:`tracker.detect.detect_spots` takes it.

    Returns
    -------
    QualityMixture
        ``threshold`` None where the stack shows no spots, or its filter is under
        :data:`tracker.threshold.SMOOTH_SIGMA` voxels on an axis (each frame keeps its own rule there).
    """
    maxima = []
    for volume in frames:
        maxima.append(threshold_frame_maxima(volume, voxel_size_um, spot_radius_um))
        if maxima[-1] is TOO_FINE:
            break
    return threshold_from_maxima(maxima)


def most_evident_scale(volumes: Sequence, voxel_size_um: Sequence[float],
                       scales: Sequence[float]) -> tuple[float, float] | None:
    """Of ``scales`` (a Gaussian σ in voxels, the same on every axis), the one at which the maxima of
    ``volumes``, pooled, show spots most clearly: the largest :attr:`QualityMixture.evidence` of a filter of that
    σ (:func:`frame_maxima`, :func:`fit_quality_mixture`).

    The spot-size estimate's fallback where too few isolated spots were fitted
    (:func:`tracker.spot_scale.estimate_spot_radius`): faint spots stand out of the noise maxima best at about
    their own scale, whereas the count of maxima above a level, which grows at finer scales with the noise's
    maxima, does not tell them apart.

    Returns
    -------
    (float, float) or None
        The scale (voxels) and its evidence; None where no scale's evidence reaches :data:`EVIDENCE`. Scales
        whose spot radius (``√3 σ``) exceeds the volume along an axis are not tried.
    """
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    shape = np.array(volumes[0].shape) if len(volumes) else np.zeros(3)
    best = None
    for scale in scales:
        if np.any((shape > 1) & (np.sqrt(3.0) * float(scale) > shape)):
            continue  # a spot wider than the volume (which detection refuses): its maxima are the faces'
        radius = np.sqrt(3.0) * float(scale) * voxel
        fit = fit_quality_mixture([frame_maxima(volume, voxel, radius) for volume in volumes])
        if fit.evidence >= EVIDENCE and (best is None or fit.evidence > best[1]):
            best = (float(scale), fit.evidence)
    return best
