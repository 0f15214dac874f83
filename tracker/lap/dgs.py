"""Deep Greedy Switching on the GPU (``solver="dgs"``): a fast heuristic, NOT exact.

Roverso, El-Beltagy, Haridi & Schubert (2010): from an initial assignment,
repeatedly evaluate for every agent the best 2-exchange with another agent,
drop conflicting exchanges, apply the rest in parallel, and stop when no
exchange improves the objective or the time limit is reached (``dgs.cu``).
The switching loop stays on the device: the host queues ``CHECK_EVERY``
rounds between synchronisations and the kernels skip themselves once a
round applied nothing.

Initial assignment (``init=``):

``"sinkhorn"`` (default)
    ``SINKHORN_ITERS`` log-domain Sinkhorn half-step pairs on a copy of the
    cost scaled to [0, 1] (float32 or float16: ``SINKHORN_STORAGE``), the temperature annealed geometrically from
    ``SINKHORN_EPS0`` to ``SINKHORN_EPS1 / n``, give approximate dual prices
    ``u, v``; then the parallel greedy below on the reduced cost
    ``c - u - v``. Far better than the plain greedy start on hard classes:
    on distances between two independent 2D point sets (minimised) the
    2-exchange local optimum it leads to is 0.4-1.5 % above the optimum
    instead of 1.1-3.7 %. On the paper's own GEOM class (distances within
    one point set, maximised) both end within 0.005 %, and the greedy start
    is faster up to n = 4096 (``benchmarks/results/dgs_h200.md``). Its cost is
    most of the solve time.
``"greedy"``
    The paper's greedy start, in parallel: every free row proposes its
    cheapest free column, every column keeps its cheapest proposer; repeated
    (at most ``GREEDY_ROUNDS`` rounds, the rest paired in index order).
``"auction"``
    The first epsilon-scaling phases of the dense auction of
    :mod:`tracker.lap.auction` (``eps = range / (INIT_EPS_DIVISOR * n)``):
    near-optimal starts but far slower than the exact Hungarian solvers on
    dense classes.

Optionally (``POLISH_GAP`` > 0, off by default) one phase of the auction of
:mod:`tracker.lap.auction` then starts from the switched assignment, priced by
the Sinkhorn duals, with ``eps = POLISH_GAP * objective / n``: an eps-optimal
assignment is at most ``n * eps`` above the optimum (Bertsekas 1988), so the
result is at most ``POLISH_GAP`` above it whatever the local search reached;
switching once more keeps it 2-exchange optimal. Cheap on uniform random
costs, where switching alone stays several per cent off; slow on geometric ones.

The result is 2-exchange optimal (no pair of rows can swap columns
profitably, evaluated in float64 on the original cost) unless the time
limit or the round cap stopped it, but not necessarily optimal: use the
Hungarian solvers when optimality matters. ``auto`` never picks this solver.

Forbidden (``inf``) entries are replaced by a large finite cost; if the
heuristic ends on one of them the front-end reports the problem infeasible
even when it is not.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from ._registry import Solver, register_solver

TIME_LIMIT_S = 2.0
"""Wall-clock limit of the whole solve (seconds); the best assignment so far is returned."""
INIT = "sinkhorn"
"""Default start: ``"sinkhorn"``, ``"greedy"`` or ``"auction"``."""
SINKHORN_ITERS = 1000
"""Sinkhorn iterations (each a row and a column half-step) of the ``"sinkhorn"`` start."""
SINKHORN_EPS0 = 0.1
"""First Sinkhorn temperature (the cost is scaled to [0, 1])."""
SINKHORN_EPS1 = 0.01
"""Last Sinkhorn temperature times n."""
SINKHORN_GRID_MAX_N = 4096
"""Up to this n (float32 storage), all Sinkhorn half-steps run in one cooperative launch over the whole GPU,
grid-wide barriers between them (``sk_anneal_grid``, ``dgs_anneal.cu``), instead of one launch each; 0 turns
it off. On an H200 (DGS solve, Sinkhorn start included): 9.0 instead of 11.6 ms at n = 512 (where it also
beat the 8-block cluster kernel it replaced), 11.2-12.1 instead of 14.7-18.3 ms at 1024, 16-18 instead of
17-22 ms at 2048, 49-50 instead of 51-53 ms at 4096 (benchmarks/results/dgs_h200.md)."""
SINKHORN_STORAGE = "float32"
"""Element type of the Sinkhorn copies of the cost (``"float32"`` or ``"float16"``: half the memory traffic)."""
GREEDY_ROUNDS = 64
"""Cap on parallel greedy rounds; rows still free after it are paired with the free columns in order."""
INIT_EPS_DIVISOR = 4
"""``init="auction"``: the auction stops at ``eps = (cost range) / (INIT_EPS_DIVISOR * n)`` in integer units."""
MAX_ROUNDS = 100_000
"""Cap on switching rounds."""
CHECK_EVERY = 4
"""Switching rounds queued between two host synchronisations."""
POLISH_GAP = 0.0
"""If positive: after switching, one auction phase from the DGS assignment, priced by the Sinkhorn duals,
with ``eps = POLISH_GAP * objective / n`` (:func:`tracker.lap.dense_auction.refine_dense`), then switching again:
the result is at most ``POLISH_GAP`` (relative) above the optimum, whatever the local search reached. Off
by default because of its cost on geometric costs: with 0.005 on one H100 (``dgs_h100.md``, sixth session)
uniform random costs went from 3.5-12 % above the optimum to under 0.005 % for 3-31 ms more (n = 512-4096),
but geometric ones took 11 ms, 111 ms, 1.4 s and 8.0 s more at n = 512, 1024, 2048 and 4096 (the exact
Hungarian solvers: 37 ms to 0.5 s)."""

LAST_STATS: dict = {}


@functools.lru_cache(maxsize=None)
def _kernels():
    """The kernels of ``dgs.cu`` by name, and ``sk_anneal_grid`` (None where it cannot be used)."""
    from ._cuda import load_module

    module = load_module("lap/dgs.cu")
    names = ("sk_lse4", "sk_lse8h", "gr_propose", "gr_accept",
             "dgs_eval", "dgs_select", "dgs_apply", "dgs_check")
    kernels = {name: module.get_function(name) for name in names}
    try:
        kernels["sk_anneal_grid"] = load_module("lap/dgs_anneal.cu", cooperative=True).get_function("sk_anneal_grid")
    except Exception:  # no cooperative groups here (compile or driver): one launch per half-step instead
        kernels["sk_anneal_grid"] = None
    return kernels


def _warp_grid(n, sms):
    return (max(1, min(-(-n * 32 // 256), sms * 16)),)


def _greedy(k, cf, u, v, sms):
    """Parallel greedy on ``cf - u - v`` (float32, square); returns the column of each row (int32)."""
    import cupy

    n = cf.shape[0]
    n32 = np.int32(n)
    tau = cupy.full(n, -1, dtype=np.int32)
    sig = cupy.full(n, -1, dtype=np.int32)
    colkey = cupy.full(n, np.iinfo(np.uint64).max, dtype=np.uint64)
    count = cupy.zeros(1, dtype=np.int32)
    thread_grid = (max(1, min(-(-n // 256), sms * 16)),)
    rounds = 0
    while rounds < GREEDY_ROUNDS:
        for _ in range(4):
            k["gr_propose"](_warp_grid(n, sms), (256,), (n32, cf, u, v, tau, sig, colkey))
            k["gr_accept"](thread_grid, (256,), (n32, colkey, tau, sig, count))
            rounds += 1
        if int(count[0]) == n:
            break
    if int(count[0]) < n:
        free_rows = cupy.nonzero(tau < 0)[0]
        free_cols = cupy.nonzero(sig < 0)[0]
        tau[free_rows] = free_cols.astype(np.int32)
    return tau, rounds


def _sinkhorn(k, cf, sms):
    """Approximate dual prices (u, v) of the [0, 1]-scaled float32 cost ``cf`` by annealed Sinkhorn."""
    import cupy

    n = cf.shape[0]
    ld = -(-n // 8) * 8  # padded row stride: 16-byte vector loads
    if SINKHORN_STORAGE == "float16":
        dtype, pad, kernel = np.float16, 65504.0, k["sk_lse8h"]
    elif SINKHORN_STORAGE == "float32":
        dtype, pad, kernel = np.float32, 1e30, k["sk_lse4"]
    else:
        raise ValueError(f"unknown SINKHORN_STORAGE {SINKHORN_STORAGE!r}")
    mat = cupy.full((n, ld), pad, dtype=dtype)
    mat[:, :n] = cf
    mat_t = cupy.full((n, ld), pad, dtype=dtype)
    mat_t[:, :n] = cf.T
    u = cupy.zeros(ld, dtype=np.float32)
    v = cupy.zeros(ld, dtype=np.float32)
    iters = int(SINKHORN_ITERS)
    e0, e1 = float(SINKHORN_EPS0), float(SINKHORN_EPS1) / n
    temps = (e0 * (e1 / e0) ** (np.arange(iters) / max(1, iters - 1))).astype(np.float32)
    grid, block = _warp_grid(n, sms), (256,)
    n32, ld32 = np.int32(n), np.int32(ld)
    if kernel is k["sk_lse4"] and n <= SINKHORN_GRID_MAX_N and k["sk_anneal_grid"] is not None:
        args = (n32, ld32, mat, mat_t, u, v, cupy.asarray(temps), np.int32(iters))
        try:  # two resident blocks of 512 threads per SM (__launch_bounds__ in dgs_anneal.cu)
            k["sk_anneal_grid"]((2 * sms,), (512,), args, shared_mem=ld * 4)
            return u, v
        except Exception:  # e.g. a cooperative launch too large for this GPU: never try again
            k["sk_anneal_grid"] = None
    for e in temps:
        kernel(grid, block, (n32, ld32, mat, v, u, e))
        kernel(grid, block, (n32, ld32, mat_t, u, v, e))
    return u, v


def _start(k, cost, init, sms):
    """Initial assignment (int32 column of each row), a stats dict, and the column duals of the [0, 1]-scaled
    cost (float32; None for starts without them)."""
    import cupy

    n = cost.shape[0]
    if init == "auction":
        from . import dense_auction

        tau = dense_auction.dense_square_int(
            cost, stop_eps=lambda max_cost: max(1, max_cost // (INIT_EPS_DIVISOR * n))
        )[0]
        return tau.astype(np.int32), {}, None
    if init == "identity":
        return cupy.arange(n, dtype=np.int32), {}, None
    if init not in ("sinkhorn", "greedy"):
        raise ValueError(f"unknown init {init!r}")
    lo, hi = float(cost.min()), float(cost.max())
    cf = ((cost - lo) * (1.0 / (hi - lo) if hi > lo else 1.0)).astype(np.float32)
    u = cupy.zeros(n, dtype=np.float32)
    v = cupy.zeros(n, dtype=np.float32)
    stats = {}
    if init == "sinkhorn" and SINKHORN_ITERS > 0:
        u, v = _sinkhorn(k, cf, sms)
        stats["sinkhorn_iters"] = int(SINKHORN_ITERS)
    tau, rounds = _greedy(k, cf, u, v, sms)
    stats["greedy_rounds"] = rounds
    return tau, stats, v[:n]


def solve(cost, *, time_limit: float = None, init: str = None):
    """DGS on a finite square CuPy ``(n, n)`` float64 matrix; returns the column of each row (int64)."""
    import cupy

    time_limit = TIME_LIMIT_S if time_limit is None else float(time_limit)
    init = INIT if init is None else init
    start = time.perf_counter()
    cost = cupy.ascontiguousarray(cupy.asarray(cost, dtype=np.float64))
    n = cost.shape[0]
    if n <= 1:
        return cupy.zeros(n, dtype=np.int64)
    k = _kernels()
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    tau, init_stats, column_duals = _start(k, cost, init, sms)
    rows = cupy.arange(n)
    cur = cost[rows, tau]
    init_objective = float(cur.sum())
    t_init = time.perf_counter() - start
    cost_t = cupy.ascontiguousarray(cost.T)
    gain = cupy.zeros(n, dtype=np.float64)
    partner = cupy.full(n, -1, dtype=np.int32)
    claim = cupy.zeros(n, dtype=np.uint64)
    applied = cupy.zeros(1, dtype=np.int32)
    done = cupy.zeros(1, dtype=np.int32)
    counters = cupy.zeros(2, dtype=np.int64)
    scale = max(abs(float(cost.min())), abs(float(cost.max())))
    tol = np.float64(max(scale * 1e-13, 1e-300))
    smem = n * 8 if n * 8 <= 48 * 1024 else 0
    use_smem = np.int32(1 if smem else 0)
    row_grid = (max(1, min(n, sms * 8)),)
    thread_grid = (max(1, min(-(-n // 256), sms * 16)),)
    n32 = np.int32(n)

    def switch() -> bool:
        """Switching rounds on ``tau``/``cur`` until none applies (``done``) or the time limit (returns True)
        or the round cap stops them."""
        done[:] = 0
        queued = 0
        while queued < MAX_ROUNDS:
            for _ in range(min(CHECK_EVERY, MAX_ROUNDS - queued)):
                k["dgs_eval"](row_grid, (256,),
                              (n32, cost, cost_t, tau, cur, gain, partner, claim, tol, use_smem, done),
                              shared_mem=smem)
                k["dgs_select"](thread_grid, (256,), (n32, gain, partner, claim, done))
                k["dgs_apply"](thread_grid, (256,), (n32, cost, gain, partner, claim, tau, cur, applied, done))
                k["dgs_check"]((1,), (1,), (applied, done, counters))
                queued += 1
            if int(done[0]):
                return False
            if time.perf_counter() - start > time_limit:
                return True
        return False

    timed_out = switch()
    switched_objective = float(cur.sum())
    polish_s = 0.0
    if POLISH_GAP > 0 and not timed_out:
        # One auction phase bounds the gap; switching again makes the result 2-exchange optimal too.
        from .dense_auction import refine_dense

        polish_start = time.perf_counter()
        duals = column_duals if column_duals is not None else cupy.zeros(n, dtype=np.float32)
        scale_cost = abs(switched_objective) / n if switched_objective else float(cost.max() - cost.min())
        polished = refine_dense(cost, tau, duals, POLISH_GAP * scale_cost).astype(np.int32)
        if float(cost[rows, polished].sum()) < switched_objective:
            tau = polished
            cur = cost[rows, tau]
            timed_out = switch()
        polish_s = time.perf_counter() - polish_start
    rounds, swaps = (int(x) for x in counters.get())
    objective = float(cur.sum())
    LAST_STATS.clear()
    LAST_STATS.update(init=init, rounds=rounds, swaps=swaps, init_s=t_init, total_s=time.perf_counter() - start,
                      timed_out=timed_out, converged=bool(int(done[0])), init_objective=init_objective,
                      switched_objective=switched_objective, polish_s=polish_s, objective=objective, **init_stats)
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
        description="GPU Deep Greedy Switching (Roverso et al. 2010) from a Sinkhorn-price greedy start: "
        "heuristic (2-exchange optimal, not exact; tracker.lap.dgs.POLISH_GAP bounds the gap at a cost), "
        "time limit tracker.lap.dgs.TIME_LIMIT_S",
        gpu=True,
        exact=False,
        dense=solve_dense,
    )
)
