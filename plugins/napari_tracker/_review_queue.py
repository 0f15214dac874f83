"""The review queue: every link of the live tracks, the doubtful ones first, and where the reviewer is in it.

A link is named by its target row (the link *into* that point). Orders:

* ``"confidence"``: lowest ``link_confidence`` first (links without one, such as hand-made links of an imported
  table, by highest ``link_cost`` after them);
* ``"ground truth"``: links a ground truth says are wrong first, then by confidence.

Reviewed links (the ``reviewed`` flag of :class:`~napari_tracker._edits.TrackEdits`, set by accepting) are
skipped by :meth:`ReviewQueue.next`. Moving on is one pass over the links' keys (computed once per change of
the model); the sorted order (:meth:`ReviewQueue.links`) is only built when asked for. No napari, no Qt.
"""

from __future__ import annotations

import numpy as np

from ._edits import TrackEdits

ORDERS = ("confidence", "ground truth")


class ReviewQueue:
    """The links of ``edits`` in review order, and the current one.

    Parameters
    ----------
    edits : TrackEdits
    order : one of :data:`ORDERS`
    correct : (live points,) int array, optional
        Ground-truth correctness of the link into each live point, in :meth:`TrackEdits.rows` order
        (``tracker.metrics.link_correctness``: 1 correct, 0 wrong, -1 no link); needed for "ground truth".
    """

    def __init__(self, edits: TrackEdits, order: str = "confidence", correct: np.ndarray | None = None):
        self.edits = edits
        self.current: int | None = None
        self._order = "confidence"
        self._correct = None
        self._cache: tuple[object, np.ndarray] | None = None
        self._keyed: tuple[object, tuple[np.ndarray, np.ndarray]] | None = None
        self.set_order(order, correct)

    @property
    def order(self) -> str:
        return self._order

    def set_order(self, order: str, correct: np.ndarray | None = None) -> None:
        """Order by ``order`` (:data:`ORDERS`); ``correct`` as in the class (kept when None)."""
        if order not in ORDERS:
            raise ValueError(f"order the queue by one of {', '.join(ORDERS)}, not {order!r}")
        if correct is not None:
            self._correct = np.asarray(correct)
        if order == "ground truth" and self._correct is None:
            raise ValueError("load a ground truth to order by disagreement with it")
        self._order = order
        self._cache = self._keyed = None

    def set_correct(self, correct: np.ndarray | None) -> None:
        """New ground-truth correctness (after an edit); None: no ground truth (the order falls back)."""
        self._correct = None if correct is None else np.asarray(correct)
        if self._correct is None and self._order == "ground truth":
            self._order = "confidence"
        self._cache = self._keyed = None

    def _keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Target rows of every live link (ascending) and their sort keys (lower first; ties in row order)."""
        key = (self.edits.version, self._order, id(self._correct))
        if self._keyed is not None and self._keyed[0] == key:
            return self._keyed[1]
        edits = self.edits
        predecessor = edits.predecessor_rows()
        targets = np.flatnonzero(predecessor >= 0)
        confidence = edits.column("link_confidence")[targets] if "link_confidence" in edits.column_names \
            else np.full(len(targets), np.nan)
        cost = edits.column("link_cost")[targets]
        # One float key: confidence in [0, 1]; links without one after them, costliest first, in [2, 2.5]; with the
        # ground-truth order, every link it does not call wrong + 10.
        finite_cost = np.where(np.isfinite(cost), cost, 0.0)
        by_cost = 3.0 - finite_cost / (2.0 * float(finite_cost.max(initial=0.0)) + 1e-300) - 0.5
        sort_key = np.where(np.isfinite(confidence), confidence, by_cost)
        if self._order == "ground truth" and self._correct is not None:
            by_row = np.full(edits.n_rows, -1, dtype=np.int64)
            live = edits.rows()
            if len(self._correct) == len(live):
                by_row[live] = self._correct
            sort_key = sort_key + np.where(by_row[targets] != 0, 10.0, 0.0)  # wrong links (0) first
        self._keyed = (key, (targets, sort_key))
        return targets, sort_key

    def links(self) -> np.ndarray:
        """Target rows of every live link, in review order (sorted once per change of the model)."""
        key = (self.edits.version, self._order, id(self._correct))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        targets, sort_key = self._keys()
        ordered = targets[np.argsort(sort_key, kind="stable")]
        self._cache = (key, ordered)
        return ordered

    def _reviewed_of(self, rows: np.ndarray) -> np.ndarray:
        if "reviewed" not in self.edits.column_names:
            return np.zeros(len(rows), dtype=bool)
        return self.edits.column("reviewed")[rows]

    def reviewed(self) -> np.ndarray:
        """Whether each link of :meth:`links` is reviewed."""
        return self._reviewed_of(self.links())

    def progress(self) -> tuple[int, int]:
        """``(reviewed, total)`` links."""
        targets, _ = self._keys()
        return int(np.count_nonzero(self._reviewed_of(targets))), len(targets)

    def progress_text(self) -> str:
        done, total = self.progress()
        return f"{done} of {total} reviewed"

    def position(self) -> int | None:
        """Index of the current link in :meth:`links` (None: none, or it is gone)."""
        if self.current is None:
            return None
        hit = np.flatnonzero(self.links() == self.current)
        return int(hit[0]) if len(hit) else None

    def next(self) -> int | None:
        """Move to the next unreviewed link after the current one (from the start when past the end or when the
        current link is gone); None when every link is reviewed.

        One pass over the links (no sort: after an edit, stepping on costs what the edit cost, not a sort)."""
        targets, sort_key = self._keys()
        open_ = ~self._reviewed_of(targets)
        after = self._after_current(targets, sort_key)
        pick = _first(targets, sort_key, open_ & after if after is not None and (open_ & after).any() else open_)
        if pick is None:
            return None
        self.current = pick
        return pick

    def previous(self) -> int | None:
        """Move to the link before the current one (reviewed or not); None at the start."""
        targets, sort_key = self._keys()
        after = self._after_current(targets, sort_key)
        if after is None:
            return None
        before = ~after & (targets != self.current)
        if not before.any():
            return None
        order = np.lexsort((targets[before], sort_key[before]))
        self.current = int(targets[before][order[-1]])
        return self.current

    def _after_current(self, targets: np.ndarray, sort_key: np.ndarray) -> np.ndarray | None:
        """Which links come after the current one in review order (None: no current link, or it is gone)."""
        if self.current is None:
            return None
        at = np.searchsorted(targets, self.current)
        if at == len(targets) or targets[at] != self.current:
            return None
        key = sort_key[at]
        return (sort_key > key) | ((sort_key == key) & (targets > self.current))


def _first(targets: np.ndarray, sort_key: np.ndarray, among: np.ndarray) -> int | None:
    """The first link in review order among the mask ``among`` (None: none)."""
    if not among.any():
        return None
    keys = sort_key[among]
    lowest = keys == keys.min()
    return int(targets[among][lowest].min())
