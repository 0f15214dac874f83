"""Linking in time blocks, in parallel on Dask workers, stitched at the block boundaries.

The frames are cut into blocks of ``block_frames`` consecutive frames (the block's *core*). Each block is linked
by :func:`tracker.linking.link_detections`, whole, on a worker, over its core widened by ``overlap`` frames on
both sides, and keeps only the links *into* its core's frames. So the link across a boundary (from the last
frame of one core into the first of the next) is made by the next block's assignment, with ``overlap`` frames
of the tracks' past before it (what the motion model predicts from, what gap closing bridges) and the frames
after it (what smoothing looks ahead to); a gap-closing link across a boundary is made likewise, by the block
that owns its target. Every point keeps at most one predecessor (its frame belongs to one core); a point that
two blocks give different successors (a gap-closing link in one, a frame-to-frame link in the other: rare,
where the two blocks disagree) keeps the earlier one.

The tracks are not identical to one linking of the whole stack: each block estimates the motion (persistence,
each track's scatter), the rate of missed detections, the evidence for gap closing and the "no link" cost from
its own frames, where one linking estimates them from all frames so far. Frame-to-frame assignment alone
(``motion="none", adaptive_radius=False, max_gap=0``) gives the same tracks and link costs (the confidences,
scaled by the "no link" cost, differ by up to about 0.01); otherwise ``benchmarks/distributed_bench.py blocks``
measures the link F1 against one linking (≥ 0.999 is the target).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..linking import LinkSummary, link_detections
from ..linking.gate import estimate_gate
from ..linking.track_state import tracks_in_order
from ..params import LinkingParams
from ..progress import ProgressCallback, Stage
from ..tables import Table, sort_table, take_rows
from ..validation import check_detections

LINK_OVERLAP_FRAMES = 10
"""Frames each block is widened by on both sides (see the module's docstring); with 10 the link F1 of
200-frame blocks against one linking was ≥ 0.999 in ``benchmarks/distributed_bench.py blocks``."""

_ROW = "_row"  # (the point's row in the whole table, carried through each block's linking)


def link_in_time_blocks(
    client: Any,
    detections: Mapping[str, np.ndarray],
    linking: LinkingParams,
    block_frames: int,
    overlap: int = LINK_OVERLAP_FRAMES,
    progress: ProgressCallback | None = None,
) -> tuple[Table, LinkSummary]:
    """Link ``detections`` in time blocks on the workers of ``client``, stitched at the boundaries.

    Parameters
    ----------
    client : distributed.Client
    detections : Table
        As for :func:`tracker.linking.link_detections`.
    linking : LinkingParams
    block_frames : int
        Frames (of those with points) per block; at least 2.
    overlap : int
        Frames added to each block on both sides (at least 1).
    progress : callable, optional
        ``progress(Stage.LINK, done, total)`` as blocks complete.

    Returns
    -------
    Table
        As :func:`tracker.linking.link_detections` returns it (track ids 0, 1, … by first appearance; sorted by
        track and frame).
    LinkSummary
        The blocks' summaries together: the median persistence, the exchanges added up, the mean missing rate,
        gap closing and the radius restart if any block did them.
    """
    from dask.base import tokenize
    from distributed import as_completed

    if block_frames < 2 or overlap < 1:
        raise ValueError(f"time blocks need at least 2 frames and an overlap of 1, got {block_frames} and {overlap}")
    table = check_detections(detections)  # (as link_detections does first: duplicated rows dropped)
    if np.any(np.diff(table["frame"]) < 0):
        table = sort_table(table, ["frame"])
    table = {k: v for k, v in table.items() if k not in ("track_id", "link_cost", "link_confidence")}  # (carried)
    frames = np.asarray(table["frame"], dtype=np.int64)
    present = np.unique(frames)
    n = len(frames)
    if len(present) <= block_frames:  # (one block: the whole linking)
        return link_detections(table, progress=progress, return_summary=True, **linking.to_dict())
    gate = None
    if linking.max_displacement_um is None:  # one gate for every block, estimated once from all the detections
        gate = estimate_gate(table, solver=linking.solver)
        linking = linking.replace(max_displacement_um=gate.value_um)
    starts = present[::block_frames]
    # Rows of each core and of its widened block (frames sorted: a block is a slice of rows).
    bounds = np.searchsorted(frames, np.append(starts, present[-1] + 1))
    index_of = np.searchsorted(present, starts)
    wide_first = np.searchsorted(frames, present[np.maximum(index_of - overlap, 0)])
    wide_last = np.searchsorted(frames, present[np.minimum(index_of + block_frames + overlap, len(present)) - 1],
                                side="right")
    rows = np.arange(n)
    parameters = linking.to_dict()
    futures = {}
    for k in range(len(starts)):
        block = {name: column[wide_first[k]:wide_last[k]] for name, column in table.items()}
        block[_ROW] = rows[wide_first[k]:wide_last[k]]
        key = f"tracker-link-block-{tokenize(block, sorted(parameters.items()))}"
        futures[client.submit(_link_block, block, parameters, key=key, pure=True)] = k
    predecessor = np.full(n, -1, dtype=np.int64)
    link_cost = np.full(n, np.nan)
    confidence = np.full(n, np.nan)
    successor_target = np.full(n, -1, dtype=np.int64)  # (the kept successor of each point, to find conflicts)
    summaries: list[LinkSummary] = [None] * len(starts)  # type: ignore[list-item]
    try:
        for done, future in enumerate(as_completed(list(futures)), 1):
            k = futures.pop(future)
            (source, target, cost, conf), summaries[k] = future.result()
            owned = (target >= bounds[k]) & (target < bounds[k + 1])  # (links into this block's core)
            source, target, cost, conf = source[owned], target[owned], cost[owned], conf[owned]
            predecessor[target] = source
            link_cost[target], confidence[target] = cost, conf
            _keep_earlier_successor(predecessor, successor_target, source, target, link_cost, confidence)
            if progress is not None:
                progress(Stage.LINK, done, len(starts))
    finally:
        if futures:
            client.cancel(list(futures))
    track_id, order = tracks_in_order(predecessor)
    tracks = take_rows({"track_id": track_id, **table, "link_cost": link_cost, "link_confidence": confidence}, order)
    summary = _summary(summaries)
    return tracks, (summary if gate is None else replace(summary, gate=gate))


def _link_block(block: Table, parameters: Mapping[str, Any]) -> tuple[tuple[np.ndarray, ...], LinkSummary]:
    """On a worker: link one block; its links as (source row, target row, link cost, link confidence) arrays."""
    tracks, summary = link_detections(block, return_summary=True, **parameters)
    track_id, row = np.asarray(tracks["track_id"]), np.asarray(tracks[_ROW])
    linked = np.flatnonzero(track_id[1:] == track_id[:-1]) + 1  # (a row whose previous row is its predecessor)
    links = (row[linked - 1], row[linked], np.asarray(tracks["link_cost"])[linked],
             np.asarray(tracks["link_confidence"])[linked])
    return links, summary


def _keep_earlier_successor(predecessor: np.ndarray, successor: np.ndarray, source: np.ndarray,
                            target: np.ndarray, link_cost: np.ndarray, confidence: np.ndarray) -> None:
    """Record ``source → target``; where a source already has another successor (from another block), keep the
    one in the earlier frame (rows are in frame order) and make the other target a track start."""
    previous = successor[source]
    clash = (previous >= 0) & (previous != target)
    keep_new = ~clash | (target < previous)
    dropped = np.where(clash & keep_new, previous, np.where(clash, target, -1))
    dropped = dropped[dropped >= 0]
    successor[source[keep_new]] = target[keep_new]
    predecessor[dropped] = -1
    link_cost[dropped] = np.nan
    confidence[dropped] = np.nan


def _summary(summaries: list[LinkSummary]) -> LinkSummary:
    persistences = [s.persistence for s in summaries if s.persistence is not None]
    first = summaries[0]
    return replace(first, persistence=float(np.median(persistences)) if persistences else None,
                   exchanges=sum(s.exchanges for s in summaries),
                   missing_rate=float(np.mean([s.missing_rate for s in summaries])),
                   gap_closing=any(s.gap_closing for s in summaries),
                   radius_abandoned=any(s.radius_abandoned for s in summaries))
