"""The pipeline's boundary: parameters checked by the model before any work, as keywords or objects."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tracker import validation
from tracker.errors import InputError
from tracker.params import DetectionParams, LinkingParams
from tracker.pipeline import detect_stack, track_stack
from tracker.simulate import render_stack, simulate_tracks
from tracker.stack import as_stack
from tracker.validation import InputWarning

VOXEL = (0.4, 0.15, 0.15)


@pytest.fixture(scope="module")
def stack():
    shape = (8, 10, 48, 48)
    field_of_view = tuple((n - 1) * v for n, v in zip(shape[1:], VOXEL))
    truth = simulate_tracks(15, shape[0], field_of_view, 0.3, 0.5, seed=3)
    return as_stack(render_stack(truth, shape, VOXEL, (0.45, 0.18, 0.18), snr=6, seed=4), VOXEL)


@pytest.mark.parametrize("keyword, value, message", [
    ("max_displacement_um", -1.0, "--max-displacement must be > 0"),
    ("persistence", 1.5, "--persistence must be in [0, 1]"),
    ("motion", "brownian", "--motion must be one of persistent, none"),
    ("max_gap", 2.5, "--max-gap must be a whole number"),
    ("spot_radius_um", 0.0, "--spot-radius must be > 0"),
    ("device", "tpu", "--device must be one of"),
])
def test_bad_parameters_fail_before_any_work(stack, keyword, value, message):
    calls = []
    with pytest.raises(ValueError) as error:
        track_stack(stack, progress=lambda *args: calls.append(args), **{keyword: value})
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not calls  # not one frame detected


def test_parameter_objects_equal_keywords(stack):
    keywords = {"spot_radius_um": (0.8, 0.3, 0.3), "threshold": 5.0, "device": "cpu", "max_displacement_um": 1.2,
                "max_gap": 1, "smoothing": False, "solver": "scipy"}
    by_keywords = track_stack(stack, **keywords)
    by_objects = track_stack(stack, detection=DetectionParams(spot_radius_um=(0.8, 0.3, 0.3), threshold=5.0,
                                                              device="cpu"),
                             linking=LinkingParams(max_displacement_um=1.2, max_gap=1, smoothing=False,
                                                   solver="scipy"))
    assert len(by_keywords.tracks["frame"]) > 20
    for name in by_keywords.tracks:
        np.testing.assert_array_equal(by_keywords.tracks[name], by_objects.tracks[name])
    # threshold=None is the default threshold, as in tracker.detect
    np.testing.assert_array_equal(detect_stack(stack, None, None, device="cpu")["z"],
                                  detect_stack(stack, detection=DetectionParams(device="cpu"))["z"])


def test_object_and_differing_keywords_are_refused(stack):
    with pytest.raises(ValueError, match="either as a LinkingParams or as keywords, not both \\(max_gap\\)"):
        track_stack(stack, linking=LinkingParams(), max_gap=0)
    with pytest.raises(TypeError, match="DetectionParams"):
        track_stack(stack, detection=LinkingParams())
    track_stack(stack, linking=LinkingParams(solver="scipy"), max_gap=LinkingParams().max_gap, device="cpu")


class OutOfMemoryError(MemoryError):
    """Stands for ``cupy.cuda.memory.OutOfMemoryError`` (recognised by its module and name)."""


OutOfMemoryError.__module__ = "cupy.cuda.memory"


class GpuWithoutMemory:
    """A stand-in for CuPy whose every allocation runs out of memory."""

    def __init__(self):
        self.freed = 0

    def asarray(self, array):
        raise OutOfMemoryError("Out of memory allocating 92,160 bytes (allocated so far: 0 bytes).")

    def get_default_memory_pool(self):
        return self

    def free_all_blocks(self):
        self.freed += 1


def test_a_gpu_out_of_memory_falls_back_to_the_cpu_or_says_so(stack, monkeypatch):
    expected = detect_stack(stack, detection=DetectionParams(device="cpu"))
    gpu = GpuWithoutMemory()
    monkeypatch.setattr("tracker.pipeline.resolve_device", lambda device: np if device == "cpu" else gpu)
    with pytest.warns(InputWarning, match="the GPU ran out of memory detecting frame 0 \\(10 × 48 × 48 voxels\\): "
                                          "detecting it and the rest on the CPU"):
        detections = detect_stack(stack, detection=DetectionParams(device="auto"))
    for name in expected:
        np.testing.assert_array_equal(detections[name], expected[name])
    with pytest.raises(InputError, match="^the GPU ran out of memory detecting frame 0 \\(10 × 48 × 48 voxels\\): "
                                         "use --device cpu"):
        detect_stack(stack, detection=DetectionParams(device="gpu"))
    assert gpu.freed == 2


@pytest.mark.gpu
def test_a_real_gpu_out_of_memory(stack):
    cupy = pytest.importorskip("cupy")
    pool = cupy.get_default_memory_pool()
    limit = pool.get_limit()
    pool.free_all_blocks()
    pool.set_limit(size=64 * 1024)  # a float32 frame of 10 × 48 × 48 voxels needs 90 KiB
    try:
        with pytest.raises(InputError, match="the GPU ran out of memory detecting frame 0"):
            detect_stack(stack, detection=DetectionParams(device="gpu"))
        with pytest.warns(InputWarning, match="the GPU ran out of memory"):
            detections = detect_stack(stack, detection=DetectionParams(device="auto"))
    finally:
        pool.set_limit(size=limit)
    expected = detect_stack(stack, detection=DetectionParams(device="cpu"))
    np.testing.assert_array_equal(detections["z"], expected["z"])


def test_the_gate_and_the_detection_scale_are_checked_before_their_work(stack, monkeypatch):
    calls = []
    with pytest.raises(InputError, match="--spot-radius 0.5 µm is 5e\\+08 voxels"):
        track_stack(as_stack(stack.data, (1e-9, 1e-9, 1e-9)), spot_radius_um=0.5,
                    progress=lambda *args: calls.append(args))
    assert not calls
    monkeypatch.setattr("tracker.linking.linker.check_gate", functools.partial(validation.check_gate, budget=1024))
    with pytest.raises(InputError, match="--max-displacement 1e\\+09 µm admits about"):
        track_stack(stack, spot_radius_um=(0.8, 0.3, 0.3), max_displacement_um=1e9, device="cpu",
                    progress=lambda *args: calls.append(args))
    assert {call[0] for call in calls} == {"estimate", "detect"}  # (the threshold) detected, not linked
