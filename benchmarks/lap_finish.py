"""Where the gated auction's rounds go, and what the shortest-path finisher (``tracker/lap/gated_finish``) saves.

For each generous-gate instance (``lap_instances.generous_gate_instance``, gated on the GPU) and each setting
of ``tracker.lap.gated_auction`` (``FINISH_ROWS``, ``SMALL``, ...): the median time of ``solve_gated`` (3 runs
after a warm-up; 1 at 1M nodes), the objective (equal across settings: every setting is exact; at 10k nodes
also checked against SciPy), and the counters: phases, forward / reverse rounds (of which grid-wide), and
shortest-path searches, global price updates (and their label-correcting rounds). ``--phases`` adds the
per-phase table of every setting (with the milliseconds of each phase's launch). ::

    PYTHONPATH=.:tests python benchmarks/lap_finish.py --cases 100000:0.5,1000000:0.3 \
        --settings FINISH_ROWS=0 FINISH_ROWS=64 --phases

A case is ``nodes:f`` or ``nodes:f:family`` (``lap_instances.FAMILIES``: the point clouds the settings were not
tuned on, 2D, clustered, mixed mobilities, drift, ...); the family is printed after ``f``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lap_instances import gated_objective, generous_gate_instance  # noqa: E402


def _parse_setting(text: str) -> dict:
    out = {}
    for part in filter(None, text.split(",")):
        key, value = part.split("=")
        out[key] = float(value) if "." in value else int(value)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="10000:0.5,100000:0.3,100000:0.5")
    parser.add_argument("--settings", nargs="*", default=["FINISH_ROWS=0", "FINISH_ROWS=64"])
    parser.add_argument("--phases", action="store_true")
    parser.add_argument("--repeats", type=int, default=0, help="timed runs (default 3, 1 at 1M nodes)")
    parser.add_argument("--no-warmup", action="store_true", help="no untimed run first")
    parser.add_argument("--scipy-max-n", type=int, default=10_000)
    parser.add_argument("--out", help="also write the markdown here")
    args = parser.parse_args(argv)
    import cupy

    from tracker import lap
    from tracker.lap import auction, gated_auction

    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    lines = [f"Device: {device}", "",
             "| nodes | f | cand/row | setting | time | objective | exact | phases | fwd rounds (grid) | "
             "rev rounds (grid) | fwd / rev paths | global updates (rounds) |",
             "|---:|---:|---:|---|---:|---:|:---:|---:|---|---|---|---|"]
    phase_tables = []
    print("\n".join(lines), flush=True)
    for case in args.cases.split(","):
        n, step, family = int(case.split(":")[0]), float(case.split(":")[1]), (case.split(":")[2:] or ["uniform"])[0]
        d_rows, d_cols, d_cost, shape, un = generous_gate_instance(n, step, seed=n + int(step * 100), backend="gpu",
                                                                   family=family)
        h_rows, h_cols, h_cost = (cupy.asnumpy(a) for a in (d_rows, d_cols, d_cost))
        ref = None
        if n <= args.scipy_max_n:
            rr, rc = lap.solve_gated(h_rows, h_cols, h_cost, shape, un, solver="scipy")
            ref = gated_objective(h_rows, h_cols, h_cost, shape, un, rr, rc)
        first_obj = None
        for k, text in enumerate(args.settings):
            setting = _parse_setting(text)
            saved = {key: getattr(gated_auction, key) for key in setting}
            try:
                for key, value in setting.items():
                    setattr(gated_auction, key, value)
                repeats = args.repeats or (1 if n >= 1_000_000 else 3)
                times = []
                if not args.no_warmup:
                    lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction")
                for _ in range(repeats):
                    cupy.cuda.Device().synchronize()
                    t0 = time.perf_counter()
                    out = lap.solve_gated(d_rows, d_cols, d_cost, shape, un, solver="auction")
                    cupy.cuda.Device().synchronize()
                    times.append(time.perf_counter() - t0)
                st = dict(auction.LAST_STATS)
            except Exception as error:  # reported in the table
                lines.append(f"| {n:,} | {step} {family} | | {text} | error: {type(error).__name__}: {error} | | | | | | |")
                print(lines[-1], flush=True)
                continue
            finally:
                for key, value in saved.items():
                    setattr(gated_auction, key, value)
            obj = gated_objective(h_rows, h_cols, h_cost, shape, un, cupy.asnumpy(out[0]), cupy.asnumpy(out[1]))
            first_obj = obj if first_obj is None else first_obj
            target = ref if ref is not None else first_obj
            exact = "yes" if abs(obj - target) <= 1e-9 * max(abs(target), 1.0) else "NO"
            exact += "" if ref is not None else " (vs first)"
            t = statistics.median(times)
            lines.append(f"| {n:,} | {step}{'' if family == 'uniform' else ' ' + family} | {len(h_rows) / shape[0]:.1f} | {text} | {t * 1e3:.1f} ms | {obj:.6f} | "
                         f"{exact} | {st.get('phases')} | "
                         f"{st.get('forward_rounds')} ({st.get('forward_grid_rounds')}) | "
                         f"{st.get('reverse_rounds')} ({st.get('reverse_grid_rounds')}) | "
                         f"{st.get('forward_paths')} / {st.get('reverse_paths')} | "
                         f"{st.get('global_updates')} ({st.get('global_update_rounds')}) |")
            print(lines[-1], flush=True)
            if args.phases and st.get("per_phase"):
                rows = [f"Per phase, {n:,} nodes, f = {step} ({family}), {text}:", "",
                        "| eps | released | fwd rounds | of which grid | fwd paths | stale | rev rounds | "
                        "of which grid | rev paths | fwd labelled | rev labelled | updates | update rounds | stages ms "
                        "(device) | of which updates | of which block 0 | ms |",
                        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
                rows += ["| " + " | ".join(str(v) for v in ph) + " |" for ph in st["per_phase"]]
                phase_ms = sum(ph[-1] for ph in st["per_phase"])
                rows += ["", f"Where the time of the last run went (host timers, ms): total {times[-1] * 1e3:.1f}; "
                         f"component split {st.get('components_split_s', 0) * 1e3:.1f}; from the split to the "
                         f"end of the large components' solve {(st.get('components_total_s', 0) - st.get('components_split_s', 0)) * 1e3:.1f}, of which "
                         f"the asymmetric auction's call {st.get('auction_s', 0) * 1e3:.1f}, its driver "
                         f"{st.get('seconds', 0) * 1e3:.1f}, its phases' launches {phase_ms:.1f}"]
                phase_tables.append("\n".join(rows))
                print(phase_tables[-1], flush=True)
        cupy.get_default_memory_pool().free_all_blocks()
    text = "\n".join(lines + [""] + ["\n\n".join(phase_tables)]) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
