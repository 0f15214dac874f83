"""Sparse gated 3D assignment benchmark (GPU auction vs SciPy) and DGS optimality gap.

Imported by ``benchmarks/lap_bench.py`` (``sparse_section(quick)`` returns a
markdown section) and runnable on its own::

    PYTHONPATH=. python3 benchmarks/sparse_section.py --quick [--out FILE]

Instances (:func:`tracker.simulate.gated_frame_pair`): ``n`` points uniform
in a cube (density 1), a displaced and shuffled copy (3 % of the particles
vanish) with Gaussian steps of RMS length ``step`` x the mean
nearest-neighbour distance, candidate links within a gate of 3 x the RMS step
(cKDTree), cost = squared distance, "no link" cost 1.05 x the largest link
cost. "nodes" below = particles per frame (the
problem has about 2n nodes).

Baselines: ``scipy.sparse.csgraph.min_weight_full_bipartite_matching`` on the
whole reduced problem ("scipy sparse", the solver the issue compares against,
in a subprocess with a time limit), ``solver="scipy"`` of this package (the
same solver per connected component), and ``lap.lapmod`` when the ``lap``
package is importable.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np
import scipy.sparse as sp

from tracker.simulate import gated_frame_pair

SCIPY_TIME_LIMIT_S = 60.0


def gated_instance(n: int, step: float, seed: int = 0, gate_factor: float = 3.0):
    return gated_frame_pair(n, step, seed=seed, gate_factor=gate_factor)


def objective(rows, cols, cost, shape, un, chosen_r, chosen_c):
    key = rows * shape[1] + cols
    order = np.argsort(key)
    idx = order[np.searchsorted(key[order], np.asarray(chosen_r) * shape[1] + np.asarray(chosen_c))]
    n_links = len(chosen_r)
    return float(cost[idx].sum() + un * (shape[0] - n_links) + un * (shape[1] - n_links))


def _scipy_sparse_worker(rows, cols, cost, shape, un, queue):
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    from tracker.lap._scipy import reduced_problem

    n_rows, n_cols = shape
    r, c, w, rshape = reduced_problem(rows, cols, cost, np.full(n_rows, un), np.full(n_cols, un))
    graph = sp.csr_array((w - w.min() + 1.0, (r, c)), shape=rshape)
    t0 = time.perf_counter()
    ri, ci = min_weight_full_bipartite_matching(graph)
    elapsed = time.perf_counter() - t0
    linked = ci < n_cols
    queue.put((elapsed, ri[linked], ci[linked]))


def scipy_sparse(rows, cols, cost, shape, un, limit=SCIPY_TIME_LIMIT_S):
    """(seconds, rows, cols) of SciPy's sparse solver on the whole problem, or None past ``limit``."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_scipy_sparse_worker, args=(rows, cols, cost, shape, un, queue))
    proc.start()
    try:
        result = queue.get(timeout=limit)
    except Exception:
        result = None
    proc.join(timeout=1)
    if proc.is_alive():
        proc.kill()
        proc.join()
    return result


