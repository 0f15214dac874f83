"""Tracks as TrackMate XML, the file Fiji's TrackMate saves and opens (*Load a TrackMate file*).

The structure is the one ``fiji.plugin.trackmate.io.TmXmlReader`` reads:
``<TrackMate><Model spatialunits timeunits>`` with ``FeatureDeclarations``
(``SpotFeatures``, ``EdgeFeatures``, ``TrackFeatures``, each ``<Feature feature
name shortname dimension isint>``), ``AllSpots/SpotsInFrame/Spot`` (``ID``,
``name`` and numeric features only: ``POSITION_X/Y/Z/T``, ``FRAME``,
``QUALITY``, ``RADIUS``, ``VISIBILITY`` and one per numeric column of ours),
``AllTracks/Track`` (``TRACK_ID`` ...) of ``Edge`` (``SPOT_SOURCE_ID``,
``SPOT_TARGET_ID``, ``LINK_COST``, ``LINK_CONFIDENCE``) and ``FilteredTracks/
TrackID``; then ``Settings`` (``ImageData``, ``BasicSettings``, a manual
detector and tracker, empty filter collections) which TrackMate needs to open
the file. Positions are in µm (``spatialunits="µm"``), time in frames. A track
of one point has no edges, so it is not a TrackMate track: its spot is kept
(and reads back as a track of its own). TrackMate's ``int`` ids are 32-bit:
track ids beyond that are renumbered. Every TrackMate spot has a ``QUALITY``:
without a ``quality`` column it is -1, what TrackMate gives the spots a user adds
by hand (``SpotEditTool``), and a file whose qualities are all -1 reads back
without the column. No ``DisplaySettings`` element is written (its content is
TrackMate's own JSON): TrackMate then uses the user's default display settings
and notes the missing element in its log (``TmXmlReader.getDisplaySettings``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np

from ..errors import InputError
from ..tables import Table
from ._atomic import atomic_path
from ._graph import check_tracks, track_ids_from_links, track_links, tracks_table, xml_root

TRACKMATE_VERSION = "7.13.2"
"""The TrackMate version the files claim to come from (the format has not changed since 7.0)."""

_POSITION = {"x": "POSITION_X", "y": "POSITION_Y", "z": "POSITION_Z"}
_RESERVED = {"ID", "NAME", "POSITION_X", "POSITION_Y", "POSITION_Z", "POSITION_T", "FRAME", "QUALITY", "RADIUS",
             "VISIBILITY", "TRACK_ID"}
_NOT_SPOT_FEATURES = {"track_id", "frame", "x", "y", "z", "quality", "radius", "link_cost", "link_confidence"}
_UNIT_TO_UM = {"µm": 1.0, "um": 1.0, "micron": 1.0, "microns": 1.0, "micrometer": 1.0, "nm": 1e-3,
               "nanometer": 1e-3, "mm": 1e3}


NO_QUALITY = -1.0
"""``QUALITY`` of spots without a detector quality: TrackMate's value for spots added by hand."""

DISPLAY_RADIUS_UM = 0.5
"""The radius TrackMate draws each spot with when the spot size is not known (the detector estimated it per
stack and the tracks carry no ``radius`` column): display only, TrackMate's tracking does not read it."""


