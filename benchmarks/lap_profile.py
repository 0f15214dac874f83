"""Where the time of one GPU full matching (or gated solve) goes: a cProfile of one call after a warm-up.

For issue 27's families (``lap_instances``): ``--full N:F`` profiles
``tracker.lap.min_weight_full_bipartite_matching(graph, solver="auction")`` on a SciPy CSR matrix (as users
pass it), ``--gated N:F`` ``solve_gated(..., solver="auction")`` on CuPy arrays. Prints the wall time of each
call (after a warm-up), the top functions by cumulative time, and the auction's counters. ``--scipy-limit S``
also runs SciPy's ``min_weight_full_bipartite_matching`` on the full-matching instance once, in a forked
process stopped after ``S`` seconds, concurrently with the GPU profile (it uses one CPU core). ::

    PYTHONPATH=.:tests python benchmarks/lap_profile.py --full 1000000:0.1 --scipy-limit 120
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lap_instances import full_matching_instance, generous_gate_instance  # noqa: E402


def _profile(label: str, fn, top: int) -> None:
    import cupy

    from tracker.lap import auction

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    cupy.cuda.Device().synchronize()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    stats = {k: v for k, v in auction.LAST_STATS.items() if k != "per_phase"}
    print(f"## {label}: {', '.join(f'{t * 1e3:.1f} ms' for t in times)}\n{stats}\n{out.getvalue()}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", default="")
    parser.add_argument("--gated", default="")
    parser.add_argument("--scipy-limit", type=float, default=0.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    from lap_generous import _Baselines, _scipy_full

    from tracker import lap

    for case in filter(None, args.full.split(",")):
        n, step = int(case.split(":")[0]), float(case.split(":")[1])
        d_rows, d_cols, d_cost, shape = full_matching_instance(n, step, seed=n, backend="gpu")
        rows, cols, cost = d_rows.get(), d_cols.get(), d_cost.get()
        graph = sp.csr_array((cost, (rows, cols)), shape=shape)
        baselines = None
        if args.scipy_limit > 0:
            baselines = _Baselines({"scipy": (_scipy_full, (rows, cols, cost, shape))}, args.scipy_limit)
        _profile(f"full {n}:{step} ({len(rows) / shape[0]:.1f} per row)",
                 lambda: lap.min_weight_full_bipartite_matching(graph, solver="auction"), args.top)
        if baselines is not None:
            got = baselines.results()["scipy"]
            ri, ci = lap.min_weight_full_bipartite_matching(graph, solver="auction")
            ours = float(graph[ri, ci].sum())
            print(f"scipy {n}:{step}: {got} (ours {ours!r}; limit {args.scipy_limit} s)", flush=True)
    for case in filter(None, args.gated.split(",")):
        n, step = int(case.split(":")[0]), float(case.split(":")[1])
        d_rows, d_cols, d_cost, shape, un = generous_gate_instance(n, step, seed=n, backend="gpu")
        _profile(f"gated {n}:{step} ({d_rows.size / shape[0]:.1f} per row)",
                 lambda: lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction"), args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
