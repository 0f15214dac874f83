"""``track evaluate``: compare tracks with a ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._options import UM, Triple, user_errors


@click.command("evaluate")
@user_errors
@click.argument("tracks", type=click.Path(path_type=Path))
@click.argument("ground_truth", type=click.Path(path_type=Path))
@click.option("--match-distance", type=float, default=1.0, show_default=True,
              help=f"Largest distance ({UM}) at which a tracked point matches a true one.")
@click.option("--voxel-size", type=Triple(), help=f"Voxel size Z,Y,X in {UM}, for files whose positions are in "
                                                  "voxels (ISBI challenge XML, TrackMate XML in pixels).")
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
def evaluate_command(tracks: Path, ground_truth: Path, match_distance: float, voxel_size, as_json: bool) -> None:
    """Compare TRACKS with GROUND_TRUTH: detection, link and ISBI 2012 measures.

    Both may be CSV, Parquet, GEFF, TrackMate XML or ISBI 2012 XML (by the extension).
    """
    from ..io import read_tracks
    from ..metrics import evaluate as evaluate_tracks

    metrics = evaluate_tracks(read_tracks(tracks, voxel_size=voxel_size),
                              read_tracks(ground_truth, voxel_size=voxel_size), match_distance)
    if as_json:
        click.echo(json.dumps(metrics, indent=2))
        return
    for name, value in metrics.items():
        click.echo(f"{name:24s} {value:.4f}" if isinstance(value, float) else f"{name:24s} {value}")