def write_trackmate(path: str | os.PathLike, tracks: Mapping[str, Any], overwrite: bool = False, *,
                    radius_um: float | Sequence[float] | None = None,
                    voxel_size: Sequence[float] | None = None, image_path: str | os.PathLike | None = None) -> None:
    """Write a tracks table as TrackMate XML, atomically.

    Parameters
    ----------
    path : path
        The ``.xml`` file.
    tracks : mapping of str to arrays
        ``track_id, frame, (z,) y, x`` (µm); ``quality``, ``radius`` (µm), ``link_cost``,
        ``link_confidence`` and other numeric columns become spot or edge features.
    overwrite : bool
        Replace an existing file.
    radius_um : float or (z, y, x) floats, optional
        Spot radius shown by TrackMate where there is no ``radius`` column (the lateral one of three);
        default: :data:`DISPLAY_RADIUS_UM`.
    voxel_size : (z, y, x) floats, optional
        µm per voxel of the image, for ``ImageData`` (default 1 µm).
    image_path : path, optional
        The stack the tracks come from: TrackMate opens it beside the tracks.

    Raises
    ------
    InputError
        A required column is missing, a track has two points in one frame, or ``path`` exists.
    """
    table = check_tracks(tracks, what="tracks")
    n = len(table["frame"])
    is_3d = "z" in table
    radius = float(np.ravel(radius_um if radius_um is not None else DISPLAY_RADIUS_UM)[-1])
    features = _spot_features(table)
    columns = {
        "POSITION_X": table["x"], "POSITION_Y": table["y"],
        "POSITION_Z": table["z"] if is_3d else np.zeros(n), "POSITION_T": table["frame"].astype(np.float64),
        "FRAME": table["frame"], "RADIUS": table["radius"] if "radius" in table else np.full(n, radius),
        "VISIBILITY": np.ones(n, dtype=np.int64),
        "QUALITY": table["quality"] if "quality" in table else np.full(n, NO_QUALITY),
        **{feature: table[column] for feature, column in features.items()},
    }
    text = {name: _numbers(values) for name, values in columns.items()}
    source, target = track_links(table)
    track_id = _int32_track_ids(table["track_id"])
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', f'<TrackMate version="{TRACKMATE_VERSION}">']
    lines.append('  <Log>Written by tracker (tracker.io.trackmate).</Log>')
    lines.append('  <Model spatialunits="µm" timeunits="frame">')
    lines += _declarations(table, columns, features)
    lines.append(f'    <AllSpots nspots="{n}">')
    frames = table["frame"]
    by_frame = np.argsort(frames, kind="stable")
    names = list(text)
    for frame in np.unique(frames):
        lines.append(f'      <SpotsInFrame frame="{frame}">')
        for i in by_frame[np.searchsorted(frames[by_frame], frame):np.searchsorted(frames[by_frame], frame, "right")]:
            attributes = " ".join(f'{name}="{text[name][i]}"' for name in names)
            lines.append(f'        <Spot ID="{i}" name="ID{i}" {attributes} />')
        lines.append("      </SpotsInFrame>")
    lines.append("    </AllSpots>")
    lines += _tracks(table, track_id, source, target)
    lines.append("  </Model>")
    lines += _settings(table, voxel_size, image_path, radius)
    lines.append('  <GUIState state="ConfigureViews" />')  # (TrackMate's GUI opens on its display panel)
    lines.append("</TrackMate>")
    with atomic_path(path, overwrite) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _spot_features(table: Table) -> dict[str, str]:
    """Feature name of every other numeric column (its name in capitals; clashes get a ``TRACKER_`` prefix)."""
    features = {}
    for name, column in table.items():
        if name in _NOT_SPOT_FEATURES or np.asarray(column).dtype.kind not in "iufb":
            continue
        feature = name.upper()
        features["TRACKER_" + feature if feature in _RESERVED or feature in features else feature] = name
    return features


def _numbers(values: np.ndarray) -> list[str]:
    """Numbers as Java reads them (``Double.valueOf``): shortest round-trip text, ``NaN``, ``Infinity``."""
    values = np.asarray(values)
    if values.dtype.kind in "iub":
        return [str(int(v)) for v in values.tolist()]
    return [repr(v) if math.isfinite(v) else ("NaN" if v != v else ("Infinity" if v > 0 else "-Infinity"))
            for v in values.astype(np.float64).tolist()]


def _int32_track_ids(track_id: np.ndarray) -> np.ndarray:
    if len(track_id) == 0 or (track_id.min() >= 0 and track_id.max() < 2**31 - 1):
        return track_id
    return np.unique(track_id, return_inverse=True)[1].astype(np.int64)


