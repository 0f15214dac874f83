"""GPU auction solver (``solver="auction"``) against SciPy: dense, sparse and gated problems.

GPU tests are marked ``gpu`` (skipped without CuPy and a GPU); the driver is
also exercised on the CPU through a NumPy emulation of its kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import lap_instances
from lap_instances import random_costs, sparse_graphs
from tracker import lap
from tracker.simulate import gated_frame_pair
from tracker.lap import _scipy, auction, dense_auction, gated_auction


# ------------------------------------------------------------------ helpers --

def use_settings(monkeypatch, **settings) -> None:
    """Set constants of :mod:`tracker.lap.gated_auction` for one test (undone after it)."""
    for name, value in settings.items():
        monkeypatch.setattr(gated_auction, name, value)


def gated_objective(rows, cols, chosen_r, chosen_c, cost, row_un, col_un):
    index = {(int(r), int(c)): k for k, (r, c) in enumerate(zip(rows, cols))}
    chosen_r, chosen_c = np.asarray(chosen_r), np.asarray(chosen_c)
    assert len(np.unique(chosen_r)) == len(chosen_r) and len(np.unique(chosen_c)) == len(chosen_c)
    links = sum(cost[index[(int(r), int(c))]] for r, c in zip(chosen_r, chosen_c))
    return links + row_un.sum() - row_un[chosen_r].sum() + col_un.sum() - col_un[chosen_c].sum()


def generous_gate_instance(n, step, seed):
    """The issue's generous-gate family (``tests/lap_instances.py``): tens of candidates per row."""
    return lap_instances.generous_gate_instance(n, step, seed=seed)


def geometric_gated(n, step, seed, gate_factor=3.0):
    """3D tracking instance: n points, displaced copy (RMS step = step x mean NN distance)."""
    return gated_frame_pair(n, step, seed=seed, gate_factor=gate_factor)


def check_gated(rows, cols, cost, shape, row_un, col_un, solver="auction"):
    got_r, got_c = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver=solver)
    ref_r, ref_c = _scipy.solve_gated(shape[0], shape[1], rows, cols, cost, row_un, col_un)
    got = gated_objective(rows, cols, got_r, got_c, cost, row_un, col_un)
    ref = gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un)
    return got, ref


