"""The ``track`` command line: a thin layer over :mod:`tracker`.

User errors (bad files, bad parameters) print one line and exit with code 1;
outputs are written atomically and never replace a file without
``--overwrite``.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import click
import numpy as np

from . import __version__
from .io import InputError, read_stack, read_table, write_stack, write_table
from .lap import available_solvers
from .linking.gap_closing import DEFAULT_GAP_PENALTY, DEFAULT_MAX_GAP

UM = "µm"


def _user_errors(command):
    """Turn user errors into a one-line message and exit code 1 (no traceback)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (InputError, ValueError, RuntimeError, OSError) as error:
            raise click.ClickException(str(error).splitlines()[0] if str(error) else type(error).__name__) from None

    return wrapper


class Triple(click.ParamType):
    """``Z,Y,X`` (three numbers) or, if ``allow_single``, one number for all axes."""

    name = "Z,Y,X"

    def __init__(self, allow_single: bool = False):
        self.allow_single = allow_single

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            numbers = tuple(float(v) for v in str(value).replace(" ", "").split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of numbers", param, ctx)
        if len(numbers) == 1 and self.allow_single:
            return numbers[0]
        if len(numbers) != 3:
            self.fail(f"expected three numbers Z,Y,X, got {value!r}", param, ctx)
        if not all(np.isfinite(v) and v > 0 for v in numbers):
            self.fail(f"values must be positive, got {value!r}", param, ctx)
        return numbers


def _check_output(path: Path, overwrite: bool) -> None:
    """Fail before any work if an output cannot be written."""
    if path.exists() and not overwrite:
        raise InputError(f"{path} already exists (use --overwrite to replace it)")
    if not path.parent.exists():
        raise InputError(f"folder {path.parent} does not exist")


class _Progress:
    """A click progress bar per stage, on standard error."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.stage = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage != self.stage:
            self.close()
            self.stage = stage
            label = {"detect": "Detecting spots", "link": "Linking frames", "smooth": "Smoothing links",
                     "exchange": "Exchanging spots"}.get(stage, stage)
            self.bar = click.progressbar(length=total, label=f"{label:16s}", file=sys.stderr, show_pos=True)
            self.bar.__enter__()
            self._done = 0
        self.bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _linking_options(command):
    """The linking options shared by ``track run`` and ``track link``.

    They reach the command as one ``linking`` dict of keyword arguments for
    :func:`tracker.linking.link_detections`.
    """
    options = [
        click.option("--max-displacement", type=click.FloatRange(min=0, min_open=True), default=1.0,
                     show_default=True,
                     help=f"Largest distance a particle moves between two frames, in {UM} (the gate)."),
        click.option("--motion", type=click.Choice(["persistent", "none"]), default="persistent",
                     show_default=True,
                     help="'persistent': predict each particle from its last step times the persistence "
                          "(estimated from the data); 'none': nearest-neighbour linking."),
        click.option("--persistence", type=click.FloatRange(0, 1), default=None,
                     help="Persistence of motion in [0, 1] (0 Brownian, 1 straight lines) "
                          "[default: estimated from the data]."),
        click.option("--adaptive-radius/--no-adaptive-radius", default=True, show_default=True,
                     help="Search each particle's candidates within 4.5 standard deviations of its expected "
                          "scatter (never beyond --max-displacement); where particles differ in mobility, "
                          "each track's own scatter, in the radius and the costs."),
        click.option("--smoothing/--no-smoothing", default=True, show_default=True,
                     help="With persistent motion, link every frame pair again weighing how each candidate "
                          "link continues into the next frame (forward-backward), then exchange single "
                          "detections between tracks where that makes both more likely (about twice the "
                          "linking time, fewer wrong links where paths cross)."),
        click.option("--max-gap", type=click.IntRange(min=0), default=DEFAULT_MAX_GAP, show_default=True,
                     help="Close gaps of up to this many missing frames (0: off)."),
        click.option("--gap-penalty", type=click.FloatRange(min=0), default=DEFAULT_GAP_PENALTY,
                     show_default=True,
                     help="Extra cost per missing frame of a gap-closing link, in squared standard "
                          "deviations of the expected motion."),
        click.option("--solver", type=click.Choice(available_solvers("gated")), default="auto",
                     show_default=True,
                     help="Assignment solver (all exact but 'dgs', a heuristic). 'auto': the GPU auction for "
                          "frames of 2k+ detections when a GPU is present, else SciPy. The Hungarian solvers "
                          "build one dense matrix per frame pair (moderate sizes). See `track solvers`."),
    ]
    names = ("max_displacement", "motion", "persistence", "adaptive_radius", "smoothing", "max_gap", "gap_penalty",
             "solver")

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        linking = {name: kwargs.pop(name) for name in names}
        linking["max_displacement_um"] = linking.pop("max_displacement")
        return command(*args, linking=linking, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="track")
def main():
    """Track particles in 3D microscopy time-lapses.

    \b
    Typical use:
      track run stack.tif -o tracks.csv --spot-radius 0.4 --max-displacement 1.5
    Positions, radii and displacements are in micrometres (µm); the voxel
    size comes from the TIFF metadata unless --voxel-size is given.
    """


@main.command()
@click.argument("stack", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Tracks CSV to write [default: STACK_tracks.csv next to the stack].")
@click.option("--detections", "detections_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the detections table (CSV) here.")
@click.option("--voxel-size", type=Triple(), help=f"Voxel size Z,Y,X in {UM} (overrides the file's metadata).")
@click.option("--axes", help="Axes of the TIFF when its metadata is ambiguous, e.g. TZYX, ZYX or TYX.")
@click.option("--spot-radius", type=Triple(allow_single=True), default="0.5", show_default=True,
              help=f"Spot radius in {UM}: one value (isotropic) or Z,Y,X for an elongated PSF.")
@click.option("--threshold", type=float, default=None,
              help="Detection threshold, in units of background noise (a signal-to-noise ratio) [default: 6].")
@_linking_options
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto", show_default=True,
              help="Where detection runs.")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
@_user_errors
def run(stack, output, detections_path, voxel_size, axes, spot_radius, threshold, linking, device,
        overwrite, quiet):
    """Detect spots in every frame of STACK (a T,Z,Y,X TIFF) and link them into tracks.

    Writes a CSV with one row per tracked point: track_id, frame, z, y, x (µm),
    intensity, quality, link_cost (µm², squared distance of the point from
    where its link predicted it) and link_confidence (0..1; sort by it to
    review the least certain links first). Both are NaN where a track
    starts.
    """
    from .pipeline import track_stack

    output = output or stack.with_name(f"{stack.stem}_tracks.csv")
    for path in filter(None, (output, detections_path)):
        _check_output(path, overwrite)
    started = time.perf_counter()
    data = read_stack(stack, voxel_size=voxel_size, axes=axes)
    if not quiet:
        for note in data.notes:
            click.echo(f"note: {note}", err=True)
    progress = _Progress(enabled=not quiet)
    try:
        result = track_stack(data, spot_radius_um=spot_radius, threshold=threshold, device=device,
                             progress=progress, **linking)
    finally:
        progress.close()
    tracks = {k: v for k, v in result.tracks.items() if not k.endswith("_vox")}
    write_table(output, tracks, overwrite=overwrite)
    if detections_path:
        write_table(detections_path, result.detections, overwrite=overwrite)
    if not quiet:
        n_det = len(result.detections["frame"])
        click.echo(
            f"{data.n_frames} frames, {n_det} detections ({n_det / max(data.n_frames, 1):.1f}/frame), "
            f"{result.n_tracks} tracks -> {output}\n"
            f"time: detect {result.timings['detect']:.2f} s, link {result.timings['link']:.2f} s, "
            f"total {time.perf_counter() - started:.2f} s",
            err=True,
        )
        click.echo(str(result.linking), err=True)


@main.command()
@click.argument("detections", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Tracks CSV to write.")
@_linking_options
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@click.option("-q", "--quiet", is_flag=True)
@_user_errors
def link(detections, output, linking, overwrite, quiet):
    """Link a detections table (CSV with columns frame, z, y, x in µm) into tracks."""
    from .linking import link_detections

    _check_output(output, overwrite)
    table = read_table(detections, required=("frame", "z", "y", "x"))
    for name in ("z", "y", "x"):
        if not np.isfinite(table[name]).all():
            raise InputError(f"{detections}: column {name!r} has missing or non-finite values")
    progress = _Progress(enabled=not quiet)
    try:
        tracks, summary = link_detections(table, progress=progress, return_summary=True, **linking)
    finally:
        progress.close()
    write_table(output, tracks, overwrite=overwrite)
    if not quiet:
        n_tracks = len(np.unique(tracks["track_id"])) if len(tracks["track_id"]) else 0
        click.echo(f"{len(tracks['frame'])} points, {n_tracks} tracks -> {output}", err=True)
        click.echo(str(summary), err=True)


@main.command()
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
@_user_errors
def simulate(output, ground_truth, frames, shape, voxel_size, particles, step, persistence, psf_sigma, snr,
             birth_rate, death_rate, blink, seed, overwrite):
    """Simulate particles in biased correlated motion and render them to OUTPUT (a T,Z,Y,X TIFF).

    Also writes the ground truth (track_id, frame, z, y, x in µm, visible) as CSV.
    """
    from .simulate import render_stack, simulate_tracks

    ground_truth = ground_truth or output.with_name(f"{output.stem}_ground_truth.csv")
    for path in (output, ground_truth):
        _check_output(path, overwrite)
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


@main.command()
@click.argument("tracks", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("ground_truth", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--match-distance", type=float, default=1.0, show_default=True,
              help=f"Largest distance ({UM}) at which a tracked point matches a true one.")
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@_user_errors
def evaluate(tracks, ground_truth, match_distance, as_json):
    """Compare TRACKS with GROUND_TRUTH (CSVs): detection, link and ISBI 2012 measures."""
    from .metrics import evaluate as evaluate_tracks

    columns = ("track_id", "frame", "z", "y", "x")
    metrics = evaluate_tracks(read_table(tracks, columns), read_table(ground_truth, columns), match_distance)
    if as_json:
        click.echo(json.dumps(metrics, indent=2))
        return
    for name, value in metrics.items():
        click.echo(f"{name:24s} {value:.4f}" if isinstance(value, float) else f"{name:24s} {value}")


@main.command()
def solvers():
    """List the assignment solvers and what this machine can run."""
    from .backend import gpu_available
    from .lap._registry import _SOLVERS

    gpu = gpu_available()
    for solver in _SOLVERS.values():
        usable = "yes" if (gpu or not solver.gpu) else "no (needs a GPU)"
        kind = "exact" if solver.exact else "heuristic"
        click.echo(f"{solver.name:22s} {kind:9s} usable: {usable:16s} {solver.description}")


if __name__ == "__main__":  # pragma: no cover
    main()
