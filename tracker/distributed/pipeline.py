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
from collections.abc import Sequence
from typing import Any

from ..linking import link_detections
from ..params import CLUSTER_DEFAULTS, ClusterParams, DetectionParams, LinkingParams
from ..pipeline import TrackingResult
from ..progress import ProgressCallback
from .cluster import dask_client
from .detection import detect_on_cluster
from .frame_source import FrameSource
from .time_blocks import link_in_time_blocks


def track_on_cluster(
    path: str | os.PathLike,
    *,
    cluster: ClusterParams = CLUSTER_DEFAULTS,
    client: Any = None,
    voxel_size_um: Sequence[float] | None = None,
    axes: str | None = None,
    detection: DetectionParams | None = None,
    linking: LinkingParams | None = None,
    progress: ProgressCallback | None = None,
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
    detection, linking : DetectionParams, LinkingParams, optional
        As for :func:`tracker.pipeline.track_stack` (defaults: the model's).
    progress : callable, optional
        ``progress(stage, done, total)``: detection as frames complete on the workers, then the linker's stages.

    Returns
    -------
    TrackingResult
        Equal to :func:`tracker.pipeline.track_stack`'s for the same stack and parameters (the tracks: unless
        linked in time blocks); ``timings`` has ``detect`` (cluster start excluded) and ``link``.

    Raises
    ------
    InputError, ValueError, RuntimeError
        One line: see :func:`tracker.distributed.detection.detect_on_cluster` and
        :func:`tracker.distributed.cluster.dask_client`.
    """
    detection = DetectionParams() if detection is None else detection
    linking = LinkingParams() if linking is None else linking
    source = FrameSource.of(path, voxel_size_um, axes)
    stack = source.open()  # (on the client: a bad file is one line before any cluster starts)
    with contextlib.ExitStack() as context:
        if client is None:
            client = context.enter_context(dask_client(cluster))
        timings = {}
        start = time.perf_counter()
        detections, spot_scale = detect_on_cluster(client, source, detection, progress)
        timings["detect"] = time.perf_counter() - start
        start = time.perf_counter()
        if cluster.link_block_frames is None:
            tracks, summary = link_detections(detections, progress=progress, return_summary=True,
                                              **linking.to_dict())
        else:
            tracks, summary = link_in_time_blocks(client, detections, linking, cluster.link_block_frames,
                                                  progress=progress)
        timings["link"] = time.perf_counter() - start
    return TrackingResult(detections, tracks, stack.voxel_size, timings, summary, spot_scale)
