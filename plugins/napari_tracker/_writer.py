"""Writer contribution: a Tracks layer -> tracks CSV with the columns ``track run`` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._layers import output_table, table_from_tracks_layer


def write_tracks(path: str, data: Any, attributes: dict[str, Any]) -> list[str]:
    """Write one Tracks layer as CSV: ``track_id, frame, z, y, x, intensity, quality, link_cost, link_confidence``.

    Positions are written in world coordinates (µm): ``data * scale + translate``.
    Overwrites ``path`` (napari's save dialog has already asked), atomically.
    """
    from tracker.io import write_table

    path = Path(path)
    if path.suffix.lower() != ".csv":
        path = path.with_suffix(".csv")
    table = table_from_tracks_layer(
        data, attributes.get("features"), attributes.get("scale"), attributes.get("translate")
    )
    write_table(path, output_table(table), overwrite=True)
    return [str(path)]
