"""Deep Greedy Switching on the GPU (``solver="dgs"``): a fast heuristic, NOT exact.

Roverso, El-Beltagy, Haridi & Schubert (2010): from an initial assignment,
repeatedly evaluate for every agent the best 2-exchange with another agent,
drop conflicting exchanges, apply the rest in parallel, and stop when no
exchange improves the objective or the time limit is reached (``dgs.cu``).

The initial assignment comes from a coarse auction (the first epsilon-scaling
phases of :mod:`tracker.lap.auction`, stopped at ``eps = range / (INIT_EPS_DIVISOR * n)``),
which is much better than the random or greedy starts of the paper and cheap
on the GPU. The result is 2-exchange optimal (no pair of rows can swap columns
profitably) but not necessarily optimal: use ``"auction"`` or the Hungarian
solvers when optimality matters. ``auto`` never picks this solver.

Forbidden (``inf``) entries are replaced by a large finite cost; if the
heuristic ends on one of them the front-end reports the problem infeasible
even when it is not.
"""

from __future__ import annotations

import time

import numpy as np

from ._registry import Solver, register_solver

TIME_LIMIT_S = 2.0
"""Wall-clock limit of the switching phase (seconds); the best assignment so far is returned."""
INIT_EPS_DIVISOR = 4
"""The initial auction stops at ``eps = (cost range) / (INIT_EPS_DIVISOR * n)`` in integer units."""
MAX_ROUNDS = 100_000
"""Cap on switching rounds."""

LAST_STATS: dict = {}


def _kernels():
    from ._cuda import load_module

    module = load_module("dgs.cu")
    return {name: module.get_function(name) for name in ("dgs_eval", "dgs_select", "dgs_apply")}


def solve(cost, *, time_limit: float = None, init: str = "auction"):
    """DGS on a finite square CuPy ``(n, n)`` float64 matrix; returns the column of each row (int64)."""
    import cupy

    from . import auction

    time_limit = TIME_LIMIT_S if time_limit is None else float(time_limit)
    start = time.perf_counter()
    cost = cupy.ascontiguousarray(cupy.asarray(cost, dtype=np.float64))
    n = cost.shape[0]
    if n <= 1:
        return cupy.zeros(n, dtype=np.int64)
    if init == "auction":
        tau = auction.dense_square_int(
            cost, stop_eps=lambda max_cost: max(1, max_cost // (INIT_EPS_DIVISOR * n))
        )[0]
    elif init == "identity":
        tau = cupy.arange(n, dtype=np.int64)
    else:
        raise ValueError(f"unknown init {init!r}")
    t_init = time.perf_counter() - start
    tau = tau.astype(np.int32)
    sigma = cupy.empty(n, dtype=np.int32)
    sigma[tau] = cupy.arange(n, dtype=np.int32)
    cost_t = cupy.ascontiguousarray(cost.T)
    rows = cupy.arange(n)
    cur = cost[rows, tau]
    gain = cupy.zeros(n, dtype=np.float64)
    partner = cupy.full(n, -1, dtype=np.int32)
    claim = cupy.zeros(n, dtype=np.uint64)
    applied = cupy.zeros(1, dtype=np.int32)
    scale = float(cupy.abs(cost).max())
    tol = np.float64(max(scale * 1e-13, 1e-300))
    k = _kernels()
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    warp_blocks = max(1, min(-(-n * 32 // 256), sms * 16))
    thread_blocks = max(1, min(-(-n // 256), sms * 16))
    n32 = np.int32(n)
    rounds = swaps = 0
    timed_out = False
    while rounds < MAX_ROUNDS:
        applied.fill(0)
        k["dgs_eval"]((warp_blocks,), (256,), (n32, cost, cost_t, tau, sigma, cur, gain, partner, claim, tol))
        k["dgs_select"]((thread_blocks,), (256,), (n32, gain, partner, claim))
        k["dgs_apply"]((thread_blocks,), (256,), (n32, cost, gain, partner, claim, tau, sigma, cur, applied))
        rounds += 1
        done = int(applied[0])
        swaps += done
        if done == 0:
            break
        if time.perf_counter() - start > time_limit:
            timed_out = True
            break
    LAST_STATS.clear()
    LAST_STATS.update(rounds=rounds, swaps=swaps, init_s=t_init, total_s=time.perf_counter() - start,
                      timed_out=timed_out)
    return tau.astype(np.int64)


def solve_dense(cost):
    """Backend ``dense`` entry point: ``(n, m)``, ``n <= m``, finite or ``+inf`` entries."""
    import cupy

    cost = cupy.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    finite = cupy.isfinite(cost)
    if not bool(finite.all()):
        if not bool(finite.any()):
            return cupy.full(n, -1, dtype=np.int64)
        values = cost[finite]
        lo, hi = float(values.min()), float(values.max())
        big = hi + (hi - lo + 1.0) * (n + 1)
        cost = cupy.where(finite, cost, big)
    if n < m:
        cost = cupy.concatenate([cost, cupy.zeros((m - n, m))], axis=0)
    return solve(cost)[:n]


register_solver(
    Solver(
        name="dgs",
        description="GPU Deep Greedy Switching (Roverso et al. 2010) from a coarse auction start: "
        "heuristic (2-exchange optimal, not exact), time limit tracker.lap.dgs.TIME_LIMIT_S",
        gpu=True,
        exact=False,
        dense=solve_dense,
    )
)
