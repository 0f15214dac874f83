"""Component split of gated problems (``tracker/lap/components_gpu.py``) against SciPy.

GPU tests are marked ``gpu``; the driver and both algorithms (union-find
labelling, the warp solver's shortest augmenting paths) also run on the CPU
through their NumPy versions.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from tracker import lap
from tracker.lap import _scipy, auction, components_gpu
from tracker.simulate import gated_frame_pair


@pytest.fixture(autouse=True)
def _route_through_components(monkeypatch):
    monkeypatch.setattr(components_gpu, "ENABLED", True)


# ------------------------------------------------------------------ helpers --

def objective(rows, cols, cost, row_un, col_un, chosen_r, chosen_c):
    chosen_r, chosen_c = np.asarray(chosen_r, dtype=np.int64), np.asarray(chosen_c, dtype=np.int64)
    assert len(np.unique(chosen_r)) == len(chosen_r), "a row is linked twice"
    assert len(np.unique(chosen_c)) == len(chosen_c), "a column is linked twice"
    span = int(max(cols.max(initial=0), chosen_c.max(initial=0))) + 1
    key = rows * span + cols
    order = np.argsort(key)
    pos = np.searchsorted(key[order], chosen_r * span + chosen_c)
    assert np.all(pos < len(key)) and np.all(key[order][np.minimum(pos, len(key) - 1)] == chosen_r * span + chosen_c), \
        "a chosen edge is not a candidate"
    links = cost[order[pos]].sum()
    return links + row_un.sum() - row_un[chosen_r].sum() + col_un.sum() - col_un[chosen_c].sum()


def clustered(rng, n_groups, max_group, density, integer=False, per_node=True, ties=False):
    """Gated instance of ``n_groups`` blocks of random size (components of up to ``max_group`` rows/cols)."""
    rows, cols = [], []
    r0 = c0 = 0
    for _ in range(n_groups):
        nr, nc = rng.integers(1, max_group + 1, 2)
        mask = rng.random((nr, nc)) < density
        r, c = np.nonzero(mask)
        rows.append(r + r0)
        cols.append(c + c0)
        r0 += nr + int(rng.integers(0, 2))  # some rows and columns without any edge
        c0 += nc + int(rng.integers(0, 2))
    rows, cols = np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64)
    n_rows, n_cols = r0 + 1, c0 + 1
    # shuffle node ids so components are not contiguous ranges
    rows = rng.permutation(n_rows)[rows]
    cols = rng.permutation(n_cols)[cols]
    if ties:
        cost = rng.integers(0, 3, rows.size).astype(float)
    elif integer:
        cost = rng.integers(0, 50, rows.size).astype(float)
    else:
        cost = rng.random(rows.size) * 10
    if per_node:
        row_un = (rng.integers(1, 30, n_rows) if integer or ties else rng.random(n_rows) * 6).astype(float)
        col_un = (rng.integers(1, 30, n_cols) if integer or ties else rng.random(n_cols) * 6).astype(float)
    else:
        value = 3.0 if ties else 12.0 if integer else 4.0
        row_un, col_un = np.full(n_rows, value), np.full(n_cols, value)
    return rows, cols, cost, (n_rows, n_cols), row_un, col_un


def geometric_gated(n, step, seed, gate_factor=3.0):
    rows, cols, cost, shape, un = gated_frame_pair(n, step, seed=seed, gate_factor=gate_factor)
    return rows, cols, cost, shape, np.full(shape[0], un), np.full(shape[1], un)


def reference(rows, cols, cost, shape, row_un, col_un):
    r, c = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver="scipy")
    return objective(rows, cols, cost, row_un, col_un, r, c)


def assert_same(got, ref, integer):
    if integer:
        assert got == ref
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------- CPU --

@pytest.mark.parametrize("seed", range(4))
def test_reduced_solver_matches_scipy(seed):
    """The warp solver's algorithm (NumPy version) on single components of up to 32 x 32."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        nr, nc = rng.integers(1, 33, 2)
        mask = rng.random((nr, nc)) < rng.choice([0.1, 0.3, 1.0])
        rows, cols = np.nonzero(mask)
        integer = bool(rng.integers(0, 2))
        cost = rng.integers(0, 20, rows.size).astype(float) if integer else rng.random(rows.size) * 5
        row_un = rng.integers(1, 15, nr).astype(float) if integer else rng.random(nr) * 3
        col_un = rng.integers(1, 15, nc).astype(float) if integer else rng.random(nc) * 3
        picked = components_gpu.solve_component_reduced(rows, cols, cost, row_un, col_un)
        got = objective(rows, cols, cost, row_un, col_un, rows[picked], cols[picked])
        ref_r, ref_c = _scipy.solve_gated(nr, nc, rows, cols, cost, row_un, col_un)
        assert_same(got, objective(rows, cols, cost, row_un, col_un, ref_r, ref_c), integer)


