"""Tables as CSV: written atomically, read back with their column types.

A table is a ``dict`` of equal-length columns (:mod:`tracker.tables`). Floats are
written with 9 significant digits (sub-nanometre for µm); ``frame``, ``track_id``
and ``parent_track_id`` read back as int64, ``visible`` as bool.
"""

from __future__ import annotations

import csv
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..tables import Table, require_columns, table_length
from ._atomic import atomic_path

_INTEGER_COLUMNS = {"frame", "track_id", "parent_track_id"}
_BOOLEAN_COLUMNS = {"visible"}


def write_table(path: str | os.PathLike, table: Mapping[str, np.ndarray], overwrite: bool = False) -> None:
    """Write a table as CSV with a header row, atomically.

    Floats are written with 9 significant digits (sub-nanometre for µm).
    """
    n = table_length(table)
    names = list(table)
    columns = []
    for name in names:
        column = np.asarray(table[name])
        if column.dtype.kind == "f":
            columns.append([f"{v:.9g}" for v in column.tolist()])
        elif column.dtype.kind == "b":
            columns.append(["1" if v else "0" for v in column.tolist()])
        else:
            columns.append([str(v) for v in column.tolist()])
    with atomic_path(path, overwrite) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        writer.writerows(zip(*columns) if n else [])


def _parse_numbers(values: list[str]) -> np.ndarray:
    """Strings to float64 (empty cells → NaN); ``ValueError`` if any is not a number."""
    try:
        return np.asarray(values, dtype=np.float64)  # NumPy parses in C; spaces around numbers are fine
    except ValueError:
        return np.array([float(v) if v.strip() else np.nan for v in values], dtype=np.float64)


def read_table(path: str | os.PathLike, required: Iterable[str] = ()) -> Table:
    """Read a CSV table written by :func:`write_table` (or by hand, or by pandas).

    Columns that parse as numbers become float64, except ``frame`` and
    ``track_id`` (int64) and ``visible`` (bool); others stay strings. An
    unnamed leading index column (as pandas writes it) is dropped.

    Raises
    ------
    InputError
        If the file is missing, not CSV, has ragged rows, non-numeric values
        in a required column, or lacks a ``required`` column.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    table = _read_numeric_table(path, required)
    if table is not None:
        return table
    try:
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
    except (UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"{path}: not a readable CSV file ({error})") from None
    if not rows:
        raise InputError(f"{path}: empty file (expected a header row)")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if r]
    if header and header[0] == "":
        header, body = header[1:], [r[1:] for r in body]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(f"{path}: line {number} has {len(row)} fields, the header has {len(header)}")
    required = list(required)
    try:
        require_columns(dict.fromkeys(header), required, what=str(path))
    except ValueError as error:
        raise InputError(str(error)) from None
    table: Table = {}
    for index, name in enumerate(header):
        values = [row[index] for row in body]
        try:
            column = _parse_numbers(values)
        except ValueError:
            if name in required:
                raise InputError(f"{path}: column {name!r} has non-numeric values") from None
            table[name] = np.array([v.strip() for v in values], dtype=object)
            continue
        table[name] = _typed_column(path, name, column)
    return table


def _typed_column(path: Path, name: str, column: np.ndarray) -> np.ndarray:
    """A parsed float64 column as its table type: int64 ``frame``/``track_id``, bool ``visible``."""
    if name in _INTEGER_COLUMNS:
        if not np.all(np.isfinite(column)) or np.any(column != np.round(column)):
            raise InputError(f"{path}: column {name!r} must hold whole numbers")
        return column.astype(np.int64)
    if name in _BOOLEAN_COLUMNS:
        return column.astype(bool)
    return column


def _read_numeric_table(path: Path, required: Iterable[str]) -> Table | None:
    """The fast path of :func:`read_table`: a plain CSV of numbers only, parsed in C by ``np.loadtxt``.

    None when the file is anything else (quotes, strings, empty cells, ragged rows, an index column):
    the general parser then reads it and reports what is wrong.
    """
    try:
        with open(path, newline="") as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": a header-only file
            header = next(csv.reader([handle.readline()]), [])
            data = np.loadtxt(handle, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except (ValueError, UnicodeDecodeError, csv.Error):
        return None
    header = [h.strip() for h in header]
    if not header or "" in header or len(set(header)) != len(header):
        return None
    if data.size == 0:
        data = data.reshape(0, len(header))
    if data.shape[1] != len(header) or not set(required) <= set(header):
        return None
    return {name: _typed_column(path, name, np.ascontiguousarray(data[:, i])) for i, name in enumerate(header)}
