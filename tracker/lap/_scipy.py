"""CPU backend: SciPy's solvers, with gated problems split into connected components.

This is the reference every GPU solver is tested against, and the fallback
when no GPU is present.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, min_weight_full_bipartite_matching

from ..tables import stable_argsort
from ._registry import Solver, register_solver

DENSE_COMPONENT_MAX_ENTRIES = 1 << 15
"""Components with at most this many entries in their reduced dense form are solved with the dense solver,
larger ones sparsely. Linking components (about 3 candidates per row) took, per component, dense vs sparse:
64-96 rows 60 vs 123 µs, 96-128 rows 116 vs 144 µs, 128-192 rows 198 vs 168 µs, 192-256 rows 381 vs 234 µs,
more 1.4 vs 0.5 ms (the sparse solver costs some 80 µs a call however small): the two meet at about 130 rows,
some 2^15 entries (``r x (c + r)``)."""


def solve_dense(cost: np.ndarray) -> np.ndarray:
    """Column of each row for a rectangular ``(n, m)``, ``n <= m`` cost; -1s if infeasible."""
    from scipy.optimize import linear_sum_assignment  # (here: see _solve_medium_components)

    n = cost.shape[0]
    try:
        rows, cols = linear_sum_assignment(cost)
    except ValueError:  # "cost matrix is infeasible"
        return np.full(n, -1, dtype=np.int64)
    col_of_row = np.full(n, -1, dtype=np.int64)
    col_of_row[rows] = cols
    return col_of_row


def solve_sparse(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Column of each row for a CSR biadjacency (``n <= m``) matching every row; -1s if none exists."""
    n = shape[0]
    col_of_row = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return col_of_row
    # SciPy drops stored zeros (they are edges here) and a row-perfect
    # matching's optimum is unchanged by adding a constant to every edge,
    # so shift all weights to >= 1.
    shifted = data - data.min() + 1.0 if data.size else data
    graph = sp.csr_array((shifted, indices, indptr), shape=shape)
    try:
        rows, cols = min_weight_full_bipartite_matching(graph)
    except ValueError:  # "no full matching exists"
        return col_of_row
    col_of_row[rows] = cols
    return col_of_row


