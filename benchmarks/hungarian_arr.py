"""How much step 5a (augmenting row reduction) and the cluster finisher buy the GPU Hungarian solvers.

For each instance class and size, each Hungarian solver runs with step 5a off
and with several (max rounds, stall rounds) settings, and with the one-block or
the cluster finisher; the table gives the
median device time (CUDA events, CuPy matrix in and out) and the solver's
profile: free rows before step 5a, rows left to the Dijkstra finisher, rounds,
finisher steps. Objectives are compared with scipy (``--scipy-max-n``) or,
above it, across settings.

    PYTHONPATH=. python3 benchmarks/hungarian_arr.py --sizes 4096 --classes float,int_10n
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import scipy.optimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lap_bench import CLASS_LABEL, make_instance, time_gpu  # noqa: E402

import tracker.lap as lap  # noqa: E402
from tracker.lap import hungarian_tree  # noqa: E402
from tracker.lap._registry import get_solver  # noqa: E402

SOLVERS = ("hungarian-tree", "hungarian-classical")


def parse_settings(text: str) -> list[tuple[int, int] | None]:
    """``"off,500:128,2000:256"`` -> [None, (500, 128), (2000, 256)]."""
    out = []
    for item in text.split(","):
        if item == "off":
            out.append(None)
        else:
            rounds, stall = item.split(":")
            out.append((int(rounds), int(stall)))
    return out


def apply_setting(setting) -> str:
    hungarian_tree.USE_ARR = setting is not None
    if setting is None:
        return "off"
    hungarian_tree.ARR_MAX_ROUNDS, hungarian_tree.ARR_STALL_ROUNDS = setting
    return f"{setting[0]}:{setting[1]}"


DEFAULT_CLUSTER_MIN_M = hungarian_tree.SAP_CLUSTER_MIN_M


def apply_finisher(name: str) -> None:
    hungarian_tree.SAP_USE_CLUSTER = name != "block"
    hungarian_tree.SAP_CLUSTER_MIN_M = 0 if name == "cluster" else DEFAULT_CLUSTER_MIN_M


def main(argv=None) -> None:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4096")
    ap.add_argument("--classes", default="int_n,int_10n,float,geometric")
    ap.add_argument("--settings", default="off,500:128,2000:256,5000:512")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--finishers", default="auto",
                    help="comma-separated: auto (the solver's choice), block (one block), cluster (8-block cluster)")
    ap.add_argument("--scipy-max-n", type=int, default=4096)
    args = ap.parse_args(argv)
    print("| class | n | solver | finisher | step 5a (rounds:stall) | device time | exact | free before 5a "
          "| left to finisher | 5a rounds | finisher steps |")
    print("|---|---:|---|---|---|---:|:---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        for kind in args.classes.split(","):
            cost = make_instance(kind, n, seed=0)
            ref = None
            if n <= args.scipy_max_n:
                r, c = scipy.optimize.linear_sum_assignment(cost)
                ref = float(cost[r, c].sum())
            cost_gpu = cp.asarray(cost)
            for solver in SOLVERS:
                backend = get_solver(solver, "dense").dense
                for finisher, setting in itertools.product(args.finishers.split(","), parse_settings(args.settings)):
                    label = apply_setting(setting)
                    apply_finisher(finisher)
                    t, _ = time_gpu(cp, lambda: lap.linear_sum_assignment(cost_gpu, solver=solver), args.repeats, 1)
                    stats: dict = {}
                    col = backend(cost_gpu, stats=stats).get()
                    obj = float(cost[np.arange(n), col].sum())
                    if ref is None:
                        ref = obj
                    exact = abs(obj - ref) <= 1e-9 * max(1.0, abs(ref))
                    free_before = stats.get("arr_rows", stats.get("sap_rows", 0))
                    print(f"| {CLASS_LABEL[kind]} | {n} | {solver} | {finisher} | {label} | {t * 1e3:.1f} ms | "
                          f"{'yes' if exact else 'NO'} | {free_before} | {stats.get('sap_rows', 0)} | "
                          f"{stats.get('arr_rounds', 0)} | {stats.get('sap_steps', 0)} |", flush=True)
    apply_setting((2000, 256))
    apply_finisher("auto")


if __name__ == "__main__":
    main()
