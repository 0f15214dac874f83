"""Track formats: CSV, Parquet, GEFF, TrackMate XML and ISBI 2012 XML, in and out (tracker.io)."""

import importlib.util
import re
import warnings
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from click.testing import CliRunner

from tracker import io
from tracker.cli import main
from tracker.io import InputError, read_tracks, write_tracks

needs_geff = pytest.mark.skipif(importlib.util.find_spec("geff") is None, reason="needs geff (the [formats] extra, "
                                "which the [test] extra and so CI install)")


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


@needs_geff
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
    ("t.csv", None), ("t.parquet", None), pytest.param("t.geff", None, marks=needs_geff),
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


@needs_geff
def test_geff_passes_validation_and_carries_units_and_parameters(tmp_path, rng):
    tracks = make_tracks(rng)
    tracks["label"] = np.array([f"p{i}" for i in range(len(tracks["frame"]))], dtype=object)
    import geff

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


@needs_geff
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


_DIMENSIONS = {"NONE", "QUALITY", "COST", "INTENSITY", "INTENSITY_SQUARED", "POSITION", "VELOCITY", "LENGTH",
               "AREA", "VOLUME", "TIME", "ANGLE", "RATE", "ANGLE_RATE", "STRING"}  # fiji.plugin.trackmate.Dimension
_JAVA_DOUBLE = re.compile(r"^(-?(\d+\.?\d*([eE][-+]?\d+)?|Infinity)|NaN)$")  # (a subset of Double.valueOf's)
_JAVA_INT = re.compile(r"^-?\d+$")


def check_trackmate_structure(path):
    """What TrackMate's loader (fiji.plugin.trackmate.LoadTrackMatePlugIn with io.TmXmlReader, TrackMate 7) needs
    of a file to open it without an error, method by method of the reader, each with the values it can parse."""
    root = ElementTree.parse(path).getroot()
    # TmXmlReader.getVersion (the root's "version") and LoadTrackMatePlugIn: files older than 2.1.0 are refused.
    assert root.tag == "TrackMate"
    assert tuple(int(p) for p in root.get("version").split(".")[:3]) >= (2, 1, 0)
    # getModel: <Model> with spatialunits and timeunits.
    model = root.find("Model")
    assert model.get("spatialunits") == "µm" and model.get("timeunits") == "frame"
    # readFeatureDeclarations / readSingleFeatureDeclaration: each Feature has feature, name, shortname, a
    # dimension that Dimension.valueOf knows (any other throws) and isint (Attribute.getBooleanValue).
    declared = {}
    for kind in ("SpotFeatures", "EdgeFeatures", "TrackFeatures"):
        section = model.find(f"FeatureDeclarations/{kind}")
        assert section is not None, kind
        for feature in section.findall("Feature"):
            assert {"feature", "name", "shortname", "dimension", "isint"} <= set(feature.attrib)
            assert feature.get("dimension") in _DIMENSIONS and feature.get("isint") in ("true", "false")
        declared[kind] = {f.get("feature"): f.get("isint") == "true" for f in section.findall("Feature")}
    # getSpots: AllSpots (nspots) / SpotsInFrame (an int "frame") / Spot. createSpotFrom: an int ID, a name, and
    # every other attribute a feature read with Double.valueOf. Every TrackMate spot has the features of Spot's
    # constructor (QUALITY, POSITION_X/Y/Z, POSITION_T, FRAME, RADIUS) and VISIBILITY.
    spots = model.findall("AllSpots/SpotsInFrame/Spot")
    assert int(model.find("AllSpots").get("nspots")) == len(spots)
    for frame in model.findall("AllSpots/SpotsInFrame"):
        assert _JAVA_INT.match(frame.get("frame"))
        assert all(float(s.get("FRAME")) == int(frame.get("frame")) for s in frame.findall("Spot"))
    ids = [int(spot.get("ID")) for spot in spots]
    assert len(set(ids)) == len(ids) and max(ids) < 2**31
    required = {"ID", "name", "QUALITY", "POSITION_X", "POSITION_Y", "POSITION_Z", "POSITION_T", "FRAME", "RADIUS",
                "VISIBILITY"}
    for spot in spots:
        assert required <= set(spot.attrib), required - set(spot.attrib)
        for name, value in spot.attrib.items():
            if name not in ("ID", "name"):
                assert name in declared["SpotFeatures"] and _JAVA_DOUBLE.match(value), (name, value)
    # readTracks: each Track has an int TRACK_ID; each Edge int SPOT_SOURCE_ID / SPOT_TARGET_ID of known, distinct
    # spots, added to one SimpleWeightedGraph (undirected: a pair linked twice is "Bad edge"), and its declared
    # edge features read as int or double by their isint. readTrackFeatures: every Track attribute but "name"
    # is read as a double.
    track_ids, pairs = set(), set()
    for track in model.findall("AllTracks/Track"):
        assert _JAVA_INT.match(track.get("TRACK_ID"))
        track_ids.add(int(track.get("TRACK_ID")))
        for name, value in track.attrib.items():
            assert name == "name" or (name in declared["TrackFeatures"] and _JAVA_DOUBLE.match(value)), (name, value)
        for edge in track.findall("Edge"):
            source, target = int(edge.get("SPOT_SOURCE_ID")), int(edge.get("SPOT_TARGET_ID"))
            assert source != target and {source, target} <= set(ids)
            assert frozenset((source, target)) not in pairs
            pairs.add(frozenset((source, target)))
            for name, value in edge.attrib.items():
                assert name in declared["EdgeFeatures"] and _JAVA_DOUBLE.match(value), (name, value)
                assert not declared["EdgeFeatures"][name] or _JAVA_INT.match(value), (name, value)
    # readFilteredTrackIDs: every FilteredTracks/TrackID names a track of AllTracks.
    filtered = {int(t.get("TRACK_ID")) for t in model.findall("FilteredTracks/TrackID")}
    assert model.find("FilteredTracks") is not None and filtered <= track_ids
    # readImage / getImage and readSettings: Settings/ImageData (read unguarded), getBaseSettings (BasicSettings
    # and ImageData's numbers), getDetectorSettings and getTrackerSettings (a key TrackMate knows; the manual
    # detector's unmarshall needs RADIUS), getInitialFilter, getSpotFeatureFilters and getTrackFeatureFilters
    # (read unguarded), readAnalyzers (the three analyzer lists).
    settings = root.find("Settings")
    image = settings.find("ImageData")
    for name in ("width", "height", "nslices", "nframes"):
        assert _JAVA_INT.match(image.get(name)), name
    for name in ("pixelwidth", "pixelheight", "voxeldepth", "timeinterval"):
        assert _JAVA_DOUBLE.match(image.get(name)), name
    assert image.get("filename") is not None and image.get("folder") is not None
    basic = settings.find("BasicSettings")
    assert all(_JAVA_INT.match(basic.get(name)) for name in ("zstart", "zend", "tstart", "tend"))
    detector = settings.find("DetectorSettings")
    assert detector.get("DETECTOR_NAME") == "MANUAL_DETECTOR" and _JAVA_DOUBLE.match(detector.get("RADIUS"))
    assert settings.find("TrackerSettings").get("TRACKER_NAME") == "MANUAL_TRACKER"
    initial = settings.find("InitialSpotFilter")
    assert initial.get("feature") and _JAVA_DOUBLE.match(initial.get("value")) and initial.get("isabove") in (
        "true", "false")
    for element in ("SpotFilterCollection", "TrackFilterCollection", "AnalyzerCollection/SpotAnalyzers",
                    "AnalyzerCollection/EdgeAnalyzers", "AnalyzerCollection/TrackAnalyzers"):
        assert settings.find(element) is not None, element
    # getGUIState: the panel the GUI opens on.
    assert root.find("GUIState").get("state")
    return root, spots