def test_emulated_labels_match_scipy(rng):
    for _ in range(20):
        rows, cols, cost, (nr, nc), _, _ = clustered(rng, int(rng.integers(1, 15)), 12, 0.3)
        label, cls = components_gpu._EmulatedKernels().label(nr, nc, rows, cols, 5)
        graph = sp.coo_array((np.ones(rows.size), (rows, nr + cols)), shape=(nr + nc,) * 2)
        _, ref = connected_components(graph, directed=False)
        # same partition of the edges, and the label is the smallest node of the component
        ref_edge = ref[rows]
        for value in np.unique(ref_edge):
            members = ref_edge == value
            assert len(np.unique(label[members])) == 1
            nodes = np.flatnonzero(ref == value)
            assert label[members][0] == nodes.min()
        assert len(np.unique(label)) == len(np.unique(ref_edge))
        edges_per = np.bincount(ref_edge)[ref_edge]
        assert np.array_equal(cls == 0, edges_per == 1)


@pytest.mark.parametrize("max_side", [1, 4, 32])
def test_emulated_driver_matches_scipy(max_side, rng):
    for trial in range(25):
        integer = trial % 2 == 0
        rows, cols, cost, shape, row_un, col_un = clustered(
            rng, int(rng.integers(1, 12)), int(rng.choice([3, 8, 40])), float(rng.choice([0.2, 0.5, 1.0])),
            integer=integer, per_node=trial % 3 != 0, ties=trial % 5 == 0)

        def large(r, c, w):
            return _scipy.solve_gated(shape[0], shape[1], r, c, w, row_un, col_un)

        got_r, got_c = components_gpu.solve_gated(shape[0], shape[1], rows, cols, cost, row_un, col_un, large,
                                                  emulate=True, max_side=max_side)
        assert np.all(np.diff(got_r) > 0)
        got = objective(rows, cols, cost, row_un, col_un, got_r, got_c)
        assert_same(got, reference(rows, cols, cost, shape, row_un, col_un), integer or trial % 5 == 0)


def test_emulated_auction_route(rng):
    """auction.solve_gated(components=True) in emulation: the split, then the emulated auction."""
    rows, cols, cost, shape, row_un, col_un = clustered(rng, 6, 40, 0.3, integer=True)
    got_r, got_c = auction.solve_gated(shape[0], shape[1], rows, cols, cost, row_un, col_un, emulate=True,
                                       components=True)
    got = objective(rows, cols, cost, row_un, col_un, got_r, got_c)
    assert got == reference(rows, cols, cost, shape, row_un, col_un)
    assert auction.LAST_STATS["components_large_edges"] > 0


def test_max_side_checked():
    with pytest.raises(ValueError, match="max_side"):
        components_gpu.solve_gated(1, 1, [0], [0], [1.0], [2.0], [2.0], None, emulate=True, max_side=33)


# --------------------------------------------------------------------- GPU --

