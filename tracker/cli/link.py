"""``track link``: link a detections table into tracks."""

from __future__ import annotations

from pathlib import Path

import click

from ..params import LinkingParams
from .convert import format_option
from ._options import ProgressBars, echo_summary, model_options, parameters_path, parameters_text, user_errors, verbosity_options


@click.command("link")
@user_errors  # outermost: a bad --config is a user error too
@click.argument("detections", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Tracks file to write; the parameters used go beside it (tracks.csv → tracks.params.toml).")
@model_options(LinkingParams)
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@format_option()
@verbosity_options
def link_command(detections: Path, output: Path, linking: LinkingParams, overwrite: bool, output_format: str | None,
                 quiet: bool) -> None:
    """Link a detections table (CSV with columns frame, z, y, x in µm) into tracks."""
    import numpy as np

    from ..errors import InputError
    from ..io import check_writable, read_table, write_text, write_tracks
    from ..linking import link_detections

    saved = parameters_path(output)
    for path in (output, saved):
        check_writable(path, overwrite)
    table = read_table(detections, required=("frame", "z", "y", "x"))
    for name in ("z", "y", "x"):
        if not np.isfinite(table[name]).all():
            raise InputError(f"{detections}: column {name!r} has missing or non-finite values")
    with ProgressBars(enabled=not quiet) as progress:
        tracks, summary = link_detections(table, progress=progress, return_summary=True, **linking.to_dict())
    write_tracks(output, tracks, output_format, overwrite=overwrite, parameters={"linking": linking.to_dict()})
    write_text(saved, parameters_text(linking), overwrite=overwrite)
    if not quiet:
        n_tracks = len(np.unique(tracks["track_id"])) if len(tracks["track_id"]) else 0
        click.echo(f"{len(tracks['frame'])} points, {n_tracks} tracks -> {output}", err=True)
        echo_summary(summary)
