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

Dense problems on the GPU (:func:`tracker.lap.dense_auction.dense_with_exact_finish`, in its own module) run truncated
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
        module = load_module("lap/auction.cu")
        names = ["auction_nominate", "auction_claim", "dense_handoff", "dense_to_int"]
        for suffix in ("csr", "dense"):
            names += [f"auction_bid_{suffix}", f"auction_init_{suffix}", f"auction_tail_{suffix}"]
        self.functions = {name: module.get_function(name) for name in names}
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.phase_function = None
        if PHASE_KERNEL:
            try:
                self.phase_function = load_module("lap/auction_phase.cu", cooperative=True).get_function(
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
        """The highest bid of each column wins (the lowest row among equal ones); the bids go back to rest."""
        blocks, bound = (self._blocks(prob.n),), np.int32(prob.n)
        self.functions["auction_nominate"](blocks, (self.threads,), (lst, count, target, bid, col_bid, winner, bound))
        self.functions["auction_claim"](
            blocks, (self.threads,),
            (lst, count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count, bound),
        )

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
    if emulate:
        from .auction_emulation import EmulatedKernels

        return EmulatedKernels()
    return _cuda_kernels()


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
                components=None):
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
        xp = _array_module(emulate)
        row_un = xp.asarray(row_unassigned, dtype=np.float64)
        col_un = xp.asarray(col_unassigned, dtype=np.float64)

        def large(r, c, w):  # (the split pruned the useless edges and took the single ones)
            return _link_large(emulate, n_rows, n_cols, r, c, w, row_un, col_un)

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
        linked_r, linked_c = _link_large(emulate, n_rows, n_cols, rows, cols, cost, row_un, col_un)
        chosen_r.append(linked_r)
        chosen_c.append(linked_c)
    row_ind = xp.concatenate(chosen_r)
    col_ind = xp.concatenate(chosen_c)
    order = xp.argsort(row_ind)
    return row_ind[order], col_ind[order]


def _link_large(emulate, n_rows, n_cols, rows, cols, cost, row_un, col_un):
    """Links ``(row_ind, col_ind)``, in no particular order, of gated edges that all cost less than their ends'
    "no link" costs: the rows and columns with edges are numbered anew and the asymmetric form solved."""
    xp = _array_module(emulate)
    new_r, active_r = _compact(xp, rows, n_rows)
    new_c, active_c = _compact(xp, cols, n_cols)
    nc = int(active_c.size)
    t0 = time.perf_counter()
    col_of_row = _asymmetric_gated(emulate, int(active_r.size), nc, new_r[rows], new_c[cols],
                                   cost - row_un[rows] - col_un[cols])
    LAST_STATS.update(auction_s=time.perf_counter() - t0)
    linked = xp.flatnonzero(col_of_row < nc)
    return active_r[linked], active_c[col_of_row[linked]]


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


from .dense_auction import solve_dense  # noqa: E402  (it builds on the machinery above)

register_solver(
    Solver(
        name="auction",
        description="GPU auction (Bertsekas; Vasconcelos & Rosenhahn 2009): Jacobi warp-per-row bidding, "
        "int64 costs; gated problems and full matchings by the forward/reverse auction on the asymmetric form "
        "with epsilon-scaling and global price updates, dense ones with the Hungarian's exact finish; exact",
        gpu=True,
        exact=True,
        dense=solve_dense,
        sparse=solve_sparse,
        gated=solve_gated,
        auto_priority={"dense": -10, "sparse": 50, "gated": 100},
    )
)
