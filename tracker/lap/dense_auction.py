"""The dense GPU auction (``solver="auction"`` on dense matrices): truncated epsilon phases, then an exact finish.

Dense problems on the GPU (:func:`dense_with_exact_finish`) run truncated epsilon phases of the forward
auction of :mod:`tracker.lap.auction` (Bertsekas; Vasconcelos & Rosenhahn 2009), each in one cooperative
launch (``auction_phase.cu``), warm-started from the Hungarian's row and column reduction, and hand the
prices to the Hungarian solvers' exact finish as dual variables: the auction does the bulk of the matching
in parallel, the Hungarian's multi-tree phases and shortest augmenting paths do the end of it, which is
where an auction spends long runs of single bids. Otherwise (the NumPy emulation) a dense square matrix
without forbidden entries is solved by the auction alone to ``eps = 1`` on the integer map (exact), and
other dense problems as sparse full matchings.
"""

from __future__ import annotations

import time

import numpy as np

from .auction import (
    LAST_STATS, _cuda_kernels, _full_row_matching, _integer_map, _kernels, _map_parameters, _Problem,
    auction_square, eps_schedule,
)

DENSE_FINISH: str | None = "auto"
"""How a dense problem ends on the GPU. ``"auto"``: ``"classical"`` for integer costs (exact ties, where
its zero lists excel: 1.5-9x faster than ``"tree"`` on int [0, n/10] and int [0, n] on one H200), else
``"tree"``. ``"sap"``: the auction's prices go to the Hungarian solvers' exact
finish (step 5a, an auction with eps = 0 on exact duals, then Dijkstra-order augmenting paths:
:func:`tracker.lap.hungarian_tree.sap_finish`); ``"tree"``: the multi-tree Hungarian phases first, then
that finish (for costs with many ties); ``"classical"``: the classical Hungarian's iterations
(:func:`tracker.lap.hungarian_classical.classical_phases`: zero lists and dual updates), then that finish;
``None``: the auction alone, epsilon-scaled down to ``eps = 1`` on the integer map (exact there; also what the NumPy emulation runs)."""
DENSE_ALPHA = 4
"""Epsilon-scaling factor of the dense auction before an exact finish."""
DENSE_HANDOFF_EPS = 1e-6
"""Epsilon of the last auction phase before the exact finish, relative to the largest (mapped) cost."""
DENSE_WARM_START = True
"""Start the dense auction from the Hungarian's row and column reduction: its column duals as prices, its
greedy tight pairs as the first assignment, and epsilon from :data:`DENSE_WARM_EPS` of the range (the
issue's "prices warm-started"). On one H200 it made the dense auction 1.1-6x faster on every class of
``benchmarks/dense_auction_sweep.py`` at n = 1000-20000 (``lap_dense_auction_h200.md``)."""
DENSE_WARM_EPS = 1e-4
"""First epsilon of a warm-started dense auction, relative to the largest (mapped) cost."""
DENSE_WARM_FEW_FREE = 0.1
"""When the reduction's greedy matching leaves at most this fraction of the rows free, the warm-started
auction runs one phase at its last epsilon (no scaling). On the H200 sweep the greedy left 5-7 % free on the
geometric and int [0, n/10] classes, 22 % on the others."""
DENSE_PHASE_STOP = 0.003
"""Before an exact finish, every auction phase stops once at most this fraction of the rows (and at least
:data:`DENSE_PHASE_STOP_MIN`) are unassigned: the end of a phase is long chains of single evictions, a
bidding round each, which the next phase or the finish does better."""
DENSE_PHASE_STOP_MIN = 32
"""... and at least this many rows. The trade is the tail's bidding rounds (about the same cost each whatever
``n``) against the finish's work per row left (which grows with ``n``), so the best count of rows left varies
less with ``n`` than a fraction does. On one H100 (``benchmarks/results/lap_generous_h100.md``, "Dense auction:
where its phases stop"; `dense_auction_sweep.py`, median of 7), at least 8 / 16 / 32 / 48 rows: int [0, n]
4.9 / 4.1 / 3.6 / 4.8 ms at n = 1000, 11.1 / 9.2 / 7.4 / 7.2 at 4096, 19.3 / 18.7 / 17.3 / 14.7 at 8192;
int [0, 10n] 13.2 / 11.6 / 11.7 / 12.3 at 4096, 30.1 / 29.2 / 29.1 / 33.6 at 8192; float [0, 1) 21.4 / 20.1 /
20.3 / 19.3 at 4096, 43.2 / 44.2 / 46.2 / 52.5 at 8192 (the other classes within 0.4 ms)."""


