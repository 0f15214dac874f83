"""Tracks as ISBI 2012 particle-tracking-challenge XML (read by Icy and the challenge's evaluation program).

``<root><TrackContestISBI2012 snr density scenario>`` holds one ``<particle>``
per track, each a list of ``<detection t x y z/>`` in frame order (no date:
the same tracks make the same file). The format has no track ids, no units and no other columns: a
track's points are linked in frame order, ids number the particles from 0, and
2D data have ``z="0"``. The challenge's own files give positions in pixels
(``x``, ``y`` in pixels, ``z`` in slices): pass ``voxel_size`` to convert;
without it positions are written and read as they are (µm).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np

from ..errors import InputError
from ..stack import check_voxel_size
from ..tables import Table
from ._atomic import atomic_path
from ._graph import check_tracks, tracks_table, xml_root


def write_isbi(path: str | os.PathLike, tracks: Mapping[str, Any], overwrite: bool = False, *,
               voxel_size: Sequence[float] | None = None, scenario: str = "tracker") -> None:
    """Write a tracks table as ISBI 2012 challenge XML, atomically.

    Parameters
    ----------
    path : path
    tracks : mapping of str to arrays
        ``track_id, frame, (z,) y, x`` in µm.
    overwrite : bool
        Replace an existing file.
    voxel_size : (z, y, x) floats, optional
        µm per voxel: positions are written in voxels (as the challenge's files), not in µm.
    scenario : str
        The ``scenario`` attribute (the challenge's: ``VIRUS``, ``VESICLE``, ``RECEPTOR``, ``MICROTUBULE``).

    Raises
    ------
    InputError
        A required column is missing, a track has two points in one frame, a frame is negative, or ``path``
        exists.
    """
    table = check_tracks(tracks, what="tracks")
    scale = _scale(voxel_size)
    n = len(table["frame"])
    if n and table["frame"].min() < 0:  # (the challenge's reader refuses a negative t)
        raise InputError(f"ISBI 2012 XML needs frames from 0; the tracks have frame {table['frame'].min()}")
    x = (np.asarray(table["x"], dtype=np.float64) / scale["x"]).tolist()  # (Python floats: repr is the shortest
    y = (np.asarray(table["y"], dtype=np.float64) / scale["y"]).tolist()  # text that reads back exactly)
    z = (np.asarray(table["z"], dtype=np.float64) / scale["z"] if "z" in table else np.zeros(n)).tolist()
    frames = table["frame"].tolist()
    lines = ['<?xml version="1.0" encoding="UTF-8" standalone="no"?>', "<root>",
             f'<TrackContestISBI2012 snr="?" density="?" scenario={quoteattr(scenario)}>']
    track_id = table["track_id"]
    starts = np.flatnonzero(np.r_[True, track_id[1:] != track_id[:-1]]) if n else np.empty(0, dtype=np.int64)
    for first, end in zip(starts, np.r_[starts[1:], n]):
        lines.append("<particle>")
        lines += [f'<detection t="{frames[i]}" x="{x[i]!r}" y="{y[i]!r}" z="{z[i]!r}"/>'
                  for i in range(first, end)]
        lines.append("</particle>")
    lines += ["</TrackContestISBI2012>", "</root>"]
    with atomic_path(path, overwrite) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_isbi(path: str | os.PathLike, voxel_size: Sequence[float] | None = None) -> Table:
    """Read ISBI 2012 challenge XML as a tracks table: one track per ``<particle>``.

    Parameters
    ----------
    path : path
    voxel_size : (z, y, x) floats, optional
        µm per voxel, for files whose positions are in voxels (the challenge's): converted to µm.

    Returns
    -------
    dict of str to numpy.ndarray
        ``track_id`` (the particle's number, from 0), ``frame``, ``z`` (absent when every ``z`` is 0 or
        missing), ``y``, ``x``.

    Raises
    ------
    InputError
        Not ISBI 2012 XML, a detection without ``t``, ``x`` or ``y``, or a particle with two detections
        in one frame.
    """
    path = Path(path)
    root = xml_root(path)
    contest = root if root.tag == "TrackContestISBI2012" else root.find("TrackContestISBI2012")
    if contest is None:
        raise InputError(f"{path}: not ISBI 2012 challenge XML (no <TrackContestISBI2012> element)")
    rows: list[tuple[int, float, float, float, float]] = []
    for number, particle in enumerate(contest.iter("particle")):
        for detection in particle.iter("detection"):
            try:
                rows.append((number, float(detection.get("t")), float(detection.get("z", "0")),
                             float(detection.get("y")), float(detection.get("x"))))
            except (TypeError, ValueError):
                raise InputError(f"{path}: particle {number} has a detection without numbers t, x, y "
                                 f"({ElementTree.tostring(detection, encoding='unicode').strip()[:80]})") from None
    values = np.array(rows, dtype=np.float64).reshape(-1, 5)
    if not np.all(values[:, 1] == np.round(values[:, 1])):
        raise InputError(f"{path}: a detection's t is not a whole frame number")
    scale = _scale(voxel_size)
    columns = {"track_id": values[:, 0].astype(np.int64), "frame": values[:, 1].astype(np.int64),
               "z": values[:, 2] * scale["z"], "y": values[:, 3] * scale["y"], "x": values[:, 4] * scale["x"]}
    if not np.any(columns["z"]):
        del columns["z"]
    return check_tracks(tracks_table(columns), what=str(path))


def _scale(voxel_size: Sequence[float] | None) -> dict[str, float]:
    dz, dy, dx = check_voxel_size(voxel_size) if voxel_size is not None else (1.0, 1.0, 1.0)
    return {"z": dz, "y": dy, "x": dx}
