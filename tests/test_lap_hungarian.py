"""GPU Hungarian solvers ("hungarian-tree", "hungarian-classical") against scipy, and their CPU helpers.

GPU tests are marked ``gpu`` and skip without CuPy and a GPU (see conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracker.lap as lap
from lap_instances import random_costs
from tracker.backend import gpu_available
from tracker.lap import _gpu_common
from tracker.lap._registry import get_solver

GPU_SOLVERS = ["hungarian-tree", "hungarian-classical"]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def reference(cost, maximize=False):
    """(objective, None) from scipy, or (None, ValueError) when scipy raises."""
    try:
        r, c = scipy.optimize.linear_sum_assignment(cost, maximize=maximize)
    except ValueError as error:
        return None, error
    return float(cost[r, c].sum()), None


def check_against_scipy(cost, solver, maximize=False):
    cost = np.asarray(cost, dtype=np.float64)
    ref, err = reference(cost, maximize)
    if err is not None:
        with pytest.raises(ValueError):
            lap.linear_sum_assignment(cost, maximize, solver=solver)
        return
    rows, cols = lap.linear_sum_assignment(cost, maximize, solver=solver)
    k = min(cost.shape)
    assert rows.shape == cols.shape == (k,)
    assert rows.dtype == cols.dtype == np.int64
    assert np.all(np.diff(rows) > 0) if k > 1 else True
    assert len(np.unique(cols)) == k
    got = float(cost[rows, cols].sum())
    finite = cost[np.isfinite(cost)]
    if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 2**40:
        assert got == ref, (got, ref)
    else:
        scale = max(1.0, float(np.abs(cost[rows, cols]).sum()))
        assert abs(got - ref) <= 1e-9 * scale, (got, ref)


KINDS = ["int_small", "int_n", "int_10n", "float", "negative", "huge", "ties", "geometric", "inf", "inf_int"]


# ---------------------------------------------------------------------------------------------
# CPU-only tests (helpers, registration, skip behaviour)
# ---------------------------------------------------------------------------------------------

def test_registered():
    names = lap.available_solvers("dense")
    for name in GPU_SOLVERS:
        assert name in names
    from tracker.lap._registry import _SOLVERS

    tree, classical = _SOLVERS["hungarian-tree"], _SOLVERS["hungarian-classical"]
    assert tree.gpu and tree.exact and tree.dense is not None
    assert classical.gpu and classical.exact and classical.dense is not None
    # measured on the H100 (benchmarks/results/lap_dense_h100.md): classical + finisher is never slower
    assert classical.priority("dense") > tree.priority("dense")


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU error")
def test_needs_gpu_message():
    with pytest.raises(RuntimeError, match="CuPy"):
        get_solver("hungarian-tree", "dense")
    rows, cols = lap.linear_sum_assignment(np.eye(3), solver="auto")  # falls back to scipy
    assert list(cols) == [1, 0, 2] or float(np.eye(3)[rows, cols].sum()) == 0.0


def test_is_integral_and_tolerance():
    assert _gpu_common.is_integral(np.array([[1.0, 2.0], [np.inf, -3.0]]))
    assert not _gpu_common.is_integral(np.array([[1.5, 2.0]]))
    assert not _gpu_common.is_integral(np.array([[2.0**60]]))
    assert _gpu_common.zero_tolerance(True) == (0.5, 0.0)
    eps_abs, eps_rel = _gpu_common.zero_tolerance(False)
    assert eps_abs == 0.0 and 0 < eps_rel < 1e-10


def summary_matrices(seed: int, count: int):
    """Random matrices with a mix of integers, fractions, huge values, +inf, -inf and NaN."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        shape = tuple(int(x) for x in rng.integers(0, 40, size=2))
        c = rng.integers(-50, 50, size=shape).astype(np.float64)
        for value, fraction in [(np.inf, 0.1), (-np.inf, 0.02), (np.nan, 0.02), (0.5, 0.02), (2.0**55, 0.01)]:
            c[rng.random(shape) < fraction * rng.integers(0, 2)] = value
        yield c


