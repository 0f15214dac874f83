"""Tables <-> napari layer data (Tracks, Points, Image), shared by the reader, writer, sample data and widget.

Positions are in micrometres with unit layer scale, so they align with an
Image layer whose scale is ``(1, dz, dy, dx)``. Only :func:`colormaps` imports
napari (lazily); everything else is numpy.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np

from ._edits import TrackEdits
from ._live_tracks import OUTPUT_COLUMNS, squared_links

KIND_KEY = "tracker_kind"
"""Layer metadata key: ``"tracks"``, ``"ground_truth"``, ``"detections"``, ``"stack"``."""

COLOUR_BY = {
    # label shown to the user: the feature the Tracks layer colours by
    "track": "colour_track",
    "link cost": "colour_cost",
    "link confidence": "colour_confidence",
    "ground truth": "colour_truth",
}
TRACK_FEATURES = ("intensity", "quality", "link_cost", "link_confidence", "track_length", "mean_speed")
POINT_SIZE_UM = 0.6

# Colour-blind-safe palettes: ColorBrewer's RdYlBu for the scales, Okabe & Ito's blue/vermillion for
# correct/wrong (told apart with every common colour-vision deficiency); grey is "no link".
NO_LINK = "#808080"
CORRECT = "#56b4e9"
WRONG = "#d55e00"
GOOD_TO_BAD = ("#74add1", "#abd9e9", "#ffffbf", "#fdae61", "#d73027")
"""RdYlBu from its lighter blue: the good end must show on a dark background."""
CONFIDENCE_FLOOR = 0.1
"""Confidence c is drawn at colour value ``0.1 + 0.9 c``; below 0.1 lies the grey of links without one."""


def contrast_limits(frame: np.ndarray) -> list[float]:
    """Display range for a stack of spots: from the background (median) to the brightest spots (99.95th percentile)."""
    frame = np.asarray(frame, dtype=np.float64)
    lo, hi = np.percentile(frame, [50.0, 99.95]) if frame.size else (0.0, 1.0)
    return [float(lo), float(hi if hi > lo else lo + 1.0)]


def colormaps() -> dict[str, Any]:
    """napari colormaps for the colour features, keyed by feature name (values are pre-scaled to 0..1)."""
    from napari.utils.colormaps import Colormap, ensure_colormap

    turbo = ensure_colormap("turbo")
    scale = np.linspace(CONFIDENCE_FLOOR, 1.0, len(GOOD_TO_BAD))
    return {
        "colour_track": Colormap(turbo.colors, controls=turbo.controls, name="tracker_track"),
        "colour_cost": Colormap(list(GOOD_TO_BAD), name="tracker_cost"),  # low cost blue, high red
        "colour_confidence": Colormap([NO_LINK, NO_LINK, *GOOD_TO_BAD[::-1]],  # low confidence red, high blue
                                      controls=[0.0, CONFIDENCE_FLOOR * 0.99, *scale], name="tracker_confidence"),
        # 0 no link, 0.5 wrong link, 1 correct link
        "colour_truth": Colormap([NO_LINK, WRONG, CORRECT], controls=[0, 1 / 3, 2 / 3, 1],
                                 interpolation="zero", name="tracker_truth"),
    }


def legend(mode: str) -> list[tuple[str, str]]:
    """``(colour, meaning)`` pairs that explain colour mode ``mode`` (empty for "track": one colour each)."""
    if mode == "link cost":
        return [(GOOD_TO_BAD[0], "low cost"), (GOOD_TO_BAD[2], "median"), (GOOD_TO_BAD[-1], "≥ 95th percentile")]
    if mode == "link confidence":
        return [(GOOD_TO_BAD[-1], "0"), (GOOD_TO_BAD[2], "0.5"), (GOOD_TO_BAD[0], "1"), (NO_LINK, "no link")]
    if mode == "ground truth":
        return [(CORRECT, "correct link"), (WRONG, "wrong link"), (NO_LINK, "no link")]
    return []


def track_colour_values(track_id: np.ndarray) -> np.ndarray:
    """A value in [0, 1) per track id that differs strongly between consecutive ids (golden-ratio hash)."""
    return np.mod(np.asarray(track_id, dtype=np.float64) * 0.6180339887498949 + 0.1, 1.0) * 0.9 + 0.05


def _starts_take_next(values: np.ndarray, track_id: np.ndarray) -> np.ndarray:
    """A track's first point (no link into it) takes the value of its first link, so segments are uniform."""
    values = values.copy()
    if len(values) > 1:
        first = np.flatnonzero(np.r_[True, track_id[1:] != track_id[:-1]])
        first = first[first + 1 < len(values)]
        first = first[track_id[first + 1] == track_id[first]]
        values[first] = values[first + 1]
    return values


