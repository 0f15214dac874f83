"""The automatic detection threshold: a level of the quality (the filter response over its local noise) chosen
from the frame's maxima and a model of the noise maxima.

Above a level ``u``, a volume of white-ish noise filtered at the spot's scale
holds about ``m(u)`` local maxima (:func:`tracker.dog.expected_noise_maxima`,
the count of a smooth Gaussian random field, times :data:`NOISE_EXCESS`).
Maxima in excess of that count are spots. :func:`automatic_threshold`
maximises the frame's F1 estimated that way; :func:`precise_threshold` keeps
precision (the spot-size estimate's candidates, the partners of merged spots);
:func:`frame_thresholds` chooses between them for one frame, as
:func:`tracker.detect.detect_spots` does with ``threshold=None``, at most the
stack's threshold where the maxima of several frames pooled show spots
(:mod:`tracker.quality_mixture`).

Every function here works on the host, on the short list of the frame's maxima.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .dog import expected_noise_maxima

FALSE_FRACTION = 0.01
""":func:`precise_threshold`'s bound: the lowest threshold at which noise explains at most this fraction of the
detections (used where precision matters more than recall: the spot-size estimate's candidates, and the
partners of merged spots)."""

NOISE_EXCESS = 2.0
"""Noise maxima counted per predicted one: on pure-noise camera stacks (Poisson + read noise, 1–3 photons
of background per voxel; 85k–2M voxels; spot σ 0.7–2 voxels) our detections above 4–4.5 were 0.6–2.1 times
:func:`tracker.dog.expected_noise_maxima` (heavier tails than a Gaussian, under-sampled axes)."""

NOISE_BOUND = 2.0
"""The automatic threshold counts the noise maxima above a level as their expected number plus this many
of its standard deviations (a Poisson count: ``m + 2√m``), an upper bound that a frame's own noise rarely
exceeds. Without it (expected count alone), on sparse frames (~10 spots in 0.1–1.5 M voxels) the chance
excess of noise maxima at low levels passed for spots: with the radius estimated, F1 0.997 → 0.958,
0.997 → 0.970 and 0.991 → 0.972 on three 400–1500-photon stacks of the benchmark grid (maxima counted
before the splitting of close spots). 2 is the usual two-sided 95 % bound, not tuned (in that count of
maxima, 1.5 and 3 each missed one more grid stack's target). With it and :data:`SPOT_EVIDENCE`, the detector
on all 36 grid stacks (``benchmarks/results/detect_bench.md``): F1 at most 0.004 below the previous rule's,
up to 0.21 above on the 150-photon ones."""

SPOT_EVIDENCE = 3.0
"""The automatic threshold finds spots in a frame only where, at some level, the maxima exceed the noise's
expected count by this many of its standard deviations (``m + 3√m``); otherwise the frame gets the ceiling.
The F1 rule alone (bound :data:`NOISE_BOUND` at every level, scanned over 90 levels) found spots in pure
noise often: 3.05 and 0.75 false spots per volume on 20 pure-noise camera volumes of 13 × 61 × 61 and
1 × 200 × 200 voxels (``test_few_false_spots_on_pure_noise_faces_included``, where the precision rule gives
about 0.1)."""

TRUE_PER_FALSE = 9.0
""":func:`precise_threshold`'s marginal rule counts a false detection as costing this many true ones (a
detection at the threshold is at least 90 % likely a spot). Measured with the true radius on the benchmark
grid's 150-photon and sparse stacks (18 of 36), the marginal rule alone: 4 raised F1 on the faint ones more
(σ 0.6/0.2 µm, 0.5/0.2 µm voxels, 150 photons: 0.38 → 0.50 and 0.41 → 0.46) but cost the sparse bright
ones precision (0.99 → 0.97); 19 gave back most of 9's gains on the faint stacks (0.02-0.12 F1) and
changed no bright one by more than 0.003. With the fraction rule (the lower threshold of the two), all 36
grid stacks: F1 at least the fraction rule's alone − 0.003, and +0.05 to +0.21 on eight faint ones; on 18
stacks of three other PSF/voxel families, 200-800 photons, neighbours 2 and 3 µm apart, which it was not
chosen on: at least the fraction rule's alone everywhere, up to +0.14. (The detector's default threshold
until the F1 rule, :func:`automatic_threshold`.)"""

SMOOTH_SIGMA = 0.5
"""The automatic threshold's F1 rule is used where the filter's σ is at least this many voxels on every axis
filtered; below, :func:`precise_threshold` (whose 9-to-1 margin absorbs a poor noise model). The expected
number of noise maxima is that of a smooth random field (:func:`tracker.dog.expected_noise_maxima`; its
excess :data:`NOISE_EXCESS` measured at σ 0.7–2 voxels): filtered at under half a voxel the response is about
the voxels' own noise, which has more maxima. Seen on a sparse 150-photon stack of the benchmark grid with a
spot size mis-estimated from 8 spots (σ 0.1 voxel in x): the F1 rule kept 32–195 maxima a frame at
thresholds 3.7–4.35 (detection precision 0.02); the precision rule kept none (8.0) or few."""

THRESHOLD_RANGE = (3.5, 8.0)
"""Bounds of each frame's automatic threshold (SNR). The stack's threshold from its pooled maxima may go under the
floor, down to :data:`tracker.quality_mixture.FIT_FLOOR`, where its fit shows the spots outnumbering the noise
maxima there (:func:`tracker.quality_mixture.mixture_threshold`)."""


def threshold_levels() -> np.ndarray:
    """The automatic thresholds' candidates: :data:`THRESHOLD_RANGE` in steps of 0.05."""
    return np.round(np.arange(THRESHOLD_RANGE[0], THRESHOLD_RANGE[1] + 1e-9, 0.05), 2)


