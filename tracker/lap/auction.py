"""GPU auction solver (``solver="auction"``): dense, sparse and gated problems, exactly optimal.

The forward auction of Bertsekas in the GPU formulation of Vasconcelos &
Rosenhahn (2009): Jacobi bidding with one warp per unassigned row (best and
second-best object by warp shuffles), one winning bid per object, a compacted
list of unassigned rows, and epsilon-scaling (kernels in ``auction.cu``). When
few rows remain unassigned a single block runs the rest of the phase without
kernel launches.

Gated problems (after the component split of ``components_gpu.py``) and sparse full matchings go to
:mod:`tracker.lap.gated_auction`: their *asymmetric* form, without dummy rows (every row matched to one of
its candidate columns or to its private "no link" option, columns optional), solved by a forward/reverse
auction with epsilon-scaling. The square form of Jaqaman et al. (2008) with dummy rows, solved here before,
spent most of its bids in the dummy rows' wars over their zero-cost ties (over 100 s at 100k nodes with
generous gates).

Dense problems on the GPU (:func:`dense_with_exact_finish`) run truncated
epsilon phases, each in one cooperative launch (``auction_phase.cu``), and
hand the prices to the Hungarian solvers' exact finish as dual variables:
the auction does the bulk of the matching in parallel, the Hungarian's
multi-tree phases and shortest augmenting paths do the end of it, which is
where an auction spends long runs of single bids.

Otherwise (the NumPy emulation) a dense square matrix without forbidden entries is solved as it is, and
other dense problems as sparse full matchings.

Exactness. Integer-valued costs are multiplied by ``N + 1`` (``N`` the square
size) and the last phase uses ``eps = 1``, which makes the assignment exactly
optimal (Bertsekas 1988). Float costs are mapped affinely to integers of
``2**50`` resolution over their range and solved exactly in that rounding, so
the objective is within ``2 * N * range * 2**-50`` of the optimum (about
``1e-15 * N`` relative to the cost range; the tests check 1e-9 relative
against SciPy).
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from ._registry import Solver, register_solver

COST_BITS = 50
"""Integer costs of the square problem stay below ``2**COST_BITS``."""
PRICE_LIMIT = 1 << 61
"""Prices above this raise (int64 headroom); never reached on feasible problems in practice."""
ALPHA = 4
"""Epsilon-scaling factor between phases."""
MAX_ITERATIONS_PER_ROW = 2000
"""Cap on bidding rounds (``+ 100000``), per phase; reaching it raises instead of looping forever."""
TAIL_WORK = 1 << 17
"""A phase continues in one block once (unassigned rows) x (mean row length) is below this."""
TAIL_MIN_ROWS = 32
"""... but always once at most this many rows remain unassigned."""
BATCH = 4
"""Bidding rounds launched between two reads of the unassigned count."""
GAUSS_SEIDEL_ROWS = 4
"""The one-block tail bids one row at a time (Gauss-Seidel, one warp) once at most this many rows are
unassigned (at most :data:`GAUSS_SEIDEL_QUEUE`; 0 turns it off)."""
GAUSS_SEIDEL_QUEUE = 64
"""Capacity of the Gauss-Seidel queue (``GS_MAX_ROWS`` in ``auction.cu``)."""

PHASE_KERNEL = True
"""Dense problems run each epsilon phase in one cooperative launch (``auction_phase.cu``) where the GPU
and CuPy allow it; ``False`` (or a failed compile or launch) uses one launch per step and round."""
PHASE_BLOCKS_PER_SM = 4
"""Blocks of 256 threads per multiprocessor in that launch (``__launch_bounds__(256, 4)`` there)."""

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
DENSE_PHASE_STOP_MIN = 8

LAST_STATS: dict = {}
"""Counters of the last solve (phases, rounds, tail launches, mode) for benchmarks."""


class AuctionError(RuntimeError):
    """The auction hit its iteration cap or its price limit (please report the instance)."""


class _RoundLimit(AuctionError):
    """The auction reached the ``max_rounds`` its caller set (the caller has another way)."""


# ------------------------------------------------------------------ kernels --

class _CudaKernels:
    """The CUDA kernels of ``auction.cu`` behind small Python methods."""

    threads = 256

    def __init__(self):
        import cupy

        from ._cuda import load_module

        self.xp = cupy
        module = load_module("auction.cu")
        names = ["auction_claim", "auction_reset", "dense_handoff", "dense_to_int"]
        for suffix in ("csr", "dense"):
            names += [f"auction_bid_{suffix}", f"auction_init_{suffix}", f"auction_tail_{suffix}"]
        self.functions = {name: module.get_function(name) for name in names}
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.phase_function = None
        if PHASE_KERNEL:
            try:
                self.phase_function = load_module("auction_phase.cu", cooperative=True).get_function(
                    "auction_phase_dense")
            except Exception:  # no cooperative groups here (compile or driver): the per-round launches remain
                self.phase_function = None

    def phase(self, prob, price, list0, list1, counts, parity, eps, target, bid, col_bid, winner, owner,
              assigned, max_rounds, stop_count, info, error) -> bool:
        """Rounds of a dense phase in one cooperative launch; False if that is not possible here."""
        if self.phase_function is None or not prob.dense or not PHASE_KERNEL:
            return False
        try:
            self.phase_function(
                (self.sms * PHASE_BLOCKS_PER_SM,), (256,),
                (*prob.args, price, list0, list1, counts, np.int32(parity), np.int64(eps), target, bid, col_bid,
                 winner, owner, assigned, np.int32(max_rounds), np.int32(stop_count), info, error),
            )
        except Exception:  # e.g. a cooperative launch too large for this GPU: never try again
            self.phase_function = None
            return False
        return True

    def _blocks(self, items: int) -> int:
        return max(1, min(-(-items // self.threads), self.sms * 16))

    def bid(self, prob, price, lst, count, zero_count, eps, target, bid, col_bid, error):
        self.functions[f"auction_bid_{prob.layout}"](
            (self._blocks(prob.n * 32),), (self.threads,),
            (*prob.args, price, lst, count, zero_count, np.int64(eps), target, bid, col_bid, error),
        )

    def claim(self, prob, lst, count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count):
        self.functions["auction_claim"](
            (self._blocks(prob.n),), (self.threads,),
            (lst, count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count),
        )

    def reset(self, prob, lst, count, target, col_bid, winner):
        self.functions["auction_reset"]((self._blocks(prob.n),), (self.threads,), (lst, count, target, col_bid, winner))

    def init(self, prob, price, eps, assigned, owner, lst, count):
        self.functions[f"auction_init_{prob.layout}"](
            (self._blocks(prob.n * 32),), (self.threads,),
            (*prob.args, price, np.int64(eps), assigned, owner, lst, count),
        )

    def tail(self, prob, price, list0, list1, counts, parity, eps, target, bid, col_bid, winner, owner,
             assigned, max_iters, stop_count, info, error):
        self.functions[f"auction_tail_{prob.layout}"](
            (1,), (1024,),
            (*prob.args, price, list0, list1, counts, np.int32(parity), np.int64(eps), target, bid, col_bid,
             winner, owner, assigned, np.int32(max_iters), np.int32(min(GAUSS_SEIDEL_ROWS, GAUSS_SEIDEL_QUEUE)),
             np.int32(stop_count), info, error),
        )


class _EmulatedKernels:
    """The same kernels, sequentially in NumPy: exercises the driver on machines without a GPU (tests)."""

    xp = np

    def phase(self, *args, **kwargs) -> bool:
        return False  # the emulation runs the per-round path

    def _best_two(self, prob, price, i):
        cols, costs = prob.row(i)
        values = costs + price[cols]
        if values.size == 0:
            return None
        order = np.lexsort((cols, values))
        j1, b1 = int(cols[order[0]]), int(values[order[0]])
        b2 = int(values[order[1]]) if values.size > 1 else None
        return b1, j1, b2

    def bid(self, prob, price, lst, count, zero_count, eps, target, bid, col_bid, error):
        zero_count[0] = 0
        for t in range(int(count[0])):
            i = lst[t]
            best = self._best_two(prob, price, i)
            if best is None:
                error[0] = 1
                target[i] = -1
                continue
            b1, j1, b2 = best
            gap = prob.single_gap if b2 is None else b2 - b1
            target[i] = j1
            bid[i] = price[j1] + gap + eps
            col_bid[j1] = max(col_bid[j1], bid[i])

    def claim(self, prob, lst, count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count):
        pushed = []
        for t in range(int(count[0])):
            i = int(lst[t])
            j = target[i]
            if j < 0:
                continue
            if bid[i] == col_bid[j] and winner[j] == -1:
                winner[j] = i
                old = int(owner[j])
                owner[j] = i
                price[j] = bid[i]
                assigned[i] = j
                if old >= 0:
                    assigned[old] = -1
                    pushed.append(old)
            else:
                pushed.append(i)
        start = int(nxt_count[0])
        nxt[start:start + len(pushed)] = pushed
        nxt_count[0] = start + len(pushed)

    def reset(self, prob, lst, count, target, col_bid, winner):
        for t in range(int(count[0])):
            j = target[lst[t]]
            if j >= 0:
                col_bid[j] = 0
                winner[j] = -1

    def init(self, prob, price, eps, assigned, owner, lst, count):
        for i in range(prob.n):
            j = assigned[i]
            push = j < 0
            if not push:
                b1 = self._best_two(prob, price, i)[0]
                cols, costs = prob.row(i)
                mine = int(costs[cols == j][0]) + int(price[j])
                if mine > b1 + eps:
                    push = True
                    assigned[i] = -1
                    owner[j] = -1
            if push:
                lst[count[0]] = i
                count[0] += 1

    def tail(self, prob, price, list0, list1, counts, parity, eps, target, bid, col_bid, winner, owner,
             assigned, max_iters, stop_count, info, error):
        it = 0
        while it < max_iters:
            cur, nxt = (list1, list0) if parity else (list0, list1)
            cur_count, nxt_count = counts[parity:parity + 1], counts[1 - parity:2 - parity]
            if cur_count[0] <= stop_count or error[0]:
                break
            if cur_count[0] <= min(GAUSS_SEIDEL_ROWS, GAUSS_SEIDEL_QUEUE):
                it = self._gauss_seidel(prob, price, cur, cur_count, eps, owner, assigned, max_iters, it, error)
                break
            self.bid(prob, price, cur, cur_count, nxt_count, eps, target, bid, col_bid, error)
            self.claim(prob, cur, cur_count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count)
            self.reset(prob, cur, cur_count, target, col_bid, winner)
            parity = 1 - parity
            it += 1
        info[0], info[1] = it, parity

    def _gauss_seidel(self, prob, price, lst, count, eps, owner, assigned, max_iters, it, error):
        queue = [int(i) for i in lst[:int(count[0])]]
        while queue and it < max_iters:
            i = queue.pop(0)
            best = self._best_two(prob, price, i)
            if best is None:
                error[0] = 1
                queue.insert(0, i)
                break
            b1, j1, b2 = best
            price[j1] += (prob.single_gap if b2 is None else b2 - b1) + eps
            evicted = int(owner[j1])
            owner[j1] = i
            assigned[i] = j1
            if evicted >= 0:
                assigned[evicted] = -1
                queue.append(evicted)
            it += 1
        lst[:len(queue)] = queue
        count[0] = len(queue)
        return it


class _Problem:
    """A square problem: ``n`` rows and columns, CSR (``indptr`` given) or dense int64 costs."""

    def __init__(self, xp, n, cost, max_cost, indptr=None, indices=None):
        self.n = int(n)
        self.cost = cost
        self.max_cost = int(max_cost)
        self.single_gap = self.max_cost + 1
        self.dense = indptr is None
        self.layout = "dense" if self.dense else "csr"
        if self.dense:
            indptr = xp.zeros(1, dtype=np.int64)
            indices = xp.zeros(1, dtype=np.int32)
        self.indptr, self.indices = indptr, indices
        self.mean_row = self.n if self.dense else max(1.0, int(cost.size) / max(self.n, 1))
        self.args = (np.int32(self.n), indptr, indices, cost, np.int64(self.single_gap))

    def row(self, i):  # emulation only
        if self.dense:
            return np.arange(self.n), self.cost[i * self.n:(i + 1) * self.n]
        start, end = self.indptr[i], self.indptr[i + 1]
        return self.indices[start:end], self.cost[start:end]


def _kernels(emulate: bool = False):
    """The CUDA kernels (compiled once per process), or their NumPy emulation for CPU tests."""
    return _EmulatedKernels() if emulate else _cuda_kernels()


def _array_module(emulate: bool):
    """NumPy (emulation) or CuPy, without compiling this module's kernels (the sparse routes do not use them)."""
    if emulate:
        return np
    import cupy

    return cupy


