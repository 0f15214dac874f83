"""The documentation site: it builds without warnings, and the 2D tutorial's code runs as written."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracker import io as tracker_io

ROOT = Path(__file__).resolve().parent.parent


def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("material")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "io" / "index.html").read_text()
    assert "write_trackmate" in api and "read_tracks" in api  # the reference is generated from the docstrings


def test_2d_tutorial_runs(tmp_path, monkeypatch):
    text = (ROOT / "docs" / "tutorial-2d.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "tutorial-2d.md", "exec"), namespace)
    tracks = namespace["tracks"]
    assert list(tracks.columns[:4]) == ["track_id", "frame", "y", "x"] and len(tracks) > 200
    from tracker.metrics import evaluate

    assert evaluate(tracks, namespace["truth2d"])["link_f1"] > 0.8
    # The command line, as the tutorial runs it (no options), against the 2D truth.
    from click.testing import CliRunner

    from tracker.cli import main

    command = re.search(r"```bash\n(track run [^\n]*)\n", text).group(1).split()[1:]
    assert CliRunner().invoke(main, command, catch_exceptions=False).exit_code == 0
    assert evaluate(tracker_io.read_tracks("tracks2d.csv"), namespace["truth2d"])["link_f1"] > 0.8

