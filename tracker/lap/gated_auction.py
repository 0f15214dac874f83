"""Exact asymmetric assignment on the GPU: forward/reverse auction with epsilon-scaling.

The route of ``solver="auction"`` for gated problems (after the component split) and for
:func:`tracker.lap.min_weight_full_bipartite_matching`. The problem: ``n`` rows, ``m`` columns, int64 edge
costs (>= 0), and for every row a *private* option of cost ``priv[i]`` (the "no link" of tracking; a big-M
for a full matching). Every row takes one of its edges or its private option; a column may stay unmatched.

Algorithm (Bertsekas & Castañon 1992, "A forward/reverse auction algorithm for asymmetric assignment
problems"; kernels in ``gated_auction.cu``, one cooperative launch per epsilon phase):

* forward auction: unassigned rows bid for their best column (Jacobi rounds), raising its price by
  ``max(gap, eps)``; a row whose best option is its private one takes it (its price stays 0);
* epsilon-scaling: phases with eps from :data:`FIRST_EPS` of the cost range down to 1, by factors of
  :data:`ALPHA`; a phase starts by releasing the rows that violate eps-complementary slackness (eps-CS);
* reverse auction: a column freed that way and not taken back keeps a positive price, which optimality
  forbids for an unmatched column; it bids for a row instead (lowering its price to the row's second best
  minus eps) or, if no row gains more than eps from it, drops its price to 0.

After the last phase (eps = 1) every row satisfies 1-CS and every unmatched column has price 0, so the
assignment is within ``n`` of the optimum in the integer costs (exact for integer costs scaled by ``n + 1``;
within ``n * range / 2**50`` for float costs mapped to ``2**50`` levels, as in ``auction.py``).

Why not one phase at eps = 1 from zero prices (the route before): with generous gates (tens of candidates
per row) its price wars ran past 50,000 rounds, and the square fallback past 100 s at 100k nodes. In a
NumPy Jacobi simulation of 10k-node instances of the issue's generous-gate family (gate 4.5 sqrt(3) sigma):
at sigma = 0.3 NN, 11,225 rounds in one phase against ~2,800 forward + reverse rounds epsilon-scaled; at
0.5 NN, over 200,000 against ~35,000-45,000. Without the reverse stage the scaled phases leave hundreds of
overpriced unmatched columns; resetting their prices to 0 instead can cycle (seen in the simulation).

The first try is one phase at eps = 1 (exact when it ends) capped at :data:`FIRST_TRY_ROUNDS` rounds: easy
instances (short gates) finish there; the others go on from its prices and assignment.

Measured on one H100 (``benchmarks/results/lap_generous_h100.md``, ``solve_gated`` after the component split,
issue 27's generous-gate family), before the global price updates below: 2.0 / 24 / 389 / 837 ms at 10k nodes for f = 0.1 / 0.3 / 0.5 / 0.7, 2.4 / 43
/ 1160 / 2690 ms at 100k, 7.3 / 133 ms at 1M (f = 0.1 / 0.3); all exact. The rounds, not their cost (about 2
microseconds each in the one-block tail), are what is left at f >= 0.5: 200k-500k forward and reverse rounds,
long chains of single evictions through the crowd between a dying particle and a born one. Profiled (same file,
"Where the rounds go"): at 100k nodes, f = 0.5, 437k of 439k forward and all 462k reverse rounds run in block 0
with at most :data:`SMALL` bidders left. Shortest augmenting paths for those last bidders
(:data:`FINISH_ROWS`, :mod:`tracker.lap.gated_finish`) are exact but were slower there (about 10 ms a search
in one block), so they are off by default. The per-phase profile (same file) puts the wars in the coarse
phases: at 100k nodes, f = 0.5, the phases at eps = 3 % to 0.001 % of the cost range took 1.7 s of 1.8 s.
What ends them: global price updates (:data:`GU_ROUNDS`; Goldberg & Kennedy's global update of cost scaling),
which set every column's price (forward) or row's value (reverse) from its shortest distance to an exit in
one grid-wide search and keep eps-CS, so the phases' exactness argument is unchanged: 100k nodes, f = 0.5,
2.0 s -> 244 ms (542k -> 16k forward and 436k -> 2.8k reverse rounds; what is left is mostly the updates' own
label-correcting rounds, 16.6k of them, about 10 microseconds each). With updates during the grid rounds too
(:data:`GU_GRID_ROUNDS`) and :data:`GU_CAP` = 64: 206 ms there, 1.9 s at 1M nodes (6.8 s without updates).
"""

