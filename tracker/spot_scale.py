"""The spot's size, per axis, measured on the stack itself (no user-given radius needed).

The brightest isolated spots of a few frames are found with a difference of
Gaussians; each one's profile along each axis (summed over a ±1σ box in the
other two axes, which for a separable Gaussian leaves the profile's shape
unchanged) is fitted by a Gaussian plus a constant background, and the median
σ over the spots is the estimate. The fit windows and the isolation distance
scale with the current estimate, which is iterated to convergence, starting
from 1 voxel; candidates are then found again at the estimated scale and the
fits repeated.

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
from .dog import dog_filter, gradient_variance, ndimage_for, quality_map

ESTIMATION_FRAMES = 3
"""Frames sampled (evenly through the stack) for the estimate."""

TARGET_SPOTS = 200
"""Spots enough for the estimate: later frames are not read once this many were fitted."""

SPOTS_PER_FRAME = 150
"""The brightest isolated spots fitted per frame."""

MIN_SPOTS = 5
"""Fewer fitted spots than this and the estimate falls back to 1 voxel per axis (``estimated=False``)."""

CANDIDATE_QUALITY = 5.0
"""Local maxima of the DoG this far above its noise are candidates (and neighbours), or less far where the
detector's automatic threshold is lower."""

ISOLATION = 4.0
"""A candidate with another within this many σ (ellipsoidal, per-axis σ) is not fitted."""

WINDOW = 4.0
"""Fit windows reach this many σ either side of the peak along the fitted axis."""

STARTING_SCALES = (1.0, 2.0, 4.0)
"""Scales (σ, voxels) at which candidates are first sought on the first frame sampled."""

MAX_VOXELS = 1 << 21
"""Larger frames are cropped to a central block of about this many voxels (in y, x) for speed."""

_SIGMA_MIN = 0.25  # voxels: the smallest σ fitted (a point-like spot sampled by one voxel)
_GRID_STEP = 1.03  # relative step of the σ grid (3 %), refined by a parabola
_CENTRE_STEP = 0.1  # voxels: the grid of sub-voxel centres, within ±1 voxel of the maximum


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
        False when too few spots were found and the scale fell back to 1 voxel.
    """

    sigma_um: tuple[float, ...]
    n_spots: int
    estimated: bool = True

    @property
    def radius_um(self) -> tuple[float, ...]:
        """The spot radius, ``√3 σ`` per axis (µm): what ``spot_radius_um`` takes."""
        return tuple(float(np.sqrt(3.0) * s) for s in self.sigma_um)

    def __str__(self) -> str:
        values = ", ".join(f"{r:.2f}" for r in self.radius_um)
        how = (f"estimated from {self.n_spots} spots" if self.estimated
               else f"1 voxel: only {self.n_spots} isolated spots to estimate it from")
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
        time, and no more once :data:`TARGET_SPOTS` spots were fitted. ``Z = 1``:
        2D, and only ``y, x`` are estimated.
    voxel_size_um : (3,) floats
        Voxel size ``z, y, x`` (µm).

    Returns
    -------
    SpotScale
        ``radius_um`` is what :func:`tracker.detect.detect_spots` takes.
    """
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    fits: list[np.ndarray] = []
    planar = True
    start = None
    for volume in frames:
        xp = get_array_module(volume)
        volume = _central_block(xp.asarray(volume, dtype=xp.float32))
        planar = volume.shape[0] == 1
        fits.append(_frame_sigmas(volume, start))
        found = np.concatenate(fits)
        found = found[np.all(np.isfinite(found), axis=1)]
        if len(found):
            start = np.median(found, axis=0)  # later frames start from the scale found so far
        if len(found) >= TARGET_SPOTS:
            break
    axes = slice(1, 3) if planar else slice(0, 3)
    sigmas = np.concatenate(fits) if fits else np.empty((0, 3))
    sigmas = sigmas[np.all(np.isfinite(sigmas[:, axes]), axis=1)]
    if len(sigmas) < MIN_SPOTS:
        return SpotScale(tuple(float(v) for v in voxel[axes]), len(sigmas), estimated=False)
    sigma_um = np.median(sigmas, axis=0) * voxel
    # A camera pixel integrates over its area, which widens the imaged spot by pixel²/12 (a box's
    # variance) in y and x; planes are point samples in z.
    in_plane = sigma_um[1:] ** 2 - voxel[1:] ** 2 / 12.0
    sigma_um[1:] = np.sqrt(np.maximum(in_plane, 0.25 * sigma_um[1:] ** 2))
    return SpotScale(tuple(float(v) for v in sigma_um[axes]), len(sigmas))


