"""CPU detection of a stack: one frame at a time against several frames at once (:mod:`tracker.parallel_frames`).

Times :func:`tracker.pipeline.detect_stack` with ``device="cpu"`` at ``workers=1`` (serial) and at the available
cores (:func:`tracker._threads.available_cores`), alternating the two, medians and bests of ``--repeats`` (three times
as many on the small sample); checks the tables
are identical; on a rendered stack (:func:`tracker.simulate.render_stack`) and on ``sample_data/sample.tif``
(read from the file frame by frame, as ``track run`` does).

Usage::

    python benchmarks/detect_cpu_parallel.py --frames 8 --shape 32,256,256 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from tracker._threads import available_cores
from tracker.io import read_stack
from tracker.pipeline import detect_stack
from tracker.simulate import render_stack, simulate_tracks
from tracker.stack import as_stack

VOXEL = (0.3, 0.1, 0.1)
SAMPLE = os.path.join(os.path.dirname(__file__), "..", "sample_data", "sample.tif")


def timed(stack, radius, workers, repeats):
    times, table = {1: [], workers: []}, {}
    for _ in range(repeats):
        for n in (1, workers):
            start = time.perf_counter()
            table[n] = detect_stack(stack, radius, device="cpu", workers=n)
            times[n].append(time.perf_counter() - start)
    same = all(np.array_equal(table[1][k], table[workers][k]) for k in table[1])
    return times[1], times[workers], same, len(table[1]["frame"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--shape", default="32,256,256")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split(","))
    workers = available_cores()
    field = tuple((n - 1) * v for n, v in zip(shape, VOXEL))
    truth = simulate_tracks(max(10, int(np.prod(field) / 20)), args.frames, field, 0.3, seed=1)
    rendered = as_stack(render_stack(truth, (args.frames, *shape), VOXEL, (0.45, 0.18, 0.18), snr=8, seed=2), VOXEL)
    sample = read_stack(SAMPLE)
    print(f"{platform.processor() or platform.machine()}, os.cpu_count() {os.cpu_count()}, available cores "
          f"{workers}, load average {os.getloadavg()[0]:.2f}; repeats {args.repeats} (sample.tif: {3 * args.repeats})")
    print(f"| stack | frames | serial s/frame (median, best) | {workers} workers s/frame (median, best) | "
          f"speed-up (medians, bests) | identical | detections |")
    print("|---|---|---|---|---|---|---|")
    for name, stack, radius in [(f"rendered {' × '.join(map(str, shape))}", rendered, 0.5),
                                ("sample.tif 16 × 96 × 96", sample, (0.8, 0.3, 0.3))]:
        serial, parallel, same, n = timed(stack, radius, workers, args.repeats * (1 if stack is rendered else 3))
        s, p = (statistics.median(serial), min(serial)), (statistics.median(parallel), min(parallel))
        print(f"| {name} | {stack.n_frames} | {s[0] / stack.n_frames:.4f}, {s[1] / stack.n_frames:.4f} | "
              f"{p[0] / stack.n_frames:.4f}, {p[1] / stack.n_frames:.4f} | {s[0] / p[0]:.2f}×, {s[1] / p[1]:.2f}× | "
              f"{same} | {n} |", flush=True)


if __name__ == "__main__":
    main()
