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

from ._registry import Solver, register_solver

# Components with at most this many entries in their reduced dense form are
# solved with the dense solver (fast for small blocks); larger ones sparsely.
DENSE_COMPONENT_MAX_ENTRIES = 1 << 20


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

    graph = sp.coo_array((np.ones(rows.size, dtype=np.int8), (rows, n_rows + cols)), shape=(n_rows + n_cols,) * 2)
    _, labels = connected_components(graph, directed=False)
    edge_label = labels[rows]
    n_labels = int(labels.max()) + 1
    edges_per_label = np.bincount(edge_label, minlength=n_labels)
    row_used = np.zeros(n_rows, dtype=bool)
    row_used[rows] = True
    col_used = np.zeros(n_cols, dtype=bool)
    col_used[cols] = True
    rows_per_label = np.bincount(labels[:n_rows][row_used], minlength=n_labels)
    cols_per_label = np.bincount(labels[n_rows:][col_used], minlength=n_labels)

    # The pruned single edge of an isolated pair always beats "no link".
    single = edges_per_label[edge_label] == 1
    chosen_rows = [rows[single]]
    chosen_cols = [cols[single]]

    # Small components (at most SMALL_COMPONENT_SIZE rows and columns) are
    # solved all at once by enumerating every partial matching; larger ones
    # one by one with SciPy.
    side = np.maximum(rows_per_label, cols_per_label)[edge_label]
    for size in range(2, SMALL_COMPONENT_SIZE + 1):
        in_bucket = ~single & (side == size)
        if in_bucket.any():
            r, c = _solve_small_components(
                rows[in_bucket], cols[in_bucket], cost[in_bucket], edge_label[in_bucket],
                row_unassigned, col_unassigned, size,
            )
            chosen_rows.append(r)
            chosen_cols.append(c)

    medium = ~single & (side > SMALL_COMPONENT_SIZE) & (side <= MEDIUM_COMPONENT_SIZE)
    if medium.any():
        r, c = _solve_medium_components(
            rows[medium], cols[medium], cost[medium], edge_label[medium], row_unassigned, col_unassigned
        )
        chosen_rows.append(r)
        chosen_cols.append(c)

    multi = np.flatnonzero(~single & (side > MEDIUM_COMPONENT_SIZE))
    if multi.size:
        order = multi[np.argsort(edge_label[multi], kind="stable")]
        boundaries = np.flatnonzero(np.diff(edge_label[order])) + 1
        for edges in np.split(order, boundaries):
            r, c = _solve_component(rows[edges], cols[edges], cost[edges], row_unassigned, col_unassigned)
            chosen_rows.append(r)
            chosen_cols.append(c)

    row_ind = np.concatenate(chosen_rows)
    col_ind = np.concatenate(chosen_cols)
    order = np.argsort(row_ind, kind="stable")
    return row_ind[order], col_ind[order]


SMALL_COMPONENT_SIZE = 4
"""Components with at most this many rows and columns are solved by enumeration."""

MEDIUM_COMPONENT_SIZE = 128
"""Larger components (up to this many rows and columns) share one vectorised set-up and get one dense solve each."""


