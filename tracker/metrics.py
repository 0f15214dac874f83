"""Tracking quality against ground truth.

* Detection: tracked points are matched one-to-one to visible ground-truth
  points in each frame by a gated assignment (distance ≤ ``match_distance_um``);
  recall, precision and localisation RMSE follow.
* Links: a link (consecutive points of one track) is correct when both ends
  match ground-truth points that are consecutive visible points of one
  ground-truth track; recall, precision, F1. Also *given the detections*:
  against each true track's detected (matched) points only, so that a link
  across frames where the detector missed the particle is correct (and the
  two true links through the missed point are not asked for); the measure
  for comparing linkers on the same detections. Where every visible point
  is detected, both are the same.
* ISBI 2012 Particle Tracking Challenge measures α, β, JSC and JSCθ as
  defined by Chenouard et al., Nature Methods 11, 281–289 (2014), with the
  gate ε = ``match_distance_um``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.spatial import cKDTree

from . import lap
from .params import MATCH_DISTANCE_UM as DEFAULT_MATCH_DISTANCE_UM
from .tables import positions_um, require_columns, spatial_axes
from .validation import check_detections


def _check_match_distance(match_distance_um: float) -> None:
    """A one-line ``ValueError`` unless the match distance (the gate ε) is a finite number > 0 µm."""
    try:
        valid = math.isfinite(float(match_distance_um)) and float(match_distance_um) > 0
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"--match-distance must be a finite number > 0 µm, got {match_distance_um!r}")


def _visible_ground_truth(ground_truth: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    require_columns(ground_truth, ("track_id", "frame", *spatial_axes(ground_truth)), what="ground truth")
    visible = np.asarray(ground_truth.get("visible", np.ones(len(ground_truth["frame"]), bool)), dtype=bool)
    return {name: np.asarray(column)[visible] for name, column in ground_truth.items()}


def match_points(
    points: Mapping[str, np.ndarray],
    ground_truth: Mapping[str, np.ndarray],
    match_distance_um: float = DEFAULT_MATCH_DISTANCE_UM,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-to-one matching of points to ground truth, frame by frame.

    Minimises the sum of squared distances among pairs closer than
    ``match_distance_um``, matching as many as possible.

    Returns
    -------
    point_rows, truth_rows : int64 arrays
        Row indices into ``points`` and ``ground_truth`` of matched pairs.
    distance_um : float64 array
        Distance of each pair (µm).
    """
    _check_match_distance(match_distance_um)
    point_frames = np.asarray(points["frame"])
    truth_frames = np.asarray(ground_truth["frame"])
    point_xyz, truth_xyz = _comparable_positions(points, ground_truth)
    out_p, out_t = [], []
    for frame in np.intersect1d(point_frames, truth_frames):
        p_index = np.flatnonzero(point_frames == frame)
        t_index = np.flatnonzero(truth_frames == frame)
        pairs = cKDTree(point_xyz[p_index]).sparse_distance_matrix(
            cKDTree(truth_xyz[t_index]), match_distance_um, output_type="ndarray"
        )
        if len(pairs) == 0:
            continue
        # "No match" costs ε² each, so any pair within the gate is preferred.
        rows, cols = lap.solve_gated(
            pairs["i"], pairs["j"], pairs["v"] ** 2, (len(p_index), len(t_index)),
            match_distance_um**2, solver="scipy",
        )
        out_p.append(p_index[rows])
        out_t.append(t_index[cols])
    point_rows = np.concatenate(out_p) if out_p else np.empty(0, dtype=np.int64)
    truth_rows = np.concatenate(out_t) if out_t else np.empty(0, dtype=np.int64)
    distance = np.linalg.norm(point_xyz[point_rows] - truth_xyz[truth_rows], axis=1)
    return point_rows.astype(np.int64), truth_rows.astype(np.int64), distance


