"""tracker.detect_gpu: each step the CPU's result from the same input, and no kernel compiled at first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tracker import detect, dog, simulate, spot_scale

pytestmark = pytest.mark.gpu

VOXEL = (0.4, 0.15, 0.15)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _frame(seed=0, n=40, shape=(15, 91, 91)):
    truth = simulate.simulate_tracks(n, 1, (5.6, 13.5, 13.5), 0.3, margin_um=0.0, seed=seed)
    return simulate.render_stack(truth, (1, *shape), VOXEL, (0.45, 0.18, 0.18), snr=6.0, seed=seed)[0]


@pytest.mark.parametrize("dtype", ["uint16", "uint8", "int32", "float64", "float32"])
def test_as_float32_of_strided_views(cp, dtype):
    from tracker import detect_gpu

    host = (np.random.default_rng(1).random((9, 20, 31)) * 200).astype(dtype)
    for view in (np.s_[:, :, :], np.s_[1::2, :, 3:], np.s_[:, ::3, ::2]):
        ours = detect_gpu.as_float32(cp.asarray(host)[view])
        assert ours.dtype == np.float32 and ours.flags.c_contiguous
        np.testing.assert_array_equal(ours.get(), host[view].astype(np.float32))


def test_inspect_finds_non_finite_and_constant_frames(cp):
    from tracker import detect_gpu

    volume = np.full((4, 5, 6), 7.0, dtype=np.float32)
    assert detect_gpu.inspect(cp.asarray(volume)) == (True, True)
    volume[3, 4, 5] = 8.0
    assert detect_gpu.inspect(cp.asarray(volume)) == (True, False)
    volume[0, 0, 1] = np.inf
    assert detect_gpu.inspect(cp.asarray(volume)) == (False, False)
    assert detect_gpu.inspect(cp.asarray(np.zeros((2, 3, 4), np.uint16))) == (True, True)
    assert detect_gpu.inspect(cp.asarray(np.arange(24, dtype=np.uint16).reshape(2, 3, 4))[:, :1, :1]) == (True, False)


@pytest.mark.parametrize("shape", [(15, 91, 91), (1, 64, 80), (7, 9, 300)])
def test_quality_map_and_noise_are_the_cpus_bits(cp, shape):
    rng = np.random.default_rng(len(shape))
    response = (rng.normal(3.0, 2.0, shape) + 5.0 * (rng.random(shape) > 0.999)).astype(np.float32)
    sigma = (1.2, 1.5, 1.5) if shape[0] > 1 else (0.0, 1.5, 1.5)
    assert dog.noise_level(cp.asarray(response)) == dog.noise_level(response)
    cpu = dog.quality_map(response, sigma)
    gpu = dog.quality_map(cp.asarray(response), sigma)
    np.testing.assert_array_equal(gpu.get(), cpu)
    np.testing.assert_array_equal(dog.gradient_variance(cp.asarray(cpu)), dog.gradient_variance(cpu))
    assert dog.sample_median(cp.asarray(cpu)) == dog.sample_median(cpu)
    assert dog.quality_map(cp.zeros(shape, dtype=cp.float32), sigma) is None


def test_local_maxima_values_and_offsets_are_the_cpus(cp):
    volume = _frame()
    sigma = detect.spot_sigma_voxels((0.8, 0.3, 0.3), VOXEL)
    _, response = dog.smoothed_and_dog(volume, sigma)
    quality = dog.quality_map(response, sigma)
    other = np.roll(quality, 1, axis=2)
    # (1, 1, 1): every voxel above the floor, more than the first buffer holds
    for size, floor, second in (((3, 5, 5), 3.5, None), ((1, 1, 1), -1.0, None), ((3, 5, 5), 3.0, other)):
        coords, values = detect.local_maxima(quality, size, floor, second)
        gpu_coords, gpu_values = detect.local_maxima(cp.asarray(quality), size, floor,
                                                     None if second is None else cp.asarray(second))
        np.testing.assert_array_equal(gpu_coords, coords)
        np.testing.assert_array_equal(gpu_values, values)
        assert len(coords) > 20
        np.testing.assert_array_equal(detect.values_at(cp.asarray(quality), coords), quality[tuple(coords.T)])
        np.testing.assert_array_equal(detect.quadratic_offsets(cp.asarray(quality), coords),
                                      detect.quadratic_offsets(quality, coords))
    edges = np.array([[0, 0, 0], [14, 90, 90], [0, 45, 90], [7, 0, 3]])
    np.testing.assert_array_equal(detect.quadratic_offsets(cp.asarray(quality), edges),
                                  detect.quadratic_offsets(quality, edges))


def test_profiles_are_the_cpus_sums(cp):
    volume = _frame(seed=2).astype(np.float32)
    fit = volume[:, 1::2, :]  # a half frame, as spot_scale fits it
    coords = np.array([[7, 20, 45], [0, 0, 0], [14, 44, 90], [3, 10, 2]])
    sigma = np.array([1.1, 0.8, 1.6])
    cpu = spot_scale._profiles(fit, coords, sigma)
    gpu = spot_scale._profiles(cp.asarray(volume)[:, 1::2, :], coords, sigma)
    for ours, theirs in zip(gpu, cpu):
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
        np.testing.assert_array_equal(ours[1], theirs[1])
        np.testing.assert_array_equal(ours[2], theirs[2])


_COLD = textwrap.dedent("""
    import json, sys, numpy as np
    import cupy, cupy.cuda.compiler as compiler
    from tracker import detect, simulate, spot_scale
    from tracker.pipeline import _detect_volume
    callers = []
    compile_ = compiler._NVRTCProgram.compile
    def counted(self, *args, **kwargs):
        import traceback
        callers.append([f"{f.filename}:{f.lineno}" for f in traceback.extract_stack() if "/tracker/" in f.filename][-1:])
        return compile_(self, *args, **kwargs)
    compiler._NVRTCProgram.compile = counted
    truth = simulate.simulate_tracks(150, 2, (6.0, 16.0, 16.0), 0.1, margin_um=0.0, seed=6)
    stack = simulate.render_stack(truth, (2, 13, 81, 81), (0.5, 0.2, 0.2), (0.6, 0.2, 0.2), snr=8.0, seed=6)
    frames = [cupy.asarray(frame) for frame in stack]
    scale = spot_scale.estimate_spot_radius(frames, (0.5, 0.2, 0.2))
    found = [_detect_volume(frame, t, (0.5, 0.2, 0.2), {"spot_radius_um": scale.radius_um, "threshold": None})
             for t, frame in enumerate(frames)]
    detect.detect_spots(frames[0].astype(cupy.float32), (0.5, 0.2, 0.2), 0.6, threshold=5.0)
    print(json.dumps({"spots": [len(f[0]["z"]) for f in found], "callers": callers}))
""")


def test_a_fresh_machine_compiles_no_kernel_for_detection(cp, tmp_path):
    """Spot size, detection (automatic threshold, split spots), the input checks: nothing for NVRTC."""
    environment = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-c", _COLD], env=environment, capture_output=True, text=True,
                         check=True, cwd=REPO)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert min(result["spots"]) > 50
    ours = [c for c in result["callers"] if c and any(name in c[0] for name in (
        "dog.py", "detect.py", "spot_scale.py", "detect_gpu.py", "ndimage_gpu.py", "pipeline.py"))]
    assert ours == []