from __future__ import annotations

import functools
import time

import numpy as np

from . import gated_finish

ALPHA = 16
"""Epsilon-scaling factor between phases (sweep of the simulation above: 8-64 within 20 % at sigma = 0.3 NN)."""
FIRST_EPS = 0.01
"""First epsilon of the scaled phases, relative to the range of the edge costs. H100 (``lap_generous_h100.md``,
"Session of 2026-11-25 (2)", with :data:`GU_HOPS` = 3), 0.03 / 0.01 / 0.003: 10k nodes, f = 0.3 / 0.5 / 0.7:
12.1 / 11.6 / 12.5, 43.6 / 38.0 / 37.1, 40.5 / 38.1 / 37.0 ms; 100k nodes: 35.7 / 28.6 / 28.3, 197 / 173 / 220,
1019 / 687 / 791 ms; 1M nodes, f = 0.3 / 0.5: 112 / 106 / 100, 1341 / 1385 / 1346 ms (f = 0.1 ends in the
first try: no change). The NumPy emulation's rounds had pointed the same way (5-20 % fewer at 10k nodes). Checked
on five families it was not tuned on (``lap_instances.FAMILIES``: 2D, slab, clustered, mixed mobility, drift; same
file, "Session of 2026-11-25 (3)"): 0.003 was 7 % faster in the geometric mean of 22 instances but 31 % slower on
the uniform family at 100k nodes, f = 0.5, within a run-to-run spread of about 10 %: kept."""
FIRST_TRY_ROUNDS = 60
"""Rounds of the first try (one phase at eps = 1 from zero prices) before epsilon-scaling takes over. Easy
instances end there (the 1M-node full matching at f = 0.1 in 22 rounds); on generous gates it is a price war
whose rounds the scaled phases redo. H100, with :data:`GU_CAP` = 64 (``lap_generous_h100.md``, "Session of
2026-11-25"), 300 / 60 / 0 rounds: 36.9 / 32.5 / 32.3 ms at 100k nodes, f = 0.3; 210 / 198 / 187 ms at f = 0.5;
3080 / 2881 / 2839 ms at 1M, f = 0.5."""
THREADS = 1024
"""Threads per block of the phase kernel: 1024 (one block per multiprocessor) or 256 (four). Measured on the
H100 (``benchmarks/results/lap_generous_h100.md``, tuning table, with :data:`SMALL`): 1024 / 256 took 43.5-45.6
/ 47.8-58.2 ms at 100k nodes, f = 0.3, and 276-283 / 489-565 ms at 10k nodes, f = 0.5."""
SMALL = 256
"""A stage (forward or reverse) continues in one thread block once at most this many rows (columns) bid
(same tuning: with 1024 threads, 256 vs 64: 45.6 vs 43.5 ms at 100k, f = 0.3; 276 vs 283 ms at 10k, f = 0.5)."""
GS_ROWS = 4
"""... and Gauss-Seidel (one warp, one bid at a time) once at most this many are left (when not finished by
shortest paths, :data:`FINISH_ROWS`)."""
FINISH_ROWS = 0
"""A stage's last bidders (at most this many; 0: never) are settled by shortest augmenting paths
(:mod:`tracker.lap.gated_finish`), one search each, in block 0 (not in the first try). Off: exact, but slower
on the H100 (``benchmarks/results/lap_generous_h100.md``, "Shortest-path finisher"): a search in one block
took about 10 ms at 100k nodes, f = 0.5 (255 searches: 2.7 s against 1.7 s without), and 44-73 ms against
46 ms at f = 0.3."""
EARLY_STOP = False
"""Phases before the last stop once at most :data:`SMALL` bidders are left (rows stay free, columns stale,
for the next phase). Off: the last phase then carries the tails (100k nodes, f = 0.5, with FINISH_ROWS = 64:
112k block rounds in the last phase, 3.1 s; same measurement)."""
GU_ROUNDS = 512
"""A global price update (``ga_phase``'s ``global_update`` in ``gated_auction.cu``: forward, every owned
column's price rises by its shortest clipped reduced-cost distance to an exit; reverse, every row's value falls
by its distance to one) when a stage's grid rounds hand the last :data:`SMALL` bidders over to block 0, and
again after every this many block rounds (0: never). Measured on the H100 (``benchmarks/results/
lap_generous_h100.md``, "Global price updates", with :data:`GU_CAP` = 16 and :data:`GU_REVERSE`): 44.7 ms
against 150 ms without at 10k nodes, f = 0.5; 244 ms against 2.0 s at 100k, f = 0.5; 38.4 against 46.5 ms
at 100k, f = 0.3. At 100k, f = 0.5, every 64 block rounds: 360 ms (763 ms without the cap); every 16, no
cap: 3.3 s; once per stage: 1.5 s. Not measured with
these settings at 1M nodes (once per stage with the cap: 6.57 s against 7.10 s at f = 0.5, 142 against
132 ms at f = 0.3; every 64 rounds without the cap: 17.3 s and 762 ms). Again with :data:`GU_HOPS` = 3 and
:data:`FIRST_EPS` = 0.01 (same file, "Session of 2026-11-25 (2)"), 256 / 512 / 1024 / 2048: 100k nodes, f = 0.5:
181 / 142 / 201 / 256 ms; f = 0.3: 29.9 / 28.4 / 27.6 / 27.4 ms; f = 0.7: 688 / 649 / 757 / 793 ms; 1M nodes,
f = 0.5: 1369 / 1214 / 1114 / 1383 ms; f = 0.3: 115 / 110 / 106 / 107 ms; 10k nodes, f = 0.5 / 0.7: 59.8 / 40.5
/ 51.3 / 65.8 and 44.0 / 46.3 / 58.0 / 73.6 ms."""
GU_REVERSE = True
"""... in the reverse stages too (the mirror image). Forward only, the reverse stages fought the raised prices
back down: 100k nodes, f = 0.5, 1.5-3.0M reverse rounds and 3.4-12.9 s (same file)."""
GU_CAP = 64
"""... each label (a price's change) at most this many times the phase's eps (0: no cap; any cap keeps eps-CS,
and labels at the cap are not propagated: the searches stay near the exits). 16 against none, every 256
rounds: 244 vs 305 ms at 100k, f = 0.5; 38.4 vs 40.3 ms at f = 0.3; 44.7 vs 35.8 ms at 10k, f = 0.5. 64 against
16 (H100, same file, "Session of 2026-11-25"): 36.5 vs 47.9 ms at 10k, f = 0.5; 36.9 vs 37.4 ms at 100k, f = 0.3;
210 vs 272 ms at f = 0.5; 135 vs 139 ms at 1M, f = 0.3; 3080 vs 3271 ms at f = 0.5. On the five other families
(same file, "Session of 2026-11-25 (3)"), geometric mean of 22 instances against 64: 256 0.98x, 1024 1.02x, no cap
1.24x (up to 2.6x), 16 up to 2.8x slower."""
GU_GRID_ROUNDS = 256
"""... and after every this many grid-wide rounds (0: never): the stages of large instances spend most of
their rounds grid-wide, with more than :data:`SMALL` bidders, where :data:`GU_ROUNDS` never fires. H100
(``lap_generous_h100.md``, "Session of 2026-11-25"), never / 256 / 1024 / 4096: 1M nodes, f = 0.5: 2730 /
1530 / 1665 / 1881 ms (86,746 / 3,610 / 10,495 / 25,046 forward grid rounds); f = 0.3: 133 / 112 / 165 / 132 ms;
100k nodes: 206 / 193 / 212 / 201 ms at f = 0.5, 35.9 / 32.7 / 35.4 / 35.1 ms at f = 0.3 (that sweep also ran
the updates' small frontiers in block 0, since removed; 256 again without them: 1911 / 116 / 206 / 32.5 ms)."""
GU_HOPS = 3
"""A global update's round carries a label along a chain of up to this many nodes in one warp (1: one hop a
round, every lowered node waits for the next round); same labels, fewer rounds. H100 (``lap_generous_h100.md``,
"Session of 2026-11-25 (2)"), 1 / 2 / 3 / 4 / 6 / 8 hops: 100k nodes, f = 0.5: 222 / 197 / 197 / 203 / 221 /
239 ms (13,251 / 7,945 / 6,332 / 5,580 / 4,982 / 4,760 update rounds); f = 0.3: 37.0 / 34.0 / 33.8 / 35.8 /
34.2 / 35.3 ms; 1M nodes, f = 0.5: 1674 / 1370 / 1342 / 1361 / 1446 / 1522 ms; f = 0.3: 114 / 107 / 109 / 122 /
107 / 112 ms (16 and more hops: slower, 292-327 ms at 100k, f = 0.5: a round waits for its longest chain)."""
MAX_ROUNDS = 1 << 30
"""Cap on the rounds of one stage of one phase (an error, never reached on feasible problems)."""

