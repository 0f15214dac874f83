"""How ``track run --link-blocks`` writes its tracks (and ``--detections``): block by block into one CSV or
Parquet file each (the tracks also into a GEFF group: :mod:`tracker.io.geff_blocks`), atomically, as they reach the client one time block at a time
(:func:`tracker.distributed.time_blocks.stream_time_blocks`), so that the client never holds them all.

:mod:`tracker.io` (:mod:`tracker.io.table_blocks`) is imported when a file is written (the core, this package
included, does not import it otherwise). The file is the one :func:`tracker.io.write_table` writes (the same
columns, the same CSV text of each row), but its rows come in time order, block after block, rather than sorted
by track: the readers sort them (:func:`tracker.io.read_tracks`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..params import ClusterParams
from ..tables import Table

if TYPE_CHECKING:
    from ..io.geff_blocks import GeffBlockWriter
    from ..io.table_blocks import TableBlockWriter

LINK_COLUMNS = ("track_id", "link_cost", "link_confidence")
"""The columns linking adds to the detections (a block's tracks less these are its detections)."""


STREAMED_FORMATS = ("csv", "parquet", "geff")
"""Track formats written block by block. TrackMate XML and ISBI XML are not: both group a track's points (its
edges; its detections) in one element, and a track spans any number of blocks, so no track is complete before
the last block; TrackMate's track features (duration, number of spots, ...) need the whole track too. They are
written at the end from the tracks put together (write CSV, Parquet or GEFF for stacks whose tracks do not fit
in the client's memory, and convert them where they do: ``track convert``)."""


def streams_tracks(cluster: ClusterParams, output: str | os.PathLike, output_format: str | None) -> bool:
    """Whether ``track run`` writes its tracks block by block: linked in time blocks, to a CSV, Parquet or GEFF
    file (:data:`STREAMED_FORMATS`; the others are written at the end)."""
    from ..io import track_format
    from ..io.tables import is_parquet

    if cluster.link_block_frames is None:
        return False
    kind = track_format(output, output_format)
    return kind == "geff" or kind in ("csv", "parquet") and (kind == "parquet") == is_parquet(output)


class TrackSink:
    """The sink of ``track run --link-blocks``: each block's tracks to the tracks file (less the ``_vox``
    columns, as ``track run`` writes them) and, if asked, its detections to the detections file.

    Attributes
    ----------
    n_points : int
        Rows written so far.
    n_tracks : int
        Tracks so far (ids are 0, 1, … by first appearance, so one more than the largest id).
    parameters : mapping or None
        The run's parameters, for a GEFF file's metadata (set before the files are finished).
    """

    def __init__(self, tracks: TableBlockWriter | GeffBlockWriter, detections: TableBlockWriter | None):
        self.tracks, self.detections = tracks, detections
        self.n_points = 0
        self.n_tracks = 0

    @property
    def parameters(self) -> Mapping[str, Any] | None:
        return getattr(self.tracks, "parameters", None)

    @parameters.setter
    def parameters(self, value: Mapping[str, Any] | None) -> None:
        if hasattr(self.tracks, "parameters"):
            self.tracks.parameters = value

    def __call__(self, block: Table) -> None:
        self.tracks.write({k: v for k, v in block.items() if not k.endswith("_vox")})
        if self.detections is not None:
            self.detections.write({k: v for k, v in block.items() if k not in LINK_COLUMNS})
        ids = np.asarray(block["track_id"])
        self.n_points += len(ids)
        self.n_tracks = max(self.n_tracks, int(ids.max()) + 1 if len(ids) else 0)


@contextlib.contextmanager
def streamed_outputs(output: str | os.PathLike, detections: str | os.PathLike | None,
                     overwrite: bool = False, output_format: str | None = None) -> Iterator[TrackSink]:
    """A :class:`TrackSink` writing to ``output`` (a CSV or Parquet file, or a GEFF group: ``output_format`` or
    the extension) and ``detections``; both appear, whole, only when the body returns (an error leaves nothing,
    and an existing file untouched).

    Raises
    ------
    InputError
        A file exists (without ``overwrite``) or its folder does not.
    """
    from ..io import track_format
    from ..io.table_blocks import table_blocks

    with contextlib.ExitStack() as files:
        if track_format(output, output_format) == "geff":
            from ..io.geff_blocks import geff_blocks

            tracks = files.enter_context(geff_blocks(output, overwrite))
        else:
            tracks = files.enter_context(table_blocks(output, overwrite))
        found = None if detections is None else files.enter_context(table_blocks(detections, overwrite))
        yield TrackSink(tracks, found)