def cost_colour_values(link_cost: np.ndarray, track_id: np.ndarray) -> np.ndarray:
    """Link cost scaled to [0, 1] by its 95th percentile (rows sorted by track, frame)."""
    cost = np.asarray(link_cost, dtype=np.float64)
    finite = np.isfinite(cost)
    if not finite.any():
        return np.zeros(len(cost))
    scale = max(float(np.percentile(cost[finite], 95)), 1e-12)
    values = np.clip(np.where(finite, cost, 0.0) / scale, 0.0, 1.0)
    return _starts_take_next(values, np.asarray(track_id))


def confidence_colour_values(link_confidence: np.ndarray | None, track_id: np.ndarray) -> np.ndarray:
    """Link confidence c mapped to ``0.1 + 0.9 c``; a start takes its first link's, and no link (NaN) is 0 (grey).

    napari draws nothing where a colour value is NaN, so none is left (rows sorted by track, frame).
    """
    if link_confidence is None:
        return np.zeros(len(track_id))
    confidence = np.clip(np.asarray(link_confidence, dtype=np.float64), 0.0, 1.0)
    values = _starts_take_next(CONFIDENCE_FLOOR + (1.0 - CONFIDENCE_FLOOR) * confidence, np.asarray(track_id))
    return np.where(np.isfinite(values), values, 0.0)


def truth_colour_values(correct: np.ndarray | None, track_id: np.ndarray) -> np.ndarray:
    """``link_correctness`` (-1 no link, 0 wrong, 1 correct) mapped to 0, 0.5, 1 (rows sorted by track, frame)."""
    if correct is None:
        return np.zeros(len(track_id))
    return _starts_take_next((np.asarray(correct, dtype=np.float64) + 1.0) / 2.0, np.asarray(track_id))


def tracks_layer_data(
    edits: TrackEdits, correct: np.ndarray | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[int, list[int]]]:
    """``(data, features, graph)`` for a napari Tracks layer, rows in :meth:`TrackEdits.rows` order.

    ``data`` columns are ``track_id, t, z, y, x`` (µm). ``features`` hold the
    table's per-point columns (intensity, quality, link_cost, ...), per-track
    ``track_length`` (points) and ``mean_speed`` (µm/frame), ``gt_link``
    (-1/0/1) when ``correct`` (per live point, display order) is given, and
    the ``colour_*`` values the colour modes use. ``graph`` comes from a
    ``parent_track_id`` column, when there is one.
    """
    table = edits.table()
    data = np.column_stack([table["track_id"], table["frame"], table["z"], table["y"], table["x"]]).astype(
        np.float64
    ).reshape(-1, 5)
    features: dict[str, np.ndarray] = {}
    for name, column in table.items():
        if name in ("track_id", "frame", "z", "y", "x", "parent_track_id") or column.dtype.kind not in "biuf":
            continue
        features[name] = column
    features["track_length"] = edits.per_point("length")
    features["mean_speed"] = edits.per_point("mean_speed")
    if correct is not None:
        features["gt_link"] = np.asarray(correct, dtype=np.int8)
    features["colour_track"] = track_colour_values(table["track_id"])
    features["colour_cost"] = cost_colour_values(table["link_cost"], table["track_id"])
    features["colour_confidence"] = confidence_colour_values(table.get("link_confidence"), table["track_id"])
    features["colour_truth"] = truth_colour_values(correct, table["track_id"])
    graph: dict[int, list[int]] = {}
    if "parent_track_id" in table:
        ids = set(table["track_id"].tolist())
        for child, parent in zip(table["track_id"].tolist(), table["parent_track_id"].tolist()):
            if parent >= 0 and parent in ids and parent != child:
                graph.setdefault(int(child), [])
                if int(parent) not in graph[int(child)]:
                    graph[int(child)].append(int(parent))
    return data, features, graph


