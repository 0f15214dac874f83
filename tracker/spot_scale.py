"""The spot's size, per axis, measured on the stack itself (no user-given radius needed).

The brightest isolated spots of a few frames are found with a difference of
Gaussians; each one's profile along each axis (summed over a ±1σ box in the
other two axes, which for a separable Gaussian leaves the profile's shape
unchanged) is fitted, all spots together, by Gaussians of one common σ, each
with its own amplitude and background and centred where the filter put the
spot (:func:`tracker.profile_fit.fit_common_sigma`). The spots are located on one sub-lattice of
the frame (its even or odd planes along ``y`` or ``x``) and their profiles
taken from the other, whose noise is independent (:class:`_Half`): located
and fitted on the same voxels, faint spots' widths are biased towards the
scale they were sought at. The centres' own scatter, which widens the fit, is
measured from the two halves' independent positions of the same spots and
subtracted (:func:`_centre_variance`). The fit windows and the isolation distance scale
with the current estimate, which is iterated to convergence, starting from
the scale of :data:`STARTING_SCALES` at which most isolated spots stand out;
candidates are then found again at the estimated scale and the fit repeated.

The σ reported is the PSF's: the imaged spot's σ in ``y, x`` less the
pixel's width (a camera pixel integrates over its area, which adds
``pixel²/12`` to the variance); in ``z``, where planes are point samples, the
imaged σ. The radius is ``√3 σ`` (TrackMate's convention, as ``--spot-radius``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from .backend import get_array_module, to_numpy
from .dog import as_float32, dog_filter, expected_noise_maxima, gradient_variance, quality_map
from .parallel_frames import map_in_order
from .profile_fit import fit_common_sigma
from .quality_mixture import most_evident_scale

ESTIMATION_FRAMES = 10
"""Frames sampled (evenly through the stack) for the estimate, read until :data:`TARGET_SPOTS` were found.
Sparse stacks need many: on the benchmark's stacks of ~10 spots a frame, 400 photons and up, 3 frames gave
17-44 spots to fit and 10 gave 57-143 (radius then within 15 % on all 12 but one z at 1.150)."""

TARGET_SPOTS = 200
"""Spots enough for the estimate: later frames are not read once this many were fitted."""

SPOTS_PER_FRAME = 150
"""The brightest isolated spots fitted per frame."""

MIN_SPOTS = 5
"""Fewer fitted spots than this and the estimate falls back to 1 voxel per axis (``estimated=False``)."""

CANDIDATE_QUALITY = 5.0
"""Local maxima of the DoG this far above its noise are candidates (and neighbours), or less far where the
detector's automatic threshold is lower."""

HALF_FALSE_FRACTION = 0.25
"""Maxima of a half frame (:class:`_Half`) are located and fitted above the lowest quality at which noise
would explain at most this fraction of them, counted over all frames sampled (:func:`_pooled_floor`). Noise
maxima among them cost no bias, as their profiles come from the other half's independent noise, only
precision. On the benchmark grid a floor of 3.5 (all maxima) let noise take over sparse 150-photon stacks
(4 of 101 spots real: σ 0.27-1.2 of the truth); 0.1 and 0.25 gave estimates within 0.04 of each other
from 400 photons up, and 0.25 kept one more 150-photon stack estimated (confocal-like PSF, 0.3/0.1 µm
voxels: 1.02, 0.83, 1.01 of the truth; 0.1: too few spots). Measured before the centres' scatter was
subtracted (:func:`_centre_variance`)."""

ISOLATION = 4.0
"""A candidate with another within this many σ (ellipsoidal, per-axis σ) is not fitted."""

WINDOW = 4.0
"""Fit windows reach this many σ either side of the peak along the fitted axis."""

STARTING_SCALES = (1.0, 2.0, 4.0)
"""Scales (σ, voxels) at which candidates are first sought on the first frame sampled."""

