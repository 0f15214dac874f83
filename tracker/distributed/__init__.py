"""Tracking on a Dask cluster (the optional ``[distributed]`` extra): ``track run --workers N``, ``--scheduler
ADDRESS``, ``--gpus``.

A layer over the core, like :mod:`tracker.io` (which it uses: the workers open the stack by its path). The
frames of a Zarr / OME-Zarr or TIFF stack are read and detected on the workers, one pure task per frame
(:mod:`.detection`); the client holds the detections only, and links them as a single-process run does
(:mod:`.pipeline`), so the tracks are identical. ``distributed`` is imported only when a cluster is used.
"""

from .cluster import dask_client, wanted
from .detection import detect_on_cluster
from .frame_source import FrameSource
from .pipeline import track_on_cluster

__all__ = ["FrameSource", "dask_client", "detect_on_cluster", "track_on_cluster", "wanted"]
