"""How well can frame-to-frame linking do at all? An oracle beside our linker, on the same cells.

The oracle links every frame pair by the same kind of exact gated assignment as
:func:`tracker.linking.link_detections`, but every *other* link comes from the
ground truth: each point's velocity is its true previous displacement and each
candidate target's next step is its true next displacement. With the costs

* ``past``: ``|b - (a + p v)|² / σ²_r`` (the forward pass with a perfect past),
* ``both``: that plus ``|w - p s|² / σ²_r`` (the smoothing pass with a perfect
  past and future: ``s = b - a``, ``w`` the true step after ``b``),
* ``none``: ``|b - a|² / σ²_s`` (no prediction),

each assignment is the maximum-likelihood link of that frame pair given
everything else, under the simulator's own model (biased correlated motion
with Gaussian localisation noise; ``σ²`` per axis measured on the true links,
``p`` the simulated persistence). No linker that has to find the other links
itself knows more, so ``both`` is a practical ceiling for link F1 on a cell;
the distance between it and ``ours`` is what better linking could still win.

Cells are those of ``compare_trackers.py`` (``sim`` detections, no blinking:
the oracle has no gaps to close). Scores use :func:`tracker.metrics.evaluate`
for every row::

    python benchmarks/link_ceiling.py --n 10000 --ratio 0.5 --persistence 0.5,0.9 --seeds 0,1

With ``--objective`` it asks instead which linking the detections favour under that model
(:func:`model_cost`): the truth, the ``both`` oracle or ours. Where ours has more links and a smaller
cost than the truth, no linker that maximises the model's likelihood can be expected to find the
truth there, whatever its search.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_trackers import GATE_STEPS, make_cell  # noqa: E402

from tracker import lap  # noqa: E402
from tracker.costs import gated_links_per_source  # noqa: E402
from tracker.linking import link_detections, track_ids_from_predecessors  # noqa: E402
from tracker.linking.missing_detections import SCALED_NO_LINK_COST  # noqa: E402
from tracker.linking.motion import DEFAULT_GATE_SIGMAS  # noqa: E402
from tracker.metrics import evaluate  # noqa: E402

ORACLES = ("none", "past", "both")


def true_neighbours(truth, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each detection's true predecessor and successor in consecutive frames (-1: none).

    ``sim`` detections are the visible ground-truth points in order, so
    detection ``i`` is the ``i``-th visible true point.
    """
    track = np.asarray(truth["track_id"])[np.asarray(truth["visible"])]
    order = np.lexsort((frames, track))
    consecutive = (track[order][1:] == track[order][:-1]) & (frames[order][1:] == frames[order][:-1] + 1)
    predecessor = np.full(len(frames), -1, dtype=np.int64)
    successor = np.full(len(frames), -1, dtype=np.int64)
    predecessor[order[1:][consecutive]] = order[:-1][consecutive]
    successor[order[:-1][consecutive]] = order[1:][consecutive]
    return predecessor, successor


def _positions(detections) -> np.ndarray:
    return np.stack([np.asarray(detections[axis], dtype=np.float64) for axis in "zyx"], axis=1)


def true_variances(positions: np.ndarray, true_before: np.ndarray, persistence: float) -> tuple[float, float]:
    """Per-axis variances (µm²) of the step and of the prediction residual ``s - p v``, on the true links."""
    linked = np.flatnonzero(true_before >= 0)
    step = positions[linked] - positions[true_before[linked]]
    with_velocity = linked[true_before[true_before[linked]] >= 0]
    velocity = positions[true_before[with_velocity]] - positions[true_before[true_before[with_velocity]]]
    residual = positions[with_velocity] - positions[true_before[with_velocity]] - persistence * velocity
    return float(np.var(step)), float(np.var(residual))


def oracle_tracks(detections, truth, persistence: float, oracle: str, gate_um: float) -> dict[str, np.ndarray]:
    """Tracks table of the oracle linker ``oracle`` (one of :data:`ORACLES`; see the module docstring)."""
    frames = np.asarray(detections["frame"], dtype=np.int64)
    predecessor = oracle_predecessors(detections, truth, persistence, oracle, gate_um)
    return tracks_from_predecessors(predecessor, frames, detections)


def oracle_predecessors(detections, truth, persistence: float, oracle: str, gate_um: float) -> np.ndarray:
    """Each detection's predecessor (-1: none) as the oracle linker ``oracle`` links them.

    Candidates lie within 4.5 standard deviations of the prediction and within ``gate_um`` (µm) of it,
    the gate every linker of the benchmark is given.
    """
    frames = np.asarray(detections["frame"], dtype=np.int64)
    positions = _positions(detections)
    true_before, true_after = true_neighbours(truth, frames)
    p = persistence if oracle != "none" else 0.0
    step_variance, residual_variance = true_variances(positions, true_before, p)

    predecessor = np.full(len(frames), -1, dtype=np.int64)
    no_link = SCALED_NO_LINK_COST + (3.0 if oracle == "both" else 0.0)
    for frame in range(int(frames.max()) if len(frames) else 0):
        a, b = np.flatnonzero(frames == frame), np.flatnonzero(frames == frame + 1)
        has_velocity = (true_before[a] >= 0) & (oracle != "none")
        velocity = np.where(has_velocity[:, None], positions[a] - positions[np.maximum(true_before[a], 0)], 0.0)
        variance = np.where(has_velocity, residual_variance, step_variance)
        rows, cols, distance_sq = gated_links_per_source(
            positions[a] + p * velocity, positions[b], np.minimum(DEFAULT_GATE_SIGMAS * np.sqrt(variance), gate_um))
        cost = distance_sq / variance[rows]
        if oracle == "both":
            has_next = true_after[b] >= 0
            next_step = positions[np.maximum(true_after[b], 0)] - positions[b]
            step = positions[b[cols]] - positions[a[rows]]
            future = np.sum((next_step[cols] - p * step) ** 2, axis=1) / residual_variance
            cost += np.where(has_next[cols], future, 3.0)
        chosen_rows, chosen_cols = lap.solve_gated(rows, cols, cost, (len(a), len(b)), no_link, solver="scipy")
        predecessor[b[chosen_cols]] = a[chosen_rows]
    return predecessor


