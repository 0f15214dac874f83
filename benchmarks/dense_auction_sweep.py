"""Dense auction settings side by side with the Hungarian solvers (GPU).

The dense auction (``solver="auction"``) runs truncated epsilon-scaling phases and hands its prices to
the Hungarian's exact finish (:func:`tracker.lap.dense_auction.dense_with_exact_finish`). This script times
it under several settings of :mod:`tracker.lap.auction` (epsilon factor, last epsilon, phase
truncation, finish) on the papers' classes (``lap_bench.make_instance``), next to the best Hungarian
solver, and prints where the time goes (host timers in ms: preparation, the auction including it, the finish;
auction rounds, auction pairs kept, step 5a rounds and rows left, Dijkstra steps).

    python benchmarks/dense_auction_sweep.py --sizes 1000,4096 [--settings A,B,...] [--markdown OUT.md]

Device times by CUDA events, CuPy in and out, median of ``--repeats`` after a warm-up. "exact" compares
the objective with the best Hungarian solver's (both exact; integers exactly, floats to 1e-9).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lap_bench import CLASS_LABEL, CLASSES, make_instance, time_gpu, write_atomically  # noqa: E402

import tracker.lap as lap  # noqa: E402
from tracker.lap import auction, dense_auction  # noqa: E402

SETTINGS = {
    # name: module attributes of tracker.lap.auction; any "FINISH:ALPHA:HANDOFF:STOP" also works
    "default": {},
    "auction alone": dict(DENSE_FINISH=None),
    "no phase kernel": dict(PHASE_KERNEL=False),
    "1 block/SM": dict(PHASE_BLOCKS_PER_SM=1),
    "2 blocks/SM": dict(PHASE_BLOCKS_PER_SM=2),
    **{f"warm {eps:g}": dict(DENSE_WARM_START=True, DENSE_WARM_EPS=eps) for eps in (0.25, 1e-2, 1e-3, 1e-4)},
}


def setting(name: str) -> dict:
    """Module attributes of a setting: a name of :data:`SETTINGS`, or ``FINISH:ALPHA:HANDOFF:STOP``
    (e.g. ``sap:8:1e-6:0.003``; a STOP of 0 runs every phase to its end but the last 8 rows), or
    space-separated ``NAME=VALUE`` assignments of module attributes."""
    if name in SETTINGS:
        return SETTINGS[name]
    if "=" in name:  # "DENSE_WARM_EPS=1e-5 DENSE_ALPHA=8": module attributes, Python literals
        return {key: ast.literal_eval(value) for key, value in (item.split("=") for item in name.split())}
    finish, alpha, handoff, stop = name.split(":")
    return dict(DENSE_FINISH=finish, DENSE_ALPHA=int(alpha), DENSE_HANDOFF_EPS=float(handoff),
                DENSE_PHASE_STOP=float(stop))


def apply(values: dict) -> dict:
    """Set module attributes; returns the previous values."""
    old = {k: getattr(dense_auction if hasattr(dense_auction, k) else auction, k) for k in values}
    for k, v in values.items():
        setattr(dense_auction if hasattr(dense_auction, k) else auction, k, v)
    return old


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4096")
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--settings", default="default")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--alone-max-n", type=int, default=1000, help="run 'auction alone' only up to this n")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import cupy as cp

    names = [s for s in args.settings.split(",") if s]
    out = ["| class | n | best Hungarian | its time | setting | auction (total) | ratio | exact | "
           "preparation | auction part | finish part | phases / rounds | pairs kept | step 5a rounds / rows left | "
           "Dijkstra steps |", "|---|---:|---|---:|---|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in [c for c in args.classes.split(",") if c]:
        for n in [int(s) for s in args.sizes.split(",") if s]:
            cost = make_instance(kind, n, args.seed + n)
            cost_gpu = cp.asarray(cost)
            integral = kind.startswith("int")
            best = None
            for solver in ("hungarian-tree", "hungarian-classical"):
                t, (r, c) = time_gpu(cp, lambda: lap.linear_sum_assignment(cost_gpu, solver=solver), args.repeats, 1)
                obj = float(cost[r.get(), c.get()].sum())
                if best is None or t < best[1]:
                    best = (solver, t, obj)
            print(f"{kind:10s} n={n:5d} {best[0]} {best[1] * 1e3:.1f} ms", flush=True)
            for name in names:
                if name == "auction alone" and n > args.alone_max_n:
                    continue
                old = apply(setting(name))
                try:
                    t, (r, c) = time_gpu(cp, lambda: lap.linear_sum_assignment(cost_gpu, solver="auction"),
                                         args.repeats, 1)
                    got = float(cost[r.get(), c.get()].sum())
                    ok = got == best[2] if integral else abs(got - best[2]) <= 1e-9 * max(1.0, abs(best[2]))
                    st: dict = {}
                    dense_auction.solve_dense(cost_gpu, stats=st)
                except Exception as error:  # report and go on
                    print(f"  {name}: {type(error).__name__}: {error}", flush=True)
                    apply(old)
                    continue
                apply(old)
                ms = lambda k: f"{st[k] * 1e3:.1f}" if k in st else "—"  # noqa: E731
                row = (f"| {CLASS_LABEL[kind]} | {n} | {best[0]} | {best[1] * 1e3:.1f} ms | {name} | "
                       f"{t * 1e3:.1f} ms | {t / best[1]:.2f}× | {'yes' if ok else 'NO'} | {ms('prep_s')} | {ms('auction_s')} | "
                       f"{ms('finish_s')} | {st.get('phases', '—')} / {st.get('rounds', '—')} | "
                       f"{st.get('kept', '—')} | {st.get('arr_rounds', '—')} / {st.get('sap_rows', '—')} | "
                       f"{st.get('sap_steps', '—')} |")
                out.append(row)
                print(row, flush=True)
            del cost_gpu
            cp.get_default_memory_pool().free_all_blocks()
            if args.markdown:
                write_atomically(args.markdown, "\n".join(out) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