@st.composite
def cost_matrices(draw):
    n = draw(st.integers(1, 8))
    m = draw(st.integers(1, 8))
    kind = draw(st.sampled_from(["int", "float", "ties", "negative", "wide"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cost = random_costs(rng, n, m, kind)
    cost[rng.random((n, m)) < draw(st.sampled_from([0.0, 0.2, 0.6]))] = np.inf
    return cost


# -------------------------------------------------------------- CPU (emulated) --

@pytest.mark.parametrize("gauss_seidel_rows", [0, 8, 64])
@pytest.mark.parametrize("seed", range(3))
def test_emulated_driver_gated_matches_scipy(seed, gauss_seidel_rows, monkeypatch):
    monkeypatch.setattr(auction, "GAUSS_SEIDEL_ROWS", gauss_seidel_rows)
    rng = np.random.default_rng(seed)
    for _ in range(60):
        nr, nc = rng.integers(1, 10, 2)
        rows, cols = np.nonzero(rng.random((nr, nc)) < 0.5)
        cost = rng.random(rows.size) * 4
        row_un, col_un = rng.random(nr) * 2, rng.random(nc) * 2
        got_r, got_c = auction.solve_gated(nr, nc, rows, cols, cost, row_un, col_un, emulate=True)
        ref_r, ref_c = _scipy.solve_gated(nr, nc, rows, cols, cost, row_un, col_un)
        np.testing.assert_allclose(
            gated_objective(rows, cols, got_r, got_c, cost, row_un, col_un),
            gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un), rtol=1e-9)


def war_of_ties(n_rows=3, n_cols=2):
    """Every row reaches every column at the same float cost: a bidding war in steps of eps."""
    rows, cols = (a.ravel() for a in np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij"))
    return rows, cols, np.full(rows.size, 0.3), np.full(n_rows, 10.25), np.full(n_cols, 10.25)


def test_emulated_claim_breaks_ties_by_index():
    # equal offers for one column: the lowest index wins whatever the order they come in (the kernel's nominate)
    for order in ([2, 0, 1], [1, 2, 0], [0, 1, 2]):
        ws = gated_auction._Workspace(np, 3, 1)
        offers = {x: {0: (0, -5, 5, 1), 1: (0, -4, 4, 1), 2: (0, -5, 5, 1)}[x] for x in order}
        following = gated_auction._claim(ws, offers, forward=True)
        assert ws.owner[0] == 0 and ws.price[0] == 5 and sorted(following) == [1, 2]


def test_emulated_dense_claim_breaks_ties_by_index():
    # the square auction's rounds (auction.cuh nominate_step / claim_step): of equal highest bids for a column
    # the lowest row wins whatever the order of the list, and the column's bid goes back to rest
    from types import SimpleNamespace

    from tracker.lap.auction_emulation import EmulatedKernels

    for order in ([2, 0, 1], [1, 2, 0], [0, 1, 2]):
        target, bid = np.zeros(3, np.int32), np.array([5, 4, 5], np.int64)
        col_bid, winner, owner = np.array([5], np.int64), np.array([-1], np.int32), np.array([-1], np.int32)
        assigned, price = np.full(3, -1, np.int32), np.zeros(1, np.int64)
        following, following_count = np.empty(3, np.int32), np.zeros(1, np.int32)
        EmulatedKernels().claim(SimpleNamespace(n=3), np.array(order, np.int32), np.array([3]), target, bid, col_bid,
                                winner, owner, assigned, price, following, following_count)
        assert owner[0] == 0 and assigned[0] == 0 and price[0] == 5
        assert sorted(following[:following_count[0]].tolist()) == [1, 2]
        assert col_bid[0] == 0 and winner[0] == -1


def test_emulated_asymmetric_form_on_tracking_costs():
    rows, cols, cost, shape, un = geometric_gated(1500, 0.5, seed=4)
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got_r, got_c = auction.solve_gated(*shape, rows, cols, cost, row_un, col_un, emulate=True)
    assert auction.LAST_STATS["form"] == "asymmetric"
    ref_r, ref_c = _scipy.solve_gated(*shape, rows, cols, cost, row_un, col_un)
    np.testing.assert_allclose(gated_objective(rows, cols, got_r, got_c, cost, row_un, col_un),
                               gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un), rtol=1e-12)


@pytest.mark.parametrize("integer", [False, True])
def test_emulated_war_of_ties_is_solved_exactly(integer):
    # the single phase at eps = 1 (the first try) climbs in steps of eps; epsilon-scaling ends it
    rows, cols, cost, row_un, col_un = war_of_ties(6, 4)
    if integer:
        cost, row_un, col_un = cost * 10, np.round(row_un), np.round(col_un)
    got_r, got_c = auction.solve_gated(6, 4, rows, cols, cost, row_un, col_un, emulate=True)
    assert auction.LAST_STATS["form"] == "asymmetric"
    assert len(got_r) == 4 and len(set(got_c.tolist())) == 4


@pytest.mark.parametrize("first_try_rounds", [0, 300])
@pytest.mark.parametrize("step", [0.3, 0.5, 0.7])
def test_emulated_generous_gates_match_scipy(step, first_try_rounds, monkeypatch):
    use_settings(monkeypatch, FIRST_TRY_ROUNDS=first_try_rounds)
    rows, cols, cost, shape, un = generous_gate_instance(400, step, seed=int(step * 10))
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got_r, got_c = auction.solve_gated(*shape, rows, cols, cost, row_un, col_un, emulate=True)
    ref_r, ref_c = _scipy.solve_gated(*shape, rows, cols, cost, row_un, col_un)
    np.testing.assert_allclose(gated_objective(rows, cols, got_r, got_c, cost, row_un, col_un),
                               gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un), rtol=1e-12)
    if first_try_rounds == 0:
        assert gated_auction.LAST_STATS["phases"] > 1


@pytest.mark.parametrize("small, finish, early_stop", [(0, 4, False), (16, 64, True), (256, 0, True),
                                                       (0, 10**6, False), (0, 64, True)])
@pytest.mark.parametrize("step", [0.5, 0.7])
@pytest.mark.parametrize("integer", [False, True])
def test_emulated_shortest_path_finisher_matches_scipy(step, small, finish, early_stop, integer, monkeypatch):
    # the finisher (gated_finish.py) settles a stage's last bidders, forward and reverse; EARLY_STOP: phases
    # before the last stop at SMALL bidders (rows stay free, columns stale); FINISH_ROWS = 10**6: paths only
    use_settings(monkeypatch, EARLY_STOP=early_stop, SMALL=small, FINISH_ROWS=finish, FIRST_TRY_ROUNDS=0)
    assert_emulated_generous_gate_exact(250, step, int(step * 10) + integer, integer)
    if finish:
        assert gated_auction.LAST_STATS["forward_paths"] > 0


def assert_emulated_generous_gate_exact(n: int, step: float, seed: int, integer: bool) -> None:
    """The emulated gated auction's objective equals SciPy's on a generous-gate instance (costs x 10 rounded
    to integers when ``integer``)."""
    rows, cols, cost, shape, un = generous_gate_instance(n, step, seed=seed)
    if integer:
        cost, un = np.round(cost * 10), float(np.round(un * 10))
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got_r, got_c = auction.solve_gated(*shape, rows, cols, cost, row_un, col_un, emulate=True)
    ref_r, ref_c = _scipy.solve_gated(*shape, rows, cols, cost, row_un, col_un)
    np.testing.assert_allclose(gated_objective(rows, cols, got_r, got_c, cost, row_un, col_un),
                               gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un), rtol=1e-12)


