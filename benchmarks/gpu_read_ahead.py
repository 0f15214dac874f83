"""The GPU pipeline with and without reading the next frame during detection (:func:`tracker.parallel_frames.read_ahead`).

Times ``track_stack(device="gpu")`` on a stack file (a Zarr store as ``distributed_bench.py`` writes it, or a TIFF),
alternating the two ways, and checks that both give the same tracks. "serial" replaces the read-ahead by a plain
loop (read, then detect), as the pipeline did before it.

    python benchmarks/gpu_read_ahead.py /tmp/distributed_bench.zarr --voxel-size 0.5,0.2,0.2 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker import pipeline  # noqa: E402
from tracker.io import read_stack  # noqa: E402


def serial(read, frames):
    """What the pipeline did before :func:`tracker.parallel_frames.read_ahead`."""
    for t in frames:
        yield t, read(t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--voxel-size", type=lambda s: tuple(float(v) for v in s.split(",")), default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ahead = pipeline.read_ahead
    times: dict[str, list[float]] = {"read ahead": [], "serial": []}
    tracks = {}

    def run(kind: str) -> float:
        pipeline.read_ahead = ahead if kind == "read ahead" else serial
        stack = read_stack(args.stack, voxel_size=args.voxel_size)
        start = time.perf_counter()
        result = pipeline.track_stack(stack, device="gpu")
        seconds = time.perf_counter() - start
        tracks[kind] = result.tracks
        return seconds

    run("read ahead")  # (warm-up: kernels, caches)
    for _ in range(args.repeats):
        for kind in times:
            times[kind].append(run(kind))
    same = all(np.array_equal(np.asarray(tracks["serial"][k]), np.asarray(tracks["read ahead"][k]), equal_nan=True)
               for k in tracks["serial"])
    serial_s, ahead_s = statistics.median(times["serial"]), statistics.median(times["read ahead"])
    print(f"{args.stack}: track_stack(device='gpu'), median of {args.repeats} (alternated)")
    print(f"  serial     {serial_s:7.2f} s  {times['serial']}")
    print(f"  read ahead {ahead_s:7.2f} s  {times['read ahead']}")
    print(f"  ratio {serial_s / ahead_s:.2f}x; identical tracks: {same}")


if __name__ == "__main__":
    main()
