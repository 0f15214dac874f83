import numpy as np
import pytest

from tracker import dog


@pytest.mark.parametrize("sigma", [(1.0, 1.0, 1.0), (0.7, 1.5, 1.5), (0.0, 2.0, 2.0)])
def test_relative_noise_is_the_measured_rise_at_the_faces(sigma):
    shape = (1 if sigma[0] == 0 else 12, 40, 40)
    rng = np.random.default_rng(0)
    responses = np.stack([dog.dog_filter(rng.normal(0, 1, shape).astype(np.float32), sigma) for _ in range(300)])
    measured = responses.std(axis=0)
    centre = (shape[0] // 2, slice(16, 24), slice(16, 24))
    measured /= measured[centre].mean()
    relative = dog.relative_noise(shape, sigma)
    assert relative[shape[0] // 2, 20, 20] == pytest.approx(1.0, abs=1e-5)
    faces = [(shape[0] // 2, 0, slice(12, 28)), (shape[0] // 2, 1, slice(12, 28)), (shape[0] // 2, slice(12, 28), 0)]
    if shape[0] > 1:
        faces.append((0, slice(12, 28), 20))
    for index in faces:
        assert measured[index].mean() == pytest.approx(relative[index].mean(), rel=0.04)
    assert relative[shape[0] // 2, 0, 20] > 1.1  # the faces are noisier


def test_quality_has_unit_noise_everywhere():
    rng = np.random.default_rng(1)
    volume = rng.poisson(5.0, (20, 60, 60)).astype(np.float32)
    quality = dog.quality_map(dog.dog_filter(volume, (1.0, 1.5, 1.5)), (1.0, 1.5, 1.5))
    for part in (quality[0], quality[-1], quality[:, 0], quality[:, :, -1], quality[8:12, 20:40, 20:40]):
        assert part.std() == pytest.approx(1.0, abs=0.12)
    assert dog.quality_map(np.zeros((5, 9, 9), np.float32), (1, 1, 1)) is None


def test_expected_noise_maxima_counts_the_maxima_of_smoothed_noise():
    rng = np.random.default_rng(2)
    volume = rng.normal(0, 1, (40, 128, 128)).astype(np.float32)
    quality = dog.quality_map(dog.dog_filter(volume, (1.5, 1.5, 1.5)), (1.5, 1.5, 1.5))
    import scipy.ndimage as ndimage

    peaks = quality == ndimage.maximum_filter(quality, size=3, mode="nearest")
    gradient = dog.gradient_variance(quality)
    for u in (2.5, 3.0, 3.5):
        observed = int(np.sum(peaks & (quality >= u)))
        expected = float(dog.expected_noise_maxima(quality.size, gradient, np.array([u]))[0])
        assert 0.5 * expected < observed < 2.0 * expected
    assert np.all(np.diff(dog.expected_noise_maxima(10**6, gradient, np.linspace(3, 8, 20))) < 0)
    assert dog.expected_noise_maxima(10**6, np.zeros(3), np.array([3.0]))[0] == 0
