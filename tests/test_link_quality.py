"""Link confidence, the CPU gated solver's bulk path, per-source gating, and determinism."""

from __future__ import annotations

import numpy as np
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker import costs, metrics
from tracker.linking import link_detections, link_frame_pair
from tracker.linking.confidence import assign, link_confidence
from tracker.lap import _scipy
from linking_cells import dense_cell


def _augmented_optimum(n, m, rows, cols, cost, row_un, col_un):
    """Optimal total of a gated problem by the dense augmented (n + m)² matrix of Jaqaman et al."""
    matrix = np.full((n + m, n + m), np.inf)
    matrix[rows, cols] = cost
    matrix[np.arange(n), m + np.arange(n)] = row_un
    matrix[n + np.arange(m), np.arange(m)] = col_un
    matrix[n + cols, m + rows] = 0.0
    r, c = scipy.optimize.linear_sum_assignment(matrix)
    return matrix[r, c].sum()


def _total(rows, cols, cost, row_un, col_un, chosen_rows, chosen_cols):
    assert len(np.unique(chosen_rows)) == len(chosen_rows) and len(np.unique(chosen_cols)) == len(chosen_cols)
    edge = {(a, b): k for k, (a, b) in enumerate(zip(rows.tolist(), cols.tolist()))}
    linked = sum(cost[edge[(a, b)]] for a, b in zip(chosen_rows.tolist(), chosen_cols.tolist()))
    return linked + row_un.sum() - row_un[chosen_rows].sum() + col_un.sum() - col_un[chosen_cols].sum()


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 14), st.integers(1, 14), st.sampled_from([0.08, 0.15, 0.3, 0.7]),
       st.sampled_from(["int", "float", "ties"]), st.integers(0, 2**32 - 1))
def test_gated_solver_is_optimal(n, m, density, kind, seed):
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(rng.random((n, m)) < density)
    if rows.size == 0:
        return
    if kind == "int":
        cost = rng.integers(0, 5, rows.size).astype(float)
    elif kind == "ties":
        cost = np.full(rows.size, 2.0)
    else:
        cost = rng.random(rows.size) * 10
    row_un = rng.random(n) * 6 if kind != "ties" else np.full(n, 1.5)
    col_un = rng.random(m) * 6 if kind != "ties" else np.full(m, 1.5)
    chosen_rows, chosen_cols = _scipy.solve_gated(n, m, rows, cols, cost, row_un, col_un)
    got = _total(rows, cols, cost, row_un, col_un, chosen_rows, chosen_cols)
    expected = _augmented_optimum(n, m, rows, cols, cost, row_un, col_un)
    assert abs(got - expected) <= 1e-9 * max(1.0, abs(expected))


def test_partial_matching_counts():
    assert [len(_scipy.partial_matchings(k)) for k in (2, 3, 4)] == [7, 34, 209]


def test_many_small_components_at_once(rng):
    # 300 disjoint random 3 x 3 blocks: the bulk path must equal the augmented optimum.
    blocks, size = 300, 3
    local = rng.random((blocks, size, size)) < 0.6
    b, r, c = np.nonzero(local)
    rows, cols = b * size + r, b * size + c
    cost = rng.random(rows.size) * 4
    row_un, col_un = rng.random(blocks * size) * 3, rng.random(blocks * size) * 3
    chosen_rows, chosen_cols = _scipy.solve_gated(blocks * size, blocks * size, rows, cols, cost, row_un, col_un)
    got = _total(rows, cols, cost, row_un, col_un, chosen_rows, chosen_cols)
    expected = sum(
        _augmented_optimum(size, size, r[b == k], c[b == k], cost[b == k], row_un[k * size:(k + 1) * size],
                           col_un[k * size:(k + 1) * size])
        if (b == k).any() else row_un[k * size:(k + 1) * size].sum() + col_un[k * size:(k + 1) * size].sum()
        for k in range(blocks)
    )
    assert abs(got - expected) < 1e-8


def test_per_source_gating_matches_brute_force(rng):
    source, target = rng.random((300, 3)) * 10, rng.random((250, 3)) * 10
    radius = rng.random(300) * 2.5 + 0.1
    rows, cols, cost = costs.gated_links_per_source(source, target, radius)
    distance_sq = ((source[:, None, :] - target[None, :, :]) ** 2).sum(-1)
    expected_rows, expected_cols = np.nonzero(distance_sq <= radius[:, None] ** 2)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(cols, expected_cols)
    np.testing.assert_allclose(cost, distance_sq[expected_rows, expected_cols])


