"""Review sessions: the reviewed tracks with their whole edit history, in one file beside the tracks file.

``tracks.csv`` -> ``tracks.review.json``: every row of the edit model (deleted ones too, with the ``alive``
mask), the undo and redo history (each edit's changed cells), the forbidden links, the ``pinned`` and
``reviewed`` flags (columns), the run's parameters and where the review was (queue order, the link under
review, the colour mode). Opening the tracks file again (our reader) restores it all: undo goes on where it
stopped. Columns and the history's cells are stored as base64 of their little-endian bytes (exact, NaN
included, a 100k-point session in about 0.1 s); the rest is plain JSON. No napari, no Qt.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._edits import Edit, TrackEdits

SESSION_SUFFIX = ".review.json"
FORMAT = "tracker3d-review-session"
VERSION = 1


def session_path(tracks_path: str | Path) -> Path:
    """The session file of a tracks file: ``tracks.csv`` -> ``tracks.review.json``."""
    path = Path(tracks_path)
    return path.with_name(path.stem + SESSION_SUFFIX)


def _array(values: np.ndarray) -> dict[str, Any]:
    values = np.ascontiguousarray(values)
    return {"dtype": values.dtype.newbyteorder("<").str, "shape": list(values.shape),
            "data": base64.b64encode(values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes()).decode()}


def _from_array(entry: Mapping[str, Any]) -> np.ndarray:
    data = np.frombuffer(base64.b64decode(entry["data"]), dtype=np.dtype(entry["dtype"]))
    return data.reshape(entry["shape"]).astype(np.dtype(entry["dtype"]).newbyteorder("="))


def _edit(edit: Edit) -> dict[str, Any]:
    return {"description": edit.description, "selection": list(edit.selection), "forbid": edit.forbid,
            "changes": [{"column": name, "rows": _array(rows), "old": _array(old), "new": _array(new)}
                        for name, rows, old, new in edit.changes]}


def _from_edit(entry: Mapping[str, Any]) -> Edit:
    return Edit(entry["description"], selection=tuple(entry["selection"]),
                forbid=[(int(a), int(b)) for a, b in entry["forbid"]],
                changes=[(c["column"], _from_array(c["rows"]), _from_array(c["old"]), _from_array(c["new"]))
                         for c in entry["changes"]])


def save_session(path: str | Path, edits: TrackEdits, state: Mapping[str, Any] | None = None) -> Path:
    """Write ``edits`` (rows, history, forbidden links) and ``state`` (JSON-able: parameters, queue order, ...)
    to ``path``, replacing it atomically (a crash leaves the previous session)."""
    from tracker.io import write_text

    # (the edit model's own fields: the session is its saved form)
    document = {
        "format": FORMAT, "version": VERSION, "n_rows": edits.n_rows, "next_id": edits._next_id,
        "columns": {name: _array(edits.column(name)) for name in edits.column_names},
        "alive": _array(edits.column("alive")),
        "forbidden": sorted([int(a), int(b)] for a, b in edits.forbidden),
        "undo": [_edit(e) for e in edits._undo], "redo": [_edit(e) for e in edits._redo],
        "n_edits": edits.n_edits, "state": dict(state or {}),
    }
    path = Path(path)
    write_text(path, json.dumps(document, default=_plain), overwrite=True)
    return path


def load_session(path: str | Path) -> tuple[TrackEdits, dict[str, Any]]:
    """The edit model and the state saved by :func:`save_session` (ValueError: not a session file)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the review session {path}: {error}") from error
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path} is not a review session of this plugin")
    if document.get("version", 0) > VERSION:
        raise ValueError(f"{path} was written by a newer version of the plugin (session format "
                         f"{document['version']})")
    columns = {name: _from_array(entry) for name, entry in document["columns"].items()}
    edits = TrackEdits(columns)
    edits._alive[:] = _from_array(document["alive"])
    edits._next_id = int(document["next_id"])
    edits._undo = [_from_edit(e) for e in document["undo"]]
    edits._redo = [_from_edit(e) for e in document["redo"]]
    edits.forbidden = {(int(a), int(b)) for a, b in document["forbidden"]}
    edits.version = len(edits._undo) + len(edits._redo)  # (an edited model: was_edited sees it)
    edits._cache.clear()
    return edits, dict(document.get("state", {}))


def _plain(value: Any) -> Any:
    """JSON for NumPy scalars and tuples in the state."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot save {type(value).__name__} in a review session")
