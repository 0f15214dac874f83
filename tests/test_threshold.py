import numpy as np
import pytest

from tracker import dog, threshold


def _noise_maxima(n_voxels: int, grad: np.ndarray) -> np.ndarray:
    """Quality of the noise maxima the model expects (with NOISE_EXCESS): one where each integer count is crossed."""
    levels = np.linspace(threshold.THRESHOLD_RANGE[0], 12.0, 4000)
    expected = threshold.NOISE_EXCESS * dog.expected_noise_maxima(n_voxels, grad, levels)
    return np.interp(-np.arange(1, int(expected[0]) + 1), -expected, levels)


def _f1(values: np.ndarray, is_spot: np.ndarray, n_spots: int, threshold: float) -> float:
    kept = values >= threshold
    return 2 * int(np.sum(kept & is_spot)) / (int(np.sum(kept)) + n_spots)


def test_automatic_threshold_follows_the_noise_and_the_spots():
    grad = np.array([0.1, 0.1, 0.1])
    floor, ceiling = threshold.THRESHOLD_RANGE
    assert threshold.automatic_threshold(np.array([]), 10**6, grad) == ceiling
    noise = _noise_maxima(10**6, grad)
    assert threshold.automatic_threshold(noise, 10**6, grad) == ceiling  # noise alone: nothing is a spot
    # Bright spots clear of the noise: the threshold leaves (nearly) all noise maxima out.
    bright = np.concatenate([noise, np.full(50, 20.0)])
    assert np.sum(noise >= threshold.automatic_threshold(bright, 10**6, grad)) <= 1
    # Higher for a larger volume, as the noise maxima it holds grow.
    values = np.linspace(3.5, 12, 200)
    assert threshold.automatic_threshold(values, 10**5, grad) < threshold.automatic_threshold(values, 10**7, grad)


def test_automatic_threshold_is_near_the_best_f1_on_faint_crowded_spots():
    # Faint spots among the noise maxima the model expects: the estimated F1's maximum is close to the true one,
    # and well below the precision rule's threshold, which gives up most of the spots to keep noise out.
    grad = np.full(3, 0.1)
    rng = np.random.default_rng(3)
    for n_voxels, centre in ((10**6, 4.5), (10**6, 5.0), (4 * 10**6, 5.0)):
        noise = _noise_maxima(n_voxels, grad)
        spots = rng.normal(centre, 0.6, 150)
        values = np.concatenate([noise, spots])
        is_spot = np.arange(len(values)) >= len(noise)
        visible = values >= threshold.THRESHOLD_RANGE[0]
        values, is_spot = values[visible], is_spot[visible]
        best = max(_f1(values, is_spot, 150, u) for u in np.arange(3.5, 8.0, 0.05))
        chosen = threshold.automatic_threshold(values, n_voxels, grad)
        assert _f1(values, is_spot, 150, chosen) >= best - 0.03
        precise = threshold.precise_threshold(values, n_voxels, grad)
        assert chosen < precise and _f1(values, is_spot, 150, chosen) > _f1(values, is_spot, 150, precise)


def test_precise_threshold_keeps_a_few_faint_spots_that_noise_hardly_explains():
    grad = np.full(3, 0.1)
    ten = np.full(10, 5.0)
    noise = threshold.NOISE_EXCESS * dog.expected_noise_maxima(10**6, grad, np.array([5.0]))[0]
    # 0.14 noise maxima expected above 5: more than 1 % of ten, so the fraction rule alone would drop them;
    # each of them is still far more likely a spot than noise (the marginal rule).
    assert 0.01 * len(ten) < noise < len(ten) / (1 + threshold.TRUE_PER_FALSE)
    assert threshold.precise_threshold(ten, 10**6, grad) <= 5.0
    assert threshold.precise_threshold(ten, 10**8, grad) > 5.0  # 14 expected: noise explains them
    assert threshold.automatic_threshold(ten, 10**6, grad) <= 5.0
    assert threshold.automatic_threshold(ten, 10**8, grad) > 5.0


def test_frame_thresholds_use_the_precision_rule_below_half_a_voxel_and_split_no_higher():
    grad = np.full(3, 0.1)
    rng = np.random.default_rng(5)
    values = np.concatenate([_noise_maxima(10**6, grad), rng.normal(5.0, 0.6, 150)])
    values = values[values >= threshold.THRESHOLD_RANGE[0]]
    f1_rule = threshold.automatic_threshold(values, 10**6, grad)
    precise = threshold.precise_threshold(values, 10**6, grad)
    assert f1_rule < precise
    assert threshold.frame_thresholds(values, 10**6, grad, (1.0, 1.2, 1.2), (20, 80, 80)) == (f1_rule, f1_rule)
    # σ under half a voxel on an axis filtered: the precision rule; on an axis of one plane (2D) it is not filtered.
    assert threshold.frame_thresholds(values, 10**6, grad, (0.3, 1.2, 1.2), (20, 80, 80)) == (precise, precise)
    assert threshold.frame_thresholds(values, 10**6, grad, (0.3, 1.2, 1.2), (1, 800, 800))[0] == f1_rule
    # Bright frame: the F1 rule may sit above the precision rule; partners of merged spots are sought from the lower.
    bright = np.concatenate([_noise_maxima(10**6, grad), np.full(50, 20.0), np.full(5, 5.2)])
    chosen, split = threshold.frame_thresholds(bright, 10**6, grad, (1.0, 1.2, 1.2), (20, 80, 80))
    assert split == min(chosen, threshold.precise_threshold(bright, 10**6, grad)) <= chosen