FALLBACK_SCALES = (1.0, 2**0.5, 2.0, 2**1.5, 4.0)
"""Filter scales (σ, voxels; a half-octave ladder over :data:`STARTING_SCALES`' range) among which the
fallback of a failed estimate is the one where the frames' maxima show spots most clearly
(:func:`tracker.quality_mixture.most_evident_scale`). On the 8 benchmark and held-out stacks whose estimate
failed (150-200 photons), the scale of most evidence gave the best detection F1 of the five on each of the 6
compared (the other 2, spots of σ 2 voxels, took 2). With 1, 2 and 4 alone, 4 of them were 0.03-0.10 below it
(spots of σ 1.17/1.5 voxels: 0.814 at 2 against 0.842 at √2, RMSE 162 against 137 nm; σ 3.2/2.5 voxels: 0.264
at 2 against 0.361 at 2.83)."""

MAX_VOXELS = 1 << 21
"""Larger frames are cropped to a central block of about this many voxels (in y, x) for speed."""



@dataclass(frozen=True)
class SpotScale:
    """The spot size estimated from a stack.

    Attributes
    ----------
    sigma_um : tuple of floats
        Gaussian σ of the imaged spot per axis, ``z, y, x`` (µm); ``y, x`` for 2D.
    n_spots : int
        Spots whose fits the estimate is the median of.
    estimated : bool
        False when too few spots were found to fit: the scale is then the
        filter scale (of :data:`FALLBACK_SCALES`) at which the frames' maxima
        show spots most clearly (:func:`tracker.quality_mixture.most_evident_scale`),
        or where none do, at which most isolated spots stood out (``coarse``);
        or 1 voxel where none did.
    coarse : bool
        The filter scale of a failed estimate (see ``estimated``).
    """

    sigma_um: tuple[float, ...]
    n_spots: int
    estimated: bool = True
    coarse: bool = False

    @property
    def radius_um(self) -> tuple[float, ...]:
        """The spot radius, ``√3 σ`` per axis (µm): what ``spot_radius_um`` takes."""
        return tuple(float(np.sqrt(3.0) * s) for s in self.sigma_um)

    def __str__(self) -> str:
        values = ", ".join(f"{r:.2f}" for r in self.radius_um)
        if self.estimated:
            how = f"estimated from {self.n_spots} spots"
        elif self.coarse:
            how = (f"not estimated: only {self.n_spots} isolated spots to fit; the filter scale at which spots "
                   "stood out most")
        else:
            how = f"1 voxel: only {self.n_spots} isolated spots to estimate it from"
        return f"spot radius {values} µm ({how})"


def frames_to_sample(n_frames: int, count: int = ESTIMATION_FRAMES) -> list[int]:
    """``count`` frame indices spread evenly over ``n_frames`` (first and last included)."""
    if n_frames <= 0:
        return []
    return sorted({int(round(t)) for t in np.linspace(0, n_frames - 1, min(count, n_frames))})


def estimate_spot_radius(frames: Iterable, voxel_size_um: Sequence[float]) -> SpotScale:
    """Estimate the spot's Gaussian scale per axis from the brightest isolated spots.

    Parameters
    ----------
    frames : iterable of (Z, Y, X) arrays, NumPy or CuPy
        A few frames of the stack (see :func:`frames_to_sample`); read one at a
        time, and no more once :data:`TARGET_SPOTS` spots were found. ``Z = 1``:
        2D, and only ``y, x`` are estimated.
    voxel_size_um : (3,) floats
        Voxel size ``z, y, x`` (µm).

    Returns
    -------
    SpotScale
        ``radius_um`` is what :func:`tracker.detect.detect_spots` takes.
    """
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    samples: list[_Sample] = []
    volumes = []
    sigma = start = None
    planar = True
    for volume in frames:
        volume = _central_block(as_float32(volume))
        volumes.append(volume)
        planar = volume.shape[0] == 1
        if sigma is None:
            sigma = start = _starting_scale(volume)
            if sigma is None:
                continue
        samples.append(_Sample.find(volume, sigma))
        sigma, n_spots = _converge(samples, sigma)
        if n_spots >= TARGET_SPOTS:
            break
    n_spots = 0
    if samples:
        # Candidates again at the estimated scale (faint spots stand out best at their own), and the fit repeated.
        samples = _map(lambda sample: _Sample.find(sample.volume, sigma), samples, samples[0].volume)
        sigma, n_spots = _converge(samples, sigma)
    axes = slice(1, 3) if planar else slice(0, 3)
    if n_spots < MIN_SPOTS or not np.all(np.isfinite(sigma)):
        evident = most_evident_scale(volumes, voxel, FALLBACK_SCALES)
        if evident is not None:  # (else the scale at which most isolated spots stood out, if any did)
            start = np.where(np.array(volumes[0].shape) > 1, evident[0], 0.0)
        if start is None:
            return SpotScale(tuple(float(v) for v in voxel[axes]), n_spots, estimated=False)
        return SpotScale(tuple(float(v) for v in (start * voxel)[axes]), n_spots, estimated=False, coarse=True)
    sigma_um = np.asarray(sigma, dtype=np.float64) * voxel
    # A camera pixel integrates over its area, which widens the imaged spot by pixel²/12 (a box's
    # variance) in y and x; planes are point samples in z.
    in_plane = sigma_um[1:] ** 2 - voxel[1:] ** 2 / 12.0
    sigma_um[1:] = np.sqrt(np.maximum(in_plane, 0.25 * sigma_um[1:] ** 2))
    return SpotScale(tuple(float(v) for v in sigma_um[axes]), n_spots)


