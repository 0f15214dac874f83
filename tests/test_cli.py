"""End-to-end through the command line: simulate → run → evaluate, and every bad input."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
import tifffile
from click.testing import CliRunner

from tracker import io
from tracker.cli import main
from tracker.cli._options import verbosity_options
from tracker.linking import link_detections
from tracker.params import DetectionParams, LinkingParams, read_toml
from tracker.simulate import mean_nearest_neighbour_distance

RUN_OPTIONS = ["--spot-radius", "0.8,0.3,0.3", "--max-displacement", "1.2", "-q"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sim")
    stack = folder / "sim.tif"
    result = invoke("simulate", stack, "--frames", 15, "--particles", 40, "--step", 0.5, "--snr", 4,
                    "--persistence", 0.5, "--seed", 11)
    assert result.exit_code == 0, result.output
    return stack, folder / "sim_ground_truth.csv"


def test_simulate_run_evaluate_reaches_targets(tmp_path):
    """SNR 4, step/NN ≈ 0.2: detection recall and link F1 ≥ 0.95, pooled over three simulations.

    Single simulations vary (two particles closer than the axial resolution
    merge into one spot), so the score is averaged over seeds.
    """
    scores = []
    for seed in (11, 12, 13):
        stack = tmp_path / f"sim{seed}.tif"
        truth_path = tmp_path / f"sim{seed}_ground_truth.csv"
        result = invoke("simulate", stack, "--frames", 15, "--particles", 40, "--step", 0.5, "--snr", 4,
                        "--persistence", 0.5, "--seed", seed)
        assert result.exit_code == 0, result.output
        assert 0.5 / mean_nearest_neighbour_distance(io.read_table(truth_path)) <= 0.3
        tracks = tmp_path / f"tracks{seed}.csv"
        assert invoke("run", stack, "-o", tracks, *RUN_OPTIONS).exit_code == 0
        scores.append(json.loads(invoke("evaluate", tracks, truth_path, "--json").output))
    assert np.mean([s["detection_recall"] for s in scores]) >= 0.95
    assert np.mean([s["link_f1"] for s in scores]) >= 0.95


def test_runs_are_identical(simulated, tmp_path):
    stack, _ = simulated
    outputs = []
    for name in ("a.csv", "b.csv"):
        assert invoke("run", stack, "-o", tmp_path / name, *RUN_OPTIONS).exit_code == 0
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]


def test_run_writes_summary_and_detections(simulated, tmp_path):
    stack, _ = simulated
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--detections", tmp_path / "d.csv",
                    "--spot-radius", "0.8,0.3,0.3", "--max-displacement", "1.2", "--solver", "scipy")
    assert result.exit_code == 0
    assert "15 frames" in result.output and "tracks" in result.output and "detect" in result.output
    # What the linker decided: estimated persistence, smoothing, missing detections, gap closing.
    assert re.search(r"linking: persistence 0\.\d\d \(estimated\), smoothing (off|look-ahead|forward successor), "
                     r"\d+\.\d % of points unlinked, gap closing (on|off)", result.output), result.output
    detections = io.read_table(tmp_path / "d.csv")
    tracks = io.read_table(tmp_path / "t.csv")
    assert len(detections["frame"]) == len(tracks["frame"])
    assert list(tracks)[:5] == ["track_id", "frame", "z", "y", "x"]


def test_link_command(tmp_path, simulated):
    _, truth_path = simulated
    truth = io.read_table(truth_path)
    detections = tmp_path / "det.csv"
    io.write_table(detections, {k: truth[k] for k in ("frame", "z", "y", "x")})
    result = invoke("link", detections, "-o", tmp_path / "tracks.csv", "--max-displacement", 1.2, "-q")
    assert result.exit_code == 0, result.output
    scores = json.loads(invoke("evaluate", tmp_path / "tracks.csv", truth_path, "--json").output)
    assert scores["link_f1"] > 0.98


def test_link_command_in_2d(tmp_path, simulated):
    """A 2D table (frame, y, x; no z column) links in 2D, as in Python, and keeps its columns."""
    _, truth_path = simulated
    truth = io.read_table(truth_path)
    detections = tmp_path / "det2d.csv"
    io.write_table(detections, {k: truth[k] for k in ("frame", "y", "x")})
    result = invoke("link", detections, "-o", tmp_path / "tracks.csv", "-q")
    assert result.exit_code == 0, result.output
    tracks = io.read_table(tmp_path / "tracks.csv")
    assert "z" not in tracks and len(tracks["frame"]) == len(truth["frame"])
    expected = link_detections({k: truth[k] for k in ("frame", "y", "x")})
    np.testing.assert_array_equal(tracks["track_id"], expected["track_id"])


@pytest.mark.parametrize("flags, options", [
    ([], {}),
    (["--motion", "none", "--no-adaptive-radius", "--max-gap", "0"],
     {"motion": "none", "adaptive_radius": False, "max_gap": 0}),
    (["--persistence", "0.9", "--max-gap", "1", "--gap-penalty", "5"],
     {"persistence": 0.9, "max_gap": 1, "gap_penalty": 5.0}),
    (["--persistence", "0.9", "--no-smoothing"], {"persistence": 0.9, "smoothing": False}),
])
def test_link_options_reach_the_linker(tmp_path, simulated, flags, options):
    _, truth_path = simulated
    truth = io.read_table(truth_path)
    detections = {k: truth[k] for k in ("frame", "z", "y", "x")}
    io.write_table(tmp_path / "det.csv", detections)
    result = invoke("link", tmp_path / "det.csv", "-o", tmp_path / "tracks.csv", "--max-displacement", 1.2,
                    "--solver", "scipy", "-q", *flags)
    assert result.exit_code == 0, result.output
    expected = link_detections(io.read_table(tmp_path / "det.csv"), 1.2, solver="scipy", **options)
    written = io.read_table(tmp_path / "tracks.csv")
    np.testing.assert_array_equal(written["track_id"], expected["track_id"])
    np.testing.assert_allclose(written["link_cost"], expected["link_cost"], equal_nan=True)


def _bad_stack(tmp_path, kind):
    path = tmp_path / f"{kind}.tif"
    if kind == "not_a_tiff":
        path.write_text("definitely not a TIFF")
    elif kind == "truncated":
        io.write_stack(tmp_path / "full.tif", np.ones((4, 4, 32, 32), np.uint16), (1, 1, 1))
        path.write_bytes((tmp_path / "full.tif").read_bytes()[:4000])
    elif kind == "image_2d":
        tifffile.imwrite(path, np.ones((32, 32), np.uint16))
    elif kind in ("all_zero", "constant"):
        io.write_stack(path, np.full((3, 4, 32, 32), 0 if kind == "all_zero" else 9, np.uint16), (1, 1, 1))
    elif kind == "nan":
        data = np.random.default_rng(0).random((3, 4, 32, 32)).astype(np.float32)
        data[1, 2, 3, 4] = np.nan
        io.write_stack(path, data, (1, 1, 1))
    elif kind == "missing":
        pass
    return path


@pytest.mark.parametrize("kind, message", [
    ("not_a_tiff", "not a readable TIFF"),
    ("truncated", "truncated or corrupt"),
    ("image_2d", "2D image"),
    ("all_zero", "constant"),
    ("constant", "constant"),
    ("nan", "NaN"),
    ("missing", "no such file"),
])
def test_bad_stacks_give_one_line_errors(tmp_path, kind, message):
    stack = _bad_stack(tmp_path, kind)
    output = tmp_path / "tracks.csv"
    result = invoke("run", stack, "-o", output, "-q")
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output and result.output.strip().count("\n") == 0
    assert not output.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary leftovers


def test_frames_with_zero_or_one_detection(tmp_path):
    data = np.full((3, 8, 40, 40), 100, np.uint16)
    rng = np.random.default_rng(1)
    data = (data + rng.poisson(5, data.shape)).astype(np.uint16)
    data[1, 4, 20, 20] += 400  # frame 0 and 2: nothing; frame 1: one spot
    stack = tmp_path / "sparse.tif"
    io.write_stack(stack, data, (0.4, 0.15, 0.15))
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--spot-radius", "0.3", "-q")
    assert result.exit_code == 0, result.output
    tracks = io.read_table(tmp_path / "t.csv")
    assert tracks["frame"].tolist() == [1]


def test_existing_output_is_refused_and_kept(simulated, tmp_path):
    stack, _ = simulated
    output = tmp_path / "tracks.csv"
    output.write_text("precious")
    result = invoke("run", stack, "-o", output, *RUN_OPTIONS)
    assert result.exit_code == 1 and "already exists" in result.output
    assert output.read_text() == "precious"
    assert invoke("run", stack, "-o", output, *RUN_OPTIONS, "--overwrite").exit_code == 0
    assert output.read_text() != "precious"


@pytest.mark.parametrize("content, message", [
    ("frame,z,y\n0,1,2\n", "missing column(s): x"),
    ("frame,x\n0,1\n", "missing column(s): y"),
    ("frame,z,y,x\n0,1,2,nan\n", "non-finite"),
])
def test_link_bad_csv(tmp_path, content, message):
    path = tmp_path / "d.csv"
    path.write_text(content)
    result = invoke("link", path, "-o", tmp_path / "t.csv")
    assert result.exit_code == 1 and message in result.output


def test_bad_parameters(simulated, tmp_path):
    stack, _ = simulated
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--voxel-size", "1,2,3,4")
    assert result.exit_code == 2 and "Z,Y,X" in result.output
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--voxel-size", "1,2")  # (Y,X: 2D series only)
    assert result.exit_code == 1 and "three positive numbers z,y,x" in result.output
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--voxel-size", "nan,0.1,0.1")
    assert result.exit_code == 2 and "finite" in result.output
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--max-displacement", "-1")
    assert result.exit_code == 2 and "--max-displacement" in result.output
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--persistence", "1.5")
    assert result.exit_code == 2 and "--persistence" in result.output
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--max-gap", "-1")
    assert result.exit_code == 2 and "--max-gap" in result.output
    assert not (tmp_path / "t.csv").exists()


def test_help_mentions_units():
    result = invoke("run", "--help")
    assert result.exit_code == 0 and "µm" in result.output
    assert invoke("solvers").exit_code == 0


def test_run_saves_its_parameters_and_config_reproduces_the_run(simulated, tmp_path):
    stack, _ = simulated
    first = tmp_path / "first.csv"
    options = ["--spot-radius", "0.8,0.3,0.3", "--max-displacement", "1.2", "--threshold", "5.5", "--max-gap", "1",
               "--no-smoothing", "--solver", "scipy", "--device", "cpu"]
    assert invoke("run", stack, "-o", first, "-q", *options).exit_code == 0
    saved = tmp_path / "first.params.toml"
    text = saved.read_text()
    assert text.startswith("[detection]") and '[tracker]\nversion = "' in text
    detection, linking = read_toml(saved)
    assert detection == DetectionParams(spot_radius_um=(0.8, 0.3, 0.3), threshold=5.5, device="cpu")
    assert linking == LinkingParams(max_displacement_um=1.2, max_gap=1, smoothing=False, solver="scipy")
    # The saved file alone, no options: the same tracks, byte for byte, and the same parameters saved.
    second = tmp_path / "second.csv"
    assert invoke("run", stack, "-o", second, "-q", "--config", saved).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    assert (tmp_path / "second.params.toml").read_text() == text
    # Options given on the command line win over the file; the others still come from it.
    third = tmp_path / "third.csv"
    assert invoke("run", stack, "-o", third, "-q", "--config", saved, "--max-gap", "0",
                  "--smoothing").exit_code == 0
    assert read_toml(tmp_path / "third.params.toml") == (detection, linking.replace(max_gap=0, smoothing=True))


def test_saved_parameters_are_never_overwritten_without_overwrite(simulated, tmp_path):
    stack, _ = simulated
    output = tmp_path / "tracks.csv"
    saved = tmp_path / "tracks.params.toml"
    saved.write_text("precious")
    result = invoke("run", stack, "-o", output, *RUN_OPTIONS)
    assert result.exit_code == 1 and "tracks.params.toml already exists" in result.output
    assert saved.read_text() == "precious" and not output.exists()
    assert invoke("run", stack, "-o", output, *RUN_OPTIONS, "--overwrite").exit_code == 0
    assert read_toml(saved)[1].max_displacement_um == 1.2


def test_link_saves_its_parameters_and_reads_a_config(tmp_path, simulated):
    _, truth_path = simulated
    truth = io.read_table(truth_path)
    detections = tmp_path / "det.csv"
    io.write_table(detections, {k: truth[k] for k in ("frame", "z", "y", "x")})
    assert invoke("link", detections, "-o", tmp_path / "a.csv", "--max-displacement", 1.2, "--motion", "none",
                  "--solver", "scipy", "-q").exit_code == 0
    text = (tmp_path / "a.params.toml").read_text()
    assert "[linking]" in text and "[detection]" not in text and "[tracker]" in text
    assert invoke("link", detections, "-o", tmp_path / "b.csv", "--config", tmp_path / "a.params.toml",
                  "-q").exit_code == 0
    assert (tmp_path / "b.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()


@pytest.mark.parametrize("content, message", [
    ("[linking]\nmax_gap = -3\n", "--max-gap must be in [0, 1000]"),
    ("[linking\n", "not valid TOML"),
    ("[detection]\nspot_size = 1.0\n", "unknown detection parameter"),
])
def test_bad_config_is_one_line(tmp_path, simulated, content, message):
    stack, _ = simulated
    config = tmp_path / "bad.toml"
    config.write_text(content)
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--config", config)
    assert result.exit_code == 1 and message in result.output and str(config) in result.output
    assert result.output.strip().count("\n") == 0 and not (tmp_path / "t.csv").exists()


def test_verbosity_sets_the_tracker_logger():
    @click.command()
    @verbosity_options
    def command(quiet):
        logging.getLogger("tracker.example").info("an info line")
        logging.getLogger("tracker.example").warning("a warning line")
        logging.getLogger("other").warning("not ours")

    runner = CliRunner()
    plain, verbose, quiet = (runner.invoke(command, args).output for args in ([], ["-v"], ["-q"]))
    assert "a warning line" in plain and "an info line" not in plain
    assert "an info line" in verbose and "a warning line" in verbose
    assert "warning" not in quiet and "info" not in quiet
    assert "not ours" not in plain + verbose
    # The stderr handler lives only while a command runs; the library keeps only its NullHandler.
    assert all(isinstance(h, logging.NullHandler) for h in logging.getLogger("tracker").handlers)


# --- The guarantees (issue 25): inputs are never outputs, one-line errors, signals, pipes, strict JSON. ---------

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd, script=None, **kwargs) -> subprocess.Popen:
    """``track ARGS`` in a fresh interpreter importing this checkout (``script``: Python run before the CLI)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"),
                                                        os.environ.get("PYTHONPATH", "")])}
    code = (script or "") + "\nfrom tracker.cli import main\nmain()\n"
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def one_line_error(result, code: int = 1) -> str:
    """The message of a user error: exit ``code``, one ``Error:`` line, no traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    if code == 1:
        assert result.output.strip() == errors[0]
    return errors[0]


def test_inputs_are_never_outputs(simulated, tmp_path):
    stack, truth = simulated
    raw = stack.read_bytes()
    detections = tmp_path / "det.csv"
    io.write_table(detections, {"frame": np.array([0, 1]), "z": np.ones(2), "y": np.ones(2), "x": np.ones(2)})
    cases = [
        (["run", stack, "-o", stack, "--overwrite"], "-o " + str(stack) + " is the input STACK"),
        (["run", stack, "-o", tmp_path / "x.csv", "--detections", tmp_path / "x.csv"],
         "--detections " + str(tmp_path / "x.csv") + " is the same file as -o"),
        (["link", detections, "-o", detections, "--overwrite"], "is the input DETECTIONS"),
        (["simulate", tmp_path / "s.tif", "--ground-truth", tmp_path / "s.tif"], "is the same file as OUTPUT"),
    ]
    for args, message in cases:
        assert message in one_line_error(invoke(*args))
    assert stack.read_bytes() == raw and sorted(p.name for p in tmp_path.iterdir()) == ["det.csv"]


def test_an_unwritable_output_is_found_before_any_work(simulated, tmp_path, monkeypatch):
    stack, _ = simulated
    (tmp_path / "file").write_text("not a folder")

    def never(*args, **kwargs):
        raise AssertionError("tracking started")

    monkeypatch.setattr("tracker.pipeline.track_stack", never)
    message = one_line_error(invoke("run", stack, "-o", tmp_path / "file" / "t.csv"))
    assert "is not a folder" in message
    message = one_line_error(invoke("run", tmp_path / "missing.tif", "--detections", tmp_path / "no" / "d.csv",
                                    "-o", tmp_path / "t.csv"))
    assert "folder " + str(tmp_path / "no") + " does not exist" in message  # before the missing stack


SLOW_RENAME = """
import os, sys, time
_replace = os.replace
def _slow_replace(source, target):
    sys.stderr.write("renaming\\n"); sys.stderr.flush()
    time.sleep(60)
    _replace(source, target)