@pytest.mark.parametrize("step", [0.3, 0.5])
def test_emulated_idle_phases_are_skipped_and_stay_exact(step):
    # a phase that releases no row measures how far the rows are from their best options; the phases whose
    # eps is at least that are skipped (float costs: most of the schedule's tail)
    assert_emulated_generous_gate_exact(1500, step, 5, integer=False)
    stats = gated_auction.LAST_STATS
    assert stats["skipped_phases"] > 0
    eps_run, released = [ph[0] for ph in stats["per_phase"]], [ph[1] for ph in stats["per_phase"]]
    assert eps_run[-1] == 1 or released[-1] == 0  # the schedule ran to its end, or stopped after an idle phase


@pytest.mark.parametrize("gu_rounds, gu_cap, reverse", [(0, 0, False), (1, 0, True), (8, 0, False), (8, 16, True),
                                                        (32, 1, True)])
@pytest.mark.parametrize("step", [0.5, 0.7])
@pytest.mark.parametrize("integer", [False, True])
def test_emulated_global_price_updates_match_scipy(step, gu_rounds, gu_cap, reverse, integer, monkeypatch):
    # the global price updates (GU_ROUNDS; capped or not; forward stages or both): exact
    use_settings(monkeypatch, GU_ROUNDS=gu_rounds, GU_CAP=gu_cap, GU_REVERSE=reverse, FIRST_TRY_ROUNDS=0)
    assert_emulated_generous_gate_exact(300, step, int(step * 10) + 7 * integer, integer)
    assert (gated_auction.LAST_STATS["global_updates"] > 0) == (gu_rounds > 0)


@pytest.mark.parametrize("gu_grid, gu_rounds", [(1, 0), (4, 0), (2, 8)])
@pytest.mark.parametrize("step", [0.5, 0.7])
@pytest.mark.parametrize("integer", [False, True])
def test_emulated_grid_round_updates_match_scipy(step, gu_grid, gu_rounds, integer, monkeypatch):
    # the updates during the grid rounds (GU_GRID_ROUNDS; SMALL lowered so that the stages run grid rounds)
    use_settings(monkeypatch, GU_GRID_ROUNDS=gu_grid, GU_ROUNDS=gu_rounds, SMALL=4, FIRST_TRY_ROUNDS=0)
    assert_emulated_generous_gate_exact(300, step, int(step * 10) + 7 * integer + gu_grid, integer)
    assert gated_auction.LAST_STATS["global_updates"] > 0


@settings(max_examples=150, deadline=None)
@given(sparse_graphs(max_size=8), st.booleans(), st.sampled_from([1, 3]), st.sampled_from([0, 1, 16]),
       st.booleans(), st.sampled_from([0, 1, 2]))
def test_emulated_global_updates_on_random_gated_problems(graph, integer, gu_rounds, gu_cap, reverse, gu_grid):
    # forbidden entries (missing edges), rectangular shapes, integer and float costs, per-row no-link costs
    mask, weights = graph
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return
    n, m = mask.shape
    rng = np.random.default_rng(rows.size * 7919 + n * 31 + m)
    cost = weights[rows, cols] + 6.0
    row_un, col_un = rng.random(n) * 8, rng.random(m) * 8
    if integer:
        cost, row_un, col_un = np.round(cost), np.round(row_un), np.round(col_un)
    names = ("GU_ROUNDS", "GU_CAP", "GU_REVERSE", "FIRST_TRY_ROUNDS", "SMALL", "GU_GRID_ROUNDS")
    saved = [getattr(gated_auction, name) for name in names]
    try:
        for name, value in zip(names, (gu_rounds, gu_cap, reverse, 0, 2, gu_grid)):
            setattr(gated_auction, name, value)
        got_r, got_c = auction.solve_gated(n, m, rows, cols, cost, row_un, col_un, emulate=True)
    finally:
        for name, value in zip(names, saved):
            setattr(gated_auction, name, value)
    ref_r, ref_c = _scipy.solve_gated(n, m, rows, cols, cost, row_un, col_un)
    np.testing.assert_allclose(gated_objective(rows, cols, got_r, got_c, cost, row_un, col_un),
                               gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un),
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("forward", [True, False])
def test_emulated_global_update_keeps_eps_cs(forward):
    # after a phase at the second eps, one global update: every assigned row still within eps of its best
    # option, unowned columns keep their prices, and prices only rise (forward) / fall and stay >= 0 (reverse)
    rows, cols, cost, shape, un = generous_gate_instance(300, 0.5, seed=11)
    n, m = shape
    mapping, max_cost, _ = auction._integer_map(np, np.concatenate([cost - 2 * un, np.zeros(1)]), n + m)
    priv = np.full(n, int(mapping(np.zeros(1))[0]), dtype=np.int64)
    edge = mapping(cost - 2 * un)
    prob = gated_auction._layout(np, n, m, rows, cols, edge, priv, single_gap=max_cost + 1)
    ws = gated_auction._Workspace(np, n, m)
    kern = gated_auction._Emulated()
    eps = gated_auction.eps_schedule(max_cost)[1]
    kern.phase(prob, ws, 1, True, 50, tail=False, finish=0)
    kern.phase(prob, ws, eps, False, 10**6, tail=True, finish=0)
    before = ws.price.copy()
    free = ws.owner < 0
    gated_auction.global_update(prob, ws, forward=forward)
    assert (ws.price[free] == before[free]).all() and (ws.price != before).any()
    assert (ws.price >= before).all() if forward else ((ws.price <= before).all() and (ws.price >= 0).all())
    for i in range(n):
        a = int(ws.assigned[i])
        if a == -1:
            continue
        best = kern._row_best(prob, ws.price, i)[0]
        assert kern._own(prob, ws, i) <= best + eps


