"""Stacks as microscopes write them (tracker.io.tiff, tiff_folder, zarr): axes in any order, several channels,
a folder of one TIFF per time point, sizes without a unit."""

from pathlib import Path

import numpy as np
import pytest
import tifffile
from click.testing import CliRunner

from tracker import io
from tracker.cli import main

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "sample.tif"


@pytest.fixture
def movie(rng):
    """(T, Z, C, Y, X) = (5, 3, 2, 12, 10), every voxel different."""
    return rng.permutation(5 * 3 * 2 * 12 * 10).reshape(5, 3, 2, 12, 10).astype(np.uint16)


def ome(path, data, axes, **options):
    tifffile.imwrite(path, data, ome=True, metadata={"axes": axes, "PhysicalSizeX": 0.1, "PhysicalSizeY": 0.1,
                                                     "PhysicalSizeZ": 0.4}, **options)


@pytest.mark.parametrize("compression", [None, "zlib"])  # (memory-mapped, or read page by page)
@pytest.mark.parametrize("axes", ["TZCYX", "ZTCYX", "CZTYX", "TCZYX"])
def test_any_axis_order_and_channel(tmp_path, movie, axes, compression):
    order = ["TZCYX".index(a) for a in axes]
    path = tmp_path / "m.ome.tif"
    ome(path, np.transpose(movie, order), axes, compression=compression)
    for channel in (0, 1):
        stack = io.read_stack(path, channel=channel)
        assert stack.shape == (5, 3, 12, 10) and stack.voxel_size == pytest.approx((0.4, 0.1, 0.1))
        for t in (0, 3, 4):
            np.testing.assert_array_equal(stack.frame(t), movie[t, :, channel])
    with pytest.raises(io.InputError, match="2 channels; choose the one to track with --channel"):
        io.read_stack(path)
    with pytest.raises(io.InputError, match="no channel 2; the stack has channels 0 to 1"):
        io.read_stack(path, channel=2)


def test_z_outside_t_is_not_read_as_time(tmp_path, movie):
    """An OME file whose Z axis comes first (``ZTYX``) has T frames of Z planes, not Z frames of T planes."""
    path = tmp_path / "zt.ome.tif"
    ome(path, np.transpose(movie[:, :, 0], (1, 0, 2, 3)), "ZTYX")
    stack = io.read_stack(path)
    assert stack.shape == (5, 3, 12, 10)
    np.testing.assert_array_equal(stack.frame(2), movie[2, :, 0])
    given = io.read_stack(path, axes="ztyx")  # (the same, said on the command line)
    np.testing.assert_array_equal(given.frame(4), movie[4, :, 0])
    with pytest.raises(io.InputError, match="no channel 1; the stack has one channel"):
        io.read_stack(path, channel=1)


@pytest.mark.parametrize("axes", ["TTYX", "TZXY", "TZYXQ", "TZY"])
def test_bad_axes_option(tmp_path, movie, axes):
    path = tmp_path / "s.tif"
    io.write_stack(path, movie[:, :, 0], (0.4, 0.1, 0.1))
    with pytest.raises(io.InputError) as error:
        io.read_stack(path, axes=axes)
    assert "\n" not in str(error.value) and "axes" in str(error.value)


def test_imagej_sizes_without_unit_are_micrometres_with_a_note(tmp_path, movie):
    path = tmp_path / "nounit.tif"
    tifffile.imwrite(path, movie[:, :, 0], imagej=True, resolution=(10.0, 10.0),
                     metadata={"axes": "TZYX", "spacing": 0.3})
    stack = io.read_stack(path)
    assert stack.voxel_size == pytest.approx((0.3, 0.1, 0.1))
    assert any("no unit" in note for note in stack.notes)
    plain = tmp_path / "uncalibrated.tif"
    tifffile.imwrite(plain, movie[:, :, 0], imagej=True, metadata={"axes": "TZYX"})
    assert io.read_stack(plain).voxel_size == (1.0, 1.0, 1.0)  # (ImageJ's "no calibration": said in a note)


