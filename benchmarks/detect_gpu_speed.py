"""Detection per frame, GPU against CPU, on one rendered stack (issue 24's speed target: >= 20x).

Renders ``--frames`` frames of ``--shape`` (default 64x512x512, 5000 particles, the pipeline benchmark's
voxel and PSF), then times on the same frames, after one warm-up frame each:

* ``detect_spots`` per frame with the radius given (as ``track run`` does once the scale is known) and
  the default threshold (None: chosen per frame); the GPU time includes the frame's copy to the GPU;
* the spot-scale estimate (``estimate_spot_radius`` on the frames ``frames_to_sample`` picks), separately.

Median over frames. CPU: NumPy / SciPy as installed (``scipy.ndimage`` filters run on one thread). ::

    PYTHONPATH=. python benchmarks/detect_gpu_speed.py --frames 6 --cpu-frames 2 --out results.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.detect import detect_spots  # noqa: E402
from tracker.simulate import render_stack, simulate_tracks  # noqa: E402
from tracker.spot_scale import estimate_spot_radius, frames_to_sample  # noqa: E402

VOXEL = (0.4, 0.15, 0.15)
PSF_SIGMA = (0.45, 0.18, 0.18)


def _timed(fn, sync):
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=6)
    parser.add_argument("--cpu-frames", type=int, default=2)
    parser.add_argument("--shape", default="64,512,512")
    parser.add_argument("--particles", type=int, default=5000)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    import cupy

    shape = tuple(int(v) for v in args.shape.split(","))
    field = tuple((n - 1) * v for n, v in zip(shape, VOXEL))
    truth = simulate_tracks(args.particles, args.frames, field, 0.3, 0.5, seed=1)
    stack = render_stack(truth, (args.frames, *shape), VOXEL, PSF_SIGMA, snr=6, seed=1, xp=cupy).get()
    radius = tuple(float(np.sqrt(3) * s) for s in PSF_SIGMA)
    sync_gpu = cupy.cuda.Device().synchronize

    def no_sync():
        return None

    gpu_times, gpu_counts = [], []
    detect_spots(cupy.asarray(stack[0]), VOXEL, spot_radius_um=radius, threshold=None, frame=0)  # warm-up
    for t in range(args.frames):
        elapsed, table = _timed(lambda: detect_spots(cupy.asarray(stack[t]), VOXEL, spot_radius_um=radius,
                                                     threshold=None, frame=t), sync_gpu)
        gpu_times.append(elapsed)
        gpu_counts.append(len(table["frame"]))
    cpu_times, cpu_counts = [], []
    detect_spots(stack[0][:16, :128, :128], VOXEL, spot_radius_um=radius, threshold=None)  # imports, caches
    for t in range(min(args.cpu_frames, args.frames)):
        elapsed, table = _timed(lambda: detect_spots(stack[t], VOXEL, spot_radius_um=radius, threshold=None,
                                                     frame=t), no_sync)
        cpu_times.append(elapsed)
        cpu_counts.append(len(table["frame"]))
    sampled = frames_to_sample(args.frames)
    estimate_spot_radius([cupy.asarray(stack[0])], VOXEL)  # warm-up
    scale_gpu, est_gpu = _timed(lambda: estimate_spot_radius((cupy.asarray(stack[t]) for t in sampled), VOXEL),
                                sync_gpu)
    scale_cpu, est_cpu = _timed(lambda: estimate_spot_radius((stack[t] for t in sampled), VOXEL), no_sync)

    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    g, c = statistics.median(gpu_times), statistics.median(cpu_times)
    lines = [
        f"Device: {device}; CPU: {os.cpu_count()} cores visible (scipy.ndimage filters: one thread); "
        f"stack {args.frames} x {' x '.join(map(str, shape))}, {args.particles} particles, voxel {VOXEL} µm, "
        f"PSF sigma {PSF_SIGMA} µm.",
        "",
        "| step | GPU | CPU | CPU / GPU | detections per frame (GPU / CPU) |",
        "|---|---:|---:|---:|---|",
        f"| detect_spots per frame (radius given, threshold per frame; median of {len(gpu_times)} GPU / "
        f"{len(cpu_times)} CPU frames) | {g * 1e3:.1f} ms | {c * 1e3:.0f} ms | {c / g:.1f}x | "
        f"{gpu_counts[:len(cpu_counts)]} / {cpu_counts} |",
        f"| spot-scale estimate ({len(sampled)} sampled frames; once per stack) | {scale_gpu * 1e3:.1f} ms | "
        f"{scale_cpu * 1e3:.0f} ms | {scale_cpu / scale_gpu:.1f}x | radius GPU {np.round(est_gpu.radius_um, 3)} "
        f"/ CPU {np.round(est_cpu.radius_um, 3)} µm |",
    ]
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
