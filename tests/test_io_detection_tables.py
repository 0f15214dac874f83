"""Detections tables of other tools (tracker.io.detection_tables), read as frame and z, y, x in µm."""

import numpy as np
import pytest
from click.testing import CliRunner

from tracker.cli import main
from tracker.io import InputError, write_table
from tracker.io.detection_tables import read_detections


@pytest.fixture
def points(rng):
    """Ours: 3 frames × 4 points, µm."""
    n = 12
    return {"frame": np.repeat(np.arange(3), 4), "z": rng.uniform(0, 3, n), "y": rng.uniform(0, 10, n),
            "x": rng.uniform(0, 10, n)}


def trackmate_csv(path, points, unit="micron", extra_rows=True):
    """TrackMate 7's spot table as 'Export to CSV' writes it: keys, then names, short names and units rows."""
    header = ["LABEL", "ID", "TRACK_ID", "QUALITY", "POSITION_X", "POSITION_Y", "POSITION_Z", "POSITION_T", "FRAME"]
    rows = [",".join(header)]
    if extra_rows:
        rows += ["Label,Spot ID,Track ID,Quality,X,Y,Z,T,Frame", "Label,Spot ID,Track ID,Quality,X,Y,Z,T,Frame",
                 f",,,(quality),({unit}),({unit}),({unit}),(sec),"]
    for i in range(len(points["frame"])):
        rows.append(f"ID{i},{i},{i % 4},{10 + i},{float(points['x'][i])!r},{float(points['y'][i])!r},{float(points['z'][i])!r},"
                    f"{points['frame'][i] * 0.5},{points['frame'][i]}")
    path.write_text("\n".join(rows) + "\n")


def assert_points(table, points, scale=(1.0, 1.0, 1.0)):
    np.testing.assert_array_equal(table["frame"], points["frame"])
    for axis, factor in zip("zyx", scale):
        np.testing.assert_allclose(table[axis], points[axis] * factor, rtol=1e-8)  # (CSV: 9 significant digits)


def test_ours(tmp_path, points):
    write_table(tmp_path / "d.csv", points)
    assert_points(read_detections(tmp_path / "d.csv"), points)


def test_ours_with_voxel_columns(tmp_path, points):
    # what `track run --detections` writes: z, y, x in µm and z_vox, y_vox, x_vox beside them (the µm ones are read)
    voxels = {f"{axis}_vox": points[axis] / size for axis, size in zip("zyx", (0.5, 0.1, 0.1))}
    write_table(tmp_path / "d.csv", {**points, "intensity": np.ones(12), **voxels})
    table = read_detections(tmp_path / "d.csv")
    assert_points(table, points)
    np.testing.assert_allclose(table["z_vox"], voxels["z_vox"])


@pytest.mark.parametrize("extra_rows", [True, False])
def test_trackmate_spot_table(tmp_path, points, extra_rows):
    trackmate_csv(tmp_path / "spots.csv", points, extra_rows=extra_rows)
    table = read_detections(tmp_path / "spots.csv")
    assert_points(table, points)
    np.testing.assert_array_equal(table["QUALITY"], 10 + np.arange(12))  # (other columns kept)
    assert "POSITION_X" not in table


def test_trackmate_in_pixels_needs_the_voxel_size(tmp_path, points):
    trackmate_csv(tmp_path / "spots.csv", points, unit="pixel")
    with pytest.raises(InputError, match="--voxel-size"):
        read_detections(tmp_path / "spots.csv")
    assert_points(read_detections(tmp_path / "spots.csv", voxel_size=(0.5, 0.1, 0.2)), points, (0.5, 0.1, 0.2))


def test_units_in_column_names(tmp_path, points):
    named = {"frame": points["frame"], "x [nm]": points["x"] * 1e3, "y [nm]": points["y"] * 1e3,
             "z [nm]": points["z"] * 1e3, "intensity [photon]": np.ones(12)}
    write_table(tmp_path / "storm.csv", named)
    assert_points(read_detections(tmp_path / "storm.csv"), points)
    suffixed = {"t": points["frame"], "x_px": points["x"], "y_px": points["y"], "z_um": points["z"]}
    write_table(tmp_path / "px.csv", suffixed)
    assert_points(read_detections(tmp_path / "px.csv", voxel_size=(9.0, 0.1, 0.2)), points, (1.0, 0.1, 0.2))