def write_folder(folder, frames, names=None, **options):
    folder.mkdir()
    names = names or [f"t{t}.tif" for t in range(len(frames))]
    for name, frame in zip(names, frames):
        tifffile.imwrite(folder / name, frame, imagej=True, resolution=(10.0, 10.0),
                         metadata={"axes": "ZYX" if frame.ndim == 3 else "YX", "spacing": 0.4, "unit": "um"},
                         **options)


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_folder_of_one_tiff_per_time_point_in_natural_order(tmp_path, movie, compression):
    frames = [movie[t, :, 0] for t in range(5)]
    names = ["t1.tif", "t2.tif", "t10.tif", "t11.tif", "t100.tif"]  # (t10 after t2)
    write_folder(tmp_path / "f", frames, names, compression=compression)
    (tmp_path / "f" / "notes.txt").write_text("not an image")
    stack = io.read_stack(tmp_path / "f")
    assert stack.shape == (5, 3, 12, 10) and stack.voxel_size == pytest.approx((0.4, 0.1, 0.1))
    for t in range(5):
        np.testing.assert_array_equal(stack.frame(t), frames[t])
    assert "t1.tif … t100.tif" in stack.notes[-1]


def test_folder_of_2d_images_is_a_2d_time_series(tmp_path, movie):
    write_folder(tmp_path / "f", [movie[t, 0, 0] for t in range(5)])
    stack = io.read_stack(tmp_path / "f", voxel_size=(0.2, 0.2))
    assert stack.shape == (5, 1, 12, 10) and stack.voxel_size[1:] == (0.2, 0.2)
    np.testing.assert_array_equal(stack.frame(3)[0], movie[3, 0, 0])


def test_folder_with_channels(tmp_path, movie):
    folder = tmp_path / "f"
    folder.mkdir()
    for t in range(5):
        tifffile.imwrite(folder / f"t{t}.tif", movie[t], imagej=True, metadata={"axes": "ZCYX"})
    np.testing.assert_array_equal(io.read_stack(folder, channel=1).frame(2), movie[2, :, 1])
    with pytest.raises(io.InputError, match="--channel"):
        io.read_stack(folder)


@pytest.mark.parametrize("case, message", [
    ("empty", "no TIFF files"),
    ("last_differs", "every file must be alike"),
    ("several_time_points", "holds 5 time points"),
    ("t_axis_given", "names T"),
])
def test_bad_folders(tmp_path, movie, case, message):
    folder = tmp_path / "f"
    axes = None
    if case == "empty":
        folder.mkdir()
        (folder / "a.txt").write_text("x")
    elif case == "last_differs":
        write_folder(folder, [movie[0, :, 0], movie[1, :, 0], movie[2, :2, 0]])
    elif case == "several_time_points":
        folder.mkdir()
        io.write_stack(folder / "all.tif", movie[:, :, 0], (0.4, 0.1, 0.1))
    else:
        write_folder(folder, [movie[0, :, 0], movie[1, :, 0]])
        axes = "TYX"
    with pytest.raises(io.InputError, match=message) as error:
        io.read_stack(folder, axes=axes)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("pattern", ["VIRUS snr 7 density low t{t:03d} z{z:02d}.tif",  # (ISBI 2012 challenge)
                                     "img_channel000_position000_time{t:09d}_z{z:03d}.tif",  # (Micro-Manager 2)
                                     "img_{t:09d}_Default_{z:03d}.tif",  # (Micro-Manager 1.4: no words)
                                     "stack_Z{z}_T{t}.tif"])  # (plane before time in the name)
def test_folder_of_one_plane_per_file(tmp_path, movie, pattern):
    folder = tmp_path / "f"
    folder.mkdir()
    for t in range(5):
        for z in range(3):
            tifffile.imwrite(folder / pattern.format(t=t, z=z), movie[t, z, 0])
    stack = io.read_stack(folder, voxel_size=(0.4, 0.1, 0.1))
    assert stack.shape == (5, 3, 12, 10)
    for t in (0, 4):
        np.testing.assert_array_equal(stack.frame(t), movie[t, :, 0])
    assert "one per plane" in stack.notes[-1]
    assert any("taken as the time point" in note for note in stack.notes) == ("Default" in pattern)


