"""Where a cold start's time goes: kernel compilation of each CUDA module, then the first call of each entry point.

Run it twice with the same ``CUPY_CACHE_DIR``, first empty (a fresh machine), then filled::

    CUPY_CACHE_DIR=$(mktemp -d) PYTHONPATH=.:tests python benchmarks/cold_start.py   # cold
    (same again)                                                                      # warm

Prints one line per module (seconds to load its shipped fatbin, or to compile it with NVRTC where
``TRACKER_CUDA_SHIPPED=0``) and per first call (seconds of the first and of a
second identical call: their difference is the compilation of CuPy's own kernels that the call needs).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tracker.lap._warm_up import MODULES  # noqa: E402


def main() -> int:
    t0 = time.perf_counter()
    import cupy

    cupy.zeros(1).sum()
    print(f"import cupy + first op: {time.perf_counter() - t0:.2f} s", flush=True)
    t0 = time.perf_counter()
    import tracker.lap as lap
    from tracker.lap._cuda import load_module

    print(f"import tracker.lap: {time.perf_counter() - t0:.2f} s", flush=True)
    if "--parallel" in sys.argv:
        from tracker.lap._warm_up import compile_modules

        t0 = time.perf_counter()
        per_module = compile_modules(threads=8)
        print(f"all modules, 8 threads: {time.perf_counter() - t0:.2f} s wall "
              f"({sum(per_module.values()):.2f} s summed)", flush=True)
    total = 0.0
    for name, cooperative, kernel in MODULES:
        t0 = time.perf_counter()
        module = load_module(name, cooperative=cooperative)
        if kernel is None:
            module.compile() if hasattr(module, "compile") else None
        else:
            module.get_function(kernel)
        elapsed = time.perf_counter() - t0
        total += elapsed
        print(f"module {name}: {elapsed:.2f} s", flush=True)
    print(f"all modules {total:.2f} s", flush=True)

    from lap_instances import generous_gate_instance

    rng = np.random.default_rng(0)
    dense = rng.random((500, 500))
    rows, cols, cost, shape, un = generous_gate_instance(3000, 0.4, seed=1, backend="gpu")
    calls = [
        ("solve_gated(auction)", lambda: lap.solve_gated(rows, cols, cost, shape, un, solver="auction")),
        ("linear_sum_assignment(auto)", lambda: lap.linear_sum_assignment(dense)),
        ("linear_sum_assignment(auction)", lambda: lap.linear_sum_assignment(dense, solver="auction")),
        ("linear_sum_assignment(hungarian-tree)", lambda: lap.linear_sum_assignment(dense, solver="hungarian-tree")),
    ]
    for label, call in calls:
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            call()
            cupy.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
        print(f"first call {label}: {times[0]:.2f} s, second {times[1] * 1e3:.1f} ms", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
