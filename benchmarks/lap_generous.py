"""Issue 27's sparse families on the GPU against SciPy and ``lap.lapmod``, in the same run.

* **generous gates** (:func:`lap_instances.generous_gate_instance`): uniform points at unit density,
  displaced by per-axis sigma = f x the mean nearest-neighbour distance, 5 % dying and 5 % born, candidates
  within 4.5 sqrt(3) sigma, cost = squared distance, no-link cost 1.05 x the largest candidate cost;
  ``tracker.lap.solve_gated(solver="auction")``;
* **full matchings** (:func:`lap_instances.full_matching_instance`): the same clouds without births, gated
  at 6 sigma; ``tracker.lap.min_weight_full_bipartite_matching(solver="auction")``.

Instances are gated on the GPU (``tracker.gating_gpu``); GPU times are the median of 3 runs after a
warm-up (1 run at 1M nodes), CuPy arrays in (a SciPy CSR matrix for the full matchings, as users pass
it), NumPy out, front-end checks included. The CPU baselines run in forked processes started as soon as
an instance exists (concurrently with each other and with the GPU timing, one core each), each after an
untimed warm-up call on a small piece of the instance, the median of five calls when one takes under 0.1 s,
stopped at ``--limit`` seconds; those under :data:`SEQUENTIAL_BELOW_S` are then timed again alone: SciPy's ``min_weight_full_bipartite_matching`` (on the whole reduced problem for
the gated family), the project's SciPy route (``solve_gated(solver="scipy")``, per component), and
``lap.lapmod`` on the Jaqaman square form when the ``lap`` package is importable. ::

    PYTHONPATH=.:tests python benchmarks/lap_generous.py --sizes 10000,100000,1000000 --out FILE
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lap_instances import full_matching_instance, gated_objective, generous_gate_instance  # noqa: E402

try:
    import lap as lap_pkg

    HAVE_LAPMOD = hasattr(lap_pkg, "lapmod")
except ImportError:
    HAVE_LAPMOD = False


# ----------------------------------------------------------------- baselines --

def _scipy_whole(rows, cols, cost, shape, un):
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    from tracker.lap._scipy import reduced_problem

    r, c, w, rshape = reduced_problem(rows, cols, cost, np.full(shape[0], un), np.full(shape[1], un))
    graph = sp.csr_array((w - w.min() + 1.0, (r, c)), shape=rshape)  # positive (SciPy drops stored zeros)
    t0 = time.perf_counter()
    ri, ci = min_weight_full_bipartite_matching(graph)
    elapsed = time.perf_counter() - t0
    linked = ci < shape[1]
    return elapsed, gated_objective(rows, cols, cost, shape, un, ri[linked], ci[linked])


def _scipy_route(rows, cols, cost, shape, un):
    from tracker import lap

    t0 = time.perf_counter()
    ri, ci = lap.solve_gated(rows, cols, cost, shape, un, solver="scipy")
    return time.perf_counter() - t0, gated_objective(rows, cols, cost, shape, un, ri, ci)


def _square_form(rows, cols, cost, n_rows, n_cols, row_un, col_un):
    """Jaqaman's square matrix (CSR): links, each row's "no link" column, each column's "no link" row, and
    zero-cost dummy pairs on the transposed gate."""
    r = np.concatenate([rows, np.arange(n_rows), n_rows + np.arange(n_cols), n_rows + cols])
    c = np.concatenate([cols, n_cols + np.arange(n_rows), np.arange(n_cols), n_cols + rows])
    w = np.concatenate([cost, np.full(n_rows, row_un), np.full(n_cols, col_un), np.zeros(len(rows))])
    g = sp.csr_matrix((w, (r, c)), shape=(n_rows + n_cols,) * 2)
    g.sort_indices()
    return g


def _lapmod_gated(rows, cols, cost, shape, un):
    g = _square_form(rows, cols, cost, shape[0], shape[1], un, un)
    n = g.shape[0]
    t0 = time.perf_counter()
    _, x, _ = lap_pkg.lapmod(n, g.data, g.indptr, g.indices, return_cost=True)
    elapsed = time.perf_counter() - t0
    chosen_r = np.flatnonzero(x[:shape[0]] < shape[1])
    return elapsed, gated_objective(rows, cols, cost, shape, un, chosen_r, x[chosen_r])


def _scipy_full(rows, cols, cost, shape):
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    graph = sp.csr_array((cost + 1.0, (rows, cols)), shape=shape)  # + 1: SciPy drops stored zeros
    t0 = time.perf_counter()
    ri, ci = min_weight_full_bipartite_matching(graph)
    elapsed = time.perf_counter() - t0
    return elapsed, float(graph[ri, ci].sum()) - len(ri)


def _lapmod_full(rows, cols, cost, shape):
    # every row of the smaller side must link: its "no link" costs more than any full matching saves
    big = 2.0 * float(cost.max()) * min(shape) + 1.0
    small_rows = shape[0] <= shape[1]
    r, c, s = (rows, cols, shape) if small_rows else (cols, rows, shape[::-1])
    g = _square_form(r, c, cost, s[0], s[1], big, 0.0)
    t0 = time.perf_counter()
    _, x, _ = lap_pkg.lapmod(g.shape[0], g.data, g.indptr, g.indices, return_cost=True)
    elapsed = time.perf_counter() - t0
    chosen = x[:s[0]]
    if (chosen >= s[1]).any():
        return elapsed, float("nan")
    key = r * s[1] + c
    order = np.argsort(key)
    index = order[np.searchsorted(key[order], np.arange(s[0]) * s[1] + chosen)]
    return elapsed, float(cost[index].sum())


SEQUENTIAL_BELOW_S = 1.0
"""Baselines faster than this (seconds) are timed again in the parent once the concurrent ones are done (the
median of five after a warm-up): run beside the others, the project's SciPy route took 141.8 ms at 100k nodes,
f = 0.1, against 26.4 ms alone (H100 host, 2026-11-25)."""


def _warm_up(function, args) -> None:
    """One untimed call on the edges among the first 64 rows and columns: the baseline's imports and first-call
    costs (a single cold call of the project's SciPy route took 9.4-9.8 ms at 10k nodes, f = 0.1, against 2.25
    ms warm, H100 host, 2026-11-25) stay out of its timing."""
    rows, cols, cost, shape = args[:4]
    keep = (rows < 64) & (cols < 64)
    try:
        function(rows[keep], cols[keep], cost[keep], (min(shape[0], 64), min(shape[1], 64)), *args[4:])
    except Exception:  # (a sub-problem without a full matching, say: only the warm-up is lost)
        pass


def _child(function, args, queue):
    try:
        _warm_up(function, args)
        elapsed, objective = function(*args)
        if elapsed < 0.1:  # a fast baseline: the median of five calls
            elapsed = statistics.median([elapsed] + [function(*args)[0] for _ in range(4)])
        queue.put((elapsed, objective))
    except Exception as error:  # reported in the table
        queue.put(("error", f"{type(error).__name__}: {error}"[:80]))


class _Baselines:
    """CPU baselines in forked processes, started at once; :meth:`results` waits at most until the limit."""

    def __init__(self, jobs: dict, limit: float):
        ctx = mp.get_context("fork")
        self.limit = limit
        self.functions = jobs
        self.started = time.perf_counter()
        self.jobs = {}
        for name, (function, args) in jobs.items():
            queue = ctx.Queue()
            process = ctx.Process(target=_child, args=(function, args, queue))
            process.start()
            self.jobs[name] = (process, queue)

    def results(self) -> dict:
        out = {}
        for name, (process, queue) in self.jobs.items():
            remaining = max(0.1, self.limit - (time.perf_counter() - self.started))
            try:
                out[name] = queue.get(timeout=remaining)
            except Exception:
                out[name] = None
            process.join(timeout=1)
            if process.is_alive():
                process.kill()
                process.join()
        for name, result in out.items():  # fast ones again, alone: the concurrent runs slowed them up to 5x
            if result is not None and result[0] != "error" and result[0] < SEQUENTIAL_BELOW_S:
                function, args = self.functions[name]
                _warm_up(function, args)
                out[name] = (statistics.median(function(*args)[0] for _ in range(5)), result[1])
        return out


# ---------------------------------------------------------------------- GPU --

def _time_gpu(fn, repeats):
    import cupy

    fn()  # warm-up: compilation, memory pool
    times, out = [], None
    for _ in range(repeats):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _fmt(seconds) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _cell(result, limit, ours_time, ours_obj):
    """Time, speed-up and whether the objective agrees, for one baseline result."""
    if result is None:
        return f"> {limit:.0f} s", f"> {limit / ours_time:.0f}×", None
    if result[0] == "error":
        return result[1], "—", None
    seconds, objective = result
    agree = abs(objective - ours_obj) <= 1e-9 * max(1.0, abs(objective))
    return _fmt(seconds), f"{seconds / ours_time:.0f}×", agree


def generous_table(sizes, steps, limit=20.0, baseline_max_n=100_000, seed=0) -> str:
    import cupy

    from tracker import lap
    from tracker.lap import auction

    header = ("| nodes | f | candidates / row | auction (GPU) | scipy sparse | vs scipy | scipy route | vs route "
              "| lap.lapmod | vs lapmod | exact | phases / forward / reverse rounds / global updates (first try) |")
    lines = [header, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---|"]
    for n in sizes:
        for step in steps:
            d_rows, d_cols, d_cost, shape, un = generous_gate_instance(n, step, seed=seed + n, backend="gpu")
            rows, cols, cost = d_rows.get(), d_cols.get(), d_cost.get()
            jobs = {}
            if n <= baseline_max_n:
                jobs = {"scipy": (_scipy_whole, (rows, cols, cost, shape, un)),
                        "route": (_scipy_route, (rows, cols, cost, shape, un))}
                if HAVE_LAPMOD:
                    jobs["lapmod"] = (_lapmod_gated, (rows, cols, cost, shape, un))
            baselines = _Baselines(jobs, limit)
            t, (ri, ci) = _time_gpu(lambda: lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction"),
                                    3 if n < 1_000_000 else 1)
            stats = dict(auction.LAST_STATS)
            ours = gated_objective(rows, cols, cost, shape, un, ri, ci)
            lines.append(_result_row(n, step, len(rows) / shape[0], t, ours, baselines.results(), jobs,
                                     ("scipy", "route", "lapmod"), limit, stats))
            print(lines[-1], flush=True)
            del d_rows, d_cols, d_cost
            cupy.get_default_memory_pool().free_all_blocks()
    return "\n".join(lines)


def _result_row(n: int, step: float, per_row: float, t: float, ours: float, got: dict, jobs: dict,
                names: tuple[str, ...], limit: float, stats: dict) -> str:
    """One table row: our time, each baseline's time and ratio (or "not run"), exactness, the auction's rounds."""
    cells, agree = [], []
    for name in names:
        if name not in jobs:
            cells += ["not run", "—"]
            continue
        time_cell, speed, ok = _cell(got[name], limit, t, ours)
        cells += [time_cell, speed]
        if ok is not None:
            agree.append(ok)
    exact = "—" if not agree else ("yes" if all(agree) else "**NO**")
    rounds = (f"{stats.get('phases', 0)} / {stats.get('forward_rounds', 0)} / "
              f"{stats.get('reverse_rounds', 0)} / {stats.get('global_updates', 0)} ({stats.get('first_try', '—')})")
    return f"| {n:,} | {step} | {per_row:.1f} | {_fmt(t)} | " + " | ".join(cells) + f" | {exact} | {rounds} |"


def full_matching_table(sizes, steps, limit=20.0, baseline_max_n=100_000, seed=0) -> str:
    import cupy

    from tracker import lap
    from tracker.lap import auction

    lines = ["| nodes | f | candidates / row | auction (GPU) | scipy | vs scipy | lap.lapmod | vs lapmod | exact "
             "| phases / forward / reverse rounds / global updates (first try) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---|"]
    for n in sizes:
        for step in steps:
            d_rows, d_cols, d_cost, shape = full_matching_instance(n, step, seed=seed + n, backend="gpu")
            rows, cols, cost = d_rows.get(), d_cols.get(), d_cost.get()
            del d_rows, d_cols, d_cost
            graph = sp.csr_array((cost, (rows, cols)), shape=shape)
            jobs = {}
            if n <= baseline_max_n:
                jobs = {"scipy": (_scipy_full, (rows, cols, cost, shape))}
                if HAVE_LAPMOD:
                    jobs["lapmod"] = (_lapmod_full, (rows, cols, cost, shape))
            baselines = _Baselines(jobs, limit)
            t, (ri, ci) = _time_gpu(lambda: lap.min_weight_full_bipartite_matching(graph, solver="auction"),
                                    3 if n < 1_000_000 else 1)
            stats = dict(auction.LAST_STATS)
            ours = float(graph[ri, ci].sum())
            lines.append(_result_row(n, step, len(rows) / shape[0], t, ours, baselines.results(), jobs,
                                     ("scipy", "lapmod"), limit, stats))
            print(lines[-1], flush=True)
            cupy.get_default_memory_pool().free_all_blocks()
    return "\n".join(lines)


def ablation(cases=((100_000, 0.3), (10_000, 0.5), (100_000, 0.5)), configs=None, seed=0) -> str:
    """Time and rounds of ``solve_gated(solver="auction")`` under settings of ``tracker.lap.gated_auction``."""
    from tracker import lap
    from tracker.lap import auction, gated_auction

    configs = configs or [{}, {"FIRST_TRY_ROUNDS": 0}, {"ALPHA": 8}, {"ALPHA": 64}, {"FIRST_EPS": 0.1},
                          {"FIRST_EPS": 0.005}, {"SMALL": 16}, {"SMALL": 256}, {"GS_ROWS": 0}, {"GS_ROWS": 32}]
    lines = ["| nodes | f | setting | time | phases / forward / reverse rounds |", "|---:|---:|---|---:|---|"]
    for n, step in cases:
        d_rows, d_cols, d_cost, shape, un = generous_gate_instance(n, step, seed=seed + n, backend="gpu")
        for config in configs:
            saved = {k: getattr(gated_auction, k) for k in config}
            try:
                for k, v in config.items():
                    setattr(gated_auction, k, v)
                t, _ = _time_gpu(lambda: lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction"), 2)
            finally:
                for k, v in saved.items():
                    setattr(gated_auction, k, v)
            st = auction.LAST_STATS
            label = ", ".join(f"{k}={v}" for k, v in config.items()) or "default"
            lines.append(f"| {n:,} | {step} | {label} | {_fmt(t)} | {st.get('phases')} / {st.get('forward_rounds')} / "
                         f"{st.get('reverse_rounds')} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def tune(cases=((100_000, 0.3), (10_000, 0.5)), seed=0) -> tuple[dict, str]:
    """The fastest (THREADS, SMALL) of ``tracker.lap.gated_auction`` on ``cases`` (sum of the times); it is left
    set for the rest of the process. Returns the setting and the table of the trials."""
    from tracker.lap import gated_auction

    configs = [{"THREADS": t, "SMALL": s} for t in (256, 1024) for s in (64, 256)]
    text = ablation(cases, configs, seed=seed)
    totals = [0.0] * len(configs)
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        k = [", ".join(f"{a}={b}" for a, b in c.items()) for c in configs].index(cells[2])
        value, unit = cells[3].split()
        totals[k] += float(value) * (1e-3 if unit == "ms" else 1.0)
    best = configs[totals.index(min(totals))]
    for name, value in best.items():
        setattr(gated_auction, name, value)
    return best, text


def _groups(sizes, steps: str, big_steps: str):
    """(sizes, steps) pairs: below 1M nodes every step, from 1M on ``big_steps`` only."""
    small, big = [n for n in sizes if n < 1_000_000], [n for n in sizes if n >= 1_000_000]
    out = [(small, [float(s) for s in steps.split(",")])] if small else []
    return out + ([(big, [float(s) for s in big_steps.split(",")])] if big else [])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--steps", default="0.1,0.3,0.5,0.7")
    parser.add_argument("--full-steps", default="0.1,0.3,0.5")
    parser.add_argument("--big-steps", default="0.1,0.3", help="steps at sizes of 1M and more (both families)")
    parser.add_argument("--limit", type=float, default=20.0, help="seconds for each CPU baseline")
    parser.add_argument("--baseline-max-n", type=int, default=100_000)
    parser.add_argument("--only", choices=("generous", "full", "ablation"), default=None)
    parser.add_argument("--tune", action="store_true",
                        help="first pick the fastest THREADS and SMALL of gated_auction (tune()) and keep them")
    parser.add_argument("--out", help="also write the markdown here")
    args = parser.parse_args(argv)
    import cupy

    if args.only == "ablation":
        text = ablation()
        if args.out:
            Path(args.out).write_text(text + "\n")
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    parts = [f"Device: {device}; lap.lapmod {'importable' if HAVE_LAPMOD else 'not importable (not run)'}; "
             f"CPU baselines stopped at {args.limit:.0f} s, not run above {args.baseline_max_n:,} nodes."]
    if args.tune:
        best, text = tune()
        parts += ["", f"Tuning (kept: {best}):", "", text]
    if args.only in (None, "generous"):
        parts += ["", "### Generous gates (`solve_gated`)", ""]
        for group, steps in _groups(sizes, args.steps, args.big_steps):
            parts.append(generous_table(group, steps, args.limit, args.baseline_max_n))
    if args.only in (None, "full"):
        parts += ["", "### Full matchings (`min_weight_full_bipartite_matching`)", ""]
        for group, steps in _groups(sizes, args.full_steps, args.big_steps):
            parts.append(full_matching_table(group, steps, args.limit, args.baseline_max_n))
    text = "\n".join(parts) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