def _time_gpu(fn, repeats=3):
    import cupy

    fn()  # warm-up (compilation, allocations)
    times = []
    for _ in range(repeats):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def _fmt_s(seconds):
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def gated_table(sizes, steps, scipy_max_n=100_000, repeats=3) -> str:
    import cupy

    from tracker import lap
    from tracker.lap import auction

    try:
        import lap as lap_pkg  # noqa: F401
        have_lapmod = hasattr(lap_pkg, "lapmod")
    except ImportError:
        have_lapmod = False

    from tracker.lap import components_gpu

    lines = [
        "| nodes (per frame) | step | edges | auction (GPU) | auction + components (GPU) | split: single / small "
        "(components) / large edges | scipy sparse | speed-up | scipy per component |"
        + (" lap.lapmod |" if have_lapmod else "") + " rel. objective diff | rounds / phases |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if have_lapmod else "") + "---:|---:|",
    ]
    for n in sizes:
        for step in steps:
            rows, cols, cost, shape, un = gated_instance(n, step, seed=n + int(step * 100))
            d_rows, d_cols, d_cost = cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(cost)
            saved = components_gpu.ENABLED
            try:
                components_gpu.ENABLED = False  # the plain sparse auction on the whole problem
                t_gpu, (gr, gc) = _time_gpu(
                    lambda: lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction"),
                    repeats if n < 1_000_000 else 1,
                )
                stats = dict(auction.LAST_STATS)
                components_gpu.ENABLED = True  # split into components first (components_gpu.py)
                t_cmp, (kr, kc) = _time_gpu(
                    lambda: lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction"),
                    repeats if n < 1_000_000 else 1,
                )
                cst = dict(components_gpu.LAST_STATS)
            finally:
                components_gpu.ENABLED = saved
            obj_gpu = objective(rows, cols, cost, shape, un, gr, gc)
            obj_cmp = objective(rows, cols, cost, shape, un, kr, kc)
            split = (f"{cst.get('single_edges', 0):,} / {cst.get('small_edges', 0):,} "
                     f"({cst.get('small_components', 0):,}) / {cst.get('large_edges', 0):,}")
            ref_obj = None
            t_sp = None
            if n <= scipy_max_n:
                res = scipy_sparse(rows, cols, cost, shape, un)
                if res is not None:
                    t_sp = res[0]
                    ref_obj = objective(rows, cols, cost, shape, un, res[1], res[2])
            t_comp = None
            if n <= scipy_max_n:
                t0 = time.perf_counter()
                cr, cc = lap.solve_gated(rows, cols, cost, shape, un, solver="scipy")
                t_comp = time.perf_counter() - t0
                if ref_obj is None:
                    ref_obj = objective(rows, cols, cost, shape, un, cr, cc)
            lapmod_cell = ""
            if have_lapmod:
                lapmod_cell = f" {_fmt_s(_lapmod_time(rows, cols, cost, shape, un))} |"
            speed = f"{t_sp / t_gpu:.0f}×" if t_sp else ("not run" if n > scipy_max_n else f"> {SCIPY_TIME_LIMIT_S:.0f} s limit")
            base = ref_obj if ref_obj is not None else obj_gpu  # both GPU objectives against the reference
            rel = f"{max(abs(obj_gpu - base), abs(obj_cmp - base)) / abs(base):.1e}"
            if ref_obj is None:
                rel += " (vs auction)"
            lines.append(
                f"| {n:,} | {step} | {len(rows):,} | {_fmt_s(t_gpu)} | {_fmt_s(t_cmp)} | {split} | {_fmt_s(t_sp)} "
                f"| {speed} | {_fmt_s(t_comp)} |"
                f"{lapmod_cell} {rel} | {stats.get('rounds', 0)} / {stats.get('phases', 0)} |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines)


def _lapmod_time(rows, cols, cost, shape, un):
    """lap.lapmod on the square Jaqaman form (CSR with the "no link" block)."""
    import lap as lap_pkg

    n_rows, n_cols = shape
    n = n_rows + n_cols
    r = np.concatenate([rows, np.arange(n_rows), n_rows + np.arange(n_cols), n_rows + cols])
    c = np.concatenate([cols, n_cols + np.arange(n_rows), np.arange(n_cols), n_cols + rows])
    w = np.concatenate([cost, np.full(n_rows, un), np.full(n_cols, un), np.zeros(len(rows))])
    g = sp.csr_matrix((w, (r, c)), shape=(n, n))
    g.sort_indices()
    t0 = time.perf_counter()
    lap_pkg.lapmod(n, g.data, g.indptr, g.indices)
    return time.perf_counter() - t0


def dgs_instance(cls: str, n: int, rng) -> tuple[np.ndarray, bool]:
    """A dense ``(n, n)`` instance of one DGS benchmark class, and whether it is maximised.

    * ``geom_paper``: the GEOM class as Roverso et al. (2010) use it (after Bus & Tvrdík): ``n`` uniform
      points in [0, 1000]², benefit ``a_ij`` = Euclidean distance between points ``i`` and ``j`` of that one
      set, maximised (the paper's DGS maximises benefits);
    * ``geometric``: a minimisation variant, Euclidean distances between two independent uniform 2D point
      sets (much harder for 2-exchange local search: the optimum is small against the cost range);
    * ``uniform``: i.i.d. uniform costs in [0, 1000);
    * ``jittered3d``: squared distances between a 3D cloud of density 1 and a jittered, shuffled copy (RMS
      step 0.3 per axis: tracking-like).
    """
    if cls == "geom_paper":
        points = rng.random((n, 2)) * 1000
        return np.linalg.norm(points[:, None] - points[None], axis=2), True
    if cls == "geometric":
        a, b = rng.random((n, 2)) * 1000, rng.random((n, 2)) * 1000
        return np.linalg.norm(a[:, None] - b[None], axis=2), False
    if cls == "jittered3d":
        a = rng.random((n, 3)) * n ** (1 / 3)
        b = (a + rng.normal(0, 0.3, a.shape))[rng.permutation(n)]
        return ((a[:, None] - b[None]) ** 2).sum(axis=2), False
    if cls == "uniform":
        return rng.random((n, n)) * 1000, False
    raise ValueError(f"unknown DGS class {cls!r}")


def dgs_table(sizes, repeats=3, classes=("geom_paper", "geometric", "uniform", "jittered3d"), variants=None,
              scipy_max_n=4096, exact_solvers=None) -> str:
    """DGS time and optimality gap against the exact GPU solvers and SciPy on dense classes (:func:`dgs_instance`).

    ``variants``: ``(label, {tracker.lap.dgs attribute: value})`` pairs, one DGS row each (default: the
    module defaults). DGS times are the median of ``repeats`` after a warm-up, each exact solver one run
    after a warm-up. The optimum is SciPy's up to ``scipy_max_n`` (its time in the last column), above it
    the fastest exact GPU solver's (the exact solvers' objectives are compared with each other there).
    ``exact_solvers``: the exact GPU solvers to time (default: all of them).
    """
    import cupy
    import scipy.optimize

    from tracker import lap
    from tracker.lap import dgs

    variants = variants or [("default", {})]
    exact = exact_solvers or [s for s in lap.available_solvers("dense")
                              if s not in ("auto", "dgs") and lap._registry._SOLVERS[s].gpu]
    rng = np.random.default_rng(0)
    lines = [
        "| class | n | DGS variant | DGS | DGS gap | start gap | rounds / swaps | fastest exact GPU | its time "
        "| DGS speed-up | scipy |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for n in sizes:
        for cls in classes:
            cost, maximize = dgs_instance(cls, n, rng)
            sign = -1.0 if maximize else 1.0  # gaps measured in the minimised objective, relative to |optimum|
            d_cost = cupy.asarray(cost)
            opt, t_scipy = None, None
            if n <= scipy_max_n:
                t0 = time.perf_counter()
                ref = scipy.optimize.linear_sum_assignment(cost, maximize=maximize)
                t_scipy = time.perf_counter() - t0
                opt = float(cost[ref].sum())
            best = (None, None)
            for name in exact:
                try:
                    t_ex, (r, c) = _time_gpu(lambda: lap.linear_sum_assignment(d_cost, maximize, solver=name), 1)
                except Exception as error:  # a solver under development
                    print(f"{name} failed on {cls} n={n}: {error}")
                    continue
                value = float(cost[r.get(), c.get()].sum())
                if opt is None:
                    opt = value
                if abs(value - opt) > 1e-9 * abs(opt):
                    print(f"WARNING {name} objective {value!r} != reference {opt!r} on {cls} n={n}")
                print(f"  {cls} n={n} {name}: {_fmt_s(t_ex)}", flush=True)
                if best[1] is None or t_ex < best[1]:
                    best = (name, t_ex)
            for label, settings in variants:
                saved = {key: getattr(dgs, key) for key in settings}
                try:
                    for key, value in settings.items():
                        setattr(dgs, key, value)
                    t_dgs, (r, c) = _time_gpu(lambda: lap.linear_sum_assignment(d_cost, maximize, solver="dgs"),
                                              repeats)
                    st = dict(dgs.LAST_STATS)
                finally:
                    for key, value in saved.items():
                        setattr(dgs, key, value)
                gap = sign * (float(cost[r.get(), c.get()].sum()) - opt) / abs(opt)
                # (LAST_STATS objectives are of the minimised matrix: -benefit when maximising)
                start_gap = (st["init_objective"] - sign * opt) / abs(opt)
                speed = f"{best[1] / t_dgs:.1f}×" if best[1] else "—"
                flag = " (time limit)" if st.get("timed_out") else ""
                lines.append(
                    f"| {cls} | {n} | {label} | {_fmt_s(t_dgs)}{flag} | {gap * 100:.3f} % | {start_gap * 100:.1f} % "
                    f"| {st['rounds']} / {st['swaps']} | {best[0]} | {_fmt_s(best[1])} | {speed} | {_fmt_s(t_scipy)} |"
                )
                switched_gap = (st.get("switched_objective", st["objective"]) - sign * opt) / abs(opt)
                print(lines[-1], f"init_s={st['init_s'] * 1e3:.2f} ms total_s={st['total_s'] * 1e3:.2f} ms "
                      f"polish_s={st.get('polish_s', 0.0) * 1e3:.2f} ms gap_after_switching={switched_gap * 100:.3f} %",
                      flush=True)
    return "\n".join(lines)


def sparse_section(quick: bool = False) -> str:
    """Markdown section: sparse gated 3D table and DGS table (needs CuPy and a GPU)."""
    import cupy

    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    steps = (0.1, 0.3, 0.5)
    parts = [
        f"## Sparse gated 3D assignment ({device})",
        "",
        "Median of 3 runs after a warm-up (1 run at 1M); GPU times include the solve_gated front-end and the copy of the "
        "result to the host. scipy sparse = min_weight_full_bipartite_matching on the whole reduced problem "
        f"(limit {SCIPY_TIME_LIMIT_S:.0f} s; neither SciPy baseline is run above 100k nodes); rel. objective diff against it "
        "(or against solver='scipy' where it did not run).",
        "",
        gated_table(sizes, steps),
        "",
        "## Deep Greedy Switching (heuristic) on dense classes",
        "",
        "Gap = how far the DGS objective is from the optimum, relative to it (classes: `dgs_instance`; geom_paper is "
        "the paper's GEOM, maximised); speed-up = fastest exact GPU solver time / DGS time.",
        "",
        dgs_table([1024, 2048] if quick else [1024, 2048, 4096], scipy_max_n=2048),
    ]
    return "\n".join(parts)


def ablation(n=100_000, step=0.5, configs=None, phases=False):
    """Auction time and rounds for settings of ``tracker.lap.auction`` on one instance (tuning aid).

    ``configs``: dicts of module attributes (default: ALPHA x COST_BITS); ``phases`` also prints the
    rounds and milliseconds of every epsilon phase.
    """
    import cupy

    from tracker import lap
    from tracker.lap import auction

    if configs is None:
        configs = [dict(ALPHA=a, COST_BITS=b) for a, b in ((8, 50), (4, 50), (16, 50), (8, 40), (4, 40))]
    rows, cols, cost, shape, un = gated_instance(n, step, seed=n + int(step * 100))
    d = cupy.asarray(rows), cupy.asarray(cols), cupy.asarray(cost)
    for config in configs:
        saved = {name: getattr(auction, name) for name in config}
        try:
            for name, value in config.items():
                setattr(auction, name, value)
            t, (r, c) = _time_gpu(lambda: lap.solve_gated(*d, shape, un, solver="auction"), 3 if n < 10**6 else 1)
        finally:
            for name, value in saved.items():
                setattr(auction, name, value)
        setting = ", ".join(f"{k}={v}" for k, v in config.items())
        print(f"ablation n={n} step={step} {setting}: {t * 1e3:.1f} ms, rounds={auction.LAST_STATS['rounds']}, "
              f"objective={objective(rows, cols, cost, shape, un, r, c):.12g}", flush=True)
        if phases:
            per_phase = zip(auction.LAST_STATS["phase_rounds"], auction.LAST_STATS["phase_seconds"])
            print("  per phase (rounds, ms): " + ", ".join(f"{k} {s * 1e3:.1f}" for k, s in per_phase), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k and 100k nodes only, smaller DGS sizes")
    parser.add_argument("--out", help="also write the markdown here")
    parser.add_argument("--ablation", action="store_true", help="only the (ALPHA, COST_BITS) ablation")
    args = parser.parse_args()
    if args.ablation:
        ablation(10_000)
        ablation(100_000)
        return
    text = sparse_section(args.quick)
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
