"""tracker.lap front-end and the SciPy backend, against SciPy itself and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lap_instances import random_costs, sparse_graphs
from tracker import lap


def _scipy_or_error(cost, maximize=False):
    try:
        return scipy.optimize.linear_sum_assignment(cost, maximize=maximize), None
    except ValueError as error:
        return None, str(error)


@st.composite
def cost_matrices(draw):
    n = draw(st.integers(0, 7))
    m = draw(st.integers(0, 7))
    kind = draw(st.sampled_from(["int", "float", "ties", "negative", "huge"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cost = random_costs(rng, n, m, kind)
    forbidden = rng.random((n, m)) < draw(st.sampled_from([0.0, 0.2, 0.6]))
    cost[forbidden] = np.inf
    return cost


@settings(max_examples=400, deadline=None)
@given(cost_matrices(), st.booleans())
def test_dense_matches_scipy(cost, maximize):
    if maximize:
        cost = np.where(np.isinf(cost), -np.inf, cost)
    expected, error = _scipy_or_error(cost, maximize)
    if error is not None:
        with pytest.raises(ValueError, match="infeasible"):
            lap.linear_sum_assignment(cost, maximize, solver="scipy")
        return
    rows, cols = lap.linear_sum_assignment(cost, maximize, solver="scipy")
    assert np.array_equal(rows, np.sort(rows))
    assert len(rows) == min(cost.shape)
    assert len(np.unique(cols)) == len(cols)
    np.testing.assert_allclose(cost[rows, cols].sum(), cost[expected].sum(), rtol=1e-9)


def test_dense_rejects_bad_input():
    with pytest.raises(ValueError, match="invalid numeric"):
        lap.linear_sum_assignment(np.array([[np.nan, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="invalid numeric"):
        lap.linear_sum_assignment(np.array([[-np.inf, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="invalid numeric"):
        lap.linear_sum_assignment(np.array([[np.inf, 1.0], [1.0, 0.0]]), maximize=True)
    with pytest.raises(ValueError, match="2-D"):
        lap.linear_sum_assignment(np.ones(3))
    with pytest.raises(ValueError, match="infeasible"):
        lap.linear_sum_assignment(np.array([[np.inf, np.inf], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="unknown solver"):
        lap.linear_sum_assignment(np.ones((2, 2)), solver="nope")


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (1, 1), (1, 5), (5, 1)])
def test_dense_degenerate_shapes(shape, rng):
    cost = rng.random(shape)
    rows, cols = lap.linear_sum_assignment(cost, solver="scipy")
    expected = scipy.optimize.linear_sum_assignment(cost)
    assert np.array_equal(rows, expected[0]) and np.array_equal(cols, expected[1])


def test_dense_integer_and_bool_inputs():
    cost = np.array([[4, 1, 3], [2, 0, 5], [3, 2, 2]], dtype=np.int64)
    rows, cols = lap.linear_sum_assignment(cost, solver="scipy")
    assert cost[rows, cols].sum() == 5
    rows, cols = lap.linear_sum_assignment(np.eye(3, dtype=bool), maximize=True, solver="scipy")
    assert np.array_equal(cols, [0, 1, 2])


@settings(max_examples=300, deadline=None)
@given(sparse_graphs(), st.booleans())
def test_sparse_matches_dense_reference(graph, maximize):
    mask, weights = graph
    dense = np.where(mask, weights, -np.inf if maximize else np.inf)
    expected, error = _scipy_or_error(dense, maximize)
    biadjacency = sp.csr_array((weights[mask], np.nonzero(mask)), shape=mask.shape)
    if error is not None:
        with pytest.raises(ValueError, match="no full matching"):
            lap.min_weight_full_bipartite_matching(biadjacency, maximize, solver="scipy")
        return
    rows, cols = lap.min_weight_full_bipartite_matching(biadjacency, maximize, solver="scipy")
    assert mask[rows, cols].all()
    np.testing.assert_allclose(weights[rows, cols].sum(), weights[expected].sum(), rtol=1e-9, atol=1e-9)


def test_sparse_zero_weights_are_edges():
    graph = sp.csr_array((np.zeros(2), (np.array([0, 1]), np.array([1, 0]))), shape=(2, 2))
    rows, cols = lap.min_weight_full_bipartite_matching(graph, solver="scipy")
    assert np.array_equal(cols, [1, 0])


def brute_force_gated(n_rows, n_cols, edges, row_un, col_un):
    """Best objective over every one-to-one subset of edges (tiny problems only)."""
    best = row_un.sum() + col_un.sum()
    for k in range(1, min(n_rows, n_cols) + 1):
        for subset in itertools.combinations(edges, k):
            rs = [e[0] for e in subset]
            cs = [e[1] for e in subset]
            if len(set(rs)) < k or len(set(cs)) < k:
                continue
            total = sum(e[2] for e in subset) + row_un.sum() - row_un[rs].sum() + col_un.sum() - col_un[cs].sum()
            best = min(best, total)
    return best


def gated_objective(rows, cols, cost_of, row_un, col_un):
    total = sum(cost_of[(r, c)] for r, c in zip(rows, cols))
    return total + row_un.sum() - row_un[rows].sum() + col_un.sum() - col_un[cols].sum()


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 2**32 - 1), st.booleans())
def test_gated_is_optimal(n_rows, n_cols, seed, per_node_costs):
    rng = np.random.default_rng(seed)
    mask = rng.random((n_rows, n_cols)) < 0.6
    rows, cols = np.nonzero(mask)
    cost = rng.random(len(rows)) * 4
    if per_node_costs:
        row_un, col_un = rng.random(n_rows) * 2, rng.random(n_cols) * 2
    else:
        row_un = np.full(n_rows, 1.0)
        col_un = np.full(n_cols, 1.0)
    chosen_r, chosen_c = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver="scipy")
    assert len(set(chosen_r)) == len(chosen_r) and len(set(chosen_c)) == len(chosen_c)
    cost_of = {(r, c): w for r, c, w in zip(rows, cols, cost)}
    assert all((r, c) in cost_of for r, c in zip(chosen_r, chosen_c))
    edges = list(zip(rows, cols, cost))
    got = gated_objective(chosen_r, chosen_c, cost_of, row_un, col_un)
    np.testing.assert_allclose(got, brute_force_gated(n_rows, n_cols, edges, row_un, col_un), rtol=1e-9)


def test_gated_large_component_uses_sparse_path(rng, monkeypatch):
    from tracker.lap import _scipy

    monkeypatch.setattr(_scipy, "DENSE_COMPONENT_MAX_ENTRIES", 4)
    n = 40
    dense = rng.random((n, n)) * 3
    rows, cols = np.nonzero(dense < 2)
    cost = dense[rows, cols]
    r1, c1 = lap.solve_gated(rows, cols, cost, (n, n), 1.2, solver="scipy")
    monkeypatch.setattr(_scipy, "DENSE_COMPONENT_MAX_ENTRIES", 1 << 20)
    r2, c2 = lap.solve_gated(rows, cols, cost, (n, n), 1.2, solver="scipy")
    cost_of = {(r, c): w for r, c, w in zip(rows, cols, cost)}
    un = np.full(n, 1.2)
    np.testing.assert_allclose(
        gated_objective(r1, c1, cost_of, un, un), gated_objective(r2, c2, cost_of, un, un), rtol=1e-12
    )


def test_gated_validation():
    with pytest.raises(ValueError, match="finite"):
        lap.solve_gated([0], [0], [np.nan], (1, 1), 1.0)
    with pytest.raises(ValueError, match="out of range"):
        lap.solve_gated([0], [3], [1.0], (1, 1), 1.0)
    rows, cols = lap.solve_gated([], [], [], (3, 4), 1.0)
    assert rows.size == 0 and cols.size == 0


@pytest.mark.parametrize("on_gpu", [False, pytest.param(True, marks=pytest.mark.gpu)])
def test_gated_validation_every_case(on_gpu):
    # every bad input gets its one-line error, on the host and on the GPU (one pass of a kernel there), and the
    # "no link" costs as numbers, host arrays and (on the GPU) device arrays
    xp = np
    solver = "scipy"
    if on_gpu:
        cupy = pytest.importorskip("cupy")
        xp, solver = cupy, "auction"
    rows, cols, cost = xp.asarray([0, 1, 1]), xp.asarray([1, 0, 2]), xp.asarray([0.5, 0.2, 0.3])
    bad = {"out of range": [(xp.asarray([0, 2, 1]), cols, cost), (xp.asarray([0, -1, 1]), cols, cost),
                            (rows, xp.asarray([1, 0, 3]), cost), (rows, xp.asarray([1, -5, 2]), cost)],
           "edge costs must be finite": [(rows, cols, xp.asarray([0.5, np.inf, 0.3])),
                                         (rows, cols, xp.asarray([np.nan, 0.2, 0.3]))]}
    for message, cases in bad.items():
        for r, c, w in cases:
            with pytest.raises(ValueError, match=message):
                lap.solve_gated(r, c, w, (2, 3), 1.0, solver=solver)
    bad_no_link = [(np.inf, None), (1.0, np.array([1.0, np.nan, 1.0])), (np.array([1.0, -np.inf]), 1.0)]
    if on_gpu:
        bad_no_link.append((xp.asarray([1.0, np.nan]), 1.0))
    for row_un, col_un in bad_no_link:
        with pytest.raises(ValueError, match="no-link"):
            lap.solve_gated(rows, cols, cost, (2, 3), row_un, col_un, solver=solver)
    want = ([0, 1], [1, 0])
    for row_un, col_un in [(1.0, None), (np.array([1.0, 1.0]), np.full(3, 1.0)), (xp.asarray([1.0, 1.0]), 1.0)]:
        got = lap.solve_gated(rows, cols, cost, (2, 3), row_un, col_un, solver=solver)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_available_solvers_lists_scipy_and_auto():
    names = lap.available_solvers()
    assert names[0] == "auto" and "scipy" in names


@pytest.mark.parametrize("n_rows, asked", [(100, "scipy"), (lap.AUTO_GPU_MIN_GATED_ROWS, "auto")])
def test_auto_keeps_small_gated_numpy_problems_on_the_cpu(monkeypatch, n_rows, asked):
    seen = []
    real = lap.get_solver
    monkeypatch.setattr(lap, "get_solver", lambda name, kind: seen.append(name) or real(name, kind))
    rows = cols = np.arange(n_rows)
    lap.solve_gated(rows, cols, np.ones(n_rows), (n_rows, n_rows), 5.0, solver="auto")
    assert seen == [asked]


@pytest.fixture
def dense_only_solver(monkeypatch):
    """A CPU solver with only a ``dense`` entry point, as the GPU Hungarian solvers have."""
    from tracker.lap import _registry, _scipy

    solver = _registry.Solver("dense-only", "test double", gpu=False, exact=True, dense=_scipy.solve_dense)
    monkeypatch.setitem(_registry._SOLVERS, solver.name, solver)
    return solver.name


@pytest.mark.parametrize("answer, error, message", [
    ([1, 1, 2], RuntimeError, "a column twice"),  # not one-to-one: a solver bug
    ([0, 2, 3], ValueError, "infeasible"),  # column 3 does not exist
    ([-1, -1, -1], ValueError, "infeasible"),  # the backend's own "infeasible"
    ([2, 1, 0], ValueError, "infeasible"),  # row 0 takes its forbidden column 2
])
def test_dense_front_end_checks_the_backends_answer(monkeypatch, answer, error, message):
    from tracker.lap import _registry

    def dense(cost):
        return np.array(answer, dtype=np.int64)

    solver = _registry.Solver("faulty", "test double", gpu=False, exact=True, dense=dense)
    monkeypatch.setitem(_registry._SOLVERS, solver.name, solver)
    cost = np.arange(9.0).reshape(3, 3)
    cost[0, 2] = np.inf
    with pytest.raises(error, match=message):
        lap.linear_sum_assignment(cost, solver="faulty")


def random_gated(rng, n_rows, n_cols, density=0.3):
    rows, cols = np.nonzero(rng.random((n_rows, n_cols)) < density)
    return rows, cols, rng.random(len(rows)) * 4, rng.random(n_rows) * 2, rng.random(n_cols) * 2


def gated_total(rows, cols, cost, row_un, col_un, chosen_r, chosen_c):
    cost_of = {(r, c): w for r, c, w in zip(rows, cols, cost)}
    return gated_objective(chosen_r, chosen_c, cost_of, row_un, col_un)


# The fixture only registers a solver; it need not be reset between examples.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_gated_through_a_dense_only_solver(dense_only_solver, n_rows, n_cols, seed):
    rows, cols, cost, row_un, col_un = random_gated(np.random.default_rng(seed), n_rows, n_cols)
    expected = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver="scipy")
    got = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver=dense_only_solver)
    assert len(set(got[0])) == len(got[0]) and len(set(got[1])) == len(got[1])
    np.testing.assert_allclose(gated_total(rows, cols, cost, row_un, col_un, *got),
                               gated_total(rows, cols, cost, row_un, col_un, *expected), rtol=1e-9)


def test_gated_through_a_dense_only_solver_refuses_huge_matrices(dense_only_solver, monkeypatch):
    monkeypatch.setattr(lap, "DENSE_GATED_MAX_ENTRIES", 100)
    rows, cols, cost, row_un, col_un = random_gated(np.random.default_rng(0), 20, 20)
    with pytest.raises(ValueError, match="use 'auction' or 'scipy'"):
        lap.solve_gated(rows, cols, cost, (20, 20), row_un, col_un, solver=dense_only_solver)
    assert dense_only_solver in lap.available_solvers("gated")


@pytest.mark.gpu
@pytest.mark.parametrize("solver", ["auction", "hungarian-tree", "hungarian-classical", "auto"])
@pytest.mark.parametrize("kind", ["ties", "int", "int_small"])
def test_dense_gpu_solvers_give_the_same_assignment_on_every_run(solver, kind):
    # tied costs have many optima: every kernel settles its races by index (the lowest row wins a column, a tree
    # flips its lowest free column's path, ...), so the same matrix gives the same assignment on every run
    rng = np.random.default_rng(11)
    for n, m in [(300, 300), (200, 260), (1500, 1500)]:
        cost = random_costs(rng, n, m, kind)
        first = lap.linear_sum_assignment(cost, solver=solver)
        for _ in range(4):
            np.testing.assert_array_equal(lap.linear_sum_assignment(cost, solver=solver)[1], first[1])
        assert cost[first].sum() == cost[scipy.optimize.linear_sum_assignment(cost)].sum()


@pytest.mark.gpu
@pytest.mark.parametrize("solver", ["hungarian-tree", "hungarian-classical", "auction"])
def test_gpu_solvers_solve_gated_problems_exactly(solver):
    rng = np.random.default_rng(7)
    for n_rows, n_cols in [(1, 1), (40, 25), (300, 320)]:
        rows, cols, cost, row_un, col_un = random_gated(rng, n_rows, n_cols, density=0.05)
        expected = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver="scipy")
        got = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver=solver)
        np.testing.assert_allclose(gated_total(rows, cols, cost, row_un, col_un, *got),
                                   gated_total(rows, cols, cost, row_un, col_un, *expected), rtol=1e-9)


def test_cuda_sources_inline_their_local_headers():
    from pathlib import Path

    from tracker.lap._cuda import cuda_source

    sources = sorted(Path(lap.__file__).parent.glob("*.cu"))
    assert sources
    for path in sources:
        text = cuda_source(f"lap/{path.name}")
        assert '#include "' not in text and "#pragma once" not in text
    assert "greedy_propose" in cuda_source("lap/hungarian_tree.cu")


# --- Medium components (5..128 rows/columns) ---


def _reduced_reference_objective(n_rows, n_cols, rows, cols, cost, row_un, col_un):
    """Optimal gated objective from one dense SciPy solve of the whole reduced problem."""
    dense = np.full((n_rows, n_cols + n_rows), np.inf)
    dense[rows, cols] = cost - col_un[cols]
    dense[np.arange(n_rows), n_cols + np.arange(n_rows)] = row_un
    r, c = scipy.optimize.linear_sum_assignment(dense)
    return dense[r, c].sum() + col_un.sum()


@st.composite
def medium_gated_problems(draw):
    """Block-diagonal gated problems: 1..50 blocks of 1..16 rows and columns (most of them 5..16)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["float", "int", "ties", "easy"]))
    n_blocks = draw(st.integers(1, 50))
    rows, cols, costs = [], [], []
    n_rows = n_cols = 0
    for _ in range(n_blocks):
        r = int(rng.integers(5, 17)) if rng.random() < 0.85 else int(rng.integers(1, 5))
        c = int(max(1, r + rng.integers(-3, 4)))
        c = min(c, 16)
        mask = rng.random((r, c)) < rng.uniform(0.3, 0.9)
        if kind == "float":
            block = rng.random((r, c)) * 4
        elif kind == "int":
            block = rng.integers(0, 5, (r, c)).astype(float)
        elif kind == "ties":
            block = rng.choice([0.5, 1.0, 1.5], (r, c))
        else:  # one cheap partner per row, most problems certified
            block = 1.0 + rng.random((r, c)) * 3
            k = min(r, c)
            perm = rng.permutation(c)[:k]
            block[np.arange(k), perm] = rng.random(k) * 0.2
            mask[np.arange(k), perm] = True
        br, bc = np.nonzero(mask)
        rows.append(br + n_rows)
        cols.append(bc + n_cols)
        costs.append(block[br, bc])
        n_rows += r
        n_cols += c
    rows, cols, cost = np.concatenate(rows), np.concatenate(cols), np.concatenate(costs)
    if kind in ("int", "ties"):
        row_un = rng.integers(1, 4, n_rows).astype(float)
        col_un = rng.integers(1, 4, n_cols).astype(float)
    else:
        row_un, col_un = 0.5 + rng.random(n_rows) * 2, 0.5 + rng.random(n_cols) * 2
    if draw(st.booleans()):  # shuffle the edge order
        order = rng.permutation(len(rows))
        rows, cols, cost = rows[order], cols[order], cost[order]
    return n_rows, n_cols, rows, cols, cost, row_un, col_un


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(medium_gated_problems())
def test_gated_medium_components_are_optimal(problem):
    n_rows, n_cols, rows, cols, cost, row_un, col_un = problem
    chosen_r, chosen_c = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver="scipy")
    assert len(set(chosen_r.tolist())) == len(chosen_r) and len(set(chosen_c.tolist())) == len(chosen_c)
    cost_of = {(r, c): w for r, c, w in zip(rows.tolist(), cols.tolist(), cost.tolist())}
    assert all((r, c) in cost_of for r, c in zip(chosen_r.tolist(), chosen_c.tolist()))
    got = gated_objective(chosen_r, chosen_c, cost_of, row_un, col_un)
    expected = _reduced_reference_objective(n_rows, n_cols, rows, cols, cost, row_un, col_un)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(medium_gated_problems())
