"""CPU backend: SciPy's solvers, with gated problems split into connected components.

This is the reference every GPU solver is tested against, and the fallback
when no GPU is present.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import scipy.optimize
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
    n = cost.shape[0]
    try:
        rows, cols = scipy.optimize.linear_sum_assignment(cost)
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

    The gated graph is split into connected components. Each component with
    one edge is decided directly; the others are solved exactly in their
    reduced form (see :func:`reduced_problem`).
    """
    # An edge costlier than leaving both ends unmatched is never optimal.
    useful = cost < row_unassigned[rows] + col_unassigned[cols]
    rows, cols, cost = rows[useful], cols[useful], cost[useful]
    if rows.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty

    _, labels = connected_components(_bipartite_graph(rows, cols, n_rows, n_cols), directed=False)
    components = _Components(labels, rows, cols, n_rows)

    # The pruned single edge of an isolated pair always beats "no link".
    single = components.edges_of_kind(_SINGLE_EDGE)
    chosen_rows = [rows[single]]
    chosen_cols = [cols[single]]

    # Small components (at most SMALL_COMPONENT_SIZE rows and columns) are
    # solved all at once by enumerating every partial matching; medium ones
    # share one vectorised set-up; larger ones one by one with SciPy.
    for size in range(2, SMALL_COMPONENT_SIZE + 1):
        bucket = components.bucket(size, rows, cols)
        if bucket.n_blocks:
            r, c = _solve_small_components(bucket, cost[bucket.edges], row_unassigned, col_unassigned, size)
            chosen_rows.append(r)
            chosen_cols.append(c)

    bucket = components.bucket(_MEDIUM, rows, cols)
    if bucket.n_blocks:
        r, c = _solve_medium_components(bucket, cost[bucket.edges], row_unassigned, col_unassigned)
        chosen_rows.append(r)
        chosen_cols.append(c)

    bucket = components.bucket(_LARGE, rows, cols)
    if bucket.n_blocks:
        order = bucket.edges[stable_argsort(bucket.block)]  # by component, each in row order
        boundaries = np.cumsum(np.bincount(bucket.block))[:-1]
        for edges in np.split(order, boundaries):
            r, c = _solve_component(rows[edges], cols[edges], cost[edges], row_unassigned, col_unassigned)
            chosen_rows.append(r)
            chosen_cols.append(c)

    # Rows are chosen once each: put them in order by marking them (no sort).
    col_of_row = np.full(n_rows, -1, dtype=np.int64)
    col_of_row[np.concatenate(chosen_rows)] = np.concatenate(chosen_cols)
    row_ind = np.flatnonzero(col_of_row >= 0)
    return row_ind, col_of_row[row_ind]


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


class _NodeOrder:
    """The used rows (or columns) of a gated problem ordered by (component, index) (``order``, with their
    labels ``sorted_label``), how many each component has (``count``, by label), and each one's rank (0, 1, ...)
    within its component: computed once, shared by every bucket of components."""

    def __init__(self, label: np.ndarray, used: np.ndarray, n_labels: int):
        used_nodes = np.flatnonzero(used)
        self.order = used_nodes[stable_argsort(label[used_nodes])]
        self.sorted_label = label[self.order]
        self.count = np.bincount(self.sorted_label, minlength=n_labels)
        first_of_label = np.cumsum(self.count) - self.count
        self.rank = np.zeros(len(label), dtype=np.int64)
        self.rank[self.order] = np.arange(len(self.order)) - first_of_label[self.sorted_label]


class _Bucket:
    """The components of one kind (see :class:`_Components`), numbered 0, 1, ... (by label) as blocks.

    ``edges`` indexes the problem's edges in the bucket, in row order (``cols``: their columns, ``block``:
    their blocks); for rows (and likewise columns): ``row_nodes`` (distinct, by (block, index)), ``row_block``
    and ``row_rank`` of each, and ``local_row`` (the rank of each edge's row within its block).
    """

    n_blocks: int
    edges: np.ndarray
    block: np.ndarray
    cols: np.ndarray
    row_nodes: np.ndarray
    row_block: np.ndarray
    row_rank: np.ndarray
    col_nodes: np.ndarray
    col_block: np.ndarray
    col_rank: np.ndarray
    local_row: np.ndarray
    local_col: np.ndarray


_SINGLE_EDGE = 1
"""Kind (:class:`_Components`) of the components of one row and one column (one edge)."""
_MEDIUM = 5  # SMALL_COMPONENT_SIZE + 1
_LARGE = 6