def test_folder_of_planes_by_channel_and_missing_files(tmp_path, movie):
    folder = tmp_path / "f"
    folder.mkdir()
    for t in range(5):
        for z in range(3):
            for c in range(2):
                tifffile.imwrite(folder / f"t{t}_c{c}_z{z}.tif", movie[t, z, c])
    np.testing.assert_array_equal(io.read_stack(folder, channel=1).frame(3), movie[3, :, 1])
    with pytest.raises(io.InputError, match="2 channels; choose"):
        io.read_stack(folder)
    (folder / "t3_c1_z2.tif").unlink()
    with pytest.raises(io.InputError, match="no file for time point 3, plane 2, channel 1"):
        io.read_stack(folder, channel=0)
    (folder / "other0.tif").write_bytes((folder / "t0_c0_z0.tif").read_bytes())
    with pytest.raises(io.InputError, match="different patterns"):
        io.read_stack(folder, channel=0)


def test_file_names_without_numbers_say_so(tmp_path, movie):
    folder = tmp_path / "named"
    folder.mkdir()
    for name in ("img_a.tif", "img_b.tif", "img_c.tif"):
        tifffile.imwrite(folder / name, movie[0, :, 0])
    with pytest.raises(io.InputError, match="no frame numbers"):
        io.read_stack(folder)


def test_a_file_unlike_the_first_stops_the_read_with_its_name(tmp_path, movie):
    frames = [movie[t, :, 0] for t in range(4)]
    frames[1] = frames[1][:, :6]
    write_folder(tmp_path / "f", frames)
    stack = io.read_stack(tmp_path / "f")  # (only the first and the last file are opened)
    np.testing.assert_array_equal(stack.frame(2), frames[2])
    with pytest.raises(io.InputError, match="t1.tif holds"):
        stack.frame(1)


def test_zarr_channel(tmp_path, movie):
    zarr = pytest.importorskip("zarr", minversion="3")
    array = zarr.create_array(str(tmp_path / "c.zarr"), shape=movie.shape, dtype=movie.dtype,
                              chunks=(1, *movie.shape[1:]))
    array[:] = movie
    stack = io.read_stack(tmp_path / "c.zarr", axes="TZCYX", channel=1, voxel_size=(0.4, 0.1, 0.1))
    np.testing.assert_array_equal(stack.frame(3), movie[3, :, 1])
    with pytest.raises(io.InputError, match="--channel"):
        io.read_stack(tmp_path / "c.zarr", axes="TZCYX")


def test_track_run_on_a_folder_and_a_channel(tmp_path):
    """``track run FOLDER`` and ``track run STACK --channel`` give the tracks of the same stack as one file."""
    data = tifffile.imread(SAMPLE)[:6]
    voxel = io.read_stack(SAMPLE).voxel_size
    write_folder(tmp_path / "frames", list(data))
    two = tmp_path / "two.ome.tif"
    tifffile.imwrite(two, np.stack([data // 2, data], 1), ome=True,
                     metadata={"axes": "TCZYX", "PhysicalSizeX": voxel[2], "PhysicalSizeY": voxel[1],
                               "PhysicalSizeZ": voxel[0]})
    io.write_stack(tmp_path / "one.tif", data, voxel)
    runner = CliRunner()
    outputs = {}
    for name, args in [("one", ["one.tif"]), ("folder", ["frames", "--voxel-size", ",".join(map(str, voxel))]),
                       ("channel", ["two.ome.tif", "--channel", "1"])]:
        out = tmp_path / f"{name}.csv"
        result = runner.invoke(main, ["run", str(tmp_path / args[0]), *args[1:], "-o", str(out), "--device", "cpu",
                                      "-q"])
        assert result.exit_code == 0, result.output
        outputs[name] = out.read_text()
    assert outputs["folder"] == outputs["one"] == outputs["channel"]
