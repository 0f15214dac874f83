"""Spot detection in 3D: difference of Gaussians, local maxima, sub-voxel refinement.

The filter is anisotropic in voxels so that it is isotropic in micrometres.
Every function takes NumPy or CuPy volumes and computes with the matching
array module (``scipy.ndimage`` or ``cupyx.scipy.ndimage``); only the small
table of detections comes back to the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import numpy as np

from .backend import get_array_module, to_numpy
from .params import DETECTION_DEFAULTS
from .tables import Table, empty_detections

DEFAULT_THRESHOLD = DETECTION_DEFAULTS.threshold
"""Default detection threshold, in units of the filter's background noise.

On simulated stacks the largest noise maximum in ~10⁶ voxels sits near 6σ,
while spots at SNR 4 (peak over background noise) give 6–9σ."""

SURROUND_RATIO = 3.0
"""Width of the DoG's background (surround) Gaussian relative to the spot's."""


def _ndimage(xp: ModuleType):
    if xp is np:
        import scipy.ndimage as ndimage
    else:
        import cupyx.scipy.ndimage as ndimage
    return ndimage


def spot_sigma_voxels(spot_radius_um: float | Sequence[float], voxel_size_um: Sequence[float]) -> np.ndarray:
    """Gaussian spot scale per axis, in voxels, for spots of radius ``spot_radius_um``.

    The radius is ``sqrt(3)`` times the spot's Gaussian standard deviation
    (TrackMate's convention). A single radius is isotropic in µm, hence
    anisotropic in voxels; three values ``z, y, x`` (µm) fit an elongated PSF.
    """
    return (np.asarray(spot_radius_um, dtype=np.float64) / np.sqrt(3.0)) / np.asarray(voxel_size_um, dtype=np.float64)


def dog_filter(volume, sigma_voxels: Sequence[float], surround: float = SURROUND_RATIO):
    """Difference of Gaussians: centre ``sigma`` minus a ``surround`` times wider one, float32.

    With a wide surround this is close to the matched filter of a Gaussian
    spot on a slowly varying background (bright spots give positive peaks).
    Axes of a single plane (size 1) are not filtered.
    """
    return _smoothed_and_dog(volume, sigma_voxels, surround)[1]


def _smoothed_and_dog(volume, sigma_voxels: Sequence[float], surround: float = SURROUND_RATIO):
    """The centre Gaussian (the volume smoothed at the spot's scale) and the DoG, both float32."""
    xp = get_array_module(volume)
    ndimage = _ndimage(xp)
    image = xp.asarray(volume, dtype=xp.float32)
    sigma = np.array([float(s) if n > 1 else 0.0 for s, n in zip(sigma_voxels, image.shape)])
    centre = ndimage.gaussian_filter(image, sigma.tolist(), mode="nearest")
    return centre, centre - ndimage.gaussian_filter(image, (surround * sigma).tolist(), mode="nearest")


def _background_sample(image, sample_step: int = 2):
    """Every ``sample_step``-th voxel in each axis longer than 8 (flattened): spots are sparse."""
    return image[tuple(slice(None, None, sample_step if n > 8 else 1) for n in image.shape)].ravel()


def noise_level(response, sample_step: int = 2) -> tuple[float, float]:
    """Robust ``(median, sigma)`` of a filter response (median absolute deviation).

    Spots are sparse, so the median and MAD describe the background. A
    sub-sampled grid (every ``sample_step``-th voxel in each axis) is enough.
    """
    xp = get_array_module(response)
    sample = _background_sample(response, sample_step)
    median = float(xp.median(sample))
    sigma = 1.4826 * float(xp.median(xp.abs(sample - median)))
    if sigma == 0.0:  # noiseless synthetic data: fall back to the standard deviation
        sigma = float(sample.std())
    return median, sigma


def detect_spots(
    volume,
    voxel_size_um: Sequence[float],
    spot_radius_um: float | Sequence[float],
    threshold: float | None = None,
    frame: int = 0,
) -> Table:
    """Find spots in one 3D volume with sub-voxel precision.

    Parameters
    ----------
    volume : (Z, Y, X) array, NumPy or CuPy
        One frame. ``Z`` may be 1 (2D data).
    voxel_size_um : (3,) floats
        Voxel size ``z, y, x`` in µm.
    spot_radius_um : float or (3,) floats
        Typical spot radius in µm, one value or ``z, y, x`` (sets the filter
        scale and the minimum distance between two spots).
    threshold : float, optional
        Minimum ``quality``: the DoG response in units of its background
        noise (a signal-to-noise ratio). Default :data:`DEFAULT_THRESHOLD`.
    frame : int
        Written into the ``frame`` column.

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
        If the volume is not 3D or holds NaN or infinite values.
    """
    xp = get_array_module(volume)
    ndimage = _ndimage(xp)
    volume = xp.asarray(volume)
    if volume.ndim != 3:
        raise ValueError(f"expected a (Z, Y, X) volume, got shape {tuple(volume.shape)}")
    if volume.dtype.kind == "f" and not bool(xp.isfinite(volume).all()):
        raise ValueError(f"frame {frame} contains NaN or infinite values")
    radius = np.broadcast_to(np.asarray(spot_radius_um, dtype=np.float64), (3,))
    if not np.all(radius > 0):
        raise ValueError(f"spot radius must be positive, got {spot_radius_um} µm")
    threshold = DEFAULT_THRESHOLD if threshold is None else float(threshold)
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    sigma = spot_sigma_voxels(radius, voxel)

    smoothed, response = _smoothed_and_dog(volume, sigma)
    median, noise = noise_level(response)
    if noise == 0.0:  # a constant volume has no spots
        return _with_voxel_columns(empty_detections(), frame)
    quality = (response - median) / noise

    # Local maxima within one spot radius (at least one voxel each way).
    footprint_size = [2 * max(1, int(np.floor(r))) + 1 if n > 1 else 1
                      for r, n in zip(radius / voxel, volume.shape)]
    local_max = ndimage.maximum_filter(quality, size=footprint_size, mode="nearest")
    peaks = (quality == local_max) & (quality >= threshold)
    coords = xp.stack(xp.nonzero(peaks), axis=1)  # (n, 3) int
    if coords.shape[0] == 0:
        return _with_voxel_columns(empty_detections(), frame)

    offsets = _quadratic_offsets(quality, coords)
    sub_voxel = coords.astype(xp.float64) + offsets
    peak_quality = quality[tuple(coords.T)]
    intensity = smoothed[tuple(coords.T)] - xp.median(_background_sample(smoothed))

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


def _quadratic_offsets(image, coords):
    """Sub-voxel offsets in [-0.5, 0.5] from a parabola through each peak and its two neighbours, per axis."""
    xp = get_array_module(image)
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