def _dense_problem(xp, cost):
    """A finite square float matrix as the auction's int64 problem (see :func:`_integer_map`); also whether the
    costs were integers (then the final eps of 1 is exact)."""
    mapping, max_cost, exact = _integer_map(xp, cost.ravel(), cost.shape[0])
    return _Problem(xp, cost.shape[0], xp.ascontiguousarray(mapping(cost).ravel()), max_cost), exact


def dense_square_int(cost, *, emulate=False, stop_eps=None):
    """Auction on a finite square float matrix: (column of each row, prices, int costs, max cost).

    ``stop_eps`` (an int, or a function of the maximal integer cost) ends the
    epsilon-scaling early: the result is then only eps-optimal (DGS's start).
    """
    kern = _kernels(emulate)
    xp = kern.xp
    n = cost.shape[0]
    prob, exact = _dense_problem(xp, cost)
    icost, max_cost = prob.cost, prob.max_cost
    if callable(stop_eps):
        stop_eps = stop_eps(max_cost)
    assigned, price = auction_square(prob, kern, eps_schedule(max_cost, stop_eps=stop_eps))
    LAST_STATS.update(square_n=n, edges=n * n, exact_integer=exact)
    return assigned.astype(np.int64), price, icost, max_cost


def refine_dense(cost, start, column_duals, eps_cost: float, *, emulate=False):
    """One auction phase on a finite square float matrix from an assignment and dual prices.

    ``start``: a column for every row (one-to-one); ``column_duals``: the
    columns' duals ``v`` of the cost mapped affinely to [0, 1] (reduced costs
    ``c - u - v``; the auction's prices are ``-v``); ``eps_cost``: the phase's
    eps in cost units. The result is eps-optimal: its total is at most
    ``n * eps_cost`` above the optimum (Bertsekas 1988), whatever the start;
    a start near the optimum with near-optimal prices only makes it quick.
    Returns the column of each row (int64).
    """
    kern = _kernels(emulate)
    xp = kern.xp
    n = cost.shape[0]
    prob, _ = _dense_problem(xp, cost)
    max_cost = prob.max_cost
    eps = max(1, int(eps_cost * max_cost / max(float(cost.max()) - float(cost.min()), 1e-300)))
    prices = -xp.rint(xp.asarray(column_duals, dtype=np.float64)[:n] * max_cost).astype(np.int64)
    prices -= prices.min()  # bids must be positive (a common shift changes no choice)
    assigned, _ = auction_square(prob, kern, [eps], prices=prices, start=start)
    return assigned.astype(np.int64)


