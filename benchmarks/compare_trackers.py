"""Side by side: our linker, trackpy 0.7 and LapTrack 0.17 on the same detections.

Every cell of the grid simulates ground truth with :func:`tracker.simulate.simulate_tracks`
(biased correlated motion, reflecting walls, a 1 µm invisible margin), makes
detections from it, and has each tracker link those same detections with the
same gate; link F1 and the ISBI α, β are measured against the ground truth
with :func:`tracker.metrics.evaluate` (match distance 0.5 × nearest-neighbour
distance), wall time of the linking call alone (every tracker's modules imported
before), and the peak resident memory
of the process that ran it (``resource.getrusage(RUSAGE_SELF).ru_maxrss``;
every tracker runs in a fresh subprocess per cell, so imports and data count
too).

Detections (``--source``):

* ``sim``: the visible ground-truth points plus Gaussian localisation noise
  of 0.04 × NN per axis;
* ``stack``: the ground truth rendered to a noisy stack
  (:func:`tracker.simulate.render_stack`) and detected by
  :func:`tracker.pipeline.detect_stack`; peers link our detections.

Density is set so that the mean nearest-neighbour distance (NN) is about
1 µm, and ``step_um = ratio × NN`` (root-mean-square step per frame). The gate
(maximum displacement) is ``2.5 × step`` for everyone.

What each tracker is given:

* ours: ``tracker.linking.link_detections(detections, gate, solver="scipy")``
  with its defaults (motion prediction with persistence estimated from the
  data, adaptive radius, gap closing over up to 2 missing frames);
* trackpy: ``trackpy.link(search_range=gate, link_strategy="numba",
  adaptive_stop=0.1 × step, adaptive_step=0.95, memory=2 if blinking else 0)``;
* LapTrack: ``LapTrack(metric="sqeuclidean", cutoff=gate², gap closing
  (cutoff 3 gate², 2 frames) if blinking else off, no splitting/merging)``.

Usage (runs are appended to a JSON-lines file, then summarised)::

    python benchmarks/compare_trackers.py run --n 10000 --ratio 0.2,0.5 --persistence 0,0.5,0.9 --blink 0,0.1
    python benchmarks/compare_trackers.py report   # writes benchmarks/results/compare_trackers.md

The speed protocol of ``compare_trackers_speed.md`` (for each of ``--repeats`` repeats, every cell's ours then
trackpy back to back; medians and the ratio per repeat; runs appended to ``compare_trackers_speed_runs.jsonl``)::

    python benchmarks/compare_trackers.py speed --repeats 3 --session "$(git rev-parse --short HEAD)"

Needs the ``bench`` extra (trackpy, laptrack, numba, pandas) for the peers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_RUNS = RESULTS / "compare_trackers_runs.jsonl"
DEFAULT_REPORT = RESULTS / "compare_trackers.md"
TRACKERS = ("ours", "trackpy", "laptrack")
GATE_STEPS = 2.5
NOISE_NN = 0.04
MARGIN_UM = 1.0
MAX_GAP = 2


def make_cell(n: int, ratio: float, persistence: float, blink: float, frames: int, seed: int, source: str):
    """Ground truth and detections of one cell; also NN and step (µm)."""
    from tracker import simulate

    if source == "stack":
        # A small volume (voxels 0.4 x 0.15 x 0.15 µm), NN ~ 1.2 µm.
        voxel = (0.4, 0.15, 0.15)
        shape = (24, 160, 160)
        fov = tuple((s - 1) * v for s, v in zip(shape, voxel))
        first = simulate.simulate_tracks(n, 1, fov, 1.0, persistence, margin_um=MARGIN_UM, seed=seed)
    else:
        side = (n / 0.554**3) ** (1 / 3)  # mean NN ≈ 0.554 ρ^(-1/3) = 1 µm
        fov = (side, side, side)
        first = simulate.simulate_tracks(n, 1, fov, 1.0, persistence, margin_um=MARGIN_UM, seed=seed)
    nn = simulate.mean_nearest_neighbour_distance(first)
    step = ratio * nn
    truth = simulate.simulate_tracks(n, frames, fov, step, persistence, margin_um=MARGIN_UM,
                                     blink_probability=blink, seed=seed)
    if source == "stack":
        from tracker.pipeline import detect_stack

        stack = simulate.render_stack(truth, (frames, *shape), voxel, (0.45, 0.18, 0.18), snr=8.0, seed=seed + 1)
        detections = detect_stack(stack_as(stack, voxel), spot_radius_um=0.4, device="cpu")
        detections = {k: np.asarray(detections[k]) for k in ("frame", "z", "y", "x")}
    else:
        detections = noisy_detections(truth, nn, seed)
    return truth, detections, nn, step


def noisy_detections(truth, nn: float, seed: int):
    """The visible ground-truth points plus Gaussian localisation noise of ``NOISE_NN × nn`` per axis (µm)."""
    rng = np.random.default_rng(seed + 1)
    visible = np.asarray(truth["visible"])
    detections = {k: np.asarray(truth[k])[visible] for k in ("frame", "z", "y", "x")}
    for axis in "zyx":
        detections[axis] = detections[axis] + rng.normal(0.0, NOISE_NN * nn, len(detections[axis]))
    return detections


def stack_as(stack, voxel):
    from tracker.io import as_stack

    return as_stack(stack, voxel)


def link_with(tracker: str, detections, gate: float, step: float, blink: float):
    """Tracks table (``track_id, frame, z, y, x``) from one tracker."""
    if tracker == "ours":
        from tracker.linking import link_detections

        return link_detections(detections, gate, solver="scipy")
    import pandas as pd

    frame = pd.DataFrame({k: detections[k] for k in ("frame", "z", "y", "x")})
    if tracker == "trackpy":
        import trackpy

        trackpy.quiet()
        linked = trackpy.link(frame, search_range=gate, pos_columns=["z", "y", "x"], t_column="frame",
                              memory=MAX_GAP if blink > 0 else 0, link_strategy="numba",
                              adaptive_stop=0.1 * step, adaptive_step=0.95)
        ids = linked["particle"]
    elif tracker == "laptrack":
        from laptrack import LapTrack

        gaps = blink > 0
        model = LapTrack(metric="sqeuclidean", cutoff=gate**2,
                         gap_closing_cutoff=(MAX_GAP + 1) * gate**2 if gaps else False,
                         gap_closing_max_frame_count=MAX_GAP if gaps else 0,
                         splitting_cutoff=False, merging_cutoff=False)
        linked, _, _ = model.predict_dataframe(frame, coordinate_cols=["z", "y", "x"], frame_col="frame",
                                               only_coordinate_cols=False)
        ids = linked["track_id"]
    else:
        raise ValueError(f"unknown tracker {tracker!r}")
    return {"track_id": np.asarray(ids, dtype=np.int64), **{k: np.asarray(linked[k]) for k in ("frame", "z", "y", "x")}}


def run_one(args) -> dict:
    """One tracker on one cell, in this process; returns the measurements."""
    from tracker.metrics import evaluate

    truth, detections, nn, step = make_cell(args.n, args.ratio, args.persistence, args.blink, args.frames,
                                            args.seed, args.source)
    gate = GATE_STEPS * step
    if args.tracker == "ours":  # imported before timing too (13 ms with PYTHONDONTWRITEBYTECODE set: compiling)
        import tracker.linking  # noqa: F401
    else:  # import (and for trackpy, JIT-compile) the peer before timing
        __import__({"trackpy": "trackpy", "laptrack": "laptrack"}[args.tracker])
        warm = {k: v[np.asarray(detections["frame"]) < 2][:200] for k, v in detections.items()}
        link_with(args.tracker, warm, gate, step, args.blink)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    tracks = link_with(args.tracker, detections, gate, step, args.blink)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    scores = evaluate(tracks, truth, 0.5 * nn)
    return {
        "tracker": args.tracker, "source": args.source, "n": args.n, "frames": args.frames, "ratio": args.ratio,
        "persistence": args.persistence, "blink": args.blink, "seed": args.seed, "nn_um": nn, "step_um": step,
        "gate_um": gate, "n_detections": int(len(detections["frame"])), "seconds": seconds,
        "peak_rss_mb": peak, "rss_before_mb": rss_before, "link_f1": scores["link_f1"],
        "link_f1_given_detections": scores["link_f1_given_detections"],
        "link_recall": scores["link_recall"], "link_precision": scores["link_precision"],
        "alpha": scores["alpha"], "beta": scores["beta"], "status": "ok",
    }


def run_cell(args, tracker: str, n: int, ratio: float, persistence: float, blink: float, **labels) -> dict:
    """One tracker on one cell in a fresh subprocess (:func:`run_one`); the record, also appended to
    ``args.runs`` with ``labels`` and printed in short."""
    command = [sys.executable, __file__, "_one", "--tracker", tracker, "--n", str(n), "--ratio", str(ratio),
               "--persistence", str(persistence), "--blink", str(blink), "--frames", str(args.frames),
               "--seed", str(args.seed), "--source", args.source]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        if done.returncode == 0:
            record = json.loads(done.stdout.strip().splitlines()[-1])
        else:
            record = {"status": "error: " + (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    except subprocess.TimeoutExpired:
        record = {"status": f"timeout > {args.timeout} s"}
    record.update({"tracker": tracker, "source": args.source, "n": n, "frames": args.frames,
                   "ratio": ratio, "persistence": persistence, "blink": blink, "seed": args.seed, **labels})
    record["cell_seconds"] = time.perf_counter() - started
    runs = Path(args.runs)
    runs.parent.mkdir(parents=True, exist_ok=True)
    with open(runs, "a") as file:
        file.write(json.dumps(record) + "\n")
    show = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in record.items()
            if k in ("tracker", "n", "ratio", "persistence", "blink", "link_f1", "alpha", "beta",
                     "seconds", "peak_rss_mb", "status")}
    print(json.dumps(show), flush=True)
    return record


def run_grid(args) -> None:
    for n, ratio, persistence, blink in itertools.product(args.n, args.ratio, args.persistence, args.blink):
        for tracker in args.trackers:
            run_cell(args, tracker, n, ratio, persistence, blink)


SPEED_TARGET = 10.0
"""Issue 6's speed target: our link time at least this many times shorter than the faster peer's (trackpy's)."""


def run_speed(args) -> None:
    """The speed protocol: for each repeat, every cell's ours then trackpy, back to back (so that both see the
    machine in the same state); then the table of medians (:func:`speed_table`)."""
    records = []
    for repeat in range(args.repeats):
        for n, ratio, persistence, blink in itertools.product(args.n, args.ratio, args.persistence, args.blink):
            for tracker in ("ours", "trackpy"):
                records.append(run_cell(args, tracker, n, ratio, persistence, blink, session=args.session,
                                        repeat=repeat))
    print("\n".join(speed_table(records)))


def speed_table(records: list[dict]) -> list[str]:
    """Markdown rows of link time per cell, ours vs trackpy: medians over the repeats, their ratio (bold where
    it meets :data:`SPEED_TARGET`), the ratio of each repeat (ours and trackpy of the same repeat) and link F1;
    then how many cells meet the target. Records that did not finish are left out."""
    ok = [r for r in records if r.get("status") == "ok"]
    by_cell: dict[tuple, dict[str, list[dict]]] = {}
    for r in ok:
        key = (r["n"], r["ratio"], r["persistence"], r["blink"])
        by_cell.setdefault(key, {}).setdefault(r["tracker"], []).append(r)
    lines = ["| particles/frame | step/NN | persistence | blink | ours (s) | trackpy (s) | ratio | ratio per repeat "
             "| link F1 ours | trackpy |", "|---|---|---|---|---|---|---|---|---|---|"]
    met = total = 0
    for key in sorted(by_cell):
        ours, peer = by_cell[key].get("ours", []), by_cell[key].get("trackpy", [])
        if not ours or not peer:
            continue
        ours_s = float(np.median([r["seconds"] for r in ours]))
        peer_s = float(np.median([r["seconds"] for r in peer]))
        ratio = peer_s / ours_s
        total += 1
        met += ratio >= SPEED_TARGET
        per_repeat = " ".join(f"{p['seconds'] / o['seconds']:.1f}" for o, p in zip(ours, peer))
        shown = f"**{ratio:.1f}×**" if ratio >= SPEED_TARGET else f"{ratio:.1f}×"
        lines.append(f"| {key[0]} | {key[1]:g} | {key[2]:g} | {key[3]:g} | {ours_s:.3f} | {peer_s:.2f} | {shown} "
                     f"| {per_repeat} | {ours[-1]['link_f1']:.4f} | {peer[-1]['link_f1']:.4f} |")
    lines.append(f"\n{SPEED_TARGET:g}× met by the median in {met} of {total} cells.")
    return lines


HEADER = """# Our linker vs trackpy 0.7 and LapTrack 0.17.1, same detections, same gate

Generated by `benchmarks/compare_trackers.py report` from `compare_trackers_runs.jsonl` (see the
script's docstring for the set-up and what each tracker was given). Gate = 2.5 × step for all;
`sim` detections = visible ground truth + 0.04 × NN Gaussian noise; `stack` = rendered and
detected with `tracker.pipeline.detect_stack`, all trackers link our detections. Link time is
the linking call alone (trackpy warmed up so numba compilation is not counted); peak RSS is
`ru_maxrss` of the fresh subprocess that simulated, linked and scored the cell. ISBI α/β with
ε = 0.5 × NN. **Bold**: ours ≥ the best peer. 2-core CPU, `solver="scipy"`. "Given detections":
link F1 against each true track's detected points only (`tracker.metrics.evaluate`), where a link
across frames in which the detector missed the particle is correct; it differs from link F1 only
where visible particles go undetected (`stack` cells); "—": runs from before it was recorded.

"""


def _versus_peers(record: dict, cell_records: list[dict], measure: str) -> str:
    """``record``'s ``measure`` to 4 decimals; for ours, bold if ≥ every peer's in the cell, else marked."""
    if measure not in record:
        return "—"
    text = f"{record[measure]:.4f}"
    peers = [r[measure] for r in cell_records if r["tracker"] != "ours" and measure in r]
    if record["tracker"] != "ours" or not peers:
        return text
    return f"**{text}**" if record[measure] >= max(peers) else f"{text} (peer wins)"


def report(args) -> None:
    records = [json.loads(line) for line in Path(args.runs).read_text().splitlines() if line.strip()]
    latest = {}
    for record in records:  # the latest run of each (cell, tracker) counts
        key = tuple(record[k] for k in ("source", "n", "frames", "ratio", "persistence", "blink", "tracker"))
        latest[key] = record
    cells = sorted({key[:-1] for key in latest})
    lines = [
        "| source | particles/frame × frames | step/NN | persistence | blink | tracker | link F1 "
        "| link F1 given detections | α | β | link time (s) | peak RSS (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        rows = [latest[cell + (t,)] for t in TRACKERS if cell + (t,) in latest]
        ok = [r for r in rows if r.get("status") == "ok"]
        for r in rows:
            head = f"| {cell[0]} | {cell[1]} × {cell[2]} | {cell[3]} | {cell[4]} | {cell[5]} | {r['tracker']} "
            if r.get("status") != "ok":
                lines.append(head + f"| {r['status']} | | | | | |")
                continue
            scores = [_versus_peers(r, ok, measure) for measure in ("link_f1", "link_f1_given_detections")]
            lines.append(head + f"| {scores[0]} | {scores[1]} | {r['alpha']:.4f} | {r['beta']:.4f} "
                         f"| {r['seconds']:.2f} | {r['peak_rss_mb']:.0f} |")
    table = "\n".join(lines)
    notes = Path(args.notes).read_text() if args.notes and Path(args.notes).exists() else ""
    Path(args.output).write_text(HEADER + table + "\n" + notes)
    print(table)


def main(argv=None) -> None:
    def floats(text):
        return [float(v) for v in text.split(",")]

    def ints(text):
        return [int(v) for v in text.split(",")]

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    grid = sub.add_parser("run", help="run a grid subset (one subprocess per tracker and cell)")
    grid.add_argument("--n", type=ints, default=[10000], help="particles per frame (comma list)")
    grid.add_argument("--ratio", type=floats, default=[0.2, 0.5], help="step / NN (comma list)")
    grid.add_argument("--persistence", type=floats, default=[0.0, 0.5, 0.9])
    grid.add_argument("--blink", type=floats, default=[0.0, 0.1], help="blink probability (comma list)")
    grid.add_argument("--trackers", type=lambda t: t.split(","), default=list(TRACKERS))
    grid.add_argument("--frames", type=int, default=20)
    grid.add_argument("--seed", type=int, default=0)
    grid.add_argument("--source", choices=["sim", "stack"], default="sim")
    grid.add_argument("--timeout", type=float, default=300.0, help="seconds per tracker and cell")
    grid.add_argument("--runs", default=str(DEFAULT_RUNS))
    speed = sub.add_parser("speed", help="the speed protocol (ours vs trackpy, repeats back to back) and its table")
    speed.add_argument("--n", type=ints, default=[10000], help="particles per frame (comma list)")
    speed.add_argument("--ratio", type=floats, default=[0.2, 0.5], help="step / NN (comma list)")
    speed.add_argument("--persistence", type=floats, default=[0.0, 0.5, 0.9])
    speed.add_argument("--blink", type=floats, default=[0.0, 0.1], help="blink probability (comma list)")
    speed.add_argument("--repeats", type=int, default=3)
    speed.add_argument("--frames", type=int, default=20)
    speed.add_argument("--seed", type=int, default=0)
    speed.add_argument("--source", choices=["sim", "stack"], default="sim")
    speed.add_argument("--timeout", type=float, default=300.0, help="seconds per tracker and cell")
    speed.add_argument("--runs", default=str(RESULTS / "compare_trackers_speed_runs.jsonl"))
    speed.add_argument("--session", default="", help="a label stored with every run (e.g. the commit)")
    one = sub.add_parser("_one")
    one.add_argument("--tracker", choices=TRACKERS, required=True)
    one.add_argument("--n", type=int, required=True)
    one.add_argument("--ratio", type=float, required=True)
    one.add_argument("--persistence", type=float, required=True)
    one.add_argument("--blink", type=float, required=True)
    one.add_argument("--frames", type=int, default=20)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--source", choices=["sim", "stack"], default="sim")
    rep = sub.add_parser("report", help="write the markdown table from the runs file")
    rep.add_argument("--runs", default=str(DEFAULT_RUNS))
    rep.add_argument("--output", default=str(DEFAULT_REPORT))
    rep.add_argument("--notes", default=str(RESULTS / "compare_trackers_notes.md"),
                     help="markdown appended below the table (observations)")
    args = parser.parse_args(argv)
    if args.command == "run":
        run_grid(args)
    elif args.command == "speed":
        run_speed(args)
    elif args.command == "_one":
        os.environ.setdefault("OMP_NUM_THREADS", "2")
        print(json.dumps(run_one(args)))
    else:
        report(args)


if __name__ == "__main__":
    main()
