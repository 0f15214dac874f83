import numpy as np
import pytest
import tifffile

from tracker import io


@pytest.fixture
def stack_array(rng):
    return rng.integers(0, 1000, (3, 4, 16, 16), dtype=np.uint16)


def test_stack_round_trip_with_voxel_size(tmp_path, stack_array):
    path = tmp_path / "s.tif"
    io.write_stack(path, stack_array, (0.5, 0.1, 0.2))
    stack = io.read_stack(path)
    assert stack.shape == (3, 4, 16, 16)
    np.testing.assert_allclose(stack.voxel_size, (0.5, 0.1, 0.2), rtol=1e-6)
    np.testing.assert_array_equal(stack.frame(1), stack_array[1])
    assert isinstance(stack.data, np.memmap)  # never loaded whole


def test_voxel_size_override_and_ome(tmp_path, stack_array):
    path = tmp_path / "o.ome.tif"
    tifffile.imwrite(path, stack_array, ome=True,
                     metadata={"axes": "TZYX", "PhysicalSizeX": 0.2, "PhysicalSizeY": 0.3, "PhysicalSizeZ": 0.7})
    assert io.read_stack(path).voxel_size == pytest.approx((0.7, 0.3, 0.2))
    assert io.read_stack(path, voxel_size=(1, 2, 3)).voxel_size == (1.0, 2.0, 3.0)


def test_compressed_stack_is_read_frame_by_frame(tmp_path, stack_array):
    path = tmp_path / "c.tif"
    tifffile.imwrite(path, stack_array, imagej=True, compression="zlib", metadata={"axes": "TZYX"})
    stack = io.read_stack(path)
    assert stack.shape == stack_array.shape
    np.testing.assert_array_equal(stack.frame(2), stack_array[2])
    assert any("voxel size" in note for note in stack.notes)


def test_single_volume_and_2d_time_series(tmp_path, stack_array):
    volume = tmp_path / "v.tif"
    tifffile.imwrite(volume, stack_array[0], imagej=True, metadata={"axes": "ZYX"})
    stack = io.read_stack(volume)
    assert stack.shape == (1, 4, 16, 16) and "single 3D volume" in stack.notes[0]
    series = tmp_path / "t.tif"
    tifffile.imwrite(series, stack_array[:, 0], photometric="minisblack")
    with pytest.raises(io.InputError, match="--axes"):
        io.read_stack(series)
    assert io.read_stack(series, axes="TYX").shape == (3, 1, 16, 16)


@pytest.mark.parametrize("case", ["not_tiff", "truncated", "image_2d", "missing", "channels"])
def test_bad_stacks_raise_input_error(tmp_path, stack_array, case):
    path = tmp_path / "bad.tif"
    if case == "not_tiff":
        path.write_text("hello, not an image")
    elif case == "truncated":
        io.write_stack(tmp_path / "good.tif", stack_array, (1, 1, 1))
        path.write_bytes((tmp_path / "good.tif").read_bytes()[:3000])
    elif case == "image_2d":
        tifffile.imwrite(path, stack_array[0, 0])
    elif case == "channels":
        tifffile.imwrite(path, np.stack([stack_array, stack_array], axis=2), imagej=True,
                         metadata={"axes": "TZCYX"})
    with pytest.raises(io.InputError) as error:
        io.read_stack(path)
    assert "\n" not in str(error.value)


def test_table_round_trip_and_atomic_refusal(tmp_path):
    table = {"track_id": np.array([0, 0, 1]), "frame": np.array([0, 1, 0]), "z": np.array([0.5, 0.25, 1e-3]),
             "visible": np.array([True, False, True])}
    path = tmp_path / "t.csv"
    io.write_table(path, table)
    back = io.read_table(path, required=("frame", "z"))
    assert back["track_id"].dtype == np.int64 and back["visible"].dtype == bool
    np.testing.assert_allclose(back["z"], table["z"])
    before = path.read_bytes()
    with pytest.raises(io.InputError, match="already exists"):
        io.write_table(path, {"a": np.array([1.0])})
    assert path.read_bytes() == before
    io.write_table(path, {"a": np.array([1.0])}, overwrite=True)
    assert io.read_table(path)["a"].tolist() == [1.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]  # no temporary files left


def test_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "out.csv"
    with pytest.raises(ZeroDivisionError):
        with io.atomic_path(path) as tmp:
            tmp.write_text("partial")
            1 / 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content, message", [
    ("frame,z,y\n0,1,2\n", "missing column"),
    ("frame,z,y,x\n0,1,2\n", "fields"),
    ("frame,z,y,x\n0.5,1,2,3\n", "whole numbers"),
    ("frame,z,y,x\n0,a,2,3\n", "non-numeric"),
    ("", "empty"),
])
def test_bad_tables(tmp_path, content, message):
    path = tmp_path / "d.csv"
    path.write_text(content)
    with pytest.raises(io.InputError, match=message):
        io.read_table(path, required=("frame", "z", "y", "x"))


def test_table_cells_empty_spaced_and_text(tmp_path):
    path = tmp_path / "cells.csv"
    path.write_text("frame,z,y,x,note,score\n0, 1.5 ,2,3, a ,\n1,4,5,6,b,0.25\n")
    table = io.read_table(path, required=("frame", "z", "y", "x"))
    np.testing.assert_array_equal(table["z"], [1.5, 4.0])
    np.testing.assert_array_equal(table["score"], [np.nan, 0.25])
    assert table["note"].tolist() == ["a", "b"] and table["frame"].dtype == np.int64


@pytest.mark.parametrize("content, fast", [
    ("frame,z,y,x,link_cost\n0,1.5,2,3,nan\n1, 4 ,5,6,0.25\n", True),  # numbers only: parsed in C
    ("frame,z,y,x,link_cost\n0,1.5,2,3,\n1,4,5,6,0.25\n", False),  # an empty cell: the general parser
    ('"frame",z,y,x,link_cost\n0,1.5,2,3,nan\n"1",4,5,6,0.25\n', False),  # quotes: the general parser
])
def test_both_table_parsers_agree(tmp_path, content, fast):
    path = tmp_path / "t.csv"
    path.write_text(content)
    assert (io.tables._read_numeric_table(path, ("frame",)) is not None) == fast
    table = io.read_table(path, required=("frame", "z"))
    assert list(table) == ["frame", "z", "y", "x", "link_cost"] and table["frame"].dtype == np.int64
    np.testing.assert_array_equal(table["frame"], [0, 1])
    np.testing.assert_array_equal(table["z"], [1.5, 4.0])
    np.testing.assert_array_equal(table["link_cost"], [np.nan, 0.25])


def test_header_only_and_large_tables(tmp_path, rng):
    path = tmp_path / "t.csv"
    path.write_text("frame,z,y,x\n")
    empty = io.read_table(path, required=("frame",))
    assert empty["frame"].dtype == np.int64 and all(len(c) == 0 for c in empty.values())
    n = 20_000
    table = {"track_id": np.arange(n) // 7, "frame": np.arange(n) % 7, "z": rng.random(n), "y": rng.random(n),
             "x": rng.random(n), "visible": rng.random(n) < 0.5}
    io.write_table(path, table, overwrite=True)
    back = io.read_table(path)
    for name, column in table.items():
        assert back[name].dtype == column.dtype
        np.testing.assert_allclose(back[name], column, rtol=1e-8)