def dense_with_exact_finish(cost, *, finish: str = "auto", stats: dict | None = None):
    """Dense problem on the GPU: a truncated epsilon-scaled auction, then an exact Hungarian finish.

    The issue's second road to exactness ("finish with a shortest-augmenting-path/Hungarian phase
    warm-started from the auction prices"). The auction runs its epsilon phases (factor
    :data:`DENSE_ALPHA`, down to :data:`DENSE_HANDOFF_EPS` of the cost range), each stopped once few rows
    are unassigned (:data:`DENSE_PHASE_STOP`). Its prices ``p`` (int64 on the mapped costs) become column
    duals ``v = -p / scale`` in cost units (integers for integer costs, so that the Hungarian's exact
    integer tolerance holds), row duals ``u = min_j (C[i, j] - v[j])`` (feasible by construction), and
    every auction pair that is tight under them is kept. The Hungarian finish then matches the rest
    exactly (``finish``: see :data:`DENSE_FINISH`). ``cost``: ``(n, m)`` CuPy float64, ``n <= m``,
    finite or ``+inf`` (forbidden: a big-M, as for the Hungarian solvers). Returns the column of each row
    (int64), or ``-1`` everywhere when infeasible.
    """
    import cupy as cp

    from . import _gpu_common, hungarian_classical, hungarian_tree

    t0 = time.perf_counter()
    n0 = cost.shape[0]
    problem = _gpu_common.prepare_dense(cost)
    if problem.infeasible:
        return _gpu_common.infeasible_result(n0, cp)
    c = cp.ascontiguousarray(_gpu_common.pad_square(problem.cost, 0.0), dtype=cp.float64)
    n = c.shape[0]
    if n == 1:
        return _gpu_common.finish(problem, cost, cp.zeros(1, dtype=np.int64))
    lo, hi = (min(problem.lo, 0.0), max(problem.hi, 0.0)) if n > n0 else (problem.lo, problem.hi)
    prob, scale = _dense_problem_gpu(c, problem.integral, lo, hi)
    t_prep = time.perf_counter()
    stop_rows = max(DENSE_PHASE_STOP_MIN, int(DENSE_PHASE_STOP * n))
    stop_eps = max(1, int(DENSE_HANDOFF_EPS * prob.max_cost))
    mod = hungarian_tree._module()
    start = prices = first_eps = None
    if DENSE_WARM_START:
        # The Hungarian's Alg. 1 (row and column reduction) and its greedy matching of tight pairs: its
        # column duals are the first prices (every greedy pair then is at its row's best: 0-CS), the
        # greedy pairs the first assignment.
        _, v_start, start, _ = hungarian_tree.initial_reduction(cp, mod, c, n, n, problem.eps, problem.eps_rel,
                                                                square=True)
        prices = cp.rint(-v_start * scale).astype(np.int64)
        prices -= prices.min()  # bids must be positive (a common shift changes no choice)
        # few rows left free: the reduction's prices are nearly optimal (geometric costs, many ties), and
        # one phase at the last epsilon does; else epsilon-scaling from DENSE_WARM_EPS
        few_free = int((start < 0).sum()) <= DENSE_WARM_FEW_FREE * n
        first_eps = stop_eps if few_free else int(DENSE_WARM_EPS * prob.max_cost)
    schedule = eps_schedule(prob.max_cost, alpha=DENSE_ALPHA, stop_eps=stop_eps, first_eps=first_eps)
    assigned, price = auction_square(prob, _kernels(False), schedule, prices=prices, start=start,
                                     stop_rows=stop_rows)
    auction_stats = dict(LAST_STATS)
    t1 = time.perf_counter()  # auction_square's last count read synchronised

    u, v, col4row, row4col, kept = _handoff(c, price, scale, problem, assigned)
    finish_stats: dict = {}
    free = n - kept
    if finish == "auto":
        finish = "classical" if problem.integral else "tree"
    if free and finish == "classical":
        hungarian_classical.classical_phases(cp, c, problem.eps, problem.eps_rel, u, v, col4row, row4col,
                                             finish_stats)
        free = 0
    if free and finish == "tree":
        free = hungarian_tree.tree_phases(cp, mod, c, n, n, problem.eps, problem.eps_rel, u, v, col4row, row4col,
                                          finish_stats)
    if free:
        hungarian_tree.sap_finish(cp, mod, c, n, n, u, v, col4row, row4col, finish_stats)
    result = _gpu_common.finish(problem, cost, col4row[:n0])
    t2 = time.perf_counter()
    LAST_STATS.clear()
    LAST_STATS.update(form="dense+finish", finish=finish, square_n=n, stop_rows=stop_rows,
                      phases=auction_stats["phases"], rounds=auction_stats["rounds"],
                      phase_rounds=auction_stats["phase_rounds"], kept=kept,
                      prep_s=t_prep - t0, auction_s=t1 - t0, finish_s=t2 - t1,
                      phase_seconds=auction_stats["phase_seconds"], **finish_stats)
    if stats is not None:
        stats.update(LAST_STATS)
    return result


