"""Track formats: CSV, Parquet, GEFF, TrackMate XML and ISBI 2012 XML, in and out (tracker.io)."""

import re
import warnings
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from click.testing import CliRunner

from tracker import io
from tracker.cli import main
from tracker.io import InputError, read_tracks, write_tracks

geff = pytest.importorskip("geff")


def make_tracks(rng, three_d=True, n_tracks=12, n_frames=8):
    """Tracks with gaps (a frame skipped), single-point tracks and the linker's columns."""
    rows = []
    for track in range(n_tracks):
        start = int(rng.integers(0, n_frames - 1))
        frames = np.arange(start, n_frames)[: int(rng.integers(1, n_frames - start + 1))]
        if len(frames) > 3 and track % 3 == 0:
            frames = np.delete(frames, 2)  # a gap
        rows += [(track * 7 + 3, f) for f in frames]  # ids that are not 0..n-1
    n = len(rows)
    tracks = {"track_id": np.array([r[0] for r in rows]), "frame": np.array([r[1] for r in rows])}
    if three_d:
        tracks["z"] = rng.random(n) * 5
    tracks.update(y=rng.random(n) * 40, x=rng.random(n) * 40, intensity=rng.random(n) * 500,
                  quality=rng.random(n) * 20)
    starts = np.r_[True, tracks["track_id"][1:] != tracks["track_id"][:-1]]
    tracks["link_cost"] = np.where(starts, np.nan, rng.random(n))
    tracks["link_confidence"] = np.where(starts, np.nan, rng.random(n))
    return tracks


def points_and_links(tracks):
    """The points (frame and position, rounded to 9 significant digits as CSV keeps them) and the links
    between them, independent of the track ids and of the row order."""
    axes = [a for a in ("z", "y", "x") if a in tracks]
    points = [tuple([int(f), *(float(f"{tracks[a][i]:.9g}") for a in axes)]) for i, f in enumerate(tracks["frame"])]
    order = np.lexsort((tracks["frame"], tracks["track_id"]))
    ids = np.asarray(tracks["track_id"])[order]
    links = {(points[a], points[b]) for a, b, same in zip(order[:-1], order[1:], ids[1:] == ids[:-1]) if same}
    assert len(set(points)) == len(points)
    return set(points), links


@pytest.mark.parametrize("three_d", [True, False])
def test_round_trip_csv_geff_trackmate_isbi_csv_keeps_every_point_and_link(tmp_path, rng, three_d):
    tracks = make_tracks(rng, three_d)
    io.write_table(tmp_path / "a.csv", tracks)
    paths = ["a.csv", "b.geff", "c.xml", "d.isbi.xml", "e.csv"]
    for before, after in zip(paths, paths[1:]):
        write_tracks(tmp_path / after, read_tracks(tmp_path / before))
    back = read_tracks(tmp_path / "e.csv")
    assert points_and_links(back) == points_and_links(tracks)
    assert ("z" in back) == three_d
    assert len(np.unique(back["track_id"])) == len(np.unique(tracks["track_id"]))  # single points included


@pytest.mark.parametrize("name, kept", [
    ("t.csv", None), ("t.parquet", None), ("t.geff", None),
    ("t.xml", ("quality", "intensity", "link_cost", "link_confidence")), ("t.isbi.xml", ()),
])
def test_each_format_keeps_its_columns_and_track_ids(tmp_path, rng, name, kept):
    tracks = make_tracks(rng)
    write_tracks(tmp_path / name, tracks)
    back = read_tracks(tmp_path / name)
    mine, theirs = np.lexsort((back["x"], back["frame"])), np.lexsort((tracks["x"], tracks["frame"]))
    back = {k: np.asarray(v)[mine] for k, v in back.items()}
    expected = {k: np.asarray(v)[theirs] for k, v in tracks.items()}
    for column in ("frame", "z", "y", "x", *(expected if kept is None else kept)):
        exact = not name.endswith(".csv")  # CSV keeps 9 significant digits, the others every bit
        np.testing.assert_allclose(back[column], expected[column], rtol=0 if exact else 1e-8, err_msg=column)
    if name.endswith("isbi.xml"):  # ISBI has no track ids: particles are numbered
        return
    ids, counts = np.unique(expected["track_id"], return_counts=True)
    linked = np.isin(expected["track_id"], ids[counts > 1])  # (TrackMate: a single spot is no track)
    np.testing.assert_array_equal(back["track_id"][linked], expected["track_id"][linked])
    if not name.endswith(".xml"):
        np.testing.assert_array_equal(back["track_id"], expected["track_id"])


