"""Per-axis scatter: linking in the metric of a motion model whose variance differs between axes.

Localisation noise in 3D microscopy is larger along ``z`` (planes lie farther apart than pixels), and flow
or drift widens steps along one axis: one variance for all axes then misjudges every link, taking a normal
``z`` displacement for a surprising one and a surprising ``y, x`` displacement for a normal one. The motion
model keeps its sums per axis (:class:`tracker.linking.motion.MotionModel`), so the forward pass's links give
each axis's variance (µm²) of the prediction error. Where the axes differ more than chance allows
(:func:`anisotropy_p_value`, Bartlett's test of equal variances), the linker links again in *whitened*
coordinates (:func:`whiten`): each axis divided by its scatter's standard deviation relative to the root
mean per-axis variance. There a squared distance is the squared Mahalanobis distance in the diagonal,
per-axis scatter times the mean per-axis variance, so every cost, search radius and gate of every pass weighs
each axis by its own scatter (the mean per-axis variance, which the model estimates, is unchanged). Where the
axes agree within chance nothing changes: the links are those of the isotropic model, bit for bit. Flat axes
(a 2D table, or ``z = 0`` everywhere) are not motion axes and never enter.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaincc

from .missing_detections import EVIDENCE_P_VALUE
from .motion import MotionModel


def anisotropy_p_value(variances: np.ndarray, n: int) -> float:
    """Chance that ``d`` axes of one scatter show per-axis variances as different as ``variances``.

    ``variances`` (µm², ``(d,)``) are mean squares of ``n`` zero-mean Gaussian values each (one per
    displacement). Bartlett's (1937) likelihood-ratio statistic for equal variances,
    ``T = n (d ln v̄ - Σ ln v_a) / C`` with ``C = 1 + (d / n - 1 / (d n)) / (3 (d - 1))``, is chi-square with
    ``d - 1`` degrees of freedom when the axes share one variance. 1 for one axis or ``n = 0``; 0 when an
    axis has no scatter at all while another has.
    """
    variances = np.asarray(variances, dtype=np.float64)
    d = len(variances)
    if d < 2 or n <= 0:
        return 1.0
    if np.all(variances == variances[0]):
        return 1.0
    if np.any(variances <= 0.0):
        return 0.0
    correction = 1.0 + (d / n - 1.0 / (d * n)) / (3.0 * (d - 1))
    statistic = n * (d * np.log(np.mean(variances)) - np.sum(np.log(variances))) / correction
    return float(gammaincc((d - 1) / 2.0, max(statistic, 0.0) / 2.0))


def scatter_shape(model: MotionModel, predicting: bool) -> np.ndarray | None:
    """Each axis's variance relative to the mean per-axis variance (``(3,)``, ``z, y, x``; 1 on flat axes), or
    None where one variance fits all axes.

    From ``model``'s per-axis sums (:meth:`MotionModel.axis_variances`, of the class that the linker costs
    most links with: the residual of the prediction when ``predicting``, else the step), over the model's
    ``ndim`` motion axes (the last ones). None too with too few displacements to estimate (the model's
    fallbacks: the isotropic scatter) or axes that agree within chance: a difference as large arises by
    chance with more than :data:`tracker.linking.missing_detections.EVIDENCE_P_VALUE` probability (the level
    at which the linker takes the data to show missed detections).
    """
    estimate = model.axis_variances(predicting)
    if estimate is None or model.ndim < 2:
        return None
    variances, n = estimate
    moving = variances[3 - model.ndim:]
    if not np.all(np.isfinite(moving)) or not np.any(moving > 0.0):
        return None
    if anisotropy_p_value(moving, n) > EVIDENCE_P_VALUE:
        return None
    # An axis without any scatter (noiseless, motionless along it) keeps a floor far below the others'.
    moving = np.maximum(moving, 1e-12 * float(np.max(moving)))
    shape = np.ones(3)
    shape[3 - model.ndim:] = moving / np.mean(moving)
    return shape


def whiten(positions_um: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Positions (``(n, 3)`` µm) with each axis divided by the root of its relative variance ``shape``: squared
    distances there are squared Mahalanobis distances in the per-axis scatter times the mean per-axis variance
    (µm²)."""
    return positions_um / np.sqrt(shape)


def whitened_gate(max_displacement_um: float, shape: np.ndarray) -> float:
    """The gate (µm) in whitened coordinates: ``max_displacement_um`` along the axis of least scatter, each other
    axis's reach grown with its scatter's standard deviation (an ellipsoid in µm whose smallest semi-axis is the
    gate). A displacement the gate allows along any axis is never cut off."""
    return float(max_displacement_um / np.sqrt(np.min(shape)))