def automatic_threshold(peak_quality: np.ndarray, n_voxels: int, gradient_var: np.ndarray) -> float:
    """The threshold that maximises the frame's F1 as estimated from its maxima and a noise model.

    Above a level ``u`` the frame has ``found(u)`` maxima, of which noise
    explains at most ``false(u) = m + b √m`` (``m``: the expected number of
    noise maxima, :func:`tracker.dog.expected_noise_maxima` times
    :data:`NOISE_EXCESS`, from the response's smoothness and the volume;
    ``b`` = :data:`NOISE_BOUND`), so at least ``true(u) = found(u) − false(u)``
    are spots, and the frame holds at least ``N = max_u true(u)`` spots. The
    estimated F1 is ``2 true(u) / (found(u) + N)``; its maximum is where a
    further detection is a spot with probability F1 / 2, so faint, crowded
    frames (low F1) get a low threshold and accept less precision, bright
    ones a high one. Ties: the highest level. Where noise explains every
    maximum (``N = 0``, pure noise), the range's ceiling.

    Parameters
    ----------
    peak_quality : (n,) floats
        Quality of the local maxima at or above :data:`THRESHOLD_RANGE`'s floor.
    n_voxels : int
        Voxels of the volume searched.
    gradient_var : (3,) floats
        :func:`tracker.dog.gradient_variance` of the quality map.

    Returns
    -------
    float
        A level of :data:`THRESHOLD_RANGE`, in steps of 0.05 (quality units).
    """
    levels = threshold_levels()
    found = len(peak_quality) - np.searchsorted(np.sort(peak_quality), levels, side="left")
    expected = NOISE_EXCESS * expected_noise_maxima(n_voxels, gradient_var, levels)
    spread = np.sqrt(expected)
    if not np.any(found > expected + SPOT_EVIDENCE * spread):  # nothing noise does not explain: no spots
        return THRESHOLD_RANGE[1]
    true = np.maximum(found - expected - NOISE_BOUND * spread, 0.0)
    n_true = float(true.max())
    if n_true <= 0.0:
        return THRESHOLD_RANGE[1]
    f1 = 2.0 * true / (found + n_true)
    return float(levels[len(levels) - 1 - int(np.argmax(f1[::-1]))])