def tracks_from_predecessors(predecessor: np.ndarray, frames: np.ndarray, detections) -> dict[str, np.ndarray]:
    """Tracks table (``track_id, frame, z, y, x``) of the detections linked by ``predecessor``."""
    order = np.argsort(frames, kind="stable")  # track_ids_from_predecessors needs predecessors first
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    sorted_predecessor = np.where(predecessor[order] >= 0, rank[np.maximum(predecessor[order], 0)], -1)
    track_id = np.empty(len(frames), dtype=np.int64)
    track_id[order] = track_ids_from_predecessors(sorted_predecessor)
    return {"track_id": track_id, **{k: np.asarray(detections[k]) for k in ("frame", "z", "y", "x")}}


def model_cost(predecessor: np.ndarray, positions: np.ndarray, persistence: float, step_variance: float,
               residual_variance: float) -> tuple[int, float]:
    """Number of links and their summed squared residuals in variances, under the simulator's model.

    A link into ``x`` from ``a`` costs ``|x - a - p v|² / σ²_r`` where ``a`` has a predecessor (``v`` the step
    into ``a``), ``|x - a|² / σ²_s`` where it has none: twice the negative log-likelihood of the steps, up to
    a constant per link. Of two linkings, the one with more links and a smaller sum explains the detections
    better.
    """
    linked = np.flatnonzero(predecessor >= 0)
    source = predecessor[linked]
    before = predecessor[source]
    has_velocity = before >= 0
    velocity = np.where(has_velocity[:, None], positions[source] - positions[np.maximum(before, 0)], 0.0)
    residual_sq = np.sum((positions[linked] - positions[source] - persistence * velocity) ** 2, axis=1)
    cost = np.where(has_velocity, residual_sq / residual_variance, residual_sq / step_variance)
    return len(linked), float(cost.sum())


def objective_rows(n: int, ratio: float, persistence: float, seed: int, frames: int) -> list[str]:
    """Table rows: links, model cost and link F1 of the truth, the ``both`` oracle and ours, on one cell."""
    truth, detections, nn, step = make_cell(n, ratio, persistence, 0.0, frames, seed, "sim")
    gate = GATE_STEPS * step
    frame = np.asarray(detections["frame"], dtype=np.int64)
    positions = _positions(detections)
    true_before, _ = true_neighbours(truth, frame)
    variances = true_variances(positions, true_before, persistence)
    ours_table = link_detections({**detections, "index": np.arange(len(frame))}, gate, solver="scipy")
    ours = np.full(len(frame), -1, dtype=np.int64)
    index, track = np.asarray(ours_table["index"]), np.asarray(ours_table["track_id"])  # (sorted by track, frame)
    same_track = track[1:] == track[:-1]
    ours[index[1:][same_track]] = index[:-1][same_track]
    rows = []
    for name, predecessor in (("truth", true_before),
                              ("oracle both", oracle_predecessors(detections, truth, persistence, "both", gate)),
                              ("ours", ours)):
        links, cost = model_cost(predecessor, positions, persistence, *variances)
        f1 = evaluate(tracks_from_predecessors(predecessor, frame, detections), truth, 0.5 * nn)["link_f1"]
        rows.append(f"| {n} | {ratio} | {persistence} | {seed} | {name} | {links} | {cost:.1f} | {f1:.4f} |")
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10000, help="particles per frame")
    parser.add_argument("--ratio", default="0.5", help="step / NN (comma list)")
    parser.add_argument("--persistence", default="0.5,0.9", help="comma list")
    parser.add_argument("--seeds", default="0", help="comma list")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--objective", action="store_true",
                        help="instead: links and model cost (model_cost) of the truth, the 'both' oracle and ours")
    args = parser.parse_args(argv)
    if args.objective:
        print("| particles/frame | step/NN | persistence | seed | linking | links | Σ residual²/σ² | link F1 |")
        print("|---:|---:|---:|---:|---|---:|---:|---:|")
        for ratio in map(float, args.ratio.split(",")):
            for persistence in map(float, args.persistence.split(",")):
                for seed in map(int, args.seeds.split(",")):
                    print("\n".join(objective_rows(args.n, ratio, persistence, seed, args.frames)), flush=True)
        return
    print("| particles/frame | step/NN | persistence | seed | oracle none | oracle past | oracle both "
          "| ours | ours time (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ratio in map(float, args.ratio.split(",")):
        for persistence in map(float, args.persistence.split(",")):
            for seed in map(int, args.seeds.split(",")):
                truth, detections, nn, step = make_cell(args.n, ratio, persistence, 0.0, args.frames, seed, "sim")
                gate = GATE_STEPS * step
                scores = [evaluate(oracle_tracks(detections, truth, persistence, oracle, gate), truth, 0.5 * nn)
                          ["link_f1"] for oracle in ORACLES]
                start = time.perf_counter()
                ours = link_detections(detections, gate, solver="scipy")
                seconds = time.perf_counter() - start
                f1 = evaluate(ours, truth, 0.5 * nn)["link_f1"]
                cells = " | ".join(f"{s:.4f}" for s in (*scores, f1))
                print(f"| {args.n} | {ratio} | {persistence} | {seed} | {cells} | {seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