def test_summarize_dense_on_numpy():
    for c in summary_matrices(5, 300):
        s = _gpu_common.summarize_dense(c)
        finite = c[np.isfinite(c)]
        assert (s.n_posinf, s.n_invalid) == (np.isposinf(c).sum(), np.isnan(c).sum() + np.isneginf(c).sum())
        assert s.lo == (finite.min() if finite.size else np.inf)
        assert s.hi == (finite.max() if finite.size else -np.inf)
        lim = _gpu_common.INTEGRAL_LIMIT / max(1, *c.shape)
        assert s.integral == bool(np.all((finite == np.round(finite)) & (np.abs(finite) < lim)))
        assert s.all_finite == bool(np.isfinite(c).all())


def test_pad_square():
    c = np.arange(6.0).reshape(2, 3)
    p = _gpu_common.pad_square(c)
    assert p.shape == (3, 3) and np.all(p[2] == 0) and np.all(p[:2] == c)
    assert _gpu_common.pad_square(np.ones((3, 3))).shape == (3, 3)


def test_prepare_infeasible_rows():
    c = np.array([[np.inf, np.inf], [1.0, 2.0]])
    assert _gpu_common.prepare_dense(c).infeasible
    c = np.array([[np.inf, 1.0], [np.inf, 2.0]])
    assert _gpu_common.prepare_dense(c).infeasible  # square: a column with no finite entry
    c = np.array([[np.inf, 1.0, np.inf]])
    assert not _gpu_common.prepare_dense(c).infeasible


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(0, 4), st.data())
def test_big_m_preserves_optimum(n, extra, data):
    """With +inf replaced by big-M, scipy's optimum equals the true optimum, or uses a big-M entry iff infeasible."""
    m = n + extra
    seed = data.draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    kind = data.draw(st.sampled_from(["inf", "inf_int"]))
    c = random_costs(rng, n, m, kind)
    if rng.random() < 0.5:
        c = c * 10.0 ** rng.integers(-3, 6)
    prob = _gpu_common.prepare_dense(c)
    ref, err = reference(c)
    if prob.infeasible:
        assert err is not None
        return
    r, cc = scipy.optimize.linear_sum_assignment(prob.cost)
    result = _gpu_common.finish(prob, c, cc[np.argsort(r)])
    if err is not None:
        assert np.all(result == -1)
    else:
        assert np.all(result >= 0)
        assert float(c[np.arange(n), result].sum()) == pytest.approx(ref, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# GPU tests
# ---------------------------------------------------------------------------------------------

matrix_kinds = st.sampled_from(KINDS)


@pytest.mark.gpu
def test_summarize_dense_gpu_matches_numpy():
    import cupy as cp

    for c in summary_matrices(6, 300):
        assert _gpu_common.summarize_dense(cp.asarray(c)) == _gpu_common.summarize_dense(c)
    big = np.random.default_rng(7).integers(0, 1000, size=(3000, 2999)).astype(np.float64)
    big[1234, 567] = -7.5
    big[2999, 2998] = np.inf
    assert _gpu_common.summarize_dense(cp.asarray(big)) == _gpu_common.summarize_dense(big)


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS + ["auto"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 14), m=st.integers(0, 14), kind=matrix_kinds, maximize=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_property_vs_scipy(solver, n, m, kind, maximize, seed):
    rng = np.random.default_rng(seed)
    cost = random_costs(rng, n, m, kind)
    if maximize:
        cost = np.where(np.isinf(cost), -np.inf, cost)
    check_against_scipy(cost, solver, maximize)


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS)
def test_many_random_instances(solver):
    """A cheap loop over 1200 random instances per solver (all kinds, square and rectangular)."""
    check_random_instances(solver, np.random.default_rng(2024), count=1200, sizes=(1, 40), maximize_every=7)


