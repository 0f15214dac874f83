import numpy as np
import pytest
from scipy.spatial import cKDTree

from tracker import detect, simulate

VOXEL = (0.4, 0.15, 0.15)


def _frame(snr, seed=0, n=30):
    truth = simulate.simulate_tracks(n, 1, (5.6, 13.5, 13.5), 0.3, margin_um=0.0, seed=seed)
    stack = simulate.render_stack(truth, (1, 15, 91, 91), VOXEL, (0.45, 0.18, 0.18), snr=snr, seed=seed)
    return truth, stack[0]


@pytest.mark.parametrize("snr", [4.0, 8.0])
def test_detects_simulated_spots_with_sub_voxel_accuracy(snr):
    truth, volume = _frame(snr)
    found = detect.detect_spots(volume, VOXEL, (0.8, 0.3, 0.3))
    true_xyz = np.column_stack([truth[c] for c in "zyx"])
    found_xyz = np.column_stack([found[c] for c in "zyx"])
    distance, _ = cKDTree(found_xyz).query(true_xyz)
    assert np.mean(distance < 0.5) >= 0.95  # recall
    distance, index = cKDTree(true_xyz).query(found_xyz)
    assert np.mean(distance < 0.5) >= 0.95  # precision
    error = found_xyz[distance < 0.5] - true_xyz[index[distance < 0.5]]
    assert np.sqrt(np.mean(error[:, 1:] ** 2)) < 0.5 * VOXEL[1]  # sub-voxel in x, y
    np.testing.assert_allclose(found["z"], found["z_vox"] * VOXEL[0])
    assert np.all(np.diff(found["quality"]) <= 0)


def test_threshold_and_determinism():
    _, volume = _frame(6.0, seed=3)
    a = detect.detect_spots(volume, VOXEL, 0.5)
    b = detect.detect_spots(volume.copy(), VOXEL, 0.5)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    strict = detect.detect_spots(volume, VOXEL, 0.5, threshold=20)
    assert len(strict["z"]) < len(a["z"]) and np.all(strict["quality"] >= 20)


def test_constant_and_empty_volumes():
    for volume in (np.zeros((5, 20, 20)), np.full((5, 20, 20), 7.0)):
        table = detect.detect_spots(volume, VOXEL, 0.5)
        assert len(table["z"]) == 0 and set(table) >= {"frame", "z", "y", "x", "intensity", "quality"}


def test_single_plane_volume():
    volume = np.full((1, 40, 40), 100.0)
    volume[0, 20, 10] += 500
    table = detect.detect_spots(volume + np.random.default_rng(0).normal(0, 1, volume.shape), (1, 0.1, 0.1), 0.2)
    assert len(table["z"]) == 1 and table["y_vox"][0] == pytest.approx(20, abs=0.3)


def test_rejects_nan_and_wrong_shape():
    with pytest.raises(ValueError, match="NaN"):
        detect.detect_spots(np.full((3, 5, 5), np.nan), VOXEL, 0.5)
    with pytest.raises(ValueError, match="Z, Y, X"):
        detect.detect_spots(np.zeros((5, 5)), VOXEL, 0.5)
