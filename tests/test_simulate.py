import numpy as np
import pytest

from tracker import simulate


def test_tracks_are_deterministic_and_inside_the_field_of_view():
    a = simulate.simulate_tracks(30, 10, (5.0, 10.0, 10.0), 0.5, seed=4)
    b = simulate.simulate_tracks(30, 10, (5.0, 10.0, 10.0), 0.5, seed=4)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    for axis, extent in zip("zyx", (5.0, 10.0, 10.0)):
        assert a[axis].min() >= 0 and a[axis].max() <= extent


@pytest.mark.parametrize("persistence", [0.0, 0.5, 0.9])
def test_step_size_and_persistence(persistence):
    truth = simulate.simulate_tracks(400, 30, (50.0, 50.0, 50.0), 0.5, persistence, margin_um=0.0, seed=1)
    # Velocities of consecutive points of each track (no re-entry gaps without a margin... use same id).
    order = np.lexsort((truth["frame"], truth["track_id"]))
    xyz = np.column_stack([truth[c] for c in "zyx"])[order]
    same = np.diff(truth["track_id"][order]) == 0
    v = np.diff(xyz, axis=0)[same]
    rms = np.sqrt(np.mean(np.sum(v**2, axis=1)))
    assert 0.4 < rms < 0.6
    # Lag-1 velocity correlation ≈ persistence.
    v_all = np.diff(xyz, axis=0)
    ok = same[1:] & same[:-1]
    a, b = v_all[:-1][ok], v_all[1:][ok]
    correlation = np.sum(a * b) / np.sqrt(np.sum(a * a) * np.sum(b * b))
    assert abs(correlation - persistence) < 0.1


def test_blinking_births_and_deaths():
    truth = simulate.simulate_tracks(200, 20, (10.0, 10.0, 10.0), 0.3, birth_rate=0.05, death_rate=0.05,
                                     blink_probability=0.2, seed=2)
    assert 0.15 < 1 - truth["visible"].mean() < 0.25
    assert len(np.unique(truth["track_id"])) > 200


def test_invalid_parameters():
    with pytest.raises(ValueError):
        simulate.simulate_tracks(persistence=1.5)


def test_render_places_spots_at_the_true_positions():
    truth = {"track_id": np.array([0]), "frame": np.array([0]), "z": np.array([2.0]), "y": np.array([3.0]),
             "x": np.array([1.5]), "visible": np.array([True])}
    stack = simulate.render_stack(truth, (1, 10, 20, 20), (0.5, 0.25, 0.25), snr=50, seed=0)
    assert stack.dtype == np.uint16 and stack.shape == (1, 10, 20, 20)
    peak = np.unravel_index(np.argmax(stack[0]), stack.shape[1:])
    assert peak == (4, 12, 6)


def test_render_in_chunks_matches_render_at_once(monkeypatch):
    truth = simulate.simulate_tracks(40, 2, (4.0, 6.0, 6.0), 0.3, seed=3)
    at_once = simulate.render_stack(truth, (2, 10, 24, 24), (0.5, 0.25, 0.25), seed=1)
    monkeypatch.setattr(simulate, "RENDER_CHUNK_ELEMENTS", 1)  # one particle per chunk
    in_chunks = simulate.render_stack(truth, (2, 10, 24, 24), (0.5, 0.25, 0.25), seed=1)
    assert np.array_equal(at_once, in_chunks)


def test_gated_frame_pair_is_a_gated_linking_problem():
    rows, cols, cost, shape, no_link = simulate.gated_frame_pair(2000, 0.3, seed=4)
    assert shape == (2000, 1940) and rows.dtype == cols.dtype == np.int64
    assert rows.max() < shape[0] and cols.max() < shape[1] and np.all(cost >= 0)
    assert no_link == pytest.approx(1.05 * cost.max())
    # most particles keep a candidate: the gate is 3 RMS steps
    assert len(np.unique(rows)) > 0.9 * shape[1]
    again = simulate.gated_frame_pair(2000, 0.3, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip((rows, cols, cost), again[:3]))


