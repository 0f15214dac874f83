import warnings

import numpy as np
import pytest
from scipy.stats import norm

from tracker import dog, pipeline, quality_mixture, simulate, threshold
from tracker.detect import detect_spots
from tracker.metrics import match_points
from tracker.quality_mixture import FrameMaxima, estimate_threshold, fit_quality_mixture
from tracker.stack import as_stack
from tracker.validation import InputWarning

GRAD = np.full(3, 0.13)  # the quality map's gradient variance at σ ≈ 2 voxels
EMPTY = {"frame": np.empty(0, int), "track_id": np.empty(0, int), "z": np.empty(0), "y": np.empty(0),
         "x": np.empty(0)}


def _noise_maxima(n_voxels: int, excess: float, rng) -> np.ndarray:
    """Noise maxima above the fit's floor, as many and as distributed as ``excess`` times the smooth-field count."""
    levels = np.linspace(quality_mixture.FIT_FLOOR, 12.0, 4000)
    above = excess * dog.expected_noise_maxima(n_voxels, GRAD, levels)
    count = rng.poisson(above[0])
    return np.interp(-rng.uniform(0, above[0], count), -above, levels)


def _frames(n_frames, n_voxels, excess, spots_per_frame, mean, spread, seed=0):
    rng = np.random.default_rng(seed)
    frames, labels = [], []
    for _ in range(n_frames):
        noise = _noise_maxima(n_voxels, excess, rng)
        spots = rng.normal(mean, spread, rng.poisson(spots_per_frame))
        quality = np.concatenate([noise, spots])
        keep = quality >= quality_mixture.FIT_FLOOR
        frames.append(FrameMaxima(quality[keep], n_voxels, GRAD))
        labels.append(np.r_[np.zeros(len(noise), bool), np.ones(len(spots), bool)][keep])
    return frames, labels


def _f1(frames, labels, n_spots, level):
    kept = [f.quality >= level for f in frames]
    true = sum(int(np.sum(k & lab)) for k, lab in zip(kept, labels))
    return 2 * true / (sum(int(np.sum(k)) for k in kept) + n_spots)


@pytest.mark.parametrize("excess, spots_per_frame, mean", [(1.2, 10, 4.0), (1.0, 80, 3.8), (1.8, 10, 5.0)])
def test_the_fit_finds_the_noise_excess_and_the_spots_and_a_threshold_near_the_best(excess, spots_per_frame, mean):
    # Faint spots among noise maxima over 10 frames of 0.5 M voxels: the frame rule's bound (c = 2) and its
    # floor (it cannot count the spots under 3.5) make it too strict; the fit sees both.
    frames, labels = _frames(10, 500_000, excess, spots_per_frame, mean, 0.9, seed=1)
    n_spots = sum(int(lab.sum()) for lab in labels) + 0.0
    fit = fit_quality_mixture(frames)
    assert fit.evidence >= quality_mixture.EVIDENCE and fit.threshold is not None
    assert fit.noise_excess == pytest.approx(excess, rel=0.2)
    assert fit.spot_mean == pytest.approx(mean, abs=0.4)
    total = 10 * spots_per_frame
    assert 0.7 * total < fit.n_spots < 1.3 * total
    best = max(_f1(frames, labels, n_spots, u) for u in threshold.threshold_levels())
    assert _f1(frames, labels, n_spots, fit.threshold) >= best - 0.03
    # Each frame's own rule, alone, is stricter and worse here.
    own = [threshold.automatic_threshold(f.quality[f.quality >= 3.5], f.n_voxels, f.gradient_var) for f in frames]
    assert np.median(own) > fit.threshold
    assert f"at most {fit.threshold:.2f}" in str(fit) and "10 frames" in str(fit)


@pytest.mark.parametrize("excess", [0.6, 1.3, 2.0])
def test_noise_alone_shows_no_spots(excess):
    frames, _ = _frames(10, 2_000_000, excess, 0, 5.0, 1.0, seed=2)
    fit = fit_quality_mixture(frames)
    assert fit.threshold is None and fit.evidence < quality_mixture.EVIDENCE
    assert "each frame's own" in str(fit)
    assert fit_quality_mixture([]).threshold is None
    assert fit_quality_mixture([FrameMaxima(np.empty(0), 1000, np.zeros(3))]).threshold is None


def _camera(truth, shape, voxel, size, photons, seed):
    return simulate.render_camera_stack(truth, shape, voxel, "gaussian", size, photons=photons,
                                        background_photons=1000.0 * float(np.prod(voxel)), seed=seed)


