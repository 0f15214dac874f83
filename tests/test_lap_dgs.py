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


def _geom_paper(n, rng):
    """The GEOM class as Roverso et al. use it: distances between the points of one uniform 2D set, maximised."""
    points = rng.random((n, 2)) * 1000
    return np.linalg.norm(points[:, None] - points[None], axis=2)


def _jittered(n, rng, jitter=0.3):
    """Squared distances between a 3D cloud (density 1) and a jittered, shuffled copy (tracking-like)."""
    a = rng.random((n, 3)) * n ** (1 / 3)
    b = (a + rng.normal(0, jitter, a.shape))[rng.permutation(n)]
    return ((a[:, None] - b[None]) ** 2).sum(axis=2)


def _max_pair_gain(cost, rows, cols):
    """Largest objective decrease from swapping the columns of two rows (<= 0: 2-exchange optimal)."""
    cur = cost[rows, cols]
    swapped = cost[rows[:, None], cols[None, :]] + cost[rows[None, :], cols[:, None]]
    gains = cur[:, None] + cur[None, :] - swapped
    return gains.max()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2, 3, 17, 256, 1024])
def test_valid_assignment_and_small_gap_geometric(n, rng):
    cost = _geometric(n, rng)
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert np.array_equal(rows, np.arange(n)) and len(np.unique(cols)) == n
    opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    # 2D GEOM (two independent point sets) is the hard class for 2-exchange local search: measured on
    # an H100 with the default start, 1.06 % at n = 1024 for this seed (0.84 % at 2048, 0.58 % at 4096);
    # the 1 % bound is asserted on the tracking-like 3D class below
    assert cost[rows, cols].sum() <= opt * 1.015 + 1e-9


@pytest.mark.gpu
@pytest.mark.parametrize("n", [64, 1024])
def test_paper_geom_class_within_a_tenth_of_a_percent(n, rng):
    cost = _geom_paper(n, rng)
    rows, cols = lap.linear_sum_assignment(cost, maximize=True, solver="dgs")
    assert np.array_equal(rows, np.arange(n)) and len(np.unique(cols)) == n
    best = cost[scipy.optimize.linear_sum_assignment(cost, maximize=True)].sum()
    # issue 4 asks for 1 %; measured on an H200 at n = 1024-16384: under 0.001 %
    assert cost[rows, cols].sum() >= best * (1 - 1e-3)


@pytest.mark.gpu
def test_is_two_exchange_optimal(rng):
    from tracker.lap import dgs

    n = 200
    cost = rng.random((n, n))
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert not dgs.LAST_STATS["timed_out"]
    # no pair of rows gains by swapping their columns
    assert _max_pair_gain(cost, rows, cols) <= 1e-9


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


@pytest.mark.gpu
@pytest.mark.parametrize("n", [512, 2048])
def test_jittered_3d_within_one_percent_and_two_exchange_optimal(n, rng):
    from tracker.lap import dgs

    cost = _jittered(n, rng)
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert np.array_equal(rows, np.arange(n)) and len(np.unique(cols)) == n
    stats = dict(dgs.LAST_STATS)
    assert stats["converged"] and not stats["timed_out"]
    total = cost[rows, cols].sum()
    assert total <= stats["init_objective"] * (1 + 1e-12)  # never worse than the start
    assert _max_pair_gain(cost, rows, cols) <= 1e-9 * cost.max()
    opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    assert total <= opt * 1.01


@pytest.mark.gpu
@pytest.mark.parametrize("init", ["sinkhorn", "greedy", "auction", "identity"])
def test_every_start_valid_no_worse_and_two_exchange_optimal(init, rng):
    import cupy

    from tracker.lap import dgs

    n = 150
    cost = _geometric(n, rng)
    tau = dgs.solve(cupy.asarray(cost), init=init).get()
    assert len(np.unique(tau)) == n and tau.min() >= 0 and tau.max() < n
    stats = dict(dgs.LAST_STATS)
    assert stats["init"] == init and stats["converged"]
    total = cost[np.arange(n), tau].sum()
    assert abs(total - stats["objective"]) <= 1e-9 * total
    assert total <= stats["init_objective"] * (1 + 1e-12)
    assert _max_pair_gain(cost, np.arange(n), tau) <= 1e-9 * cost.max()


