"""Tracks written into a GEFF group block by block, atomically.

For tracks that reach the writer in time order, one block of frames at a time, and are never whole in memory
(``track run --link-blocks``: :func:`tracker.distributed.time_blocks.stream_time_blocks`). The group holds the
graph that :func:`tracker.io.geff.write_geff` writes for the whole table: the same nodes with the same
properties, the same links with the same properties, the same metadata (axes with their extent, properties,
the run's parameters). Only the node ids differ: here they number the points in time order (there, by track),
which no reader relies on (:func:`tracker.io.geff.read_geff` gives the same table).

A point's link comes from the previous point of its track: the blocks come in time order and a track's points
in frame order, so that is the track's last point written. The writer keeps that point's id for every track
(8 bytes per track, not per point) and appends each block's nodes and edges to the group's arrays (chunks of
:data:`CHUNK_ROWS` rows).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..tables import Table, spatial_axes
from .geff import _geff, atomic_directory, geff_metadata, graph_props

CHUNK_ROWS = 1 << 20
"""Rows per chunk of each array (8 MiB of float64, as geff's own writer aims at)."""


class GeffBlockWriter:
    """One GEFF group written block by block into ``folder`` (see :func:`geff_blocks`, which moves it into place).

    Attributes
    ----------
    parameters : mapping or None
        The run's parameters, stored in the metadata when the group is finished (they may be set until then:
        ``track run`` knows the estimated ones only at the end).
    n_nodes, n_edges : int
        Points and links written so far.
    """

    def __init__(self, folder: Path, zarr_format: int = 2):
        import zarr

        _geff()
        self.root = zarr.open_group(str(folder), mode="w", zarr_format=zarr_format)
        self.folder = folder
        self.parameters: Mapping[str, Any] | None = None
        self.n_nodes = 0
        self.n_edges = 0
        self._last = np.full(0, -1, dtype=np.int64)  # (each track's last node id so far; -1: none yet)
        self._arrays: dict[str, Any] = {}
        self._props: tuple[dict, dict] | None = None  # (the first block's node and edge properties: dtypes)
        self._extent: dict[str, tuple[float, float]] = {}
        self._axes: tuple[str, ...] = ()

    def write(self, block: Table) -> None:
        """Append a block's points (the tracks of the next frames, in frame order, with ``track_id`` numbered by
        first appearance and the link's columns, as :func:`tracker.linking.link_detections` gives them)."""
        table = {str(name): np.asarray(column) for name, column in block.items()}
        missing = [name for name in ("track_id", "frame", "y", "x") if name not in table]
        if missing:
            raise InputError(f"tracks are missing column(s): {', '.join(missing)}")
        track_id = table["track_id"].astype(np.int64)
        ids = self.n_nodes + np.arange(len(track_id), dtype=np.int64)
        source, target = self._links(track_id, ids)
        node_props, edge_props = graph_props(table, target - self.n_nodes)
        if self._props is None:
            self._start(table, node_props, edge_props)
        elif [*node_props, *edge_props] != [*self._props[0], *self._props[1]]:
            raise ValueError(f"a block's columns differ from the first block's: {[*node_props, *edge_props]}")
        self._append("nodes/ids", ids.astype(np.uint64))
        for name, values in node_props.items():
            self._append(f"nodes/props/{name}/values", values)
        self._append("edges/ids", np.column_stack([source, target]).astype(np.uint64).reshape(-1, 2))
        for name, values in edge_props.items():
            self._append(f"edges/props/{name}/values", values)
        for name in ("t", *self._axes):
            values = node_props[name]
            if len(values):
                low, high = self._extent.get(name, (np.inf, -np.inf))
                self._extent[name] = (min(low, values.min().item()), max(high, values.max().item()))
        self.n_nodes += len(ids)
        self.n_edges += len(source)

    def finish(self) -> None:
        """Write the metadata (with the axes' extent and :attr:`parameters`) and check the group's structure."""
        from geff import validate_structure

        if self._props is None:  # (no block: the empty graph)
            self.write({"track_id": np.empty(0, np.int64), "frame": np.empty(0, np.int64),
                        **{a: np.empty(0) for a in "zyx"}})
        metadata = geff_metadata(self._axes, *self._props, self.parameters)
        for axis in metadata.axes:
            if axis.name in self._extent:
                axis.min, axis.max = self._extent[axis.name]
        metadata.write(str(self.folder))
        validate_structure(str(self.folder))

    def _links(self, track_id: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The node ids ``(source, target)`` of the links into a block's points, and each track's last node kept."""
        if len(track_id) and track_id.min() < 0:
            raise InputError("tracks: a track id is negative")
        if len(track_id) and track_id.max() >= len(self._last):
            grown = np.full(max(2 * len(self._last), int(track_id.max()) + 1), -1, dtype=np.int64)
            grown[:len(self._last)] = self._last
            self._last = grown
        order = np.argsort(track_id, kind="stable")  # (each track's points of this block, in frame order)
        tracks, ordered_ids = track_id[order], ids[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = tracks[1:] != tracks[:-1]
        before = np.empty(len(order), dtype=np.int64)
        before[first] = self._last[tracks[first]]  # (a track's first point here: its last one written before)
        before[~first] = ordered_ids[:-1][~first[1:]]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = first[1:]
        self._last[tracks[last]] = ordered_ids[last]
        linked = before >= 0
        return before[linked], ordered_ids[linked]

    def _start(self, table: Table, node_props: dict, edge_props: dict) -> None:
        for name, values in {**node_props, **edge_props}.items():
            if np.asarray(values).dtype.kind not in "biuf":
                raise InputError(f"tracks: column {name!r} is not numeric; GEFF is written block by block only "
                                 "with numeric columns (write a CSV or Parquet file, then convert it)")
        self._axes = spatial_axes(table)
        self._props = ({k: np.asarray(v)[:0] for k, v in node_props.items()},
                       {k: np.asarray(v)[:0] for k, v in edge_props.items()})

    def _append(self, path: str, values: np.ndarray) -> None:
        array = self._arrays.get(path)
        if array is None:
            array = self._arrays[path] = self.root.create_array(
                path, shape=(0, *values.shape[1:]), dtype=values.dtype, chunks=(CHUNK_ROWS, *values.shape[1:]))
        if len(values):
            array.append(values.astype(array.dtype, copy=False), axis=0)


@contextlib.contextmanager
def geff_blocks(path: str | os.PathLike, overwrite: bool = False, zarr_format: int = 2) -> Iterator[GeffBlockWriter]:
    """A :class:`GeffBlockWriter` for the GEFF group ``path``; the group appears, whole, only when the body
    returns (an error leaves nothing, and an existing group untouched).

    Raises
    ------
    InputError
        ``path`` exists (without ``overwrite``) or its folder does not; geff is not installed.
    """
    _geff()
    with atomic_directory(path, overwrite) as folder:
        writer = GeffBlockWriter(folder, zarr_format)
        yield writer
        writer.finish()
