"""Checks at the core's boundary (tracker/validation.py): frame numbers, positions, duplicates, memory estimates."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

from tracker.errors import InputError
from tracker.validation import (
    CANDIDATE_BYTES, FRAME_LIMIT, InputWarning, available_memory, check_detection_scale, check_detections,
    check_gate, check_memory, format_bytes, gate_candidates, memory_budget,
)


def table(frames, n_columns=3) -> dict[str, np.ndarray]:
    frames = np.asarray(frames)
    rng = np.random.default_rng(0)
    return {"frame": frames, **{name: rng.random(len(frames)) for name in "zyx"[3 - n_columns:]}}


def test_integral_float_frames_become_int64():
    checked = check_detections(table([0.0, 1.0, 2.0, -3.0]))
    assert checked["frame"].dtype == np.int64
    np.testing.assert_array_equal(checked["frame"], [0, 1, 2, -3])


@pytest.mark.parametrize("frame, shown", [
    (0.5, "0.5"), (np.nan, "nan"), (np.inf, "inf"), (1e20, "1e+20"), (float(2**31), "2147483648.0"),
])
def test_bad_float_frames_are_refused(frame, shown):
    with pytest.raises(InputError, match=re.escape(f"frame numbers must be whole numbers with |frame| < 2**31, got "
                                                   f"{shown} at row 2")):
        check_detections(table([0.0, frame, 1.0]), what="det.csv")


def test_wrapped_int64_frames_are_refused():
    """``1e20`` read through a cast to int64 arrives as -2**63: refused, not linked as a frame."""
    with pytest.raises(InputError, match="-9223372036854775808 at row 1"):
        check_detections(table(np.array([np.iinfo(np.int64).min, 0])))
    edge = check_detections(table(np.array([-(FRAME_LIMIT - 1), FRAME_LIMIT - 1])))
    np.testing.assert_array_equal(edge["frame"], [-(FRAME_LIMIT - 1), FRAME_LIMIT - 1])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=5))
def test_float_frames_accepted_exactly_when_whole_and_in_range(frames):
    whole = all(np.isfinite(f) and f == round(f) and abs(f) < FRAME_LIMIT for f in frames)
    if whole:
        checked = check_detections(table(np.array(frames, dtype=np.float64)), drop_duplicates=False)
        np.testing.assert_array_equal(checked["frame"], np.array(frames).astype(np.int64))
    else:
        with pytest.raises(InputError, match="frame numbers must be whole numbers"):
            check_detections(table(np.array(frames, dtype=np.float64)))


@pytest.mark.parametrize("column, value, message", [
    ("x", np.nan, "column 'x' has missing or non-finite values (first at row 2)"),
    ("y", np.inf, "column 'y' has missing or non-finite values (first at row 2)"),
])
def test_non_finite_positions_are_refused(column, value, message):
    detections = table([0, 0, 1])
    detections[column][1] = value
    with pytest.raises(InputError, match=re.escape(message)):
        check_detections(detections)


def test_strings_missing_columns_and_ragged_tables_are_refused():
    detections = table([0, 1])
    detections["z"] = np.array(["a", "b"], dtype=object)
    with pytest.raises(InputError, match="column 'z' must hold numbers"):
        check_detections(detections)
    with pytest.raises(InputError, match="tracks is missing column\\(s\\): frame"):
        check_detections({"z": np.zeros(1), "y": np.zeros(1), "x": np.zeros(1)}, what="tracks")
    ragged = table([0, 1])
    ragged["x"] = np.zeros(3)
    with pytest.raises(InputError, match="different lengths"):
        check_detections(ragged)


def test_duplicated_rows_are_dropped_with_a_warning():
    detections = {"frame": np.array([0, 0, 1, 0, 1]), "z": np.array([1.0, 2.0, 3.0, 1.0, 3.0]),
                  "y": np.zeros(5), "x": np.zeros(5), "intensity": np.arange(5.0)}
    with pytest.warns(InputWarning, match=r"det: 2 duplicated row\(s\) .* first at row 4\) dropped"):
        checked = check_detections(detections, what="det")
    np.testing.assert_array_equal(checked["intensity"], [0, 1, 2])  # the first of each, in order
    kept = check_detections(detections, drop_duplicates=False)
    assert len(kept["frame"]) == 5


def test_clean_tables_pass_quietly_and_2d_tables_work():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checked = check_detections(table([0, 1, 2], n_columns=2))
        empty = check_detections({"frame": np.empty(0), "z": np.empty(0), "y": np.empty(0), "x": np.empty(0)})
    assert set(checked) == {"frame", "y", "x"}
    assert empty["frame"].dtype == np.int64 and len(empty["frame"]) == 0


def uniform_frames(n_per_frame: int, n_frames: int, side: float, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = n_per_frame * n_frames
    return {"frame": np.repeat(np.arange(n_frames), n_per_frame), **{a: rng.random(n) * side for a in "zyx"}}


@pytest.mark.parametrize("radius", [2.0, 5.0, 20.0, 1e9])
def test_gate_estimate_bounds_the_true_candidates(radius):
    """Within [1, 2.2] times the candidate pairs actually inside the gate (the cube bounds the ball)."""
    detections = uniform_frames(1000, 2, 50.0)
    estimate, n_first, n_second = gate_candidates(detections, radius)
    points = np.column_stack([detections[a] for a in "zyx"])
    first, second = points[:1000], points[1000:]
    true = cKDTree(first).count_neighbors(cKDTree(second), radius)
    assert (n_first, n_second) == (1000, 1000)
    assert true <= estimate <= 2.2 * true


def test_a_gate_too_large_for_memory_is_refused_with_a_value_that_fits():
    detections = uniform_frames(2000, 3, 100.0)
    budget = 50 * 1024**2
    check_gate(detections, 5.0, budget=budget)  # 2000² × (0.1)³ × 140 B: 0.5 MiB
    with pytest.raises(InputError) as refused:
        check_gate(detections, 1e9, budget=budget)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("--max-displacement 1e+09 µm admits about 4e+06 candidate links between two frames "
                              "of 2000 and 2000 points, ~534 MiB of memory, more than the 50 MiB")
    suggested = float(re.search(r"give --max-displacement ([0-9.e+]+) or less", message).group(1))
    check_gate(detections, suggested, budget=budget)
    assert gate_candidates(detections, suggested)[0] * CANDIDATE_BYTES <= budget
    with pytest.raises(InputError):
        check_gate(detections, suggested * 1.2, budget=budget)


def test_gate_of_one_frame_or_none():
    check_gate(uniform_frames(10, 1, 1.0), 1e9, budget=1)
    check_gate({"frame": np.empty(0), "z": np.empty(0), "y": np.empty(0), "x": np.empty(0)}, 1e9, budget=1)


def test_a_voxel_size_in_the_wrong_unit_is_refused():
    with pytest.raises(InputError, match=re.escape(
            "--spot-radius 0.5 µm is 5e+08 voxels along z at a voxel size of 1e-09 µm, more than the volume's 8 "
            "voxels: check --spot-radius and --voxel-size (both in µm)")):
        check_detection_scale((8, 32, 32), (1e-9, 1e-9, 1e-9), 0.5)
    with pytest.raises(InputError, match="--spot-radius 100 µm is 667 voxels along y"):
        check_detection_scale((1, 32, 32), (0.4, 0.15, 0.15), 100.0)  # (one plane: z is not filtered)


def test_a_spot_under_half_a_voxel_warns():
    with pytest.warns(InputWarning, match="--spot-radius 1e-06 µm is under half a voxel"):
        check_detection_scale((8, 32, 32), (0.4, 0.15, 0.15), 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_detection_scale((8, 32, 32), (0.4, 0.15, 0.15), (0.8, 0.3, 0.3))


def test_a_frame_too_large_to_filter_is_refused():
    with pytest.raises(InputError, match="detecting spots in a frame of 2000 × 2000 × 2000 voxels would need about "
                                         "358 GiB of memory, more than the 1 GiB this machine can spare: crop or "
                                         "bin the stack"):
        check_detection_scale((2000, 2000, 2000), (0.4, 0.15, 0.15), 0.5, budget=1024**3)


def test_memory_helpers():
    assert 0 < memory_budget() < available_memory()
    assert format_bytes(1.5 * 1024**3) == "1.5 GiB" and format_bytes(12) == "12 bytes"
    check_memory(10, "ten bytes", "never", budget=10)
    with pytest.raises(InputError, match="^x would need about 2 KiB of memory, more than the 1 KiB this machine "
                                         "can spare: smaller$"):
        check_memory(2048, "x", "smaller", budget=1024)


@pytest.mark.parametrize("arguments, message", [
    ({"blink_probability": 1.5}, "--blink must be in [0, 1], got 1.5"),
    ({"death_rate": 2.0}, "--death-rate must be in [0, 1], got 2.0"),
    ({"birth_rate": -1.0}, "--birth-rate must be >= 0, got -1.0"),
    ({"persistence": float("nan")}, "--persistence must be a finite number, got nan"),
    ({"n_frames": 0}, "--frames must be >= 1, got 0"),
    ({"n_particles": 2.5}, "--particles must be a whole number, got 2.5"),
    ({"seed": -1}, "--seed must be >= 0, got -1"),
    ({"field_of_view_um": (1.0, np.inf, 1.0)}, "field_of_view_um must be three non-negative numbers"),
    ({"n_particles": 10**12}, "simulating 1000000000000 particles over 20 frames would need about"),
])
def test_simulation_arguments_are_checked(arguments, message):
    from tracker.simulate import simulate_tracks

    with pytest.raises(ValueError, match=re.escape(message)):
        simulate_tracks(**arguments)


@pytest.mark.parametrize("arguments, message", [
    ({"snr": 0.0}, "--snr must be > 0, got 0.0"),
    ({"shape": (1, 4, 8)}, "shape must be four positive whole numbers (T, Z, Y, X)"),
    ({"shape": (1, 4, 8, 8.5)}, "shape must be four positive whole numbers"),
    ({"voxel_size_um": (1e-9, 1e-9, 1e-9)}, "--psf-sigma 0.6 µm is 6e+08 voxels along z"),
    ({"psf_sigma_um": (0.6, -1, 0.2)}, "--psf-sigma must be three positive numbers"),
    ({"shape": (2, 2000, 2000, 2000)}, "rendering 2 frames of 2000 × 2000 × 2000 voxels would need about"),
])
def test_render_arguments_are_checked(arguments, message):
    from tracker.simulate import render_stack

    truth = {"frame": np.array([0]), "z": np.array([1.0]), "y": np.array([1.0]), "x": np.array([1.0])}
    keywords = {"shape": (1, 4, 8, 8), "voxel_size_um": (0.4, 0.15, 0.15), **arguments}
    with pytest.raises(ValueError, match=re.escape(message)):
        render_stack(truth, **keywords)


def test_a_dataframe_is_checked_as_a_table():
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"frame": [0.0, 1.0], "z": [1.0, 2.0], "y": [0.0, 0.0], "x": [0.0, 0.0]})
    checked = check_detections(frame)
    assert checked["frame"].dtype == np.int64 and list(checked) == ["frame", "z", "y", "x"]
