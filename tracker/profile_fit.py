"""The one Gaussian width that fits many 1D spot profiles together, each with its own amplitude, background and
known centre (:func:`fit_common_sigma`, used by :mod:`tracker.spot_scale`). Host NumPy only."""

from __future__ import annotations

import numpy as np

_SIGMA_MIN = 0.25  # voxels: the smallest σ fitted (a point-like spot sampled by one voxel)
_GRID_STEP = 1.03  # relative step of the σ grid (3 %), refined by a parabola


def fit_common_sigma(profiles: np.ndarray, valid: np.ndarray, positions: np.ndarray,
                     centres: np.ndarray) -> float:
    """The one σ of ``b_i + a_i exp(-(u - μ_i)² / 2σ²)`` (``a_i > 0``) that fits all profiles best.

    Each profile has its own amplitude and background (solved in closed form)
    and a known centre ``μ_i``; σ maximises the joint Gaussian likelihood
    with each profile's noise variance profiled out, i.e. minimises
    ``Σ_i log RSS_i(σ)`` — a grid search (3 % steps from 0.25 to the
    window's half-width) refined by a parabola.

    Why jointly, with the centres fixed: a faint spot's own best fit is
    biased narrow, as a free centre lets a narrow Gaussian chase a noise
    spike (on 1D profiles of peak SNR 1 and 2, the median of per-profile fits
    was 0.49 and 0.79 of the true σ; sums of per-profile residuals with free
    centres converged to 0.55 and 0.89). With the centres fixed, a profile's
    noise gains nothing from any particular σ (amplitude and background are
    linear), so the joint fit is consistent however faint the spots, as long
    as there are many.

    Parameters
    ----------
    profiles, valid : (n, L) floats, bools
        One profile per row, sampled at ``positions`` (voxels, (L,)); False:
        a sample outside the volume.
    centres : (n,) floats
        Each profile's centre (voxels, on the scale of ``positions``).

    Returns
    -------
    float
        σ in voxels; ``inf`` where the best σ is the grid's largest (wider
        than the window), ``NaN`` where no profile admits a fit with ``a > 0``.
    """
    half_width = float(np.max(np.abs(positions)))
    sigmas = np.exp(np.arange(np.log(_SIGMA_MIN), np.log(max(half_width, _SIGMA_MIN * 2)), np.log(_GRID_STEP)))
    weights = valid.astype(np.float64)
    data = profiles * weights
    n = weights.sum(axis=1)[:, None]
    sum_p, sum_pp = data.sum(axis=1)[:, None], (data * profiles).sum(axis=1)[:, None]
    log_rss = np.zeros(len(sigmas))
    any_fit = np.zeros(len(sigmas), dtype=bool)
    for i, s in enumerate(sigmas):
        shapes = np.exp(-0.5 * ((positions[None, :] - centres[:, None]) / s) ** 2)  # (n, L)
        sum_g, sum_gg = (weights * shapes).sum(axis=1)[:, None], (weights * shapes**2).sum(axis=1)[:, None]
        sum_pg = (data * shapes).sum(axis=1)[:, None]
        determinant = n * sum_gg - sum_g**2
        with np.errstate(divide="ignore", invalid="ignore"):
            amplitude = (n * sum_pg - sum_g * sum_p) / determinant
            offset = (sum_p - amplitude * sum_g) / n
            residual = sum_pp - offset * sum_p - amplitude * sum_pg
            # No positive amplitude: the best is a flat profile (the background alone).
            flat = sum_pp - sum_p**2 / n
            residual = np.where((amplitude > 0) & (determinant > 1e-9 * n * n), residual, flat)
            any_fit[i] = bool(np.any(amplitude > 0))
            log_rss[i] = float(np.sum(np.log(np.maximum(residual, 1e-12 * np.maximum(flat, 1e-300)))))
    if not any_fit.any():
        return float("nan")
    best = int(np.argmin(log_rss))
    if best == len(sigmas) - 1:
        return float("inf")
    if best == 0:
        return float(sigmas[0])
    left, middle, right = log_rss[best - 1], log_rss[best], log_rss[best + 1]
    curvature = left - 2 * middle + right
    shift = 0.5 * (left - right) / curvature if curvature > 0 else 0.0
    return float(np.exp(np.log(sigmas[best]) + np.clip(shift, -0.5, 0.5) * np.log(_GRID_STEP)))