def solve_gated(
    n_rows: int,
    n_cols: int,
    rows: np.ndarray,
    cols: np.ndarray,
    cost: np.ndarray,
    row_unassigned: np.ndarray,
    col_unassigned: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Chosen edges of a gated problem with per-row and per-column "no link" costs.

    The gated graph is split into connected components. Those whose optimum a vectorised certificate finds
    (:func:`_certified_components`) are done; the others are laid out once in order of kind (size class) and
    component (:class:`_ComponentLayout`) and solved exactly in their reduced form (see
    :func:`reduced_problem`): the small ones all at once by enumeration, the medium ones with one vectorised
    set-up and a dense solve each, the large ones one by one.
    """
    # An edge costlier than leaving both ends unmatched is never optimal.
    useful = cost < row_unassigned[rows] + col_unassigned[cols]
    if not useful.all():  # (often all are: then nothing to copy)
        rows, cols, cost = rows[useful], cols[useful], cost[useful]
    if rows.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty

    n_labels, labels = connected_components(_bipartite_graph(rows, cols, n_rows, n_cols), directed=False)
    certified, cheapest = _certified_components(n_labels, labels, rows, cols, cost, row_unassigned, col_unassigned)
    chosen_rows, chosen_cols = [rows[cheapest]], [cols[cheapest]]
    if not certified.all():
        # The other components, their rows and columns numbered afresh.
        row_label, col_label = labels[:n_rows], labels[n_rows:]
        open_label = ~certified
        open_row, open_col = open_label[row_label], open_label[col_label]
        row_index, col_index = np.flatnonzero(open_row), np.flatnonzero(open_col)
        edges = open_row[rows]
        open_rows, open_cols = (np.cumsum(open_row) - 1)[rows[edges]], (np.cumsum(open_col) - 1)[cols[edges]]
        open_labels = (np.cumsum(open_label) - 1)[np.concatenate([row_label[open_row], col_label[open_col]])]
        layout = _ComponentLayout(int(open_label.sum()), open_labels, open_rows, open_cols, cost[edges],
                                  row_unassigned[row_index], col_unassigned[col_index])
        for r, c in _solve_components(layout, open_rows, open_cols):
            chosen_rows.append(row_index[r])
            chosen_cols.append(col_index[c])

    # Rows are chosen once each: put them in order by marking them (no sort).
    col_of_row = np.full(n_rows, -1, dtype=np.int64)
    col_of_row[np.concatenate(chosen_rows)] = np.concatenate(chosen_cols)
    row_ind = np.flatnonzero(col_of_row >= 0)
    return row_ind, col_of_row[row_ind]


def _certified_components(n_labels: int, labels: np.ndarray, rows: np.ndarray, cols: np.ndarray, cost: np.ndarray,
                          row_unassigned: np.ndarray, col_unassigned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The components whose optimum needs no solve, and its edges.

    In the reduced problem (:func:`reduced_problem`) every row pays at least its cheapest option: an edge, at
    its cost less the column's "no link" cost, or "no link". Where every row of a component takes that option,
    no two rows take the same column and no row has two options at the same cost, the choice meets that bound:
    it is the component's one optimum. The same holds with rows and columns exchanged. In linking most
    components pass (every isolated pair, most small ones and some medium ones), so only the others are laid
    out and solved.

    Returns ``certified``, ``(n_labels,)`` bool, and ``chosen``, ``(k,)`` bool: the edges of their optima.
    """
    n_rows = len(row_unassigned)
    row_label, col_label = labels[:n_rows], labels[n_rows:]
    edge_label = row_label[rows]
    certified = np.zeros(n_labels, dtype=bool)
    chosen = np.zeros(len(rows), dtype=bool)
    for node, partner, weight, unassigned, node_label, partner_label in (
            (rows, cols, cost - col_unassigned[cols], row_unassigned, row_label, col_label),
            (cols, rows, cost - row_unassigned[rows], col_unassigned, col_label, row_label)):
        least = unassigned.copy()
        np.minimum.at(least, node, weight)
        cheapest = weight == least[node]
        n_options = np.bincount(node[cheapest], minlength=len(unassigned)) + (unassigned == least)
        n_takers = np.bincount(partner[cheapest], minlength=len(partner_label))
        spoiled = np.zeros(n_labels, dtype=bool)
        spoiled[node_label[n_options > 1]] = True
        spoiled[partner_label[n_takers > 1]] = True
        newly = ~(spoiled | certified)
        chosen |= cheapest & newly[edge_label]
        certified |= newly
    return certified, chosen


def _solve_components(layout: _ComponentLayout, rows: np.ndarray, cols: np.ndarray):
    """The chosen edges ``(rows, cols)`` of each kind of component of ``layout`` (of the problem with edges
    ``rows, cols``): small ones by enumeration, medium ones with a dense solve each, large ones one by one."""
    # The pruned single edge of an isolated pair always beats "no link" (such pairs are certified anyway).
    singles = layout.edges_of_kind(_SINGLE_EDGE)
    yield rows[singles], cols[singles]
    solvers = [(size, functools.partial(_solve_small_components, size=size))
               for size in range(2, SMALL_COMPONENT_SIZE + 1)]
    solvers += [(_MEDIUM, _solve_medium_components), (_LARGE, _solve_large_components)]
    for kind, solve in solvers:
        group = layout.group(kind)
        if group.n_blocks:
            yield solve(group)


def _bipartite_graph(rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int):
    """The gated problem's graph for :func:`connected_components`: rows are nodes ``0 .. n_rows - 1``, columns
    the nodes after them, an edge per candidate (in one direction; the search ignores directions).

    Candidates sorted by row make a CSR matrix directly, with 32-bit indices where they fit: SciPy converts
    other input to that (for 8k rows and 20k candidates, 1.45 ms a problem from COO, 0.5 ms so).
    """
    n = n_rows + n_cols
    if rows.size and np.any(rows[1:] < rows[:-1]):
        return sp.coo_array((np.ones(rows.size), (rows, n_rows + cols)), shape=(n, n))
    index = np.int32 if max(n, rows.size) < np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(n + 1, dtype=index)
    indptr[1:n_rows + 1] = np.cumsum(np.bincount(rows, minlength=n_rows))
    indptr[n_rows + 1:] = rows.size
    return sp.csr_array((np.ones(rows.size), (n_rows + cols).astype(index), indptr), shape=(n, n))


SMALL_COMPONENT_SIZE = 4
"""Components with at most this many rows and columns are solved by enumeration."""

MEDIUM_COMPONENT_SIZE = 128
"""Larger components (up to this many rows and columns) share one vectorised set-up and get one dense solve each."""

_LONE_NODE = 0
"""Kind (see :class:`_ComponentLayout`) of a row or column without candidates."""
_SINGLE_EDGE = 1
"""Kind of the components of one row and one column (one edge)."""
_MEDIUM = 5  # SMALL_COMPONENT_SIZE + 1
_LARGE = 6
_N_KINDS = 7


def _component_kinds(rows_per_label: np.ndarray, cols_per_label: np.ndarray) -> np.ndarray:
    """``(n_labels,)`` uint8: each component's kind, from its numbers of rows and columns.

    Its size (the larger of the two) up to :data:`SMALL_COMPONENT_SIZE` (so 1: a single edge), then
    :data:`_MEDIUM` up to :data:`MEDIUM_COMPONENT_SIZE`, then :data:`_LARGE`; :data:`_LONE_NODE` for a row or
    a column alone.
    """
    size = np.maximum(rows_per_label, cols_per_label)
    kind = np.where(size <= SMALL_COMPONENT_SIZE, size, np.where(size <= MEDIUM_COMPONENT_SIZE, _MEDIUM, _LARGE))
    kind[np.minimum(rows_per_label, cols_per_label) == 0] = _LONE_NODE
    return kind.astype(np.uint8)


class _SideLayout:
    """The rows (or the columns) of a gated problem in order of slot (see :class:`_ComponentLayout`), each
    component's in order of index.

    ``order``: ``(n,)`` the nodes in that order; ``rank``: ``(n,)`` each node's rank (0, 1, ...) within its
    component, ``sorted_rank`` the same in ``order``; ``unassigned``: ``(n,)`` the "no link" costs in ``order``;
    ``count``: ``(n_slots,)`` the nodes of each component, ``first``: ``(n_slots + 1,)`` where each component's
    begin in ``order``.
    """

    def __init__(self, slot: np.ndarray, count: np.ndarray, unassigned: np.ndarray):
        self.order = stable_argsort(slot)
        self.count = count
        self.first = np.zeros(len(count) + 1, dtype=np.int64)
        np.cumsum(count, out=self.first[1:])
        self.sorted_rank = np.arange(len(slot)) - np.repeat(self.first[:-1], count)
        self.rank = np.empty(len(slot), dtype=np.int64)
        self.rank[self.order] = self.sorted_rank
        self.unassigned = unassigned[self.order]


class _ComponentLayout:
    """The connected components of a gated problem (``labels`` of its nodes: rows, then columns), in one order.

    Components are numbered by (kind, label) (their *slots*; see :func:`_component_kinds` for the kinds), and
    the rows, the columns (:class:`_SideLayout`) and the edges are each sorted once by slot (stable radix
    sorts: a component's edges stay in the given order, its rows and columns in order of index). The
    components of one kind are then slices of those (:meth:`group`).

    ``edge_order``: ``(k,)`` the edges (indices into ``rows, cols, cost``) in that order, ``edge_slot`` their
    slots, ``edge_row`` and ``edge_col`` the ranks of their row and column within the component,
    ``edge_cost`` their costs; ``kind_slots`` and ``kind_edges``: ``(_N_KINDS + 1,)`` where each kind's slots
    and edges begin.
    """

    def __init__(self, n_labels: int, labels: np.ndarray, rows: np.ndarray, cols: np.ndarray, cost: np.ndarray,
                 row_unassigned: np.ndarray, col_unassigned: np.ndarray):
        n_rows = len(row_unassigned)
        row_label, col_label = labels[:n_rows], labels[n_rows:]
        rows_per_label = np.bincount(row_label, minlength=n_labels)
        cols_per_label = np.bincount(col_label, minlength=n_labels)
        kind = _component_kinds(rows_per_label, cols_per_label)
        label_of_slot = np.argsort(kind, kind="stable")
        # 16-bit slots where they fit: NumPy sorts those by radix in one pass (see stable_argsort).
        slot_type = np.uint16 if n_labels < 1 << 16 else np.int64
        slot_of_label = np.empty(n_labels, dtype=slot_type)
        slot_of_label[label_of_slot] = np.arange(n_labels, dtype=slot_type)
        self.kind_slots = np.zeros(_N_KINDS + 1, dtype=np.int64)
        np.cumsum(np.bincount(kind, minlength=_N_KINDS), out=self.kind_slots[1:])

        row_slot = slot_of_label[row_label]
        self.rows = _SideLayout(row_slot, rows_per_label[label_of_slot], row_unassigned)
        self.cols = _SideLayout(slot_of_label[col_label], cols_per_label[label_of_slot], col_unassigned)
        edge_slot = row_slot[rows]
        self.edge_order = stable_argsort(edge_slot)
        self.edge_slot = edge_slot[self.edge_order]
        self.kind_edges = np.searchsorted(self.edge_slot, self.kind_slots.astype(slot_type))
        self.edge_row = self.rows.rank[rows[self.edge_order]]
        self.edge_col = self.cols.rank[cols[self.edge_order]]
        self.edge_cost = cost[self.edge_order]

    def edges_of_kind(self, kind: int) -> np.ndarray:
        """The edges (indices into the problem's) of the components of ``kind``, by slot."""
        return self.edge_order[self.kind_edges[kind]:self.kind_edges[kind + 1]]

    def group(self, kind: int) -> _Group:
        """The components of ``kind`` as a :class:`_Group`."""
        return _Group(self, kind)


class _GroupSide:
    """The rows (or the columns) of a :class:`_Group`'s components: slices of a :class:`_SideLayout`.

    ``nodes``, ``rank``, ``unassigned``: ``(n,)`` the nodes by (block, index), each one's rank within its block
    and "no link" cost; ``count`` and ``first``: ``(n_blocks,)`` how many each block has and where they begin in
    ``nodes``; ``block``: ``(n,)`` each node's block.
    """

    def __init__(self, side: _SideLayout, first_slot: int, stop_slot: int):
        start, stop = side.first[first_slot], side.first[stop_slot]
        self.nodes = side.order[start:stop]
        self.rank = side.sorted_rank[start:stop]
        self.unassigned = side.unassigned[start:stop]
        self.count = side.count[first_slot:stop_slot]
        self.first = side.first[first_slot:stop_slot] - start

    @functools.cached_property
    def block(self) -> np.ndarray:
        """``(n,)`` each node's block (built when a solver asks for it: the large components' does not)."""
        return np.repeat(np.arange(len(self.count)), self.count)

    def index(self, block: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """The problem's index of the node of each ``rank`` in each ``block``."""
        return self.nodes[self.first[block] + rank]


class _Group:
    """The components of one kind, numbered 0, 1, ... (by slot) as blocks.

    ``edge_block``, ``edge_row``, ``edge_col``, ``edge_cost``: ``(k,)`` each edge's block, the ranks of its row and
    column within the block, its cost, by (block, given order); ``rows`` and ``cols``: :class:`_GroupSide`.
    """

    def __init__(self, layout: _ComponentLayout, kind: int):
        first_slot, stop_slot = int(layout.kind_slots[kind]), int(layout.kind_slots[kind + 1])
        self.n_blocks = stop_slot - first_slot
        if not self.n_blocks:
            return
        edges = slice(layout.kind_edges[kind], layout.kind_edges[kind + 1])
        self.edge_block = layout.edge_slot[edges].astype(np.int64) - first_slot
        self.edge_row, self.edge_col = layout.edge_row[edges], layout.edge_col[edges]
        self.edge_cost = layout.edge_cost[edges]
        self.rows = _GroupSide(layout.rows, first_slot, stop_slot)
        self.cols = _GroupSide(layout.cols, first_slot, stop_slot)


def _solve_medium_components(group: _Group) -> tuple[np.ndarray, np.ndarray]:
    """Exact solution of many medium components: every dense matrix built at once, then one dense solve each.

    Each component is the reduced problem of :func:`reduced_problem` as a
    dense ``r x (c + r)`` matrix for :func:`scipy.optimize.linear_sum_assignment`,
    or, when it has fewer columns than rows, the same for the transposed
    problem (columns as rows: ``c x (r + c)``, each column with a private
    "no link" row; some 18 % less solve time over the medium components of
    linking with gap-closing rows). All of them are laid out in one flat
    buffer and filled with vectorised scatters, so the Python loop only
    slices, solves and stores.
    """
    rows, cols = group.rows, group.cols
    n_r, n_c = rows.count, cols.count
    flip = n_c < n_r  # solved transposed
    lines = np.where(flip, n_c, n_r)  # the dense matrix's rows
    other = np.where(flip, n_r, n_c)  # and real columns
    width = n_r + n_c
    line_first = np.cumsum(lines) - lines
    offset = np.r_[0, np.cumsum(lines * width)]

    block = group.edge_block
    edge_flip = flip[block]
    line = np.where(edge_flip, group.edge_col, group.edge_row)
    column = np.where(edge_flip, group.edge_row, group.edge_col)
    # (The column's no-link cost in the reduced problem, the row's in the transposed one.)
    weight = group.edge_cost - np.where(edge_flip, rows.unassigned[rows.first[block] + group.edge_row],
                                        cols.unassigned[cols.first[block] + group.edge_col])
    flat = np.full(int(offset[-1]), np.inf)
    flat[offset[block] + line * width[block] + column] = weight
    for side, own_side in ((rows, ~flip), (cols, flip)):
        private = own_side[side.block]  # each line's private "no link" column
        b, t = side.block[private], side.rank[private]
        flat[offset[b] + t * (width[b] + 1) + other[b]] = side.unassigned[private]

    # Imported here, not with the module: linking with no component over SMALL_COMPONENT_SIZE (10k particles x
    # 20 frames in benchmarks/cli_link_bench.py) never calls it, and scipy.optimize takes 0.04-0.06 s to import
    # beyond what the linker imports anyway (benchmarks/results/cli_link.md).
    from scipy.optimize import linear_sum_assignment as lsa

    chosen = np.concatenate([  # column of each line, within its block
        lsa(flat[start:stop].reshape(r, w))[1]
        for start, stop, r, w in zip(offset[:-1].tolist(), offset[1:].tolist(), lines.tolist(), width.tolist())])
    line_block = np.repeat(np.arange(group.n_blocks), lines)
    linked = chosen < other[line_block]
    b = line_block[linked]
    t, partner = (np.arange(len(chosen)) - line_first[line_block])[linked], chosen[linked]
    flipped = flip[b]
    return rows.index(b, np.where(flipped, partner, t)), cols.index(b, np.where(flipped, t, partner))


@functools.lru_cache(maxsize=None)
def partial_matchings(size: int) -> np.ndarray:
    """Every one-to-one partial matching of ``size`` rows to ``size`` columns.

    Returns an ``(n_matchings, size)`` int64 array: the column of each row,
    or ``size`` (a sentinel) where the row stays unmatched. 7, 34 and 209
    matchings for sizes 2, 3 and 4.
    """
    matchings = []
    for n_matched in range(size + 1):
        for matched_rows in itertools.combinations(range(size), n_matched):
            for matched_cols in itertools.permutations(range(size), n_matched):
                assignment = [size] * size
                for row, col in zip(matched_rows, matched_cols):
                    assignment[row] = col
                matchings.append(assignment)
    return np.array(matchings, dtype=np.int64)


@functools.lru_cache(maxsize=None)
def _unused_columns(size: int) -> np.ndarray:
    """``(size, n_matchings)`` float array: 1 where a matching of :func:`partial_matchings` leaves a column
    unused, else 0."""
    matchings = partial_matchings(size)
    used = np.zeros((len(matchings), size + 1), dtype=bool)
    used[np.arange(len(matchings))[:, None], matchings] = True
    return (~used[:, :size]).T.astype(np.float64)  # (the layout of the product it replaced: the same sums)


def _solve_small_components(group: _Group, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact solution of many components of at most ``size`` rows and columns at once.

    Each component becomes a ``size x size`` block (forbidden entries +inf,
    padding rows and columns with zero "no link" cost); the total cost of
    every partial matching is evaluated for all blocks together, and the
    cheapest is kept (the first in :func:`partial_matchings` order on ties).
    """
    rows, cols = group.rows, group.cols
    # Blocks padded with size + 1 columns: the last is "unmatched", at the row's no-link cost (0 for padding).
    dense = np.full((group.n_blocks, size, size + 1), np.inf)
    dense[:, :, size] = 0.0
    dense[group.edge_block, group.edge_row, group.edge_col] = group.edge_cost
    dense[rows.block, rows.rank, size] = rows.unassigned
    col_un = np.zeros((group.n_blocks, size + 1))
    col_un[cols.block, cols.rank] = cols.unassigned

    matchings = partial_matchings(size)  # (n_matchings, size)
    total = dense[:, 0, matchings[:, 0]]
    for i in range(1, size):
        total += dense[:, i, matchings[:, i]]
    total += col_un[:, :size] @ _unused_columns(size)
    best = matchings[np.argmin(total, axis=1)]  # (n_blocks, size)

    block, row_rank = np.nonzero(best < size)
    return rows.index(block, row_rank), cols.index(block, best[block, row_rank])


def _solve_large_components(group: _Group) -> tuple[np.ndarray, np.ndarray]:
    """Exact solution of the large components, one by one (:func:`_solve_component`)."""
    rows, cols = group.rows, group.cols
    edge_first = np.searchsorted(group.edge_block, np.arange(group.n_blocks + 1)).tolist()
    chosen_rows, chosen_cols = [], []
    for block, (r, c, row_first, col_first) in enumerate(zip(
            rows.count.tolist(), cols.count.tolist(), rows.first.tolist(), cols.first.tolist())):
        edges = slice(edge_first[block], edge_first[block + 1])
        col_of_row = _solve_component(group.edge_row[edges], group.edge_col[edges], group.edge_cost[edges],
                                      rows.unassigned[row_first:row_first + r],
                                      cols.unassigned[col_first:col_first + c])
        linked = np.flatnonzero(col_of_row < c)
        chosen_rows.append(rows.nodes[row_first + linked])
        chosen_cols.append(cols.nodes[col_first + col_of_row[linked]])
    return np.concatenate(chosen_rows), np.concatenate(chosen_cols)


def _solve_component(local_rows, local_cols, cost, row_unassigned, col_unassigned) -> np.ndarray:
    """Column of each row (``>= len(col_unassigned)``: unlinked) of one component (edges between its rows and
    columns numbered 0, 1, ...): its reduced problem (:func:`reduced_problem`) solved densely up to
    :data:`DENSE_COMPONENT_MAX_ENTRIES` entries, else sparsely."""
    r, c = len(row_unassigned), len(col_unassigned)
    if r * (c + r) <= DENSE_COMPONENT_MAX_ENTRIES:
        r_rows, r_cols, weights, shape = reduced_problem(local_rows, local_cols, cost, row_unassigned, col_unassigned)
        dense = np.full(shape, np.inf)
        dense[r_rows, r_cols] = weights
        return solve_dense(dense)
    return solve_sparse(*_reduced_csr(local_rows, local_cols, cost, row_unassigned, col_unassigned))


def _reduced_csr(local_rows, local_cols, cost, row_unassigned, col_unassigned):
    """The reduced problem of :func:`reduced_problem` as the CSR arrays ``indptr, indices, data`` and its shape.

    Each row's edges in order of column, then its private "no link" column (the last): the arrays
    ``scipy.sparse.csr_array`` builds from the coordinates and ``sort_indices`` leaves, laid out directly.
    """
    r, c = len(row_unassigned), len(col_unassigned)
    key = local_rows * c + local_cols
    if np.any(key[1:] <= key[:-1]):  # (not in (row, column) order)
        order = np.argsort(key)
        local_rows, local_cols, cost = local_rows[order], local_cols[order], cost[order]
    indptr = np.zeros(r + 1, dtype=np.int32)
    np.cumsum(np.bincount(local_rows, minlength=r) + 1, out=indptr[1:])
    # Edge e sits after the e edges before it and one private column per row up to its own.
    position = np.arange(len(local_rows)) + local_rows
    private = indptr[1:] - 1
    indices = np.empty(indptr[-1], dtype=np.int32)
    indices[position] = local_cols
    indices[private] = c + np.arange(r)
    data = np.empty(indptr[-1])
    data[position] = cost - col_unassigned[local_cols]
    data[private] = row_unassigned
    return indptr, indices, data, (r, c + r)


def reduced_problem(
    local_rows: np.ndarray,
    local_cols: np.ndarray,
    cost: np.ndarray,
    row_unassigned: np.ndarray,
    col_unassigned: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """Edges of the rectangular problem equivalent to a gated one with "no link" costs.

    ``r`` rows, ``c + r`` columns: column ``j < c`` is real with weight
    ``cost - col_unassigned[j]``; column ``c + i`` is row ``i``'s private
    "no link" column with weight ``row_unassigned[i]``. Every row is matched,
    and the objective differs from the gated one by the constant
    ``sum(col_unassigned)``.
    """
    r, c = len(row_unassigned), len(col_unassigned)
    all_rows = np.concatenate([local_rows, np.arange(r)])
    all_cols = np.concatenate([local_cols, c + np.arange(r)])
    weights = np.concatenate([cost - col_unassigned[local_cols], row_unassigned])
    return all_rows, all_cols, weights, (r, c + r)


register_solver(
    Solver(
        name="scipy",
        description="CPU reference: scipy.optimize.linear_sum_assignment (dense) and "
        "scipy.sparse.csgraph.min_weight_full_bipartite_matching (sparse), per connected component",
        gpu=False,
        exact=True,
        dense=solve_dense,
        sparse=solve_sparse,
        gated=solve_gated,
    )
)
