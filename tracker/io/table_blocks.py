"""Tables written block by block into one CSV or Parquet file, atomically.

For tables that reach the writer in parts and are never whole in memory (the tracks of ``track run
--link-blocks``, one time block at a time). The file holds what :func:`tracker.io.write_table` would write for
the concatenated blocks: the same columns and the same CSV text of each row.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..tables import Table
from ._atomic import atomic_path
from .tables import _to_arrow, is_parquet


class TableBlockWriter:
    """One table written block by block to ``tmp`` (see :func:`table_blocks`, which renames it at the end).

    Parameters
    ----------
    path : path
        The file's final name: ``.parquet`` or ``.pq`` for Parquet, otherwise CSV (as :func:`tracker.io.write_table`).
    tmp : path
        The temporary file written.

    Attributes
    ----------
    rows : int
        Rows written so far.
    """

    def __init__(self, path: str | os.PathLike, tmp: Path):
        self.parquet = is_parquet(path)
        self.tmp = tmp
        self.rows = 0
        self._writer: Any = None
        self._schema: Any = None

    def write(self, table: Table) -> None:
        """Append ``table``'s rows (the first table sets the columns; every other must have the same)."""
        arrow = _to_arrow(table, for_csv=not self.parquet)
        if self._writer is None:
            if self.parquet:
                import pyarrow.parquet

                self._writer = pyarrow.parquet.ParquetWriter(str(self.tmp), arrow.schema)
            else:
                import pyarrow.csv

                self._writer = pyarrow.csv.CSVWriter(str(self.tmp), arrow.schema,
                                                     write_options=pyarrow.csv.WriteOptions(quoting_header="none"))
            self._schema = arrow.schema
        elif arrow.schema != self._schema:
            raise ValueError(f"a block's columns differ from the first block's: {arrow.schema.names} against "
                             f"{self._schema.names}")
        self._writer.write_table(arrow)
        self.rows += arrow.num_rows

    def close(self) -> None:
        """Finish the file (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


@contextlib.contextmanager
def table_blocks(path: str | os.PathLike, overwrite: bool = False) -> Iterator[TableBlockWriter]:
    """A :class:`TableBlockWriter` for ``path``; the file appears, whole, only when the body returns (an error
    leaves nothing, and an existing file untouched).

    Raises
    ------
    InputError
        The file exists (without ``overwrite``) or its folder does not.
    """
    with atomic_path(path, overwrite) as tmp:
        writer = TableBlockWriter(path, tmp)
        try:
            yield writer
        finally:  # (closed before the rename, also on an error)
            writer.close()
