"""Fuzzing the command line: corrupted TIFFs and CSVs, random option values (hypothesis).

The property is always the same: the command ends with exit code 0, 1 (bad input) or 2 (bad usage), never with
an exception or a traceback; the input files are unchanged; no ``.part`` (or probe) file is left behind; an
output exists only when the command succeeded; and the process's peak memory stays under a bound.

Runs in-process (click's ``CliRunner``) on inputs of a few thousand voxels, with a fixed seed (``derandomize``),
so that it is deterministic and takes well under a minute. ``TRACKER_FUZZ_EXAMPLES=500`` searches longer.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tracker import io
from tracker.cli import main

EXAMPLES = int(os.environ.get("TRACKER_FUZZ_EXAMPLES", "20"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

MEMORY_BOUND_BYTES = 1024**3
"""The fuzzed commands together may raise the process's peak resident memory by at most this much (their inputs
are a few kilobytes: anything near it is an allocation that a check should have refused)."""

SHAPE = (3, 4, 16, 16)
VOXEL = (0.4, 0.15, 0.15)
LINK_OPTIONS = ["--max-displacement", "1.5", "-q"]
RUN_OPTIONS = ["--spot-radius", "0.5", "--device", "cpu", *LINK_OPTIONS]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, bytes]:
    """A small stack and its tables, as the bytes of each file."""
    from tracker.simulate import render_stack, simulate_tracks

    folder = tmp_path_factory.mktemp("fuzz")
    field = tuple((n - 1) * v for n, v in zip(SHAPE[1:], VOXEL))
    truth = simulate_tracks(8, SHAPE[0], field, 0.3, 0.5, seed=1)
    io.write_stack(folder / "stack.tif", render_stack(truth, SHAPE, VOXEL, (0.45, 0.18, 0.18), snr=8, seed=2), VOXEL)
    io.write_table(folder / "truth.csv", truth)
    io.write_table(folder / "detections.csv", {k: truth[k] for k in ("frame", "z", "y", "x")})
    return {name: (folder / name).read_bytes() for name in ("stack.tif", "truth.csv", "detections.csv")}


@pytest.fixture(scope="module", autouse=True)
def memory_bound():
    """Peak resident memory (Linux: KiB; macOS: bytes) before and after every fuzzed command of this module."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if os.uname().sysname == "Darwin" else 1024
    assert (after - before) * scale < MEMORY_BOUND_BYTES


@contextmanager
def folder_with(files: dict[str, bytes]):
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for file_name, content in files.items():
            (folder / file_name).write_bytes(content)
        yield folder


