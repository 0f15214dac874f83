"""Outputs (tracker/io/_atomic.py): never an input or another output, checked writable first, written atomically."""

from __future__ import annotations

import os

import pytest

from tracker.errors import InputError
from tracker.io._atomic import atomic_path, check_outputs, check_writable, same_file


def test_same_file_sees_through_relative_paths_links_and_hard_links(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.tif").write_text("raw")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "a.tif", tmp_path / "link.tif")
    os.link(tmp_path / "a.tif", tmp_path / "hard.tif")
    assert same_file("a.tif", tmp_path / "sub" / ".." / "a.tif")
    assert same_file("link.tif", "a.tif") and same_file("hard.tif", "a.tif")
    assert not same_file("a.tif", "b.tif") and not same_file("new.csv", "other.csv")
    assert same_file("new.csv", tmp_path / "new.csv")  # neither exists yet: compared resolved


@pytest.mark.parametrize("outputs, message", [
    ({"-o": "stack.tif"}, "-o stack.tif is the input STACK: an input is never overwritten"),
    ({"-o": "link.tif"}, "-o link.tif is the input STACK"),
    ({"-o": "t.csv", "--detections": "./t.csv"}, "--detections t.csv is the same file as -o"),
    ({"-o": "t.csv", "the parameters file": "t.csv"}, "the parameters file t.csv is the same file as -o"),
])
def test_an_input_or_another_output_is_refused(tmp_path, monkeypatch, outputs, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stack.tif").write_text("raw")
    os.symlink(tmp_path / "stack.tif", tmp_path / "link.tif")
    with pytest.raises(InputError, match=message):
        check_outputs({"STACK": "stack.tif"}, outputs, overwrite=True)
    assert (tmp_path / "stack.tif").read_text() == "raw"


def test_outputs_that_cannot_be_written_are_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "existing.csv").write_text("x")
    with pytest.raises(InputError, match="existing.csv already exists \\(use --overwrite to replace it\\)"):
        check_outputs({}, {"-o": tmp_path / "existing.csv", "--detections": None})
    check_outputs({}, {"-o": tmp_path / "existing.csv"}, overwrite=True)
    (tmp_path / "store.geff").mkdir()
    (tmp_path / "store.geff" / "zarr.json").write_text("{}")
    with pytest.raises(InputError, match="store.geff already exists"):
        check_writable(tmp_path / "store.geff")
    check_writable(tmp_path / "store.geff", overwrite=True)  # a Zarr store (GEFF) is replaced whole
    with pytest.raises(InputError, match="is a folder, not a file"):
        check_writable(tmp_path, overwrite=True)  # any other folder never
    with pytest.raises(InputError, match="is not a folder"):
        check_writable(tmp_path / "file" / "t.csv")
    with pytest.raises(InputError, match="does not exist"):
        check_writable(tmp_path / "missing" / "t.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.csv", "file", "store.geff"]  # no probe left


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc (read-only even for root)")
def test_a_read_only_folder_is_refused_even_for_root():
    with pytest.raises(InputError, match="cannot write to folder /proc"):
        check_writable("/proc/tracks.csv")


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target, overwrite=True) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    with atomic_path(target, overwrite=True) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