def _feature(feature: str, name: str, short: str, dimension: str, isint: bool) -> str:
    return (f'        <Feature feature="{feature}" name={quoteattr(name)} shortname={quoteattr(short)} '
            f'dimension="{dimension}" isint="{str(isint).lower()}" />')


def _declarations(table: Table, columns: Mapping[str, np.ndarray], features: Mapping[str, str]) -> list[str]:
    standard = {"POSITION_X": ("X", "X", "POSITION"), "POSITION_Y": ("Y", "Y", "POSITION"),
                "POSITION_Z": ("Z", "Z", "POSITION"), "POSITION_T": ("T", "T", "TIME"),
                "FRAME": ("Frame", "Frame", "NONE"), "RADIUS": ("Radius", "R", "LENGTH"),
                "VISIBILITY": ("Visibility", "Visibility", "NONE"), "QUALITY": ("Quality", "Quality", "QUALITY")}
    lines = ["    <FeatureDeclarations>", "      <SpotFeatures>"]
    for feature, values in columns.items():
        name, short, dimension = standard.get(feature) or (features[feature].replace("_", " ").capitalize(),
                                                            features[feature][:12], _dimension(features[feature]))
        lines.append(_feature(feature, name, short, dimension, np.asarray(values).dtype.kind in "iub"))
    lines += ["      </SpotFeatures>", "      <EdgeFeatures>",
              _feature("SPOT_SOURCE_ID", "Source spot ID", "Source ID", "NONE", True),
              _feature("SPOT_TARGET_ID", "Target spot ID", "Target ID", "NONE", True)]
    if "link_cost" in table:
        lines.append(_feature("LINK_COST", "Edge cost", "Cost", "COST", False))
    if "link_confidence" in table:
        lines.append(_feature("LINK_CONFIDENCE", "Link confidence", "Confidence", "NONE", False))
    lines += ["      </EdgeFeatures>", "      <TrackFeatures>"]
    for feature, name, short, dimension, isint in (
            ("TRACK_INDEX", "Track index", "Index", "NONE", True), ("TRACK_ID", "Track ID", "ID", "NONE", True),
            ("NUMBER_SPOTS", "Number of spots in track", "N spots", "NONE", True),
            ("NUMBER_GAPS", "Number of gaps", "N gaps", "NONE", True),
            ("NUMBER_SPLITS", "Number of split events", "N splits", "NONE", True),
            ("NUMBER_MERGES", "Number of merge events", "N merges", "NONE", True),
            ("TRACK_START", "Track start", "Track start", "TIME", False),
            ("TRACK_STOP", "Track stop", "Track stop", "TIME", False),
            ("TRACK_DURATION", "Track duration", "Duration", "TIME", False)):
        lines.append(_feature(feature, name, short, dimension, isint))
    return [*lines, "      </TrackFeatures>", "    </FeatureDeclarations>"]


def _dimension(column: str) -> str:
    return "INTENSITY" if "intensity" in column else "POSITION" if column.endswith("_vox") else "NONE"


