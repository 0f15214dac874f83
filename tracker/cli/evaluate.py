"""``track evaluate``: compare tracks with a ground truth."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from ..params import MATCH_DISTANCE_UM
from ._options import UM, FiniteFloatRange, Triple, user_errors


@click.command("evaluate")
@user_errors
@click.argument("tracks", type=click.Path(path_type=Path))
@click.argument("ground_truth", type=click.Path(path_type=Path))
@click.option("--match-distance", type=FiniteFloatRange(min=0, min_open=True), default=MATCH_DISTANCE_UM,
              show_default=True,
              help=f"Largest distance ({UM}) at which a tracked point matches a true one (range > 0).")
@click.option("--voxel-size", type=Triple(), help=f"Voxel size Z,Y,X in {UM}, for files whose positions are in "
                                                  "voxels (ISBI challenge XML, TrackMate XML in pixels).")
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON (null where a measure is undefined).")
def evaluate_command(tracks: Path, ground_truth: Path, match_distance: float, voxel_size, as_json: bool) -> None:
    """Compare TRACKS with GROUND_TRUTH: detection, link and ISBI 2012 measures.

    Both may be CSV, Parquet, GEFF, TrackMate XML or ISBI 2012 XML (by the extension).
    """
    from ..io import read_tracks
    from ..metrics import evaluate as evaluate_tracks
    from ..validation import check_detections

    tables = [check_detections(read_tracks(path, voxel_size=voxel_size), what=str(path), drop_duplicates=False)
              for path in (tracks, ground_truth)]
    metrics = evaluate_tracks(*tables, match_distance)
    if as_json:
        # Strict JSON: an undefined measure (NaN, e.g. a precision without links) is null, not NaN.
        click.echo(json.dumps({name: _json_value(value) for name, value in metrics.items()}, indent=2,
                              allow_nan=False))
        return
    for name, value in metrics.items():
        click.echo(f"{name:24s} {value:.4f}" if isinstance(value, float) else f"{name:24s} {value}")


def _json_value(value):
    """``value`` for JSON: non-finite floats as None (null), NumPy scalars as Python numbers."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and not math.isfinite(value) else value
