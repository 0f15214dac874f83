"""Sample data: the bundled sample stack with its ground truth, and a freshly simulated one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._layers import KIND_KEY, contrast_limits, ground_truth_layer_data

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
# The parameters sample_data/README.md regenerates the bundled sample with (bit-identical).
SAMPLE_PARAMETERS = {"frames": 20, "shape": (16, 96, 96), "voxel_size": (0.4, 0.15, 0.15), "particles": 40,
                     "step": 0.4, "persistence": 0.5, "psf_sigma": (0.45, 0.18, 0.18), "snr": 5.0, "seed": 7}
RECOMMENDED = {"spot_radius_um": (0.8, 0.3, 0.3), "max_displacement_um": 1.2}
"""Detection/linking parameters (:mod:`tracker.params` field names) that sample_data/README.md recommends for
the sample; the widget fills them in when the sample is selected."""


def simulate(frames=20, shape=(16, 96, 96), voxel_size=(0.4, 0.15, 0.15), particles=40, step=0.4,
             persistence=0.5, psf_sigma=(0.45, 0.18, 0.18), snr=6.0, seed=0):
    """Ground truth and rendered ``(T, Z, Y, X)`` uint16 stack, as ``track simulate`` makes them."""
    from tracker.simulate import render_stack, simulate_tracks

    field_of_view = tuple((n - 1) * v for n, v in zip(shape, voxel_size))
    truth = simulate_tracks(particles, frames, field_of_view, step, persistence, seed=seed)
    stack = render_stack(truth, (frames, *shape), voxel_size, psf_sigma, snr=snr, seed=seed + 1)
    return truth, np.asarray(stack)


def _layers(stack, voxel_size, truth, name: str, **metadata) -> list[tuple[Any, dict[str, Any], str]]:
    image = (stack, {"name": name, "scale": (1.0, *voxel_size), "colormap": "gray",
                     "contrast_limits": contrast_limits(np.asarray(stack[len(stack) // 2])),
                     "metadata": {KIND_KEY: "stack", "voxel_size": tuple(voxel_size), **metadata,
                                  "recommended": RECOMMENDED}}, "image")
    truth_layer = ground_truth_layer_data(truth, f"{name} ground truth")
    truth_layer[1]["visible"] = False  # shown on demand; the widget uses it for correctness colouring
    return [image, truth_layer]


def make_sample_data() -> list[tuple[Any, dict[str, Any], str]]:
    """The bundled sample (sample_data/sample.tif + ground truth); regenerated in memory if not on disk."""
    from tracker.io import read_stack, read_table

    tif, csv = SAMPLE_DIR / "sample.tif", SAMPLE_DIR / "sample_ground_truth.csv"
    if tif.is_file() and csv.is_file():
        stack = read_stack(tif)
        truth = read_table(csv, required=("track_id", "frame", "z", "y", "x"))
        return _layers(stack.data, stack.voxel_size, truth, "sample", path=str(tif))
    params = dict(SAMPLE_PARAMETERS)
    truth, stack = simulate(**params)
    return _layers(stack, params["voxel_size"], truth, "sample")


def make_simulated_data(seed: int | None = None) -> list[tuple[Any, dict[str, Any], str]]:
    """A freshly simulated stack (a new random seed each time) with its ground truth."""
    if seed is None:
        seed = int(np.random.default_rng().integers(0, 2**31 - 1))
    params = dict(SAMPLE_PARAMETERS, seed=seed, snr=6.0)
    truth, stack = simulate(**params)
    return _layers(stack, params["voxel_size"], truth, f"simulated {seed}", seed=seed)