def test_trackpy_features_are_pixels(tmp_path, points):
    features = {"y": points["y"], "x": points["x"], "mass": np.ones(12), "size": np.ones(12), "ecc": np.zeros(12),
                "signal": np.ones(12), "raw_mass": np.ones(12), "ep": np.zeros(12), "frame": points["frame"]}
    write_table(tmp_path / "f.csv", features)
    with pytest.raises(InputError, match="trackpy's output"):
        read_detections(tmp_path / "f.csv")
    table = read_detections(tmp_path / "f.csv", voxel_size=(0.1, 0.2))
    assert "z" not in table
    np.testing.assert_allclose(table["x"], points["x"] * 0.2)
    np.testing.assert_allclose(table["y"], points["y"] * 0.1)


def test_columns_by_name_and_bad_tables(tmp_path, points):
    write_table(tmp_path / "other.csv", {"T": points["frame"], "PosZ": points["z"], "PosY": points["y"],
                                         "PosX": points["x"]})
    with pytest.raises(InputError, match="missing column.*--columns frame=NAME"):
        read_detections(tmp_path / "other.csv")
    mapped = read_detections(tmp_path / "other.csv", columns={"z": "PosZ", "y": "PosY", "x": "PosX"})
    assert_points(mapped, points)
    with pytest.raises(InputError, match="no column 'Q'"):
        read_detections(tmp_path / "other.csv", columns={"x": "Q"})
    write_table(tmp_path / "both.csv", {"frame": points["frame"], "x": points["x"], "x [nm]": points["x"],
                                        "y": points["y"]})
    with pytest.raises(InputError, match="could all be x"):
        read_detections(tmp_path / "both.csv")
    write_table(tmp_path / "feet.csv", {"frame": points["frame"], "x [ft]": points["x"], "y": points["y"]})
    with pytest.raises(InputError, match="not a length unit"):
        read_detections(tmp_path / "feet.csv")
    write_table(tmp_path / "seconds.csv", {"T": points["frame"] * 0.37, "x": points["x"], "y": points["y"]})
    with pytest.raises(InputError, match="whole frame numbers"):
        read_detections(tmp_path / "seconds.csv")


def test_track_link_reads_trackmate_as_its_own_table(tmp_path, rng):
    """The same detections, as our table and as TrackMate's spot table in pixels, give the same tracks."""
    steps = rng.normal(0, 0.05, (10, 30, 3))
    start = rng.uniform(0, 10, (30, 3))
    positions = start + np.cumsum(steps, axis=0)
    points = {"frame": np.repeat(np.arange(10), 30), "z": positions[..., 0].ravel(),
              "y": positions[..., 1].ravel(), "x": positions[..., 2].ravel()}
    write_table(tmp_path / "ours.csv", points)
    voxel = (0.5, 0.25, 0.25)
    in_pixels = {"frame": points["frame"], **{a: points[a] / v for a, v in zip("zyx", voxel)}}
    trackmate_csv(tmp_path / "tm.csv", in_pixels, unit="pixel")
    runner = CliRunner()
    for name, extra in [("ours.csv", []), ("tm.csv", ["--voxel-size", "0.5,0.25,0.25"])]:
        result = runner.invoke(main, ["link", str(tmp_path / name), "-o", str(tmp_path / f"{name}.tracks.csv"),
                                      "--max-displacement", "0.5", "-q", *extra])
        assert result.exit_code == 0, result.output
    import pandas
    ours = pandas.read_csv(tmp_path / "ours.csv.tracks.csv")
    theirs = pandas.read_csv(tmp_path / "tm.csv.tracks.csv")
    np.testing.assert_array_equal(ours["track_id"], theirs["track_id"])
    np.testing.assert_allclose(ours[["z", "y", "x"]], theirs[["z", "y", "x"]], rtol=1e-6)
    result = runner.invoke(main, ["link", str(tmp_path / "tm.csv"), "-o", str(tmp_path / "x.csv"), "-q"])
    assert result.exit_code != 0 and "--voxel-size" in result.output
    result = runner.invoke(main, ["link", str(tmp_path / "ours.csv"), "-o", str(tmp_path / "y.csv"),
                                  "--columns", "frame"])
    assert result.exit_code == 2 and "KEY=COLUMN" in result.output
