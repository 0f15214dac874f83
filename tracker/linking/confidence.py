"""Per-link confidence from the assignment's alternatives.

A link ``i → j`` is certain when both particles had no comparable
alternative: no other candidate of ``i``, no other candidate of ``j``, and
no cheap "no link" option. With costs in units of squared standard
deviations (``-2 log`` likelihood up to a constant), each alternative ``a``
is ``exp(-(c_a - c_ij) / 2)`` times as likely as the chosen link, so

    confidence = min over the two ends of 1 / (1 + Σ_a exp(-(c_a - c_ij) / 2)),

the chosen link's share of the likelihood among the choices of its source
(resp. its target). A link with a close rival scores about 0.5, a link
the assignment chose over a cheaper rival (to serve a neighbour) less, an
isolated one close to 1.
"""

from __future__ import annotations

import numpy as np

from .. import lap


def link_confidence(
    rows: np.ndarray,
    cols: np.ndarray,
    cost: np.ndarray,
    row_unassigned: np.ndarray,
    col_unassigned: np.ndarray,
    chosen_rows: np.ndarray,
    chosen_cols: np.ndarray,
    chosen_edges: np.ndarray | None = None,
) -> np.ndarray:
    """Confidence in [0, 1] of each chosen edge of a gated assignment.

    Parameters
    ----------
    rows, cols, cost : (k,) arrays
        All candidate edges and their costs (``-2 log`` likelihood units),
        sorted by ``(row, col)``.
    row_unassigned, col_unassigned : arrays
        "No link" cost of each row and column, same units.
    chosen_rows, chosen_cols : (c,) arrays
        The edges the assignment chose.
    chosen_edges : (c,) int array, optional
        Their indices in ``rows, cols`` (found by search when not given).
    """
    chosen_rows = np.asarray(chosen_rows, dtype=np.int64)
    chosen_cols = np.asarray(chosen_cols, dtype=np.int64)
    if chosen_rows.size == 0:
        return np.empty(0)
    if chosen_edges is None:
        n_cols = int(max(cols.max(), chosen_cols.max())) + 1
        chosen_edges = chosen_edge_index(rows, cols, chosen_rows, chosen_cols, n_cols)
    chosen_cost = cost[chosen_edges]
    # Relative likelihood of every candidate against the chosen link of its row / column.
    reference_of_row = np.full(len(row_unassigned), np.nan)
    reference_of_row[chosen_rows] = chosen_cost
    reference_of_col = np.full(len(col_unassigned), np.nan)
    reference_of_col[chosen_cols] = chosen_cost

    def share(owner, reference, unassigned, chosen):
        """The chosen link's share of the likelihood among the choices of its end ``chosen`` (an ``owner``)."""
        # Candidates of an owner without a chosen link have a NaN weight: they only make that owner's
        # total NaN, and it is not asked for (no masking pass).
        weight = np.exp(-0.5 * np.clip(cost - reference[owner], -60, 60))
        total = np.bincount(owner, weights=weight, minlength=len(reference))[chosen]
        # The chosen edge itself contributes exp(0) = 1 to ``total``.
        own_unassigned = np.asarray(unassigned, dtype=np.float64)[chosen]
        others = total - 1.0 + np.exp(-0.5 * np.clip(own_unassigned - chosen_cost, -60, 60))
        return 1.0 / (1.0 + np.maximum(others, 0.0))

    return np.minimum(share(rows, reference_of_row, row_unassigned, chosen_rows),
                      share(cols, reference_of_col, col_unassigned, chosen_cols))


def chosen_edge_index(rows: np.ndarray, cols: np.ndarray, chosen_rows: np.ndarray, chosen_cols: np.ndarray,
                      n_cols: int) -> np.ndarray:
    """Index of each chosen edge ``(chosen_rows, chosen_cols)`` among the candidates ``rows, cols`` (sorted by
    ``(row, col)``, columns below ``n_cols``)."""
    return np.searchsorted(rows * n_cols + cols, chosen_rows * n_cols + chosen_cols)


def assign(rows: np.ndarray, cols: np.ndarray, cost: np.ndarray, shape: tuple[int, int], no_link_cost: float,
           solver: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The optimal gated assignment (:func:`tracker.lap.solve_gated`) of candidates ``rows, cols`` (sorted by
    ``(row, col)``) of ``cost`` (``-2 log`` likelihood units), every row and column of ``shape`` free to stay
    unlinked at ``no_link_cost``, and each chosen link's confidence (:func:`link_confidence`).

    Returns
    -------
    chosen_rows, chosen_cols, chosen_edges : (c,) int arrays
        The chosen links and their indices among the candidates.
    confidence : (c,) float array
    """
    chosen_rows, chosen_cols = lap.solve_gated(rows, cols, cost, shape, no_link_cost, solver=solver)
    index = chosen_edge_index(rows, cols, chosen_rows, chosen_cols, shape[1])
    confidence = link_confidence(rows, cols, cost, np.full(shape[0], no_link_cost), np.full(shape[1], no_link_cost),
                                 chosen_rows, chosen_cols, index)
    return chosen_rows, chosen_cols, index, confidence
