"""Linking on material our own simulator did not make: ISBI-2012-like families × detection levels, vs the peers.

Every cell is one scenario family of :mod:`tracker.scenarios` (2D or 3D) degraded to detections at one
detection level (exact; noisy: σ 0.5 px, 5 % missed, 2 false/frame; hard: σ 1 px, 20 % missed, 10
false/frame). Every tracker links the same detections with the same gate, in-process (imports and numba JIT
done before timing):

- ours with defaults, and ours in plain LAP mode (``motion="none", adaptive_radius=False, max_gap=0``);
- trackpy 0.7 (``memory`` 0 and 2), LapTrack 0.17 (gap closing 0 and 2 frames).

The gate is the same for all: 1.5 × the 99th percentile of the true per-frame displacements (what a user who
knows their data would set). Scores: link F1 given the detections (``link_f1_given_detections`` of
:func:`tracker.metrics.evaluate`: a link is right when its ends match two points of one true track with no
*detected* point of that track between them, so a link across a missed detection counts as right — the only
fair score where detections are missing), ISBI 2012 α and β (Chenouard et al. 2014, ε = match distance), wall
time of the linking call. On exact detections it equals the plain link F1.

Usage::

    python benchmarks/generalization_bench.py                 # the grid, appended to results/generalization_runs.jsonl
    python benchmarks/generalization_bench.py --report        # results/generalization.md from the runs
    python benchmarks/generalization_bench.py --families vesicle --levels hard --trackers ours
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = RESULTS / "generalization_runs.jsonl"
REPORT = RESULTS / "generalization.md"

FAMILIES = {  # name: (scenario, ndim)
    "vesicle-2d": ("vesicle", 2),
    "receptor-2d": ("receptor", 2),
    "switching-2d": ("switching", 2),
    "microtubule-2d": ("microtubule", 2),
    "vesicle-3d": ("vesicle", 3),
    "virus-3d": ("virus", 3),
}
LEVELS = ("exact", "noisy", "hard")
TRACKERS = ("ours", "ours-plain", "trackpy-m0", "trackpy-m2", "laptrack-g0", "laptrack-g2")
PEERS = ("trackpy-m0", "trackpy-m2", "laptrack-g0", "laptrack-g2")
MIN_MATCH_UM = 0.3
"""Smallest match distance (µm): 3 pixels of y/x (ISBI's ε is a few pixels)."""


def match_distance_um(detections_level: str, ndim: int) -> float:
    """3 σ of the level's localisation noise along the worst axis (z in 3D: 0.3 µm pixels), at least
    :data:`MIN_MATCH_UM`: a detection is matched to its own true point whatever the noise."""
    from tracker.scenarios import DETECTION_LEVELS

    worst_pixel_um = 0.3 if ndim == 3 else 0.1
    return max(MIN_MATCH_UM, 3.0 * DETECTION_LEVELS[detections_level].sigma_px * worst_pixel_um)


def make_cell(family: str, level: str, n_particles: int, n_frames: int, seed: int):
    from tracker.scenarios import degrade, simulate_scenario

    scenario, ndim = FAMILIES[family]
    truth = simulate_scenario(scenario, n_particles, n_frames, ndim=ndim, seed=seed)
    detections = degrade(truth, level, seed=seed + 1000)
    axes = [a for a in ("z", "y", "x") if a in truth]
    positions = np.column_stack([truth[a] for a in axes])
    same = truth["track_id"][1:] == truth["track_id"][:-1]
    steps = np.linalg.norm(np.diff(positions, axis=0)[same], axis=1)
    gate = 1.5 * float(np.quantile(steps, 0.99))
    return truth, detections, gate


def link_with(tracker: str, detections: dict, gate: float) -> dict:
    axes = [a for a in ("z", "y", "x") if a in detections]
    if tracker.startswith("ours"):
        from tracker.linking import link_detections

        options = dict(motion="none", adaptive_radius=False, max_gap=0) if tracker == "ours-plain" else {}
        return link_detections(detections, gate, solver="scipy", **options)
    import pandas as pd

    frame = pd.DataFrame({k: detections[k] for k in ("frame", *axes)})
    gap = int(tracker[-1])
    if tracker.startswith("trackpy"):
        import trackpy

        trackpy.quiet()
        linked = trackpy.link(frame, search_range=gate, pos_columns=axes, t_column="frame", memory=gap,
                              link_strategy="numba", adaptive_stop=0.05 * gate, adaptive_step=0.95)
        ids = linked["particle"]
    else:
        from laptrack import LapTrack

        model = LapTrack(metric="sqeuclidean", cutoff=gate**2,
                         gap_closing_cutoff=gate**2 if gap else False, gap_closing_max_frame_count=gap,
                         splitting_cutoff=False, merging_cutoff=False)
        linked, _, _ = model.predict_dataframe(frame, coordinate_cols=axes, frame_col="frame",
                                               only_coordinate_cols=False)
        ids = linked["track_id"]
    return {"track_id": np.asarray(ids, dtype=np.int64), **{k: np.asarray(linked[k]) for k in ("frame", *axes)}}


def warm_up(trackers) -> None:
    """Import every tracker and JIT-compile trackpy's numba linker on a toy problem, before any timing."""
    toy = {"frame": np.repeat(np.arange(3), 3), "y": np.tile([0.0, 5.0, 10.0], 3), "x": np.zeros(9)}
    for tracker in trackers:
        link_with(tracker, toy, 1.0)


def run(args) -> list[dict]:
    from tracker.metrics import evaluate

    warm_up(args.trackers)
    records = []
    for family in args.families:
        for level in args.levels:
            for seed in args.seeds:
                truth, detections, gate = make_cell(family, level, args.particles, args.frames, seed)
                match_um = match_distance_um(level, FAMILIES[family][1])
                for tracker in args.trackers:
                    start = time.perf_counter()
                    try:
                        tracks = link_with(tracker, detections, gate)
                    except Exception as error:  # a peer that fails on a cell is reported, not fatal
                        records.append(dict(family=family, level=level, seed=seed, tracker=tracker,
                                            error=f"{type(error).__name__}: {error}"[:200]))
                        continue
                    seconds = time.perf_counter() - start
                    scores = evaluate(tracks, truth, match_um)
                    record = dict(family=family, level=level, seed=seed, tracker=tracker, gate_um=gate,
                                  particles=args.particles, frames=args.frames, seconds=seconds,
                                  link_f1=scores["link_f1_given_detections"], link_f1_strict=scores["link_f1"],
                                  alpha=scores["alpha"], beta=scores["beta"], match_um=match_um,
                                  label=args.label, machine=platform.node())
                    records.append(record)
                    print(f"{family:15s} {level:6s} s{seed} {tracker:12s} F1 {record['link_f1']:.4f} "
                          f"α {record['alpha']:.3f} β {record['beta']:.3f} {seconds:6.2f} s", flush=True)
    return records


def report(records: list[dict], label: str | None) -> str:
    """The table: per cell, mean over seeds; ours against the best peer configuration."""
    if label:
        records = [r for r in records if r.get("label") == label]
    records = [r for r in records if "error" not in r]
    cells = sorted({(r["family"], r["level"]) for r in records},
                   key=lambda c: (list(FAMILIES).index(c[0]), LEVELS.index(c[1])))
    lines = ["| family | level | ours F1 / α | plain F1 | best peer F1 (who) | best peer α | ours − best F1 | "
             "ours time | trackpy-m2 time |", "|" + "---|" * 9]
    hard_margins = []
    for family, level in cells:
        def mean(tracker, key):
            values = [r[key] for r in records if (r["family"], r["level"], r["tracker"]) == (family, level, tracker)]
            return float(np.mean(values)) if values else float("nan")

        peers = {p: mean(p, "link_f1") for p in PEERS}
        best = max(peers, key=lambda p: -1 if np.isnan(peers[p]) else peers[p])
        best_alpha = max(mean(p, "alpha") for p in PEERS)
        ours = mean("ours", "link_f1")
        margin = ours - peers[best]
        if level == "hard":
            hard_margins.append(margin)
        lines.append(f"| {family} | {level} | {ours:.4f} / {mean('ours', 'alpha'):.3f} | "
                     f"{mean('ours-plain', 'link_f1'):.4f} | {peers[best]:.4f} ({best}) | {best_alpha:.3f} | "
                     f"{margin:+.4f} | {mean('ours', 'seconds'):.2f} s | {mean('trackpy-m2', 'seconds'):.2f} s |")
    if hard_margins:
        lines.append("")
        lines.append(f"Mean margin over the hard cells: {np.mean(hard_margins):+.4f} link F1.")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--levels", nargs="+", default=list(LEVELS), choices=LEVELS)
    parser.add_argument("--trackers", nargs="+", default=list(TRACKERS), choices=TRACKERS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--particles", type=int, default=500)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--label", default=time.strftime("%Y-%m-%d"))
    parser.add_argument("--report", action="store_true", help="write results/generalization.md from the runs")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    if args.report:
        records = [json.loads(line) for line in RUNS.read_text().splitlines() if line.strip()]
        text = report(records, args.label)
        header = (f"# Linking on independent scenario families (`benchmarks/generalization_bench.py`)\n\n"
                  f"Runs labelled {args.label}; {args.particles} particles, {args.frames} frames, CPU of this "
                  f"machine, in-process.\n\n")
        REPORT.write_text(header + text + "\n")
        print(text)
        return
    records = run(args)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        with RUNS.open("a") as handle:
            for record in records:
                handle.write(json.dumps(record) + "\n")
    print(report(records, None))


if __name__ == "__main__":
    sys.exit(main())
