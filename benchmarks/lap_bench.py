"""Dense LAP benchmark: scipy against every registered GPU solver that has a ``dense`` backend.

Instance classes (those of Date & Nagi / Kawtikwar et al.): uniform integers in
[0, n/10], [0, n], [0, 10n]; uniform floats in [0, 1); geometric 3-D (squared
distances between a point cloud and its displaced, shuffled copy).

Each cell: median of ``--repeats`` runs after ``--warmup`` runs, timed with CUDA
events, both "device" (the matrix already a CuPy array, result left on the GPU)
and "with transfers" (NumPy in, NumPy out). scipy is timed with perf_counter.
The objective of every GPU result is compared with scipy's (exact on integers,
1e-9 relative on floats) when scipy ran.

Examples::

    PYTHONPATH=. python3 benchmarks/lap_bench.py --quick
    PYTHONPATH=. python3 benchmarks/lap_bench.py --sizes 1000,4096,8192,20000 --markdown benchmarks/results/lap_dense_h100.md

If ``benchmarks/sparse_section.py`` exists and defines ``sparse_section(quick: bool) -> str``
(a markdown section), it is appended to the output (``--no-sparse``: not). ``--markdown`` is
rewritten after every class and size, so a run stopped by a time limit keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import inspect
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tracker.lap as lap  # noqa: E402
from tracker.lap._registry import _SOLVERS  # noqa: E402

CLASSES = ("int_n10", "int_n", "int_10n", "float", "geometric")
CLASS_LABEL = {
    "int_n10": "int [0, n/10]",
    "int_n": "int [0, n]",
    "int_10n": "int [0, 10n]",
    "float": "float [0, 1)",
    "geometric": "geometric 3D",
}


def make_instance(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "int_n10":
        return rng.integers(0, n // 10 + 1, (n, n)).astype(np.float64)
    if kind == "int_n":
        return rng.integers(0, n + 1, (n, n)).astype(np.float64)
    if kind == "int_10n":
        return rng.integers(0, 10 * n + 1, (n, n)).astype(np.float64)
    if kind == "float":
        return rng.random((n, n))
    if kind == "geometric":
        side = 10.0 * n ** (1 / 3)  # about one point per 1000 um^3
        p = rng.random((n, 3)) * side
        q = (p + rng.normal(0.0, 2.0, p.shape))[rng.permutation(n)]
        return ((p[:, None, :] - q[None, :, :]) ** 2).sum(-1)
    raise ValueError(kind)


def exact(name: str) -> bool:
    """Whether solver ``name`` is exact (``auto`` picks exact solvers only)."""
    return name == "auto" or _SOLVERS[name].exact


def gpu_dense_solvers() -> list[str]:
    return [s.name for s in _SOLVERS.values() if s.gpu and s.dense is not None]


def objective_ok(cost, rows, cols, ref, integral) -> bool:
    got = float(cost[rows, cols].sum())
    if integral:
        return got == ref
    return abs(got - ref) <= 1e-9 * max(1.0, float(np.abs(cost[rows, cols]).sum()))


def time_gpu(cp, fn, repeats, warmup):
    start, end = cp.cuda.Event(), cp.cuda.Event()
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        start.record()
        out = fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times), out


def solver_stats(name, cost_gpu):
    if name not in _SOLVERS:  # "auto"
        return None
    dense = _SOLVERS[name].dense
    try:
        if "stats" not in inspect.signature(dense).parameters:
            return None
    except (TypeError, ValueError):
        return None
    stats: dict = {}
    dense(cost_gpu, stats=stats)
    return stats


def fmt_t(t):
    if t is None:
        return "—"
    return f"{t * 1e3:.1f} ms" if t < 10 else f"{t:.1f} s"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4096,8192,20000")
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--solvers", default="",
                    help="comma-separated GPU solvers, 'auto' included (default: every GPU dense solver)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--scipy-max-n", type=int, default=8192, help="skip scipy above this n")
    ap.add_argument("--max-seconds", type=float, default=20.0,
                    help="skip a solver's larger sizes of a class once one run exceeds this")
    ap.add_argument("--quick", action="store_true", help="sizes 1000,4096, 3 repeats")
    ap.add_argument("--no-transfers", action="store_true", help="skip the NumPy-in/NumPy-out timing")
    ap.add_argument("--markdown", default="",
                    help="write the markdown report here (rewritten after every class and size, so a run that "
                         "is stopped keeps what it measured)")
    ap.add_argument("--no-sparse", action="store_true", help="leave out the sparse gated and DGS sections")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = "1000,4096", 3

    import cupy as cp

    sizes = [int(s) for s in args.sizes.split(",") if s]
    classes = [c for c in args.classes.split(",") if c]
    solvers = [s for s in args.solvers.split(",") if s] or gpu_dense_solvers()
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    header = [
        "# Dense LAP benchmark: scipy vs GPU solvers",
        "",
        f"- date: {datetime.date.today().isoformat()}; device: {dev}; CPU: {cpu} (scipy {scipy.__version__}, "
        f"numpy {np.__version__}, cupy {cp.__version__}, python {platform.python_version()})",
        f"- median of {args.repeats} runs after {args.warmup} warm-up (scipy: 3 runs at n = 4096, 1 above; GPU: 2 runs "
        "at n >= 8192, 1 at 20000; 1 run with transfers at n >= 8192, no warm-up there); "
        "GPU times by CUDA events through `tracker.lap.linear_sum_assignment` (front-end checks included)",
        "- **device**: CuPy matrix in, CuPy result out; **+transfers**: NumPy in, NumPy out. "
        "speed-up = scipy time / device time. exact = objective equals scipy's (integers exactly, floats to 1e-9).",
    ]
    rows_out = []
    profile = []
    skip: set[tuple[str, str]] = set()
    for kind in classes:
        for n in sizes:
            cost = make_instance(kind, n, args.seed + n)
            integral = kind.startswith("int")
            t_scipy = ref = None
            ref_name = "scipy"
            if n <= args.scipy_max_n:
                reps = args.repeats if n < 4096 else (min(args.repeats, 3) if n < 8192 else 1)
                ts = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    r, c = scipy.optimize.linear_sum_assignment(cost)
                    ts.append(time.perf_counter() - t0)
                t_scipy = statistics.median(ts)
                ref = float(cost[r, c].sum())
            rows_out.append(dict(kind=kind, n=n, solver="scipy", t_dev=t_scipy, t_xfer=t_scipy,
                                 ok=True if ref is not None else None, ratio=1.0 if ref is not None else None))
            print(f"{kind:10s} n={n:6d} scipy            {fmt_t(t_scipy):>10s}", flush=True)
            cost_gpu = cp.asarray(cost)
            for name in solvers:
                if (name, kind) in skip:
                    rows_out.append(dict(kind=kind, n=n, solver=name, t_dev=None, t_xfer=None, ok=None,
                                         ratio=None, note="skipped (slower than --max-seconds at a smaller n)"))
                    continue
                try:
                    # large n: fewer repeats (the kernels are compiled by the smaller sizes run first)
                    # (a warm-up at every size: a first call also pays the memory pool's first allocations,
                    # gigabytes at n = 20000, which a tracker solving frame after frame does not)
                    reps = args.repeats if n < 8192 else (min(args.repeats, 2) if n < 20000 else 1)
                    warm = args.warmup
                    t_dev, (r_g, c_g) = time_gpu(
                        cp, lambda: lap.linear_sum_assignment(cost_gpu, solver=name), reps, warm)
                    t_x = None
                    if not args.no_transfers:
                        t_x, _ = time_gpu(cp, lambda: lap.linear_sum_assignment(cost, solver=name),
                                          reps if n < 8192 else 1, 0)
                    note = ""
                    if ref is None and exact(name):
                        # scipy not run (large n): the first exact GPU solver is the others' reference
                        ref, ref_name = float(cost[r_g.get(), c_g.get()].sum()), name
                        ok, note = None, "reference of the exact check (scipy not run)"
                    else:
                        ok = None if ref is None else objective_ok(cost, r_g.get(), c_g.get(), ref, integral)
                        if ref_name != "scipy":
                            note = f"objective vs {ref_name}"
                    if ok is False and not exact(name):
                        # A heuristic (DGS): report its optimality gap, not a failure.
                        excess = float(cost[r_g.get(), c_g.get()].sum()) - ref
                        ok, note = None, (f"heuristic: {100 * excess / abs(ref):.3f} % above optimal" if ref
                                          else f"heuristic: objective {excess:g}, optimum 0")
                except Exception as error:  # report, keep going
                    t_dev = t_x = ok = None
                    note = f"error: {type(error).__name__}: {error}"[:120]
                ratio = (t_scipy / t_dev) if (t_scipy and t_dev) else None
                rows_out.append(dict(kind=kind, n=n, solver=name, t_dev=t_dev, t_xfer=t_x, ok=ok, ratio=ratio,
                                     note=note))
                print(f"{kind:10s} n={n:6d} {name:16s} {fmt_t(t_dev):>10s} xfer {fmt_t(t_x):>10s} "
                      f"x{ratio or float('nan'):.2f} exact={ok} {note}", flush=True)
                if t_dev is not None and t_dev > args.max_seconds:
                    skip.add((name, kind))
                if t_dev is not None:
                    st = solver_stats(name, cost_gpu)
                    if st:
                        profile.append((kind, n, name, st))
            del cost_gpu
            cp.get_default_memory_pool().free_all_blocks()
            if args.markdown:
                write_atomically(args.markdown, "\n".join(
                    dense_report(header, rows_out, profile) + ["", "(partial: the run had not finished)"]) + "\n")

    lines = dense_report(header, rows_out, profile)
    sparse_path = Path(__file__).with_name("sparse_section.py")
    if sparse_path.exists() and not args.no_sparse:
        try:
            spec = importlib.util.spec_from_file_location("sparse_section", sparse_path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if hasattr(module, "sparse_section"):
                lines += ["", module.sparse_section(quick=args.quick)]
        except Exception as error:  # another engineer's module: report, do not fail the dense run
            lines += ["", f"(sparse section failed: {type(error).__name__}: {error})"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        write_atomically(args.markdown, text)
    return 0


def dense_report(header: list[str], rows_out: list[dict], profile: list) -> list[str]:
    """Markdown lines of the dense table (and the solver profile) measured so far."""
    lines = header + [
        "",
        "| class | n | solver | device | +transfers | speed-up vs scipy | exact | note |",
        "|---|---:|---|---:|---:|---:|:---:|---|",
    ]
    for r in rows_out:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.1f}x"
        ok = {True: "yes", False: "**NO**", None: "—"}[r["ok"]]
        lines.append(f"| {CLASS_LABEL[r['kind']]} | {r['n']} | {r['solver']} | {fmt_t(r['t_dev'])} | "
                     f"{fmt_t(r['t_xfer'])} | {ratio} | {ok} | {r.get('note', '')} |")
    if profile:
        lines += ["", "## Solver profile (one extra run each)", "",
                  "| class | n | solver | stats |", "|---|---:|---|---|"]
        for kind, n, name, st in profile:
            txt = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in st.items())
            lines.append(f"| {CLASS_LABEL[kind]} | {n} | {name} | {txt} |")
    return lines


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (no half-written report)."""
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, target)


if __name__ == "__main__":
    raise SystemExit(main())