@functools.lru_cache(maxsize=1)
def _cuda_kernels():
    return _CudaKernels()


# ------------------------------------------------------------------- driver --

def eps_schedule(max_cost: int, eps_final: int = 1, alpha: int | None = None, stop_eps: int | None = None,
                 first_eps: int | None = None) -> list[int]:
    """Decreasing epsilons from about ``max_cost / alpha`` (or ``first_eps``) down to ``eps_final`` (or
    ``stop_eps``), by factors of ``alpha``."""
    alpha = ALPHA if alpha is None else alpha
    last = max(int(eps_final), int(stop_eps or 0), 1)
    eps = max(int(max_cost) // alpha if first_eps is None else int(first_eps), last)
    schedule = [eps]
    while eps > last:
        eps = max(eps // alpha, last)
        schedule.append(eps)
    return schedule


def auction_square(prob: _Problem, kern, schedule: list[int], prices=None, n_objects: int | None = None,
                   max_rounds: int | None = None, start=None, stop_rows: int = 0):
    """Run the epsilon-scaled auction; returns (column of each row (int32, -1: unassigned), prices (int64)).

    ``n_objects`` (default: as many as rows) columns; more make the problem
    asymmetric (every row matched, columns optional: run it as one phase from
    zero prices). ``start``, a column for every row (one-to-one), is the
    initial assignment (``-1``: none): rows that violate eps-complementary
    slackness at the first eps (with ``prices``) are released, the others keep their column.
    Past ``max_rounds`` rounds in a phase it raises :class:`_RoundLimit`
    (default: an :class:`AuctionError` after :data:`MAX_ITERATIONS_PER_ROW`
    per row). ``stop_rows > 0`` truncates every phase once at most that many
    rows are unassigned (they bid again in the next phase; after the last one
    the caller must finish them: :func:`solve_dense`'s exact finish).
    """
    xp = kern.xp
    n = prob.n
    n_objects = n if n_objects is None else int(n_objects)
    price = xp.zeros(n_objects, dtype=np.int64) if prices is None else xp.asarray(prices, dtype=np.int64).copy()
    assigned = xp.full(n, -1, dtype=np.int32)
    # one spare slot: the unassigned rows of `start` scatter there (no boolean mask, no host synchronisation)
    owner = xp.full(n_objects + 1, -1, dtype=np.int32)
    if start is not None:
        assigned[:] = xp.asarray(start, dtype=np.int32)
        owner[xp.where(assigned >= 0, assigned, n_objects)] = xp.arange(n, dtype=np.int32)
    owner = owner[:n_objects]
    target = xp.full(n, -1, dtype=np.int32)
    bid = xp.zeros(n, dtype=np.int64)
    col_bid = xp.zeros(n_objects, dtype=np.int64)
    winner = xp.full(n_objects, -1, dtype=np.int32)
    lists = (xp.empty(n, dtype=np.int32), xp.empty(n, dtype=np.int32))
    # read back in one copy per step: the unassigned counts (list 0, list 1), the error flag, and the
    # rounds done and final parity of the last phase or tail launch
    status = xp.zeros(5, dtype=np.int32)
    counts, error, info = status[0:2], status[2:3], status[3:5]
    tail_rows = int(max(TAIL_MIN_ROWS, min(8192, TAIL_WORK // prob.mean_row)))
    limited = max_rounds is not None
    if not limited:
        max_rounds = MAX_ITERATIONS_PER_ROW * n + 100_000
    stats = {"phases": len(schedule), "rounds": 0, "tails": 0, "phase_launches": 0, "syncs": 0, "phase_rounds": [], "phase_seconds": []}

    for phase, eps in enumerate(schedule):
        phase_start = time.perf_counter()
        if phase == 0 and start is None:
            lists[0][:] = xp.arange(n, dtype=np.int32)
            counts[:] = xp.asarray([n, 0], dtype=np.int32)
        else:
            counts[:] = 0
            kern.init(prob, price, eps, assigned, owner, lists[0], counts[0:1])
        parity = 0
        rounds = 0
        launched = False  # a phase or tail launch, whose rounds and parity are in `info`
        while True:
            host = status.get() if xp is not np else status.copy()
            stats["syncs"] += 1
            if launched:
                rounds += int(host[3])
                parity = int(host[4])
                launched = False
            count = int(host[parity])
            if host[2]:
                raise AuctionError("a row of the square problem has no edge (internal error; please report)")
            if count <= stop_rows:
                break
            if rounds > max_rounds:
                if limited:
                    raise _RoundLimit(f"{rounds} bidding rounds")
                raise AuctionError(
                    f"auction did not converge after {rounds} bidding rounds in phase eps={eps} "
                    f"({count} rows unassigned); please report this instance"
                )
            if kern.phase(prob, price, lists[0], lists[1], counts, parity, eps, target, bid, col_bid, winner, owner,
                          assigned, min(1 << 30, max_rounds + 1 - rounds), stop_rows, info, error):
                launched = True
                stats["phase_launches"] += 1
                continue
            if count <= tail_rows:
                kern.tail(prob, price, lists[0], lists[1], counts, parity, eps, target, bid, col_bid, winner,
                          owner, assigned, min(1 << 20, max_rounds + 1 - rounds), stop_rows, info, error)
                launched = True
                stats["tails"] += 1
                continue
            for _ in range(BATCH):
                cur, nxt = lists[parity], lists[1 - parity]
                cur_count, nxt_count = counts[parity:parity + 1], counts[1 - parity:2 - parity]
                kern.bid(prob, price, cur, cur_count, nxt_count, eps, target, bid, col_bid, error)
                kern.claim(prob, cur, cur_count, target, bid, col_bid, winner, owner, assigned, price, nxt,
                           nxt_count)
                kern.reset(prob, cur, cur_count, target, col_bid, winner)
                parity = 1 - parity
            rounds += BATCH
        stats["rounds"] += rounds
        stats["phase_rounds"].append(rounds)
        stats["phase_seconds"].append(time.perf_counter() - phase_start)  # the count read above synchronised
    if int(price.max()) > PRICE_LIMIT:  # prices only rise: one check at the end covers every phase
        raise AuctionError("auction prices exceeded the int64 headroom; please report this instance")
    LAST_STATS.clear()
    LAST_STATS.update(stats)
    return assigned, price


def _integer_map(xp, values, n_square: int, extra_factor: int = 1):
    """Affine map of float costs to non-negative int64: returns (map function, max mapped cost, exact).

    Integer-valued costs that fit are multiplied by ``n_square + 1`` (exact
    optimality with a final eps of 1); others are scaled to ``2**COST_BITS``
    over their range (``extra_factor`` reserves room for a big-M).
    """
    lo = float(values.min()) if values.size else 0.0
    hi = float(values.max()) if values.size else 0.0
    integral = bool(xp.all(values == xp.floor(values))) if values.size else True
    factor, scale, max_cost = _map_parameters(lo, hi, n_square, integral, extra_factor)
    if factor:

        def mapping(v):
            return (xp.asarray(v, dtype=np.float64) - lo).astype(np.int64) * factor

        return mapping, max_cost, True

    def mapping(v):
        return xp.rint((xp.asarray(v, dtype=np.float64) - lo) * scale).astype(np.int64)

    return mapping, max_cost, False


def _map_parameters(lo: float, hi: float, n_square: int, integral: bool, extra_factor: int = 1):
    """``(factor, scale, max mapped cost)`` of the map of costs in ``[lo, hi]`` to int64 (:func:`_integer_map`):
    integer costs that fit get ``factor = scale = n_square + 1``, others ``factor = 0`` and ``scale`` =
    ``2**COST_BITS / extra_factor`` over the range (mapped units per cost unit)."""
    span = hi - lo
    budget = float(1 << COST_BITS) / extra_factor
    if integral and span * (n_square + 1) <= budget and abs(lo) < 2**52 and abs(hi) < 2**52:
        return n_square + 1, float(n_square + 1), int(span) * (n_square + 1)
    scale = budget / span if span > 0 else 1.0
    return 0, scale, int(math.ceil(span * scale))


def _compact(xp, nodes, size):
    """Active mask, new index of every node, and the active node ids (in order)."""
    mask = xp.zeros(size, dtype=bool)
    mask[nodes] = True
    new_index = xp.cumsum(mask) - 1
    return new_index, xp.flatnonzero(mask)


def solve_gated(n_rows, n_cols, rows, cols, cost, row_unassigned, col_unassigned, *, emulate=False,
                return_prices=False, components=None):
    """Backend ``gated`` entry point (arrays are CuPy; NumPy with ``emulate=True``).

    ``components`` (default :data:`components_gpu.ENABLED` on the GPU, off in
    emulation): split the problem into connected components first
    (``components_gpu.py``): single edges and components of at most 32 rows
    and columns are solved there in one launch, and only the larger
    components come back here for the auction.
    """
    from . import components_gpu

    if components is None:
        components = components_gpu.ENABLED and not emulate
    if components:
        def large(r, c, w):
            return solve_gated(n_rows, n_cols, r, c, w, row_unassigned, col_unassigned, emulate=emulate,
                               components=False)

        LAST_STATS.clear()
        row_ind, col_ind = components_gpu.solve_gated(n_rows, n_cols, rows, cols, cost, row_unassigned,
                                                      col_unassigned, large, emulate=emulate)
        LAST_STATS.update({f"components_{k}": v for k, v in components_gpu.LAST_STATS.items()})
        return row_ind, col_ind
    xp = _array_module(emulate)
    rows = xp.asarray(rows, dtype=np.int64)
    cols = xp.asarray(cols, dtype=np.int64)
    cost = xp.asarray(cost, dtype=np.float64)
    row_un = xp.asarray(row_unassigned, dtype=np.float64)
    col_un = xp.asarray(col_unassigned, dtype=np.float64)
    useful = cost < row_un[rows] + col_un[cols]
    rows, cols, cost = rows[useful], cols[useful], cost[useful]
    if rows.size == 0:
        empty = xp.empty(0, dtype=np.int64)
        return empty, empty.copy()
    deg_r = xp.bincount(rows, minlength=n_rows)
    deg_c = xp.bincount(cols, minlength=n_cols)
    isolated = (deg_r[rows] == 1) & (deg_c[cols] == 1)
    chosen_r, chosen_c = [rows[isolated]], [cols[isolated]]
    rest = ~isolated
    rows, cols, cost = rows[rest], cols[rest], cost[rest]
    if rows.size:
        new_r, active_r = _compact(xp, rows, n_rows)
        new_c, active_c = _compact(xp, cols, n_cols)
        lr, lc = new_r[rows], new_c[cols]
        nr, nc = int(active_r.size), int(active_c.size)
        r_un, c_un = row_un[active_r], col_un[active_c]
        t0 = time.perf_counter()
        col_of_row = _asymmetric_gated(emulate, nr, nc, lr, lc, cost - r_un[lr] - c_un[lc])
        LAST_STATS.update(auction_s=time.perf_counter() - t0)
        linked = xp.flatnonzero(col_of_row < nc)
        chosen_r.append(active_r[linked])
        chosen_c.append(active_c[col_of_row[linked]])
    row_ind = xp.concatenate(chosen_r)
    col_ind = xp.concatenate(chosen_c)
    order = xp.argsort(row_ind)
    return row_ind[order], col_ind[order]


def _asymmetric_gated(emulate, n_rows, n_cols, rows, cols, reduced_cost):
    """Column of each row (``>= n_cols``: no link) of the asymmetric form (:mod:`tracker.lap.gated_auction`).

    ``reduced_cost``: link cost minus both "no link" costs (negative); each row's private "no link"
    option costs 0. Costs are mapped to int64 by :func:`_integer_map` (integer costs exactly).
    """
    from . import gated_auction

    xp = _array_module(emulate)
    mapping, max_cost, exact = _integer_map(xp, xp.concatenate([reduced_cost, xp.zeros(1)]), n_rows + n_cols)
    private = int(mapping(xp.zeros(1))[0])
    assigned, _ = gated_auction.solve(n_rows, n_cols, rows, cols, mapping(reduced_cost),
                                      xp.full(n_rows, private, dtype=np.int64), edge_range=max_cost, emulate=emulate)
    LAST_STATS.update(form="asymmetric", rows=n_rows, edges=int(rows.size), exact_integer=exact,
                      **gated_auction.LAST_STATS)
    return xp.where(assigned < 0, n_cols, assigned)


def _full_row_matching(emulate, n, m, rows, cols, data):
    """Column of each row of a min-cost matching that matches every row (``n <= m``); -1s if none.

    The asymmetric form of :mod:`tracker.lap.gated_auction` with a big-M private option per row, larger
    than any full matching can save: a row left on it proves that no full matching exists.
    """
    from . import gated_auction

    xp = _array_module(emulate)
    fail = xp.full(n, -1, dtype=np.int64)
    if rows.size == 0:
        return fail
    deg_r = xp.bincount(rows, minlength=n)
    if bool((deg_r == 0).any()):
        return fail
    new_c, active_c = _compact(xp, cols, m)
    nc = int(active_c.size)
    if nc < n:
        return fail
    lc = new_c[cols]
    n_square = n + nc
    mapping, max_edge, exact = _integer_map(xp, data, n_square, extra_factor=n + 2)
    edge_i = mapping(data)
    if exact:
        big_m = (n * (max_edge // (n_square + 1)) + 1) * (n_square + 1)
    else:
        big_m = n * max(int(edge_i.max()), 1) + n_square + 1
    assigned, _ = gated_auction.solve(n, nc, rows, lc, edge_i, xp.full(n, big_m, dtype=np.int64),
                                      edge_range=max_edge, emulate=emulate)
    LAST_STATS.clear()
    LAST_STATS.update(form="asymmetric", rows=n, edges=int(edge_i.size), exact_integer=exact,
                      **gated_auction.LAST_STATS)
    if bool((assigned < 0).any()):
        return fail
    return active_c[assigned]


def solve_sparse(indptr, indices, data, shape, *, emulate=False):
    """Backend ``sparse`` entry point."""
    xp = _array_module(emulate)
    n, m = (int(s) for s in shape)
    indptr = xp.asarray(indptr, dtype=np.int64)
    cols = xp.asarray(indices, dtype=np.int64)
    data = xp.asarray(data, dtype=np.float64)
    rows = xp.searchsorted(indptr[1:], xp.arange(cols.size, dtype=np.int64), side="right")
    return _full_row_matching(emulate, n, m, rows, cols, data)


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


register_solver(
    Solver(
        name="auction",
        description="GPU auction (Bertsekas; Vasconcelos & Rosenhahn 2009): Jacobi warp-per-row bidding, "
        "int64 costs; gated float costs in one phase without dummy rows, else epsilon-scaling on the Jaqaman "
        "square form; exact",
        gpu=True,
        exact=True,
        dense=solve_dense,
        sparse=solve_sparse,
        gated=solve_gated,
        auto_priority={"dense": -10, "sparse": 50, "gated": 100},
    )
)
