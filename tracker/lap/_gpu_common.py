"""Shared helpers for the dense GPU assignment solvers (Hungarian variants, auction, ...).

Every function works on NumPy or CuPy arrays alike (the array module is taken
from the input), so they can be unit-tested on a machine without a GPU, and
none of them imports CuPy at module import time.

What is here
------------
* :func:`summarize_dense` — range, infinities, NaNs and integrality of a
  matrix in one pass (one kernel on the GPU).
* :func:`prepare_dense` — one call that turns the backend's input (an
  ``(n, m)`` float64 matrix, ``n <= m``, entries finite or ``+inf``) into a
  :class:`DenseProblem`: a finite matrix (``+inf`` replaced by a big-M, see
  :func:`big_m`), whether all entries are integers (:func:`is_integral`), the
  zero-slack tolerance (:func:`zero_tolerance`, absolute + relative) and a quick infeasibility
  verdict (a row or column with no finite entry).
* :func:`big_m` — a penalty so large that any assignment using a forbidden
  entry costs more than every assignment that uses none.
* :func:`pad_square` — pad a rectangular ``n < m`` matrix with constant rows.
* :func:`finish` — map a solver's assignment back: ``-1`` everywhere when the
  problem was infeasible (a forbidden entry got used).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import get_array_module

INTEGRAL_LIMIT = 2.0**50
"""Integer costs are treated exactly (duals stay integers in float64) while
``n * (max|C| + big-M)`` stays below 2**53; this bounds the magnitudes."""


@dataclass(frozen=True)
class DenseSummary:
    """What one pass over a dense cost matrix tells the input checks (see :func:`summarize_dense`)."""

    lo: float  # smallest finite entry (+inf when there is none)
    hi: float  # largest finite entry (-inf when there is none)
    n_posinf: int  # +inf entries (forbidden pairs)
    n_invalid: int  # NaN or -inf entries
    n_nonintegral: int  # finite entries that are not integers below INTEGRAL_LIMIT / max(n, m) in magnitude

    @property
    def all_finite(self) -> bool:
        return self.n_posinf == 0 and self.n_invalid == 0

    @property
    def integral(self) -> bool:
        return self.n_nonintegral == 0


SUMMARY_BLOCKS = 2048
"""Blocks of the CuPy summary pass: enough to fill any current GPU (16 per SM on 132 SMs)."""


def summarize_dense(cost: Any) -> DenseSummary:
    """Range, infinities, invalid entries and integrality of a float64 matrix, in one pass.

    On CuPy, one kernel (``dense_input.cu``) over the whole matrix: CuPy's own reductions to a
    single value run in one thread block, which made these checks the slowest part of a large solve.
    """
    xp = get_array_module(cost)
    lim = INTEGRAL_LIMIT / max(1, max(cost.shape))
    if cost.size == 0:
        return DenseSummary(np.inf, -np.inf, 0, 0, 0)
    if xp is not np:
        return _summarize_on_gpu(xp, cost, lim)
    finite = np.isfinite(cost)
    values = cost[finite]
    n_posinf = int(np.count_nonzero(np.isposinf(cost)))
    n_invalid = cost.size - values.size - n_posinf
    if values.size == 0:
        return DenseSummary(np.inf, -np.inf, n_posinf, n_invalid, 0)
    n_nonintegral = int(np.count_nonzero((values != np.rint(values)) | (np.abs(values) >= lim)))
    return DenseSummary(float(values.min()), float(values.max()), n_posinf, n_invalid, n_nonintegral)


def _summarize_on_gpu(cp, cost, lim: float) -> DenseSummary:
    from ._cuda import load_module

    cost = cp.ascontiguousarray(cost, dtype=cp.float64)
    blocks = int(min(SUMMARY_BLOCKS, -(-cost.size // 256)))
    partial = cp.empty((blocks, 5), dtype=cp.float64)  # lo, hi, +inf, invalid, non-integral (per block)
    load_module("lap/dense_input.cu").get_function("dense_summary")(
        (blocks,), (256,), (cost, np.int64(cost.size), np.float64(lim), partial))
    partial = partial.get()  # (one read: each costs a synchronisation)
    n_posinf, n_invalid, n_nonintegral = (int(x) for x in partial[:, 2:].sum(axis=0))
    return DenseSummary(float(partial[:, 0].min()), float(partial[:, 1].max()), n_posinf, n_invalid, n_nonintegral)


def is_integral(cost: Any) -> bool:
    """True if every finite entry is an integer of modest magnitude (``< 2**50 / n``)."""
    return summarize_dense(cost).integral


def big_m(lo: float, hi: float, n: int, integral: bool) -> float:
    """A penalty M for forbidden entries.

    A feasible assignment of ``n`` rows costs at most ``n * hi``; one that
    uses at least one forbidden entry costs at least ``M + (n - 1) * lo``.
    ``M = hi + n * (hi - lo) + 1`` therefore makes every assignment with a
    forbidden entry strictly worse, so the solver only picks one when no
    feasible assignment exists (detected afterwards by :func:`finish`).
    The extra ``max(1, |hi|)`` margin keeps the strict gap visible in float64.
    """
    m_value = hi + n * (hi - lo) + max(1.0, abs(hi), abs(lo))
    return float(np.ceil(m_value)) if integral else float(m_value)


EPS_REL_FLOAT = 2.0**-40


def zero_tolerance(integral: bool) -> tuple[float, float]:
    """``(eps_abs, eps_rel)``: an edge is tight ("zero slack") when
    ``C[i,j] - u[i] - v[j] <= eps_abs + eps_rel * max(|C[i,j]|, |u[i]|, |v[j]|)``.

    Integer costs keep every dual an integer, so any slack below 1 is zero:
    ``(0.5, 0)``, exact. Float costs: ``(0, 2**-40)``: the rounding error of
    ``C - u - v`` is a few ulps of its largest term, so the test is relative
    to that term (a global scale would wrongly call small entries zero when
    the costs span many orders of magnitude); 2**-40 (about 1e-12) leaves
    room for dual drift over many updates. An edge treated as tight is off by
    at most that, so the objective is exact to about 1e-12 of the sum of the
    magnitudes involved.
    """
    if integral:
        return 0.5, 0.0
    return 0.0, EPS_REL_FLOAT


@dataclass
class DenseProblem:
    cost: Any  # finite (n, m) float64 matrix in the input's array module
    n: int
    m: int
    integral: bool
    eps: float  # absolute part of the zero-slack tolerance
    eps_rel: float  # relative part (see zero_tolerance)
    scale: float  # max |finite entry| (or 1)
    forbidden: bool  # some entry was +inf (replaced by big_m)
    big_m: float | None
    infeasible: bool  # a row or column without any finite entry (only rows matter when n < m)
    lo: float  # smallest entry of `cost` (after the big-M fill)
    hi: float  # largest entry of `cost` (the big-M when something was forbidden)


def prepare_dense(cost: Any) -> DenseProblem:
    """Check and normalise a backend input (see module docstring)."""
    xp = get_array_module(cost)
    n, m = cost.shape
    summary = summarize_dense(cost)
    integral = summary.integral
    if summary.all_finite:
        lo, hi = summary.lo, summary.hi
        scale = max(abs(lo), abs(hi), 1e-300)
        return DenseProblem(cost, n, m, integral, *zero_tolerance(integral), scale, False, None, False, lo, hi)
    if not np.isfinite(summary.lo):  # no finite entry at all
        return DenseProblem(cost, n, m, integral, 0.5, 0.0, 1.0, True, None, True, 0.0, 0.0)
    finite = xp.isfinite(cost)
    row_ok = bool(finite.any(axis=1).all())
    col_ok = bool(finite.any(axis=0).all()) if n == m else True
    if not (row_ok and col_ok):
        return DenseProblem(cost, n, m, integral, 0.5, 0.0, 1.0, True, None, True, 0.0, 0.0)
    lo, hi = summary.lo, summary.hi
    scale = max(abs(lo), abs(hi), 1e-300)
    mval = big_m(lo, hi, n, integral)
    filled = xp.where(finite, cost, mval)
    return DenseProblem(xp.ascontiguousarray(filled), n, m, integral, *zero_tolerance(integral), scale, True,
                        mval, False, lo, mval)


def pad_square(cost: Any, value: float = 0.0) -> Any:
    """``(n, m)`` with ``n < m`` -> ``(m, m)``: extra rows of ``value`` (they take the unused columns)."""
    xp = get_array_module(cost)
    n, m = cost.shape
    if n >= m:
        return cost
    out = xp.full((m, m), value, dtype=cost.dtype)
    out[:n] = cost
    return out


def finish(problem: DenseProblem, original: Any, col_of_row: Any) -> Any:
    """``col_of_row`` (int64, length n) or all ``-1`` if a forbidden entry was used."""
    xp = get_array_module(original)
    col_of_row = col_of_row[: problem.n].astype(np.int64)
    if problem.forbidden:
        chosen = original[xp.arange(problem.n), col_of_row]
        if not bool(xp.isfinite(chosen).all()):
            return xp.full(problem.n, -1, dtype=np.int64)
    return col_of_row


def infeasible_result(n: int, xp) -> Any:
    return xp.full(n, -1, dtype=np.int64)
