import numpy as np
import pytest

from tracker import costs


def test_gated_links_match_brute_force(rng):
    a = rng.random((50, 3)) * 10
    b = rng.random((60, 3)) * 10
    rows, cols, cost = costs.gated_links(a, b, 2.0)
    d2 = np.sum((a[:, None] - b[None]) ** 2, axis=-1)
    expected_rows, expected_cols = np.nonzero(d2 <= 4.0)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(cols, expected_cols)
    np.testing.assert_allclose(cost, d2[expected_rows, expected_cols])


def test_empty_and_invalid():
    rows, cols, cost = costs.gated_links(np.empty((0, 3)), np.ones((4, 3)), 1.0)
    assert rows.size == cols.size == cost.size == 0
    with pytest.raises(ValueError, match="positive"):
        costs.gated_links(np.ones((1, 3)), np.ones((1, 3)), 0.0)


def test_no_link_cost():
    assert costs.no_link_cost(np.array([1.0, 4.0]), 3.0) == pytest.approx(4.2)
    assert costs.no_link_cost(np.array([]), 3.0) == pytest.approx(9.45)


@pytest.mark.gpu
def test_gpu_candidate_search_gives_identical_links(monkeypatch, rng):
    source = rng.random((20_000, 3)) * 40
    target = source + rng.normal(0, 0.3, source.shape)
    radius = rng.uniform(0.2, 1.0, len(source))
    monkeypatch.setattr(costs, "gpu_available", lambda: False)
    expected = costs.gated_links_per_source(source, target, radius)
    monkeypatch.setattr(costs, "gpu_available", lambda: True)
    monkeypatch.setattr(costs, "GPU_GATING_MIN_POINTS", 0)
    got = costs.gated_links_per_source(source, target, radius)
    assert len(expected[0]) > 20_000
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_nearest_target_matches_brute_force(rng):
    query, target = rng.random((300, 3)) * 10, rng.random((250, 3)) * 10
    index, distance_sq = costs.nearest_target(query, target, 0.8)
    d2 = np.sum((query[:, None] - target[None]) ** 2, axis=-1)
    within = d2.min(axis=1) <= 0.64
    assert 0 < within.sum() < len(query)  # some queries have no target within the radius
    np.testing.assert_array_equal(index[within], d2.argmin(axis=1)[within])
    np.testing.assert_array_equal(index[~within], -1)
    np.testing.assert_allclose(distance_sq[within], d2.min(axis=1)[within])
    assert np.all(np.isinf(distance_sq[~within]))
    empty_index, empty_sq = costs.nearest_target(query[:3], np.empty((0, 3)), 1.0)
    assert np.all(empty_index == -1) and np.all(np.isinf(empty_sq))
    with pytest.raises(ValueError, match="positive"):
        costs.nearest_target(query, target, 0.0)
    with pytest.raises(ValueError, match="target_tree holds 3 points"):
        costs.nearest_target(query, target, 0.8, target_tree=costs.target_tree_of(target[:3]))


@pytest.mark.gpu
def test_gpu_nearest_target_gives_the_same_distances(monkeypatch, rng):
    query = rng.random((20_000, 3)) * 40
    target = query + rng.normal(0, 0.3, query.shape)
    monkeypatch.setattr(costs, "gpu_available", lambda: False)
    expected_index, expected_sq = costs.nearest_target(query, target, 0.5)
    monkeypatch.setattr(costs, "gpu_available", lambda: True)
    monkeypatch.setattr(costs, "GPU_GATING_MIN_POINTS", 0)
    index, distance_sq = costs.nearest_target(query, target, 0.5)
    assert 1_000 < (expected_index >= 0).sum() < len(query)
    np.testing.assert_array_equal(index >= 0, expected_index >= 0)
    np.testing.assert_array_equal(distance_sq, expected_sq)


def test_per_source_search_in_any_order_and_radius_groups(rng):
    source = rng.random((400, 3)) * 10
    target = rng.random((500, 3)) * 10
    # Radii of several groups (RADIUS_GROUP_RATIO apart), and a few sources with many candidates (a second round).
    radius = rng.choice([0.4, 0.7, 1.3, 3.0], len(source))
    d2 = np.sum((source[:, None] - target[None]) ** 2, axis=-1)
    expected_rows, expected_cols = np.nonzero(d2 <= radius[:, None] ** 2)
    for order in (None, rng.permutation(len(source)), costs.target_tree_of(source).indices):
        rows, cols, cost = costs.gated_links_per_source(source, target, radius, source_order=order)
        np.testing.assert_array_equal(rows, expected_rows)
        np.testing.assert_array_equal(cols, expected_cols)
        np.testing.assert_allclose(cost, d2[expected_rows, expected_cols])


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("n_points", [5, 39, 40, 41, 1000])
def test_query_tree_in_chunks_equals_one_query(monkeypatch, rng, k, n_points):
    # Chunks of at least 10 points on 3 cores: none, two or three chunks, split unevenly.
    monkeypatch.setattr(costs, "PARALLEL_QUERY_MIN_POINTS", 10)
    monkeypatch.setattr(costs, "available_cores", lambda: 3)
    targets = rng.random((200, 3)) * 10
    points = rng.random((n_points, 3)) * 10
    tree = costs.target_tree_of(targets)
    expected = tree.query(points, k=k, distance_upper_bound=1.5)
    got = costs.query_tree(tree, points, k, 1.5)
    for got_array, expected_array in zip(got, expected):
        assert got_array.shape == expected_array.shape
        np.testing.assert_array_equal(got_array, expected_array)


def test_candidates_per_point_are_capped_to_the_nearest():
    """A gate far larger than the data: at most MAX_CANDIDATES_PER_POINT candidates per point, its nearest, and a
    warning; below the cap the candidates are all those within the radius."""
    import warnings

    from tracker.costs import MAX_CANDIDATES_PER_POINT, gated_links_per_source, nearest_per_source

    rng = np.random.default_rng(0)
    sources, targets = rng.random((300, 3)), rng.random((400, 3))
    with pytest.warns(RuntimeWarning, match="candidate links within the gate"):
        rows, cols, cost = gated_links_per_source(sources, targets, np.full(300, 10.0))
    assert np.bincount(rows).max() == MAX_CANDIDATES_PER_POINT
    all_sq = ((sources[:, None] - targets[None]) ** 2).sum(-1)
    for row in (0, 150, 299):
        np.testing.assert_allclose(np.sort(cost[rows == row]), np.sort(all_sq[row])[:MAX_CANDIDATES_PER_POINT])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, cols, cost = gated_links_per_source(sources, targets, np.full(300, 0.1))
    assert len(rows) == int(np.sum(all_sq <= 0.01))
    # The same cap on pairs found all at once (the GPU grid's path), ties broken by the lower column.
    every = np.repeat(np.arange(3), 5), np.tile(np.arange(5), 3), np.tile([4.0, 1.0, 1.0, 3.0, 2.0], 3)
    with pytest.warns(RuntimeWarning):
        rows, cols, cost = nearest_per_source(*every, most=2)
    assert rows.tolist() == [0, 0, 1, 1, 2, 2] and cols.tolist() == [1, 2, 1, 2, 1, 2]