def check_random_instances(solver, rng, count, sizes, maximize_every):
    """``count`` instances of every kind in turn, one in three square, sides in ``[sizes[0], sizes[1])``."""
    for t in range(count):
        n = int(rng.integers(*sizes))
        m = int(rng.integers(*sizes)) if t % 3 else n
        kind = KINDS[t % len(KINDS)]
        check_against_scipy(random_costs(rng, n, m, kind), solver, maximize=bool(t % maximize_every == 0))


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS)
@pytest.mark.parametrize("kind", ["int_small", "int_n", "int_10n", "float", "geometric", "negative", "huge", "inf"])
@pytest.mark.parametrize("shape", [(300, 300), (1000, 1000), (257, 700), (700, 257)])
def test_medium_instances(solver, kind, shape):
    rng = np.random.default_rng(hash((kind, shape)) % 2**32)
    check_against_scipy(random_costs(rng, *shape, kind), solver)


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS)
@pytest.mark.parametrize("tail_rows, cluster", [(0, True), (6, True), (10**6, True), (10**6, False)])
def test_row_reduction_on_many_instances(solver, tail_rows, cluster, monkeypatch):
    """Step 5a (augmenting row reduction) on every instance: grid-wide rounds only, both, the tail only
    (on a cluster where the GPU has them, or one block)."""
    from tracker.lap import hungarian_tree

    monkeypatch.setattr(hungarian_tree, "ARR_MIN_FREE", 1)
    monkeypatch.setattr(hungarian_tree, "ARR_TAIL_ROWS", tail_rows)
    monkeypatch.setattr(hungarian_tree, "ARR_USE_CLUSTER", cluster)
    check_random_instances(solver, np.random.default_rng(77 + tail_rows % 1000 + cluster), count=300, sizes=(2, 60),
                           maximize_every=5)


@pytest.mark.gpu
@pytest.mark.parametrize("kind, shape", [(kind, (400, 400)) for kind in ("float", "int_10n", "int_small", "negative")]
                         + [(kind, (300, 500)) for kind in ("float", "int_10n", "negative")])  # int_small: no free row
