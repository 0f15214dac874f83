"""Spot detection in 3D: difference of Gaussians, local maxima, sub-voxel refinement.

The filter is matched to the spot's size per axis (given, or estimated by
:mod:`tracker.spot_scale`); its response is divided by its noise at each
voxel (:mod:`tracker.dog`: the faces are noisier), and the threshold on that
signal-to-noise ratio is chosen per frame from the expected number of noise
maxima (:mod:`tracker.threshold`). Spots merged by the filter
are split by a sharper band-pass (:func:`_split_close_spots`).

Every function takes NumPy or CuPy volumes and computes with the matching
array module (NumPy and ``scipy.ndimage``, or the GPU kernels of
:mod:`tracker.ndimage_gpu` and :mod:`tracker.detect_gpu`); only scalars and
the local maxima (coordinates and values) come back to the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.ndimage
from scipy.spatial import cKDTree

from .backend import get_array_module, to_numpy
from .dog import (as_float32, difference, filter_sigmas, gradient_variance, ndimage_for, noise_level, quality_map,
                  sample_median, smoothed_and_dog, standardized)
from .params import DETECTION_DEFAULTS
from .tables import Table, empty_detections
from .threshold import THRESHOLD_RANGE, frame_thresholds

DEFAULT_THRESHOLD = DETECTION_DEFAULTS.threshold
"""Default detection threshold, in units of the filter response's local noise; None: chosen per frame
(:func:`tracker.threshold.automatic_threshold`)."""

SPLIT_SCALE = 0.5
"""The sharp response that splits merged spots is the volume smoothed at this fraction of the spot's σ,
less the volume smoothed at σ (about a LoG at 0.7 σ, for one Gaussian filter instead of a LoG's three).
On the benchmark's densest bright stack (σ 0.6, 0.2, 0.2 µm, voxel 0.5, 0.2, 0.2 µm, 1500 photons,
neighbours 1.5 µm apart) recall was 0.92, 0.91, 0.90 at 0.5, 0.6, 0.7 (precision 1.0; RMSE 103, 93,
91 nm: split spots are located on the sharper, noisier response); at 400 photons on 0.3, 0.1, 0.1 µm
voxels F1 0.967, 0.960, 0.950. A LoG at σ itself (the blob detectors' scale) reached recall 0.89.
(Measured with sharp maxima 0.6 radius apart. As now, maxima half a radius apart kept apart across a dip
(:data:`SPLIT_DIP`): recall 0.92 and 0.95 on those two stacks, F1 0.956 and 0.973; blob_log at its oracle
threshold 0.959 and 0.977.)"""


SPLIT_DIP = 0.8
"""Two sharp maxima within a radius are separate spots only where the sharp response between them falls
below this fraction of the lower one ..."""

DIP_SIGNIFICANCE = 3.0
"""... and by at least this many of its noise units (faint spots' sharp response is noisy enough to dip
by 2 between two maxima of one spot: in 2D at 800 photons, 0.75-1.5 pixel band-pass, peaks 5-7)."""


def spot_sigma_voxels(spot_radius_um: float | Sequence[float], voxel_size_um: Sequence[float]) -> np.ndarray:
    """Gaussian spot scale per axis, in voxels, for spots of radius ``spot_radius_um``.

    The radius is ``sqrt(3)`` times the spot's Gaussian standard deviation
    (TrackMate's convention). A single radius is isotropic in µm, hence
    anisotropic in voxels; three values ``z, y, x`` (µm) fit an elongated PSF.
    """
    return (np.asarray(spot_radius_um, dtype=np.float64) / np.sqrt(3.0)) / np.asarray(voxel_size_um, dtype=np.float64)


def radius_per_axis(spot_radius_um: float | Sequence[float], shape: Sequence[int]) -> np.ndarray:
    """The spot radius as ``z, y, x`` (µm) for a volume of ``shape``.

    One value: isotropic. Three: ``z, y, x``. Two: ``y, x`` of a single-plane
    (2D) volume, whose ``z`` is never filtered.

    Raises
    ------
    ValueError
        If the radius is not positive or has the wrong number of values.
    """
    radius = np.atleast_1d(np.asarray(spot_radius_um, dtype=np.float64))
    if radius.ndim != 1 or len(radius) not in (1, 2, 3):
        raise ValueError(f"spot radius must be one value or one per axis, got {spot_radius_um}")
    if len(radius) == 2:
        if shape[0] != 1:
            raise ValueError(f"two spot radii (y, x) need a single-plane volume, got {shape[0]} planes")
        radius = np.array([radius[0], radius[0], radius[1]])
    radius = np.broadcast_to(radius, (3,)).astype(np.float64)
    if not np.all(np.isfinite(radius) & (radius > 0)):
        raise ValueError(f"spot radius must be positive, got {spot_radius_um} µm")
    return radius


def maxima_footprint(radius_um: np.ndarray, voxel_size_um: Sequence[float], shape: Sequence[int]) -> list[int]:
    """The neighbourhood a spot's maximum is the largest of: one spot radius each way (at least one voxel), in
    voxels per axis ``z, y, x`` (1 along an axis of one voxel)."""
    radius_vox = np.asarray(radius_um, dtype=np.float64) / np.asarray(voxel_size_um, dtype=np.float64)
    return [2 * max(1, int(np.floor(r))) + 1 if n > 1 else 1 for r, n in zip(radius_vox, shape)]


def detect_spots(
    volume,
    voxel_size_um: Sequence[float],
    spot_radius_um: float | Sequence[float] | None = DETECTION_DEFAULTS.spot_radius_um,
    threshold: float | None = None,
    frame: int = 0,
    stack_threshold: float | None = None,
) -> Table:
    """Find spots in one 3D volume with sub-voxel precision.

    Parameters
    ----------
    volume : (Z, Y, X) array, NumPy or CuPy
        One frame. ``Z`` may be 1 (2D data).
    voxel_size_um : (3,) floats
        Voxel size ``z, y, x`` in µm.
    spot_radius_um : float, (3,) or (2,) floats, or None
        Typical spot radius in µm (``√3 ×`` the spot's Gaussian σ): one value,
        ``z, y, x``, or ``y, x`` for a single plane. Sets the filter scale and
        the minimum distance between two spots. None: estimated from this
        volume (:func:`tracker.spot_scale.estimate_spot_radius`); for a
        stack, estimate once and pass the result, so every frame uses one scale.
    threshold : float, optional
        Minimum ``quality``: the DoG response in units of its local noise (a
        signal-to-noise ratio). Default :data:`DEFAULT_THRESHOLD`; None:
        chosen for this frame by :func:`tracker.threshold.frame_thresholds`.
    frame : int
        Written into the ``frame`` column.
    stack_threshold : float, optional
        With ``threshold=None``: the stack's threshold from several frames
        pooled (:func:`tracker.quality_mixture.estimate_threshold`);
        this frame's is not above it.

    Returns
    -------
    Table
        ``frame``; ``z, y, x`` in µm; ``z_vox, y_vox, x_vox`` in voxels;
        ``intensity`` (smoothed peak above the frame's median, in counts);
        ``quality`` (see ``threshold``). Sorted by decreasing quality, then
        position, so the order is deterministic.

    Raises
    ------
    ValueError
        If the volume is not 3D, holds NaN or infinite values, or the radius
        is not positive.
    """
    xp = get_array_module(volume)
    volume = xp.asarray(volume)
    if volume.ndim != 3:
        raise ValueError(f"expected a (Z, Y, X) volume, got shape {tuple(volume.shape)}")
    if volume.dtype.kind == "f" and not all_finite(volume):
        raise ValueError(f"frame {frame} contains NaN or infinite values")
    if spot_radius_um is None:
        from .spot_scale import estimate_spot_radius

        spot_radius_um = estimate_spot_radius([volume], voxel_size_um).radius_um
    radius = radius_per_axis(spot_radius_um, volume.shape)
    threshold = DEFAULT_THRESHOLD if threshold is None else float(threshold)
    automatic = threshold is None
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    sigma = spot_sigma_voxels(radius, voxel)

    smoothed, response = smoothed_and_dog(volume, sigma)
    quality = quality_map(response, sigma)
    if quality is None:  # a constant volume has no spots
        return _with_voxel_columns(empty_detections(), frame)

    # Local maxima within one spot radius (at least one voxel each way).
    footprint_size = maxima_footprint(radius, voxel, volume.shape)
    floor = min(THRESHOLD_RANGE[0], stack_threshold if stack_threshold is not None else np.inf)  # (the stack's
    # threshold may be under the range, quality_mixture.mixture_threshold)
    coords, values = local_maxima(quality, footprint_size, floor if automatic else threshold)
    if automatic:
        threshold, split_threshold = frame_thresholds(values, int(np.prod(volume.shape)), gradient_variance(quality),
                                                      sigma, volume.shape, stack_threshold)
        coords = coords[values >= threshold]
    else:
        split_threshold = threshold
    coords, split_coords, sharp = _split_close_spots(volume, smoothed, sigma, quality, coords, footprint_size,
                                                     split_threshold)
    if coords.shape[0] + split_coords.shape[0] == 0:
        return _with_voxel_columns(empty_detections(), frame)

    offsets = to_numpy(quadratic_offsets(quality, coords))
    if split_coords.shape[0]:  # the split spots are refined on the sharper response that resolved them
        offsets = np.concatenate([offsets, to_numpy(quadratic_offsets(sharp, split_coords))])
        coords = np.concatenate([coords, split_coords])
    sub_voxel = coords.astype(np.float64) + offsets
    peak_quality = values_at(quality, coords)
    intensity = values_at(smoothed, coords) - sample_median(smoothed)

    sub_voxel = to_numpy(sub_voxel)
    peak_quality = to_numpy(peak_quality).astype(np.float64)
    intensity = to_numpy(intensity).astype(np.float64)
    order = np.lexsort((sub_voxel[:, 2], sub_voxel[:, 1], sub_voxel[:, 0], -peak_quality))
    sub_voxel, peak_quality, intensity = sub_voxel[order], peak_quality[order], intensity[order]
    positions = sub_voxel * voxel
    return {
        "frame": np.full(len(order), frame, dtype=np.int64),
        "z": positions[:, 0],
        "y": positions[:, 1],
        "x": positions[:, 2],
        "intensity": intensity,
        "quality": peak_quality,
        "z_vox": sub_voxel[:, 0],
        "y_vox": sub_voxel[:, 1],
        "x_vox": sub_voxel[:, 2],
    }


def all_finite(volume) -> bool:
    """Whether ``volume`` (NumPy or CuPy) holds no NaN or infinite value."""
    if get_array_module(volume) is np:
        return bool(np.isfinite(volume).all())
    from . import detect_gpu

    return detect_gpu.all_finite(volume)


def is_constant(volume) -> bool:
    """Whether every voxel of ``volume`` (NumPy or CuPy) has one value (a blank frame)."""
    if get_array_module(volume) is np:
        return float(volume.max()) == float(volume.min())
    from . import detect_gpu

    return detect_gpu.is_constant(volume)


def local_maxima(image, size: Sequence[int], floor: float, other=None) -> tuple[np.ndarray, np.ndarray]:
    """The voxels where ``image`` is the maximum of its box of ``size`` voxels (mode "nearest") and at least
    ``floor`` (``other`` too, where given): host coords (n, 3) in C order and ``image``'s values there.

    On the GPU from shipped kernels (:func:`tracker.detect_gpu.local_maxima`), the same voxels and values.
    """
    if get_array_module(image) is not np:
        from . import detect_gpu

        return detect_gpu.local_maxima(image, size, floor, other)
    peaks = (image == scipy.ndimage.maximum_filter(image, size=size, mode="nearest")) & (image >= floor)
    if other is not None:
        peaks &= other >= floor
    return np.stack(np.nonzero(peaks), axis=1), image[peaks]


def values_at(image, coords: np.ndarray) -> np.ndarray:
    """``image[tuple(coords.T)]`` on the host, for (n, 3) integer ``coords`` (NumPy)."""
    if get_array_module(image) is np:
        return image[tuple(coords.T)]
    from . import detect_gpu

    return detect_gpu.values_at(image, coords)


def _split_close_spots(volume, smoothed, sigma: np.ndarray, quality, coords, footprint_size, threshold: float):
    """Resolve spots closer than about two radii, which the matched filter merges into one maximum.

    The DoG at the spot's scale smooths two spots ``d`` apart into one peak
    when ``d`` is below about 1.6–2 radii. A sharper band-pass (the volume at
    :data:`SPLIT_SCALE` σ minus at σ, about a Laplacian of Gaussian at 0.7 σ,
    the blob detectors' filter) resolves them: where a maximum of the DoG has
    two or more maxima of the sharp response within two radii (each
    significant in the sharp response's own noise and in the DoG's), those
    replace it and the DoG maxima they cover. A lone spot has one sharp
    maximum and keeps its DoG maximum (the better localised; at low SNR the
    only significant one).

    Parameters
    ----------
    volume, smoothed
        The frame and its Gaussian smoothing at σ (the DoG's centre).
    coords : (n, 3) int array
        The DoG maxima at or above ``threshold``.
    footprint_size : (3,) ints
        The maxima's footprint (``2 h + 1`` voxels per axis).

    Returns
    -------
    kept, added : (k, 3) and (m, 3) int arrays (module of ``quality``)
        The DoG maxima kept and the sharp maxima that replace merged ones.
    sharp : array or None
        The sharp response in units of its noise (to refine ``added``).
    """
    xp = get_array_module(quality)
    ndimage = ndimage_for(xp)
    if coords.shape[0] == 0:
        return coords, coords[:0], None
    fine = ndimage.gaussian_filter(as_float32(volume),
                                   [SPLIT_SCALE * s for s in filter_sigmas(sigma, volume.shape)], mode="nearest")
    sharp = difference(fine, smoothed)
    del fine
    median, noise = noise_level(sharp)
    if noise == 0.0:
        return coords, coords[:0], None
    sharp = standardized(sharp, median, noise)
    half = np.array([(size - 1) // 2 for size in footprint_size])
    small = [2 * max(1, int(round(0.5 * h))) + 1 if h > 0 else 1 for h in half]
    candidates = local_maxima(sharp, small, threshold, other=quality)[0]
    maxima = to_numpy(coords)
    if len(candidates) < 2:
        return coords, coords[:0], None
    # Boxes as the footprint's (Chebyshev distance ≤ 1 in units of the half-widths): within two half-widths
    # of a DoG maximum, as its merged partner may sit a whole radius beyond the footprint.
    unit = np.where(half > 0, half, 1).astype(np.float64)
    candidates = _with_dips(sharp, candidates, unit)
    candidate_tree = cKDTree(candidates / (2 * unit))
    merged = candidate_tree.query_ball_point(maxima / (2 * unit), 1.0, p=np.inf, return_length=True) >= 2
    if not merged.any():
        return coords, coords[:0], None
    near_merged = cKDTree(maxima[merged] / (2 * unit)).query_ball_point(
        candidates / (2 * unit), 1.0, p=np.inf, return_length=True) > 0
    added = candidates[near_merged]
    covered = cKDTree(added / unit).query_ball_point(maxima / unit, 1.0, p=np.inf, return_length=True) > 0
    return maxima[~covered], added, sharp


def _with_dips(sharp, candidates: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """The sharp maxima that are separate peaks: two within a radius with no dip between them are one.

    Noise splits a bright lone spot's sharp peak into maxima a voxel or two
    apart with the response about as high between them; two spots the
    band-pass resolves have it fall at their midpoint to under
    :data:`SPLIT_DIP` of the lower peak, and by at least
    :data:`DIP_SIGNIFICANCE` noise units. Of two without a dip, the higher is kept.
    """
    pairs = cKDTree(candidates / unit).query_pairs(1.0, p=np.inf, output_type="ndarray")
    if len(pairs) == 0:
        return candidates
    peak = values_at(sharp, candidates).astype(np.float64)
    middle = np.rint(0.5 * (candidates[pairs[:, 0]] + candidates[pairs[:, 1]])).astype(np.int64)
    between = values_at(sharp, middle).astype(np.float64)
    lower = np.minimum(peak[pairs[:, 0]], peak[pairs[:, 1]])
    same = (between >= SPLIT_DIP * lower) | (lower - between < DIP_SIGNIFICANCE)
    keep = np.ones(len(candidates), dtype=bool)
    for i, j in pairs[same][np.argsort(-np.maximum(peak[pairs[same, 0]], peak[pairs[same, 1]]), kind="stable")]:
        if keep[i] and keep[j]:
            keep[j if peak[j] < peak[i] or (peak[j] == peak[i] and j > i) else i] = False
    return candidates[keep]


def quadratic_offsets(image, coords):
    """Sub-voxel offsets in [-0.5, 0.5] from a parabola through each peak and its two neighbours, per axis.

    On the GPU from a shipped kernel (:func:`tracker.detect_gpu.quadratic_offsets`): host offsets, the same.
    """
    xp = get_array_module(image)
    if xp is not np:
        from . import detect_gpu

        return detect_gpu.quadratic_offsets(image, coords)
    offsets = xp.zeros(coords.shape, dtype=xp.float64)
    for axis in range(3):
        size = image.shape[axis]
        if size < 3:
            continue
        centre = coords[:, axis]
        below = coords.copy()
        above = coords.copy()
        below[:, axis] = xp.maximum(centre - 1, 0)
        above[:, axis] = xp.minimum(centre + 1, size - 1)
        f0 = image[tuple(coords.T)].astype(xp.float64)
        fm = image[tuple(below.T)].astype(xp.float64)
        fp = image[tuple(above.T)].astype(xp.float64)
        curvature = fm - 2.0 * f0 + fp
        safe = curvature < 0  # a true maximum along this axis
        delta = xp.where(safe, 0.5 * (fm - fp) / xp.where(safe, curvature, -1.0), 0.0)
        at_edge = (centre == 0) | (centre == size - 1)
        offsets[:, axis] = xp.where(at_edge, 0.0, xp.clip(delta, -0.5, 0.5))
    return offsets


def _with_voxel_columns(table: Table, frame: int) -> Table:
    for name in ("z_vox", "y_vox", "x_vox"):
        table[name] = np.empty(0, dtype=np.float64)
    table["frame"] = np.full(0, frame, dtype=np.int64)
    return table
