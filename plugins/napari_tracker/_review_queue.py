"""The review queue: every link of the live tracks, the doubtful ones first, and where the reviewer is in it.

A link is named by its target row (the link *into* that point). Orders:

* ``"confidence"``: lowest ``link_confidence`` first (links without one, such as hand-made links of an imported
  table, by highest ``link_cost`` after them);
* ``"ground truth"``: links a ground truth says are wrong first, then by confidence.

Reviewed links (the ``reviewed`` flag of :class:`~napari_tracker._edits.TrackEdits`, set by accepting) are
skipped by :meth:`ReviewQueue.next`. The order is computed once per change of the model (about 20 ms for
100k points). No napari, no Qt.
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
        self._cache = None

    def set_correct(self, correct: np.ndarray | None) -> None:
        """New ground-truth correctness (after an edit); None: no ground truth (the order falls back)."""
        self._correct = None if correct is None else np.asarray(correct)
        if self._correct is None and self._order == "ground truth":
            self._order = "confidence"
        self._cache = None

    def links(self) -> np.ndarray:
        """Target rows of every live link, in review order."""
        key = (self.edits.version, self._order, id(self._correct))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        edits = self.edits
        predecessor = edits.predecessor_rows()
        targets = np.flatnonzero(predecessor >= 0)
        confidence = edits.column("link_confidence")[targets] if "link_confidence" in edits.column_names \
            else np.full(len(targets), np.nan)
        cost = edits.column("link_cost")[targets]
        # One float key, sorted once (stable: ties in row order): confidence in [0, 1]; links without one after
        # them, costliest first, in [2, 2.5]; with the ground-truth order, every link it does not call wrong + 10.
        finite_cost = np.where(np.isfinite(cost), cost, 0.0)
        by_cost = 3.0 - finite_cost / (2.0 * float(finite_cost.max(initial=0.0)) + 1e-300) - 0.5
        sort_key = np.where(np.isfinite(confidence), confidence, by_cost)
        if self._order == "ground truth" and self._correct is not None:
            by_row = np.full(edits.n_rows, -1, dtype=np.int64)
            live = edits.rows()
            if len(self._correct) == len(live):
                by_row[live] = self._correct
            sort_key = sort_key + np.where(by_row[targets] != 0, 10.0, 0.0)  # wrong links (0) first
        ordered = targets[np.argsort(sort_key, kind="stable")]
        self._cache = (key, ordered)
        return ordered

    def reviewed(self) -> np.ndarray:
        """Whether each link of :meth:`links` is reviewed."""
        links = self.links()
        if "reviewed" not in self.edits.column_names:
            return np.zeros(len(links), dtype=bool)
        return self.edits.column("reviewed")[links]

    def progress(self) -> tuple[int, int]:
        """``(reviewed, total)`` links."""
        reviewed = self.reviewed()
        return int(np.count_nonzero(reviewed)), len(reviewed)

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
        current link is gone); None when every link is reviewed."""
        links, reviewed = self.links(), self.reviewed()
        position = self.position()
        start = 0 if position is None else position + 1
        after = np.flatnonzero(~reviewed[start:])
        if len(after):
            self.current = int(links[start + after[0]])
        else:
            before = np.flatnonzero(~reviewed[:start])
            if not len(before):
                return None
            self.current = int(links[before[0]])
        return self.current

    def previous(self) -> int | None:
        """Move to the link before the current one (reviewed or not); None at the start."""
        links = self.links()
        position = self.position()
        if position is None or position == 0:
            return None
        self.current = int(links[position - 1])
        return self.current
