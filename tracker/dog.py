"""The difference-of-Gaussians filter response and its noise, position by position.

The detector's quality is the DoG response in units of its noise. The noise
is not the same everywhere: with ``mode="nearest"`` the filters repeat the
outermost voxel, so near a face fewer independent voxels are averaged and the
response's noise rises (to 1.16–1.44 times the interior's in the outermost
plane, row or column). Dividing by one global noise level there turns noise
into false spots on the faces. :func:`relative_noise` gives the exact shape of
that rise for white input noise (computed from the filters' own weights, so it
holds for every scale and volume size); :func:`noise_level` measures the
overall level robustly (median absolute deviation) on the data.

Every function takes NumPy or CuPy volumes and computes with the matching
array module: NumPy and ``scipy.ndimage``, or on the GPU the kernels of
:mod:`tracker.ndimage_gpu` and :mod:`tracker.detect_gpu`, shipped compiled (so
that a fresh machine compiles none at the first run).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import ModuleType

import numpy as np
import scipy.ndimage

from .backend import get_array_module

SURROUND_RATIO = 3.0
"""Width of the DoG's background (surround) Gaussian relative to the spot's."""

TRUNCATE = 4.0
"""Gaussian kernels reach this many standard deviations (SciPy's and CuPy's default)."""


def ndimage_for(xp: ModuleType):
    """``scipy.ndimage`` for NumPy; for CuPy :mod:`tracker.ndimage_gpu` (``cupyx.scipy.ndimage``'s results from
    kernels shipped compiled, so that a fresh machine compiles none per scale)."""
    if xp is np:
        return scipy.ndimage
    from . import ndimage_gpu

    return ndimage_gpu


def as_float32(volume):
    """The volume as float32: NumPy's ``asarray``; on the GPU a C-contiguous copy (:mod:`tracker.detect_gpu`)."""
    if get_array_module(volume) is np:
        return np.asarray(volume, dtype=np.float32)
    from . import detect_gpu

    return detect_gpu.as_float32(volume)


def difference(a, b):
    """``a - b`` of two float32 volumes (on the GPU from a shipped kernel)."""
    if get_array_module(a) is np:
        return a - b
    from . import detect_gpu

    return detect_gpu.subtract(a, b)


def standardized(x, centre: float, scale: float):
    """``(x - centre) / scale`` of a float32 volume (on the GPU in place, from a shipped kernel)."""
    if get_array_module(x) is np:
        return (x - centre) / scale
    from . import detect_gpu

    return detect_gpu.standardize(x, centre, scale)


def filter_sigmas(sigma_voxels: Sequence[float], shape: Sequence[int]) -> list[float]:
    """The centre Gaussian's σ per axis (voxels); axes of a single voxel are not filtered (0)."""
    return [float(s) if n > 1 else 0.0 for s, n in zip(sigma_voxels, shape)]


def smoothed_and_dog(volume, sigma_voxels: Sequence[float], surround: float = SURROUND_RATIO):
    """The volume smoothed at the spot's scale (centre Gaussian) and the DoG, both float32.

    With a wide surround the DoG is close to the matched filter of a Gaussian
    spot on a slowly varying background (bright spots give positive peaks).
    """
    ndimage = ndimage_for(get_array_module(volume))
    image = as_float32(volume)
    sigma = np.array(filter_sigmas(sigma_voxels, image.shape))
    centre = ndimage.gaussian_filter(image, sigma.tolist(), mode="nearest", truncate=TRUNCATE)
    surround_image = ndimage.gaussian_filter(image, (surround * sigma).tolist(), mode="nearest", truncate=TRUNCATE)
    return centre, difference(centre, surround_image)


def dog_filter(volume, sigma_voxels: Sequence[float], surround: float = SURROUND_RATIO):
    """Difference of Gaussians: centre ``sigma`` (voxels, per axis) minus a ``surround`` times wider one."""
    return smoothed_and_dog(volume, sigma_voxels, surround)[1]


def _kernel_matrix(n: int, sigma: float) -> np.ndarray:
    """The ``(n, n)`` matrix of the 1D Gaussian filter with ``mode="nearest"`` (row ``i``: output ``i``'s weights)."""
    if sigma == 0.0:
        return np.eye(n)
    return scipy.ndimage.gaussian_filter1d(np.eye(n), sigma, axis=0, mode="nearest", truncate=TRUNCATE)