def test_faint_sparse_stack_pools_the_frames_evidence():
    # ~8 faint spots a frame (σ 0.6/0.2 µm on 0.3/0.1 µm voxels, 200 photons): one frame holds no significant
    # evidence, so the frame rule gives most frames the ceiling; ten frames pooled do.
    voxel, size = (0.3, 0.1, 0.1), (0.6, 0.2, 0.2)
    truth = simulate.simulate_tracks(8, 10, (4.8, 9.0, 9.0), 0.5, margin_um=0.0, seed=4)
    stack = _camera(truth, (10, 17, 91, 91), voxel, size, photons=200.0, seed=4)
    radius = tuple(np.sqrt(3) * np.asarray(size))
    fit = estimate_threshold(list(stack), voxel, radius)
    assert fit.threshold is not None and fit.threshold < threshold.THRESHOLD_RANGE[1]

    def f1(stack_threshold):
        found = [detect_spots(frame, voxel, radius, frame=t, stack_threshold=stack_threshold)
                 for t, frame in enumerate(stack)]
        table = {c: np.concatenate([f[c] for f in found]) for c in ("frame", "z", "y", "x")}
        matched = len(match_points(table, truth, 0.5)[2])
        return 2 * matched / (len(table["z"]) + len(truth["z"]))

    assert f1(fit.threshold) > f1(None) + 0.05


@pytest.mark.parametrize("shape, voxel, size", [
    ((13, 61, 61), (0.5, 0.2, 0.2), (0.35, 0.15, 0.15)),
    ((21, 90, 90), (0.3, 0.1, 0.1), (0.6, 0.2, 0.2)),
    ((1, 200, 200), (1.0, 0.1, 0.1), (1.0, 0.15, 0.15)),
])
def test_pure_noise_stacks_keep_about_a_tenth_of_a_false_spot_per_volume(shape, voxel, size):
    # Through the pipeline (the stack's threshold estimated, then each frame's): the fit finds no spots in noise.
    stack = _camera(EMPTY, (20, *shape), voxel, size, photons=0.0, seed=7)
    radius = tuple(np.sqrt(3) * np.asarray(size))
    assert pipeline.estimate_stack_threshold(as_stack(stack, voxel), radius, device="cpu").threshold is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)  # (where no frame has a false spot: "no spots found")
        found = pipeline.detect_stack(as_stack(stack, voxel), radius, device="cpu", workers=1)
    assert len(found["z"]) / len(stack) <= 0.5


def test_no_stack_threshold_below_half_a_voxel():
    # Filtered at under half a voxel the noise count does not hold (tracker.threshold.SMOOTH_SIGMA): no model.
    voxel, radius = (0.5, 0.2, 0.2), (0.3, 0.1, 0.1)
    stack = _camera(EMPTY, (3, 13, 61, 61), voxel, (0.35, 0.15, 0.15), photons=0.0, seed=1)
    assert estimate_threshold(list(stack), voxel, radius).threshold is None


@pytest.mark.gpu
def test_gpu_stack_threshold_matches_the_cpu():
    cp = pytest.importorskip("cupy")
    voxel, size = (0.3, 0.1, 0.1), (0.6, 0.2, 0.2)
    truth = simulate.simulate_tracks(8, 10, (4.8, 9.0, 9.0), 0.5, margin_um=0.0, seed=4)
    stack = _camera(truth, (10, 17, 91, 91), voxel, size, photons=200.0, seed=4)
    radius = tuple(np.sqrt(3) * np.asarray(size))
    cpu = estimate_threshold(list(stack), voxel, radius)
    gpu = estimate_threshold([cp.asarray(frame) for frame in stack], voxel, radius)
    assert gpu.threshold == cpu.threshold and gpu.evidence == pytest.approx(cpu.evidence, rel=1e-3)
    assert pipeline.estimate_stack_threshold(as_stack(stack, voxel), radius, device="gpu").threshold == cpu.threshold


def test_even_level_is_where_the_spots_density_overtakes_the_noise_maxima():
    levels = np.round(np.arange(2.5, 8.0 + 1e-9, 0.05), 2)
    noise = 1000.0 * np.exp(-2.0 * (levels - 2.5))  # density 2000 e^{-2(u - 2.5)}
    spots = 100.0 * (1.0 - np.clip((levels - 2.5) / 4.0, 0.0, 1.0))  # uniform density 25 on 2.5-6.5
    even = quality_mixture.even_level(levels, noise, spots, spot_mean=4.5)
    assert even == 4.5  # the crossing, 2.5 + ln(2000 / 25) / 2 = 4.69, is above the spots' mean
    crossing = quality_mixture.even_level(levels, noise, spots, spot_mean=6.0)
    assert crossing == pytest.approx(2.5 + np.log(2000.0 / 25.0) / 2.0, abs=0.06)
    assert quality_mixture.even_level(levels, 1e-6 * noise, spots, spot_mean=6.0) == 2.5  # spots dominate


