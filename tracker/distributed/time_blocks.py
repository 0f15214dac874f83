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

The client never holds the whole table (:func:`stream_time_blocks`): the blocks are linked from the frames'
tables where the workers keep them (futures), and are stitched in time order, one at a time; the client keeps
only the track ids and successors of the last ``overlap`` frames, which later blocks may link from, and hands
each block's tracks on (to a file, :mod:`.block_writer`).

The tracks are not identical to one linking of the whole stack: each block estimates the motion (persistence,
each track's scatter), the rate of missed detections, the evidence for gap closing and the "no link" cost from
its own frames, where one linking estimates them from all frames so far. Frame-to-frame assignment alone
(``motion="none", adaptive_radius=False, max_gap=0``) gives the same tracks and link costs (the confidences,
scaled by the "no link" cost, differ by up to about 0.01); otherwise ``benchmarks/distributed_bench.py blocks``
measures the link F1 against one linking (≥ 0.999 is the target).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..linking import LinkSummary, link_detections
from ..linking.gate import GateInputs, estimate_gate
from ..params import LinkingParams
from ..progress import ProgressCallback, Stage
from ..tables import Table, concat_tables, sort_table, take_rows
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

    The table is sent to the workers frame by frame, linked by :func:`stream_time_blocks`, and its blocks'
    tracks put together again.

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
    from .detection import FrameTables

    _check_blocks(block_frames, overlap)
    table = check_detections(detections)  # (as link_detections does first: duplicated rows dropped)
    if np.any(np.diff(table["frame"]) < 0):
        table = sort_table(table, ["frame"])
    table = {k: v for k, v in table.items() if k not in ("track_id", "link_cost", "link_confidence")}  # (carried)
    frames = np.asarray(table["frame"], dtype=np.int64)
    present, starts, counts = np.unique(frames, return_index=True, return_counts=True)
    if len(present) <= block_frames:  # (one block: the whole linking)
        return link_detections(table, progress=progress, return_summary=True, **linking.to_dict())
    parts = [{name: column[start:start + count] for name, column in table.items()}
             for start, count in zip(starts, counts)]
    chunks: list[Table] = []
    # (keys of their own, not of the content: a table scattered again while an earlier run's copy is released
    # would lose its data in Dask's race between the two)
    frame_tables = FrameTables(client.scatter(parts, hash=False), counts, [GateInputs.of(part) for part in parts])
    summary = stream_time_blocks(client, frame_tables, linking, block_frames,
                                 chunks.append, overlap, progress)
    return assemble_tracks(chunks), summary


def stream_time_blocks(
    client: Any,
    frames: Any,
    linking: LinkingParams,
    block_frames: int,
    sink: Callable[[Table], None],
    overlap: int = LINK_OVERLAP_FRAMES,
    progress: ProgressCallback | None = None,
) -> LinkSummary:
    """Link the frames' tables held on the workers in time blocks, and hand the tracks to ``sink`` block by block.

    The client never holds more than one block: each block is linked on a worker from the frames' futures, and
    returns its core's points with their links; the client gives them track ids (by first appearance, as one
    linking numbers them), keeping of the earlier blocks only the track ids and successors of the last
    ``overlap`` frames, which later blocks may link from.

    Parameters
    ----------
    client : distributed.Client
    frames : tracker.distributed.detection.FrameTables
        One future per frame (each a checked detections table of one frame, in the frame's row order) and the
        row counts (:func:`tracker.distributed.detection.detect_frames_on_cluster`). Frames without rows are
        skipped, as one linking skips them.
    linking : LinkingParams
        Without a gate (``max_displacement_um``), one is estimated as one linking estimates it, on one worker from
        the frames the estimate looks at (:func:`gate_frames`: a bounded number of points), and used by every
        block.
    block_frames : int
        Frames (of those with points) per block; at least 2.
    sink : callable
        Called with each block's tracks, in block (time) order: a table of the points of the block's frames, in
        frame order, with ``track_id`` first and ``link_cost`` and ``link_confidence`` last (NaN at a track's
        start), as :func:`tracker.linking.link_detections` gives them; the track ids are those of one table:
        :func:`assemble_tracks` of all the blocks sorts them as one linking does.
    overlap : int
        Frames added to each block on both sides (at least 1).
    progress : callable, optional
        ``progress(Stage.LINK, done, total)`` as blocks are stitched.

    Returns
    -------
    LinkSummary
        The blocks' summaries together (see :func:`link_in_time_blocks`), with the gate used.
    """
    from dask.base import tokenize

    _check_blocks(block_frames, overlap)
    counts = np.asarray(frames.counts, dtype=np.int64)
    present = np.flatnonzero(counts)  # (indices into frames.futures of the frames with points)
    first_row = np.concatenate([[0], np.cumsum(counts[present])])  # (row of each present frame's first point)
    gate = None
    if linking.max_displacement_um is None:  # one gate for every block, as one linking estimates it
        whole, looked_at = gate_frames(client, frames)
        future = client.submit(_estimate_gate, linking.solver, whole, *[frames.futures[i] for i in looked_at])
        gate = future.result()
        del future
        linking = linking.replace(max_displacement_um=gate.value_um)
    parameters = linking.to_dict()
    if not len(present):  # (no points at all: the tables are empty, one linking gives the empty tracks)
        tracks, summary = link_detections(concat_tables(client.gather(frames.futures)), return_summary=True,
                                          **parameters)
        sink(tracks)
        return summary if gate is None else replace(summary, gate=gate)
    n_blocks = -(-len(present) // block_frames)
    futures = []
    for k in range(n_blocks):
        core = (k * block_frames, min((k + 1) * block_frames, len(present)))  # (in present frames)
        wide = (max(core[0] - overlap, 0), min(core[1] + overlap, len(present)))
        if n_blocks == 1:
            wide = core
        rows = (int(first_row[wide[0]]), int(first_row[core[0]]), int(first_row[core[1]]))
        parts = [frames.futures[i] for i in present[wide[0]:wide[1]]]
        key = f"tracker-link-block-{tokenize(rows, sorted(parameters.items()), *parts)}"
        futures.append(client.submit(_link_block, parameters, rows, *parts, key=key, pure=True))
    stitch = _Stitch(overlap_rows=lambda k: int(first_row[min(max((k + 1) * block_frames - overlap, 0),
                                                              len(present))]))
    summaries = []
    try:
        for k in range(n_blocks):
            future, futures[k] = futures[k], None  # (released once stitched: one block at a time)
            core, links, block_summary = future.result()
            del future
            sink(stitch.block(core, *links, next_window=stitch.window_start(k)))
            summaries.append(block_summary)
            if progress is not None:
                progress(Stage.LINK, k + 1, n_blocks)
    finally:
        live = [f for f in futures if f is not None]
        if live:
            client.cancel(live)
    summary = _summary(summaries)
    return summary if gate is None else replace(summary, gate=gate)


def assemble_tracks(chunks: list[Table]) -> Table:
    """The blocks' tracks (:func:`stream_time_blocks`) as one table, sorted by track and frame."""
    tracks = concat_tables(chunks)
    return take_rows(tracks, np.lexsort((np.asarray(tracks["frame"]), np.asarray(tracks["track_id"]))))


def _check_blocks(block_frames: int, overlap: int) -> None:
    if block_frames < 2 or overlap < 1:
        raise ValueError(f"time blocks need at least 2 frames and an overlap of 1, got {block_frames} and {overlap}")


def gate_frames(client: Any, frames: Any) -> tuple[GateInputs, list[int]]:
    """What the gate estimate of all the frames needs: the whole table's :class:`tracker.linking.gate.GateInputs`
    (merged from each frame's: :attr:`FrameTables.gate_inputs`, or computed on the workers), and the indices of
    the frames (``frames.futures``) it looks at, at most :data:`tracker.linking.gate.MAX_FRAME_PAIRS` pairs of
    :data:`tracker.linking.gate.MAX_POINTS` points together: the worker that estimates the gate holds those, not
    all the detections, and the estimate equals one linking's (:func:`tracker.linking.gate.estimate_gate`)."""
    parts = frames.gate_inputs
    if parts is None:
        parts = client.gather(client.map(GateInputs.of, frames.futures, pure=True))
    whole = GateInputs.merge(parts)
    wanted = set(whole.frames_looked_at().tolist())
    return whole, [i for i, part in enumerate(parts) if wanted.intersection(part.frames.tolist())]


def _estimate_gate(solver: str, whole: GateInputs, *tables: Table) -> Any:
    """On a worker: the gate of the whole table (``whole``) from the frames it looks at (``tables``,
    :func:`tracker.linking.gate.estimate_gate`)."""
    return estimate_gate(concat_tables(list(tables)), solver=solver, whole=whole)


def _link_block(parameters: Mapping[str, Any], rows: tuple[int, int, int],
                *tables: Table) -> tuple[Table, tuple[np.ndarray, ...], LinkSummary]:
    """On a worker: link one block (the frames ``tables``, whose first row is row ``rows[0]`` of the whole stack;
    its core holds rows ``rows[1]:rows[2]``); the core's points, and the links into them as (source row, target
    row, link cost, link confidence) arrays, rows numbered in the whole stack."""
    block = concat_tables(list(tables))
    first, core_first, core_end = rows
    block[_ROW] = np.arange(first, first + len(block["frame"]), dtype=np.int64)
    tracks, summary = link_detections(block, return_summary=True, **parameters)
    track_id, row = np.asarray(tracks["track_id"]), np.asarray(tracks[_ROW])
    linked = np.flatnonzero(track_id[1:] == track_id[:-1]) + 1  # (a row whose previous row is its predecessor)
    into_core = linked[(row[linked] >= core_first) & (row[linked] < core_end)]
    links = (row[into_core - 1], row[into_core], np.asarray(tracks["link_cost"])[into_core],
             np.asarray(tracks["link_confidence"])[into_core])
    core = {name: column[core_first - first:core_end - first] for name, column in block.items() if name != _ROW}
    return core, links, summary


class _Stitch:
    """The client's state between blocks: the track id and whether a successor is taken, of the points of the
    last frames that later blocks may link from (a window of rows), and the next track id."""

    def __init__(self, overlap_rows: Callable[[int], int]):
        self.window_start = overlap_rows  # (first row later blocks may link from, after block k)
        self.first = 0  # (row of self.track_id[0])
        self.track_id = np.empty(0, dtype=np.int64)
        self.taken = np.empty(0, dtype=bool)
        self.next_id = 0

    def block(self, core: Table, source: np.ndarray, target: np.ndarray, cost: np.ndarray,
              confidence: np.ndarray, next_window: int) -> Table:
        """The tracks of one block's core (the next rows in order), its links given in rows of the whole stack."""
        n = len(core["frame"])
        track_id = np.concatenate([self.track_id, np.full(n, -1, dtype=np.int64)])
        taken = np.concatenate([self.taken, np.zeros(n, dtype=bool)])
        source, target = source - self.first, target - self.first  # (window rows)
        # A point an earlier block gave a successor keeps it (its target lies in an earlier frame): this block's
        # link from it is dropped, and its target starts a track.
        keep = ~taken[source]
        source, target, cost, confidence = source[keep], target[keep], cost[keep], confidence[keep]
        taken[source] = True
        predecessor = np.full(len(track_id), -1, dtype=np.int64)
        predecessor[target] = source
        link_cost = np.full(n, np.nan)
        link_confidence = np.full(n, np.nan)
        link_cost[target - len(self.track_id)] = cost
        link_confidence[target - len(self.track_id)] = confidence
        # Track ids: a new one for each start, in row order (as one linking numbers them); the others inherit
        # their predecessor's, found by pointer jumping to the start or to a point of an earlier block.
        new = np.arange(len(self.track_id), len(track_id))
        starts = new[predecessor[new] < 0]
        track_id[starts] = self.next_id + np.arange(len(starts))
        self.next_id += len(starts)
        head = np.where(track_id >= 0, np.arange(len(track_id)), predecessor)
        while True:
            jumped = head[head]
            if np.array_equal(jumped, head):
                break
            head = jumped
        track_id = track_id[head]
        tracks = {"track_id": track_id[len(self.track_id):], **core, "link_cost": link_cost,
                  "link_confidence": link_confidence}
        keep_from = max(next_window - self.first, 0)
        self.first += keep_from
        self.track_id, self.taken = track_id[keep_from:], taken[keep_from:]
        return tracks


def _summary(summaries: list[LinkSummary]) -> LinkSummary:
    """The blocks' summaries as one: the median persistence, the exchanges added up, the mean missing rate, gap
    closing and the radius restart if any block did them."""
    persistences = [s.persistence for s in summaries if s.persistence is not None]
    first = summaries[0]
    return replace(first, persistence=float(np.median(persistences)) if persistences else None,
                   exchanges=sum(s.exchanges for s in summaries),
                   missing_rate=float(np.mean([s.missing_rate for s in summaries])),
                   gap_closing=any(s.gap_closing for s in summaries),
                   radius_abandoned=any(s.radius_abandoned for s in summaries))
