"""``track link``: link a detections table into tracks."""

from __future__ import annotations

from pathlib import Path

import click

from ..params import LinkingParams
from .convert import format_option
from ._options import (
    UM, ProgressBars, Triple, echo_summary, model_options, parameters_path, parameters_text, user_errors, verbosity_options,
)


def _column_map(ctx, param, value: str | None) -> dict[str, str]:
    """``frame=T,x=PosX`` as ``{"frame": "T", "x": "PosX"}``."""
    if not value:
        return {}
    pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
    if any(len(pair) != 2 or not pair[1].strip() for pair in pairs):
        raise click.BadParameter(f"expected KEY=COLUMN pairs separated by commas (e.g. frame=T,x=PosX), got {value!r}")
    mapping = {key.strip().lower(): name.strip() for key, name in pairs}
    unknown = set(mapping) - {"frame", "z", "y", "x"}
    if unknown:
        raise click.BadParameter(f"{', '.join(sorted(unknown))}: keys are frame, z, y, x")
    return mapping


@click.command("link")
@user_errors  # outermost: a bad --config is a user error too
@click.argument("detections", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Tracks file to write; the parameters used go beside it (tracks.csv → tracks.params.toml).")
@click.option("--voxel-size", type=Triple(allow_pair=True),
              help=f"For tables in pixels (trackpy's, TrackMate's uncalibrated ones, columns such as x_px): the "
                   f"voxel size Z,Y,X in {UM} (Y,X in 2D).")
@click.option("--columns", callback=_column_map,
              help="The table's frame and position columns where they are not recognised, e.g. "
                   "frame=T,z=PosZ,y=PosY,x=PosX (in µm unless the name says another unit, e.g. 'x [nm]').")
@model_options(LinkingParams)
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@format_option()
@verbosity_options
def link_command(detections: Path, output: Path, voxel_size, columns: dict[str, str], linking: LinkingParams,
                 overwrite: bool, output_format: str | None, quiet: bool) -> None:
    """Link a detections table into tracks: CSV or Parquet with columns frame, z, y, x in µm (frame, y, x in 2D),
    or another tool's (TrackMate's spot table, trackpy's features, ThunderSTORM's, columns such as 'x [nm]')."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pyarrow.csv  # noqa: F401  (here, not on the reading thread: importing holds the GIL)

    from ..io import write_text, write_tracks
    from ..io.detection_tables import read_detections
    from ..io._atomic import check_outputs

    saved = parameters_path(output)
    check_outputs({"DETECTIONS": detections}, {"-o": output, "the parameters file": saved}, overwrite)
    # The table is parsed (pyarrow, without the GIL) while SciPy and the linker are imported (with it), on a free
    # core (a 10k x 20 table: 0.01-0.04 s of reading; benchmarks/results/cli_link.md). Its errors are raised here.
    with ThreadPoolExecutor(1, thread_name_prefix="tracker-read") as reader:
        reading = reader.submit(read_detections, detections, voxel_size, columns)
        from ..linking import link_detections
        from ..validation import check_detections, check_gate

        table = check_detections(reading.result(), what=str(detections))
    if linking.max_displacement_um is not None:
        check_gate(table, linking.max_displacement_um)
    with ProgressBars(enabled=not quiet) as progress:
        tracks, summary = link_detections(table, progress=progress, return_summary=True, **linking.to_dict())
    if linking.max_displacement_um is None:  # (saved as used: --config reproduces the output)
        linking = linking.replace(max_displacement_um=summary.gate.value_um)
    write_tracks(output, tracks, output_format, overwrite=overwrite, parameters={"linking": linking.to_dict()})
    write_text(saved, parameters_text(linking), overwrite=overwrite)
    if not quiet:
        n_tracks = len(np.unique(tracks["track_id"])) if len(tracks["track_id"]) else 0
        click.echo(f"{len(tracks['frame'])} points, {n_tracks} tracks -> {output}", err=True)
        echo_summary(summary)
