"""``track evaluate``: compare tracks with a ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._options import UM, user_errors


@click.command("evaluate")
@user_errors
@click.argument("tracks", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("ground_truth", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--match-distance", type=float, default=1.0, show_default=True,
              help=f"Largest distance ({UM}) at which a tracked point matches a true one.")
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
def evaluate_command(tracks: Path, ground_truth: Path, match_distance: float, as_json: bool) -> None:
    """Compare TRACKS with GROUND_TRUTH (CSVs): detection, link and ISBI 2012 measures."""
    from ..io import read_table
    from ..metrics import evaluate as evaluate_tracks

    columns = ("track_id", "frame", "z", "y", "x")
    metrics = evaluate_tracks(read_table(tracks, columns), read_table(ground_truth, columns), match_distance)
    if as_json:
        click.echo(json.dumps(metrics, indent=2))
        return
    for name, value in metrics.items():
        click.echo(f"{name:24s} {value:.4f}" if isinstance(value, float) else f"{name:24s} {value}")
