"""Tables as CSV or Parquet, read and written through pyarrow, with one-line errors.

A table is a ``dict`` of equal-length columns (:mod:`tracker.tables`). The file
format follows the extension: ``.parquet`` / ``.pq`` are Parquet (columns keep
their types and full precision), anything else is CSV. CSV floats are written
with 9 significant digits (sub-nanometre for µm), booleans as 1/0. Reading
sniffs the delimiter (``,``, ``;`` or tab, with a decimal comma beside ``;``)
and skips a UTF-8 byte-order mark; ``frame``, ``track_id`` and
``parent_track_id`` read back as int64, ``visible`` as bool, other numeric
columns as float64, the rest as strings. pyarrow parses and formats in C: a
200k-row, 9-column tracks CSV, ours or pandas', reads in about 0.05 s and is
written in about 0.13 s, against 0.09-2 s and 0.74 s for the Python parser and
writer this replaced (``benchmarks/tables_bench.py``, one shared 2-core machine).
"""

from __future__ import annotations

import csv
import itertools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..tables import Table, require_columns, table_length
from ._atomic import atomic_path
from .tiff import _short

_INTEGER_COLUMNS = {"frame", "track_id", "parent_track_id"}
_BOOLEAN_COLUMNS = {"visible"}
PARQUET_SUFFIXES = (".parquet", ".pq")
_DELIMITERS = {",": "','", ";": "';'", "\t": "tab"}
_SIGNIFICANT_DIGITS = 9
_HEAD_BYTES = 1 << 16


