"""Detection alone on one GPU-resident frame, to separate it from reading and copying the stack.

Renders one frame on the GPU (``render_stack(..., xp=cupy)``) and times
:func:`tracker.detect.detect_spots` on it (CuPy in, table out), after a
warm-up on a corner; with ``--cpu``, also on the CPU (NumPy) for comparison.

Usage::

    python benchmarks/detect_bench.py --shape 256,2048,2048 --particles 1000000 \
        --voxel 0.25,0.15,0.15 --psf 0.3,0.18,0.18
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tracker.backend import cupy_or_none
from tracker.detect import detect_spots
from tracker.simulate import render_stack, simulate_tracks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="64,512,512", help="z,y,x voxels")
    parser.add_argument("--particles", type=int, default=5000)
    parser.add_argument("--voxel", default="0.4,0.15,0.15", help="z,y,x µm")
    parser.add_argument("--psf", default="0.45,0.18,0.18", help="PSF sigma z,y,x µm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="also time the CPU (NumPy/SciPy) path")
    args = parser.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    voxel = tuple(float(v) for v in args.voxel.split(","))
    psf = tuple(float(v) for v in args.psf.split(","))
    spot_radius = tuple(3**0.5 * s for s in psf)
    field = tuple((n - 1) * v for n, v in zip(shape, voxel))
    truth = simulate_tracks(args.particles, 1, field, 0.1, 0.0, seed=0)
    cupy = cupy_or_none()
    backends = ([("GPU", cupy)] if cupy is not None else []) + ([("CPU", np)] if args.cpu or cupy is None else [])
    print(f"| device | volume | spots | detections | detect (s) |\n|---|---|---:|---:|---:|")
    for label, xp in backends:
        volume = render_stack(truth, (1, *shape), voxel, psf, snr=6, seed=0, xp=xp)[0]
        detect_spots(volume[:32, :256, :256], voxel, spot_radius)  # warm-up (GPU: kernel compilation)
        times = []
        for _ in range(args.repeats):
            if xp is not np:
                xp.cuda.Device().synchronize()
            start = time.perf_counter()
            table = detect_spots(volume, voxel, spot_radius)
            times.append(time.perf_counter() - start)
        print(f"| {label} | {'×'.join(map(str, shape))} | {len(truth['z']):,} | {len(table['z']):,} | "
              f"{np.median(times):.3f} |", flush=True)
        del volume


if __name__ == "__main__":
    main()
