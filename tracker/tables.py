"""Tables: plain ``dict[str, numpy.ndarray]`` of equal-length 1-D columns.

Like ``skimage.measure.regionprops_table``, every table in this package is a
dictionary of columns, so ``pandas.DataFrame(table)`` works without pandas
being a dependency. These helpers keep the few operations the pipeline needs
in one place.

Standard columns
----------------
detections : ``frame`` (int), ``z, y, x`` (float, micrometres),
    ``intensity`` (float, counts above background), ``quality`` (float,
    filter response), optionally ``z_vox, y_vox, x_vox`` (voxels).
tracks : detections columns plus ``track_id`` (int) and optionally
    ``link_cost`` (µm², cost of the link *into* this point, NaN at a start)
    and ``link_confidence`` (0..1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

Table = dict[str, np.ndarray]

DETECTION_COLUMNS = ("frame", "z", "y", "x", "intensity", "quality")
TRACK_COLUMNS = ("track_id", "frame", "z", "y", "x")


def table_length(table: Mapping[str, np.ndarray]) -> int:
    """Number of rows; raises ``ValueError`` if columns differ in length."""
    lengths = {len(column) for column in table.values()}
    if len(lengths) > 1:
        raise ValueError(f"table columns have different lengths: {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def require_columns(table: Mapping[str, np.ndarray], columns: Iterable[str], what: str = "table") -> None:
    """Raise ``ValueError`` naming every missing column."""
    missing = [c for c in columns if c not in table]
    if missing:
        raise ValueError(f"{what} is missing column(s): {', '.join(missing)}")


def take_rows(table: Mapping[str, np.ndarray], index: np.ndarray) -> Table:
    """Rows selected by an integer index or boolean mask, as a new table."""
    index = np.asarray(index)
    if index.dtype.kind in "iu":  # (np.take: faster than fancy indexing, the same rows)
        return {name: np.take(np.asarray(column), index, axis=0) for name, column in table.items()}
    return {name: np.asarray(column)[index] for name, column in table.items()}


def sort_table(table: Mapping[str, np.ndarray], keys: Sequence[str]) -> Table:
    """Stable sort by ``keys`` (first key is the primary one)."""
    if table_length(table) == 0:
        return dict(table)
    if len(keys) == 1:
        order = stable_argsort(np.asarray(table[keys[0]]))
    else:
        order = np.lexsort([np.asarray(table[k]) for k in reversed(keys)])
    return take_rows(table, order)


def stable_argsort(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")``, faster for integers of a small range (frames, component labels).

    NumPy's stable sort is a radix sort for 16-bit integers (8k values: 27 µs, against 310 µs for a stable
    sort of int32 and 240 µs for an unstable one; 180k frame numbers: 0.56 against 5.3 ms), so integers are
    sorted by the 16-bit digits of ``values - min``, least significant first, each pass stable: the same
    permutation. Other values go to NumPy's stable sort.
    """
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or values.size == 0:
        return np.argsort(values, kind="stable")
    if values.dtype.itemsize <= 2 and values.dtype.kind in "ub":
        return np.argsort(values, kind="stable")
    low, high = int(values.min()), int(values.max())
    if high - low >= 1 << 48:  # (more than three passes)
        return np.argsort(values, kind="stable")
    offset = values.astype(np.int64) - low
    order = None
    for shift in range(0, max(high - low, 1).bit_length(), 16):
        digit = ((offset >> shift) & 0xFFFF).astype(np.uint16)
        order = np.argsort(digit, kind="stable") if order is None else order[np.argsort(digit[order], kind="stable")]
    return order


def concat_tables(tables: Sequence[Mapping[str, np.ndarray]], columns: Sequence[str] | None = None) -> Table:
    """Concatenate tables row-wise over ``columns`` (default: the first table's)."""
    if columns is None:
        if not tables:
            return {}
        columns = list(tables[0])
    return {c: np.concatenate([np.asarray(t[c]) for t in tables]) if tables else np.empty(0) for c in columns}


def empty_detections() -> Table:
    """A detections table with no rows and the standard dtypes."""
    table: Table = {"frame": np.empty(0, dtype=np.int64)}
    for name in DETECTION_COLUMNS[1:]:
        table[name] = np.empty(0, dtype=np.float64)
    return table


def spatial_axes(table: Mapping[str, np.ndarray]) -> tuple[str, ...]:
    """The position columns of a table: ``("z", "y", "x")``, or ``("y", "x")`` for 2D data (no ``z`` column)."""
    return ("z", "y", "x") if "z" in table else ("y", "x")


def positions_um(table: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(n, d)`` float64 array of the positions in micrometres: ``z, y, x`` (d = 3) or ``y, x`` (2D tables)."""
    axes = spatial_axes(table)
    return np.column_stack([np.asarray(table[c], dtype=np.float64) for c in axes]).reshape(-1, len(axes))