def _central_block(volume):
    """The volume, or for a large one its central block in ``y, x`` of about :data:`MAX_VOXELS` voxels."""
    z, y, x = volume.shape
    if z * y * x <= MAX_VOXELS:
        return volume
    side = max(16, int(np.sqrt(MAX_VOXELS / z)))
    y0, x0 = max(0, (y - side) // 2), max(0, (x - side) // 2)
    return volume[:, y0:y0 + side, x0:x0 + side]


def _split_axis(axis: int, shape: Sequence[int]) -> int | None:
    """The in-plane axis (``y`` or ``x``, not ``axis``) along which a frame is split into two sub-lattices to
    fit ``axis``: the longer one; None where neither has 8 voxels."""
    options = [b for b in (1, 2) if b != axis and shape[b] >= 8]
    return max(options, key=lambda b: shape[b]) if options else None


@dataclass(frozen=True)
class _Half:
    """A frame split along ``axis`` into its even and odd planes (sub-lattices with independent noise): the
    bright maxima found on the planes of parity ``parity``, host coords (n, 3), quality (n,), sub-voxel
    offsets (n, 3); their profiles are fitted on the other planes.

    Locating a spot and measuring its width on the same voxels biases the width
    towards the scale it was sought at: the maximum sits on a noise bump of the
    filter's width, which the fit then takes for part of the spot. On the
    confocal-like benchmark stack (0.3, 0.1, 0.1 µm voxels, 150 photons) the
    joint fit on the same voxels drifted from the truth to 0.63 of it in
    ``y`` over ten iterations, from any starting scale. Each frame gives both
    halves (even locates, odd is fitted, and the reverse), so no spot is lost.
    """

    locate: object
    fit: object
    axis: int | None
    parity: int
    coords: np.ndarray
    quality: np.ndarray
    offsets: np.ndarray
    noise_model: tuple

    @classmethod
    def find(cls, volume, axis: int | None, parity: int, sigma: np.ndarray) -> _Half:
        if axis is None:  # too small to split: both on the same voxels
            locate = fit = volume
        else:
            mine, other = [slice(None)] * 3, [slice(None)] * 3
            mine[axis], other[axis] = slice(parity, None, 2), slice(1 - parity, None, 2)
            locate, fit = volume[tuple(mine)], volume[tuple(other)]
        return cls(locate, fit, axis, parity, *_bright_maxima(locate, _half_scale(sigma, axis), everything=True))

    def chosen(self, sigma: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The isolated maxima at or above ``floor``: their coords on the other sub-lattice, their sub-voxel
        offsets (:func:`_isolated`), and where they were located in the whole frame (voxels, (n, 3))."""
        keep = self.quality >= floor
        coords, offsets = _isolated(self.coords[keep], self.quality[keep], _half_scale(sigma, self.axis),
                                    self.locate.shape, self.offsets[keep])
        located = coords + offsets
        if self.axis is not None and len(coords):
            # Plane k of parity r lies at 2k + r: the spot at 2(k + offset) + r is nearest plane
            # round(k + offset + (r - r')/2) of the other parity r'.
            located[:, self.axis] = 2.0 * located[:, self.axis] + self.parity
            coords = coords.copy()
            shift = self.parity - 0.5
            coords[:, self.axis] = np.clip(np.rint(coords[:, self.axis] + offsets[:, self.axis] + shift),
                                           0, self.fit.shape[self.axis] - 1).astype(np.int64)
        return coords, offsets, located


def _half_scale(sigma: np.ndarray, axis: int | None) -> np.ndarray:
    """The scale (voxels) on a sub-lattice of every second plane along ``axis``."""
    sigma = np.asarray(sigma, dtype=np.float64).copy()
    if axis is not None:
        sigma[axis] *= 0.5
    return sigma


@dataclass(frozen=True)
class _Sample:
    """One frame's halves (:class:`_Half`, both parities of each split axis) and the split axis each fitted
    axis uses (-1: an axis of one voxel, not fitted)."""

    volume: object
    halves: dict
    uses: tuple

    @classmethod
    def find(cls, volume, sigma: np.ndarray) -> _Sample:
        shape = volume.shape
        uses = tuple(_split_axis(a, shape) if shape[a] > 1 else -1 for a in range(3))
        which = [(b, parity) for b in dict.fromkeys(u for u in uses if u != -1)
                 for parity in ((0,) if b is None else (0, 1))]
        found = _map(lambda half: _Half.find(volume, *half, sigma), which, volume)
        halves: dict = {}
        for (b, _), half in zip(which, found):
            halves.setdefault(b, []).append(half)
        return cls(volume, halves, uses)


def _starting_scale(volume) -> np.ndarray | None:
    """Of :data:`STARTING_SCALES`, the scale (voxels, (3,)) at which most isolated maxima stand out; None: none.

    Faint broad spots stand out only near their own scale; broad spots give
    several maxima each at too fine a scale, none of them isolated.
    """
    filtered = np.array([n > 1 for n in volume.shape])
    sigmas = [np.where(filtered, float(scale), 0.0) for scale in STARTING_SCALES]

    def n_isolated(sigma: np.ndarray) -> int:
        coords, quality, _, _ = _bright_maxima(volume, sigma)
        return len(_isolated(coords, quality, sigma, volume.shape)[0])

    counts = _map(n_isolated, sigmas, volume)
    best = int(np.argmax(counts))  # (the first of equal counts, as a loop would keep it)
    return sigmas[best] if counts[best] > 0 else None


def _map(function, items, volume) -> list:
    """``function`` of every item, on the CPU's cores for a NumPy ``volume`` (SciPy's filters release the GIL;
    :func:`tracker.parallel_frames.map_in_order`), one after another on the GPU."""
    if get_array_module(volume) is np:
        return map_in_order(function, items)
    return [function(item) for item in items]


def _converge(samples: list[_Sample], sigma: np.ndarray, iterations: int = 8) -> tuple[np.ndarray, int]:
    """Fit the isolated spots of all samples jointly; rescale windows and isolation to the fit; repeat until
    it moves < 2 %.

    Returns the scale (voxels, (3,)) and the number of spots of the last fit
    (the fewest of any axis).
    """
    n_spots = 0
    for _ in range(iterations):
        new, n_spots = _fit_common_sigma(samples, sigma)
        if n_spots == 0:
            break
        converged = np.all(np.abs(new - sigma) <= 0.02 * np.maximum(sigma, 1e-9))
        sigma = new
        if converged:
            break
    return sigma, n_spots


def _bright_maxima(volume, sigma: np.ndarray, everything: bool = False):
    """Local maxima of the DoG at scale ``sigma`` that noise hardly explains: host coords (n, 3), quality,
    sub-voxel offsets (n, 3) of a parabola through each and its neighbours, and the noise model (voxels,
    :func:`tracker.dog.gradient_variance`) that predicts how many noise maxima exceed a quality.

    Those above :data:`CANDIDATE_QUALITY`, or above :func:`tracker.threshold.precise_threshold`
    where that is lower (faint spots that are many); with
    ``everything``, all above the detector's floor (the caller chooses).
    """
    from .detect import local_maxima, quadratic_offsets
    from .threshold import THRESHOLD_RANGE, precise_threshold

    quality = quality_map(dog_filter(volume, sigma), sigma)
    n_voxels = int(np.prod(volume.shape))
    if quality is None:
        return np.empty((0, 3), dtype=np.int64), np.empty(0), np.empty((0, 3)), (n_voxels, np.zeros(3))
    size = [2 * max(1, int(round(s))) + 1 if n > 1 else 1 for s, n in zip(sigma, volume.shape)]
    coords, values = local_maxima(quality, size, THRESHOLD_RANGE[0])
    values = values.astype(np.float64)
    offsets = to_numpy(quadratic_offsets(quality, coords)).astype(np.float64)
    coords = to_numpy(coords).astype(np.int64)
    noise_model = (n_voxels, gradient_variance(quality))
    if not everything:
        keep = values >= min(CANDIDATE_QUALITY, precise_threshold(values, *noise_model))
        coords, values, offsets = coords[keep], values[keep], offsets[keep]
    order = np.argsort(-values, kind="stable")
    return coords[order], values[order], offsets[order], noise_model


def _pooled_floor(halves: list[_Half]) -> float:
    """The lowest quality above which noise would explain at most :data:`HALF_FALSE_FRACTION` of the maxima
    of all ``halves`` together (:func:`tracker.threshold.precise_threshold`'s first rule, pooled over frames: a
    sparse frame alone holds too few spots to tell them from noise)."""
    from .threshold import NOISE_EXCESS, THRESHOLD_RANGE

    levels = np.arange(THRESHOLD_RANGE[0], THRESHOLD_RANGE[1] + 1e-9, 0.05)
    found = np.zeros(len(levels))
    noise = np.zeros(len(levels))
    for half in halves:
        found += len(half.quality) - np.searchsorted(np.sort(half.quality), levels, side="left")
        noise += NOISE_EXCESS * expected_noise_maxima(*half.noise_model, levels)
    good = np.flatnonzero(noise <= HALF_FALSE_FRACTION * found)
    return float(levels[good[0]]) if len(good) else THRESHOLD_RANGE[1]


def _isolated(coords: np.ndarray, quality: np.ndarray, sigma: np.ndarray, shape,
              offsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Up to :data:`SPOTS_PER_FRAME` of the brightest maxima with no other within :data:`ISOLATION` σ:
    their coords and (when given) sub-voxel offsets.

    Each must also lie at least ``1.5 σ + 1`` voxels inside the volume (its
    peak within the fit windows, its box inside the volume).
    """
    if len(coords) == 0:
        return coords, (offsets if offsets is not None else np.empty((0, 3)))
    scale = np.where(sigma > 0, sigma, 1.0)
    margin = np.where(np.asarray(shape) > 1, np.ceil(1.5 * sigma) + 1, 0)
    inside = np.all((coords >= margin) & (coords <= np.asarray(shape) - 1 - margin), axis=1)
    tree = cKDTree(coords / scale)
    counts = np.array([len(n) for n in tree.query_ball_point(coords / scale, ISOLATION)])
    chosen = np.flatnonzero(inside & (counts == 1))[:SPOTS_PER_FRAME]
    return coords[chosen], (offsets[chosen] if offsets is not None else np.zeros((len(chosen), 3)))


def _profiles(volume, coords: np.ndarray, sigma: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """Per axis, each spot's profile summed over a ±σ box in the other two axes: ``(profiles (n, L), valid
    (n, L), positions (L,))`` (voxels from the spot's voxel); None for an axis of one voxel."""
    xp = get_array_module(volume)
    shape = volume.shape
    filtered = [n > 1 for n in shape]
    half = [max(3, int(np.ceil(WINDOW * s))) if f else 0 for s, f in zip(sigma, filtered)]
    box = [int(round(s)) if f else 0 for s, f in zip(sigma, filtered)]
    if xp is np:
        centres = xp.asarray(coords)
        index = [xp.clip(centres[:, a, None] + xp.arange(-half[a], half[a] + 1)[None, :], 0, shape[a] - 1)
                 for a in range(3)]
        block = volume[index[0][:, :, None, None], index[1][:, None, :, None], index[2][:, None, None, :]]
    else:  # the same sums from a shipped kernel, without gathering the block
        from . import detect_gpu

        sums = detect_gpu.profile_sums(volume, coords, half, box)
    result = []
    for axis in range(3):
        if not filtered[axis]:
            result.append(None)
            continue
        window = [slice(None)]
        for other in range(3):
            window.append(slice(None) if other == axis else slice(half[other] - box[other], half[other] + box[other] + 1))
        others = tuple(1 + other for other in range(3) if other != axis)
        profiles = to_numpy(block[tuple(window)].sum(axis=others)).astype(np.float64) if xp is np else sums[axis]
        offsets = np.arange(-half[axis], half[axis] + 1)
        valid = (coords[:, axis, None] + offsets[None, :] >= 0) & (coords[:, axis, None] + offsets[None, :] < shape[axis])
        result.append((profiles, valid, offsets.astype(np.float64)))
    return result


def _fit_common_sigma(samples: list[_Sample], sigma: np.ndarray) -> tuple[np.ndarray, int]:
    """The σ per axis (voxels, (3,)) that fits the isolated spots of all samples best together
    (:func:`fit_common_sigma`: each spot centred where one half of its frame puts it, its profile from the
    other), less the centres' own scatter (:func:`_centre_variance`), and the fewest spots any axis was
    fitted on; an axis of one voxel: 0."""
    new = np.zeros(3)
    counts = []
    floors = {b: _pooled_floor([h for sample in samples for h in sample.halves[b]]) for b in samples[0].halves}
    chosen = [{b: [half.chosen(sigma, floors[b]) for half in halves] for b, halves in sample.halves.items()}
              for sample in samples]
    for axis in range(3):
        if samples and samples[0].uses[axis] == -1:
            continue
        parts = []
        for sample, picks in zip(samples, chosen):
            for half, (coords, offsets, _) in zip(sample.halves[sample.uses[axis]], picks[sample.uses[axis]]):
                if len(coords):
                    profiles = _profiles(half.fit, coords, _half_scale(sigma, half.axis))[axis]
                    parts.append((*profiles, offsets[:, axis]))
        counts.append(sum(len(p[0]) for p in parts))
        if not parts:
            return sigma, 0
        fitted = fit_common_sigma(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                                  parts[0][2], np.concatenate([p[3] for p in parts]))
        if np.isnan(fitted):  # no spot with a positive amplitude on this axis
            return sigma, 0
        if np.isinf(fitted):  # wider than the window: widen it and try again
            new[axis] = 2.0 * sigma[axis]
            continue
        scatter = _centre_variance([picks[samples[0].uses[axis]] for picks in chosen], sigma, axis)
        new[axis] = np.sqrt(max(fitted**2 - scatter, 0.25 * fitted**2))
    return new, min(counts) if counts else 0


def _centre_variance(picks: list[list], sigma: np.ndarray, axis: int) -> float:
    """The variance (voxels²) along ``axis`` of a spot's centre as one half of a frame locates it.

    A profile centred off the spot's true centre by ``ε`` looks wider: the
    joint fit returns about ``σ² + var ε``. The two halves of a frame locate
    the same spot with independent noise, so the difference of the two
    positions has twice that variance (robustly, from its median absolute
    deviation over spots found in both, mutual nearest within one σ). 0 with
    fewer than :data:`MIN_SPOTS` such pairs, or a frame not split.
    """
    differences = []
    scale = np.where(sigma > 0, sigma, 1.0)
    for halves in picks:
        if len(halves) != 2 or len(halves[0][2]) == 0 or len(halves[1][2]) == 0:
            continue
        first, second = halves[0][2], halves[1][2]
        distance, nearest = cKDTree(second / scale).query(first / scale)
        _, back = cKDTree(first / scale).query(second / scale)
        mutual = (distance <= 1.0) & (back[nearest] == np.arange(len(first)))
        differences.append(first[mutual, axis] - second[nearest[mutual], axis])
    differences = np.concatenate(differences) if differences else np.empty(0)
    if len(differences) < MIN_SPOTS:
        return 0.0
    spread = 1.4826 * float(np.median(np.abs(differences - np.median(differences))))
    return 0.5 * spread**2
