"""The pipeline's boundary: parameters checked by the model before any work, as keywords or objects."""

from __future__ import annotations

import numpy as np
import pytest

from tracker.params import DetectionParams, LinkingParams
from tracker.pipeline import detect_stack, track_stack
from tracker.simulate import render_stack, simulate_tracks
from tracker.stack import as_stack

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
    np.testing.assert_array_equal(detect_stack(stack, 0.5, None, device="cpu")["z"],
                                  detect_stack(stack, detection=DetectionParams(device="cpu"))["z"])


def test_object_and_differing_keywords_are_refused(stack):
    with pytest.raises(ValueError, match="either as a LinkingParams or as keywords, not both \\(max_gap\\)"):
        track_stack(stack, linking=LinkingParams(), max_gap=0)
    with pytest.raises(TypeError, match="DetectionParams"):
        track_stack(stack, detection=LinkingParams())
    track_stack(stack, linking=LinkingParams(solver="scipy"), max_gap=LinkingParams().max_gap, device="cpu")
