"""Linking at scale: candidate search on the CPU (k-d tree) vs the GPU (grid), and whole linking runs.

1. ``tracker.costs.gated_links_per_source`` on one frame pair of n points (density 1 per µm³,
   per-point radii from 1 to 2 RMS steps), with the k-d tree and with the GPU grid; both return
   identical arrays (checked here too).
2. ``tracker.linking.link_detections`` (motion prediction, adaptive radius, gap closing, confidence;
   ``solver="auto"``) on simulated detections of n particles per frame: time, and link
   precision/recall from the simulator's track ids carried through the linker.

Usage (on a GPU machine; ``--sizes`` particles per frame)::

    PYTHONPATH=. python3 benchmarks/link_scale_bench.py --sizes 10000,100000,1000000 --frames 5
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

from tracker import costs
from tracker.backend import gpu_available
from tracker.linking import link_detections
from tracker.simulate import simulate_tracks


def candidate_search(n: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    source = rng.random((n, 3)) * n ** (1 / 3)
    step = 0.3
    target = source + rng.normal(0, step / np.sqrt(3), source.shape)
    radius = step * rng.uniform(1.0, 2.0, n)
    times, results = {}, {}
    for where, threshold in (("k-d tree (CPU)", np.inf), ("grid (GPU)", 0)):
        if threshold == 0 and not gpu_available():
            continue
        saved = costs.GPU_GATING_MIN_POINTS
        costs.GPU_GATING_MIN_POINTS = threshold
        try:
            costs.gated_links_per_source(source[:1000], target[:1000], radius[:1000])  # warm-up
            start = time.perf_counter()
            results[where] = costs.gated_links_per_source(source, target, radius)
            times[where] = time.perf_counter() - start
        finally:
            costs.GPU_GATING_MIN_POINTS = saved
    same = all(np.array_equal(a, b) for a, b in zip(*results.values())) if len(results) == 2 else None
    cells = " | ".join(f"{times.get(w, float('nan')) * 1e3:.1f} ms" for w in ("k-d tree (CPU)", "grid (GPU)"))
    return f"| {n:,} | {len(next(iter(results.values()))[0]):,} | {cells} | {same} |"


def linking(n: int, frames: int, seed: int = 0, profile: bool = False) -> str:
    side = n ** (1 / 3)  # density 1 per µm³: nearest neighbour ≈ 0.55 µm
    truth = simulate_tracks(n, frames, (side, side, side), step_um=0.15, persistence=0.5, seed=seed)
    visible = truth["visible"]
    detections = {k: np.asarray(truth[k])[visible] for k in ("frame", "z", "y", "x")}
    detections["true_id"] = np.asarray(truth["track_id"])[visible]
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    tracks = link_detections(detections, 0.6)
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - start
    if profiler:
        print(f"profile of link_detections, {n:,} particles x {frames} frames (top 25 by own time):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    # Links: consecutive rows of one output track; correct when both points share a true id.
    same_track = tracks["track_id"][1:] == tracks["track_id"][:-1]
    correct = same_track & (tracks["true_id"][1:] == tracks["true_id"][:-1])
    order = np.lexsort((detections["frame"], detections["true_id"]))
    true_links = np.sum((np.diff(detections["true_id"][order]) == 0) & (np.diff(detections["frame"][order]) == 1))
    precision = correct.sum() / max(same_track.sum(), 1)
    recall = correct.sum() / max(true_links, 1)
    return (f"| {n:,} × {frames} | {len(detections['frame']):,} | {seconds:.2f} s | "
            f"{seconds / max(frames - 1, 1):.2f} s | {precision:.4f} | {recall:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--frames", type=int, default=5)
    parser.add_argument("--no-search", action="store_true", help="skip the candidate-search table")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the largest linking run")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if not args.no_search:
        print("| points | candidates | k-d tree (CPU) | grid (GPU) | identical |")
        print("|---:|---:|---:|---:|:---:|")
        for n in sizes:
            print(candidate_search(n), flush=True)
        print()
    # Warm-up: compiles every GPU kernel that linking uses (the GPU search and the auction, both from
    # 2k points), so that no timed run and no profile counts CuPy's compilation.
    linking(60_000, 3)
    rows = [linking(n, args.frames, profile=args.profile and n == max(sizes)) for n in sizes]
    print("| particles × frames | detections | link time | per frame pair | link precision | link recall |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