def test_geff_passes_validation_and_carries_units_and_parameters(tmp_path, rng):
    tracks = make_tracks(rng)
    tracks["label"] = np.array([f"p{i}" for i in range(len(tracks["frame"]))], dtype=object)
    write_tracks(tmp_path / "t.geff", tracks, parameters={"linking": {"max_displacement_um": 1.5}})
    geff.validate_structure(str(tmp_path / "t.geff"))
    from geff.core_io import read_to_memory

    memory = read_to_memory(str(tmp_path / "t.geff"))
    metadata = memory["metadata"]
    assert [(a.name, a.type, a.unit) for a in metadata.axes] == [
        ("t", "time", "frame"), ("z", "space", "micrometer"), ("y", "space", "micrometer"),
        ("x", "space", "micrometer")]
    assert metadata.track_node_props["tracklet"] == "track_id" and metadata.directed
    assert metadata.extra["tracker"]["parameters"] == {"linking": {"max_displacement_um": 1.5}}
    assert metadata.edge_props_metadata["link_cost"].unit == "micrometer**2"
    n_links = len(tracks["frame"]) - len(np.unique(tracks["track_id"]))
    assert memory["edge_ids"].shape == (n_links, 2) and not np.isnan(memory["edge_props"]["link_cost"]["values"]).any()
    assert read_tracks(tmp_path / "t.geff")["label"].tolist() == tracks["label"].tolist()
    with pytest.raises(InputError, match="already exists"):
        write_tracks(tmp_path / "t.geff", tracks)
    write_tracks(tmp_path / "t.geff", {k: v[:5] for k, v in tracks.items()}, overwrite=True)
    assert len(read_tracks(tmp_path / "t.geff")["frame"]) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.geff"]  # no temporary folders left


