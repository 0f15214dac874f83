"""Candidate search: which detections of the next frame lie within each point's search radius.

The search itself is :func:`tracker.costs.gated_links_per_source` (a k-d tree
on the host, a uniform grid on the GPU for large frames). :class:`CandidateSearch`
adds what linking frame after frame makes cheap: the k-d tree of each frame is
built once, in the background ahead of its use, and serves as a pair's target
and then as the next pair's source (its order orders the queries); the forward
pass's candidates of a frame pair are kept, a little farther out, for the
smoothing pass's search of the same pair (:class:`KeptSearch`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from .._threads import thread_pool
from ..costs import gated_links_per_source, nearest_target, searches_on_gpu, target_tree_of, within_radius

SMOOTHING_SEARCH_MARGIN = 0.03
"""While the smoothing pass may follow, the forward pass searches each point's candidates this fraction farther
than its radius and keeps them (:class:`KeptSearch`): the smoothing pass's search ball of a point, from its
prediction there, mostly lies inside that larger one (persistence and variances change little once estimated),
so its candidates are those kept that pass its own exact test. Points whose link into them changed need a search
of their own (about 2 % at 10k particles, persistence 0.5, step/NN 0.5, where 97 % of the balls fit with a margin
of 1.5 %)."""

TREES_KEPT = 3
"""k-d trees of frames the search keeps (:meth:`CandidateSearch.frame_tree`): those of a pair's two frames and,
looking ahead, the next one."""


class CandidateSearch:
    """Candidate links between frames of the points ``positions`` (``(n, 3)`` µm, ordered by frame).

    A frame is given by its points, a contiguous range of indices; it is known by its first point and size.
    """

    def __init__(self, positions: np.ndarray):
        self.positions = positions
        self._trees: dict[tuple[int, int], cKDTree] = {}  # see frame_tree
        self._building: dict[tuple[int, int], Future] = {}  # trees being built in the background (prefetch_tree)
        self._kept: dict[tuple[int, int], KeptSearch] = {}  # by the source frame's first point and size

    def frame_tree(self, frame_points: np.ndarray) -> cKDTree:
        """k-d tree over the points ``frame_points`` of one frame.

        The last :data:`TREES_KEPT` are kept: a frame is the target of one pair, then the source of the next
        (its tree orders that pair's queries, see :meth:`search`), and in the look-ahead also the frame after
        a pair's target. The trees of the searches kept for the smoothing pass (:class:`KeptSearch`) are
        used too: the look-ahead's frame after a pair's target is the target of the pair after it.
        """
        key = (int(frame_points[0]), len(frame_points))
        tree = self._known_tree(key)
        if tree is None:
            tree = self._trees[key] = target_tree_of(self.positions[key[0]:key[0] + key[1]])
            if len(self._trees) > TREES_KEPT:
                del self._trees[next(iter(self._trees))]  # the oldest
        return tree

    def _known_tree(self, key):
        """The k-d tree of the frame ``key`` (first point, size) if one is kept, held by a kept search or being
        built (:meth:`prefetch_tree`; then waited for), else None."""
        tree = self._trees.get(key)
        if tree is None:
            kept = [search.tree for search in self._kept.values() if search.target_frame == key]
            if key in self._building:
                tree = self._building.pop(key).result()
            elif kept:
                tree = kept[0]
            else:
                return None
            self._trees[key] = tree
            if len(self._trees) > TREES_KEPT:
                del self._trees[next(iter(self._trees))]  # the oldest
        return tree

    def prefetch_tree(self, frame_points: np.ndarray) -> None:
        """Start building the k-d tree of the points ``frame_points`` of one frame (as :meth:`frame_tree`) on the
        background thread of :func:`_tree_builder`, for :meth:`frame_tree` to take when it is needed."""
        if len(frame_points) == 0 or searches_on_gpu(len(frame_points)):
            return
        key = (int(frame_points[0]), len(frame_points))
        if key not in self._trees and key not in self._building:
            self._building[key] = _tree_builder().submit(target_tree_of,
                                                         self.positions[key[0]:key[0] + key[1]])

    def search(self, predicted, radius, source_frame, sources, target_frame, targets, keep=False):
        """Candidate links (:func:`tracker.costs.gated_links_per_source`) from ``predicted`` to ``targets``.

        ``targets`` are some (or all) of the points ``target_frame`` of one frame, in order; the first
        ``len(sources)`` rows of ``predicted`` (µm, within ``radius``) are predictions of ``sources``, some of
        the points ``source_frame`` of one frame, in order; any further rows, of other points. On the host,
        the search runs over the whole target frame's k-d tree (built once, :meth:`frame_tree`) and keeps the
        candidates among ``targets``, which gives the same candidates as a search over ``targets`` alone, and
        queries ``sources`` in the order of their frame's tree when it is at hand.

        ``keep`` (``sources`` the whole frame): also keep the candidates of ``sources`` within a margin
        (:data:`SMOOTHING_SEARCH_MARGIN`) for the smoothing pass, whose search of the same frame pair takes
        from them what it can (:meth:`_search_kept`).

        Returns rows (into ``predicted``), columns (into ``targets``) and squared distances (µm²), sorted by
        row, then column.
        """
        positions = self.positions
        if len(predicted) == 0 or len(targets) == 0 or searches_on_gpu(len(predicted)):
            return gated_links_per_source(predicted, positions[targets], radius)
        key = (int(source_frame[0]), len(source_frame)) if len(source_frame) else None
        kept = self._kept.get(key)
        if not keep and kept is not None and kept.target_frame == (int(target_frame[0]), len(target_frame)):
            del self._kept[key]  # (used once)
            order = self._query_order(key, sources, source_frame, len(predicted))
            rows, cols, distance_sq = self._search_kept(kept, predicted, radius, sources - source_frame[0],
                                                        target_frame, order)
        else:
            tree = self.frame_tree(target_frame)
            order = self._query_order(key, sources, source_frame, len(predicted))
            reach = radius
            if keep:
                reach = radius.copy()
                reach[:len(sources)] *= 1.0 + SMOOTHING_SEARCH_MARGIN
            frame_um = positions[int(target_frame[0]):int(target_frame[0]) + len(target_frame)]  # (a range: a view)
            rows, cols, distance_sq = gated_links_per_source(predicted, frame_um, reach,
                                                             target_tree=tree, source_order=order)
            if keep:
                self._kept[key] = KeptSearch.of(rows, cols, predicted, reach, len(sources), tree, target_frame)
                # The same test as gated_links_per_source's at ``radius``: the same candidates and distances.
                inside = distance_sq <= radius[rows] ** 2
                rows, cols, distance_sq = rows[inside], cols[inside], distance_sq[inside]
        if len(targets) < len(target_frame):
            column = np.full(len(target_frame), -1, dtype=np.int64)
            column[targets - target_frame[0]] = np.arange(len(targets))
            cols = column[cols]
            kept_columns = cols >= 0
            rows, cols, distance_sq = rows[kept_columns], cols[kept_columns], distance_sq[kept_columns]
        return rows, cols, distance_sq

    def _query_order(self, key, sources, source_frame, n_rows):
        """Order in which to query ``n_rows`` predictions, the first ``len(sources)`` of the points ``sources`` of
        the frame ``source_frame`` (``key``): those in the order of that frame's k-d tree when one is known
        (:meth:`_known_tree`), any further rows after them; None without a tree."""
        source_tree = self._known_tree(key) if key is not None else None
        if source_tree is None:
            return None
        order = _subset_order(source_tree.indices, sources - source_frame[0], len(source_frame))
        if n_rows > len(sources):
            order = np.concatenate([order, np.arange(len(sources), n_rows)])
        return order

    def _search_kept(self, kept, predicted, radius, sources, target_frame, order=None):
        """Candidates (in the target frame) of ``predicted`` (predictions of the points ``sources`` of the kept
        search's source frame, by their index in it) within ``radius``, taken from ``kept`` where their ball lies
        inside the kept one, searched afresh elsewhere (queried in ``order``, a permutation of the rows, where
        given): the same as a search of them all."""
        targets_um = self.positions[target_frame[0]:target_frame[0] + len(target_frame)]
        inside, query, target = kept.candidates(predicted, sources, radius)
        rows, cols, distance_sq = within_radius(predicted, targets_um, query, target, radius)
        afresh = np.flatnonzero(~inside)
        if len(afresh):
            more_rows, more_cols, more_sq = gated_links_per_source(
                np.take(predicted, afresh, axis=0), targets_um, radius[afresh], target_tree=kept.tree,
                source_order=None if order is None else _subset_order(order, afresh, len(predicted)))
            at = np.searchsorted(rows, afresh[more_rows])
            rows = np.insert(rows, at, afresh[more_rows])
            cols, distance_sq = np.insert(cols, at, more_cols), np.insert(distance_sq, at, more_sq)
        return rows, cols, distance_sq

    def nearest_continuation(self, query_um, sources, source_frame, next_frame, bound_um):
        """Squared distance (µm²) from each of ``query_um`` to the nearest point of ``next_frame`` within
        ``bound_um`` (inf where none), as :func:`tracker.costs.nearest_target`.

        ``query_um[i]`` lies near the forward prediction of the point ``sources[i]`` (its index in the frame
        ``source_frame``, whose successors lie in ``next_frame``). Where the query's ball lies inside the ball
        that the forward pass searched and kept for that point (:class:`KeptSearch`), the nearest point is
        among the kept candidates; the other queries go to the k-d tree (on the project's 2-core machine the
        look-ahead's queries took a fifth of the linking time at 10k points per frame; about 95 % fit).
        """
        next_um = self.positions[int(next_frame[0]):int(next_frame[0]) + len(next_frame)]  # (a range: a view)
        kept = self._kept.get((int(source_frame[0]), len(source_frame)))
        on_gpu = searches_on_gpu(len(query_um))
        if on_gpu or kept is None or kept.target_frame != (int(next_frame[0]), len(next_frame)):
            tree = None if on_gpu else self.frame_tree(next_frame)
            return nearest_target(query_um, next_um, bound_um, target_tree=tree)[1]
        distance_sq = np.full(len(query_um), np.inf)
        inside, query, target = kept.candidates(query_um, sources, bound_um)
        delta = np.take(query_um, query, axis=0) - np.take(next_um, target, axis=0)
        candidate_sq = np.sum(delta * delta, axis=1)  # (nearest_target's formula: the same bits)
        candidate_sq[candidate_sq > bound_um * bound_um] = np.inf
        first = np.flatnonzero(np.r_[True, query[1:] != query[:-1]]) if len(query) else query
        distance_sq[query[first]] = np.minimum.reduceat(candidate_sq, first) if len(first) else []
        afresh = np.flatnonzero(~inside)
        if len(afresh):
            distance_sq[afresh] = nearest_target(np.take(query_um, afresh, axis=0), next_um, bound_um,
                                                 target_tree=kept.tree)[1]
        return distance_sq

    def forget_kept(self) -> None:
        """Drop the searches kept for the smoothing pass."""
        self._kept.clear()


@dataclass
class KeptSearch:
    """Candidates of the forward pass's search of one frame pair, within each source's ``reach`` (its radius plus
    :data:`SMOOTHING_SEARCH_MARGIN`) of its prediction ``predicted``: those of source ``i`` are the target indices
    (in the target frame) ``cols[indptr[i]:indptr[i + 1]]``, in order. ``tree``: the target frame's k-d tree,
    ``target_frame``: its first point and size."""

    predicted: np.ndarray
    reach: np.ndarray
    indptr: np.ndarray
    cols: np.ndarray
    tree: cKDTree
    target_frame: tuple[int, int]

    def candidates(self, query_um, sources, radius_um):
        """The kept candidates of the queries whose balls (``radius_um`` around ``query_um``: predictions of the
        kept search's sources ``sources``, by index) lie inside the kept balls of their sources: every target
        within those balls is among them.

        Returns ``inside`` (``(n,)`` bool: which queries) and, per candidate, its query (index into ``query_um``)
        and its target (index in the target frame), grouped by query in order.
        """
        shift = np.sqrt(np.sum((query_um - np.take(self.predicted, sources, axis=0)) ** 2, axis=1))
        # (Slack for rounding: the kept search's exact test had every target within its reach.)
        inside = shift + radius_um <= self.reach[sources] * (1.0 - 1e-9)
        fit = np.flatnonzero(inside)
        first, count = self.indptr[sources[fit]], np.diff(self.indptr)[sources[fit]]
        index = np.repeat(first - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
        return inside, np.repeat(fit, count), self.cols[index]

    @classmethod
    def of(cls, rows, cols, predicted, reach, n_sources, tree, target_frame) -> KeptSearch:
        """From a search's candidates (sorted by row), of its first ``n_sources`` rows."""
        of_sources = rows < n_sources
        indptr = np.r_[0, np.cumsum(np.bincount(rows[of_sources], minlength=n_sources))]
        return cls(predicted[:n_sources].copy(), reach[:n_sources].copy(), indptr, cols[of_sources], tree,
                   (int(target_frame[0]), len(target_frame)))


def _tree_builder() -> ThreadPoolExecutor:
    """The one background thread that builds frames' k-d trees ahead of their use (:meth:`CandidateSearch.
    prefetch_tree`): SciPy builds a k-d tree without holding the GIL, so the build of the next pair's target frame
    overlaps the current pair's search and assignment (1-2 ms a frame at 10k points, 20-30 ms at 100k, on this
    project's 2-core machine)."""
    return thread_pool("kdtree", 1)


def _subset_order(order: np.ndarray, subset: np.ndarray, n: int) -> np.ndarray:
    """``order`` (a permutation of ``range(n)``) restricted to the sorted indices ``subset``, as positions in
    ``subset``."""
    if len(subset) == n:
        return order
    member = np.zeros(n, dtype=bool)
    member[subset] = True
    return (np.cumsum(member) - 1)[order[member[order]]]