_EDITS_OF_LAYER: WeakKeyDictionary = WeakKeyDictionary()
"""Tracks layer -> its :class:`TrackEdits`, for as long as the layer lives."""


def _key(layer):
    """The layer itself: napari hands plugins short-lived proxies of it (``__wrapped__``), useless as weak keys."""
    return getattr(layer, "__wrapped__", layer)


def _shows(edits: TrackEdits, layer) -> bool:
    """Whether ``layer`` still shows what ``edits`` holds (nothing else changed it)."""
    table = edits.table(["track_id", "frame", "z", "y", "x"])
    data = np.asarray(layer.data, dtype=np.float64)
    if len(table["frame"]) == 0:
        return not layer.visible and len(data) == 1  # the placeholder of an emptied layer
    return data.shape == (len(table["frame"]), 5) and np.array_equal(data, np.column_stack(list(table.values())))


def edits_of_layer(layer) -> TrackEdits:
    """The edit model of a Tracks layer: the one an earlier review left (with its undo history) if the layer
    still shows it, else a new one from the layer's data and features."""
    edits = _EDITS_OF_LAYER.get(_key(layer))
    if edits is None and layer.metadata.get("session"):  # a restored review session: its history goes on
        from ._session import load_session

        try:
            edits = load_session(layer.metadata["session"])[0]
        except (ValueError, OSError):
            edits = None
        if edits is not None:
            _EDITS_OF_LAYER[_key(layer)] = edits
    if edits is None or not _shows(edits, layer):
        edits = TrackEdits(table_from_tracks_layer(layer.data, layer.features, layer.scale, layer.translate))
        _EDITS_OF_LAYER[_key(layer)] = edits
    return edits


def was_edited(layer) -> bool:
    """Whether a review has edited ``layer`` (its edit history, undone edits included, is not empty)."""
    edits = _EDITS_OF_LAYER.get(_key(layer))
    return edits is not None and edits.version > 0