def test_geff_in_other_units_is_read_in_micrometres(tmp_path):
    from geff.core_io import write_arrays
    from geff_spec import Axis, GeffMetadata

    metadata = GeffMetadata(directed=True, node_props_metadata={}, edge_props_metadata={}, axes=[
        Axis(name="time", type="time", unit="second"), Axis(name="row", type="space", unit="nanometer"),
        Axis(name="col", type="space", unit="pixel", scale=0.2, scaled_unit="micrometer")])
    nodes = {"time": np.array([0, 1, 2]), "row": np.array([100.0, 200.0, 300.0]), "col": np.array([1.0, 2.0, 3.0])}
    write_arrays(str(tmp_path / "o.geff"), np.array([5, 6, 9], dtype=np.uint64),
                 {k: {"values": v, "missing": None} for k, v in nodes.items()},
                 np.array([[5, 6], [6, 9]], dtype=np.uint64), {}, metadata)
    back = read_tracks(tmp_path / "o.geff")
    assert list(back) == ["track_id", "frame", "y", "x"]
    np.testing.assert_allclose(back["y"], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(back["x"], [0.2, 0.4, 0.6])
    assert back["track_id"].tolist() == [0, 0, 0]


_DIMENSIONS = {"NONE", "QUALITY", "COST", "INTENSITY", "INTENSITY_SQUARED", "POSITION", "LENGTH", "TIME", "VELOCITY",
               "AREA", "ANGLE", "RATE", "ANGLE_RATE", "STRING"}  # fiji.plugin.trackmate.Dimension
_JAVA_DOUBLE = re.compile(r"^(-?(\d+\.?\d*([eE][-+]?\d+)?|Infinity)|NaN)$")


def test_trackmate_xml_has_the_structure_trackmate_reads(tmp_path, rng):
    """The elements and attributes fiji.plugin.trackmate.io.TmXmlReader requires, with values it can parse."""
    tracks = make_tracks(rng)
    write_tracks(tmp_path / "t.xml", tracks, voxel_size=(0.5, 0.1, 0.1), image_path=tmp_path / "stack.tif")
    root = ElementTree.parse(tmp_path / "t.xml").getroot()
    assert root.tag == "TrackMate" and root.get("version")
    model = root.find("Model")
    assert model.get("spatialunits") == "µm" and model.get("timeunits") == "frame"
    declared = {}
    for kind in ("SpotFeatures", "EdgeFeatures", "TrackFeatures"):
        features = model.findall(f"FeatureDeclarations/{kind}/Feature")
        for feature in features:
            assert {"feature", "name", "shortname", "dimension", "isint"} <= set(feature.attrib)
            assert feature.get("dimension") in _DIMENSIONS and feature.get("isint") in ("true", "false")
        declared[kind] = {f.get("feature"): f.get("isint") == "true" for f in features}
    spots = model.findall("AllSpots/SpotsInFrame/Spot")
    assert int(model.find("AllSpots").get("nspots")) == len(spots) == len(tracks["frame"])
    for frame in model.findall("AllSpots/SpotsInFrame"):
        assert all(int(s.get("FRAME")) == int(frame.get("frame")) for s in frame.findall("Spot"))
    ids = set()
    for spot in spots:
        ids.add(int(spot.get("ID")))
        for name, value in spot.attrib.items():
            if name not in ("ID", "name"):  # TrackMate reads every other attribute with Double.valueOf
                assert name in declared["SpotFeatures"] and _JAVA_DOUBLE.match(value), (name, value)
    track_ids = set()
    for track in model.findall("AllTracks/Track"):
        track_ids.add(int(track.get("TRACK_ID")))
        for name, value in track.attrib.items():
            assert name == "name" or (name in declared["TrackFeatures"] and _JAVA_DOUBLE.match(value))
        for edge in track.findall("Edge"):
            assert {int(edge.get("SPOT_SOURCE_ID")), int(edge.get("SPOT_TARGET_ID"))} <= ids
            for name, value in edge.attrib.items():
                assert name in declared["EdgeFeatures"] and _JAVA_DOUBLE.match(value), (name, value)
                assert not declared["EdgeFeatures"][name] or re.match(r"^-?\d+$", value)
    assert {int(t.get("TRACK_ID")) for t in model.findall("FilteredTracks/TrackID")} == track_ids
    settings = root.find("Settings")
    for element in ("ImageData", "BasicSettings", "DetectorSettings", "InitialSpotFilter", "SpotFilterCollection",
                    "TrackerSettings", "TrackFilterCollection", "AnalyzerCollection"):
        assert settings.find(element) is not None, element
    image = settings.find("ImageData")
    assert image.get("filename") == "stack.tif" and float(image.get("voxeldepth")) == 0.5


def test_trackmate_xml_reads_in_geffs_independent_trackmate_reader(tmp_path, rng):
    from geff.convert import from_trackmate_xml_to_geff
    from geff.core_io import read_to_memory

    tracks = make_tracks(rng)
    write_tracks(tmp_path / "t.xml", tracks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (geff notes that µm is not spelt as OME-Zarr spells it)
        from_trackmate_xml_to_geff(tmp_path / "t.xml", tmp_path / "fromxml.geff")
    memory = read_to_memory(str(tmp_path / "fromxml.geff"))
    props = memory["node_props"]
    n_links = len(tracks["frame"]) - len(np.unique(tracks["track_id"]))
    assert len(memory["node_ids"]) == len(tracks["frame"]) and len(memory["edge_ids"]) == n_links
    by_id = dict(zip(memory["node_ids"].tolist(), props["POSITION_X"]["values"].tolist()))
    order = np.lexsort((tracks["frame"], tracks["track_id"]))
    np.testing.assert_array_equal([by_id[i] for i in range(len(order))], tracks["x"][order])


def test_isbi_xml_in_voxels_and_the_challenges_files(tmp_path, rng):
    tracks = make_tracks(rng)
    write_tracks(tmp_path / "t.isbi.xml", tracks, voxel_size=(0.5, 0.1, 0.1))
    root = ElementTree.parse(tmp_path / "t.isbi.xml").getroot()
    assert root.tag == "root" and root[0].tag == "TrackContestISBI2012"
    first = root.find("TrackContestISBI2012/particle/detection")
    assert set(first.attrib) == {"t", "x", "y", "z"}
    back = read_tracks(tmp_path / "t.isbi.xml", voxel_size=(0.5, 0.1, 0.1))
    assert points_and_links(back) == points_and_links(tracks)
    challenge = tmp_path / "VIRUS snr 7 density low.xml"  # as the challenge's ground truth is written
    challenge.write_text('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<root>\n'
                         '<TrackContestISBI2012 SNR="7" density="low" scenario="virus">\n'
                         '<particle>\n<detection t="0" x="10.5" y="20.25" z="3"/>\n'
                         '<detection t="1" x="11" y="21" z="3.5"/>\n</particle>\n'
                         '<particle>\n<detection t="1" x="40" y="50" z="1"/>\n</particle>\n'
                         "</TrackContestISBI2012>\n</root>\n")
    truth = read_tracks(challenge, voxel_size=(0.2, 0.1, 0.1))
    assert truth["track_id"].tolist() == [0, 0, 1] and truth["frame"].tolist() == [0, 1, 1]
    np.testing.assert_allclose(truth["x"], [1.05, 1.1, 4.0])
    np.testing.assert_allclose(truth["z"], [0.6, 0.7, 0.2])


def test_dataframes_in(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    tracks = make_tracks(rng, three_d=False)
    write_tracks(tmp_path / "t.geff", pd.DataFrame(tracks))
    assert points_and_links(read_tracks(tmp_path / "t.geff")) == points_and_links(tracks)


def _trackmate_with_division(path):
    path.write_text('<TrackMate version="7"><Model spatialunits="µm" timeunits="frame"><AllSpots>'
                    '<SpotsInFrame frame="0"><Spot ID="1" FRAME="0" POSITION_X="1" POSITION_Y="1" /></SpotsInFrame>'
                    '<SpotsInFrame frame="1"><Spot ID="2" FRAME="1" POSITION_X="1" POSITION_Y="1" />'
                    '<Spot ID="3" FRAME="1" POSITION_X="2" POSITION_Y="2" /></SpotsInFrame></AllSpots>'
                    '<AllTracks><Track TRACK_ID="0"><Edge SPOT_SOURCE_ID="1" SPOT_TARGET_ID="2" />'
                    '<Edge SPOT_SOURCE_ID="1" SPOT_TARGET_ID="3" /></Track></AllTracks></Model></TrackMate>')


@pytest.mark.parametrize("case, message", [
    ("unknown.json", "use --format"),
    ("other.xml", "neither TrackMate XML nor ISBI"),
    ("pixels.xml", "positions are in pixels"),
    ("division.xml", "divide or merge are not supported"),
    ("missing.csv", "no such file"),
    ("broken.xml", "not a readable XML"),
    ("nocolumn.csv", "missing column"),
    ("notgeff.geff", "not a readable GEFF"),
])
def test_bad_track_files(tmp_path, case, message):
    path = tmp_path / case
    if case == "unknown.json":
        path.write_text("{}")
    elif case == "other.xml":
        path.write_text("<svg></svg>")
    elif case == "pixels.xml":
        path.write_text('<TrackMate><Model spatialunits="pixel"><AllSpots /></Model></TrackMate>')
    elif case == "division.xml":
        _trackmate_with_division(path)
    elif case == "broken.xml":
        path.write_text("<TrackMate><Model>")
    elif case == "nocolumn.csv":
        path.write_text("frame,y,x\n0,1,2\n")
    elif case == "notgeff.geff":
        path.mkdir()
    with pytest.raises(InputError, match=message) as error:
        read_tracks(path)
    assert "\n" not in str(error.value)


def test_writing_refuses_bad_tables(tmp_path):
    with pytest.raises(InputError, match="two points in frame 1"):
        write_tracks(tmp_path / "t.xml", {"track_id": [0, 0], "frame": [1, 1], "y": [0.0, 1.0], "x": [0.0, 1.0]})
    with pytest.raises(InputError, match="missing column"):
        write_tracks(tmp_path / "t.geff", {"frame": [1], "y": [0.0], "x": [0.0]})
    with pytest.raises(InputError, match="unknown track format"):
        write_tracks(tmp_path / "t.csv", {"frame": [1]}, format="json")
    assert list(tmp_path.iterdir()) == []


def test_convert_command(tmp_path, rng):
    tracks = make_tracks(rng)
    io.write_table(tmp_path / "t.csv", tracks)
    runner = CliRunner()
    result = runner.invoke(main, ["convert", str(tmp_path / "t.csv"), str(tmp_path / "t.geff")])
    assert result.exit_code == 0, result.output
    assert "(geff)" in result.output
    result = runner.invoke(main, ["convert", str(tmp_path / "t.geff"), str(tmp_path / "out.txt"),
                                  "--format", "isbi", "--voxel-size", "0.5,0.1,0.1"])
    assert result.exit_code == 0, result.output
    back = read_tracks(tmp_path / "out.txt", "isbi", voxel_size=(0.5, 0.1, 0.1))
    assert points_and_links(back) == points_and_links(tracks)
    result = runner.invoke(main, ["convert", str(tmp_path / "t.csv"), str(tmp_path / "t.geff")])
    assert result.exit_code == 1 and "already exists" in result.output
    result = runner.invoke(main, ["convert", str(tmp_path / "t.csv"), str(tmp_path / "t.json")])
    assert result.exit_code == 1 and "--format" in result.output
