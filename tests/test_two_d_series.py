"""2D time series (TYX) end to end with no options: arrays and files, voxel sizes and radii as (y, x), 2D ground truth.

Until these tests, ``track run`` on a TYX TIFF without ``--spot-radius`` stopped with a NumPy broadcast error (the
estimated radius of a 2D series has two values), ``--spot-radius RY,RX`` and ``--voxel-size Y,X`` were refused,
``track_stack`` refused (T, Y, X) arrays, and ``track evaluate`` refused a 2D ground truth for those tracks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
from click.testing import CliRunner

from tracker import io
from tracker.cli import main
from tracker.errors import InputError
from tracker.metrics import evaluate
from tracker.pipeline import track_stack
from tracker.simulate import render_camera_stack, simulate_tracks
from tracker.stack import FrameArray, as_stack, check_voxel_size
from tracker.validation import check_detection_scale

PIXEL_UM = 0.1


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """A TYX ImageJ TIFF of 12 frames (0.1 µm pixels, PSF σ 0.15 µm, 600 photons) and its 2D ground truth."""
    truth = dict(simulate_tracks(50, 12, (0.5, 20.0, 20.0), (0.0, 0.25, 0.25), 0.3, seed=4))
    truth["z"] = np.zeros_like(truth["z"])
    frames = render_camera_stack(truth, (12, 1, 200, 200), (1.0, PIXEL_UM, PIXEL_UM), psf_size_um=(1.0, 0.15, 0.15),
                                 photons=600, seed=5)[:, 0]
    folder = tmp_path_factory.mktemp("tyx")
    tifffile.imwrite(folder / "series.tif", frames, imagej=True, resolution=(1 / PIXEL_UM, 1 / PIXEL_UM),
                     metadata={"axes": "TYX", "unit": "um"})
    truth_2d = {k: truth[k] for k in ("track_id", "frame", "y", "x", "visible")}
    io.write_table(folder / "truth.csv", truth_2d)
    return folder, frames, truth_2d


def test_track_run_with_no_options_tracks_a_2d_series(series):
    folder, _, _ = series
    runner = CliRunner()
    result = runner.invoke(main, ["run", str(folder / "series.tif"), "-o", str(folder / "tracks.csv")],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    scores = json.loads(runner.invoke(main, ["evaluate", str(folder / "tracks.csv"), str(folder / "truth.csv"),
                                             "--json"]).output)
    assert scores["detection_recall"] >= 0.95 and scores["detection_precision"] >= 0.95
    assert scores["link_f1"] >= 0.85  # (the gate and the motion are estimated: nothing is given)


def test_yx_voxel_size_and_radius_at_the_command_line(series):
    folder, _, _ = series
    result = CliRunner().invoke(main, ["run", str(folder / "series.tif"), "-o", str(folder / "yx.csv"),
                                       "--voxel-size", f"{PIXEL_UM},{PIXEL_UM}", "--spot-radius", "0.26,0.26", "-q"])
    assert result.exit_code == 0, result.output
    assert len(io.read_table(folder / "yx.csv")["frame"]) > 0


def test_a_tyx_array_tracks_as_its_one_plane_stack(series):
    _, frames, truth = series
    flat = track_stack(frames, voxel_size_um=(PIXEL_UM, PIXEL_UM), device="cpu")
    planes = track_stack(frames[:, None], voxel_size_um=(1.0, PIXEL_UM, PIXEL_UM), device="cpu")
    for name in planes.tracks:
        np.testing.assert_array_equal(flat.tracks[name], planes.tracks[name], err_msg=name)
    assert evaluate(flat.tracks, truth)["detection_recall"] >= 0.95  # (3D tracks of one plane against 2D truth)


def test_as_stack_takes_tyx_array_likes_without_reading_them():
    reads = []
    lazy = FrameArray((3, 4, 5), np.uint16, lambda t: reads.append(t) or np.full((4, 5), t, np.uint16))
    stack = as_stack(lazy, (0.2, 0.1))  # (an array-like without None indexing, as Zarr arrays)
    assert stack.shape == (3, 1, 4, 5) and stack.voxel_size == (1.0, 0.2, 0.1) and reads == []
    np.testing.assert_array_equal(stack.frame(2), np.full((1, 4, 5), 2))
    assert reads == [2]
    assert as_stack(np.zeros((3, 4, 5)), (0.2, 0.1)).shape == (3, 1, 4, 5)


def test_two_voxel_sizes_need_one_plane():
    assert check_voxel_size((0.2, 0.1), n_planes=1) == (1.0, 0.2, 0.1)
    with pytest.raises(InputError, match="three positive numbers"):
        check_voxel_size((0.2, 0.1), n_planes=5)
    with pytest.raises(InputError, match="three positive numbers"):
        as_stack(np.zeros((2, 3, 4, 5)), (0.2, 0.1))


def test_the_detection_scale_check_takes_a_yx_radius_on_one_plane():
    check_detection_scale((1, 64, 64), (1.0, 0.1, 0.1), (0.3, 0.3))
    with pytest.raises(InputError, match="single-plane"):
        check_detection_scale((5, 64, 64), (0.5, 0.1, 0.1), (0.3, 0.3))


def test_evaluation_of_one_plane_against_2d_truth_and_not_of_several():
    truth = {"frame": np.array([0, 1]), "y": np.array([1.0, 1.1]), "x": np.array([2.0, 2.0]),
             "track_id": np.array([0, 0])}
    flat = dict(truth, z=np.zeros(2))
    assert evaluate(flat, truth)["link_f1"] == 1.0
    with pytest.raises(ValueError, match="3 spatial axes but the ground truth 2"):
        evaluate(dict(truth, z=np.array([0.0, 1.0])), truth)
