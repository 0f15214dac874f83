"""The solver registry: every assignment backend registers here under a name.

Backends implement up to three entry points, all over already-validated input
(the front-end in :mod:`tracker.lap` does validation, ``maximize``,
transposition, array-kind conversion and infeasibility checks):

dense(cost) -> col_of_row
    ``cost``: C-contiguous float64 ``(n, m)`` array with ``n <= m`` in the
    backend's array module; entries finite or ``+inf`` (forbidden).
    Returns int64 ``(n,)``: the column of each row, ``-1`` if the problem was
    found infeasible.
sparse(indptr, indices, data, shape) -> col_of_row
    CSR biadjacency with sorted indices, no duplicates, finite float64 data,
    ``shape = (n, m)`` with ``n <= m``; stored entries are edges (zeros too).
    Same return convention as ``dense``.
gated(n_rows, n_cols, rows, cols, cost, row_unassigned, col_unassigned) -> (row_ind, col_ind)
    Minimise the sum of the chosen edges' costs plus ``row_unassigned[i]``
    for every row left unmatched and ``col_unassigned[j]`` for every column
    left unmatched (the "no link" alternative of tracking). Returns the
    chosen edges. If a backend has ``sparse`` but no ``gated``, the front-end
    solves the equivalent augmented problem of Jaqaman et al. (2008); with
    ``dense`` only, that problem as one matrix (moderate sizes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..backend import gpu_available


@dataclass(frozen=True)
class Solver:
    """A registered assignment backend."""

    name: str
    description: str
    gpu: bool
    exact: bool
    dense: Callable | None = None
    sparse: Callable | None = None
    gated: Callable | None = None
    auto_priority: int | dict[str, int] = 0
    """Higher wins when ``solver="auto"`` picks among exact GPU solvers; a dict
    gives one priority per problem kind (``"dense"``, ``"sparse"``, ``"gated"``)."""

    def priority(self, kind: str) -> int:
        if isinstance(self.auto_priority, dict):
            return self.auto_priority.get(kind, 0)
        return self.auto_priority

    def solves(self, kind: str) -> bool:
        """Whether this solver handles ``kind``.

        Every solver also solves gated problems: through its ``sparse`` entry
        point, or ``dense`` for gated problems small enough for one matrix.
        """
        if kind == "gated":
            return any(entry is not None for entry in (self.gated, self.sparse, self.dense))
        return getattr(self, kind) is not None


_SOLVERS: dict[str, Solver] = {}


def register_solver(solver: Solver) -> Solver:
    """Add ``solver`` to the registry (replacing one of the same name)."""
    _SOLVERS[solver.name] = solver
    return solver


def available_solvers(kind: str | None = None) -> list[str]:
    """Names of registered solvers, optionally only those implementing ``kind``.

    ``kind`` is ``"dense"``, ``"sparse"`` or ``"gated"`` (every solver can
    solve ``gated`` problems).
    """
    return ["auto", *(s.name for s in _SOLVERS.values() if kind is None or s.solves(kind))]


def get_solver(name: str, kind: str) -> Solver:
    """Look up ``name`` for a problem of ``kind``, resolving ``"auto"``.

    ``"auto"`` is the exact GPU solver of highest ``auto_priority`` for this
    kind when a GPU is present, otherwise ``"scipy"``.
    """
    if name == "auto":
        if gpu_available():
            candidates = [s for s in _SOLVERS.values() if s.gpu and s.exact and s.solves(kind)]
            if candidates:
                return max(candidates, key=lambda s: s.priority(kind))
        return _SOLVERS["scipy"]
    try:
        solver = _SOLVERS[name]
    except KeyError:
        known = ", ".join(available_solvers())
        raise ValueError(f"unknown solver {name!r}; choose one of: {known}") from None
    if not solver.solves(kind):
        raise ValueError(f"solver {name!r} cannot solve {kind} problems")
    if solver.gpu and not gpu_available():
        raise RuntimeError(
            f"solver {name!r} needs CuPy and a CUDA GPU; use solver='scipy' or 'auto' on this machine"
        )
    return solver
