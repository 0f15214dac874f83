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
    ("frame z y x\n0 1 2 3\n", "separated by spaces; expected ',', ';' or tab"),
    ("frame,z,y,x\n0,1,2,3\n1,2,3\n", "line 3 has 3 fields, the header has 4"),
    ("frame,z,frame,x\n0,1,2,3\n", "duplicate column"),
])
def test_bad_tables(tmp_path, content, message):
    path = tmp_path / "d.csv"
    path.write_text(content)
    with pytest.raises(io.InputError, match=message) as error:
        io.read_table(path, required=("frame", "z", "y", "x"))
    assert "\n" not in str(error.value)


def test_table_cells_empty_spaced_and_text(tmp_path):
    path = tmp_path / "cells.csv"
    path.write_text("frame,z,y,x,note,score\n0, 1.5 ,2,3, a ,\n1,4,5,6,b,0.25\n")
    table = io.read_table(path, required=("frame", "z", "y", "x"))
    np.testing.assert_array_equal(table["z"], [1.5, 4.0])
    np.testing.assert_array_equal(table["score"], [np.nan, 0.25])
    assert table["note"].tolist() == ["a", "b"] and table["frame"].dtype == np.int64


@pytest.mark.parametrize("content", [
    "frame,z,y,x,link_cost\n0,1.5,2,3,nan\n1, 4 ,5,6,0.25\n",  # NaN written out, spaces around a number
    "frame,z,y,x,link_cost\n0,1.5,2,3,\n1,4,5,6,0.25\n",  # an empty cell (pandas writes NaN so)
    '"frame",z,y,x,link_cost\n0,1.5,2,3,nan\n"1",4,5,6,0.25\n',  # quotes
    "\ufeffframe;z;y;x;link_cost\n0;1,5;2;3;\n1;4;5;6;0,25\n",  # a byte-order mark, ';' and decimal commas
    "frame\tz\ty\tx\tlink_cost\n0\t1.5\t2\t3\tNaN\n1\t4\t5\t6\t0.25\n",  # tabs
    ",frame,z,y,x,link_cost\n0,0,1.5,2,3,\n1,1,4,5,6,0.25\n",  # pandas' index column
])
def test_table_dialects(tmp_path, content):
    path = tmp_path / "t.csv"
    path.write_text(content, encoding="utf-8")
    table = io.read_table(path, required=("frame", "z"))
    assert list(table) == ["frame", "z", "y", "x", "link_cost"] and table["frame"].dtype == np.int64
    np.testing.assert_array_equal(table["frame"], [0, 1])
    np.testing.assert_array_equal(table["z"], [1.5, 4.0])
    np.testing.assert_array_equal(table["link_cost"], [np.nan, 0.25])