CASES = [
    # (groups, max group side, density): all small, mixed, all giant
    (2000, 3, 0.6), (3000, 8, 0.4), (500, 32, 0.2), (300, 40, 0.15), (20, 120, 0.05), (1, 400, 0.02),
    (1, 60, 1.0), (1000, 1, 1.0),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", ["float", "int", "ties", "shared_noedge"])
def test_gpu_clustered_matches_scipy(case, variant):
    rng = np.random.default_rng(CASES.index(case) * 10 + len(variant))
    groups, side, density = case
    rows, cols, cost, shape, row_un, col_un = clustered(
        rng, groups, side, density, integer=variant == "int", ties=variant == "ties",
        per_node=variant != "shared_noedge")
    got_r, got_c = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver="auction")
    got = objective(rows, cols, cost, row_un, col_un, got_r, got_c)
    assert_same(got, reference(rows, cols, cost, shape, row_un, col_un), variant in ("int", "ties"))


@pytest.mark.gpu
@pytest.mark.parametrize("max_side", [1, 2, 4, 8, 16, 32])
def test_gpu_max_side_and_stats(max_side):
    import cupy

    rng = np.random.default_rng(max_side)
    rows, cols, cost, shape, row_un, col_un = clustered(rng, 400, 20, 0.3, integer=True)
    large = []

    def large_solver(r, c, w):
        large.append(int(r.size))
        return auction.solve_gated(shape[0], shape[1], r, c, w, cupy.asarray(row_un), cupy.asarray(col_un),
                                   components=False)

    got_r, got_c = components_gpu.solve_gated(
        shape[0], shape[1], cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(cost), cupy.asarray(row_un),
        cupy.asarray(col_un), large_solver, max_side=max_side)
    assert isinstance(got_r, cupy.ndarray)
    got = objective(rows, cols, cost, row_un, col_un, got_r.get(), got_c.get())
    assert got == reference(rows, cols, cost, shape, row_un, col_un)
    s = components_gpu.LAST_STATS
    assert s["single_edges"] + s["small_edges"] + s["large_edges"] == s["edges"]
    assert (s["large_edges"] > 0) == bool(large)


@pytest.mark.gpu
@pytest.mark.parametrize("n, step", [(n, s) for n in (200, 3000) for s in (0.1, 0.3, 0.5, 0.8)]
                         + [(20000, s) for s in (0.1, 0.3, 0.5)])
def test_gpu_geometric_matches_scipy(n, step):
    import cupy

    rows, cols, cost, shape, row_un, col_un = geometric_gated(n, step, seed=n + int(100 * step))
    got_r, got_c = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver="auction")
    got = objective(rows, cols, cost, row_un, col_un, got_r, got_c)
    assert_same(got, reference(rows, cols, cost, shape, row_un, col_un), False)
    # the same without the split (the plain auction stays exact)
    r2, c2 = auction.solve_gated(*shape, *(cupy.asarray(a) for a in (rows, cols, cost, row_un, col_un)),
                                 components=False)
    assert_same(objective(rows, cols, cost, row_un, col_un, r2.get(), c2.get()),
                reference(rows, cols, cost, shape, row_un, col_un), False)


@pytest.mark.gpu
def test_gpu_dense_component_32x32():
    """A complete 32 x 32 component (the warp solver's largest) and one of 33 x 33 (the auction)."""
    rng = np.random.default_rng(3)
    for side in (31, 32, 33):
        rows, cols = np.nonzero(np.ones((side, side)))
        cost = rng.integers(0, 1000, rows.size).astype(float)
        row_un = rng.integers(200, 900, side).astype(float)
        col_un = rng.integers(200, 900, side).astype(float)
        got_r, got_c = lap.solve_gated(rows, cols, cost, (side, side), row_un, col_un, solver="auction")
        got = objective(rows, cols, cost, row_un, col_un, got_r, got_c)
        assert got == reference(rows, cols, cost, (side, side), row_un, col_un)
        dense = np.full((side, side * 2), np.inf)
        dense[rows, cols] = cost - col_un[cols]
        dense[np.arange(side), side + np.arange(side)] = row_un
        assert got == dense[scipy.optimize.linear_sum_assignment(dense)].sum() + col_un.sum()