def _tracks(table: Table, track_id: np.ndarray, source: np.ndarray, target: np.ndarray) -> list[str]:
    cost = _numbers(table["link_cost"]) if "link_cost" in table else None
    confidence = _numbers(table["link_confidence"]) if "link_confidence" in table else None
    frames = table["frame"]
    lines, kept = ["    <AllTracks>"], []
    starts = np.flatnonzero(np.r_[True, track_id[1:] != track_id[:-1]])
    ends = np.r_[starts[1:], len(track_id)]
    edge = 0
    for index, (first, end) in enumerate(zip(starts, ends)):
        if end - first < 2:  # a single spot: no TrackMate track
            continue
        kept.append(int(track_id[first]))
        start, stop = int(frames[first]), int(frames[end - 1])
        gaps = int(np.count_nonzero(np.diff(frames[first:end]) > 1))
        lines.append(f'      <Track name="Track_{track_id[first]}" TRACK_ID="{track_id[first]}" '
                     f'TRACK_INDEX="{index}" NUMBER_SPOTS="{end - first}" NUMBER_GAPS="{gaps}" NUMBER_SPLITS="0" '
                     f'NUMBER_MERGES="0" TRACK_START="{start}.0" TRACK_STOP="{stop}.0" '
                     f'TRACK_DURATION="{stop - start}.0">')
        while edge < len(target) and target[edge] < end:
            s, t = source[edge], target[edge]
            extra = (f' LINK_COST="{cost[t]}"' if cost else "") + (f' LINK_CONFIDENCE="{confidence[t]}"'
                                                                   if confidence else "")
            lines.append(f'        <Edge SPOT_SOURCE_ID="{s}" SPOT_TARGET_ID="{t}"{extra} />')
            edge += 1
        lines.append("      </Track>")
    lines.append("    </AllTracks>")
    lines.append("    <FilteredTracks>")
    lines += [f'      <TrackID TRACK_ID="{i}" />' for i in kept]
    return [*lines, "    </FilteredTracks>"]


def _settings(table: Table, voxel_size: Sequence[float] | None, image_path: Any, radius: float) -> list[str]:
    dz, dy, dx = (float(v) for v in voxel_size) if voxel_size is not None else (1.0, 1.0, 1.0)
    extent = {axis: float(np.max(table[axis], initial=0.0)) for axis in ("z", "y", "x") if axis in table}
    width = int(math.floor(extent["x"] / dx)) + 1
    height = int(math.floor(extent["y"] / dy)) + 1
    slices = int(math.floor(extent.get("z", 0.0) / dz)) + 1
    frames = int(np.max(table["frame"], initial=0)) + 1
    image = Path(image_path) if image_path is not None else None
    filename = quoteattr(image.name if image else "")
    folder = quoteattr(str(image.resolve().parent) + os.sep if image else "")
    return [
        "  <Settings>",
        f'    <ImageData filename={filename} folder={folder} width="{width}" height="{height}" '
        f'nslices="{slices}" nframes="{frames}" pixelwidth="{dx!r}" pixelheight="{dy!r}" voxeldepth="{dz!r}" '
        'timeinterval="1.0" />',
        f'    <BasicSettings xstart="0" xend="{width - 1}" ystart="0" yend="{height - 1}" zstart="0" '
        f'zend="{slices - 1}" tstart="0" tend="{frames - 1}" />',
        f'    <DetectorSettings DETECTOR_NAME="MANUAL_DETECTOR" RADIUS="{radius!r}" />',
        '    <InitialSpotFilter feature="QUALITY" value="0.0" isabove="true" />',
        "    <SpotFilterCollection />",
        '    <TrackerSettings TRACKER_NAME="MANUAL_TRACKER" />',
        "    <TrackFilterCollection />",
        "    <AnalyzerCollection>",
        "      <SpotAnalyzers />", "      <EdgeAnalyzers />", "      <TrackAnalyzers />",
        "    </AnalyzerCollection>",
        "  </Settings>",
    ]