os.replace = _slow_replace
"""


@pytest.mark.parametrize("kind", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_during_a_write_removes_the_partial_file(tmp_path, kind):
    if not hasattr(signal, kind):
        pytest.skip(f"no {kind} here")
    process = run_cli("simulate", "s.tif", "--frames", 2, "--shape", "4,32,32", cwd=tmp_path, script=SLOW_RENAME)
    assert process.stderr.readline().strip() == "renaming"  # the .part file is complete, its rename waits
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")]
    process.send_signal(getattr(signal, kind))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + getattr(signal, kind)
    assert stderr.strip() == f"Error: stopped by {kind}; files being written were removed"
    assert list(tmp_path.iterdir()) == []


def test_a_closed_pipe_ends_quietly(simulated, tmp_path):
    """``track evaluate ... | head -1``: the reader is gone before the first line; exit 0, nothing on stderr."""
    _, truth = simulated
    process = run_cli("evaluate", truth, truth, cwd=tmp_path)
    process.stdout.close()  # (the only reader: every write now fails with EPIPE)
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 0 and stderr == ""


@pytest.mark.parametrize("args, option", [
    (["run", "S", "--threshold", "nan"], "--threshold"),
    (["run", "S", "--threshold", "inf"], "--threshold"),
    (["run", "S", "--spot-radius", "inf"], "--spot-radius"),
    (["run", "S", "--gap-penalty", "nan"], "--gap-penalty"),
    (["link", "D", "-o", "t.csv", "--max-displacement", "nan"], "--max-displacement"),
    (["evaluate", "T", "T", "--match-distance", "-1"], "--match-distance"),
    (["evaluate", "T", "T", "--match-distance", "nan"], "--match-distance"),
    (["evaluate", "T", "T", "--match-distance", "inf"], "--match-distance"),
    (["simulate", "s.tif", "--snr", "0"], "--snr"),
    (["simulate", "s.tif", "--blink", "1.5"], "--blink"),
    (["simulate", "s.tif", "--death-rate", "2"], "--death-rate"),
    (["simulate", "s.tif", "--birth-rate", "-1"], "--birth-rate"),
    (["simulate", "s.tif", "--shape", "0,10,10"], "--shape"),
    (["run", "S", "--no-such-option"], "--no-such-option"),
])
def test_bad_option_values_are_usage_errors(tmp_path, args, option):
    """Exit code 2 (click's usage errors), one line naming the option (and the accepted range), nothing written."""
    message = one_line_error(CliRunner().invoke(main, args), code=2)
    assert option in message
    assert "nan" not in args or "not a finite number" in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["run", "{stack}", "--spot-radius", "100"], "--spot-radius 100 µm is 250 voxels along z"),
    (["run", "{stack}", "--voxel-size", "1e-3,1e-3,1e-3", "--spot-radius", "0.5"],  # (smaller: a unit note too)
     "--spot-radius 0.5 µm is 500 voxels along z"),
    (["simulate", "{tmp}/s.tif", "--shape", "2000,2000,2000"], "rendering 20 frames of 2000 × 2000 × 2000 voxels"),
    (["simulate", "{tmp}/s.tif", "--voxel-size", "1e-9,1e-9,1e-9"], "--psf-sigma 0.45 µm is 4.5e+08 voxels"),
    (["simulate", "{tmp}/s.tif", "--particles", "1000000000000"], "simulating 1000000000000 particles"),
])
def test_absurd_sizes_are_refused_up_front(simulated, tmp_path, args, message):
    stack, _ = simulated
    args = [a.format(stack=stack, tmp=tmp_path) for a in args]
    assert message in one_line_error(invoke(*args, "-o", tmp_path / "t.csv") if args[0] == "run" else invoke(*args))
    assert list(tmp_path.iterdir()) == []