def precise_threshold(peak_quality: np.ndarray, n_voxels: int, gradient_var: np.ndarray,
                      false_fraction: float = FALSE_FRACTION) -> float:
    """A threshold for precision: the lower of two false-alarm rules (the detector's rule before the F1 one).

    With ``noise(u)`` the expected number of noise maxima above ``u`` (as in
    :func:`automatic_threshold`, without the bound):

    * a false-discovery-rate rule: noise explains at most ``false_fraction``
      (:data:`FALSE_FRACTION`) of the detections;
    * a marginal rule: the threshold maximises the expected true detections
      less :data:`TRUE_PER_FALSE` times the expected false ones, i.e. it is
      lowered while each further detection is at least 90 % likely a spot.

    Used to pick the spot-size estimate's candidates, where a noise maximum
    costs more than a missed spot. Parameters as :func:`automatic_threshold`.
    """
    levels = threshold_levels()
    found = len(peak_quality) - np.searchsorted(np.sort(peak_quality), levels, side="left")
    noise = NOISE_EXCESS * expected_noise_maxima(n_voxels, gradient_var, levels)
    rule_of_fractions = np.flatnonzero(noise <= false_fraction * found)
    lowest = float(levels[rule_of_fractions[0]]) if len(rule_of_fractions) else THRESHOLD_RANGE[1]
    # The marginal rule: expected true detections less TRUE_PER_FALSE false ones, at their largest (ties: the
    # highest threshold, so pure noise gets the ceiling).
    gain = found - (1.0 + TRUE_PER_FALSE) * noise
    marginal = float(levels[len(levels) - 1 - int(np.argmax(gain[::-1]))])
    return min(lowest, marginal)


def frame_thresholds(peak_quality: np.ndarray, n_voxels: int, gradient_var: np.ndarray,
                     sigma_voxels: Sequence[float], shape: Sequence[int],
                     stack_threshold: float | None = None) -> tuple[float, float]:
    """The automatic thresholds of one frame: for its spots, and for the partners of merged spots.

    Parameters
    ----------
    peak_quality : (n,) floats
        Quality of the frame's local maxima at or above :data:`THRESHOLD_RANGE`'s floor.
    n_voxels : int
        Voxels of the volume searched.
    gradient_var : (3,) floats
        :func:`tracker.dog.gradient_variance` of the quality map.
    sigma_voxels : (3,) floats
        The filter's Gaussian σ per axis ``z, y, x``, in voxels.
    shape : (3,) ints
        The volume's shape (an axis of one voxel is not filtered).
    stack_threshold : float, optional
        The stack's threshold from the maxima of several frames pooled
        (:func:`tracker.quality_mixture.estimate_threshold`): the frame's threshold is not above it.

    Returns
    -------
    threshold, split_threshold : float
        The detection threshold (:func:`automatic_threshold`, or :func:`precise_threshold` where the filter's
        σ is under :data:`SMOOTH_SIGMA` voxels on an axis filtered; at most ``stack_threshold``) and the lower
        one down to which a merged
        spot's partner is sought (the partner needs no F1 trade-off of its own: it is found only beside a
        spot kept), in quality units.
    """
    filtered = [s for s, n in zip(sigma_voxels, shape) if n > 1]
    smooth = min(filtered, default=SMOOTH_SIGMA) >= SMOOTH_SIGMA
    candidates = (peak_quality, n_voxels, gradient_var)
    precise = precise_threshold(*candidates)
    threshold = automatic_threshold(*candidates) if smooth else precise
    if stack_threshold is not None:
        threshold = min(threshold, float(stack_threshold))
    return threshold, min(threshold, precise)
