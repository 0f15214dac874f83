"""The gate estimated from the detections (:func:`tracker.linking.gate.estimate_gate`) against the best gate.

Every cell is one set of detections with its ground truth, linked by ``link_detections`` with our defaults
(``solver="scipy"``) at:

- the **estimated** gate (``max_displacement_um=None``);
- a grid of gates, :data:`GRID` times the 99th percentile of the true steps (``q99``): the **oracle** is the best
  of them (it knows the truth);
- the gate of ``benchmarks/generalization_bench.py`` (1.5 × ``q99``, a user who knows their data);
- the old fixed default, 1.0 µm.

Cells, none made for the estimator:

- ``tracker.scenarios`` families (ISBI 2012-like; vesicle, receptor, switching, microtubule in 2D; vesicle and
  virus in 3D with 0.3 µm z pixels) at the detection levels exact / noisy / hard (σ 1 px, 20 % missed, 10 false
  per frame);
- our simulator (:func:`tracker.simulate.simulate_tracks`, persistence 0.5, 3D) at step / nearest-neighbour
  ratios 0.1-0.5, localisation noise 4 % of the spacing;
- trackpy's test situations (``trackpy/tests/test_linking.py``: unit-variance random walks, isolated and
  crowded; pixels read as µm) and a trackpy-tutorial-like field of 2D Brownian particles (σ 1 px per axis) at
  two densities.

Score: link F1 given the detections (:func:`tracker.metrics.evaluate`). Sizes reduced for a shared 2-core
machine: 300 particles × 30 frames per scenario cell (generalization_bench.py: 500 × 40), two seeds.

Usage::

    python benchmarks/gate_bench.py            # the table, written to results/gate_bench.md
    python benchmarks/gate_bench.py --quick    # scenario cells only, not saved
    python benchmarks/gate_bench.py --quick --particles 500 --frames 40 --seeds 3 --append   # a section more
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
REPORT = RESULTS / "gate_bench.md"
GRID = (0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)
TARGET = 0.005
SCENARIO_FAMILIES = {"vesicle-2d": ("vesicle", 2), "receptor-2d": ("receptor", 2), "switching-2d": ("switching", 2),
                     "microtubule-2d": ("microtubule", 2), "vesicle-3d": ("vesicle", 3), "virus-3d": ("virus", 3)}


def true_steps(truth: dict) -> np.ndarray:
    """Lengths (µm) of the true steps between consecutive frames of one track."""
    axes = [a for a in ("z", "y", "x") if a in truth]
    order = np.lexsort((truth["frame"], truth["track_id"]))
    positions = np.column_stack([np.asarray(truth[a], dtype=float)[order] for a in axes])
    track, frame = np.asarray(truth["track_id"])[order], np.asarray(truth["frame"])[order]
    same = (track[1:] == track[:-1]) & (frame[1:] - frame[:-1] == 1)
    return np.linalg.norm(np.diff(positions, axis=0)[same], axis=1)


def scenario_cells(particles: int, frames: int, seeds):
    from tracker.scenarios import DETECTION_LEVELS, degrade, simulate_scenario

    for family, (scenario, ndim) in SCENARIO_FAMILIES.items():
        for level in ("exact", "noisy", "hard"):
            for seed in seeds:
                truth = simulate_scenario(scenario, particles, frames, ndim=ndim, seed=seed)
                detections = degrade(truth, level, seed=seed + 1000)
                match = max(0.3, 3.0 * DETECTION_LEVELS[level].sigma_px * (0.3 if ndim == 3 else 0.1))
                yield f"scenario {family}", f"{level}, seed {seed}", truth, detections, match


def simulator_cells():
    from tracker import simulate

    n = 800
    side = (n / 0.554**3) ** (1 / 3)  # (density: a mean nearest-neighbour distance near 1 µm)
    nn = simulate.mean_nearest_neighbour_distance(
        simulate.simulate_tracks(n, 1, (side,) * 3, 1.0, 0.5, margin_um=1.0, seed=3))
    for ratio in (0.1, 0.25, 0.4, 0.5):
        truth = simulate.simulate_tracks(n, 12, (side,) * 3, ratio * nn, 0.5, margin_um=1.0, seed=3)
        rng = np.random.default_rng(3)
        detections = {"frame": np.asarray(truth["frame"])}
        for axis in "zyx":
            detections[axis] = np.asarray(truth[axis]) + rng.normal(0, 0.04 * nn, len(truth["frame"]))
        yield "simulator 3D", f"step/NN {ratio}", truth, detections, 0.3 * nn


def _walks(starts, n_frames, seed):
    rng = np.random.default_rng(seed)
    frame, y, x, track = [], [], [], []
    for i, (x0, y0) in enumerate(starts):
        k = n_frames - i
        frame.append(np.arange(i, n_frames))
        y.append(y0 + rng.standard_normal(k).cumsum())
        x.append(x0 + rng.standard_normal(k).cumsum())
        track.append(np.full(k, i))
    truth = {"track_id": np.concatenate(track), "frame": np.concatenate(frame), "y": np.concatenate(y),
             "x": np.concatenate(x)}
    order = np.random.default_rng(seed + 1).permutation(len(truth["frame"]))
    return truth, {k: truth[k][order] for k in ("frame", "y", "x")}


def trackpy_cells():
    truth, detections = _walks([(100, 100), (200, 100), (100, 200), (200, 200)], 30, seed=0)
    yield "trackpy walks", "isolated (4)", truth, detections, 0.5
    for seed in (0, 1):
        truth, detections = _walks([(10, 11), (10, 18), (14, 15), (20, 21), (13, 13), (10, 10), (17, 19)], 30,
                                   seed=seed)
        yield "trackpy walks", f"nearby (7), seed {seed}", truth, detections, 0.5
    rng = np.random.default_rng(5)
    for n in (150, 400):  # Brownian particles in a 256 × 256 px field
        start = rng.random((n, 2)) * 256
        positions = start[None] + np.concatenate([np.zeros((1, n, 2)), rng.normal(0, 1.0, (29, n, 2))]).cumsum(0)
        truth = {"track_id": np.tile(np.arange(n), 30), "frame": np.repeat(np.arange(30), n),
                 "y": positions[..., 0].ravel(), "x": positions[..., 1].ravel()}
        yield "trackpy-like Brownian 2D", f"{n} particles", truth, {k: truth[k] for k in ("frame", "y", "x")}, 0.5


def score(detections, truth, gate, match) -> tuple[float, object]:
    from tracker.linking import link_detections
    from tracker.metrics import evaluate

    tracks, summary = link_detections(detections, gate, solver="scipy", return_summary=True)
    return evaluate(tracks, truth, match)["link_f1_given_detections"], summary


def run_cell(group, cell, truth, detections, match) -> dict:
    q99 = float(np.quantile(true_steps(truth), 0.99))
    start = time.perf_counter()
    estimated, summary = score(detections, truth, None, match)
    seconds = time.perf_counter() - start
    grid = {factor: score(detections, truth, factor * q99, match)[0] for factor in GRID}
    best = max(grid, key=lambda f: (grid[f], -abs(f - 1.5)))
    return dict(group=group, cell=cell, n=len(detections["frame"]), q99=q99, gate=summary.gate.value_um,
                source=summary.gate.source, f1=estimated, best_factor=best, best_gate=best * q99,
                best_f1=grid[best], bench_f1=grid[1.5], default_f1=score(detections, truth, 1.0, match)[0],
                seconds=seconds)


def table(records: list[dict]) -> str:
    lines = ["| cells | cell | q99 steps µm | estimated gate µm | F1 estimated | best gate µm (× q99) | F1 best | "
             "est − best | F1 1.5 × q99 | F1 old default 1.0 µm | link time (estimated) |",
             "|" + "---|" * 11]
    for r in records:
        source = "" if r["source"] == "estimated" else f" ({r['source']})"
        lines.append(f"| {r['group']} | {r['cell']} | {r['q99']:.3f} | {r['gate']:.3f}{source} | {r['f1']:.4f} | "
                     f"{r['best_gate']:.3f} ({r['best_factor']:g}) | {r['best_f1']:.4f} | "
                     f"{r['f1'] - r['best_f1']:+.4f} | {r['bench_f1']:.4f} | {r['default_f1']:.4f} | "
                     f"{r['seconds']:.2f} s |")
    margins = np.array([r["f1"] - r["best_f1"] for r in records])
    bench = np.array([r["bench_f1"] - r["best_f1"] for r in records])
    default = np.array([r["default_f1"] - r["best_f1"] for r in records])
    lines += ["", f"Estimated gate: within {TARGET} link F1 of the best grid gate on {np.sum(margins >= -TARGET)} of "
              f"{len(margins)} cells; worst {margins.min():+.4f}, mean {margins.mean():+.4f}.",
              f"1.5 × q99 (generalization_bench.py's gate, knows the truth): within {TARGET} on "
              f"{np.sum(bench >= -TARGET)}; worst {bench.min():+.4f}, mean {bench.mean():+.4f}.",
              f"Old default 1.0 µm: within {TARGET} on {np.sum(default >= -TARGET)}; worst {default.min():+.4f}, "
              f"mean {default.mean():+.4f}."]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=300)
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="seeds of the scenario cells")
    parser.add_argument("--quick", action="store_true", help="scenario cells only, not saved")
    parser.add_argument("--append", action="store_true",
                        help="with --quick: append the table to results/gate_bench.md as a section")
    args = parser.parse_args(argv)
    cells = list(scenario_cells(args.particles, args.frames, args.seeds))
    if not args.quick:
        cells += list(simulator_cells()) + list(trackpy_cells())
    records = []
    for cell in cells:
        record = run_cell(*cell)
        records.append(record)
        print(f"{record['group']:25s} {record['cell']:22s} gate {record['gate']:.3f} best {record['best_gate']:.3f} "
              f"F1 {record['f1']:.4f} best {record['best_f1']:.4f} ({record['f1'] - record['best_f1']:+.4f})",
              flush=True)
    text = table(records)
    print(text)
    if args.quick and args.append:
        with REPORT.open("a") as handle:
            handle.write(f"\n## Scenario cells at {args.particles} particles × {args.frames} frames, seeds "
                         f"{', '.join(map(str, args.seeds))}\n\n{text}\n")
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        REPORT.write_text(
            "# The gate estimated from the detections (`benchmarks/gate_bench.py`)\n\n"
            f"{args.particles} particles × {args.frames} frames per scenario cell, seeds "
            f"{', '.join(map(str, args.seeds))}; link F1 given the "
            f"detections with our defaults (`solver=\"scipy\"`); oracle: the best of {len(GRID)} gates "
            f"{GRID[0]}-{GRID[-1]} × the true steps' 99th percentile (q99). CPU of this machine.\n\n" + text + "\n")


if __name__ == "__main__":
    sys.exit(main())
