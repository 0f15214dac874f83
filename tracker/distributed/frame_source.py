"""A stack named by its path, which every Dask worker opens and reads itself, one frame at a time.

A :class:`tracker.stack.Stack` holds an open file (a memory map, a Zarr array, a TIFF handle), which is not
sent between processes; a :class:`FrameSource` is its recipe (path, voxel size, axes), a few hundred bytes that
travel with each task. Each worker process opens the stack once (:func:`open_stack`, cached) and reads only the
frames its tasks ask for, so no process, the client included, ever holds the stack.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..stack import Stack


@dataclass(frozen=True)
class FrameSource:
    """A Zarr / OME-Zarr folder, a TIFF file or a folder of TIFFs, by path, as :func:`tracker.io.read_stack` opens it.

    Attributes
    ----------
    path : str
        Absolute path; the workers must see the file under the same path (a shared file system on a cluster).
    voxel_size : (z, y, x) floats, optional
        µm; overrides the file's metadata (as ``--voxel-size``).
    axes : str, optional
        The file's axes (as ``--axes``).
    channel : int, optional
        The channel tracked (as ``--channel``).
    """

    path: str
    voxel_size: tuple[float, float, float] | None = None
    axes: str | None = None
    channel: int | None = None

    @classmethod
    def of(cls, path: str | os.PathLike, voxel_size: Any = None, axes: str | None = None,
           channel: int | None = None) -> FrameSource:
        """The source of ``path`` (made absolute: workers may run in another folder)."""
        return cls(str(Path(path).resolve()), None if voxel_size is None else tuple(float(v) for v in voxel_size),
                   axes, channel)

    def open(self) -> Stack:
        """The stack, opened lazily (nothing but metadata is read); cached per process."""
        return open_stack(self)

    def frame(self, t: int) -> Any:
        """Frame ``t`` as a ``(Z, Y, X)`` array, read now."""
        return self.open().frame(t)


@functools.lru_cache(maxsize=8)
def open_stack(source: FrameSource) -> Stack:
    """:func:`tracker.io.read_stack` of ``source``, once per process (a worker runs many frames of one stack)."""
    from ..io import read_stack

    return read_stack(source.path, voxel_size=source.voxel_size, axes=source.axes, channel=source.channel)