def test_row_reduction_keeps_duals_exact(kind, shape, monkeypatch):
    """After step 5a: slacks >= 0, assigned pairs tight, a consistent matching, fewer free rows; deterministic."""
    import cupy as cp

    from tracker.lap import hungarian_tree

    monkeypatch.setattr(hungarian_tree, "ARR_MIN_FREE", 1)

    rng = np.random.default_rng(11)
    cost = random_costs(rng, *shape, kind)
    n, m = shape
    c = cp.asarray(cost, dtype=cp.float64)
    eps, eps_rel = _gpu_common.zero_tolerance(_gpu_common.is_integral(c))
    mod = hungarian_tree._module()
    start = hungarian_tree.initial_reduction(cp, mod, c, n, m, eps, eps_rel, square=(n == m))
    free_before = int((start[2] == -1).sum())
    results = []
    for _ in range(2):  # the greedy start is a race; step 5a itself must not be
        u, v, col4row, row4col = (x.copy() for x in start)
        stats = {}
        hungarian_tree.augmenting_row_reduction(cp, mod, c, n, m, u, v, col4row, row4col, stats)
        results.append((col4row.get(), u.get(), v.get()))
    for first, second in zip(*results):
        np.testing.assert_array_equal(first, second)
    col4row, u, v = results[0]
    assert stats["arr_rows"] == free_before > 0
    assigned = np.flatnonzero(col4row >= 0)
    free_after = n - assigned.size
    assert free_after <= free_before
    if kind in ("float", "negative"):
        assert free_after < free_before / 4  # ties can stall it on low-range integers, not on floats
    assert len(set(col4row[assigned])) == assigned.size
    slack = cost - u[:, None] - v[None, :]
    scale = np.abs(cost).max()
    assert slack.min() >= -1e-12 * scale
    np.testing.assert_allclose(slack[assigned, col4row[assigned]], 0.0, atol=1e-12 * scale)
    if n < m:  # rectangular: column duals stay <= 0, and exactly 0 on unassigned columns
        assert v.max() <= 0.0
        unassigned = np.setdiff1d(np.arange(m), col4row[assigned])
        assert np.all(v[unassigned] == 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("kind, shape", [
    (kind, shape)
    for kind in ("float", "int_10n", "int_small", "inf", "negative", "huge")
    for shape in ((300, 300), (1000, 1000), (257, 700), (700, 257), (2000, 9000))
    if kind != "int_small" or shape[0] == shape[1]  # rectangular int_small: the greedy leaves no free row
])
def test_cluster_finisher_matches_one_block(kind, shape, monkeypatch):
    """The cluster finisher takes the same steps as the one-block finisher: same matching, same duals."""
    import cupy as cp

    from tracker.lap import hungarian_tree

    if int(cp.cuda.Device().compute_capability) < 90:
        pytest.skip("thread-block clusters need compute capability 9.0")
    monkeypatch.setattr(hungarian_tree, "USE_ARR", False)  # every free row goes to the finisher
    rng = np.random.default_rng(3)
    cost = random_costs(rng, *shape, kind)
    if cost.shape[0] > cost.shape[1]:
        cost = np.ascontiguousarray(cost.T)  # the front end hands the backends n <= m
    n, m = cost.shape
    problem = _gpu_common.prepare_dense(cp.asarray(cost))
    c = cp.ascontiguousarray(problem.cost, dtype=cp.float64)
    mod = hungarian_tree._module()
    start = hungarian_tree.initial_reduction(cp, mod, c, n, m, problem.eps, problem.eps_rel, square=(n == m))
    results = []
    for use_cluster in (False, True):
        monkeypatch.setattr(hungarian_tree, "SAP_USE_CLUSTER", use_cluster)
        monkeypatch.setattr(hungarian_tree, "SAP_CLUSTER_MIN_M", 0)
        u, v, col4row, row4col = (x.copy() for x in start)
        stats = {}
        hungarian_tree.sap_finish(cp, mod, c, n, m, u, v, col4row, row4col, stats)
        results.append((col4row.get(), row4col.get(), u.get(), v.get(), stats["sap_steps"]))
    assert results[0][4] == results[1][4] > 0
    for one_block, cluster in zip(*results):
        np.testing.assert_array_equal(one_block, cluster)
    ref, _ = reference(cost)
    if ref is not None:
        got = float(cost[np.arange(n), results[1][0]].sum())
        assert abs(got - ref) <= 1e-9 * max(1.0, abs(ref))


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS)
def test_edge_cases(solver):
    for cost in (np.zeros((0, 0)), np.zeros((0, 5)), np.zeros((3, 0)), np.array([[7.0]]), np.arange(9.0)[None],
                 np.arange(9.0)[:, None], np.full((50, 50), 3.0), -np.arange(64.0).reshape(8, 8),
                 np.array([[1e300, 0.0], [0.0, 1e300]]), np.array([[1e-300, 0.0], [0.0, 1e-300]])):
        check_against_scipy(cost, solver)
        check_against_scipy(cost, solver, maximize=True)


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS)
def test_infeasible_and_invalid(solver):
    inf = np.inf
    with pytest.raises(ValueError):
        lap.linear_sum_assignment(np.array([[inf, 1.0], [inf, 2.0]]), solver=solver)
    with pytest.raises(ValueError):  # Hall violation not visible per row/column
        lap.linear_sum_assignment(np.array([[1.0, inf, inf], [2.0, inf, inf], [1.0, 2.0, 3.0]]), solver=solver)
    with pytest.raises(ValueError):
        lap.linear_sum_assignment(np.array([[np.nan, 1.0]]), solver=solver)
    rows, cols = lap.linear_sum_assignment(np.array([[inf, 1.0, inf], [2.0, inf, inf]]), solver=solver)
    assert list(cols) == [1, 0]


@pytest.mark.gpu
@pytest.mark.parametrize("solver", GPU_SOLVERS)
def test_cupy_in_cupy_out(solver):
    import cupy as cp

    rng = np.random.default_rng(5)
    c = rng.random((60, 80))
    rows, cols = lap.linear_sum_assignment(cp.asarray(c), solver=solver)
    assert isinstance(rows, cp.ndarray) and isinstance(cols, cp.ndarray)
    ref, _ = reference(c)
    assert abs(float(c[rows.get(), cols.get()].sum()) - ref) <= 1e-9 * max(1.0, abs(ref))


@pytest.mark.gpu
def test_auto_picks_a_gpu_solver():
    assert get_solver("auto", "dense").gpu
