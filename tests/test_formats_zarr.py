"""Zarr and OME-Zarr stacks (tracker.io.zarr): read lazily, with the voxel size from the OME metadata."""

import numpy as np
import pytest

from tracker import io
from tracker.pipeline import track_stack
from tracker.simulate import render_stack, simulate_tracks
from tracker.stack import FrameArray

zarr = pytest.importorskip("zarr", minversion="3")  # (the tests write with Zarr 3's API; reading needs 2.18+)

VOXEL = (0.4, 0.15, 0.15)


@pytest.fixture(scope="module")
def stack():
    truth = simulate_tracks(12, 5, (2.8, 7.0, 7.0), 0.3, 0.5, seed=3)
    return render_stack(truth, (5, 8, 48, 48), VOXEL, (0.45, 0.18, 0.18), snr=8, seed=4)


def write_ome_zarr(path, data, scale, zarr_format=2, units=("micrometer",) * 3, axes="tczyx"):
    """An OME-Zarr image as NGFF 0.4 (Zarr v2) or 0.5 (Zarr v3) lays it out: one full-resolution dataset."""
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    array = root.create_array("0", shape=data.shape, dtype=data.dtype, chunks=(1, *data.shape[1:]))
    array[:] = data
    space = iter(units)
    multiscale = {
        "axes": [{"name": a, "type": {"t": "time", "c": "channel"}.get(a, "space"),
                  **({"unit": next(space)} if a in "zyx" else {})} for a in axes],
        "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": list(scale)}]}],
    }
    if zarr_format == 2:
        root.attrs.update({"multiscales": [{"version": "0.4", **multiscale}]})
    else:
        root.attrs.update({"ome": {"version": "0.5", "multiscales": [multiscale]}})


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_ome_zarr_gives_the_same_tracks_as_the_tiff(tmp_path, stack, zarr_format):
    io.write_stack(tmp_path / "s.tif", stack, VOXEL)
    write_ome_zarr(tmp_path / "s.zarr", stack[:, None], (1.0, 1.0, *VOXEL), zarr_format)
    from_tiff, from_zarr = io.read_stack(tmp_path / "s.tif"), io.read_stack(tmp_path / "s.zarr")
    assert isinstance(from_zarr.data, FrameArray) and from_zarr.shape == stack.shape  # read frame by frame
    assert from_zarr.voxel_size == pytest.approx(from_tiff.voxel_size) and from_zarr.notes == ()
    options = {"spot_radius_um": (0.8, 0.3, 0.3), "max_displacement_um": 1.2, "device": "cpu", "solver": "scipy"}
    expected, result = track_stack(from_tiff, **options).tracks, track_stack(from_zarr, **options).tracks
    assert len(expected["frame"]) > 20
    for name, column in expected.items():
        np.testing.assert_array_equal(result[name], column)


def test_units_2d_and_plain_arrays(tmp_path, stack):
    write_ome_zarr(tmp_path / "nm.zarr", stack[:, 0], (1.0, 150.0, 100.0), 3, ("nanometer",) * 2, axes="tyx")
    planes = io.read_stack(tmp_path / "nm.zarr")
    assert planes.shape == (5, 1, 48, 48) and planes.voxel_size == pytest.approx((0.1, 0.15, 0.1))
    np.testing.assert_array_equal(planes.frame(3)[0], stack[3, 0])
    plain = zarr.create_array(str(tmp_path / "plain.zarr"), shape=stack.shape, dtype=stack.dtype,
                              chunks=(1, *stack.shape[1:]), zarr_format=2)
    plain[:] = stack
    read = io.read_stack(tmp_path / "plain.zarr", voxel_size=VOXEL)
    np.testing.assert_array_equal(read.frame(2), stack[2])
    assert read.voxel_size == VOXEL and "no axes" in read.notes[0]
    assert any("no voxel size" in note for note in io.read_stack(tmp_path / "plain.zarr").notes)


@pytest.mark.parametrize("case, message", [
    ("volume", "cannot tell whether the first axis"),
    ("two_arrays", "2 arrays"),
    ("channels", "2 channels"),
    ("not_zarr", "not a readable Zarr"),
])
def test_bad_zarr_stacks(tmp_path, stack, case, message):
    path = tmp_path / "bad.zarr"
    if case == "volume":
        zarr.create_array(str(path), shape=stack.shape[1:], dtype=stack.dtype)
    elif case == "two_arrays":
        group = zarr.open_group(str(path), mode="w")
        group.create_array("a", shape=(2, 2, 2, 2), dtype="u2")
        group.create_array("b", shape=(2, 2, 2, 2), dtype="u2")
    elif case == "channels":
        write_ome_zarr(path, np.stack([stack, stack], axis=1), (1.0, 1.0, *VOXEL))
    else:
        path.mkdir()
        (path / "zarr.json").write_text("not json")
    with pytest.raises(io.InputError, match=message) as error:
        io.read_stack(path)
    assert "\n" not in str(error.value)