def is_parquet(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a Parquet file (by its extension)."""
    return Path(path).suffix.lower() in PARQUET_SUFFIXES


def write_table(path: str | os.PathLike, table: Mapping[str, Any], overwrite: bool = False) -> None:
    """Write a table as CSV with a header row (or as Parquet, by the extension), atomically.

    Parameters
    ----------
    path : path
        ``.parquet`` or ``.pq``: Parquet; otherwise CSV.
    table : mapping of str to 1-D arrays
        Equal-length columns (a ``dict`` of arrays or a pandas DataFrame).
    overwrite : bool
        Replace an existing file.

    Raises
    ------
    InputError
        If ``path`` exists (without ``overwrite``) or its folder does not.
    """
    import pyarrow.csv

    parquet = is_parquet(path)
    arrow = _to_arrow(table, for_csv=not parquet)
    with atomic_path(path, overwrite) as tmp:
        if parquet:
            import pyarrow.parquet  # imports pandas: only where needed

            pyarrow.parquet.write_table(arrow, tmp)
            return
        _write_csv(arrow, tmp)


CSV_BLOCK_ROWS = 1 << 16
"""Rows per block of a CSV written on several threads (:func:`_write_csv`); tables of at most one block are
written in one call."""


def _write_csv(arrow, path: Path) -> None:
    """Write a pyarrow table as CSV, its blocks of :data:`CSV_BLOCK_ROWS` rows formatted on one thread per core.

    pyarrow formats without the GIL but on one thread per call: a 186k-row, 7-column tracks table (`track link`
    at 10k x 20) took 0.06 s in one call on this 2-core machine. The blocks are formatted in memory, at most one
    per core at a time, and written in order: the file is byte for byte the one a single call writes (the
    header with the first block only).
    """
    import pyarrow
    import pyarrow.csv

    from .._threads import available_cores, thread_pool

    try:  # (a column name that needs quotes: pyarrow's default quoting)
        pyarrow.csv.WriteOptions(quoting_header="none")
        options = {"quoting_header": "none"}
        _check_header(arrow, options)
    except Exception:
        options = {}
    n, cores = arrow.num_rows, available_cores()
    if n <= CSV_BLOCK_ROWS or cores < 2:
        pyarrow.csv.write_csv(arrow, str(path), pyarrow.csv.WriteOptions(**options))
        return

    def formatted(start: int) -> Any:
        sink = pyarrow.BufferOutputStream()
        write = pyarrow.csv.WriteOptions(include_header=start == 0, **options)
        pyarrow.csv.write_csv(arrow.slice(start, CSV_BLOCK_ROWS), sink, write)
        return sink.getvalue()

    pool = thread_pool("csv", cores)
    starts = iter(range(0, n, CSV_BLOCK_ROWS))
    pending = [pool.submit(formatted, start) for start in itertools.islice(starts, cores)]
    with open(path, "wb") as handle:
        while pending:
            block = pending.pop(0).result()
            start = next(starts, None)
            if start is not None:
                pending.append(pool.submit(formatted, start))
            handle.write(block)


def _check_header(arrow, options: dict) -> None:
    """Raise if pyarrow cannot write the header of ``arrow`` unquoted (a name with a comma, quote or newline)."""
    import pyarrow
    import pyarrow.csv

    pyarrow.csv.write_csv(arrow.slice(0, 0), pyarrow.BufferOutputStream(), pyarrow.csv.WriteOptions(**options))


def _to_arrow(table: Mapping[str, Any], for_csv: bool):
    """The table as a ``pyarrow.Table``; for CSV, floats rounded to 9 significant digits and booleans as 1/0."""
    import pyarrow

    columns = {str(name): np.asarray(table[name]) for name in table}
    table_length(columns)
    arrays = {}
    for name, column in columns.items():
        if column.ndim != 1:
            raise InputError(f"column {name!r} must be 1-D, got shape {column.shape}")
        if column.dtype.kind == "f" and for_csv:
            column = round_significant(column, _SIGNIFICANT_DIGITS)
        elif column.dtype.kind == "b" and for_csv:
            column = column.astype(np.uint8)
        elif column.dtype.kind in "OUS":
            column = column.astype(str)
        if column.dtype.kind in "iuf":
            arrays[name] = _numpy_to_arrow(column)
        else:
            arrays[name] = pyarrow.array(column)
    return pyarrow.table(arrays)


# pyarrow's own NumPy conversions (``pyarrow.array``, ``Array.to_numpy``, Python scalars) import pandas on first
# use: 0.1-0.3 s of every ``track link`` (measured 0.09 s on a quiet 2-core machine, 10k x 20). Numeric columns
# go through their buffers instead, bit for bit the same values (NaN stays NaN, not null).


def _numpy_to_arrow(column: np.ndarray):
    """A 1-D numeric NumPy array as a pyarrow Array sharing its buffer (no nulls)."""
    import pyarrow

    column = np.ascontiguousarray(column)
    return pyarrow.Array.from_buffers(pyarrow.from_numpy_dtype(column.dtype), len(column),
                                      [None, pyarrow.py_buffer(column)])


def _arrow_to_numpy(array, kind: str) -> np.ndarray:
    """A pyarrow integer or floating (``kind="f"``: as float64) or boolean (``kind="b"``) Array as NumPy: nulls as
    NaN / False."""
    import pyarrow.types as types

    n, offset = len(array), array.offset
    validity, data = array.buffers()[:2]

    def bits(buffer) -> np.ndarray:
        return np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")[offset:offset + n].astype(bool)

    if kind == "b":
        values = bits(data) if n else np.zeros(0, dtype=bool)
        return values & bits(validity) if array.null_count else values
    code = "f" if types.is_floating(array.type) else "i" if types.is_signed_integer(array.type) else "u"
    dtype = np.dtype(f"{code}{array.type.bit_width // 8}")
    values = (np.frombuffer(data, dtype, count=n, offset=dtype.itemsize * offset).astype(np.float64) if n
              else np.zeros(0))
    if array.null_count:
        values[~bits(validity)] = np.nan
    return values


def round_significant(values: np.ndarray, digits: int) -> np.ndarray:
    """``values`` rounded to ``digits`` significant digits, as the nearest float64 (NaN, inf and 0 kept).

    The nearest double to a decimal of at most 15 digits prints back as that decimal in its shortest form,
    so pyarrow then writes what ``f"{v:.9g}"`` would, without formatting each number in Python. Scaling
    is by exact powers of ten (10**k is exact for k <= 22, so for values above 1e-14), multiplying or
    dividing so that the scale itself is never an inexact negative power.
    """
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log10(np.abs(values)))  # -inf for 0, NaN for NaN
    decimals = np.nan_to_num(digits - 1 - exponent, nan=0.0, posinf=0.0, neginf=0.0).astype(np.int64)
    scale = _POWERS_OF_TEN[np.minimum(np.abs(decimals), len(_POWERS_OF_TEN) - 1)]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(decimals >= 0, np.round(values * scale) / scale, np.round(values / scale) * scale)


_POWERS_OF_TEN = 10.0 ** np.arange(309)


def read_table(path: str | os.PathLike, required: Iterable[str] = ()) -> Table:
    """Read a CSV or Parquet table (written by :func:`write_table`, pandas, a spreadsheet or by hand).

    Parameters
    ----------
    path : path
        ``.parquet`` / ``.pq``: Parquet; otherwise CSV with a header row, delimited by ``,``, ``;`` or
        tab (a UTF-8 byte-order mark is skipped; beside ``;``, a decimal comma is understood).
    required : iterable of str
        Columns that must be present and numeric.

    Returns
    -------
    dict of str to numpy.ndarray
        Numeric columns as float64, except ``frame``, ``track_id`` and ``parent_track_id`` (int64) and
        ``visible`` (bool); others as strings (object arrays). Empty cells are NaN. An unnamed leading
        index column (as pandas writes it) is dropped.

    Raises
    ------
    InputError
        If the file is missing, not CSV (or Parquet), has ragged rows, non-numeric values in a required
        column, or lacks a ``required`` column.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    arrow = _read_parquet(path) if is_parquet(path) else _read_csv(path)
    return _columns(path, arrow, list(required))


def _read_parquet(path: Path):
    import pyarrow.parquet

    try:
        return pyarrow.parquet.read_table(path)
    except Exception as error:  # pyarrow raises ArrowInvalid, OSError, ...
        raise InputError(f"{path}: not a readable Parquet file ({_short(error)})") from None


def _read_csv(path: Path):
    import pyarrow
    import pyarrow.csv

    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
    text = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    if not text.strip():
        raise InputError(f"{path}: empty file (expected a header row)")
    if b"\x00" in text:
        raise InputError(f"{path}: not a readable CSV file (binary data)")
    lines = text.decode("utf-8", errors="replace").splitlines()
    delimiter = _sniff_delimiter(path, lines[0])
    decimal = "," if delimiter != "," and len(lines) > 1 and re.search(r"\d,\d", lines[1]) else "."
    parse = pyarrow.csv.ParseOptions(delimiter=delimiter)
    convert = pyarrow.csv.ConvertOptions(null_values=[""], strings_can_be_null=False, decimal_point=decimal,
                                         quoted_strings_can_be_null=False)
    try:
        return pyarrow.csv.read_csv(path, parse_options=parse, convert_options=convert)
    except pyarrow.ArrowInvalid as error:
        message = str(error)
        if "Expected" in message and "columns" in message:
            raise InputError(_ragged_row_message(path, delimiter)) from None
        if "UTF8" in message or "UTF-8" in message:
            raise InputError(f"{path}: not UTF-8 text (save the table as UTF-8 CSV)") from None
        if "Empty CSV file" in message:
            raise InputError(f"{path}: empty file (expected a header row)") from None
        raise InputError(f"{path}: not a readable CSV file ({_short(error)})") from None


def _sniff_delimiter(path: Path, header: str) -> str:
    """The delimiter of a CSV header line: the most frequent of ``,``, ``;`` and tab.

    A header with none of them is one column, unless it holds spaces or ``|`` between names, which no
    reader should guess at: that is an error naming what was found.
    """
    counts = {delimiter: header.count(delimiter) for delimiter in _DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    if counts[best]:
        return best
    if re.search(r"\S[ |]+\S", header.strip()):
        found = "'|'" if "|" in header else "spaces"
        raise InputError(f"{path}: the header line {header.strip()[:60]!r} is separated by {found}; "
                         "expected ',', ';' or tab")
    return ","


def _ragged_row_message(path: Path, delimiter: str) -> str:
    """The first row whose number of fields differs from the header's (read again, on the error path only)."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
        rows = csv.reader(handle, delimiter=delimiter)
        header = next(rows, [])
        for number, row in enumerate(rows, start=2):
            if row and len(row) != len(header):
                return f"{path}: line {number} has {len(row)} fields, the header has {len(header)}"
    return f"{path}: rows with differing numbers of fields"


def _columns(path: Path, arrow, required: list[str]) -> Table:
    """The columns of a pyarrow table as numpy arrays of the table types (see :func:`read_table`)."""
    names = [str(name) for name in arrow.column_names]
    columns = list(arrow.columns)
    if names and names[0].strip() in ("", "Unnamed: 0"):  # pandas' index column
        names, columns = names[1:], columns[1:]
    names = [name.strip() for name in names]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InputError(f"{path}: duplicate column name(s): {', '.join(duplicates)}")
    try:
        require_columns(dict.fromkeys(names), required, what=str(path))
    except ValueError as error:
        raise InputError(str(error)) from None
    table: Table = {}
    for name, column in zip(names, columns):
        values = _numeric(column)
        if values is None:
            if name in required:
                raise InputError(f"{path}: column {name!r} has non-numeric values")
            try:
                strings = column.cast("string").to_pylist()
            except ValueError:  # pyarrow.ArrowInvalid: bytes that are not UTF-8
                raise InputError(f"{path}: column {name!r} is not UTF-8 text (save the table as UTF-8)") from None
            table[name] = np.array([("" if s is None else s).strip() for s in strings], dtype=object)
            continue
        table[name] = _typed_column(path, name, values)
    return table


def _numeric(column) -> np.ndarray | None:
    """A pyarrow column as float64 (nulls as NaN; bool kept), or None if it does not hold numbers."""
    import pyarrow
    import pyarrow.types as types

    kind = column.type
    if isinstance(column, pyarrow.ChunkedArray):
        column = column.combine_chunks()
    if types.is_boolean(kind):
        return _arrow_to_numpy(column, "b")
    if types.is_null(kind):
        return np.full(len(column), np.nan)
    if types.is_integer(kind) or types.is_floating(kind):  # (by their buffers: a cast imports pyarrow.compute)
        return _arrow_to_numpy(column, "f")
    if types.is_decimal(kind):
        return _arrow_to_numpy(column.cast(pyarrow.float64()), "f")
    if types.is_string(kind) or types.is_large_string(kind):
        strings = np.asarray(column.to_pylist(), dtype=object)
        strings = np.char.strip(strings.astype(str))
        try:  # NumPy parses " 1.5 ", "nan", "inf"; an empty cell is NaN
            return np.where(strings == "", "nan", strings).astype(np.float64)
        except ValueError:
            return None
    return None


def _typed_column(path: Path, name: str, column: np.ndarray) -> np.ndarray:
    """A parsed numeric column as its table type: int64 ``frame``/``track_id``, bool ``visible``, else float64."""
    if name in _INTEGER_COLUMNS:
        if column.dtype != bool and (not np.all(np.isfinite(column)) or np.any(column != np.round(column))):
            raise InputError(f"{path}: column {name!r} must hold whole numbers")
        return column.astype(np.int64)
    if name in _BOOLEAN_COLUMNS:
        return column.astype(bool)
    return column if column.dtype == bool else column.astype(np.float64, copy=False)