@pytest.mark.parametrize("seed", [3, 4])
def test_dense_faint_spots_get_a_threshold_under_the_range_where_the_fit_shows_them(seed):
    # ~150 spots of quality 4.5 ± 1.2 a frame among noise maxima 0.4 × the smooth field's (as fitted on faint 2D
    # data like the ISBI 2012 challenge's, SNR 2): the range's F1 maximum is its floor, 3.5; the spots outnumber
    # the noise maxima down to ~3 (the best level on the labels: 2.9).
    frames, labels = _frames(10, 200_000, 0.4, 150, 4.5, 1.2, seed=seed)
    n_spots = sum(int(lab.sum()) for lab in labels) + 0.0
    fit = fit_quality_mixture(frames)
    args = (frames, fit.noise_excess, fit.n_spots, fit.spot_mean, fit.spot_spread)
    assert quality_mixture.mixture_threshold(*args, floor=False) == threshold.THRESHOLD_RANGE[0]
    assert quality_mixture.FIT_FLOOR < fit.threshold < threshold.THRESHOLD_RANGE[0]
    assert _f1(frames, labels, n_spots, fit.threshold) > _f1(frames, labels, n_spots, 3.5) + 0.02
    best = max(_f1(frames, labels, n_spots, u) for u in np.arange(quality_mixture.FIT_FLOOR, 5.0, 0.05))
    assert _f1(frames, labels, n_spots, fit.threshold) >= best - 0.01
    # Not below the level where the fitted noise maxima outnumber the spots.
    levels = np.round(np.arange(quality_mixture.FIT_FLOOR, 8.0 + 1e-9, 0.05), 2)
    noise = fit.noise_excess * sum(f.noise_maxima(levels) for f in frames)
    spots = fit.n_spots * norm.sf(levels, fit.spot_mean, fit.spot_spread)
    assert fit.threshold >= quality_mixture.even_level(levels, noise, spots, fit.spot_mean)
    assert str(fit).startswith(f"threshold: {fit.threshold:.2f} in every frame (the maxima of 10 frames pooled")


@pytest.mark.parametrize("excess, spots_per_frame, mean", [(1.2, 10, 4.0), (1.8, 10, 5.0), (0.5, 50, 9.0)])
def test_the_floor_moves_only_where_the_range_s_maximum_is_at_it(excess, spots_per_frame, mean):
    frames, _ = _frames(10, 500_000, excess, spots_per_frame, mean, 0.9, seed=5)
    fit = fit_quality_mixture(frames)
    args = (frames, fit.noise_excess, fit.n_spots, fit.spot_mean, fit.spot_spread)
    in_range = quality_mixture.mixture_threshold(*args, floor=False)
    assert fit.threshold <= in_range
    if in_range > threshold.THRESHOLD_RANGE[0]:
        assert fit.threshold == in_range


def test_detection_keeps_maxima_under_the_range_down_to_the_stack_threshold():
    # A faint 2D frame (SNR 2 spots, 0.1 µm pixels): the maxima between the stack's threshold (3.1) and the range's
    # floor are found (the search for maxima starts at the lower of the two).
    truth = simulate.simulate_tracks(150, 1, (1.0, 25.6, 25.6), 0.5, margin_um=0.0, seed=2)
    truth["z"] = np.zeros(len(truth["z"]))
    voxel = (1.0, 0.1, 0.1)
    frame = simulate.render_stack(truth, (1, 1, 256, 256), voxel, (1.0, 0.15, 0.15), snr=2.0, seed=4)[0]
    radius = (0.26, 0.26)
    low = detect_spots(frame, voxel, radius, stack_threshold=3.1)
    default = detect_spots(frame, voxel, radius)
    assert low["quality"].min() >= 3.1 and np.any(low["quality"] < 3.5)
    assert default["quality"].min() >= 3.5 and len(low["z"]) > len(default["z"])


def test_a_filter_too_fine_to_fit_is_named_in_the_summary():
    # (threshold_from_maxima's answer for TOO_FINE frames fits no frame: not "the maxima of 0 frames pooled")
    too_fine = quality_mixture.threshold_from_maxima([quality_mixture.TOO_FINE, quality_mixture.TOO_FINE])
    assert too_fine.n_frames == 0 and "too fine for the pooled fit" in str(too_fine)