@settings(max_examples=150, deadline=None)
@given(sparse_graphs(max_size=7), st.booleans())
def test_emulated_full_matching_matches_scipy(graph, integer):
    mask, weights = graph
    if integer:
        weights = np.round(weights * 3)
    rows, cols = np.nonzero(mask)
    n, m = mask.shape
    if n > m or rows.size == 0:
        return
    biadjacency = sp.csr_array((weights[rows, cols] + 0.0, (rows, cols)), shape=(n, m))
    col = auction.solve_sparse(biadjacency.indptr, biadjacency.indices, biadjacency.data, (n, m), emulate=True)
    dense = np.where(mask, weights, np.inf)
    try:
        expected = dense[scipy.optimize.linear_sum_assignment(dense)].sum()
    except ValueError:
        assert (col < 0).all()
        return
    assert sorted(set(col.tolist())) == sorted(col.tolist()) and (col >= 0).all()
    np.testing.assert_allclose(dense[np.arange(n), col].sum(), expected, rtol=1e-9, atol=1e-9)


def test_emulated_driver_dense_and_batched_rounds(monkeypatch):
    monkeypatch.setattr(auction, "TAIL_MIN_ROWS", 0)
    monkeypatch.setattr(auction, "TAIL_WORK", 0)  # every round through the multi-block path
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, m = sorted(rng.integers(1, 9, 2))
        cost = rng.integers(0, 10, (n, m)).astype(float)
        cost[rng.random((n, m)) < 0.3] = np.inf
        col = dense_auction.solve_dense(cost, emulate=True)
        try:
            expected = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
        except ValueError:
            assert (col < 0).all()
            continue
        assert cost[np.arange(n), col].sum() == expected


def test_eps_schedule():
    assert auction.eps_schedule(1000, alpha=8) == [125, 15, 1]
    assert auction.eps_schedule(5) == [1]
    assert auction.eps_schedule(10**6, stop_eps=1000)[-1] == 1000


def test_registration():
    solver = lap._registry._SOLVERS["auction"]
    assert solver.gpu and solver.exact
    assert solver.dense and solver.sparse and solver.gated
    assert solver.priority("gated") > solver.priority("dense")
    assert "auction" in lap.available_solvers("gated")


# ---------------------------------------------------------------------- GPU --

@pytest.mark.gpu
@settings(max_examples=400, deadline=None)
@given(cost_matrices(), st.booleans())
def test_dense_matches_scipy(cost, maximize):
    if maximize:
        cost = np.where(np.isinf(cost), -np.inf, cost)
    try:
        expected = scipy.optimize.linear_sum_assignment(cost, maximize=maximize)
    except ValueError:
        with pytest.raises(ValueError, match="infeasible"):
            lap.linear_sum_assignment(cost, maximize, solver="auction")
        return
    rows, cols = lap.linear_sum_assignment(cost, maximize, solver="auction")
    assert len(rows) == min(cost.shape) and len(np.unique(cols)) == len(cols)
    got, ref = cost[rows, cols].sum(), cost[expected].sum()
    if np.all(cost[np.isfinite(cost)] == np.round(cost[np.isfinite(cost)])):
        assert got == ref
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (5, 1), (2, 2), (64, 64), (50, 80), (80, 50), (300, 300)])
@pytest.mark.parametrize("kind", ["float", "int", "geometric"])
def test_dense_larger(shape, kind, rng):
    if kind == "float":
        cost = rng.random(shape)
    elif kind == "int":
        cost = rng.integers(0, 100, shape).astype(float)
    else:
        a, b = rng.random((shape[0], 2)), rng.random((shape[1], 2))
        cost = np.linalg.norm(a[:, None] - b[None], axis=2)
    rows, cols = lap.linear_sum_assignment(cost, solver="auction")
    expected = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    np.testing.assert_allclose(cost[rows, cols].sum(), expected, rtol=1e-9)
    if kind == "int":
        assert cost[rows, cols].sum() == expected