def _comparable_positions(points: Mapping[str, np.ndarray],
                          ground_truth: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Both tables' positions (µm) on the same axes: ``z, y, x``, or ``y, x`` where one table is 2D and the
    other's ``z`` is one value (the single plane of a 2D time series, which ``track run`` reports with z).

    Raises
    ------
    ValueError
        One table is 2D and the other has points in several planes.
    """
    point_xyz, truth_xyz = positions_um(points), positions_um(ground_truth)
    if point_xyz.shape[1] == truth_xyz.shape[1]:
        return point_xyz, truth_xyz
    flat = [xyz for xyz in (point_xyz, truth_xyz) if xyz.shape[1] == 3 and len(np.unique(xyz[:, 0])) <= 1]
    if not flat:
        raise ValueError(f"the points have {point_xyz.shape[1]} spatial axes but the ground truth "
                         f"{truth_xyz.shape[1]}: compare 2D with 2D, 3D with 3D")
    return point_xyz[:, -2:], truth_xyz[:, -2:]


def _links(table: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(from, to)`` of consecutive points of each track."""
    order = np.lexsort((np.asarray(table["frame"]), np.asarray(table["track_id"])))
    same_track = np.asarray(table["track_id"])[order][1:] == np.asarray(table["track_id"])[order][:-1]
    return order[:-1][same_track], order[1:][same_track]


def link_correctness(
    tracks: Mapping[str, np.ndarray],
    ground_truth: Mapping[str, np.ndarray],
    match_distance_um: float = DEFAULT_MATCH_DISTANCE_UM,
) -> np.ndarray:
    """For each row of ``tracks``: is the link *into* this point correct?

    Returns
    -------
    (n,) int8 array
        ``1`` correct, ``0`` wrong (an end unmatched, or not a ground-truth
        link), ``-1`` no link (the point starts its track).
    """
    _check_match_distance(match_distance_um)
    tracks = check_detections(tracks, what="tracks", drop_duplicates=False)
    ground_truth = check_detections(ground_truth, what="ground truth", drop_duplicates=False)
    require_columns(tracks, ("track_id", "frame", *spatial_axes(tracks)), what="tracks")
    truth = _visible_ground_truth(ground_truth)
    correct, _ = _correct_links(tracks, truth, match_distance_um)
    result = np.full(len(tracks["frame"]), -1, dtype=np.int8)
    link_from, link_to = _links(tracks)
    result[link_to] = correct.astype(np.int8)
    return result


def _correct_links(tracks, truth, match_distance_um, matches=None, detected_only: bool = False):
    """Boolean per tracked link (in :func:`_links` order): matches a ground-truth link; and the number of
    ground-truth links.

    ``matches``: the result of :func:`match_points` if already at hand. ``detected_only``: the ground-truth
    links join consecutive *matched* points of a true track (see the module docstring).
    """
    point_rows, truth_rows, _ = matches if matches is not None else match_points(tracks, truth, match_distance_um)
    truth_of = np.full(len(tracks["frame"]), -1, dtype=np.int64)
    truth_of[point_rows] = truth_rows
    n_truth = len(truth["frame"])
    if detected_only:
        matched = np.sort(truth_rows)
        t_from, t_to = _links({"track_id": np.asarray(truth["track_id"])[matched],
                               "frame": np.asarray(truth["frame"])[matched]})
        t_from, t_to = matched[t_from], matched[t_to]
    else:
        t_from, t_to = _links(truth)
    truth_keys = np.sort(t_from * n_truth + t_to)
    link_from, link_to = _links(tracks)
    a, b = truth_of[link_from], truth_of[link_to]
    keys = a * n_truth + b
    return (a >= 0) & (b >= 0) & np.isin(keys, truth_keys, assume_unique=False), len(t_from)


def _recall_precision_f1(n_correct: int, n_links: int, n_truth_links: int) -> tuple[float, float, float]:
    """Recall, precision and F1 of ``n_links`` tracked links of which ``n_correct`` are among the
    ``n_truth_links`` true ones (1 where there is nothing to find or nothing found)."""
    recall = n_correct / n_truth_links if n_truth_links else 1.0
    precision = n_correct / n_links if n_links else 1.0
    f1 = 2 * recall * precision / (recall + precision) if n_correct else 0.0
    return recall, precision, f1


def evaluate(
    tracks: Mapping[str, np.ndarray],
    ground_truth: Mapping[str, np.ndarray],
    match_distance_um: float = DEFAULT_MATCH_DISTANCE_UM,
) -> dict[str, float]:
    """All quality measures of ``tracks`` against ``ground_truth``.

    Parameters
    ----------
    tracks : Table
        ``track_id, frame, z, y, x`` (µm).
    ground_truth : Table
        ``track_id, frame, z, y, x`` (µm) and optionally ``visible``;
        invisible points are ignored.
    match_distance_um : float
        Largest distance at which a tracked point can match a true one (µm);
        also the ε of the ISBI measures.

    Returns
    -------
    dict
        ``detection_recall, detection_precision, rmse_um, link_recall,
        link_precision, link_f1``, the same three ``_given_detections``
        (see the module docstring), ``alpha, beta, jsc, jsc_theta`` and counts.
    """
    _check_match_distance(match_distance_um)
    tracks = check_detections(tracks, what="tracks", drop_duplicates=False)
    ground_truth = check_detections(ground_truth, what="ground truth", drop_duplicates=False)
    require_columns(tracks, ("track_id", "frame", *spatial_axes(tracks)), what="tracks")
    truth = _visible_ground_truth(ground_truth)
    n_points, n_truth = len(tracks["frame"]), len(truth["frame"])
    matches = match_points(tracks, truth, match_distance_um)
    distance = matches[2]
    n_matched = len(distance)

    correct, n_truth_links = _correct_links(tracks, truth, match_distance_um, matches)
    n_links, n_correct = len(correct), int(correct.sum())
    link_recall, link_precision, f1 = _recall_precision_f1(n_correct, n_links, n_truth_links)
    correct_given, n_truth_links_given = _correct_links(tracks, truth, match_distance_um, matches, detected_only=True)
    recall_given, precision_given, f1_given = _recall_precision_f1(int(correct_given.sum()), n_links,
                                                                   n_truth_links_given)

    result = {
        "n_ground_truth_points": n_truth,
        "n_points": n_points,
        "detection_recall": n_matched / n_truth if n_truth else 1.0,
        "detection_precision": n_matched / n_points if n_points else 1.0,
        "rmse_um": float(np.sqrt(np.mean(distance**2))) if n_matched else float("nan"),
        "n_ground_truth_links": n_truth_links,
        "n_links": n_links,
        "link_recall": link_recall,
        "link_precision": link_precision,
        "link_f1": f1,
        "link_recall_given_detections": recall_given,
        "link_precision_given_detections": precision_given,
        "link_f1_given_detections": f1_given,
    }
    result.update(isbi_measures(tracks, truth, match_distance_um))
    return result


def isbi_measures(
    tracks: Mapping[str, np.ndarray],
    ground_truth: Mapping[str, np.ndarray],
    epsilon_um: float = DEFAULT_MATCH_DISTANCE_UM,
) -> dict[str, float]:
    """α, β, JSC and JSCθ of Chenouard et al. (2014).

    Ground-truth tracks θ are paired one-to-one with tracked tracks ω (or a
    dummy) by an optimal assignment minimising the gated track distance
    ``d(θ, ω) = Σ_t min(‖θ(t) − ω(t)‖, ε)`` over the frames where either
    exists (ε where only one does); a dummy costs ``ε |θ|``.
    """
    truth = _visible_ground_truth(ground_truth)
    _check_match_distance(epsilon_um)
    eps = float(epsilon_um)
    t_ids, t_track = np.unique(np.asarray(truth["track_id"]), return_inverse=True)
    p_ids, p_track = np.unique(np.asarray(tracks["track_id"]), return_inverse=True)
    t_len = np.bincount(t_track, minlength=len(t_ids))
    p_len = np.bincount(p_track, minlength=len(p_ids))
    n_truth_points, n_points = int(t_len.sum()), int(p_len.sum())
    empty_score = {"alpha": 0.0, "beta": 0.0, "jsc": 0.0, "jsc_theta": 0.0}
    if n_truth_points == 0:
        return empty_score

    # Every (truth point, tracked point) pair within ε in the same frame.
    t_frames, p_frames = np.asarray(truth["frame"]), np.asarray(tracks["frame"])
    p_xyz, t_xyz = _comparable_positions(tracks, truth)
    pair_t, pair_p, pair_d = [], [], []
    for frame in np.intersect1d(t_frames, p_frames):
        ti, pi = np.flatnonzero(t_frames == frame), np.flatnonzero(p_frames == frame)
        pairs = cKDTree(t_xyz[ti]).sparse_distance_matrix(cKDTree(p_xyz[pi]), eps, output_type="ndarray")
        close = pairs["v"] < eps
        pair_t.append(t_track[ti[pairs["i"][close]]])
        pair_p.append(p_track[pi[pairs["j"][close]]])
        pair_d.append(pairs["v"][close])
    pair_t, pair_p, pair_d = (np.concatenate(x) if x else np.empty(0, np.int64) for x in (pair_t, pair_p, pair_d))
    if len(pair_t) == 0:
        return empty_score

    # Aggregate per candidate track pair (a track has one point per frame).
    key = pair_t * len(p_ids) + pair_p
    keys, inverse = np.unique(key, return_inverse=True)
    cand_t, cand_p = keys // len(p_ids), keys % len(p_ids)
    close_sum = np.bincount(inverse, weights=pair_d)
    close_count = np.bincount(inverse)
    both = _frames_in_common(t_track, t_frames, p_track, p_frames, cand_t, cand_p, len(p_ids))
    distance = close_sum + eps * (t_len[cand_t] + p_len[cand_p] - both - close_count)

    rows, cols = lap.solve_gated(
        cand_t, cand_p, distance, (len(t_ids), len(p_ids)), eps * t_len.astype(np.float64),
        np.zeros(len(p_ids)), solver="scipy",
    )
    chosen = np.searchsorted(keys, rows * len(p_ids) + cols)  # candidate index of each pair
    paired_truth = np.zeros(len(t_ids), dtype=bool)
    paired_truth[rows] = True
    paired_tracks = np.zeros(len(p_ids), dtype=bool)
    paired_tracks[cols] = True

    d_to_dummy = eps * n_truth_points
    d_paired = float(distance[chosen].sum() + eps * t_len[~paired_truth].sum())
    d_spurious = eps * float(p_len[~paired_tracks].sum())
    true_positives = int(close_count[chosen].sum())
    return {
        "alpha": 1.0 - d_paired / d_to_dummy,
        "beta": (d_to_dummy - d_paired) / (d_to_dummy + d_spurious),
        "jsc": true_positives / (n_truth_points + n_points - true_positives),
        "jsc_theta": int(paired_truth.sum()) / (len(t_ids) + int((~paired_tracks).sum())),
    }


def _frames_in_common(t_track, t_frames, p_track, p_frames, cand_t, cand_p, n_p_tracks) -> np.ndarray:
    """Number of frames in which both tracks of each candidate pair have a point."""
    max_frame = int(max(t_frames.max(), p_frames.max())) + 1
    tracked_keys = np.sort(p_track.astype(np.int64) * max_frame + p_frames)
    # Expand each candidate pair over the frames of its ground-truth track.
    order = np.argsort(t_track, kind="stable")
    t_start = np.searchsorted(t_track[order], np.arange(t_track.max() + 1))
    t_count = np.bincount(t_track)
    lengths = t_count[cand_t]
    pair_of = np.repeat(np.arange(len(cand_t)), lengths)
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    frames = t_frames[order][t_start[cand_t][pair_of] + offsets]
    query = cand_p[pair_of].astype(np.int64) * max_frame + frames
    position = np.searchsorted(tracked_keys, query)
    found = (position < len(tracked_keys)) & (tracked_keys[np.minimum(position, len(tracked_keys) - 1)] == query)
    return np.bincount(pair_of, weights=found, minlength=len(cand_t))
