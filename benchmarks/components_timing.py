"""Timing aid for tracker/lap/components_gpu.py: split overhead and the warp solver's size limit.

    PYTHONPATH=. python3 benchmarks/components_timing.py

For each sparse-section instance (benchmarks/sparse_section.py) and each
``WARP_MAX`` in (4, 8, 16, 32): median time of ``solve_gated(solver="auction")``
with the split, the split's own time (pruning, labelling, sort, warp solver;
the auction excluded) and the class counts; and the plain auction for reference.
"""

from __future__ import annotations

import numpy as np


def main(sizes=(10_000, 100_000, 1_000_000), steps=(0.1, 0.3, 0.5), sides=(4, 8, 16, 32)):
    import cupy

    from benchmarks.sparse_section import _fmt_s, _time_gpu, gated_instance, objective
    from tracker import lap
    from tracker.lap import components_gpu

    print("| nodes | step | edges | plain auction | " + " | ".join(f"split K={k} (split only)" for k in sides)
          + " | single / small (comps) / large at K=32 | same objective |")
    print("|---:|---:|---:|---:|" + "---:|" * len(sides) + "---:|---|")
    for n in sizes:
        for step in steps:
            rows, cols, cost, shape, un = gated_instance(n, step, seed=n + int(step * 100))
            d = cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(cost)
            reps = 3 if n < 1_000_000 else 1

            def solve():
                return lap.solve_gated(*d, shape, un, solver="auction")

            components_gpu.ENABLED = False
            t_plain, (r0, c0) = _time_gpu(solve, reps)
            ref = objective(rows, cols, cost, shape, un, r0, c0)
            cells, same = [], True
            components_gpu.ENABLED = True
            for side in sides:
                components_gpu.WARP_MAX = side
                t, (r, c) = _time_gpu(solve, reps)
                st = dict(components_gpu.LAST_STATS)
                same &= abs(objective(rows, cols, cost, shape, un, r, c) - ref) <= 1e-9 * abs(ref)
                cells.append(f"{_fmt_s(t)} ({_fmt_s(st['split_s'])})")
            split = f"{st['single_edges']:,} / {st['small_edges']:,} ({st['small_components']:,}) / {st['large_edges']:,}"
            print(f"| {n:,} | {step} | {len(rows):,} | {_fmt_s(t_plain)} | " + " | ".join(cells)
                  + f" | {split} | {same} |", flush=True)
    components_gpu.ENABLED = False
    components_gpu.WARP_MAX = 32


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
