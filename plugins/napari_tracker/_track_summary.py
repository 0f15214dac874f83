"""Per-track summaries of a tracks table (the review's table): length, span, speed, link costs, worst link."""

from __future__ import annotations

import numpy as np


def track_summary(track_id: np.ndarray, frame: np.ndarray, xyz: np.ndarray, link_cost: np.ndarray
                  ) -> dict[str, np.ndarray]:
    """One row per track of points sorted by ``(track_id, frame)``.

    Parameters
    ----------
    track_id, frame : (N,) ints
    xyz : (N, 3) floats
        Positions ``z, y, x`` in µm.
    link_cost : (N,) floats
        Cost of the link into each point (µm²; ignored at track starts).

    Returns
    -------
    dict of (n_tracks,) arrays
        ``track_id``, ``length`` (points), ``start``, ``end`` (frames),
        ``mean_speed`` (µm per frame: path length / frames spanned, NaN for a
        single point), ``mean_link_cost``, ``max_link_cost`` (µm², NaN
        without links), ``worst_frame`` (the frame the costliest link leads
        into, the earliest of equals; the start without links).
    """
    n = len(track_id)
    if n == 0:
        empty_f, empty_i = np.empty(0), np.empty(0, np.int64)
        return {"track_id": empty_i, "length": empty_i, "start": empty_i, "end": empty_i, "mean_speed": empty_f,
                "mean_link_cost": empty_f, "max_link_cost": empty_f, "worst_frame": empty_i}
    starts = np.flatnonzero(np.r_[True, track_id[1:] != track_id[:-1]])
    ends = np.r_[starts[1:], n] - 1
    length = ends - starts + 1
    step = np.r_[0.0, np.linalg.norm(xyz[1:] - xyz[:-1], axis=1)]
    step[starts] = 0.0
    path = np.add.reduceat(step, starts)
    span = frame[ends] - frame[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_speed = np.where(span > 0, path / np.maximum(span, 1), np.nan)
    cost = np.array(link_cost, dtype=np.float64)
    cost[starts] = np.nan
    has = np.isfinite(cost)
    n_links = np.add.reduceat(has.astype(np.int64), starts)
    total = np.add.reduceat(np.where(has, cost, 0.0), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_cost = np.where(n_links > 0, total / np.maximum(n_links, 1), np.nan)
    max_cost = np.maximum.reduceat(np.where(has, cost, -np.inf), starts)
    max_cost[n_links == 0] = np.nan
    # Within each track (contiguous: sorted by track), costliest link first; ties: the earliest frame.
    worst = np.lexsort((-np.where(has, cost, -np.inf), track_id))[starts]
    return {
        "track_id": track_id[starts],
        "length": length.astype(np.int64),
        "start": frame[starts],
        "end": frame[ends],
        "mean_speed": mean_speed,
        "mean_link_cost": mean_cost,
        "max_link_cost": max_cost,
        "worst_frame": frame[worst],
    }
