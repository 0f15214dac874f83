"""``track convert``: convert tracks between CSV, Parquet, GEFF, TrackMate XML and ISBI 2012 XML."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from ._options import UM, LazyChoice, Triple, user_errors

FORMAT_HELP = ("csv, parquet, geff, trackmate or isbi [default: from the extension: .csv, .parquet, .geff, "
               ".xml (TrackMate), .isbi.xml]")


def _track_formats() -> tuple[str, ...]:
    from ..io import TRACK_FORMATS

    return TRACK_FORMATS


def format_option(*names: str, help: str = f"Format of the tracks written: {FORMAT_HELP}.") -> Callable:
    """The ``--format`` option of a verb that writes tracks (its value: a format name or None)."""
    return click.option(*(names or ("--format", "output_format")), type=LazyChoice(_track_formats), default=None,
                        help=help)


@click.command("convert")
@user_errors
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("output", type=click.Path(path_type=Path))
@format_option("--from", "input_format", help=f"Format of SOURCE: {FORMAT_HELP}; an .xml file is recognised "
                                              "by its root element.")
@format_option("--format", "output_format", help=f"Format of OUTPUT: {FORMAT_HELP}.")
@click.option("--voxel-size", type=Triple(), help=f"Voxel size Z,Y,X in {UM}: ISBI XML positions are in voxels "
                                                  "(read and written), as are TrackMate files in pixels.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUTPUT.")
def convert_command(source: Path, output: Path, input_format: str | None, output_format: str | None,
                    voxel_size, overwrite: bool) -> None:
    """Convert the tracks in SOURCE to OUTPUT, keeping every point and link.

    Formats: CSV or Parquet tables (one row per point: track_id, frame, z, y, x
    in µm, ...), GEFF (a .geff Zarr folder; Python's tracking tools), TrackMate
    XML (opens in Fiji) and ISBI 2012 challenge XML (Icy, the challenge's
    evaluation). Columns a format cannot hold are left out (ISBI keeps positions
    only; TrackMate numeric columns only).
    """
    from ..io import read_tracks, write_tracks
    from ..io._atomic import check_outputs

    check_outputs({"SOURCE": source}, {"OUTPUT": output}, overwrite)
    tracks = read_tracks(source, input_format, voxel_size=voxel_size)
    kind = write_tracks(output, tracks, output_format, overwrite=overwrite, voxel_size=voxel_size)
    if kind == "isbi" and voxel_size is None:
        click.echo("note: no --voxel-size: the ISBI XML holds positions in µm where the challenge's files hold "
                   "voxels; read it back without --voxel-size too", err=True)
    n_tracks = len(set(tracks["track_id"].tolist()))
    click.echo(f"{len(tracks['frame'])} points, {n_tracks} tracks -> {output} ({kind})", err=True)