@pytest.mark.gpu
@pytest.mark.parametrize("finish, warm", [("sap", False), ("tree", False), (None, False), ("sap", True),
                                          ("tree", True), ("classical", True),
                                          ("auto", True)])
@pytest.mark.parametrize("phase_stop", [0.0, 0.01, 0.3])
def test_dense_exact_finish_settings(finish, warm, phase_stop, monkeypatch):
    """Every way a dense auction can start (zero prices, or warm from the Hungarian's reduction) and end
    (the Hungarian finish after truncated phases, or the auction alone) equals SciPy on 150 random
    instances per setting: square and rectangular, forbidden entries, ties."""
    monkeypatch.setattr(dense_auction, "DENSE_FINISH", finish)
    monkeypatch.setattr(dense_auction, "DENSE_WARM_START", warm)
    monkeypatch.setattr(dense_auction, "DENSE_PHASE_STOP", phase_stop)
    monkeypatch.setattr(dense_auction, "DENSE_PHASE_STOP_MIN", 0 if phase_stop == 0 else 8)
    rng = np.random.default_rng([["sap", "tree", None, "classical", "auto"].index(finish), int(phase_stop * 100), warm])
    kinds = ("int_small", "int_n", "int_10n", "float", "geometric", "negative", "wide", "ties", "inf", "inf_int")
    for trial in range(150):
        n = int(rng.integers(1, 160))
        m = n if trial % 3 else int(rng.integers(1, 160))
        cost = random_costs(rng, n, m, kinds[trial % len(kinds)])
        try:
            expected = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
        except ValueError:
            with pytest.raises(ValueError, match="infeasible"):
                lap.linear_sum_assignment(cost, solver="auction")
            continue
        rows, cols = lap.linear_sum_assignment(cost, solver="auction")
        assert len(rows) == min(n, m) and len(np.unique(cols)) == len(cols)
        got = cost[rows, cols].sum()
        finite = cost[np.isfinite(cost)]
        if np.all(finite == np.round(finite)):
            assert got == expected, (trial, n, m)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int_small", "int_n", "float", "geometric"])
def test_dense_exact_finish_large(kind):
    """n = 2000: the truncated auction hands over; the objective equals SciPy's; the stats add up."""
    rng = np.random.default_rng(7)
    cost = random_costs(rng, 2000, 2000, kind)
    stats: dict = {}
    import cupy

    col = dense_auction.dense_with_exact_finish(cupy.asarray(cost), stats=stats).get()
    assert sorted(col.tolist()) == list(range(2000))
    expected = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
    np.testing.assert_allclose(cost[np.arange(2000), col].sum(), expected, rtol=1e-12)
    assert stats["form"] == "dense+finish" and stats["phases"] >= 1 and 0 <= stats["kept"] <= 2000


@pytest.mark.gpu
def test_dense_cupy_in_cupy_out_and_ties():
    import cupy

    cost = cupy.full((256, 256), 7.0)  # every assignment optimal: a price-war stress test
    rows, cols = lap.linear_sum_assignment(cost, solver="auction")
    assert isinstance(rows, cupy.ndarray) and len(cupy.unique(cols)) == 256


@pytest.mark.gpu
@settings(max_examples=300, deadline=None)
@given(sparse_graphs(max_size=9), st.booleans())
def test_sparse_matches_scipy(graph, maximize):
    mask, weights = graph
    dense = np.where(mask, weights, -np.inf if maximize else np.inf)
    biadjacency = sp.csr_array((weights[mask], np.nonzero(mask)), shape=mask.shape)
    try:
        expected = scipy.optimize.linear_sum_assignment(dense, maximize=maximize)
    except ValueError:
        with pytest.raises(ValueError, match="no full matching"):
            lap.min_weight_full_bipartite_matching(biadjacency, maximize, solver="auction")
        return
    rows, cols = lap.min_weight_full_bipartite_matching(biadjacency, maximize, solver="auction")
    assert mask[rows, cols].all()
    np.testing.assert_allclose(weights[rows, cols].sum(), weights[expected].sum(), rtol=1e-9, atol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [200, 3000, 15000])
