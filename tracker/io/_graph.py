"""Tracks as a graph: the points are nodes, each link joins consecutive points of a track.

The graph formats (GEFF, TrackMate XML) store links; the tables store a
``track_id`` per point. These two functions go from one to the other, so that
every format keeps every point and every link.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..tables import Table, spatial_axes, take_rows

TRACK_REQUIRED = ("track_id", "frame", "y", "x")
"""Columns every tracks table has (``z`` too, unless the data are 2D)."""


def xml_root(path: str | os.PathLike) -> ElementTree.Element:
    """The root element of an XML file (TrackMate's, ISBI's); :class:`InputError` if missing or not XML."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        return ElementTree.parse(path).getroot()
    except ElementTree.ParseError as error:
        raise InputError(f"{path}: not a readable XML file ({error})") from None


def check_tracks(tracks: Mapping[str, np.ndarray], what: str = "tracks") -> Table:
    """The tracks table as a ``dict`` of arrays sorted by ``(track_id, frame)``, checked.

    Raises
    ------
    InputError
        A column is missing, a position is not finite, or a track has two points in one frame.
    """
    table = {str(name): np.asarray(tracks[name]) for name in tracks}
    missing = [name for name in TRACK_REQUIRED if name not in table]
    if missing:
        raise InputError(f"{what} is missing column(s): {', '.join(missing)}")
    for name in spatial_axes(table):
        if not np.isfinite(np.asarray(table[name], dtype=np.float64)).all():
            raise InputError(f"{what}: column {name!r} has missing or non-finite values")
    track_id = table["track_id"].astype(np.int64)
    frame = table["frame"].astype(np.int64)
    table = {**table, "track_id": track_id, "frame": frame}
    later_track = track_id[1:] > track_id[:-1]
    if not np.all(later_track | ((track_id[1:] == track_id[:-1]) & (frame[1:] >= frame[:-1]))):
        table = take_rows(table, np.lexsort((frame, track_id)))  # (the linker's tables come sorted: no copy)
    same = (table["track_id"][1:] == table["track_id"][:-1]) & (table["frame"][1:] == table["frame"][:-1])
    if same.any():
        row = int(np.flatnonzero(same)[0])
        raise InputError(f"{what}: track {table['track_id'][row]} has two points in frame {table['frame'][row]}")
    return table


def track_links(tracks: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(source, target)`` of the links of a table sorted by :func:`check_tracks`."""
    track_id = np.asarray(tracks["track_id"])
    consecutive = np.flatnonzero(track_id[1:] == track_id[:-1])
    return consecutive, consecutive + 1


def track_ids_from_links(frames: np.ndarray, source: np.ndarray, target: np.ndarray, what: str,
                         given: np.ndarray | None = None) -> np.ndarray:
    """The track id of every point, from the links between points.

    Parameters
    ----------
    frames : (n,) ints
        Frame of every point.
    source, target : (m,) ints
        Point indices of each link, from the earlier frame to the later one.
    what : str
        Names the file in error messages.
    given : (n,) ints, optional
        Track ids stored in the file (-1 where none): kept where they name each track once and
        agree with the links; otherwise tracks are numbered from 0 by their first point.

    Raises
    ------
    InputError
        A link that does not go forward in time, or a point with two links in or out (tracks that
        divide or merge cannot be represented).
    """
    frames = np.asarray(frames, dtype=np.int64)
    source, target = np.asarray(source, dtype=np.int64), np.asarray(target, dtype=np.int64)
    n = len(frames)
    if len(source) and (source.min() < 0 or target.min() < 0 or max(source.max(), target.max()) >= n):
        raise InputError(f"{what}: a link refers to a point that does not exist")
    backwards = frames[target] <= frames[source]
    if backwards.any():
        i = int(np.flatnonzero(backwards)[0])
        raise InputError(f"{what}: a link from frame {frames[source[i]]} to frame {frames[target[i]]} "
                         "does not go forward in time")
    for ends, verb in ((source, "divides"), (target, "merges")):
        counts = np.bincount(ends, minlength=n)
        if (counts > 1).any():
            raise InputError(f"{what}: a track {verb} at frame {frames[int(np.argmax(counts > 1))]}; "
                             "tracks that divide or merge are not supported")
    predecessor = np.full(n, -1, dtype=np.int64)
    predecessor[target] = source
    order = np.argsort(frames, kind="stable")  # a predecessor comes first, as the linker's numbering needs
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    in_order = np.where(predecessor[order] >= 0, rank[np.maximum(predecessor[order], 0)], -1)
    track_id = np.empty(n, dtype=np.int64)
    track_id[order] = _track_ids_from_predecessors(in_order)
    if given is not None:
        track_id = _keep_given_ids(track_id, np.asarray(given, dtype=np.int64))
    return track_id


def _keep_given_ids(derived: np.ndarray, given: np.ndarray) -> np.ndarray:
    """``given`` ids where each derived track has one given id of its own; new ids above them elsewhere."""
    n_tracks = int(derived.max()) + 1 if len(derived) else 0
    known = given >= 0
    first = np.full(n_tracks, -1, dtype=np.int64)
    first[derived[known][::-1]] = given[known][::-1]  # (the first given id of each track)
    consistent = np.all(given[known] == first[derived[known]])
    named = first[first >= 0]
    if not consistent or len(np.unique(named)) != len(named):
        return derived
    unnamed = np.flatnonzero(first < 0)
    first[unnamed] = (named.max() + 1 if len(named) else 0) + np.arange(len(unnamed))
    return first[derived]


def _track_ids_from_predecessors(predecessor: np.ndarray) -> np.ndarray:
    from ..linking import track_ids_from_predecessors

    return track_ids_from_predecessors(predecessor)


def tracks_table(columns: Mapping[str, np.ndarray]) -> Table:
    """A tracks table with the standard columns first (``track_id, frame, z, y, x``), sorted by track and frame."""
    first = [name for name in ("track_id", "frame", "z", "y", "x") if name in columns]
    table = {name: np.asarray(columns[name]) for name in [*first, *(c for c in columns if c not in first)]}
    order = np.lexsort((table["frame"], table["track_id"]))
    return take_rows(table, order)
