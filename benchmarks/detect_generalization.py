"""Detection at defaults on stacks no choice of the detector was made on: other PSFs and voxels, mixed brightness.

Each stack goes through :func:`tracker.pipeline.detect_stack` with no options (as ``track run``: radius and
threshold estimated) and is scored against its truth (matched one-to-one within 0.5 µm). Field of view, spot
placement and background as ``detect_bench.py``'s grid. Only ``tracker`` functions that every version since
stop 23 has are used, so the same script scores another checkout::

    python benchmarks/detect_generalization.py --jsonl new.jsonl
    PYTHONPATH=/path/to/other/checkout python benchmarks/detect_generalization.py --jsonl old.jsonl

Cells:

* ``fresh``: Gaussian σ 0.5/0.2 µm on 0.35/0.13 µm voxels, a confocal-like PSF of widths 0.6/0.18 µm on
  0.3/0.12 µm, Gaussian σ 0.4/0.12 µm on 0.5/0.1 µm; 150, 250 and 600 photons; neighbours 2 and 3 µm apart;
  seeds 2000 and up.
* ``mixed``: each particle of one of several brightnesses (200 or 1500 photons; or 100, 200, 400, 800 or
  1600), Gaussian σ 0.45/0.18 µm on 0.4/0.15 µm voxels and σ 0.6/0.2 µm on 0.3/0.1 µm; seeds 3000 and up.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import warnings

import numpy as np

from tracker.metrics import match_points
from tracker.pipeline import detect_stack
from tracker.simulate import render_camera_stack, simulate_tracks
from tracker.stack import as_stack

FIELD_UM = (6.0, 16.0, 16.0)
TARGET_TRUE_SPOTS = 150
BACKGROUND_PER_UM3 = 1000.0
FRESH = {"gauss 0.5/0.2": ("gaussian", (0.5, 0.2, 0.2), (0.35, 0.13, 0.13)),
         "confocal 0.6/0.18": ("confocal", (0.6, 0.18, 0.18), (0.3, 0.12, 0.12)),
         "gauss 0.4/0.12": ("gaussian", (0.4, 0.12, 0.12), (0.5, 0.1, 0.1))}
MIXED = {"gauss 0.45/0.18": ((0.45, 0.18, 0.18), (0.4, 0.15, 0.15)),
         "gauss 0.6/0.2": ((0.6, 0.2, 0.2), (0.3, 0.1, 0.1))}
BRIGHTNESS = {"200+1500": (200, 1500), "100..1600": (100, 200, 400, 800, 1600)}


def _truth(voxel, nn_um: float, seed: int):
    per_frame = (0.554 / nn_um) ** 3 * np.prod(FIELD_UM)  # mean NN distance of a 3D Poisson process
    n_frames = max(2, math.ceil(TARGET_TRUE_SPOTS / per_frame))
    shape = (n_frames, *(int(round(f / v)) + 1 for f, v in zip(FIELD_UM, voxel)))
    return simulate_tracks(int(round(per_frame)), n_frames, FIELD_UM, 0.5, 0.0, margin_um=0.0, seed=seed), shape


def _render(truth, shape, voxel, psf, size, levels, seed):
    """A camera stack whose particles each have one of ``levels`` photons (per track), background once."""
    brightness = np.random.default_rng(seed).integers(0, len(levels), int(truth["track_id"].max()) + 1)
    group = brightness[truth["track_id"]]
    stack = np.zeros(shape, np.int64)
    for g, photons in enumerate(levels):
        first = g == 0  # (background, read noise and offset once; Poisson shot noise of each group's own)
        stack += render_camera_stack({k: v[group == g] for k, v in truth.items()}, shape, voxel, psf, size,
                                     photons=photons, background_photons=BACKGROUND_PER_UM3 * float(np.prod(voxel))
                                     if first else 0.0, read_noise_e=1.5 if first else 0.0,
                                     offset=100.0 if first else 0.0, seed=seed + g)
    return np.clip(stack, 0, 65535).astype(np.uint16)


def _score(stack, voxel, truth) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = detect_stack(as_stack(stack, voxel), device="cpu", workers=1)
    n_match = len(match_points(found, truth, 0.5)[2])
    n_found, n_true = len(found["z"]), len(truth["z"])
    return {"recall": n_match / n_true, "precision": n_match / n_found if n_found else 1.0,
            "f1": 2 * n_match / (n_found + n_true)}


def cells():
    for i, ((label, (psf, size, voxel)), photons, nn_um) in enumerate(
            itertools.product(FRESH.items(), (150, 250, 600), (2.0, 3.0))):
        yield "fresh", label, psf, size, voxel, (photons,), str(photons), nn_um, 2000 + i
    for i, ((label, (size, voxel)), (mix, levels), nn_um) in enumerate(
            itertools.product(MIXED.items(), BRIGHTNESS.items(), (2.0, 3.0))):
        yield "mixed", label, "gaussian", size, voxel, levels, mix, nn_um, 3000 + i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jsonl", help="append one JSON record per stack here")
    parser.add_argument("--only", choices=("fresh", "mixed"), help="one kind of cell")
    args = parser.parse_args()
    for kind, label, psf, size, voxel, levels, photons, nn_um, seed in cells():
        if args.only and kind != args.only:
            continue
        truth, shape = _truth(voxel, nn_um, seed)
        record = {"kind": kind, "psf": label, "voxel": voxel, "photons": photons, "nn_um": nn_um, "seed": seed,
                  **_score(_render(truth, shape, voxel, psf, size, levels, seed), voxel, truth)}
        print(json.dumps(record), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