def test_sparse_large_vs_scipy_sparse(n, rng):
    """Against scipy.sparse.csgraph.min_weight_full_bipartite_matching, up to 30k nodes."""
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    m = n + n // 10
    rows = np.repeat(np.arange(n), 6)
    cols = (rows * m // n + rng.integers(-8, 9, rows.size)) % m
    graph = sp.csr_array((rng.random(rows.size) + 0.5, (rows, cols)), shape=(n, m))
    graph.sum_duplicates()
    try:
        ref_r, ref_c = min_weight_full_bipartite_matching(graph)
    except ValueError:
        with pytest.raises(ValueError):
            lap.min_weight_full_bipartite_matching(graph, solver="auction")
        return
    got_r, got_c = lap.min_weight_full_bipartite_matching(graph, solver="auction")
    dense_get = graph.tocsr()
    np.testing.assert_allclose(dense_get[got_r, got_c].sum(), dense_get[ref_r, ref_c].sum(), rtol=1e-9)


@pytest.mark.gpu
def test_sparse_infeasible_and_rectangular():
    graph = sp.csr_array((np.ones(3), ([0, 1, 2], [0, 0, 0])), shape=(3, 4))
    with pytest.raises(ValueError, match="no full matching"):
        lap.min_weight_full_bipartite_matching(graph, solver="auction")
    graph = sp.csr_array((np.array([1.0, 2.0, 0.0]), ([0, 0, 1], [0, 2, 2])), shape=(2, 3))
    rows, cols = lap.min_weight_full_bipartite_matching(graph, solver="auction")
    assert cols.tolist() == [0, 2]
    rows, cols = lap.min_weight_full_bipartite_matching(graph.T, solver="auction")  # 3 x 2
    assert sorted(zip(rows.tolist(), cols.tolist())) == [(0, 0), (2, 1)]


@pytest.mark.gpu
@settings(max_examples=400, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**32 - 1), st.sampled_from(["float", "int", "tie"]))
def test_gated_matches_scipy(n_rows, n_cols, seed, kind):
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(rng.random((n_rows, n_cols)) < 0.5)
    if kind == "int":
        cost = rng.integers(0, 10, rows.size).astype(float)
        row_un, col_un = rng.integers(0, 8, n_rows).astype(float), rng.integers(0, 8, n_cols).astype(float)
    elif kind == "tie":
        cost, row_un, col_un = np.ones(rows.size), np.full(n_rows, 1.0), np.full(n_cols, 1.0)
    else:
        cost = rng.random(rows.size) * 4
        row_un, col_un = rng.random(n_rows) * 2, rng.random(n_cols) * 2
    got, ref = check_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un)
    if kind == "float":
        np.testing.assert_allclose(got, ref, rtol=1e-9)
    else:
        assert got == ref


@pytest.mark.gpu
def test_gated_thousand_small_instances():
    rng = np.random.default_rng(99)
    for _ in range(1000):
        n_rows, n_cols = rng.integers(1, 30, 2)
        rows, cols = np.nonzero(rng.random((n_rows, n_cols)) < rng.choice([0.05, 0.15, 0.4]))
        cost = rng.integers(0, 50, rows.size).astype(float)
        row_un = np.full(n_rows, float(rng.integers(10, 60)))
        got, ref = check_gated(rows, cols, cost, (n_rows, n_cols), row_un, row_un[:1].repeat(n_cols))
        assert got == ref


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 10000, 30000])
@pytest.mark.parametrize("step", [0.1, 0.3, 0.5, 0.7])
def test_gated_geometric_3d(n, step):
    rows, cols, cost, shape, un = geometric_gated(n, step, seed=n + int(step * 10))
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got, ref = check_gated(rows, cols, cost, shape, row_un, col_un)
    np.testing.assert_allclose(got, ref, rtol=1e-9)


def assert_generous_gate_exact(step: float, seed: int, integer: bool) -> None:
    """The gated auction's objective equals SciPy's on a 10k-node generous-gate instance (costs x 1000 rounded
    to integers when ``integer``)."""
    rows, cols, cost, shape, un = generous_gate_instance(10000, step, seed=seed)
    if integer:
        cost, un = np.round(cost * 1000), float(np.round(un * 1000))
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got, ref = check_gated(rows, cols, cost, shape, row_un, col_un)
    if integer:
        assert got == ref
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("gs_rows, small, threads", [(0, 64, 256), (4, 64, 256), (64, 64, 256), (4, 0, 256),
                                                     (4, 100000, 256), (4, 64, 1024), (4, 256, 1024)])