def _dense_problem_gpu(c, integral: bool, lo: float, hi: float):
    """:func:`_dense_problem` for a finite square CuPy matrix in one fused pass (no n x n temporaries);
    also the scale of the map (mapped units per cost unit). ``lo``, ``hi``: the matrix's min and max."""
    import cupy as cp

    n = c.shape[0]
    factor, scale, max_cost = _map_parameters(lo, hi, n, integral)
    icost = cp.empty(n * n, dtype=np.int64)
    blocks = min(-(-icost.size // 256), 65535)
    _cuda_kernels().functions["dense_to_int"]((blocks,), (256,), (c, np.int64(icost.size), np.float64(lo),
                                                                  np.float64(scale), np.int64(factor), icost))
    return _Problem(cp, n, icost, max_cost), scale


def _handoff(c, price, scale: float, problem, assigned):
    """The auction's prices as the Hungarian's duals, and the auction pairs tight under them (one kernel).

    Column duals ``v = -price / scale`` (cost units; rounded for integer costs, so that the Hungarian's
    exact integer tolerance holds), row duals ``u = min_j (c[i, j] - v[j])`` (feasible by construction),
    and every pair of ``assigned`` that is tight under them (``problem.eps``, ``problem.eps_rel``).
    Returns ``u, v`` (float64), ``col4row, row4col`` (int32, -1: free) and the number of pairs kept.
    """
    import cupy as cp

    n = c.shape[0]
    u, v = cp.empty(n, dtype=cp.float64), cp.empty(n, dtype=cp.float64)
    col4row = cp.empty(n, dtype=cp.int32)
    row4col = cp.full(n, -1, dtype=cp.int32)
    kept = cp.zeros(1, dtype=cp.int32)
    _cuda_kernels().functions["dense_handoff"](
        (n,), (256,), (c, price, np.float64(scale), np.int32(bool(problem.integral)), np.int32(n),
                       np.float64(problem.eps), np.float64(problem.eps_rel), assigned, u, v, col4row, row4col, kept))
    return u, v, col4row, row4col, int(kept.get()[0])


def solve_dense(cost, *, emulate=False, stats: dict | None = None):
    """Backend ``dense`` entry point: ``(n, m)`` float64, ``n <= m``, entries finite or ``+inf``.

    On the GPU (and :data:`DENSE_FINISH` set) the auction hands over to an exact Hungarian finish
    (:func:`dense_with_exact_finish`); otherwise it runs alone to exactness on the integer map.
    ``stats``: filled with the solve's counters (:data:`LAST_STATS`).
    """
    if not emulate and DENSE_FINISH is not None:
        return dense_with_exact_finish(cost, finish=DENSE_FINISH, stats=stats)
    kern = _kernels(emulate)
    xp = kern.xp
    cost = xp.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    finite = xp.isfinite(cost)
    if n == m and bool(finite.all()):
        if n == 1:
            return xp.zeros(1, dtype=np.int64)
        result = dense_square_int(cost, emulate=emulate)[0]
    else:
        rows, cols = xp.nonzero(finite)
        result = _full_row_matching(emulate, n, m, rows.astype(np.int64), cols.astype(np.int64),
                                    cost[rows, cols])
    if stats is not None:
        stats.update(LAST_STATS)
    return result