def test_gated_medium_components_match_the_per_component_path(problem):
    from tracker.lap import _scipy

    n_rows, n_cols, rows, cols, cost, row_un, col_un = problem
    new = _scipy.solve_gated(n_rows, n_cols, rows, cols, cost, row_un, col_un)
    old_size = _scipy.MEDIUM_COMPONENT_SIZE
    try:
        _scipy.MEDIUM_COMPONENT_SIZE = _scipy.SMALL_COMPONENT_SIZE  # every medium one by _solve_component
        old = _scipy.solve_gated(n_rows, n_cols, rows, cols, cost, row_un, col_un)
    finally:
        _scipy.MEDIUM_COMPONENT_SIZE = old_size
    cost_of = {(r, c): w for r, c, w in zip(rows.tolist(), cols.tolist(), cost.tolist())}
    np.testing.assert_allclose(gated_objective(*new, cost_of, row_un, col_un),
                               gated_objective(*old, cost_of, row_un, col_un), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("dtype, low, high", [(np.uint8, 0, 7), (np.int32, 0, 100), (np.int32, 0, 70_000),
                                              (np.int64, 0, 2**40), (np.int64, -5, 1), (np.int16, -300, 300),
                                              (np.int64, -2**62, 2**62), (bool, 0, 2), (np.float64, 0, 3)])
def test_stable_argsort_is_numpys_stable_argsort(rng, dtype, low, high):
    from tracker.tables import stable_argsort

    for n in (0, 1, 17, 5000):
        values = rng.integers(low, high, n).astype(dtype)
        np.testing.assert_array_equal(stable_argsort(values), np.argsort(values, kind="stable"))


def _per_component_reference(n_rows, n_cols, rows, cols, cost, row_un, col_un):
    """Chosen edges from one dense SciPy solve per connected component of the useful edges."""
    from scipy.sparse.csgraph import connected_components

    useful = cost < row_un[rows] + col_un[cols]
    rows, cols, cost = rows[useful], cols[useful], cost[useful]
    graph = sp.coo_array((np.ones(rows.size), (rows, n_rows + cols)), shape=(n_rows + n_cols,) * 2)
    _, labels = connected_components(graph, directed=False)
    chosen = np.full(n_rows, -1)
    for label in np.unique(labels[rows]):
        edges = labels[rows] == label
        r, local_r = np.unique(rows[edges], return_inverse=True)
        c, local_c = np.unique(cols[edges], return_inverse=True)
        dense = np.full((len(r), len(c) + len(r)), np.inf)
        dense[local_r, local_c] = cost[edges] - col_un[c][local_c]
        dense[np.arange(len(r)), len(c) + np.arange(len(r))] = row_un[r]
        row_of, col_of = scipy.optimize.linear_sum_assignment(dense)
        linked = col_of < len(c)
        chosen[r[row_of[linked]]] = c[col_of[linked]]
    row_ind = np.flatnonzero(chosen >= 0)
    return row_ind, chosen[row_ind]


@pytest.mark.parametrize("kind", ["float", "ties"])
def test_gated_components_of_every_kind_in_one_problem(rng, kind):
    # Thousands of blocks of 1 to 200 rows (single edges, every small size, medium, dense and sparse large),
    # sparse like linking problems (about 3 candidates per row), rows and columns interleaved between blocks.
    sizes = np.concatenate([rng.integers(1, 5, 2500), rng.integers(5, 17, 300), rng.integers(17, 129, 20),
                            [130, 150, 200]])
    rows, cols, costs = [], [], []
    n_rows = n_cols = 0
    for r in sizes.tolist():
        c = int(max(1, r + rng.integers(-2, 3)))
        mask = rng.random((r, c)) < min(1.0, 3.0 / c)
        mask[np.arange(r), rng.integers(0, c, r)] = True
        br, bc = np.nonzero(mask)
        rows.append(br + n_rows)
        cols.append(bc + n_cols)
        costs.append(rng.random(br.size) * 4 if kind == "float" else rng.choice([0.5, 1.0, 1.5], br.size))
        n_rows += r
        n_cols += c
    row_perm, col_perm = rng.permutation(n_rows), rng.permutation(n_cols)
    rows, cols, cost = row_perm[np.concatenate(rows)], col_perm[np.concatenate(cols)], np.concatenate(costs)
    order = np.lexsort((cols, rows))
    rows, cols, cost = rows[order], cols[order], cost[order]
    row_un = 0.5 + rng.random(n_rows) * 2 if kind == "float" else np.full(n_rows, 1.0)
    col_un = 0.5 + rng.random(n_cols) * 2 if kind == "float" else np.full(n_cols, 1.0)
    chosen = lap.solve_gated(rows, cols, cost, (n_rows, n_cols), row_un, col_un, solver="scipy")
    reference = _per_component_reference(n_rows, n_cols, rows, cols, cost, row_un, col_un)
    if kind == "float":  # (a unique optimum)
        np.testing.assert_array_equal(chosen[0], reference[0])
        np.testing.assert_array_equal(chosen[1], reference[1])
    cost_of = {(r, c): w for r, c, w in zip(rows.tolist(), cols.tolist(), cost.tolist())}
    np.testing.assert_allclose(gated_objective(*chosen, cost_of, row_un, col_un),
                               gated_objective(*reference, cost_of, row_un, col_un), rtol=1e-12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(medium_gated_problems())
def test_certified_components_are_solved_to_their_optimum(problem):
    # The certificate's choice in each component it certifies is that component's optimum (SciPy's, per
    # component); components it leaves are solved, so nothing is lost either way.
    from scipy.sparse.csgraph import connected_components

    from tracker.lap import _scipy

    n_rows, n_cols, rows, cols, cost, row_un, col_un = problem
    useful = cost < row_un[rows] + col_un[cols]
    rows, cols, cost = rows[useful], cols[useful], cost[useful]
    graph = sp.coo_array((np.ones(rows.size), (rows, n_rows + cols)), shape=(n_rows + n_cols,) * 2)
    n_labels, labels = connected_components(graph, directed=False)
    certified, chosen = _scipy._certified_components(n_labels, labels, rows, cols, cost, row_un, col_un)
    edge_label = labels[rows]
    assert not chosen[~certified[edge_label]].any()
    # (A certified component's optimum is unique, even with ties elsewhere.)
    reference_rows, reference_cols = _per_component_reference(n_rows, n_cols, rows, cols, cost, row_un, col_un)
    expected = {(r, c) for r, c in zip(reference_rows.tolist(), reference_cols.tolist()) if certified[labels[r]]}
    assert set(zip(rows[chosen].tolist(), cols[chosen].tolist())) == expected


def test_certificate_leaves_ties_and_clashes_to_the_solver():
    from tracker.lap import _scipy

    # Component 0: rows 0, 1 both cheapest at column 0 (a clash); component 1: row 2 with two columns at the
    # same cost (a tie, from both sides: columns 2 and 3 each have one taker); component 2: an isolated pair.
    rows = np.array([0, 0, 1, 1, 2, 2, 3])
    cols = np.array([0, 1, 0, 1, 2, 3, 4])
    cost = np.array([0.1, 0.5, 0.2, 0.9, 0.3, 0.3, 0.4])
    un = np.ones(5)
    labels = np.array([0, 0, 1, 2, 0, 0, 1, 1, 2])
    certified, chosen = _scipy._certified_components(3, labels, rows, cols, cost, un[:4], un)
    np.testing.assert_array_equal(certified, [False, False, True])
    np.testing.assert_array_equal(np.flatnonzero(chosen), [6])
    # The solver still finds the optimum of the others: 0 -> 1, 1 -> 0 (0.7 < 0.1 + 0.9) and one of the ties.
    chosen_rows, chosen_cols = lap.solve_gated(rows, cols, cost, (4, 5), un[:4], un, solver="scipy")
    assert dict(zip(chosen_rows.tolist(), chosen_cols.tolist())) in (
        {0: 1, 1: 0, 2: 2, 3: 4}, {0: 1, 1: 0, 2: 3, 3: 4})


def test_auto_dense_choice_follows_the_table(rng):
    from tracker.lap import _auto_dense, distinct_row_minima
    from tracker.lap._gpu_common import summarize_dense

    n = 300
    points = rng.random((n, 3)) * 20
    geometric = ((points[:, None] - (points + rng.normal(0, 0.3, points.shape))[None]) ** 2).sum(-1)
    cases = {"hungarian-classical": rng.integers(0, n // 10, (n, n)).astype(float),
             "hungarian-tree": geometric, "auction": rng.random((n, n))}
    for expected, cost in cases.items():
        assert _auto_dense(np, cost, summarize_dense(cost)) == expected
    assert distinct_row_minima(np, np.array([[1.0, 0.0], [2.0, 0.0], [np.inf, np.inf]])) == 1


def test_auto_small_numpy_matrices_take_scipys_choice():
    # SciPy's test suite checks which of equal-cost assignments comes back on tiny matrices
    rows, cols = lap.linear_sum_assignment(np.ones((8, 8)))
    assert np.array_equal(cols, np.arange(8))