def show_tracks(layer, edits: TrackEdits, correct: np.ndarray | None, colour_by: str,
                hidden: np.ndarray | None = None) -> None:
    """Put the live points of ``edits`` into a Tracks layer, coloured by ``colour_by`` (a :data:`COLOUR_BY` key);
    the points ``hidden`` (a mask in display order) get no colour: napari draws nothing where a colour value is
    NaN (the data stay, so picking and edits are unchanged)."""
    data, features, graph = tracks_layer_data(edits, correct)
    if hidden is not None and len(hidden) == len(data):
        for name in COLOUR_BY.values():
            features[name] = np.where(hidden, np.nan, features[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "color_by key not present" while data and features differ
        if len(data) == 0:
            data = np.zeros((1, 5))  # napari cannot show an empty Tracks layer; hide it instead
            features = {k: np.zeros(1, dtype=np.asarray(v).dtype) for k, v in features.items()}
            layer.visible = False
        layer.data = data
        layer.features = features
        if graph or layer.graph:
            layer.graph = graph
    if not isinstance(layer.colormaps_dict, dict) or set(COLOUR_BY.values()) - set(layer.colormaps_dict):
        layer.colormaps_dict = colormaps()
    layer.color_by = COLOUR_BY[colour_by]


def table_from_tracks_layer(
    data: np.ndarray,
    features: Any = None,
    scale: Any = None,
    translate: Any = None,
) -> dict[str, np.ndarray]:
    """A tracks table (µm) from Tracks layer data and features.

    Spatial positions are world coordinates (``data * scale + translate``);
    the frame is the data's time index. Feature columns named like table
    columns (intensity, quality, link_cost, link_confidence, visible,
    parent_track_id) are kept; ``link_cost`` is computed as squared
    displacement when absent.
    """
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] not in (4, 5):
        raise ValueError(f"expected Tracks data of shape (N, 5) (track_id, t, z, y, x), got {data.shape}")
    if data.shape[1] == 4:  # 2D + t tracks: z = 0
        data = np.column_stack([data[:, :2], np.zeros(len(data)), data[:, 2:]])
    xyz = data[:, 2:5].copy()
    if scale is not None:
        scale = np.asarray(scale, dtype=np.float64)
        xyz *= scale[-3:] if len(scale) >= 3 else 1.0
    if translate is not None:
        translate = np.asarray(translate, dtype=np.float64)
        xyz += translate[-3:] if len(translate) >= 3 else 0.0
    table = {
        "track_id": np.round(data[:, 0]).astype(np.int64),
        "frame": np.round(data[:, 1]).astype(np.int64),
        "z": xyz[:, 0],
        "y": xyz[:, 1],
        "x": xyz[:, 2],
    }
    columns = _feature_columns(features, len(data))
    for name in OUTPUT_COLUMNS[5:] + ("visible", "parent_track_id"):
        if name in columns:
            table[name] = columns[name]
    if "visible" in table:
        table["visible"] = table["visible"].astype(bool)
    if "parent_track_id" in table:
        table["parent_track_id"] = table["parent_track_id"].astype(np.int64)
    if "link_cost" not in table:
        table["link_cost"] = squared_links(table)
    return table


def _feature_columns(features: Any, n: int) -> dict[str, np.ndarray]:
    if features is None:
        return {}
    if hasattr(features, "columns"):  # a pandas DataFrame
        return {str(c): np.asarray(features[c]) for c in features.columns if len(features[c]) == n}
    return {str(k): np.asarray(v) for k, v in dict(features).items() if len(np.asarray(v)) == n}


def output_table(table: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns ``track run`` writes (plus ``visible``/``parent_track_id`` if present), sorted by frame, track."""
    n = len(table["track_id"])
    out: dict[str, np.ndarray] = {}
    for name in OUTPUT_COLUMNS:
        if name in table:
            out[name] = np.asarray(table[name])
        elif name in ("intensity", "quality", "link_confidence"):
            out[name] = np.full(n, np.nan)
    for name in ("visible", "parent_track_id"):
        if name in table:
            out[name] = np.asarray(table[name])
    order = np.lexsort((out["track_id"], out["frame"]))
    return {name: column[order] for name, column in out.items()}


def points_layer_data(table: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(data, features)`` of a detections table for a Points layer: data ``t, z, y, x`` (µm)."""
    data = np.column_stack([table["frame"], table["z"], table["y"], table["x"]]).astype(np.float64).reshape(-1, 4)
    features = {name: np.asarray(column) for name, column in table.items()
                if name not in ("frame", "z", "y", "x") and np.asarray(column).dtype.kind in "biuf"}
    return data, features


def tracks_layer_kwargs(name: str, features: dict[str, np.ndarray], graph: dict, kind: str = "tracks",
                        colour_by: str = "track", **metadata: Any) -> dict[str, Any]:
    """Keyword arguments for ``viewer.add_tracks`` / a layer-data tuple."""
    return {
        "name": name,
        "features": features,
        "graph": graph,
        "color_by": COLOUR_BY[colour_by],
        "colormaps_dict": colormaps(),
        "tail_width": 3,
        "tail_length": 10,
        "blending": "translucent",
        "metadata": {KIND_KEY: kind, **metadata},
    }


def ground_truth_layer_data(table: Mapping[str, np.ndarray], name: str) -> tuple:
    """A layer-data tuple for a ground-truth table (``track_id, frame, z, y, x, visible``)."""
    edits = TrackEdits(table)
    data, features, graph = tracks_layer_data(edits)
    kwargs = tracks_layer_kwargs(name, features, graph, kind="ground_truth")
    kwargs["tail_width"] = 2
    kwargs["opacity"] = 0.6
    return data, kwargs, "tracks"