def test_binary_and_non_utf8_files(tmp_path, stack_array):
    tiff = tmp_path / "s.tif"
    io.write_stack(tiff, stack_array, (1, 1, 1))
    with pytest.raises(io.InputError, match="not a readable CSV"):
        io.read_table(tiff)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("frame,x,note\n0,1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(io.InputError, match="UTF-8"):
        io.read_table(latin, required=("frame",))


def test_pandas_written_tables_and_parquet(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    n = 1000
    frame = pd.DataFrame({"track_id": np.arange(n) // 10, "frame": np.arange(n) % 10, "x": rng.random(n),
                          "link_cost": np.where(np.arange(n) % 10 == 0, np.nan, rng.random(n)),
                          "visible": rng.random(n) < 0.5, "label": [f"p{i}" for i in range(n)]})
    frame.to_csv(tmp_path / "p.csv")  # with pandas' index column, NaN as empty cells
    frame.to_parquet(tmp_path / "p.parquet")
    for name in ("p.csv", "p.parquet"):
        back = io.read_table(tmp_path / name, required=("frame", "x"))
        assert list(back) == list(frame.columns)
        assert back["track_id"].dtype == np.int64 and back["visible"].dtype == bool
        assert back["label"].tolist() == frame["label"].tolist()
        np.testing.assert_allclose(back["link_cost"], frame["link_cost"], rtol=1e-15)
    ours = {name: frame[name].to_numpy() for name in frame}
    io.write_table(tmp_path / "o.parquet", ours)
    back = io.read_table(tmp_path / "o.parquet")
    for name, column in ours.items():  # Parquet keeps full precision and the types
        np.testing.assert_array_equal(back[name], column)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(io.InputError, match="not a readable Parquet"):
        io.read_table(tmp_path / "bad.parquet")


def test_csv_floats_have_nine_significant_digits(tmp_path):
    values = np.array([0.1234567891234, 1e-5, 123456789.123, -2.5, 0.0, np.nan, np.inf, 1 / 3])
    io.write_table(tmp_path / "f.csv", {"x": values, "b": np.array([True, False] * 4)})
    lines = (tmp_path / "f.csv").read_text().splitlines()
    assert lines[0] == "x,b"
    written = [line.split(",")[0] for line in lines[1:]]
    np.testing.assert_array_equal([float(text) for text in written], [float(f"{v:.9g}") for v in values])
    assert max(len(text) for text in written) <= 11  # not the 17 digits of a full float64
    assert [line.split(",")[1] for line in lines[1:]] == ["1", "0"] * 4
    back = io.read_table(tmp_path / "f.csv")["x"]
    np.testing.assert_array_equal(back, [float(f"{v:.9g}") for v in values])


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


def test_arrow_columns_by_buffer_keep_nulls_offsets_and_bits(tmp_path):
    """Columns are read through their buffers (no pandas): sliced arrays, nulls and booleans come out right."""
    import pyarrow
    import pyarrow.parquet

    values = pyarrow.array([1.5, None, 3.0, 4.0, None, 6.0, 7.0, 8.0, 9.0, 10.0])
    flags = pyarrow.array([True, None, False, True, True, False, None, True, False, True])
    ints = pyarrow.array([1, 2, None, 4, 5, 6, 7, 8, 9, 10])
    table = pyarrow.table({"frame": pyarrow.array(range(10)), "x": values, "visible": flags, "k": ints}).slice(3, 6)
    pyarrow.parquet.write_table(table, tmp_path / "t.parquet")
    read = io.read_table(tmp_path / "t.parquet")
    np.testing.assert_array_equal(read["frame"], np.arange(3, 9))
    np.testing.assert_array_equal(read["x"], [4.0, np.nan, 6.0, 7.0, 8.0, 9.0])
    np.testing.assert_array_equal(read["visible"], [True, True, False, False, True, False])
    np.testing.assert_array_equal(read["k"], [4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    read = io.read_table(tmp_path / "t.parquet")  # the whole file, unsliced, through the same path
    assert read["x"].flags.writeable


def test_csv_link_does_not_import_pandas(tmp_path):
    """``track link`` on CSV never imports pandas (0.1-0.3 s of start-up; issue 26's budget), nor scipy.optimize
    where no component needs a dense solve (0.056 s; benchmarks/results/cli_link.md)."""
    import subprocess
    import sys

    rows = "\n".join(f"{t},0,{y},{y}" for t in range(3) for y in range(5))
    (tmp_path / "d.csv").write_text("frame,z,y,x\n" + rows + "\n")
    code = ("import sys\nfrom tracker.cli import main\n"
            f"sys.argv = ['track', 'link', {str(tmp_path / 'd.csv')!r}, '-o', {str(tmp_path / 't.csv')!r}, '-q',"
            " '--max-displacement', '0.5']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert __import__('pathlib').Path(sys.argv[4]).exists()\n"
            "print('pandas' in sys.modules, 'scipy.optimize' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_every_integer_and_float_width_is_read_as_float64(tmp_path):
    import pyarrow
    import pyarrow.parquet

    columns = {f"c_{name}": pyarrow.array([1, None, 3, 250], type=getattr(pyarrow, name)())
               for name in ("int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")}
    columns["c_int8"] = pyarrow.array([1, None, -3, 120], type=pyarrow.int8())
    columns["c_float16"] = pyarrow.array(np.array([1, np.nan, 3, 250], dtype=np.float16), from_pandas=True)
    pyarrow.parquet.write_table(pyarrow.table({"frame": pyarrow.array([0, 1, 2, 3]), **columns}).slice(1),
                                tmp_path / "t.parquet")
    read = io.read_table(tmp_path / "t.parquet")
    for name in columns:
        expected = [np.nan, -3.0, 120.0] if name == "c_int8" else [np.nan, 3.0, 250.0]
        assert read[name].dtype == np.float64
        np.testing.assert_array_equal(read[name], expected, err_msg=name)


@pytest.mark.parametrize("cores", [1, 2, 3])
@pytest.mark.parametrize("n", [0, 1, 13, 14, 15, 40])
def test_csv_written_in_blocks_is_the_file_one_call_writes(tmp_path, monkeypatch, cores, n):
    """Blocks formatted on several threads, written in order: byte for byte pyarrow's single call (header once,
    every row once, in order), for every split of rows into blocks (here of 7 rows) and number of cores."""
    import pyarrow.csv

    from tracker.io import tables

    monkeypatch.setattr(tables, "CSV_BLOCK_ROWS", 7)
    monkeypatch.setattr("tracker._threads.available_cores", lambda: cores)
    table = {"track_id": np.arange(n) // 3, "frame": np.arange(n) % 3, "x": np.arange(n) / 7,
             "visible": np.arange(n) % 2 == 0}
    io.write_table(tmp_path / "blocks.csv", table)
    pyarrow.csv.write_csv(tables._to_arrow(table, for_csv=True), str(tmp_path / "one.csv"),
                          pyarrow.csv.WriteOptions(quoting_header="none"))
    assert (tmp_path / "blocks.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    back = io.read_table(tmp_path / "blocks.csv")
    np.testing.assert_array_equal(back["frame"], table["frame"])
    io.write_table(tmp_path / "quoted.csv", {"a,b": np.arange(n), "x": np.arange(n) / 3})  # (a name needing quotes)
    assert io.read_table(tmp_path / "quoted.csv")["a,b"].tolist() == list(range(n))


@pytest.mark.parametrize("name", ["t.csv", "t.parquet"])
def test_table_blocks_write_what_write_table_writes(tmp_path, name):
    from tracker.io import read_table, write_table
    from tracker.io.table_blocks import table_blocks

    rng = np.random.default_rng(3)
    table = {"frame": np.repeat(np.arange(4), 5), "x": rng.normal(size=20), "track_id": rng.integers(0, 9, 20)}
    write_table(tmp_path / ("whole_" + name), table)
    with table_blocks(tmp_path / name) as writer:
        for start, stop in [(0, 7), (7, 15), (15, 20)]:
            writer.write({k: v[start:stop] for k, v in table.items()})
        assert not (tmp_path / name).exists()  # (renamed whole at the end)
    assert writer.rows == 20
    if name.endswith(".csv"):
        assert (tmp_path / name).read_bytes() == (tmp_path / ("whole_" + name)).read_bytes()
    whole, blocks = read_table(tmp_path / ("whole_" + name)), read_table(tmp_path / name)
    assert all(np.array_equal(whole[k], blocks[k]) for k in table)


def test_table_blocks_refuse_other_columns_and_leave_nothing(tmp_path):
    from tracker.io.table_blocks import table_blocks

    with pytest.raises(ValueError, match="columns differ"), table_blocks(tmp_path / "t.csv") as writer:
        writer.write({"frame": np.arange(2), "x": np.zeros(2)})
        writer.write({"frame": np.arange(2), "y": np.zeros(2)})
    assert list(tmp_path.iterdir()) == []
