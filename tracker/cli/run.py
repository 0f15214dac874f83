"""``track run``: detect spots in every frame of a stack and link them into tracks."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import click

from ..params import ClusterParams, DetectionParams, LinkingParams
from .convert import format_option
from ._options import (
    UM, ProgressBars, Triple, echo_summary, model_options, parameters_path, parameters_text, user_errors, verbosity_options,
)


@click.command("run")
@user_errors  # outermost: a bad --config is a user error too
@click.argument("stack", type=click.Path(path_type=Path))  # (a Zarr / OME-Zarr stack is a folder)
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Tracks file to write [default: STACK_tracks.csv next to the stack]; the parameters used "
                   "go beside it (tracks.csv → tracks.params.toml).")
@click.option("--detections", "detections_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the detections table (CSV) here.")
@click.option("--voxel-size", type=Triple(allow_pair=True),
              help=f"Voxel size Z,Y,X in {UM}, or Y,X for a 2D time series (overrides the file's metadata).")
@click.option("--axes", help="Axes of the stack when its metadata is ambiguous or wrong, e.g. TZYX, ZTYX, TZCYX, "
                             "ZYX or TYX (for a folder of TIFFs, one file's: ZYX or YX).")
@click.option("--channel", type=click.IntRange(min=0), help="The channel to track (0-based) in a stack of several.")
@model_options(DetectionParams, LinkingParams)
@model_options(ClusterParams, config=False)
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@format_option()
@verbosity_options
def run_command(stack: Path, output: Path | None, detections_path: Path | None, voxel_size, axes: str | None,
        channel: int | None, detection: DetectionParams, linking: LinkingParams, cluster: ClusterParams, overwrite: bool,
        output_format: str | None, quiet: bool) -> None:
    """Detect spots in every frame of STACK (a T,Z,Y,X TIFF, a Zarr / OME-Zarr folder, or a folder of TIFFs,
    one per time point) and link them into tracks.

    Writes a CSV with one row per tracked point: track_id, frame, z, y, x (µm),
    intensity, quality, link_cost (µm², squared distance of the point from
    where its link predicted it) and link_confidence (0..1; sort by it to
    review the least certain links first). Both are NaN where a track
    starts. The parameters used are saved beside it (OUTPUT.params.toml);
    --config reads them back. With --workers, --scheduler or --gpus, the frames
    are read and detected on a Dask cluster (the same tracks).
    """
    from ..io import read_stack, write_table, write_text, write_tracks
    from ..io._atomic import check_outputs
    from ..distributed.cluster import check_cluster, wanted
    from ..pipeline import track_stack

    check_cluster(cluster)  # (contradicting options: one line before any work)
    output = output or stack.with_name(f"{stack.stem}_tracks.csv")
    saved = parameters_path(output)
    check_outputs({"STACK": stack}, {"-o": output, "--detections": detections_path, "the parameters file": saved},
                  overwrite)
    started = time.perf_counter()
    data = read_stack(stack, voxel_size=voxel_size, axes=axes, channel=channel)
    if not quiet:
        for note in data.notes:
            click.echo(f"note: {note}", err=True)
    sink = None
    with contextlib.ExitStack() as files:  # (in time blocks: files written block by block, finished at the end)
        with ProgressBars(enabled=not quiet) as progress:
            if wanted(cluster):  # (the workers read the frames themselves)
                from ..distributed import track_on_cluster
                from ..distributed.block_writer import streamed_outputs, streams_tracks

                if streams_tracks(cluster, output, output_format):
                    sink = files.enter_context(streamed_outputs(output, detections_path, overwrite, output_format))
                result = track_on_cluster(stack, cluster=cluster, voxel_size_um=voxel_size, axes=axes,
                                          channel=channel, detection=detection, linking=linking, progress=progress,
                                          sink=sink)
            else:
                result = track_stack(data, detection=detection, linking=linking, progress=progress)
        if result.spot_scale is not None:  # (saved as used: --config reproduces the run without estimating again)
            detection = detection.replace(spot_radius_um=result.spot_scale.radius_um)
        if linking.max_displacement_um is None:  # (likewise the gate estimated from the detections)
            linking = linking.replace(max_displacement_um=result.linking.gate.value_um)
        parameters = {"detection": detection.to_dict(), "linking": linking.to_dict()}
        if sink is None:
            tracks = {k: v for k, v in result.tracks.items() if not k.endswith("_vox")}
            write_tracks(output, tracks, output_format, overwrite=overwrite, voxel_size=data.voxel_size,
                         image_path=stack, parameters=parameters)
            if detections_path:
                write_table(detections_path, result.detections, overwrite=overwrite)
        else:  # (GEFF keeps them in its metadata, written when the file is finished)
            sink.parameters = parameters
    write_text(saved, parameters_text(detection, linking), overwrite=overwrite)
    if not quiet:
        n_det, n_tracks = (len(result.detections["frame"]), result.n_tracks) if sink is None else (sink.n_points,
                                                                                                 sink.n_tracks)
        click.echo(
            f"{data.n_frames} frames, {n_det} detections ({n_det / max(data.n_frames, 1):.1f}/frame), "
            f"{n_tracks} tracks -> {output}\n"
            f"time: detect {result.timings['detect']:.2f} s, link {result.timings['link']:.2f} s, "
            f"total {time.perf_counter() - started:.2f} s",
            err=True,
        )
        if result.spot_scale is not None:
            click.echo(str(result.spot_scale), err=True)
        if result.threshold_fit is not None:
            click.echo(str(result.threshold_fit), err=True)
        echo_summary(result.linking)
