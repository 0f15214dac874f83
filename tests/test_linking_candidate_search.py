"""Candidate search: cached and prefetched k-d trees, and the forward pass's searches kept for the smoothing pass."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import simulate
from tracker.costs import gated_links_per_source, nearest_target
from tracker.linking import candidate_search, link_detections
from linking_cells import noisy_detections


@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_smoothing_pass_candidates_do_not_depend_on_the_kept_search(monkeypatch, margin):
    # Margin 0: almost every smoothing search runs afresh; 0.5: almost all come from the forward pass's.
    truth = simulate.simulate_tracks(300, 12, (12.0, 25.0, 25.0), 0.5, 0.7, blink_probability=0.05, seed=4)
    detections = noisy_detections(truth, 0.04)
    expected, summary = link_detections(detections, 1.5, solver="scipy", return_summary=True)
    assert summary.smoothing != "off"
    monkeypatch.setattr(candidate_search, "SMOOTHING_SEARCH_MARGIN", margin)
    got = link_detections(detections, 1.5, solver="scipy")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_lookahead_continuations_from_the_kept_search_equal_a_fresh_search(monkeypatch):
    # Persistence 0.9: the smoothing pass looks ahead; its nearest continuations come mostly from the forward
    # pass's kept candidates, the rest from the k-d tree. Each call is checked against a search of the whole
    # next frame.
    truth = simulate.simulate_tracks(400, 10, (12.0, 25.0, 25.0), 0.4, 0.9, blink_probability=0.05, seed=5)
    detections = noisy_detections(truth, 0.03)
    queries = {"all": 0, "tree": 0}
    original = candidate_search.CandidateSearch.nearest_continuation

    def checked(self, query_um, sources, source_frame, next_frame, bound_um):
        got = original(self, query_um, sources, source_frame, next_frame, bound_um)
        np.testing.assert_array_equal(got, nearest_target(query_um, self.positions[next_frame], bound_um)[1])
        queries["all"] += len(query_um)
        return got

    def counted(query_um, *args, **kwargs):
        queries["tree"] += len(query_um)
        return nearest_target(query_um, *args, **kwargs)

    monkeypatch.setattr(candidate_search.CandidateSearch, "nearest_continuation", checked)
    monkeypatch.setattr(candidate_search, "nearest_target", counted)
    _, summary = link_detections(detections, 1.2, solver="scipy", return_summary=True)
    assert summary.smoothing == "look-ahead"
    assert 0 < queries["tree"] < 0.5 * queries["all"]  # both ways were taken, mostly the kept candidates


def test_a_kept_search_gives_the_candidates_of_a_fresh_search(rng):
    # Two frames of 400 points; the forward pass's search keeps its candidates a margin farther out, and a
    # second search of the same pair (predictions moved a little, radii changed) takes them from there where
    # its balls fit, searching afresh elsewhere: the same candidates as a search of the whole frame.
    positions = rng.random((800, 3)) * 20.0
    source, target = np.arange(400), np.arange(400, 800)
    search = candidate_search.CandidateSearch(positions)
    search.prefetch_tree(target)
    predicted = positions[source] + rng.normal(0, 0.2, (400, 3))
    radius = rng.uniform(0.5, 2.0, 400)
    first = search.search(predicted, radius, source, source, target, target, keep=True)
    for got, expected in zip(first, gated_links_per_source(predicted, positions[target], radius)):
        np.testing.assert_array_equal(got, expected)
    moved = predicted + rng.normal(0, 0.02, (400, 3))
    changed = radius * rng.uniform(0.9, 1.02, 400)
    kept = search._kept[(0, 400)]
    inside, _, _ = kept.candidates(moved, np.arange(400), changed)
    assert 0.5 < inside.mean() < 1.0  # both ways are taken
    second = search.search(moved, changed, source, source, target, target)
    for got, expected in zip(second, gated_links_per_source(moved, positions[target], changed)):
        np.testing.assert_array_equal(got, expected)
    assert not search._kept  # (used once)
    # A subset of the targets: the same as a search over those alone, columns numbered among them.
    some = target[::3]
    rows, cols, distance_sq = search.search(moved, changed, source, source, target, some)
    expected = gated_links_per_source(moved, positions[some], changed)
    for got, want in zip((rows, cols, distance_sq), expected):
        np.testing.assert_array_equal(got, want)


def test_frame_trees_are_kept_for_the_last_frames(monkeypatch):
    positions = np.random.default_rng(0).random((50, 3))
    built = []
    monkeypatch.setattr(candidate_search, "target_tree_of",
                        lambda points: built.append(len(points)) or candidate_search.cKDTree(points))
    search = candidate_search.CandidateSearch(positions)
    frames = [np.arange(10 * k, 10 * k + 10) for k in range(5)]
    trees = [search.frame_tree(points) for points in frames[:3]]
    assert [search.frame_tree(points) for points in frames[:3]] == trees  # kept: not built again
    search.frame_tree(frames[3])  # the oldest (frame 0) goes
    assert len(built) == 4 and search.frame_tree(frames[0]) is not trees[0] and len(built) == 5


def test_searches_left_to_the_gpu_give_the_same_links(monkeypatch):
    # Where a GPU takes a frame's searches (no k-d tree of the frame, no kept search), the links are the same;
    # here the searches of 100 points or more take that way on the host.
    truth = simulate.simulate_tracks(400, 8, (12.0, 25.0, 25.0), 0.4, 0.9, blink_probability=0.05, seed=6)
    detections = noisy_detections(truth, 0.03)
    expected, summary = link_detections(detections, 1.2, solver="scipy", return_summary=True)
    assert summary.smoothing == "look-ahead"
    monkeypatch.setattr(candidate_search, "searches_on_gpu", lambda n_queries: n_queries >= 100)
    got = link_detections(detections, 1.2, solver="scipy")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])