INF64 = (1 << 62) - 1  # INF64 in gated_auction.cu
PRIVATE = -2

_C_ERROR, _C_FWD, _C_REV, _C_RELEASED, _C_STALE = 3, 4, 5, 6, 7
_C_FPATH, _C_RPATH, _C_FGRID, _C_RGRID, _C_FLAB, _C_RLAB, _C_GUPD, _C_GURND = 8, 9, 10, 11, 12, 13, 14, 15
_C_TSTAGE, _C_TGU, _C_TBLOCK = 21, 22, 23  # microseconds (the GPU's clock; 0 when emulating)
_C_SLACK = 24  # 24, 25: a u64, the phase's largest (own value - best value) of a row when it started
_N_COUNTS = 26

LAST_STATS: dict = {}
"""Counters of the last solve: phases, forward / reverse rounds, released rows, stale columns, seconds."""


class GatedAuctionError(RuntimeError):
    """The auction hit its round cap or found a row without options (please report the instance)."""


def eps_schedule(edge_range: int) -> list[int]:
    """Epsilons of the scaled phases: :data:`FIRST_EPS` of ``edge_range`` down to 1 by factors of :data:`ALPHA`."""
    eps = max(1, int(FIRST_EPS * edge_range))
    schedule = [eps]
    while eps > 1:
        eps = max(1, eps // ALPHA)
        schedule.append(eps)
    return schedule


def solve(n: int, m: int, rows, cols, cost, priv, *, edge_range: int, emulate: bool = False):
    """Optimal option of every row: a column, or :data:`PRIVATE` (-2).

    Parameters
    ----------
    n, m : int
        Rows and columns.
    rows, cols : (k,) int arrays
        Edges (no duplicates); every row needs an edge or a finite private cost.
    cost : (k,) int64 array
        Edge costs, >= 0, below ``2**51``.
    priv : (n,) int64 array
        Cost of each row's private option, >= 0 (:data:`INF64`: none).
    edge_range : int
        Spread of the edge costs (sets the first epsilon).
    emulate : bool
        NumPy emulation of the kernels (tests without a GPU); arrays are then NumPy.

    Returns
    -------
    assigned : (n,) int64 array (CuPy, NumPy when emulating)
    price : (m,) int64 array
    """
    t0 = time.perf_counter()
    kern = _Emulated() if emulate else _cuda()
    xp = kern.xp
    rows = xp.asarray(rows, dtype=np.int64)
    cols = xp.asarray(cols, dtype=np.int64)
    cost = xp.asarray(cost, dtype=np.int64)
    priv = xp.ascontiguousarray(xp.asarray(priv, dtype=np.int64))
    finite_priv = priv[priv < INF64]
    top = max(int(cost.max()) if cost.size else 0, int(finite_priv.max()) if finite_priv.size else 0)
    problem = _layout(xp, n, m, rows, cols, cost, priv, single_gap=top + 1)
    ws = _Workspace(xp, n, m)
    stats = {"phases": 0, "forward_rounds": 0, "reverse_rounds": 0, "released": 0, "stale": 0,
             "forward_paths": 0, "reverse_paths": 0, "forward_grid_rounds": 0, "reverse_grid_rounds": 0,
             "global_updates": 0, "global_update_rounds": 0, "first_try": "capped", "skipped_phases": 0,
             "per_phase": []}
    plan = [(1, True, FIRST_TRY_ROUNDS)]
    for k, (eps, first, cap) in enumerate(plan):
        last = k == len(plan) - 1 and k > 0
        t_phase = time.perf_counter()
        counts = kern.phase(problem, ws, eps, first, cap, tail=first or last or not EARLY_STOP,
                            finish=0 if first else FINISH_ROWS, gu_rounds=GU_ROUNDS,
                            gu_cap=GU_CAP * eps if GU_CAP > 0 else INF64, gu_grid=GU_GRID_ROUNDS)
        t_phase = time.perf_counter() - t_phase
        stats["phases"] += 1
        stats["forward_rounds"] += int(counts[_C_FWD])
        stats["reverse_rounds"] += int(counts[_C_REV])
        stats["released"] += int(counts[_C_RELEASED])
        stats["stale"] += int(counts[_C_STALE])
        stats["forward_paths"] += int(counts[_C_FPATH])
        stats["reverse_paths"] += int(counts[_C_RPATH])
        stats["forward_grid_rounds"] += int(counts[_C_FGRID])
        stats["reverse_grid_rounds"] += int(counts[_C_RGRID])
        stats["global_updates"] += int(counts[_C_GUPD])
        stats["global_update_rounds"] += int(counts[_C_GURND])
        stats["per_phase"].append((eps, *(int(counts[c]) for c in (_C_RELEASED, _C_FWD, _C_FGRID, _C_FPATH,
                                                                   _C_STALE, _C_REV, _C_RGRID, _C_RPATH,
                                                                   _C_FLAB, _C_RLAB, _C_GUPD, _C_GURND)),
                                   *(round(int(counts[c]) / 1e3, 2) for c in (_C_TSTAGE, _C_TGU, _C_TBLOCK)),
                                   round(t_phase * 1e3, 2)))
        if counts[_C_ERROR] == 1:
            raise GatedAuctionError("a row without options (internal error; please report)")
        if k == 0:
            if counts[_C_ERROR] == 0:
                stats["first_try"] = "done"
                break
            plan += [(e, False, MAX_ROUNDS) for e in eps_schedule(edge_range)]
        elif counts[_C_ERROR] == 2:
            raise GatedAuctionError(f"auction did not converge within {MAX_ROUNDS} rounds at eps={eps}; "
                                    "please report this instance")
        elif counts[_C_RELEASED] == 0 and counts[_C_STALE] == 0 and not EARLY_STOP:
            # an idle phase: every row is within `slack` of its best option (and the phase before ended
            # complete), so no phase with eps >= slack would release one either
            slack = int(counts[_C_SLACK]) & 0xFFFFFFFF | (int(counts[_C_SLACK + 1]) & 0xFFFFFFFF) << 32
            kept = [step for step in plan[k + 1:] if step[0] < slack]
            stats["skipped_phases"] += len(plan) - (k + 1) - len(kept)
            plan[k + 1:] = kept
    stats["seconds"] = time.perf_counter() - t0
    LAST_STATS.clear()
    LAST_STATS.update(stats)
    return ws.assigned.astype(np.int64), ws.price


# ------------------------------------------------------------------ layout --

class _Problem:
    """CSR (by row) and CSC (by column) of the edges, the private costs, and the kernel arguments."""

    def __init__(self, n, m, indptr, cols, cost, cptr, crows, ccost, priv, single_gap):
        self.n, self.m = n, m
        self.indptr, self.cols, self.cost = indptr, cols, cost
        self.cptr, self.crows, self.ccost = cptr, crows, ccost
        self.priv = priv
        self.single_gap = int(single_gap)
        self.args = (np.int32(n), np.int32(m), indptr, cols, cost, cptr, crows, ccost, priv, np.int64(single_gap))


def _grouped(xp, key, size, other, cost):
    if xp is np or size >= 2**31:
        order = xp.argsort(key, kind="stable") if xp is np else xp.argsort(key)
        ptr = xp.zeros(size + 1, dtype=np.int64)
        ptr[1:] = xp.cumsum(xp.bincount(key, minlength=size))
    else:  # CuPy's radix sort (stable) on 32-bit keys, and the offsets from the sorted keys in one launch
        key = key.astype(np.int32)
        order = xp.argsort(key)
        ptr = xp.empty(size + 1, dtype=np.int64)
        _cuda().offsets(key, order, ptr)
    return ptr, xp.ascontiguousarray(other[order].astype(np.int32)), xp.ascontiguousarray(cost[order])


def _layout(xp, n, m, rows, cols, cost, priv, single_gap):
    indptr, c_of_edge, cost_r = _grouped(xp, rows, n, cols, cost)
    cptr, r_of_edge, cost_c = _grouped(xp, cols, m, rows, cost)
    return _Problem(n, m, indptr, c_of_edge, cost_r, cptr, r_of_edge, cost_c, priv, single_gap)


class _Workspace:
    """The two workspaces of ``gated_auction.cu`` (``carve``) and views of what the driver reads."""

    def __init__(self, xp, n, m):
        big = max(n, m)
        self.ws64 = xp.zeros(5 * m + 4 * n + 2 * big + 1, dtype=np.int64)
        self.ws32 = xp.full(_N_COUNTS + 3 * m + 4 * n + 2 * big + 7 * big + 2, -1, dtype=np.int32)
        self.ws32[:_N_COUNTS] = 0
        self.ws64[5 * m + 3 * n:5 * m + 4 * n] = -1  # row_bid: UINF64
        self.ws64[5 * m + 4 * n:5 * m + 4 * n + big] = INF64  # the finisher's labels
        self.price = self.ws64[:m]
        self.acost = self.ws64[m:m + n]
        self.counts = self.ws32[:_N_COUNTS]
        self.owner = self.ws32[_N_COUNTS:_N_COUNTS + m]
        self.assigned = self.ws32[_N_COUNTS + m:_N_COUNTS + m + n]


# ----------------------------------------------------------------- kernels --

class _Cuda:
    def __init__(self):
        import cupy

        from ._cuda import load_module

        self.xp = cupy
        module = load_module("lap/gated_auction.cu", cooperative=True)
        self.function = module.get_function("ga_phase")
        self._offsets = module.get_function("ga_offsets")
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self._blocks = {}

    def offsets(self, key, order, ptr) -> None:
        """``ptr`` (size + 1) of int32 ``key`` sorted by ``order`` (``ga_offsets``)."""
        n_edges = int(key.size)  # (the module's launches are cooperative: a grid that fits at once, striding)
        blocks = max(1, min((n_edges + 256) // 256, 4 * self.sms))
        self._offsets((blocks,), (256,), (key, order, np.int64(n_edges), np.int32(ptr.size - 1), ptr))

    def blocks(self, threads: int) -> int:
        """Blocks of a cooperative launch of ``threads`` each: as many as fit on the GPU at once."""
        if threads not in self._blocks:
            import cupy

            try:
                per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.function.ptr, threads, 0)
            except Exception:  # older CuPy: what 64 registers a thread allow
                per_sm = 65536 // (64 * threads)
            self._blocks[threads] = self.sms * max(1, min(int(per_sm), 2048 // threads))
        return self._blocks[threads]

    def phase(self, prob: _Problem, ws: _Workspace, eps: int, first: bool, cap: int, tail: bool, finish: int,
              gu_rounds: int, gu_cap: int, gu_grid: int):
        ws.counts[:] = 0
        self.function((self.blocks(THREADS),), (THREADS,),
                      (*prob.args, ws.ws64, ws.ws32, np.int64(eps), np.int32(bool(first)), np.int32(SMALL),
                       np.int32(GS_ROWS), np.int32(finish), np.int32(bool(tail)), np.int32(min(cap, MAX_ROUNDS)),
                       np.int32(gu_rounds), np.int64(min(gu_cap, INF64)), np.int32(bool(GU_REVERSE)),
                       np.int32(gu_grid), np.int32(max(1, GU_HOPS))))
        return ws.counts.get()


@functools.lru_cache(maxsize=1)
def _cuda() -> _Cuda:
    return _Cuda()


def _settle(pending: list, one_round, one_path, cap: int, tail: bool, finish: int, update=None,
            gu_rounds: int = 0, gu_grid: int = 0) -> tuple[list, int, int, int]:
    """Bidding rounds over ``pending`` (free rows forward, stale columns in reverse) until none is left, ``cap``
    rounds are spent, or (without ``tail``) at most :data:`SMALL` are left; the last ``finish`` by shortest paths.
    With ``update`` and ``gu_rounds`` (and ``tail``): ``update()`` once at most :data:`SMALL` are left, and again
    after every ``gu_rounds`` rounds (the kernel's global price updates), and after every ``gu_grid`` rounds
    with more than :data:`SMALL` bidders (the kernel's grid rounds).

    Returns what is still pending, the rounds run, the number settled by paths and the updates run.
    """
    rounds, updates, since, grid = 0, 0, None, 0
    while pending and rounds < cap and (tail or len(pending) > SMALL):
        if update is not None and gu_rounds > 0 and tail and len(pending) <= SMALL and (
                since is None or since >= gu_rounds):
            update()
            updates += 1
            since = 0
        if len(pending) <= finish:
            for k in pending:
                one_path(k)
            return [], rounds, len(pending), updates
        in_grid = len(pending) > SMALL
        pending = one_round(pending)
        rounds += 1
        since = None if since is None else since + 1
        if in_grid:
            grid += 1
            if update is not None and gu_grid > 0 and tail and grid % gu_grid == 0 and pending:
                update()
                updates += 1
    return pending, rounds, 0, updates


class _Emulated:
    """``ga_phase`` in NumPy: Jacobi rounds, then the shortest-path finisher (:mod:`tracker.lap.gated_finish`)
    for the last :data:`FINISH_ROWS` (the kernel's Gauss-Seidel tail, used when that is 0, ends the same way:
    both keep eps-CS and end with every stale column resolved)."""

    xp = np

    def phase(self, prob: _Problem, ws: _Workspace, eps: int, first: bool, cap: int, tail: bool, finish: int,
              gu_rounds: int = 0, gu_cap: int = INF64, gu_grid: int = 0):
        n = prob.n
        counts = np.zeros(_N_COUNTS, dtype=np.int64)
        price, assigned, owner = ws.price, ws.assigned, ws.owner
        if first:
            listed = [i for i in range(n) if assigned[i] == -1]
            freed = []
        else:
            listed, freed, slack = [], [], 0
            for i in range(n):
                b1 = self._row_best(prob, price, i)[0]
                own = self._own(prob, ws, i)
                slack = max(slack, INF64 if own >= INF64 else own - b1)
                if own > b1 + eps:
                    if assigned[i] >= 0:
                        owner[assigned[i]] = -1
                        freed.append(int(assigned[i]))
                    assigned[i] = -1
                    listed.append(i)
                    counts[_C_RELEASED] += 1
            counts[_C_SLACK], counts[_C_SLACK + 1] = slack & 0xFFFFFFFF, slack >> 32
        listed, counts[_C_FWD], counts[_C_FPATH], counts[_C_GUPD] = _settle(
            listed, lambda left: self._forward_round(prob, ws, left, eps),
            lambda i: gated_finish.forward(prob, ws, i), cap, tail, finish,
            lambda: global_update(prob, ws, gu_cap), gu_rounds, gu_grid)
        if listed and tail:
            counts[_C_ERROR] = 2
        if first or counts[_C_ERROR]:
            return counts
        stale = [j for j in range(prob.m) if owner[j] == -1 and price[j] > 0]
        counts[_C_STALE] = len(stale)
        stale, counts[_C_REV], counts[_C_RPATH], reverse_updates = _settle(
            stale, lambda left: self._reverse_round(prob, ws, left, eps),
            lambda j: gated_finish.reverse(prob, ws, j), cap, tail, finish,
            lambda: global_update(prob, ws, gu_cap, forward=False), gu_rounds if GU_REVERSE else 0,
            gu_grid if GU_REVERSE else 0)
        counts[_C_GUPD] += reverse_updates
        if stale and tail:
            counts[_C_ERROR] = 2
        return counts

    @staticmethod
    def _row_best(prob, price, i):
        lo, hi = int(prob.indptr[i]), int(prob.indptr[i + 1])
        options = [(int(prob.cost[k]) + int(price[prob.cols[k]]), int(prob.cols[k])) for k in range(lo, hi)]
        if prob.priv[i] < INF64:
            options.append((int(prob.priv[i]), 1 << 40))  # the private option loses ties
        options.sort()
        b1, j1 = options[0] if options else (INF64, -1)
        b2 = options[1][0] if len(options) > 1 else INF64
        return b1, j1, b2

    @staticmethod
    def _own(prob, ws, i):
        a = int(ws.assigned[i])
        if a == PRIVATE:
            return int(prob.priv[i])
        return int(ws.acost[i]) + int(ws.price[a]) if a >= 0 else INF64

    def _forward_round(self, prob, ws, listed, eps):
        bids = {}
        for i in listed:
            b1, j1, b2 = self._row_best(prob, ws.price, i)
            if b1 >= INF64:
                raise GatedAuctionError("a row without options")
            if j1 >= prob.m:
                ws.assigned[i], ws.acost[i] = PRIVATE, prob.priv[i]
                continue
            gap = prob.single_gap if b2 >= INF64 else b2 - b1
            bids[i] = (j1, int(ws.price[j1]) + max(gap, eps), b1 - int(ws.price[j1]))
        return _claim(ws, {i: (j, -b, b, tc) for i, (j, b, tc) in bids.items()}, forward=True)

    def _reverse_round(self, prob, ws, stale, eps):
        offers = {}
        for j in stale:
            lo, hi = int(prob.cptr[j]), int(prob.cptr[j + 1])
            betas = sorted(((self._own(prob, ws, int(prob.crows[q])) - int(prob.ccost[q]), -int(prob.crows[q]),
                             int(prob.ccost[q])) for q in range(lo, hi)), reverse=True)
            if not betas or betas[0][0] <= eps:
                ws.price[j] = 0
                continue
            b2 = betas[1][0] if len(betas) > 1 else None
            newp = 0 if b2 is None or b2 - eps <= 0 else b2 - eps
            i1, c1 = -betas[0][1], betas[0][2]
            offers[j] = (i1, c1 + newp, newp, c1)
        return _claim(ws, offers, forward=False)


def _claim(ws: _Workspace, offers: dict, forward: bool) -> list:
    """The conflicts of a Jacobi round (the kernel's ``nominate`` and ``claim``): ``offers[x] = (y, key, price,
    cost)``, forward from row ``x`` for column ``y`` (key: minus the bid), reverse from stale column ``x`` for row
    ``y`` (key: the row's resulting value); the lowest key for each ``y`` wins, the lowest ``x`` among equal
    keys; ``y``'s column takes the price and the row the edge cost. Returns the losers and the evicted rows /
    the columns left stale."""
    best = {}
    for x, (y, key, _, _) in offers.items():
        if y not in best or (key, x) < (offers[best[y]][1], best[y]):
            best[y] = x
    following = []
    for x, (y, _, price, cost) in offers.items():
        if best[y] != x:
            following.append(x)
            continue
        i, j = (x, y) if forward else (y, x)
        old = int(ws.owner[j] if forward else ws.assigned[i])
        ws.owner[j], ws.assigned[i], ws.price[j], ws.acost[i] = i, j, price, cost
        if old >= 0:
            if forward:
                ws.assigned[old] = -1
            else:
                ws.owner[old] = -1
            if forward or ws.price[old] > 0:
                following.append(old)
    return following


def global_update(prob: _Problem, ws: _Workspace, cap: int = INF64, forward: bool = True) -> None:
    """The kernel's global price update in NumPy (``global_update`` in ``gated_auction.cu``, which says why it
    keeps eps-CS), by Bellman-Ford rounds, each label at most ``cap``.

    Forward: every owned column's price rises by its shortest clipped reduced-cost distance to an exit (a
    free column: 0; its owner's private option: ``max(priv - own, 0)``). Reverse (every row assigned): every
    row's value falls by its distance to an exit (its private option: 0; its column left unmatched at price 0:
    the column's price), its column's price with it.
    """
    price, owner, assigned, acost = ws.price, ws.owner, ws.assigned, ws.acost
    n, m = prob.n, prob.m
    rows = np.repeat(np.arange(n), np.diff(prob.indptr))
    k = prob.cols.astype(np.int64)
    a = assigned.astype(np.int64)
    own = np.where(a == PRIVATE, prob.priv, np.where(a >= 0, acost + price[np.maximum(a, 0)], INF64))
    if forward:
        dist = np.full(m, INF64, dtype=np.int64)
        owned = owner >= 0
        dist[~owned] = 0
        o = owner[owned].astype(np.int64)
        dist[owned] = np.where(prob.priv[o] < INF64, np.maximum(prob.priv[o] - own[o], 0), INF64)
        source, target = k, a[rows]  # column k -> the column of a row of k
        keep = (target >= 0) & (target != k)
        weight = np.maximum(prob.cost[keep] + price[k[keep]] - own[rows[keep]], 0)
    else:
        dist = np.where(a == PRIVATE, 0, np.where(a >= 0, price[np.maximum(a, 0)], INF64)).astype(np.int64)
        source, target = rows, owner[k].astype(np.int64)  # row y -> the owner of a column of y
        keep = (target >= 0) & (target != rows)
        weight = np.maximum(prob.cost[keep] + price[k[keep]] - own[rows[keep]], 0)
    source, target = source[keep], target[keep]
    dist = np.minimum(dist, cap)
    while True:
        reach = dist[source] < cap
        before = dist.copy()
        np.minimum.at(dist, target[reach], dist[source[reach]] + weight[reach])
        if np.array_equal(before, dist):
            break
    if forward:
        lift = (owner >= 0) & (dist > 0) & (dist < INF64)
        price[lift] += dist[lift]
    else:
        lower = (a >= 0) & (dist > 0) & (dist < INF64)
        np.subtract.at(price, a[lower], dist[lower])