class _Components:
    """The connected components of a gated problem (``labels`` of its nodes: rows, then columns), by kind.

    A component's kind is its size (the larger of its numbers of rows and columns) up to
    :data:`SMALL_COMPONENT_SIZE` (1: a single edge; 0: a node without edges), then :data:`_MEDIUM` up to
    :data:`MEDIUM_COMPONENT_SIZE`, then :data:`_LARGE`. The edges, used rows and used columns are put in order
    of kind once (stable radix sorts, so each kind's keep their order: edges by row, nodes by (component,
    index)), and each kind's are then a slice (:meth:`edges_of_kind`, :meth:`bucket`).
    """

    def __init__(self, labels: np.ndarray, rows: np.ndarray, cols: np.ndarray, n_rows: int):
        n_labels = int(labels.max()) + 1
        self.edge_label = labels[rows]
        row_used = np.zeros(n_rows, dtype=bool)
        row_used[rows] = True
        col_used = np.zeros(len(labels) - n_rows, dtype=bool)
        col_used[cols] = True
        self.row_order = _NodeOrder(labels[:n_rows], row_used, n_labels)
        self.col_order = _NodeOrder(labels[n_rows:], col_used, n_labels)
        side = np.maximum(self.row_order.count, self.col_order.count)
        kind = np.where(side <= SMALL_COMPONENT_SIZE, side,
                        np.where(side <= MEDIUM_COMPONENT_SIZE, _MEDIUM, _LARGE)).astype(np.uint8)
        n_kinds = _LARGE + 1
        # Each component's number among those of its kind (by label).
        label_order = stable_argsort(kind)
        per_kind = np.bincount(kind, minlength=n_kinds)
        self.n_of_kind = per_kind
        self.block_of_label = np.empty(n_labels, dtype=np.int64)
        self.block_of_label[label_order] = np.arange(n_labels) - np.repeat(np.cumsum(per_kind) - per_kind, per_kind)
        self.edge_order, self.edge_bounds = self._by_kind(kind[self.edge_label], n_kinds)
        self.row_nodes, self.row_bounds, self.row_labels = self._nodes_by_kind(self.row_order, kind, n_kinds)
        self.col_nodes, self.col_bounds, self.col_labels = self._nodes_by_kind(self.col_order, kind, n_kinds)

    @staticmethod
    def _by_kind(kind_of_item, n_kinds):
        """A stable order of items by kind and where each kind's begin (``n_kinds + 1`` bounds)."""
        return stable_argsort(kind_of_item), np.r_[0, np.cumsum(np.bincount(kind_of_item, minlength=n_kinds))]

    def _nodes_by_kind(self, order: _NodeOrder, kind, n_kinds):
        """The used nodes in order of (kind, component, index), the bounds of each kind, and their labels."""
        by_kind, bounds = self._by_kind(kind[order.sorted_label], n_kinds)
        return order.order[by_kind], bounds, order.sorted_label[by_kind]

    def edges_of_kind(self, kind: int) -> np.ndarray:
        """The edges of the components of ``kind``, in row order."""
        return self.edge_order[self.edge_bounds[kind]:self.edge_bounds[kind + 1]]

    def bucket(self, kind: int, rows: np.ndarray, cols: np.ndarray) -> _Bucket:
        """The components of ``kind`` as a :class:`_Bucket`."""
        bucket = _Bucket()
        bucket.n_blocks = int(self.n_of_kind[kind])
        if not bucket.n_blocks:
            return bucket
        block_of_label = self.block_of_label
        bucket.edges = self.edges_of_kind(kind)
        bucket.block = block_of_label[self.edge_label[bucket.edges]]
        bucket.cols = cols[bucket.edges]
        for side, order in (("row", self.row_order), ("col", self.col_order)):
            nodes, bounds, labels = getattr(self, side + "_nodes"), getattr(self, side + "_bounds"), getattr(
                self, side + "_labels")
            these = slice(bounds[kind], bounds[kind + 1])
            setattr(bucket, side + "_nodes", nodes[these])
            setattr(bucket, side + "_block", block_of_label[labels[these]])
            setattr(bucket, side + "_rank", order.rank[nodes[these]])
        bucket.local_row, bucket.local_col = self.row_order.rank[rows[bucket.edges]], self.col_order.rank[bucket.cols]
        return bucket


SMALL_COMPONENT_SIZE = 4
"""Components with at most this many rows and columns are solved by enumeration."""

MEDIUM_COMPONENT_SIZE = 128
"""Larger components (up to this many rows and columns) share one vectorised set-up and get one dense solve each."""


