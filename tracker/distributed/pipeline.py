"""The whole job on a Dask cluster: detection on the workers, then linking.

By default the client links the detections gathered from the workers at once, exactly as a single-process run
does, so the tracks are identical to :func:`tracker.pipeline.track_stack`'s whatever the motion model. With
``ClusterParams.link_block_frames`` the workers link time blocks in parallel (:mod:`.time_blocks`), for stacks
whose linking on one process takes long: the linker's passes share state across the whole time-lapse (the
persistence and the motion's scatter estimated from all links so far, the rate of missed detections, the
evidence for gap closing), so the blocks' tracks differ slightly (measured: link F1 ≥ 0.999).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..linking import link_detections
from ..params import CLUSTER_DEFAULTS, ClusterParams, DetectionParams, LinkingParams
from ..pipeline import TrackingResult
from ..progress import ProgressCallback
from ..tables import Table, concat_tables
from .cluster import dask_client
from .detection import GPU_FRAMES_PER_TASK, detect_frames_on_cluster, detect_on_cluster
from .frame_source import FrameSource
from .time_blocks import assemble_tracks, stream_time_blocks

_LINK_COLUMNS = ("track_id", "link_cost", "link_confidence")


def track_on_cluster(
    path: str | os.PathLike,
    *,
    cluster: ClusterParams = CLUSTER_DEFAULTS,
    client: Any = None,
    voxel_size_um: Sequence[float] | None = None,
    axes: str | None = None,
    channel: int | None = None,
    detection: DetectionParams | None = None,
    linking: LinkingParams | None = None,
    progress: ProgressCallback | None = None,
    sink: Callable[[Table], None] | None = None,
) -> TrackingResult:
    """Track the stack at ``path`` (Zarr / OME-Zarr folder or TIFF) with detection spread over a Dask cluster.

    Parameters
    ----------
    path : path
        The stack; the workers open it by this path (:class:`FrameSource`) and read their frames themselves.
    cluster : ClusterParams
        The cluster to start or reach (:func:`tracker.distributed.cluster.dask_client`), unless ``client`` is
        given; and ``link_block_frames``: link in time blocks on the workers (:mod:`.time_blocks`).
    client : distributed.Client, optional
        A client of a cluster already running (kept open).
    voxel_size_um : (z, y, x) floats, optional
        µm; overrides the file's metadata.
    axes : str, optional
        The file's axes, when its metadata is ambiguous.
    channel : int, optional
        The channel to track (0-based) in a stack of several.
    detection, linking : DetectionParams, LinkingParams, optional
        As for :func:`tracker.pipeline.track_stack` (defaults: the model's).
    progress : callable, optional
        ``progress(stage, done, total)``: detection as frames complete on the workers, then the linker's stages
        (in time blocks: one step per block).
    sink : callable, optional
        With ``cluster.link_block_frames`` only: called with each time block's tracks in time order (see
        :func:`tracker.distributed.time_blocks.stream_time_blocks`) instead of putting them together, so that the
        client holds one block at a time, whatever the stack's length (e.g. to write them out as they come).

    Returns
    -------
    TrackingResult
        Equal to :func:`tracker.pipeline.track_stack`'s for the same stack and parameters (the tracks: unless
        linked in time blocks); ``timings`` has ``detect`` (cluster start excluded) and ``link``. In time
        blocks, the detections are the blocks' points put together (the workers keep them until linked); with
        ``sink``, ``detections`` and ``tracks`` are None (the sink had them).

    Raises
    ------
    InputError, ValueError, RuntimeError
        One line: see :func:`tracker.distributed.detection.detect_on_cluster` and
        :func:`tracker.distributed.cluster.dask_client`.
    """
    detection = DetectionParams() if detection is None else detection
    linking = LinkingParams() if linking is None else linking
    if sink is not None and cluster.link_block_frames is None:
        raise ValueError("tracks are handed over block by block (sink) only when linked in time blocks "
                         "(--link-blocks)")
    source = FrameSource.of(path, voxel_size_um, axes, channel)
    stack = source.open()  # (on the client: a bad file is one line before any cluster starts)
    frames_per_task = GPU_FRAMES_PER_TASK if cluster.gpus or detection.device == "gpu" else 1
    with contextlib.ExitStack() as context:
        if client is None:
            client = context.enter_context(dask_client(cluster))
        timings = {}
        start = time.perf_counter()
        if cluster.link_block_frames is None:
            detections, spot_scale, threshold_fit = detect_on_cluster(client, source, detection, progress,
                                                                      frames_per_task)
            timings["detect"] = time.perf_counter() - start
            start = time.perf_counter()
            tracks, summary = link_detections(detections, progress=progress, return_summary=True,
                                              **linking.to_dict())
        else:  # (the detections stay on the workers; the blocks' tracks reach the client one block at a time)
            frames, spot_scale, threshold_fit = detect_frames_on_cluster(client, source, detection, progress,
                                                                         frames_per_task)
            timings["detect"] = time.perf_counter() - start
            start = time.perf_counter()
            chunks: list[Table] = []
            summary = stream_time_blocks(client, frames, linking, cluster.link_block_frames,
                                         chunks.append if sink is None else sink, progress=progress)
            del frames  # (the workers may free the detections)
            tracks = assemble_tracks(chunks) if sink is None else None
            detections = (concat_tables([{k: v for k, v in chunk.items() if k not in _LINK_COLUMNS}
                                         for chunk in chunks]) if sink is None else None)
        timings["link"] = time.perf_counter() - start
    return TrackingResult(detections, tracks, stack.voxel_size, timings, summary, spot_scale, threshold_fit)
