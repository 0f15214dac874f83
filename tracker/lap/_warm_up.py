"""Load the GPU solvers' kernels and compile CuPy's ahead of their first use (``tracker.lap.warm_up``).

A first solve on a machine needs two kinds of kernels: this package's CUDA modules (``*.cu``), which load
from the fatbins shipped with it (:mod:`tracker.lap._cuda`; NVRTC only where none fits this GPU), and CuPy's
own kernels behind the array operations around them, which CuPy compiles with NVRTC at first use and keeps
in its on-disk cache (``CUPY_CACHE_DIR``, by default ``~/.cupy/kernel_cache``), once per machine and CuPy
version. :func:`warm_up` pays that once, on purpose (``track solvers --warm-up``, e.g. while building a
container image): it loads every module and runs each entry point on a tiny problem. Before the fatbins,
compiling the modules took 16 s on an H100 (``hungarian_tree.cu`` 7 s); CuPy's kernels behind the first
gated and dense solves took 6-12 s more (``benchmarks/cold_start.py``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MODULES = (("lap/auction.cu", False, "auction_bid_csr"), ("lap/auction_phase.cu", True, "auction_phase_dense"),
           ("lap/gated_auction.cu", True, "ga_phase"), ("lap/components_gpu.cu", False, "cc_hook"),
           ("lap/hungarian_tree.cu", False, "tree_reset"), ("lap/hungarian_classical.cu", False, None),
           ("lap/dense_input.cu", False, "dense_summary"), ("lap/dgs.cu", False, None),
           ("lap/dgs_anneal.cu", True, None), ("gating_gpu.cu", False, "count_candidates"),
           ("ndimage_gpu.cu", False, "correlate_nearest"), ("detect_gpu.cu", False, "local_maxima"))
"""Every CUDA module of the package (file, cooperative, a kernel to fetch; None: load the module)."""


def compile_modules(threads: int = 4) -> dict[str, float]:
    """Load (or, without a fitting fatbin, compile) every CUDA module of this package, ``threads`` at a time;
    seconds per module."""
    from ._cuda import load_module

    def one(entry):
        name, cooperative, kernel = entry
        start = time.perf_counter()
        module = load_module(name, cooperative=cooperative)
        if kernel is None:
            module.compile()
        else:
            module.get_function(kernel)
        return name, time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return dict(pool.map(one, MODULES))


def warm_up(threads: int = 4) -> dict[str, float]:
    """Compile the GPU solvers' kernels and run every GPU entry point once on a tiny problem.

    Returns the seconds each step took (``module <file>`` and ``call <entry point>``). Without CuPy or a
    GPU it does nothing and returns an empty dict.
    """
    from ..backend import gpu_available

    if not gpu_available():
        return {}
    from ..simulate import gated_frame_pair
    from . import available_solvers, linear_sum_assignment, min_weight_full_bipartite_matching, solve_gated

    timings = {f"module {name}": seconds for name, seconds in compile_modules(threads).items()}
    rng = np.random.default_rng(0)
    rows, cols, cost, shape, no_link = gated_frame_pair(3000, 0.5, seed=0, gate_factor=4.5)
    calls = [("solve_gated", lambda: solve_gated(rows, cols, cost, shape, no_link, solver="auction"))]
    import scipy.sparse as sp

    graph = sp.csr_array((cost, (rows, cols)), shape=shape)
    calls.append(("min_weight_full_bipartite_matching",
                  lambda: _full_or_infeasible(min_weight_full_bipartite_matching, graph)))
    for name in available_solvers("dense"):
        if name in ("scipy",):
            continue
        for values in (rng.random((300, 300)), rng.integers(0, 30, (300, 300)).astype(float),
                       rng.integers(0, 3000, (300, 300)).astype(float)):
            calls.append((f"linear_sum_assignment[{name}]",
                          lambda name=name, values=values: linear_sum_assignment(values, solver=name)))
    for label, call in calls:
        start = time.perf_counter()
        call()
        timings[f"call {label}"] = timings.get(f"call {label}", 0.0) + time.perf_counter() - start
    return timings


def _full_or_infeasible(function, graph):
    try:
        return function(graph, solver="auction")
    except ValueError:  # no full matching in this instance: the kernels ran all the same
        return None