def _solve_medium_components(rows, cols, cost, edge_label, row_unassigned, col_unassigned):
    """Exact solution of many medium components: every dense matrix built at once, then one dense solve each.

    Each component is the reduced problem of :func:`reduced_problem` as a
    dense ``r x (c + r)`` matrix for :func:`scipy.optimize.linear_sum_assignment`;
    all of them are laid out in one flat buffer and filled with vectorised
    scatters, so the Python loop only slices, solves and stores.
    """
    row_nodes, row_labels, row_rank, row_of_edge = _local_index(rows, edge_label)
    col_nodes, col_labels, col_rank, col_of_edge = _local_index(cols, edge_label)
    local_row, local_col = row_rank[row_of_edge], col_rank[col_of_edge]
    row_bounds = np.r_[0, np.flatnonzero(np.diff(row_labels)) + 1, len(row_labels)]
    col_bounds = np.r_[0, np.flatnonzero(np.diff(col_labels)) + 1, len(col_labels)]
    n_r, n_c = np.diff(row_bounds), np.diff(col_bounds)
    width = n_c + n_r
    offset = np.r_[0, np.cumsum(n_r * width)]
    # Component (0, 1, ... in label order) of every edge and of every distinct row.
    edge_component = np.searchsorted(row_labels[row_bounds[:-1]], edge_label)
    row_component = np.repeat(np.arange(len(n_r)), n_r)
    flat = np.full(int(offset[-1]), np.inf)
    flat[offset[edge_component] + local_row * width[edge_component] + local_col] = cost - col_unassigned[cols]
    flat[offset[row_component] + row_rank * width[row_component] + n_c[row_component] + row_rank] = (
        row_unassigned[row_nodes])
    chosen_row = np.empty(len(row_nodes), dtype=np.int64)  # local column of each distinct row
    lsa = scipy.optimize.linear_sum_assignment
    for start, stop, r, w, r0 in zip(offset[:-1].tolist(), offset[1:].tolist(), n_r.tolist(), width.tolist(),
                                     row_bounds[:-1].tolist()):
        chosen_row[r0:r0 + r] = lsa(flat[start:stop].reshape(r, w))[1]
    linked = chosen_row < n_c[row_component]
    global_cols = col_nodes[col_bounds[:-1][row_component[linked]] + chosen_row[linked]]
    return row_nodes[linked], global_cols


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


def _local_index(nodes: np.ndarray, labels: np.ndarray):
    """Rank of each distinct node within its component (0, 1, ... in node order).

    Returns the distinct nodes, their component labels and ranks, and, for
    every input entry, the index of its distinct node.
    """
    span = int(nodes.max()) + 1
    unique_keys, inverse = np.unique(labels.astype(np.int64) * span + nodes, return_inverse=True)
    unique_labels, unique_nodes = np.divmod(unique_keys, span)
    first = np.r_[0, np.flatnonzero(np.diff(unique_labels)) + 1]
    starts = np.repeat(first, np.diff(np.r_[first, len(unique_labels)]))
    rank = np.arange(len(unique_labels)) - starts
    return unique_nodes, unique_labels, rank, inverse


def _solve_small_components(rows, cols, cost, edge_label, row_unassigned, col_unassigned, size):
    """Exact solution of many components of at most ``size`` rows and columns at once.

    Each component becomes a ``size x size`` block (forbidden entries +inf,
    padding rows and columns with zero "no link" cost); the total cost of
    every partial matching is evaluated for all blocks together, and the
    cheapest is kept (the first in :func:`partial_matchings` order on ties).
    """
    component_labels, block = np.unique(edge_label, return_inverse=True)
    n_blocks = len(component_labels)
    row_nodes, row_labels, row_rank, row_of_edge = _local_index(rows, edge_label)
    col_nodes, col_labels, col_rank, col_of_edge = _local_index(cols, edge_label)
    local_row, local_col = row_rank[row_of_edge], col_rank[col_of_edge]

    # Blocks padded with size + 1 columns: the last is "unmatched" (cost 0 here,
    # the row's no-link cost is added separately).
    dense = np.full((n_blocks, size, size + 1), np.inf)
    dense[:, :, size] = 0.0
    dense[block, local_row, local_col] = cost
    row_un = np.zeros((n_blocks, size))
    row_block = np.searchsorted(component_labels, row_labels)
    row_un[row_block, row_rank] = row_unassigned[row_nodes]
    col_un = np.zeros((n_blocks, size + 1))
    col_block = np.searchsorted(component_labels, col_labels)
    col_un[col_block, col_rank] = col_unassigned[col_nodes]
    global_row = np.full((n_blocks, size), -1, dtype=np.int64)
    global_row[row_block, row_rank] = row_nodes
    global_col = np.full((n_blocks, size), -1, dtype=np.int64)
    global_col[col_block, col_rank] = col_nodes

    matchings = partial_matchings(size)  # (n_matchings, size)
    unmatched_row = matchings == size
    # Which columns each matching uses.
    used_col = np.zeros((len(matchings), size + 1), dtype=bool)
    used_col[np.arange(len(matchings))[:, None], matchings] = True
    used_col = used_col[:, :size]

    total = np.zeros((n_blocks, len(matchings)))
    for i in range(size):
        total += dense[:, i, matchings[:, i]]
        total += row_un[:, i, None] * unmatched_row[None, :, i]
    total += col_un[:, :size] @ (~used_col).T.astype(np.float64)
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
