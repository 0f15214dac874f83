"""End-to-end ``track run`` benchmark: a simulated (T, Z, Y, X) stack, GPU pipeline vs CPU pipeline.

Simulates particles, renders the stack (on the GPU when present), writes it
as a TIFF, then times reading + detection + linking per stage with
:func:`tracker.pipeline.track_stack`, on the GPU (``device="gpu"``,
``solver="auto"``) and on the CPU (``device="cpu"``, ``solver="scipy"``).
The CPU run may use fewer frames (``--cpu-frames``); its total is then
extrapolated linearly and marked as such.

Usage::

    python benchmarks/pipeline_bench.py                       # 100 × 64×512×512
    python benchmarks/pipeline_bench.py --frames 10 --shape 32,256,256 --cpu-frames 10
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from tracker.backend import cupy_or_none
from tracker.io import read_stack, write_stack
from tracker.metrics import evaluate
from tracker.pipeline import track_stack
from tracker.simulate import mean_nearest_neighbour_distance, render_stack, simulate_tracks

VOXEL = (0.4, 0.15, 0.15)
PSF_SIGMA = (0.45, 0.18, 0.18)
SPOT_RADIUS = (0.8, 0.3, 0.3)
"""Defaults (µm, z, y, x); ``--voxel`` and ``--psf`` change them (the spot radius is then sqrt(3) × PSF σ)."""


def make_stack(path: Path, frames: int, shape: tuple[int, int, int], particles: int, step: float, seed: int,
               voxel=VOXEL, psf=PSF_SIGMA):
    field = tuple((n - 1) * v for n, v in zip(shape, voxel))
    truth = simulate_tracks(particles, frames, field, step, 0.5, seed=seed)
    cupy = cupy_or_none()
    start = time.perf_counter()
    if cupy is not None:
        stack = render_stack(truth, (frames, *shape), voxel, psf, snr=6, seed=seed, xp=cupy).get()
    else:
        stack = render_stack(truth, (frames, *shape), voxel, psf, snr=6, seed=seed)
    render_s = time.perf_counter() - start
    write_stack(path, stack, voxel, overwrite=True)
    return truth, render_s


def run(path: Path, frames: int, device: str, solver: str, max_displacement: float,
        crop: tuple[int, int, int] | None = None, spot_radius=SPOT_RADIUS) -> dict:
    """Time ``track_stack`` on the first ``frames`` frames (optionally a corner ``crop`` of each volume)."""
    start = time.perf_counter()
    stack = read_stack(path)
    read_s = time.perf_counter() - start
    if frames < stack.n_frames:
        stack.data = stack.data[:frames]
    if crop is not None:
        stack.data = stack.data[(slice(None), *(slice(0, c) for c in crop))]
    start = time.perf_counter()
    result = track_stack(stack, spot_radius_um=spot_radius, max_displacement_um=max_displacement,
                         solver=solver, device=device)
    total = time.perf_counter() - start
    return {"frames": frames, "total": total, "read": read_s, **result.timings, "tracks": result.tracks,
            "detections": len(result.detections["frame"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--shape", default="64,512,512", help="Z,Y,X voxels")
    parser.add_argument("--particles", type=int, default=5000)
    parser.add_argument("--step", type=float, default=0.3, help="RMS step, µm")
    parser.add_argument("--cpu-frames", type=int, default=5, help="frames for the CPU run (0: skip)")
    parser.add_argument("--gpu-solvers", default="auto",
                        help="comma-separated linking solvers for the GPU pipeline, one row each")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--voxel", default=None, help="voxel size z,y,x in µm (default %s)" % (VOXEL,))
    parser.add_argument("--psf", default=None, help="PSF sigma z,y,x in µm (default %s)" % (PSF_SIGMA,))
    parser.add_argument("--workdir", default=None, help="where to write the stack (default: a temp dir)")
    parser.add_argument("--markdown", default=None, help="also write the table to this markdown file")
    args = parser.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    voxel = tuple(float(v) for v in args.voxel.split(",")) if args.voxel else VOXEL
    psf = tuple(float(v) for v in args.psf.split(",")) if args.psf else PSF_SIGMA
    spot_radius = tuple(3**0.5 * s for s in psf) if args.psf else SPOT_RADIUS
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="pipeline_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "bench_stack.tif"

    truth, render_s = make_stack(path, args.frames, shape, args.particles, args.step, args.seed, voxel, psf)
    nn = mean_nearest_neighbour_distance({k: v[truth["frame"] < 3] for k, v in truth.items()})
    gate = 4.0 * args.step
    size_gb = os.path.getsize(path) / 1e9
    print(f"stack {args.frames}×{shape} ({size_gb:.2f} GB), voxel {voxel} µm, PSF σ {psf} µm, "
          f"{len(truth['frame']) / args.frames:.0f} particles/frame, "
          f"NN {nn:.2f} µm, step/NN {args.step / nn:.2f}, rendered in {render_s:.1f} s", flush=True)

    rows = []
    if cupy_or_none() is not None:
        for solver in args.gpu_solvers.split(","):
            # warm-up (kernel compilation, caches) on a corner of the first frames
            run(path, min(3, args.frames), "gpu", solver, gate, crop=(64, 512, 512), spot_radius=spot_radius)
            gpu = run(path, args.frames, "gpu", solver, gate, spot_radius=spot_radius)
            rows.append((f"GPU (device=gpu, solver={solver})", gpu, 1.0))
    if args.cpu_frames:
        cpu = run(path, min(args.cpu_frames, args.frames), "cpu", "scipy", gate, spot_radius=spot_radius)
        rows.append(("CPU (device=cpu, solver=scipy)", cpu, args.frames / cpu["frames"]))

    lines = [
        f"End-to-end `track_stack` on {args.frames} frames of {shape[0]}×{shape[1]}×{shape[2]} voxels "
        f"(~{len(truth['frame']) / args.frames:.0f} particles/frame, step/NN {args.step / nn:.2f}).",
        "",
        "| pipeline | frames timed | read TIFF (s) | detect (s) | link (s) | total (s) | total for all frames (s) | link F1 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r, scale in rows:
        timed = {k: v[truth["frame"] < r["frames"]] for k, v in truth.items()}
        f1 = evaluate(r["tracks"], timed, 0.5)["link_f1"]
        extrapolated = f"{r['total'] * scale:.1f}" + (" (extrapolated)" if scale != 1.0 else "")
        lines.append(f"| {name} | {r['frames']} | {r['read']:.2f} | {r['detect']:.2f} | {r['link']:.2f} | {r['total']:.2f} | "
                     f"{extrapolated} | {f1:.4f} |")
    if len(rows) >= 2 and rows[-1][0].startswith("CPU"):
        gpu_total = rows[0][1]["total"]
        cpu_total = rows[-1][1]["total"] * rows[-1][2]
        lines.append("")
        lines.append(f"GPU speed-up over CPU for the whole stack (first GPU row): {cpu_total / gpu_total:.1f}×")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")


if __name__ == "__main__":
    main()
