"""Deep Greedy Switching (``solver="dgs"``): a heuristic; valid assignments, small gaps."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from tracker import lap


def test_registered_as_heuristic():
    solver = lap._registry._SOLVERS["dgs"]
    assert solver.gpu and not solver.exact and solver.dense is not None
    assert "dgs" in lap.available_solvers("dense")


@pytest.mark.gpu
def test_auto_never_picks_dgs():
    assert lap.get_solver("auto", "dense").name != "dgs"


def _geometric(n, rng):
    a, b = rng.random((n, 2)) * 1000, rng.random((n, 2)) * 1000
    return np.linalg.norm(a[:, None] - b[None], axis=2)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2, 3, 17, 256, 1024])
def test_valid_assignment_and_small_gap_geometric(n, rng):
    cost = _geometric(n, rng)
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert np.array_equal(rows, np.arange(n)) and len(np.unique(cols)) == n
    opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    assert cost[rows, cols].sum() <= opt * 1.01 + 1e-9


@pytest.mark.gpu
def test_is_two_exchange_optimal(rng):
    from tracker.lap import dgs

    n = 200
    cost = rng.random((n, n))
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert not dgs.LAST_STATS["timed_out"]
    cur = cost[rows, cols]
    # no pair of rows gains by swapping their columns
    swapped = cost[rows[:, None], cols[None, :]] + cost[rows[None, :], cols[:, None]]
    gains = cur[:, None] + cur[None, :] - swapped
    assert gains.max() <= 1e-9


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(5, 9), (9, 5), (1, 4)])
def test_rectangular(shape, rng):
    cost = rng.random(shape)
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert len(rows) == min(shape) and len(np.unique(cols)) == len(cols) and len(np.unique(rows)) == len(rows)
    opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    assert cost[rows, cols].sum() >= opt - 1e-12


@pytest.mark.gpu
def test_forbidden_entries_and_time_limit(rng, monkeypatch):
    from tracker.lap import dgs

    cost = rng.random((40, 40))
    cost[rng.random((40, 40)) < 0.3] = np.inf
    np.fill_diagonal(cost, 0.5)  # feasible
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert np.isfinite(cost[rows, cols]).all()
    monkeypatch.setattr(dgs, "TIME_LIMIT_S", 0.0)
    rows, cols = lap.linear_sum_assignment(_geometric(300, rng), solver="dgs")
    assert len(np.unique(cols)) == 300