def test_trackmate_xml_has_the_structure_trackmate_reads(tmp_path, rng):
    tracks = make_tracks(rng)
    write_tracks(tmp_path / "t.xml", tracks, voxel_size=(0.5, 0.1, 0.1), image_path=tmp_path / "stack.tif")
    root, spots = check_trackmate_structure(tmp_path / "t.xml")
    assert len(spots) == len(tracks["frame"])
    image = root.find("Settings/ImageData")
    assert image.get("filename") == "stack.tif" and float(image.get("voxeldepth")) == 0.5


def test_trackmate_xml_of_track_links_output_2d_without_quality(tmp_path, rng):
    """`track link`'s columns (no quality, no radius) in 2D: still every feature TrackMate's spots have."""
    tracks = make_tracks(rng, three_d=False)
    del tracks["quality"], tracks["intensity"]
    write_tracks(tmp_path / "t.xml", tracks)
    _, spots = check_trackmate_structure(tmp_path / "t.xml")
    assert {s.get("QUALITY") for s in spots} == {"-1.0"} and {s.get("POSITION_Z") for s in spots} == {"0.0"}
    back = read_tracks(tmp_path / "t.xml")
    assert "quality" not in back and "z" not in back
    assert points_and_links(back) == points_and_links(tracks)


def test_trackmate_structure_check_can_fail(tmp_path, rng):
    """The check above rejects what TrackMate's reader would: an unknown dimension, a missing filter list."""
    write_tracks(tmp_path / "t.xml", make_tracks(rng))
    text = (tmp_path / "t.xml").read_text(encoding="utf-8")
    for broken in (text.replace('dimension="COST"', 'dimension="EUROS"'),
                   text.replace("    <SpotFilterCollection />\n", ""),
                   text.replace('<TrackMate version="', '<TrackMate version="1.')):
        (tmp_path / "bad.xml").write_text(broken, encoding="utf-8")
        with pytest.raises((AssertionError, AttributeError, TypeError)):
            check_trackmate_structure(tmp_path / "bad.xml")


