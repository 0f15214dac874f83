"""tracker.ndimage_gpu: the same bits as cupyx.scipy.ndimage where it takes over, cupyx's own results elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy")


def _volume(cupy, shape, seed):
    rng = np.random.default_rng(seed)
    return cupy.asarray((rng.gamma(2.0, 50.0, shape) + 100.0).astype(np.float32))


@pytest.mark.parametrize("shape, sigma, truncate", [
    ((16, 96, 96), (0.7, 1.2, 1.2), 4.0),
    ((16, 96, 96), (2.1, 3.6, 3.6), 4.0),  # the DoG's surround: reaches past the short axis
    ((1, 64, 80), (0.0, 1.5, 2.5), 4.0),  # 2D frames: the z axis skipped
    ((5, 7, 300), (0.3, 0.1, 5.0), 3.0),  # radius 0 on an axis: skipped
    ((33, 17, 9), 1.9, 4.0),
    ((4000,), 2.2, 4.0),
])
def test_gaussian_filter_is_cupyx_bit_for_bit(cupy, shape, sigma, truncate):
    import cupyx.scipy.ndimage

    from tracker import ndimage_gpu

    volume = _volume(cupy, shape, seed=len(shape) + int(10 * np.sum(sigma)))
    before = volume.copy()
    ours = ndimage_gpu.gaussian_filter(volume, sigma, mode="nearest", truncate=truncate)
    theirs = cupyx.scipy.ndimage.gaussian_filter(volume, sigma, mode="nearest", truncate=truncate)
    assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours.get(), theirs.get())
    np.testing.assert_array_equal(volume.get(), before.get())  # the input is left alone
    assert ours.data.ptr != volume.data.ptr


@pytest.mark.parametrize("shape, size", [((16, 96, 96), (3, 5, 5)), ((1, 64, 80), [1, 3, 7]), ((9, 8, 7), 4),
                                         ((30, 40, 50), (1, 1, 1))])
def test_maximum_filter_is_cupyx_bit_for_bit(cupy, shape, size):
    import cupyx.scipy.ndimage

    from tracker import ndimage_gpu

    volume = _volume(cupy, shape, seed=7)
    ours = ndimage_gpu.maximum_filter(volume, size=size, mode="nearest")
    theirs = cupyx.scipy.ndimage.maximum_filter(volume, size=size, mode="nearest")
    np.testing.assert_array_equal(ours.get(), theirs.get())
    assert ours.data.ptr != volume.data.ptr


def test_non_contiguous_input(cupy):
    import cupyx.scipy.ndimage

    from tracker import ndimage_gpu

    volume = _volume(cupy, (12, 50, 60), seed=2)[:, ::2, 5:]
    np.testing.assert_array_equal(ndimage_gpu.gaussian_filter(volume, (1.0, 2.0, 0.5), mode="nearest").get(),
                                  cupyx.scipy.ndimage.gaussian_filter(volume, (1.0, 2.0, 0.5), mode="nearest").get())


def test_other_dtypes_and_modes_are_cupyx(cupy):
    import cupyx.scipy.ndimage

    from tracker import ndimage_gpu

    volume = _volume(cupy, (8, 20, 20), seed=3)
    doubles = volume.astype(cupy.float64)
    np.testing.assert_array_equal(ndimage_gpu.gaussian_filter(doubles, 1.3, mode="nearest").get(),
                                  cupyx.scipy.ndimage.gaussian_filter(doubles, 1.3, mode="nearest").get())
    np.testing.assert_array_equal(ndimage_gpu.maximum_filter(volume, size=3).get(),  # mode "reflect"
                                  cupyx.scipy.ndimage.maximum_filter(volume, size=3).get())


def test_detection_uses_it(cupy):
    from tracker import ndimage_gpu
    from tracker.dog import ndimage_for

    assert ndimage_for(cupy) is ndimage_gpu


@pytest.mark.parametrize("n", [1, 2, 17, 18, 20001])
def test_median_is_cupy_median(cupy, n):
    from tracker import ndimage_gpu

    rng = np.random.default_rng(n)
    for values in (rng.normal(size=n).astype(np.float32), rng.integers(0, 5, n).astype(np.float32),
                   rng.normal(size=n)):
        array = cupy.asarray(values)
        ours, theirs = ndimage_gpu.median(array), cupy.median(array)
        assert ours.dtype == theirs.dtype and ours.shape == ()
        assert float(ours) == float(theirs) == float(np.median(values))
    values[n // 2] = np.nan
    assert np.isnan(float(ndimage_gpu.median(cupy.asarray(values))))