def _axis_sums(n: int, sigma: float, surround: float) -> np.ndarray:
    """Per position along one axis, ``Σk₁², Σk₁k₂, Σk₂²`` of the centre (k₁) and surround (k₂) kernels: (3, n).

    Only the ``reach`` outermost positions at each end differ from the
    interior, so the sums are computed on a short axis and stretched.
    """
    reach = int(TRUNCATE * surround * sigma + 0.5)  # the surround kernel's radius (SciPy's rule)
    length = n if n <= 2 * reach + 1 else 2 * reach + 1
    k1, k2 = _kernel_matrix(length, sigma), _kernel_matrix(length, surround * sigma)
    sums = np.stack([np.sum(k1 * k1, axis=1), np.sum(k1 * k2, axis=1), np.sum(k2 * k2, axis=1)])
    if length == n:
        return sums
    edge = sums[:, :reach]
    interior = np.repeat(sums[:, reach:reach + 1], n - 2 * reach, axis=1)
    return np.concatenate([edge, interior, edge[:, ::-1]], axis=1)


def relative_noise_factors(shape: Sequence[int], sigma_voxels: Sequence[float],
                           surround: float = SURROUND_RATIO) -> tuple[list, list[np.ndarray]]:
    """The separable factors of :func:`relative_noise`: the coefficients ``(1, −2, 1) / reference`` (float64)
    of the terms ``Πa, Πb, Πc``, and per axis its sums ``a, b, c`` as a (3, n) float32 array."""
    sigma = filter_sigmas(sigma_voxels, shape)
    sums = [_axis_sums(int(n), s, surround) for n, s in zip(shape, sigma)]
    interior = [s[:, s.shape[1] // 2] for s in sums]
    reference = (np.prod([v[0] for v in interior]) - 2 * np.prod([v[1] for v in interior])
                 + np.prod([v[2] for v in interior]))
    return [weight / reference for weight in (1.0, -2.0, 1.0)], [s.astype(np.float32) for s in sums]


def relative_noise(shape: Sequence[int], sigma_voxels: Sequence[float], surround: float = SURROUND_RATIO,
                   xp: ModuleType = np):
    """Standard deviation of the DoG response to white noise at each voxel, relative to the interior's.

    The DoG's weights at a voxel are ``k₁ − k₂`` with ``k₁, k₂`` separable, so
    its variance ``Σ(k₁ − k₂)² = Πa − 2Πb + Πc`` follows from per-axis sums
    ``a = Σk₁², b = Σk₁k₂, c = Σk₂²`` (exact, the faces' folding included).

    Returns
    -------
    float32 array of ``shape`` (module ``xp``)
        1 in the interior, above 1 within a surround's reach of a face.
    """
    coefficients, sums = relative_noise_factors(shape, sigma_voxels, surround)
    axes = [(slice(None), None, None), (None, slice(None), None), (None, None, slice(None))]
    variance = 0
    for term, coefficient in enumerate(coefficients):
        product = coefficient
        for axis_sums, index in zip(sums, axes):
            product = product * xp.asarray(axis_sums[term])[index]
        variance = variance + product
    return xp.sqrt(xp.maximum(variance, 0)).astype(xp.float32)


def background_sample(image, sample_step: int = 2):
    """Every ``sample_step``-th voxel in each axis longer than 8 (flattened): spots are sparse."""
    return image[tuple(slice(None, None, sample_step if n > 8 else 1) for n in image.shape)].ravel()


def sample_median(image, sample_step: int = 2):
    """The median of :func:`background_sample` (``scipy.ndimage.median``'s float32; on the GPU from our kernels)."""
    if get_array_module(image) is np:
        return scipy.ndimage.median(background_sample(image, sample_step))
    from . import detect_gpu

    return detect_gpu.sample_median(image, sample_step)


def noise_level(response, sample_step: int = 2) -> tuple[float, float]:
    """Robust ``(median, sigma)`` of a filter response (median absolute deviation).

    Spots are sparse, so the median and MAD describe the background. A
    sub-sampled grid (every ``sample_step``-th voxel in each axis) is enough.
    """
    xp = get_array_module(response)
    if xp is not np:  # the same from shipped kernels
        from . import detect_gpu

        return detect_gpu.noise_level(response, sample_step)
    sample = background_sample(response, sample_step)
    ndimage = ndimage_for(xp)  # (its median compiles nothing on a fresh GPU machine)
    median = float(ndimage.median(sample))
    sigma = 1.4826 * float(ndimage.median(xp.abs(sample - median)))
    if sigma == 0.0:  # noiseless synthetic data: fall back to the standard deviation
        sigma = float(sample.std())
    return median, sigma


def quality_map(response, sigma_voxels: Sequence[float], surround: float = SURROUND_RATIO):
    """The DoG response in units of its local noise (float32), or None for a constant volume.

    ``(response − median) / (σ · relative_noise)``, with σ the MAD of the
    response already divided by its relative noise (so the faces do not
    inflate it).
    """
    xp = get_array_module(response)
    if xp is not np:  # the same from shipped kernels, the relative noise computed in place
        from . import detect_gpu

        return detect_gpu.quality_map(response, sigma_voxels, surround)
    relative = relative_noise(response.shape, sigma_voxels, surround, xp)
    median, _ = noise_level(response)
    centred = (response - median) / relative
    _, sigma = noise_level(centred)
    if sigma == 0.0:
        return None
    centred /= sigma
    return centred


def gradient_variance(quality) -> np.ndarray:
    """Variance of the noise's derivative along each axis (per voxel²) of a unit-variance response, (3,).

    From central differences, robustly (MAD of a sub-sample, so spots do not
    count); 0 for an axis of fewer than 3 voxels. With the response's own
    variance (1), this is the Λ of Gaussian random field theory: how quickly
    the noise varies, hence how many maxima it makes.
    """
    xp = get_array_module(quality)
    if xp is not np:  # the same from shipped kernels
        from . import detect_gpu

        return detect_gpu.gradient_variance(quality)
    result = np.zeros(3)
    for axis, ahead, behind in central_difference_slices(quality.shape):
        sample = (0.5 * (quality[ahead] - quality[behind])).ravel()
        ndimage = ndimage_for(xp)
        result[axis] = (1.4826 * float(ndimage.median(xp.abs(sample - ndimage.median(sample))))) ** 2
    return result


def central_difference_slices(shape: Sequence[int]) -> Iterator[tuple[int, tuple, tuple]]:
    """``(axis, ahead, behind)`` for each axis of at least 3 voxels: index tuples whose difference is the central
    difference along ``axis``, on every 2nd voxel of the axes longer than 8 (a sub-sample suffices)."""
    thin = [slice(None, None, 2) if n > 8 else slice(None) for n in shape]
    for axis, n in enumerate(shape):
        if n >= 3:
            ahead, behind = list(thin), list(thin)
            ahead[axis], behind[axis] = slice(2, n), slice(0, n - 2)
            yield axis, tuple(ahead), tuple(behind)


def expected_noise_maxima(n_voxels: int, gradient_var: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Expected number of noise maxima above each threshold (in units of the noise) in ``n_voxels`` voxels.

    The expected Euler characteristic of the excursion set of a smooth
    Gaussian random field (Adler 1981; Worsley et al. 1996), which at high
    thresholds counts its maxima: ``V √det Λ He_{k−1}(u) e^{−u²/2} / (2π)^{(k+1)/2}``
    for ``k`` dimensions (axes with ``Λ > 0``).
    """
    u = np.asarray(thresholds, dtype=np.float64)
    lam = np.asarray(gradient_var, dtype=np.float64)
    lam = lam[lam > 0]
    k = len(lam)
    if k == 0:  # a single voxel has no maxima to speak of
        return np.zeros_like(u)
    hermite = {1: np.ones_like(u), 2: u, 3: u**2 - 1.0}[k]
    density = hermite * np.exp(-0.5 * u**2) / (2.0 * np.pi) ** ((k + 1) / 2.0)
    return n_voxels * float(np.sqrt(np.prod(lam))) * np.maximum(density, 0.0)