def test_mobility_classes():
    truth = simulate.simulate_tracks(400, 12, (30.0, 30.0, 30.0), step_um=(0.1, 0.5), persistence=0.0,
                                     margin_um=0.0, seed=2)
    ids, frames = truth["track_id"], truth["frame"]
    positions = np.stack([truth[axis] for axis in "zyx"], axis=1)
    same = (ids[1:] == ids[:-1]) & (frames[1:] == frames[:-1] + 1)
    step_sq = np.sum(np.diff(positions, axis=0) ** 2, axis=1)[same]
    per_track = np.bincount(ids[1:][same], step_sq) / np.maximum(np.bincount(ids[1:][same]), 1)
    rms = np.sqrt(np.sort(per_track[np.bincount(ids[1:][same]) >= 8]))
    assert 0.08 < rms[: len(rms) // 3].mean() < 0.12  # the slow half
    assert 0.42 < rms[-len(rms) // 3:].mean() < 0.58  # the fast half
    with pytest.raises(ValueError, match="step_um"):
        simulate.simulate_tracks(5, 2, step_um=(0.1, -1.0))


def test_camera_render_integrates_photons_over_voxels():
    truth = {"frame": np.array([0, 0]), "z": np.array([2.0, 2.0]), "y": np.array([2.0, 4.04]),
             "x": np.array([2.0, 2.52])}
    voxel = (0.3, 0.1, 0.1)
    for psf, size in (("gaussian", (0.35, 0.15, 0.15)), ("confocal", (0.6, 0.16, 0.16))):
        stack = simulate.render_camera_stack(truth, (1, 14, 61, 61), voxel, psf, size, photons=20000,
                                             background_photons=0.0, read_noise_e=0.0, gain=1.0, offset=0.0)
        assert stack.dtype == np.uint16
        assert int(stack.sum()) == pytest.approx(2 * 20000, rel=0.02)  # all photons land (shot noise aside)
        second = stack[0, :, 30:, :].astype(np.float64)  # the spot at y = 4.04
        grid = np.indices(second.shape).astype(np.float64)
        centre = [(second * g).sum() / second.sum() for g in grid]
        np.testing.assert_allclose(np.array(centre) * voxel + (0, 3.0, 0), (2.0, 4.04, 2.52), atol=0.02)
    with pytest.raises(ValueError, match="psf"):
        simulate.render_camera_stack(truth, (1, 5, 5, 5), voxel, "airy")


def test_camera_render_noise_offset_and_gain():
    stack = simulate.render_camera_stack({"frame": np.array([], int), "z": np.array([]), "y": np.array([]),
                                          "x": np.array([])}, (2, 8, 64, 64), (0.3, 0.1, 0.1),
                                         background_photons=10.0, read_noise_e=1.5, gain=2.0, offset=100.0, seed=3)
    assert stack.mean() == pytest.approx(100 + 2 * 10, abs=0.1)
    assert stack.std() == pytest.approx(2 * np.sqrt(10 + 1.5**2), rel=0.03)
    again = simulate.render_camera_stack({"frame": np.array([], int), "z": np.array([]), "y": np.array([]),
                                          "x": np.array([])}, (2, 8, 64, 64), (0.3, 0.1, 0.1),
                                         background_photons=10.0, read_noise_e=1.5, gain=2.0, offset=100.0, seed=3)
    assert np.array_equal(stack, again)


def test_confocal_psf_and_its_gaussian_equivalent():
    width = (0.6, 0.16, 0.16)
    assert simulate.confocal_psf(np.zeros(3), width) == pytest.approx(1.0)
    assert simulate.confocal_psf(np.array([np.pi * 0.6, 0, 0]), width) == pytest.approx(0.0, abs=1e-12)
    sigma = simulate.gaussian_equivalent_sigma(width)
    np.testing.assert_allclose(sigma / np.asarray(width), (0.84, 0.97, 0.97), atol=0.02)