def test_a_spot_under_half_a_voxel_or_no_spot_warns(simulated, tmp_path):
    stack, _ = simulated
    result = invoke("run", stack, "-o", tmp_path / "t.csv", "--spot-radius", "1e-6")
    assert result.exit_code == 0
    assert "warning: --spot-radius 1e-06 µm is under half a voxel" in result.output
    result = invoke("run", stack, "-o", tmp_path / "u.csv", "--threshold", "1000")
    assert result.exit_code == 0
    assert "warning: no spots found in 15 frame(s): check --spot-radius and --voxel-size" in result.output


@pytest.mark.parametrize("frame", ["1e20", "-1e20", "0.5", "nan"])
def test_corrupt_frame_numbers_are_refused(tmp_path, frame):
    detections = tmp_path / "d.csv"
    detections.write_text(f"frame,z,y,x\n0,1,1,1\n{frame},1,1,1\n")
    assert "frame" in one_line_error(invoke("link", detections, "-o", tmp_path / "t.csv"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]


def test_duplicated_rows_are_reported_and_dropped(tmp_path):
    detections = tmp_path / "d.csv"
    rows = [(t, 1.0 + 0.1 * t, 2.0, 2.0 + k * 3) for t in range(4) for k in range(2)]
    detections.write_text("frame,z,y,x\n" + "".join(f"{t},{z},{y},{x}\n" for t, z, y, x in rows + rows[:3]))
    result = invoke("link", detections, "-o", tmp_path / "t.csv", "--max-displacement", 1)
    assert result.exit_code == 0, result.output
    assert "warning: " + str(detections) + ": 3 duplicated row(s)" in result.output
    tracks = io.read_table(tmp_path / "t.csv")
    assert len(tracks["frame"]) == 8 and len(np.unique(tracks["track_id"])) == 2


def test_a_gate_too_large_for_memory_is_refused(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    detections = tmp_path / "d.csv"
    io.write_table(detections, {"frame": np.repeat(np.arange(3), 300), **{a: rng.random(900) * 20 for a in "zyx"}})
    monkeypatch.setattr("tracker.validation.memory_budget", lambda: 2 * 1024**2)
    message = one_line_error(invoke("link", detections, "-o", tmp_path / "t.csv", "--max-displacement", "1e9"))
    assert re.search(r"--max-displacement 1e\+09 µm admits about 9e\+04 candidate links .* more than the 2 MiB "
                     r"this machine can spare: give --max-displacement [0-9.]+ or less", message), message
    suggested = re.search(r"give --max-displacement ([0-9.]+)", message).group(1)
    assert invoke("link", detections, "-o", tmp_path / "t.csv", "--max-displacement", suggested, "-q").exit_code == 0


def test_evaluate_json_is_strict_with_null_for_undefined_measures(simulated, tmp_path):
    _, truth = simulated
    empty = tmp_path / "empty.csv"
    empty.write_text("track_id,frame,z,y,x\n")
    result = invoke("evaluate", empty, truth, "--json")  # (nothing on standard error)
    assert result.exit_code == 0

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    scores = json.loads(result.stdout, parse_constant=refuse)
    assert scores["rmse_um"] is None and scores["detection_recall"] == 0.0


def test_evaluate_names_a_bad_tracks_file(simulated, tmp_path):
    _, truth = simulated
    tracks = tmp_path / "t.csv"
    tracks.write_text("track_id,frame,z,y,x\n0,0,1,1,1\n0,1,1,,1\n")
    assert one_line_error(invoke("evaluate", tracks, truth)).startswith(
        f"Error: {tracks}: column 'y' has missing or non-finite values")


def test_solvers_warm_up_without_a_gpu_says_so():
    result = invoke("solvers", "--warm-up")
    assert result.exit_code == 0 and "scipy" in result.output
    assert "warm-up" in result.output


def test_program_exit_freezes_the_heap_only_as_the_program(monkeypatch):
    """`track` run as the program registers gc.freeze for its exit; called in-process (CliRunner) it does not."""
    import atexit
    import gc

    registered = []
    monkeypatch.setattr(atexit, "register", lambda function, *args, **kwargs: registered.append(function))
    assert CliRunner().invoke(main, ["--version"]).exit_code == 0
    assert registered == []
    monkeypatch.setattr(sys, "argv", ["track", "--version"])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 0 and registered == [gc.freeze]


def test_link_options_with_the_default_solver_parse_without_scipy(tmp_path):
    """The default --solver is not checked against the solver registry while parsing (that imports SciPy), so that
    `track link` starts reading its table while SciPy is imported; a bad solver name is still a usage error."""
    code = ("import sys\nfrom tracker.cli import main\n"
            f"main.commands['link'].make_context('link', [{str(tmp_path / 'd.csv')!r}, '-o', 't.csv'])\n"
            "print('scipy' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", result.stderr
    bad = CliRunner().invoke(main, ["link", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "t.csv"),
                                    "--solver", "nonesuch"])
    assert bad.exit_code == 2 and "'nonesuch' is not one of 'auto', 'scipy'" in bad.output


@pytest.mark.parametrize("output", ["t.csv", pytest.param("t.geff", marks=pytest.mark.skipif(
    importlib.util.find_spec("geff") is None, reason="needs geff (the [formats] extra)")),
    "t.xml", "t.isbi.xml"])
def test_config_reproduces_a_run_whose_parameters_were_estimated(simulated, tmp_path, output):
    """No options: the spot radius, threshold and gate are estimated from the data and saved as used; the saved
    file alone reproduces the output byte for byte (CSV, and the GEFF's and TrackMate XML's files)."""
    stack, _ = simulated
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    assert invoke("run", stack, "-o", first / output, "-q", "--device", "cpu").exit_code == 0
    saved = (first / output).with_suffix(".params.toml")
    detection, linking = read_toml(saved)
    assert detection.spot_radius_um is not None and linking.max_displacement_um is not None  # (estimated, saved)
    assert invoke("run", stack, "-o", second / output, "-q", "--config", saved).exit_code == 0
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_link_config_reproduces_the_estimated_gate(tmp_path, simulated):
    _, truth_path = simulated
    truth = io.read_table(truth_path)
    detections = tmp_path / "det.csv"
    io.write_table(detections, {k: truth[k] for k in ("frame", "z", "y", "x")})
    assert invoke("link", detections, "-o", tmp_path / "a.csv", "-q").exit_code == 0
    assert read_toml(tmp_path / "a.params.toml")[1].max_displacement_um is not None
    assert invoke("link", detections, "-o", tmp_path / "b.csv", "-q", "--config", tmp_path / "a.params.toml",
                  ).exit_code == 0
    assert (tmp_path / "b.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()


def test_help_imports_nothing_heavy():
    """`track --help` (issue 26: well under 0.3 s; 0.05 s measured) imports none of the numeric or I/O libraries."""
    code = ("import sys\nfrom tracker.cli import main\nsys.argv = ['track', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'pyarrow', 'pandas', "
            "'tifffile', 'zarr', 'geff', 'dask', 'napari', 'cupy'}), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.strip() == "[]"