@st.composite
def gated_instances(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    groups = draw(st.integers(1, 30))
    side = draw(st.sampled_from([1, 2, 4, 8, 33, 40]))
    density = draw(st.sampled_from([0.1, 0.4, 1.0]))
    kind = draw(st.sampled_from(["float", "int", "ties"]))
    return clustered(rng, groups, side, density, integer=kind == "int", ties=kind == "ties",
                     per_node=draw(st.booleans())), kind != "float"


@pytest.mark.gpu
@settings(max_examples=300, deadline=None)
@given(gated_instances())
def test_gpu_property_matches_scipy(instance):
    (rows, cols, cost, shape, row_un, col_un), integer = instance
    got_r, got_c = lap.solve_gated(rows, cols, cost, shape, row_un, col_un, solver="auction")
    got = objective(rows, cols, cost, row_un, col_un, got_r, got_c)
    assert_same(got, reference(rows, cols, cost, shape, row_un, col_un), integer)


@pytest.mark.parametrize("emulate", [True, pytest.param(False, marks=pytest.mark.gpu)])
def test_all_pruned_and_empty(emulate):
    xp = np
    if not emulate:
        import cupy as xp
    rows, cols = xp.asarray([0, 1, 1]), xp.asarray([0, 0, 1])
    cost = xp.asarray([5.0, 4.0, 9.0])  # every edge >= both no-link costs together
    un = xp.asarray([2.0, 2.0])
    for r, c, w in ((rows, cols, cost), (rows[:0], cols[:0], cost[:0])):
        got_r, got_c = components_gpu.solve_gated(2, 2, r, c, w, un, un, None, emulate=emulate)
        assert got_r.size == 0 and got_c.size == 0
    assert components_gpu.LAST_STATS["edges"] == 0
    # one edge just below the sum is kept and taken
    got_r, got_c = components_gpu.solve_gated(2, 2, rows, cols, xp.asarray([3.999, 4.0, 9.0]), un, un, None,
                                              emulate=emulate)
    assert got_r.tolist() == [0] and got_c.tolist() == [0]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["int", "ties"])
@pytest.mark.parametrize("max_side", [1, 4, 32])
def test_gpu_driver_equals_its_emulation(variant, max_side):
    """The kernels' grouping (sorted keys, class starts, component starts, links in row order) against the
    NumPy driver, bit for bit: the same links, the same edges (in the same order) for the large solver, the
    same counts. Integer costs: the warp solver's sums are exact on both sides."""
    import cupy

    rng = np.random.default_rng(max_side)
    for trial in range(6):
        rows, cols, cost, shape, row_un, col_un = clustered(
            rng, int(rng.integers(50, 400)), int(rng.choice([3, 8, 40])), float(rng.choice([0.2, 0.5])),
            integer=variant == "int", ties=variant == "ties", per_node=trial % 2 == 0)
        results = []
        for emulate in (True, False):
            xp = np if emulate else cupy
            given = []

            def large(r, c, w, xp=xp, given=given):
                given.append([np.asarray(a.get() if hasattr(a, "get") else a) for a in (r, c, w)])
                got = _scipy.solve_gated(shape[0], shape[1], *given[-1], row_un, col_un)
                return tuple(xp.asarray(a) for a in got)

            got = components_gpu.solve_gated(shape[0], shape[1], *(xp.asarray(a) for a in (rows, cols, cost)),
                                             xp.asarray(row_un), xp.asarray(col_un), large, emulate=emulate,
                                             max_side=max_side)
            stats = {k: v for k, v in components_gpu.LAST_STATS.items() if not k.endswith("_s")}
            results.append(([np.asarray(a.get() if hasattr(a, "get") else a) for a in got], given, stats))
        (emulated, emulated_given, emulated_stats), (gpu, gpu_given, gpu_stats) = results
        assert gpu_stats == emulated_stats
        for ours, theirs in zip(gpu, emulated):
            np.testing.assert_array_equal(ours, theirs)
        assert len(gpu_given) == len(emulated_given)
        for ours, theirs in zip(gpu_given, emulated_given):
            for a, b in zip(ours, theirs):
                np.testing.assert_array_equal(a, b)
