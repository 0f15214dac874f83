"""tracker.gating_gpu: the CPU's candidates and nearest targets from the GPU grid, its scan, and no kernel
compiled at first use for the GPU linking path (the candidate search and the component split)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tracker import costs

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("n", [1, 7, 2047, 2048, 2049, 100_000, 2048 * 1024 + 5])
def test_exclusive_scan_equals_cumsum(cp, n):
    """One tile, tile edges, and more tiles than the totals' block has threads (several totals a thread)."""
    from tracker.gating_gpu import exclusive_scan

    values = np.random.default_rng(n).integers(0, 1 << 40, n)
    device = cp.asarray(values)
    exclusive_scan(device)
    np.testing.assert_array_equal(device.get(), np.concatenate([[0], np.cumsum(values)[:-1]]))


@pytest.mark.parametrize("n, m, box, radius", [
    (3000, 3100, (20.0, 20.0, 20.0), 1.5),
    (400, 500, (1.0, 1.0, 1.0), 0.9),        # hundreds of candidates a row: the per-row sort
    (2000, 50, (100.0, 3.0, 3.0), 2.5),      # few targets: wide cells
    (1, 1, (1.0, 1.0, 1.0), 1.0),
])
def test_gating_equals_cpu_with_numpy_and_float32_input(cp, n, m, box, radius):
    from tracker.gating_gpu import gated_links_gpu

    rng = np.random.default_rng(n)
    a = rng.random((n, 3)) * box - 3.0
    b = rng.random((m, 3)) * box - 3.0
    rows, cols, cost = costs.gated_links(a, b, radius)
    for source, target in ((a, b), (a.astype(np.float32), b.astype(np.float32))):
        if source.dtype == np.float32:
            rows, cols, cost = costs.gated_links(source.astype(np.float64), target.astype(np.float64), radius)
        g_rows, g_cols, g_cost = gated_links_gpu(source, target, radius)
        np.testing.assert_array_equal(g_rows.get(), rows)
        np.testing.assert_array_equal(g_cols.get(), cols)
        np.testing.assert_allclose(g_cost.get(), cost, rtol=1e-12)


def test_nearest_target_equals_brute_force(cp):
    from tracker.gating_gpu import nearest_target_gpu

    rng = np.random.default_rng(5)
    target = rng.random((1500, 3)) * 15
    target = np.concatenate([target, target[:200]])  # exact ties: the lower index wins
    query = np.concatenate([rng.random((2000, 3)) * 17 - 1, target[::7]])
    got = nearest_target_gpu(query, target, 1.2).get()
    d2 = ((query[:, None, :] - target[None, :, :]) ** 2).sum(axis=2)  # brute force: the lowest nearest index
    expected = np.where(d2.min(axis=1) <= 1.2**2, d2.argmin(axis=1), -1)
    np.testing.assert_array_equal(got, expected)
    assert (expected >= 0).sum() > 1000
    assert nearest_target_gpu(query[:3], target[:0], 1.0).get().tolist() == [-1, -1, -1]


def test_non_finite_positions_are_refused(cp):
    from tracker.gating_gpu import gated_links_gpu

    a = np.zeros((3, 3))
    a[1, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        gated_links_gpu(a, np.ones((2, 3)), 1.0)


_COLD = textwrap.dedent("""
    import json, numpy as np
    import cupy, cupy.cuda.compiler as compiler
    callers = []
    compile_ = compiler._NVRTCProgram.compile
    def counted(self, *args, **kwargs):
        import traceback
        stack = traceback.extract_stack()
        callers.append([f"{f.filename}:{f.lineno}" for f in stack if "/tracker/" in f.filename][-1:])
        return compile_(self, *args, **kwargs)
    compiler._NVRTCProgram.compile = counted
    from tracker import costs
    from tracker.gating_gpu import gated_links_gpu, nearest_target_gpu
    from tracker.lap import _scipy, components_gpu
    rng = np.random.default_rng(0)
    a, b = rng.random((3000, 3)) * 20, rng.random((3000, 3)) * 20
    rows, cols, cost = gated_links_gpu(a, b, 1.2)
    nearest = nearest_target_gpu(a, b, 1.0)
    un = np.full(3000, 0.8)
    def large(r, c, w):  # on the host: only the split's own steps on the GPU
        return _scipy.solve_gated(3000, 3000, r.get(), c.get(), w.get(), un, un)
    links = components_gpu.solve_gated(3000, 3000, rows, cols, cost, cupy.asarray(un), cupy.asarray(un), large,
                                       max_side=4)
    print(json.dumps({"candidates": int(rows.size), "links": int(links[0].size), "stats": components_gpu.LAST_STATS,
                      "callers": [c for c in callers if c]}))
""")


def test_a_fresh_machine_compiles_no_kernel_for_the_candidates_and_components(cp, tmp_path):
    """The candidate search, the nearest targets and the component split (all three classes) into an empty
    CuPy cache: nothing for NVRTC."""
    environment = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-c", _COLD], env=environment, capture_output=True, text=True,
                         check=True, cwd=REPO)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["candidates"] > 3000 and result["links"] > 1000
    stats = result["stats"]
    assert stats["single_edges"] > 0 and stats["small_edges"] > 0 and stats["large_edges"] > 0
    assert result["callers"] == []
