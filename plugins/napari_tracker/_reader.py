"""Reader contribution: TIFF stacks -> Image (scale from the voxel size); tracks CSV -> Tracks; detections CSV -> Points."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ._layers import (
    KIND_KEY,
    POINT_SIZE_UM,
    contrast_limits,
    ground_truth_layer_data,
    points_layer_data,
    tracks_layer_data,
    tracks_layer_kwargs,
)

TIFF_SUFFIXES = (".tif", ".tiff")
LayerData = list[tuple[Any, dict[str, Any], str]]


def napari_get_reader(path: str | list[str]) -> Callable[[str | list[str]], LayerData] | None:
    """A reader if this plugin can open every path, else None (napari then asks other readers).

    The files are opened here (stacks lazily: a memory map or one frame at a time), so a TIFF this
    plugin cannot track (a single 2D image, several channels, corrupt) or a CSV without the columns of a
    tracks, ground-truth or detections table is left to other readers instead of failing later.
    """
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    if not paths or not all(_kind(Path(p)) for p in paths):
        return None
    try:
        layers = read(paths)
    except (ValueError, OSError):  # tracker.io's InputError is a ValueError
        return None
    return lambda _path: layers


def read(path: str | list[str]) -> LayerData:
    """Layer-data tuples for each path (raises ``InputError`` for a file it cannot open)."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    layers: LayerData = []
    for p in paths:
        p = Path(p)
        kind = _kind(p)
        if kind == "stack":
            layers.extend(stack_layers(p))
        elif kind in ("tracks", "ground_truth"):
            layers.append(tracks_file_layer_data(p, kind))
        elif kind == "detections":
            layers.append(detections_file_layer_data(p))
        elif kind == "session":
            layers.append(session_layer_data(p))
    return layers


def _kind(path: Path) -> str | None:
    from ._session import SESSION_SUFFIX

    if path.name.endswith(SESSION_SUFFIX) and path.is_file():
        return "session"
    suffix = path.suffix.lower()
    if suffix in TIFF_SUFFIXES:
        return "stack"
    if suffix != ".csv" or not path.is_file():
        return None
    try:
        with open(path, newline="") as handle:
            header = {h.strip() for h in next(csv.reader(handle), [])}
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not {"frame", "z", "y", "x"} <= header:
        return None
    if "track_id" in header:
        return "ground_truth" if "visible" in header and "link_cost" not in header else "tracks"
    return "detections"


CHANNEL_COLORMAPS = ("green", "magenta", "cyan", "yellow", "red", "blue")
"""Colormaps of a multi-channel stack's layers, in channel order (then again), blended additively."""


def stack_layers(path: Path, voxel_size=None) -> LayerData:
    """Image layer tuples for a stack: one, or one per channel of a multi-channel stack (each tracked alone)."""
    from tracker.errors import SeveralChannelsError

    try:
        return [stack_layer_data(path, voxel_size)]
    except SeveralChannelsError as several:
        layers = [stack_layer_data(path, voxel_size, channel) for channel in range(several.n_channels)]
        for channel, (_, kwargs, _) in enumerate(layers):
            kwargs.update(colormap=CHANNEL_COLORMAPS[channel % len(CHANNEL_COLORMAPS)], blending="additive")
        return layers


def stack_layer_data(path: Path, voxel_size=None, channel: int | None = None) -> tuple[Any, dict[str, Any], str]:
    """An Image layer tuple for a stack (of one ``channel``); scale ``(1, dz, dy, dx)`` puts the world in µm."""
    from tracker.io import read_stack

    stack = read_stack(path, voxel_size, channel=channel)
    data = stack.data  # a memory map, or a tracker.stack.FrameArray reading frame by frame
    kwargs = {
        "name": path.stem if channel is None else f"{path.stem} [{channel}]",
        "scale": (1.0, *stack.voxel_size),
        "colormap": "gray",
        "contrast_limits": contrast_limits(stack.frame(stack.n_frames // 2)),
        "metadata": {KIND_KEY: "stack", "path": str(path), "channel": channel, "voxel_size": tuple(stack.voxel_size),
                     "notes": list(stack.notes),
                     # read_stack's note when the file has no voxel size (then 1 µm)
                     "voxel_size_assumed": voxel_size is None and any(n.startswith("no voxel size")
                                                                      for n in stack.notes)},
    }
    return data, kwargs, "image"


def tracks_file_layer_data(path: Path, kind: str = "tracks") -> tuple[Any, dict[str, Any], str]:
    """A Tracks layer tuple for a tracks CSV; with its review session beside it (``tracks.review.json``, no
    older than the CSV), the session's tracks, and its path in the metadata (the review continues it)."""
    from tracker.io import read_table

    from ._edits import TrackEdits
    from ._session import session_path

    if kind == "tracks" and _session_applies(session_path(path), path):
        return session_layer_data(session_path(path), tracks_path=path)
    table = read_table(path, required=("track_id", "frame", "z", "y", "x"))
    if kind == "ground_truth":
        data, kwargs, layer_type = ground_truth_layer_data(table, f"{path.stem}")
        kwargs["metadata"]["path"] = str(path)
        return data, kwargs, layer_type
    edits = TrackEdits(table)
    data, features, graph = tracks_layer_data(edits)
    return data, tracks_layer_kwargs(path.stem, features, graph, kind="tracks", path=str(path)), "tracks"


def _session_applies(session: Path, tracks: Path) -> bool:
    """A session beside a tracks file is restored unless the tracks file was written after it (then the file
    was changed elsewhere: a warning, and the file wins)."""
    if not session.is_file():
        return False
    if session.stat().st_mtime + 1e-3 < tracks.stat().st_mtime:
        import warnings

        warnings.warn(f"{tracks.name} is newer than its review session {session.name}: the session is not "
                      "restored", UserWarning, stacklevel=3)
        return False
    return True


def session_layer_data(session: Path, tracks_path: Path | None = None) -> tuple[Any, dict[str, Any], str]:
    """A Tracks layer tuple for a review session (see :mod:`~napari_tracker._session`)."""
    from ._session import SESSION_SUFFIX, load_session

    edits, state = load_session(session)
    data, features, graph = tracks_layer_data(edits)
    name = tracks_path.stem if tracks_path is not None else session.name[: -len(SESSION_SUFFIX)]
    metadata = {"session": str(session), "review_state": state}
    if tracks_path is not None:
        metadata["path"] = str(tracks_path)
    if state.get("parameters"):
        metadata["parameters"] = state["parameters"]
    return data, tracks_layer_kwargs(name, features, graph, kind="tracks", **metadata), "tracks"


def detections_file_layer_data(path: Path) -> tuple[Any, dict[str, Any], str]:
    from tracker.io import read_table

    table = read_table(path, required=("frame", "z", "y", "x"))
    data, features = points_layer_data(table)
    kwargs = detections_kwargs(path.stem, features)
    kwargs["metadata"]["path"] = str(path)
    return data, kwargs, "points"


def detections_kwargs(name: str, features: dict[str, np.ndarray]) -> dict[str, Any]:
    return {
        "name": name,
        "features": features,
        "size": POINT_SIZE_UM,
        "symbol": "ring",
        "face_color": "transparent",
        "border_color": "#00e5ff",
        "border_width": 0.12,
        "blending": "translucent_no_depth",
        "opacity": 0.8,
        "metadata": {KIND_KEY: "detections"},
    }
