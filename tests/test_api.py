"""The Python API with DataFrames (tracker.api, importable from tracker)."""

import subprocess
import sys

import numpy as np
import pytest

import tracker
from tracker.pipeline import track_stack as core_track_stack
from tracker.simulate import render_stack, simulate_tracks
from tracker.spot_scale import frames_to_sample

pd = pytest.importorskip("pandas")

VOXEL = (0.4, 0.15, 0.15)
OPTIONS = {"spot_radius_um": (0.8, 0.3, 0.3), "max_displacement_um": 1.2, "device": "cpu", "solver": "scipy"}


@pytest.fixture(scope="module")
def stack():
    truth = simulate_tracks(12, 5, (2.8, 7.0, 7.0), 0.3, 0.5, seed=3)
    return render_stack(truth, (5, 8, 48, 48), VOXEL, (0.45, 0.18, 0.18), snr=8, seed=4)


class CountingArray:
    """A (T, Z, Y, X) array-like that records the frames read and refuses to be read whole."""

    def __init__(self, data):
        self._data, self.shape, self.dtype, self.read = data, data.shape, data.dtype, []

    def __getitem__(self, key):
        assert isinstance(key, (int, np.integer)), f"read more than one frame: {key!r}"
        self.read.append(int(key))
        return self._data[key]

    def __array__(self, *args, **kwargs):
        raise AssertionError("the whole stack was loaded")


def test_import_tracker_is_cheap():
    code = "import sys, tracker; print(sorted(m for m in ('numpy', 'pandas', 'scipy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
    assert {"track_stack", "link_detections", "read_tracks"} <= set(dir(tracker))
    with pytest.raises(AttributeError):
        tracker.no_such_function  # noqa: B018


def test_track_stack_returns_dataframes_equal_to_the_core(stack):
    frames = CountingArray(stack)
    result = tracker.track_stack(frames, voxel_size_um=VOXEL, **OPTIONS)
    # Each frame once, never the whole stack; the few sampled for the stack's threshold once more, before.
    sampled = frames_to_sample(len(stack))
    assert frames.read[:len(sampled)] == sampled and sorted(frames.read[len(sampled):]) == list(range(len(stack)))
    core = core_track_stack(stack, voxel_size_um=VOXEL, **OPTIONS)
    assert isinstance(result.tracks, pd.DataFrame) and isinstance(result.detections, pd.DataFrame)
    assert list(result.tracks.columns) == list(core.tracks) and len(result.tracks) == len(core.tracks["frame"]) > 0
    for name, column in core.tracks.items():
        np.testing.assert_array_equal(result.tracks[name].to_numpy(), column)
    assert result.tracks["frame"].dtype == np.int64 and result.n_tracks == core.n_tracks
    assert {"track_id", "frame", "z", "y", "x", "link_cost", "link_confidence"} <= set(result.tracks.columns)


def test_detect_and_link_take_dataframes_or_dicts(stack):
    detections = tracker.detect_stack(stack, voxel_size_um=VOXEL, spot_radius_um=(0.8, 0.3, 0.3), device="cpu")
    assert isinstance(detections, pd.DataFrame) and len(detections) > 20
    from_frame = tracker.link_detections(detections, 1.2, solver="scipy")
    from_dict = tracker.link_detections({c: detections[c].to_numpy() for c in detections}, 1.2, solver="scipy")
    pd.testing.assert_frame_equal(from_frame, from_dict)
    tracks, summary = tracker.link_detections(detections, 1.2, solver="scipy", return_summary=True)
    pd.testing.assert_frame_equal(tracks, from_frame)
    assert summary  # what the linker decided (a LinkSummary; a dict before the linker's split)
    with pytest.raises(TypeError, match="DataFrame or a dict"):
        tracker.link_detections([1, 2, 3])


def test_dask_arrays_are_tracked_like_numpy_arrays(stack):
    da = pytest.importorskip("dask.array")
    lazy = da.from_array(stack, chunks=(1, *stack.shape[1:]))
    result = tracker.track_stack(lazy, voxel_size_um=VOXEL, **OPTIONS)
    expected = core_track_stack(stack, voxel_size_um=VOXEL, **OPTIONS).tracks
    np.testing.assert_array_equal(result.tracks["x"].to_numpy(), expected["x"])


def test_read_and_write_tracks_with_dataframes(tmp_path):
    tracks = pd.DataFrame({"track_id": [4, 4, 9], "frame": [0, 1, 0], "z": [1.0, 1.5, 3.0], "y": [2.0, 2.5, 0.0],
                           "x": [0.5, 0.25, 1.0], "intensity": [10.0, 12.0, 7.0]})
    assert tracker.write_tracks(tmp_path / "t.geff", tracks) == "geff"
    back = tracker.read_tracks(tmp_path / "t.geff")
    pd.testing.assert_frame_equal(back, tracks, check_like=False)
