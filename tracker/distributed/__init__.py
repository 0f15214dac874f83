"""Tracking on a Dask cluster (the optional ``[distributed]`` extra): ``track run --workers N``, ``--scheduler
ADDRESS``, ``--gpus``, and ``--link-blocks FRAMES``.

A layer over the core, like :mod:`tracker.io` (which it uses: the workers open the stack by its path). The
frames of a Zarr / OME-Zarr or TIFF stack are read and detected on the workers, one pure task per frame
(:mod:`.detection`); the client holds the detections only, and links them as a single-process run does
(:mod:`.pipeline`), so the tracks are identical; or the workers link time blocks in parallel, stitched at the
boundaries (:mod:`.time_blocks`): then the detections stay on the workers and the client receives the tracks
one block at a time. ``distributed`` is imported only when a cluster is used.
"""

from .cluster import dask_client, wanted
from .detection import FrameTables, detect_frames_on_cluster, detect_on_cluster
from .frame_source import FrameSource
from .pipeline import track_on_cluster
from .time_blocks import LINK_OVERLAP_FRAMES, assemble_tracks, link_in_time_blocks, stream_time_blocks

__all__ = ["LINK_OVERLAP_FRAMES", "FrameSource", "FrameTables", "assemble_tracks", "dask_client",
           "detect_frames_on_cluster", "detect_on_cluster", "link_in_time_blocks", "stream_time_blocks",
           "track_on_cluster", "wanted"]