def check(folder: Path, files: dict[str, bytes], args: list[str], outputs: tuple[str, ...] = ()):
    """Run ``track ARGS`` in ``folder`` and assert the property; the result (for further checks)."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        os.chdir(cwd)
    exception = result.exception
    assert exception is None or isinstance(exception, SystemExit), (
        f"track {' '.join(args)} raised {exception!r}\n{result.output}")
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    event(f"exit code {result.exit_code}")  # (--hypothesis-show-statistics: how often each ending was reached)
    assert "Traceback" not in result.output, result.output
    if result.exit_code:
        assert len([line for line in result.output.splitlines() if line.startswith("Error:")]) == 1, result.output
    for file_name, content in files.items():
        assert (folder / file_name).read_bytes() == content, f"{file_name} changed"
    left = sorted(p.name for p in folder.iterdir() if p.name not in files)
    assert not [name for name in left if name.startswith(".")], left  # .part or probe files
    expected = sorted(outputs) if result.exit_code == 0 else []
    assert left == expected, (left, result.output)
    return result


@st.composite
def corrupted(draw, content: bytes) -> bytes:
    """``content`` with a few random corruptions: truncated, bytes flipped, spliced, inserted or zeroed."""
    data = bytearray(content)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "splice", "insert", "zero"]))
        n = len(data)
        if n == 0:
            break
        # Headers and tables of contents sit near the start: corrupt there more often.
        at = draw(st.one_of(st.integers(0, min(n, 512) - 1), st.integers(0, n - 1)))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "splice":
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at:at + len(chunk)] = chunk
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data[at:at + draw(st.integers(1, 64))] = bytes(min(n - at, 64))
    return bytes(data)


TOKENS = ["", " ", "nan", "inf", "-inf", "1e20", "-1e20", "0.5", "-1", "1e308", "abc", '"', "1,2", "0x10", "٣"]


@st.composite
def corrupted_csv(draw, content: bytes) -> bytes:
    """A CSV with table-level corruptions: cells, rows, header, delimiter, BOM, encoding, truncation."""
    lines = content.decode().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cell", "cell", "drop_row", "repeat_row", "header", "delimiter", "bom",
                                     "truncate", "bytes"]))
        row = draw(st.integers(0, max(len(lines) - 1, 0))) if lines else 0
        if kind == "cell" and lines:
            cells = lines[row].split(",")
            cells[draw(st.integers(0, len(cells) - 1))] = draw(st.sampled_from(TOKENS))
            lines[row] = ",".join(cells)
        elif kind == "drop_row" and lines:
            del lines[row]
        elif kind == "repeat_row" and lines:
            lines[row:row] = [lines[row]] * draw(st.integers(1, 3))
        elif kind == "header" and lines:
            cells = lines[0].split(",")
            del cells[draw(st.integers(0, len(cells) - 1))]
            lines[0] = ",".join(cells)
        elif kind == "delimiter":
            separator = draw(st.sampled_from([";", "\t", " "]))
            lines = [line.replace(",", separator) for line in lines]
        elif kind == "bom" and lines:
            lines[0] = "\ufeff" + lines[0]
        elif kind == "truncate":
            text = "\n".join(lines)
            lines = text[:draw(st.integers(0, len(text)))].splitlines()
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = draw(corrupted(data))
    return data


@FUZZ
@given(data=st.data())
def test_run_on_corrupted_stacks(inputs, data):
    stack = data.draw(corrupted(inputs["stack.tif"]))
    files = {"stack.tif": stack}
    with folder_with(files) as folder:
        check(folder, files, ["run", "stack.tif", "-o", "t.csv", *RUN_OPTIONS], outputs=("t.csv", "t.params.toml"))


@FUZZ
@given(data=st.data())
def test_link_on_corrupted_tables(inputs, data):
    files = {"d.csv": data.draw(corrupted_csv(inputs["detections.csv"]))}
    with folder_with(files) as folder:
        result = check(folder, files, ["link", "d.csv", "-o", "t.csv", *LINK_OPTIONS],
                       outputs=("t.csv", "t.params.toml"))
        if result.exit_code == 0:
            tracks = io.read_table(folder / "t.csv")
            assert np.isfinite(tracks["x"]).all() and (np.abs(tracks["frame"]) < 2**31).all()


@FUZZ
@given(data=st.data())
def test_evaluate_on_corrupted_tables(inputs, data):
    files = {"t.csv": inputs["truth.csv"], "truth.csv": inputs["truth.csv"]}
    files[data.draw(st.sampled_from(sorted(files)))] = data.draw(corrupted_csv(inputs["truth.csv"]))
    with folder_with(files) as folder:
        result = check(folder, files, ["evaluate", "t.csv", "truth.csv", "--json"])
        if result.exit_code == 0:
            def refuse(constant):
                raise AssertionError(f"{constant} in the JSON output")

            assert isinstance(json.loads(result.stdout, parse_constant=refuse), dict)


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0, -1, 1e-300, 1e-9, 1e9, 1e300, 2**31, 2**63]),
    st.integers(-5, 50),
)


def option_value(number) -> str:
    return repr(number) if isinstance(number, float) else str(number)


@st.composite
def numeric_options(draw, names: dict[str, str]) -> list[str]:
    """A few options of ``names`` (flag → kind: "number", "triple", "choice:a,b") with random values."""
    options = []
    for flag in draw(st.lists(st.sampled_from(sorted(names)), min_size=1, max_size=4, unique=True)):
        kind = names[flag]
        if kind == "triple":
            values = draw(st.lists(NUMBERS, min_size=1, max_size=4))
            value = ",".join(option_value(v) for v in values)
        elif kind.startswith("choice:"):
            value = draw(st.one_of(st.sampled_from(kind[7:].split(",")), st.text(max_size=5)))
        else:
            value = option_value(draw(NUMBERS))
        options += [flag, value]
    return options


@FUZZ
@given(data=st.data())
def test_run_with_random_options(inputs, data):
    options = data.draw(numeric_options({
        "--spot-radius": "triple", "--threshold": "number", "--max-displacement": "number",
        "--persistence": "number", "--max-gap": "number", "--gap-penalty": "number", "--voxel-size": "triple",
        "--motion": "choice:persistent,none", "--solver": "choice:scipy,auto", "--device": "choice:cpu",
    }))
    files = {"stack.tif": inputs["stack.tif"]}
    with folder_with(files) as folder:
        check(folder, files, ["run", "stack.tif", "-o", "t.csv", "--device", "cpu", "-q", *options],
              outputs=("t.csv", "t.params.toml"))


SMALL_SHAPES = st.tuples(st.integers(1, 6), st.integers(1, 16), st.integers(1, 16)).map(
    lambda shape: ",".join(map(str, shape)))
"""Small volumes; the huge ones below must be refused before any work (a middle size would only be slow)."""


@FUZZ
@given(data=st.data())
def test_simulate_with_random_options(data):
    options = data.draw(numeric_options({
        "--step": "number", "--persistence": "number", "--snr": "number", "--birth-rate": "number",
        "--death-rate": "number", "--blink": "number", "--seed": "number", "--psf-sigma": "triple",
        "--voxel-size": "triple",
    }))
    frames = data.draw(st.one_of(st.integers(-1, 4), st.just(10**12)))
    particles = data.draw(st.one_of(st.integers(-1, 20), st.just(10**12)))
    shape = data.draw(st.one_of(SMALL_SHAPES, st.sampled_from(["100000,100000,100000", "0,4,4", "4,4", "a,b,c"])))
    args = ["simulate", "s.tif", "--frames", str(frames), "--particles", str(particles), "--shape", shape, *options]
    with folder_with({}) as folder:
        check(folder, {}, args, outputs=("s.tif", "s_ground_truth.csv"))