def _central_block(volume):
    """The volume, or for a large one its central block in ``y, x`` of about :data:`MAX_VOXELS` voxels."""
    z, y, x = volume.shape
    if z * y * x <= MAX_VOXELS:
        return volume
    side = max(16, int(np.sqrt(MAX_VOXELS / z)))
    y0, x0 = max(0, (y - side) // 2), max(0, (x - side) // 2)
    return volume[:, y0:y0 + side, x0:x0 + side]


def _frame_sigmas(volume, start: np.ndarray | None = None) -> np.ndarray:
    """Per-spot σ (voxels), (n, 3), of one frame's brightest isolated spots; NaN where a fit failed.

    ``start``: the scale (voxels) found on an earlier frame; without it the
    candidates are first sought at each of :data:`STARTING_SCALES` and the
    one that finds the most isolated spots is iterated (faint broad spots
    stand out only near their own scale; broad spots give several maxima each
    at too fine a scale, none of them isolated).
    """
    shape = volume.shape
    filtered = np.array([n > 1 for n in shape])
    if start is None:
        best = None
        for scale in STARTING_SCALES:
            sigma = np.where(filtered, float(scale), 0.0)
            coords, quality = _bright_maxima(volume, sigma)
            n_isolated = len(_isolated(coords, quality, sigma, shape))
            if best is None or n_isolated > best[0]:
                best = (n_isolated, sigma, coords, quality)
        n_isolated, sigma, coords, quality = best
        if n_isolated == 0:
            return np.empty((0, 3))
        start, _ = _converge(volume, coords, quality, sigma)
    coords, quality = _bright_maxima(volume, start)  # again, at the spots' own scale
    _, per_spot = _converge(volume, coords, quality, start)
    per_spot[np.isinf(per_spot)] = np.nan
    if shape[0] == 1:
        per_spot[:, 0] = 0.0
    return per_spot


def _converge(volume, coords: np.ndarray, quality: np.ndarray, sigma: np.ndarray,
              iterations: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Fit the isolated spots, rescale windows and isolation to the median σ, repeat until it moves < 2 %.

    Returns the scale (voxels, (3,)) and the last per-spot fits ((n, 3), see :func:`_fit_spots`).
    """
    shape = volume.shape
    per_spot = np.empty((0, 3))
    for _ in range(iterations):
        chosen = _isolated(coords, quality, sigma, shape)
        if len(chosen) == 0:
            break
        per_spot = _fit_spots(volume, chosen, sigma)
        new = sigma.copy()
        for axis in range(3):
            values = per_spot[:, axis][~np.isnan(per_spot[:, axis])]
            if shape[axis] > 1 and len(values):
                median = float(np.median(values))
                # Most fits wider than their window: widen it and try again.
                new[axis] = 2.0 * sigma[axis] if np.isinf(median) else median
        converged = np.all(np.abs(new - sigma) <= 0.02 * np.maximum(sigma, 1e-9))
        sigma = new
        if converged:
            break
    return sigma, per_spot


def _bright_maxima(volume, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local maxima of the DoG at scale ``sigma`` that noise hardly explains: host coords (n, 3), quality.

    Those above :data:`CANDIDATE_QUALITY`, or above the detector's automatic
    threshold where that is lower (faint spots that are many).
    """
    from .detect import THRESHOLD_RANGE, automatic_threshold

    xp = get_array_module(volume)
    quality = quality_map(dog_filter(volume, sigma), sigma)
    if quality is None:
        return np.empty((0, 3), dtype=np.int64), np.empty(0)
    size = [2 * max(1, int(round(s))) + 1 if n > 1 else 1 for s, n in zip(sigma, volume.shape)]
    peaks = (quality == ndimage_for(xp).maximum_filter(quality, size=size, mode="nearest"))
    peaks &= quality >= THRESHOLD_RANGE[0]
    coords = xp.stack(xp.nonzero(peaks), axis=1)
    values = to_numpy(quality[tuple(coords.T)]).astype(np.float64)
    coords = to_numpy(coords).astype(np.int64)
    floor = min(CANDIDATE_QUALITY, automatic_threshold(values, int(np.prod(volume.shape)), gradient_variance(quality)))
    keep = values >= floor
    coords, values = coords[keep], values[keep]
    order = np.argsort(-values, kind="stable")
    return coords[order], values[order]


def _isolated(coords: np.ndarray, quality: np.ndarray, sigma: np.ndarray, shape) -> np.ndarray:
    """Up to :data:`SPOTS_PER_FRAME` of the brightest maxima with no other within :data:`ISOLATION` σ.

    Each must also lie at least ``1.5 σ + 1`` voxels inside the volume (its
    peak within the fit windows, its box inside the volume).
    """
    if len(coords) == 0:
        return coords
    scale = np.where(sigma > 0, sigma, 1.0)
    margin = np.where(np.asarray(shape) > 1, np.ceil(1.5 * sigma) + 1, 0)
    inside = np.all((coords >= margin) & (coords <= np.asarray(shape) - 1 - margin), axis=1)
    tree = cKDTree(coords / scale)
    counts = np.array([len(n) for n in tree.query_ball_point(coords / scale, ISOLATION)])
    chosen = np.flatnonzero(inside & (counts == 1))[:SPOTS_PER_FRAME]
    return coords[chosen]


def _fit_spots(volume, coords: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """σ (voxels) of each spot along each axis: (n, 3); NaN: failed; inf: wider than the window; 0: axis of 1."""
    xp = get_array_module(volume)
    shape = volume.shape
    filtered = [n > 1 for n in shape]
    half = [max(3, int(np.ceil(WINDOW * s))) if f else 0 for s, f in zip(sigma, filtered)]
    box = [int(round(s)) if f else 0 for s, f in zip(sigma, filtered)]
    centres = xp.asarray(coords)
    index = [xp.clip(centres[:, a, None] + xp.arange(-half[a], half[a] + 1)[None, :], 0, shape[a] - 1)
             for a in range(3)]
    block = volume[index[0][:, :, None, None], index[1][:, None, :, None], index[2][:, None, None, :]]
    result = np.zeros((len(coords), 3))
    for axis in range(3):
        if not filtered[axis]:
            continue
        window = [slice(None)]
        for other in range(3):
            window.append(slice(None) if other == axis else slice(half[other] - box[other], half[other] + box[other] + 1))
        others = tuple(1 + other for other in range(3) if other != axis)
        profiles = to_numpy(block[tuple(window)].sum(axis=others)).astype(np.float64)
        offsets = np.arange(-half[axis], half[axis] + 1)
        valid = (coords[:, axis, None] + offsets[None, :] >= 0) & (coords[:, axis, None] + offsets[None, :] < shape[axis])
        result[:, axis] = fit_gaussian_profiles(profiles, valid, offsets.astype(np.float64))
    return result


def fit_gaussian_profiles(profiles: np.ndarray, valid: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Least-squares σ of ``b + a exp(-(u - μ)² / 2σ²)`` (a > 0) fitted to each 1D profile.

    A grid search over σ (3 % steps from 0.25 to the window's half-width) and
    the centre μ (0.1 voxel steps within ±1 voxel of the window's middle),
    with ``a, b`` solved in closed form at each grid point; σ is refined by a
    parabola through the best three grid values of the residual. No starting
    guess, no local minimum.

    Parameters
    ----------
    profiles : (n, L) floats
        One profile per row, sampled at ``positions`` (voxels, (L,)).
    valid : (n, L) bools
        Samples to use (False: outside the volume).

    Returns
    -------
    (n,) floats
        σ in voxels; ``inf`` where the best σ is the grid's largest (wider than
        the window), ``NaN`` where no fit with ``a > 0`` exists.
    """
    half_width = float(np.max(np.abs(positions)))
    sigmas = np.exp(np.arange(np.log(_SIGMA_MIN), np.log(max(half_width, _SIGMA_MIN * 2)), np.log(_GRID_STEP)))
    centres = np.arange(-1.0, 1.0 + 1e-9, _CENTRE_STEP)
    shapes = np.exp(-0.5 * ((positions[None, None, :] - centres[None, :, None]) / sigmas[:, None, None]) ** 2)
    shapes = shapes.reshape(-1, len(positions))  # (G, L), G = n_sigma × n_centre
    weights = valid.astype(np.float64)
    data = profiles * weights
    n = weights.sum(axis=1)[:, None]
    sum_g, sum_gg = weights @ shapes.T, weights @ (shapes**2).T
    sum_p, sum_pp = data.sum(axis=1)[:, None], (data * profiles).sum(axis=1)[:, None]
    sum_pg = data @ shapes.T
    determinant = n * sum_gg - sum_g**2
    with np.errstate(divide="ignore", invalid="ignore"):
        amplitude = (n * sum_pg - sum_g * sum_p) / determinant
        offset = (sum_p - amplitude * sum_g) / n
        residual = sum_pp - offset * sum_p - amplitude * sum_pg
    residual = np.where((amplitude > 0) & (determinant > 1e-9 * n * n), residual, np.inf)
    residual = residual.reshape(len(profiles), len(sigmas), len(centres)).min(axis=2)
    best = np.argmin(residual, axis=1)
    result = np.full(len(profiles), np.nan)
    rows = np.arange(len(profiles))
    ok = np.isfinite(residual[rows, best])
    result[ok & (best == len(sigmas) - 1)] = np.inf
    result[ok & (best == 0)] = sigmas[0]
    inner = ok & (best > 0) & (best < len(sigmas) - 1)
    r = rows[inner]
    left, middle, right = residual[r, best[r] - 1], residual[r, best[r]], residual[r, best[r] + 1]
    curvature = left - 2 * middle + right
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(np.isfinite(curvature) & (curvature > 0), 0.5 * (left - right) / curvature, 0.0)
    result[r] = np.exp(np.log(sigmas[best[r]]) + np.clip(shift, -0.5, 0.5) * np.log(_GRID_STEP))
    return result
