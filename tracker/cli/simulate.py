"""``track simulate``: particles in biased correlated motion, rendered to a TIFF, with their ground truth."""

from __future__ import annotations

from pathlib import Path

import click

from ._options import UM, Triple, user_errors


@click.command("simulate")
@user_errors
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ground-truth", type=click.Path(dir_okay=False, path_type=Path),
              help="Ground-truth CSV to write [default: OUTPUT_ground_truth.csv].")
@click.option("--frames", type=int, default=20, show_default=True)
@click.option("--shape", type=str, default="16,96,96", show_default=True, help="Volume size Z,Y,X in voxels.")
@click.option("--voxel-size", type=Triple(), default="0.4,0.15,0.15", show_default=True, help=f"Z,Y,X in {UM}.")
@click.option("--particles", type=int, default=40, show_default=True, help="Particles in view at the start.")
@click.option("--step", type=float, default=0.4, show_default=True, help=f"RMS displacement per frame, {UM}.")
@click.option("--persistence", type=float, default=0.5, show_default=True,
              help="Persistence of motion in [0, 1]: 0 Brownian, 1 straight lines.")
@click.option("--psf-sigma", type=Triple(), default="0.45,0.18,0.18", show_default=True,
              help=f"Gaussian PSF standard deviation Z,Y,X in {UM}.")
@click.option("--snr", type=float, default=6.0, show_default=True, help="Peak signal over background noise.")
@click.option("--birth-rate", type=float, default=0.0, show_default=True,
              help="New particles per frame, as a fraction of --particles.")
@click.option("--death-rate", type=float, default=0.0, show_default=True, help="Per-frame probability of dying.")
@click.option("--blink", type=float, default=0.0, show_default=True,
              help="Per-frame probability that a particle is invisible.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--overwrite", is_flag=True)
def simulate_command(output, ground_truth, frames, shape, voxel_size, particles, step, persistence, psf_sigma, snr,
             birth_rate, death_rate, blink, seed, overwrite):
    """Simulate particles in biased correlated motion and render them to OUTPUT (a T,Z,Y,X TIFF).

    Also writes the ground truth (track_id, frame, z, y, x in µm, visible) as CSV.
    """
    import numpy as np

    from ..errors import InputError
    from ..io import check_writable, write_stack, write_table
    from ..simulate import render_stack, simulate_tracks

    ground_truth = ground_truth or output.with_name(f"{output.stem}_ground_truth.csv")
    for path in (output, ground_truth):
        check_writable(path, overwrite)
    try:
        volume_shape = tuple(int(v) for v in shape.split(","))
    except ValueError:
        raise InputError(f"--shape must be Z,Y,X integers, got {shape!r}") from None
    if len(volume_shape) != 3 or min(volume_shape) < 1:
        raise InputError(f"--shape must be three positive integers Z,Y,X, got {shape!r}")
    # Voxel k is centred at k * voxel size: the field of view spans the voxel centres.
    field_of_view = tuple((n - 1) * v for n, v in zip(volume_shape, voxel_size))
    truth = simulate_tracks(particles, frames, field_of_view, step, persistence, birth_rate=birth_rate,
                            death_rate=death_rate, blink_probability=blink, seed=seed)
    stack = render_stack(truth, (frames, *volume_shape), voxel_size, psf_sigma, snr=snr, seed=seed + 1)
    write_stack(output, stack, voxel_size, overwrite=overwrite)
    write_table(ground_truth, truth, overwrite=overwrite)
    click.echo(f"{frames} frames of {volume_shape} voxels -> {output}; "
               f"{len(np.unique(truth['track_id']))} true tracks -> {ground_truth}", err=True)
