"""tracker: 3D particle tracking for microscopy time-lapses, on the CPU or a CUDA GPU.

The Python API, with pandas DataFrames in and out (:mod:`tracker.api`)::

    import tracker

    stack = tracker.read_stack("stack.tif")           # TIFF, Zarr or OME-Zarr, read frame by frame
    result = tracker.track_stack(stack, spot_radius_um=0.4, max_displacement_um=1.5)
    result.tracks                                      # DataFrame: track_id, frame, z, y, x (µm), ...
    tracker.write_tracks("tracks.geff", result.tracks)  # or .csv, .parquet, .xml (TrackMate), .isbi.xml

These names are imported on first use, so ``import tracker`` stays cheap.
"""

import logging
from typing import Any

__version__ = "0.1.0"

# A library logs and leaves the showing to its application (the command line adds a handler on stderr).
logging.getLogger(__name__).addHandler(logging.NullHandler())

_API = ("detect_stack", "link_detections", "read_stack", "read_tracks", "relink", "track_stack", "write_tracks")

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'tracker' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