@needs_geff
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


def check_isbi_structure(path):
    """What the ISBI 2012 challenge's evaluation reads of a tracks file: its reader as ported to TrackMate-CTCRunner
    (fiji.plugin.trackmate.performance.spt.importer.SPTFormatImporter.fromXML, after Chenouard, de Chaumont and
    Dallongeville's Icy code). Returns the number of detections."""
    root = ElementTree.parse(path).getroot()
    # "can't find: <root> tag" / "<root><TrackContestISBI2012> tag": the first TrackContestISBI2012 of <root>.
    assert root.tag == "root"
    contest = root.find("TrackContestISBI2012")
    n = 0
    for particle in contest.findall("particle"):
        frames = set()
        for detection in particle.findall("detection"):
            # t: an int >= 0 ("invalid t value" otherwise: a t that is not an int reads as -1), once per particle
            # ("duplicated detection for a single track"); x, y, z doubles (0 when absent), where a NaN trims or
            # drops the track (trimTrack).
            assert _JAVA_INT.match(detection.get("t")) and int(detection.get("t")) >= 0
            assert int(detection.get("t")) not in frames
            frames.add(int(detection.get("t")))
            for axis in "xyz":
                assert _JAVA_DOUBLE.match(detection.get(axis)) and detection.get(axis) not in ("NaN", "Infinity")
            n += 1
    return n


def test_isbi_structure_check_can_fail(tmp_path, rng):
    write_tracks(tmp_path / "t.isbi.xml", make_tracks(rng))
    text = (tmp_path / "t.isbi.xml").read_text(encoding="utf-8")
    for broken in (re.sub(r't="(\d+)"', r't="\1.0"', text, count=1), text.replace("<root>", "<tracks>", 1)
                   .replace("</root>", "</tracks>"), re.sub(r'x="[^"]+"', 'x="NaN"', text, count=1)):
        (tmp_path / "bad.isbi.xml").write_text(broken, encoding="utf-8")
        with pytest.raises((AssertionError, AttributeError)):
            check_isbi_structure(tmp_path / "bad.isbi.xml")


def test_isbi_xml_in_voxels_and_the_challenges_files(tmp_path, rng):
    tracks = make_tracks(rng)
    write_tracks(tmp_path / "t.isbi.xml", tracks, voxel_size=(0.5, 0.1, 0.1))
    assert check_isbi_structure(tmp_path / "t.isbi.xml") == len(tracks["frame"])
    root = ElementTree.parse(tmp_path / "t.isbi.xml").getroot()
    assert root[0].tag == "TrackContestISBI2012"
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


@needs_geff
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
    pytest.param("notgeff.geff", "not a readable GEFF", marks=needs_geff),
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
    with pytest.raises(InputError, match="ISBI 2012 XML needs frames from 0; the tracks have frame -1"):
        write_tracks(tmp_path / "t.isbi.xml", {"track_id": [0, 0], "frame": [-1, 0], "y": [0.0, 1.0], "x": [0.0, 1.0]})
    assert list(tmp_path.iterdir()) == []


@needs_geff
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
    assert "note:" not in result.output
    result = runner.invoke(main, ["convert", str(tmp_path / "t.csv"), str(tmp_path / "um.isbi.xml")])
    assert result.exit_code == 0 and "note: no --voxel-size: the ISBI XML holds positions in µm" in result.output
    result = runner.invoke(main, ["convert", str(tmp_path / "t.csv"), str(tmp_path / "t.geff")])
    assert result.exit_code == 1 and "already exists" in result.output
    result = runner.invoke(main, ["convert", str(tmp_path / "t.csv"), str(tmp_path / "t.json")])
    assert result.exit_code == 1 and "--format" in result.output


def test_rows_in_any_order_are_written_by_track_and_frame(tmp_path, rng):
    """check_tracks sorts what is not sorted (and leaves sorted tables, the linker's, as they are)."""
    from tracker.io._graph import check_tracks

    tracks = make_tracks(rng)
    order = np.lexsort((tracks["frame"], tracks["track_id"]))
    in_order = {k: np.asarray(v)[order] for k, v in tracks.items()}
    shuffle = rng.permutation(len(order))
    shuffled = {k: v[shuffle] for k, v in in_order.items()}
    for table in (in_order, shuffled):
        checked = check_tracks(table)
        for name, column in in_order.items():
            np.testing.assert_array_equal(checked[name], column)
    write_tracks(tmp_path / "a.csv", shuffled)
    write_tracks(tmp_path / "b.csv", in_order)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