def _solve_medium_components(bucket: _Bucket, cost, row_unassigned, col_unassigned):
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
    n_r = np.bincount(bucket.row_block, minlength=bucket.n_blocks)
    n_c = np.bincount(bucket.col_block, minlength=bucket.n_blocks)
    row_first, col_first = np.cumsum(n_r) - n_r, np.cumsum(n_c) - n_c
    flip = n_c < n_r  # solved transposed
    lines = np.where(flip, n_c, n_r)  # the dense matrix's rows
    other = np.where(flip, n_r, n_c)  # and real columns
    width = n_r + n_c
    line_first = np.cumsum(lines) - lines
    offset = np.r_[0, np.cumsum(lines * width)]

    block = bucket.block
    edge_flip = flip[block]
    line = np.where(edge_flip, bucket.local_col, bucket.local_row)
    column = np.where(edge_flip, bucket.local_row, bucket.local_col)
    # (The column's no-link cost in the reduced problem, the row's in the transposed one.)
    weight = cost - np.where(edge_flip, row_unassigned[bucket.row_nodes[row_first[block] + bucket.local_row]],
                             col_unassigned[bucket.cols])
    flat = np.full(int(offset[-1]), np.inf)
    flat[offset[block] + line * width[block] + column] = weight
    for nodes, node_block, rank, unassigned, own_side in (
            (bucket.row_nodes, bucket.row_block, bucket.row_rank, row_unassigned, ~flip),
            (bucket.col_nodes, bucket.col_block, bucket.col_rank, col_unassigned, flip)):
        private = own_side[node_block]  # each line's private "no link" column
        b, t = node_block[private], rank[private]
        flat[offset[b] + t * (width[b] + 1) + other[b]] = unassigned[nodes[private]]

    lsa = scipy.optimize.linear_sum_assignment
    chosen = np.concatenate([  # column of each line, within its block
        lsa(flat[start:stop].reshape(r, w))[1]
        for start, stop, r, w in zip(offset[:-1].tolist(), offset[1:].tolist(), lines.tolist(), width.tolist())])
    line_block = np.repeat(np.arange(bucket.n_blocks), lines)
    linked = chosen < other[line_block]
    b = line_block[linked]
    t, partner = (np.arange(len(chosen)) - line_first[line_block])[linked], chosen[linked]
    row_rank, col_rank = np.where(flip[b], partner, t), np.where(flip[b], t, partner)
    return bucket.row_nodes[row_first[b] + row_rank], bucket.col_nodes[col_first[b] + col_rank]


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


def _solve_small_components(bucket: _Bucket, cost, row_unassigned, col_unassigned, size):
    """Exact solution of many components of at most ``size`` rows and columns at once.

    Each component becomes a ``size x size`` block (forbidden entries +inf,
    padding rows and columns with zero "no link" cost); the total cost of
    every partial matching is evaluated for all blocks together, and the
    cheapest is kept (the first in :func:`partial_matchings` order on ties).
    """
    n_blocks = bucket.n_blocks
    # Blocks padded with size + 1 columns: the last is "unmatched", at the row's no-link cost (0 for padding).
    dense = np.full((n_blocks, size, size + 1), np.inf)
    dense[:, :, size] = 0.0
    dense[bucket.block, bucket.local_row, bucket.local_col] = cost
    dense[bucket.row_block, bucket.row_rank, size] = row_unassigned[bucket.row_nodes]
    col_un = np.zeros((n_blocks, size + 1))
    col_un[bucket.col_block, bucket.col_rank] = col_unassigned[bucket.col_nodes]
    global_row = np.full((n_blocks, size), -1, dtype=np.int64)
    global_row[bucket.row_block, bucket.row_rank] = bucket.row_nodes
    global_col = np.full((n_blocks, size), -1, dtype=np.int64)
    global_col[bucket.col_block, bucket.col_rank] = bucket.col_nodes

    matchings = partial_matchings(size)  # (n_matchings, size)
    total = dense[:, 0, matchings[:, 0]]
    for i in range(1, size):
        total += dense[:, i, matchings[:, i]]
    total += col_un[:, :size] @ _unused_columns(size)
    best = matchings[np.argmin(total, axis=1)]  # (n_blocks, size)

    block_index, row_local = np.nonzero(best < size)
    col_local = best[block_index, row_local]
    return global_row[block_index, row_local], global_col[block_index, col_local]


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


def _solve_component(rows, cols, cost, row_unassigned, col_unassigned):
    unique_rows, local_rows = np.unique(rows, return_inverse=True)
    unique_cols, local_cols = np.unique(cols, return_inverse=True)
    r_rows, r_cols, weights, shape = reduced_problem(
        local_rows, local_cols, cost, row_unassigned[unique_rows], col_unassigned[unique_cols]
    )
    if shape[0] * shape[1] <= DENSE_COMPONENT_MAX_ENTRIES:
        dense = np.full(shape, np.inf)
        dense[r_rows, r_cols] = weights
        col_of_row = solve_dense(dense)
    else:
        graph = sp.csr_array((weights, (r_rows, r_cols)), shape=shape)
        graph.sort_indices()
        col_of_row = solve_sparse(graph.indptr, graph.indices, graph.data, shape)
    linked = np.flatnonzero(col_of_row < len(unique_cols))
    return unique_rows[linked], unique_cols[col_of_row[linked]]


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