@pytest.mark.parametrize("integer", [False, True])
def test_gated_tail_settings(gs_rows, small, threads, integer, monkeypatch):
    use_settings(monkeypatch, GS_ROWS=gs_rows, SMALL=small, THREADS=threads)
    assert_generous_gate_exact(0.5, 11, integer)


@pytest.mark.gpu
@pytest.mark.parametrize("finish, small, early_stop", [(0, 256, True), (4, 0, False), (64, 256, True),
                                                       (1024, 64, False), (256, 1024, False)])
@pytest.mark.parametrize("step", [0.5])
@pytest.mark.parametrize("integer", [False, True])
def test_gated_finisher_settings(finish, small, early_stop, step, integer, monkeypatch):
    use_settings(monkeypatch, EARLY_STOP=early_stop, FINISH_ROWS=finish, SMALL=small)
    assert_generous_gate_exact(step, int(step * 10) + integer, integer)


@pytest.mark.gpu
@pytest.mark.parametrize("gu_rounds, gu_cap, small, reverse", [(1, 0, 256, True), (8, 0, 64, False),
                                                               (32, 16, 256, True), (8, 1, 1024, True),
                                                               (128, 256, 0, False), (10**6, 16, 256, True)])
@pytest.mark.parametrize("step", [0.3, 0.5])
@pytest.mark.parametrize("integer", [False, True])
def test_gated_global_update_settings(gu_rounds, gu_cap, small, reverse, step, integer, monkeypatch):
    # the global price updates (gated_auction.cu, global_update), capped and not, forward stages or both
    use_settings(monkeypatch, GU_ROUNDS=gu_rounds, GU_CAP=gu_cap, GU_REVERSE=reverse, SMALL=small)
    assert_generous_gate_exact(step, int(step * 10) + integer, integer)
    if step == 0.5 and small > 0:  # (with SMALL = 0 the grid rounds run to the end: no tail, no update)
        assert gated_auction.LAST_STATS["global_updates"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("gu_hops, gu_cap, gu_grid", [(2, 64, 256), (16, 64, 256), (64, 0, 1), (1000, 16, 4)])
@pytest.mark.parametrize("step", [0.3, 0.5])
@pytest.mark.parametrize("integer", [False, True])
def test_gated_update_chains(gu_hops, gu_cap, gu_grid, step, integer, monkeypatch):
    # the updates' chains (GU_HOPS: a warp carries a label on along a chain within one round)
    use_settings(monkeypatch, GU_HOPS=gu_hops, GU_CAP=gu_cap, GU_GRID_ROUNDS=gu_grid)
    assert_generous_gate_exact(step, int(step * 10) + integer + gu_hops, integer)
    assert gated_auction.LAST_STATS["global_updates"] > 0 or step < 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("gu_grid, small", [(1, 256), (4, 64), (256, 256), (16, 1024), (1, 0)])
@pytest.mark.parametrize("step", [0.3, 0.5])
@pytest.mark.parametrize("integer", [False, True])
def test_gated_grid_round_updates(gu_grid, small, step, integer, monkeypatch):
    # the updates in the grid rounds (GU_GRID_ROUNDS)
    use_settings(monkeypatch, GU_GRID_ROUNDS=gu_grid, SMALL=small)
    assert_generous_gate_exact(step, int(step * 10) + integer + gu_grid, integer)
    assert gated_auction.LAST_STATS["global_updates"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("instance", ["war of ties", "integer generous gate"])
def test_gated_auction_gives_the_same_assignment_on_every_run(instance):
    # tied costs have several optima: equal offers go to the lowest index, so every run picks the same one
    if instance == "war of ties":
        rows, cols, cost, row_un, col_un = war_of_ties(40, 30)
    else:
        rows, cols, cost, shape, un = generous_gate_instance(10000, 0.5, seed=3)
        cost, un = np.round(cost * 2), float(np.round(un * 2))
        row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    shape = (len(row_un), len(col_un))
    first = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver="auction")
    for _ in range(4):
        again = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver="auction")
        np.testing.assert_array_equal(again[0], first[0])
        np.testing.assert_array_equal(again[1], first[1])
    got, ref = check_gated(rows, cols, cost, shape, row_un, col_un)
    assert got == ref