@pytest.mark.gpu
@pytest.mark.parametrize("divisor", [4, 0.25])
def test_auction_start_is_eps_optimal(divisor, rng, monkeypatch):
    """The "auction" start stops at eps = range / (divisor * n): at most n * eps above the optimum."""
    import cupy

    from tracker.lap import dgs

    monkeypatch.setattr(dgs, "INIT_EPS_DIVISOR", divisor)
    for n in (60, 301):
        cost = _geometric(n, rng)
        dgs.solve(cupy.asarray(cost), init="auction")
        opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
        eps = (cost.max() - cost.min()) / (divisor * n)
        assert opt <= dgs.LAST_STATS["init_objective"] <= opt + n * eps * (1 + 1e-9) + 1e-9


@pytest.mark.gpu
def test_greedy_start_is_a_permutation_when_capped(rng, monkeypatch):
    import cupy

    from tracker.lap import dgs

    monkeypatch.setattr(dgs, "GREEDY_ROUNDS", 1)  # leftovers are paired in order
    cost = rng.random((300, 300))
    tau = dgs.solve(cupy.asarray(cost), init="greedy").get()
    assert len(np.unique(tau)) == 300


@pytest.mark.gpu
def test_large_rows_without_shared_memory(rng):
    """n > 6144: the row does not fit in shared memory; evaluation reads it from global memory."""
    import cupy

    from tracker.lap import dgs

    n = 6200
    cost = cupy.asarray(rng.random((n, n)))
    tau = dgs.solve(cost).get()
    assert len(np.unique(tau)) == n
    assert dgs.LAST_STATS["objective"] <= dgs.LAST_STATS["init_objective"]


@pytest.mark.gpu
@pytest.mark.parametrize("storage", ["float32", "float16"])
def test_sinkhorn_storage_and_unpadded_size(storage, rng, monkeypatch):
    import cupy

    from tracker.lap import dgs

    monkeypatch.setattr(dgs, "SINKHORN_STORAGE", storage)
    n = 203  # not a multiple of 8: padded copies
    cost = _jittered(n, rng)
    tau = dgs.solve(cupy.asarray(cost), init="sinkhorn").get()
    assert len(np.unique(tau)) == n
    assert _max_pair_gain(cost, np.arange(n), tau) <= 1e-9 * cost.max()
    opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    assert cost[np.arange(n), tau].sum() <= opt * 1.01


@pytest.mark.gpu
@pytest.mark.parametrize("n", [5, 203, 700, 1500, 4096])
def test_fused_sinkhorn_gives_the_launch_per_step_prices(n, rng, monkeypatch):
    import cupy

    from tracker.lap import dgs

    cost = _jittered(n, rng)
    cf = cupy.asarray((cost / cost.max()).astype(np.float32))
    k = dgs._kernels()
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    monkeypatch.setattr(dgs, "SINKHORN_ITERS", 60)
    assert k["sk_anneal_grid"] is not None  # the cooperative kernel compiled here
    fused = [x.get() for x in dgs._sinkhorn(k, cf, sms)]  # one cooperative launch (n <= SINKHORN_GRID_MAX_N)
    assert k["sk_anneal_grid"] is not None  # (and launched)
    monkeypatch.setattr(dgs, "SINKHORN_GRID_MAX_N", 0)
    stepped = [x.get() for x in dgs._sinkhorn(k, cf, sms)]
    for a, b in zip(fused, stepped):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert np.isfinite(fused[0][:n]).all() and np.ptp(fused[0][:n]) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("kind, n", [("geometric", 64), ("geometric", 600), ("uniform", 300), ("uniform", 1024)])
def test_auction_phase_bounds_the_gap(kind, n, rng, monkeypatch):
    from tracker.lap import dgs

    cost = _geometric(n, rng) if kind == "geometric" else rng.random((n, n)) * 1000
    opt = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    lap.linear_sum_assignment(cost, solver="dgs")
    assert dgs.LAST_STATS["polish_s"] == 0.0  # off by default
    monkeypatch.setattr(dgs, "POLISH_GAP", 0.005)
    rows, cols = lap.linear_sum_assignment(cost, solver="dgs")
    assert len(np.unique(cols)) == n
    assert cost[rows, cols].sum() <= opt * (1 + dgs.POLISH_GAP) + 1e-9  # the eps-optimality bound
    assert _max_pair_gain(cost, rows, cols) <= 1e-9 * cost.max()  # and still 2-exchange optimal
    assert dgs.LAST_STATS["objective"] <= dgs.LAST_STATS["switched_objective"]