def read_trackmate(path: str | os.PathLike, voxel_size: Sequence[float] | None = None) -> Table:
    """Read the spots and links of a TrackMate XML file as a tracks table (positions in µm).

    Spot features become columns in lower case (``POSITION_X`` → ``x``, ``QUALITY`` → ``quality``,
    ``MEAN_INTENSITY_CH1`` → ``mean_intensity_ch1``; ``POSITION_T``, ``VISIBILITY``, ids and a ``QUALITY``
    of -1 everywhere, :data:`NO_QUALITY`, are dropped);
    an edge's ``LINK_COST`` and ``LINK_CONFIDENCE`` go to its later spot. A file whose image has one
    slice and whose spots all lie at z = 0 is 2D (no ``z`` column). All spots are read, tracks that
    TrackMate filtered out included.

    Parameters
    ----------
    path : path
    voxel_size : (z, y, x) floats, optional
        µm per pixel, for files whose positions are in pixels (``spatialunits="pixel"``).

    Raises
    ------
    InputError
        Not TrackMate XML, positions in pixels without ``voxel_size``, or tracks that divide or merge.
    """
    path = Path(path)
    root = xml_root(path)
    model = root.find("Model")
    if root.tag != "TrackMate" or model is None or model.find("AllSpots") is None:
        raise InputError(f"{path}: not a TrackMate XML file (root element <{root.tag}>, expected <TrackMate> "
                         "with a <Model> of <AllSpots>)")
    scale = _um_per_unit(path, model.get("spatialunits", "pixel"), voxel_size)
    spots = [spot.attrib for frame in model.find("AllSpots").iter("SpotsInFrame") for spot in frame.iter("Spot")]
    index = {int(spot["ID"]): row for row, spot in enumerate(spots)}
    features = [name for name in dict.fromkeys(k for spot in spots for k in spot)
                if name not in ("ID", "name", "POSITION_T", "VISIBILITY", "ROI_N_POINTS")]
    columns: dict[str, np.ndarray] = {}
    for feature in features:
        values = np.array([float(spot.get(feature, "nan")) for spot in spots], dtype=np.float64)
        name = {"POSITION_X": "x", "POSITION_Y": "y", "POSITION_Z": "z", "FRAME": "frame"}.get(
            feature, feature.lower().removeprefix("tracker_"))
        columns[name] = values * scale[name] if name in scale else values
    if "quality" in columns and np.all(columns["quality"] == NO_QUALITY):  # (no detector quality: see above)
        del columns["quality"]
    if "frame" not in columns or "x" not in columns or "y" not in columns:
        raise InputError(f"{path}: the spots lack FRAME or POSITION_X/POSITION_Y")
    columns["frame"] = columns["frame"].astype(np.int64)
    image = root.find("Settings/ImageData")
    slices = int(float(image.get("nslices", "1"))) if image is not None else 1
    if "z" in columns and slices <= 1 and not np.any(columns["z"]):
        del columns["z"]
    source, target, edge_cost, edge_confidence, given = [], [], [], [], np.full(len(spots), -1, dtype=np.int64)
    for track in model.iter("Track"):
        track_id = int(track.get("TRACK_ID", "-1"))
        for edge in track.iter("Edge"):
            s, t = index.get(int(edge.get("SPOT_SOURCE_ID", "-1"))), index.get(int(edge.get("SPOT_TARGET_ID", "-1")))
            if s is None or t is None:
                raise InputError(f"{path}: an edge of track {track_id} refers to a spot that does not exist")
            source.append(s), target.append(t)
            edge_cost.append(float(edge.get("LINK_COST", "nan")))
            edge_confidence.append(float(edge.get("LINK_CONFIDENCE", "nan")))
            given[[s, t]] = track_id
    source, target = np.array(source, dtype=np.int64), np.array(target, dtype=np.int64)
    columns["track_id"] = track_ids_from_links(columns["frame"], source, target, str(path), given=given)
    for name, values in (("link_cost", edge_cost), ("link_confidence", edge_confidence)):
        if any(v == v for v in values):
            column = np.full(len(spots), np.nan)
            column[target] = values
            columns[name] = column
    return tracks_table(columns)


def _um_per_unit(path: Path, unit: str, voxel_size: Sequence[float] | None) -> dict[str, float]:
    if unit.strip().lower() in ("pixel", "pixels"):
        if voxel_size is None:
            raise InputError(f"{path}: positions are in pixels; give the voxel size (--voxel-size Z,Y,X)")
        dz, dy, dx = (float(v) for v in voxel_size)
        return {"z": dz, "y": dy, "x": dx}
    factor = _UNIT_TO_UM.get(unit.strip().lower()) or _UNIT_TO_UM.get(unit.strip())
    if factor is None:
        raise InputError(f"{path}: spatial unit {unit!r} is not a length unit (µm, micron, nm, pixel)")
    return {"z": factor, "y": factor, "x": factor}