@pytest.mark.gpu
@pytest.mark.parametrize("step", [0.1, 0.3, 0.4, 0.5, 0.7])
@pytest.mark.parametrize("first_try_rounds", [0, 300])
def test_generous_gates_exact(step, first_try_rounds, monkeypatch):
    use_settings(monkeypatch, FIRST_TRY_ROUNDS=first_try_rounds)
    rows, cols, cost, shape, un = generous_gate_instance(10000, step, seed=int(step * 100))
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got, ref = check_gated(rows, cols, cost, shape, row_un, col_un)
    np.testing.assert_allclose(got, ref, rtol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("step", [0.1, 0.3, 0.5])
def test_full_matching_family_matches_scipy(step):
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    rows, cols, cost, shape = lap_instances.full_matching_instance(10000, step, seed=int(step * 100))
    graph = sp.csr_array((cost + 1.0, (rows, cols)), shape=shape)  # + 1: SciPy drops stored zeros
    got_r, got_c = lap.min_weight_full_bipartite_matching(graph, solver="auction")
    ref_r, ref_c = min_weight_full_bipartite_matching(graph)
    assert len(got_r) == min(shape) and len(np.unique(got_c)) == len(got_c)
    np.testing.assert_allclose(graph[got_r, got_c].sum(), graph[ref_r, ref_c].sum(), rtol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("step", [0.3, 0.5, 0.8])
def test_gated_asymmetric_form_used_without_components(step, monkeypatch):
    from tracker.lap import components_gpu

    monkeypatch.setattr(components_gpu, "ENABLED", False)
    rows, cols, cost, shape, un = geometric_gated(20000, step, seed=5)
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got, ref = check_gated(rows, cols, cost, shape, row_un, col_un)
    assert auction.LAST_STATS["form"] == "asymmetric"
    np.testing.assert_allclose(got, ref, rtol=1e-9)


@pytest.mark.gpu
def test_gated_war_of_ties_exact():
    rows, cols, cost, row_un, col_un = war_of_ties(40, 30)
    got, ref = check_gated(rows, cols, cost, (40, 30), row_un, col_un)
    assert auction.LAST_STATS["form"] == "asymmetric"
    assert got == ref


@pytest.mark.gpu
def test_gated_integer_costs_exact():
    rows, cols, cost, shape, un = geometric_gated(20000, 0.5, seed=3)
    cost = np.round(cost * 1000)
    un = float(np.round(un * 1000))
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    got, ref = check_gated(rows, cols, cost, shape, row_un, col_un)
    assert got == ref


@pytest.mark.gpu
def test_gated_cupy_inputs():
    import cupy

    rows, cols, cost, shape, un = geometric_gated(5000, 0.3, seed=1)
    r, c = lap.solve_gated(cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(cost), shape, un, solver="auction")
    row_un, col_un = np.full(shape[0], un), np.full(shape[1], un)
    ref_r, ref_c = _scipy.solve_gated(shape[0], shape[1], rows, cols, cost, row_un, col_un)
    np.testing.assert_allclose(
        gated_objective(rows, cols, r, c, cost, row_un, col_un),
        gated_objective(rows, cols, ref_r, ref_c, cost, row_un, col_un), rtol=1e-9)


@pytest.mark.gpu
def test_auto_picks_auction_for_gated():
    assert lap.get_solver("auto", "gated").name in ("auction",) or lap.get_solver("auto", "gated").priority("gated") >= 100


def test_refine_dense_is_eps_optimal_from_any_start_and_prices(rng):
    # One auction phase from an arbitrary assignment and arbitrary column duals: within n * eps of the optimum.
    for trial in range(60):
        n = int(rng.integers(2, 30))
        a, b = rng.random((n, 2)) * 1000, rng.random((n, 2)) * 1000
        cost = np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))
        if trial % 3 == 0:
            cost = np.floor(cost)
        optimum = cost[scipy.optimize.linear_sum_assignment(cost)].sum()
        start = rng.permutation(n)
        eps_cost = (0.005, 0.05, 0.0)[trial % 3] * cost[np.arange(n), start].sum() / n
        got = dense_auction.refine_dense(cost, start, rng.random(n) * 0.3, eps_cost, emulate=True)
        assert sorted(got.tolist()) == list(range(n))
        resolution = (cost.max() - cost.min()) / (1 << auction.COST_BITS)  # eps_cost 0: one integer unit
        assert cost[np.arange(n), got].sum() <= optimum + n * max(eps_cost, resolution) * (1 + 1e-6) + 1e-9 * optimum


@pytest.mark.gpu
@pytest.mark.parametrize("size, n_edges", [(1, 1), (7, 40), (1000, 5000), (100_000, 30_000)])
def test_gated_layout_matches_numpy(size, n_edges):
    # the CSR / CSC layout on the GPU (32-bit radix sort, ga_offsets) equals NumPy's, empty rows included
    import cupy

    rng = np.random.default_rng(size + n_edges)
    key = rng.integers(0, size, n_edges)
    other = rng.integers(0, 50, n_edges)
    cost = rng.integers(0, 1 << 40, n_edges)
    want = gated_auction._grouped(np, key, size, other, cost)
    got = gated_auction._grouped(cupy, cupy.asarray(key), size, cupy.asarray(other), cupy.asarray(cost))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, cupy.asnumpy(g))
