"""``track simulate``: particles in biased correlated motion, rendered to a TIFF, with their ground truth."""

from __future__ import annotations

from pathlib import Path

import click

from ..params import SimulationParams
from ._options import UM, Triple, model_options, user_errors


@click.command("simulate")
@user_errors
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ground-truth", type=click.Path(dir_okay=False, path_type=Path),
              help="Ground-truth CSV to write [default: OUTPUT_ground_truth.csv].")
@click.option("--shape", type=Triple(whole=True), default="16,96,96", show_default=True,
              help="Volume size Z,Y,X in voxels.")
@click.option("--voxel-size", type=Triple(), default="0.4,0.15,0.15", show_default=True, help=f"Z,Y,X in {UM}.")
@click.option("--psf-sigma", type=Triple(), default="0.45,0.18,0.18", show_default=True,
              help=f"Gaussian PSF standard deviation Z,Y,X in {UM}.")
@model_options(SimulationParams, config=False)
@click.option("--overwrite", is_flag=True)
def simulate_command(output: Path, ground_truth: Path | None, shape: tuple[int, int, int], voxel_size, psf_sigma,
                     simulation: SimulationParams, overwrite: bool) -> None:
    """Simulate particles in biased correlated motion and render them to OUTPUT (a T,Z,Y,X TIFF).

    Also writes the ground truth (track_id, frame, z, y, x in µm, visible) as CSV.
    """
    import numpy as np

    from ..io import write_stack, write_table
    from ..io._atomic import check_outputs
    from ..simulate import check_render, render_stack, simulate_tracks

    ground_truth = ground_truth or output.with_name(f"{output.stem}_ground_truth.csv")
    check_outputs({}, {"OUTPUT": output, "--ground-truth": ground_truth}, overwrite)
    s = simulation
    check_render((s.n_frames, *shape), voxel_size, psf_sigma, s.snr, s.n_particles)
    # Voxel k is centred at k * voxel size: the field of view spans the voxel centres.
    field_of_view = tuple((n - 1) * v for n, v in zip(shape, voxel_size))
    truth = simulate_tracks(s.n_particles, s.n_frames, field_of_view, s.step_um, s.persistence,
                            birth_rate=s.birth_rate, death_rate=s.death_rate, blink_probability=s.blink_probability,
                            seed=s.seed)
    stack = render_stack(truth, (s.n_frames, *shape), voxel_size, psf_sigma, snr=s.snr, seed=s.seed + 1)
    write_stack(output, stack, voxel_size, overwrite=overwrite)
    write_table(ground_truth, truth, overwrite=overwrite)
    click.echo(f"{s.n_frames} frames of {shape} voxels -> {output}; "
               f"{len(np.unique(truth['track_id']))} true tracks -> {ground_truth}", err=True)