def test_confidence_formula():
    # Row 0 has two candidates of costs 1 and 3: its share is 1 / (1 + e^-1 + e^-(10-1)/2).
    rows, cols, cost = np.array([0, 0]), np.array([0, 1]), np.array([1.0, 3.0])
    confidence = link_confidence(rows, cols, cost, np.full(1, 10.0), np.full(2, 10.0), np.array([0]), np.array([0]))
    assert confidence[0] == np.float64(1 / (1 + np.exp(-1.0) + np.exp(-4.5)))


def test_assign_solves_and_scores(rng):
    n, m = 30, 25
    rows, cols = np.nonzero(rng.random((n, m)) < 0.2)
    cost = rng.random(rows.size) * 8
    chosen_rows, chosen_cols, index, confidence = assign(rows, cols, cost, (n, m), 5.0, solver="scipy")
    expected_rows, expected_cols = _scipy.solve_gated(n, m, rows, cols, cost, np.full(n, 5.0), np.full(m, 5.0))
    np.testing.assert_array_equal(chosen_rows, expected_rows)
    np.testing.assert_array_equal(chosen_cols, expected_cols)
    np.testing.assert_array_equal(rows[index], chosen_rows)
    np.testing.assert_array_equal(cols[index], chosen_cols)
    np.testing.assert_array_equal(confidence, link_confidence(rows, cols, cost, np.full(n, 5.0), np.full(m, 5.0),
                                                              chosen_rows, chosen_cols))

def test_confidence_ranks_wrong_links_first():
    truth, detections, step, nn = dense_cell(0.5, 0.5, n=1500, frames=10)
    tracks = link_detections(detections, 2.5 * step, solver="scipy")
    correct = metrics.link_correctness(tracks, truth, 0.5 * nn)
    confidence = tracks["link_confidence"]
    assert np.all(np.isnan(confidence[correct == -1]))
    linked = correct >= 0
    assert np.all((confidence[linked] >= 0) & (confidence[linked] <= 1))
    good, bad = confidence[correct == 1], confidence[correct == 0]
    assert len(bad) > 20
    # Area under the ROC curve of "confidence separates correct from wrong links".
    auc = (good[:, None] > bad[None, :]).mean() + 0.5 * (good[:, None] == bad[None, :]).mean()
    assert auc > 0.8
    # Reviewing the least certain 5% of links finds far more than 5% of the errors.
    threshold = np.quantile(confidence[linked], 0.05)
    assert (bad <= threshold).mean() > 0.2  # 4x what random review finds


def test_plain_mode_is_frame_pair_linking():
    truth, detections, step, nn = dense_cell(0.3, 0.5, n=300, frames=6)
    tracks = link_detections(detections, 2.5 * step, motion="none", adaptive_radius=False, max_gap=0,
                             solver="scipy")
    # Every link is what link_frame_pair chooses for its two frames.
    frame = np.asarray(detections["frame"])
    xyz = np.column_stack([detections[a] for a in "zyx"])
    expected = set()
    for t in range(5):
        a, b = xyz[frame == t], xyz[frame == t + 1]
        rows, cols, _ = link_frame_pair(a, b, 2.5 * step, solver="scipy")
        expected |= {(t, tuple(a[r]), tuple(b[c])) for r, c in zip(rows, cols)}
    txyz = np.column_stack([tracks[a] for a in "zyx"])
    same = tracks["track_id"][1:] == tracks["track_id"][:-1]
    got = {(int(tracks["frame"][i]), tuple(txyz[i]), tuple(txyz[i + 1])) for i in np.flatnonzero(same)}
    assert got == expected


def test_deterministic_with_defaults():
    truth, detections, step, nn = dense_cell(0.4, 0.5, n=500, frames=8, blink=0.1)
    a = link_detections(detections, 2.5 * step)
    b = link_detections({k: v.copy() for k, v in detections.items()}, 2.5 * step)
    assert list(a) == ["track_id", "frame", "z", "y", "x", "link_cost", "link_confidence"]
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
