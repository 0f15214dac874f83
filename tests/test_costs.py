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
