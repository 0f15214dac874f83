"""The core is a library: importing it brings in no file I/O, command line, napari or Qt."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import tracker

LAYERS = ("tracker.cli", "tracker.io")
"""The layers over the core: every other module of ``tracker`` is core."""

FORBIDDEN = ("tracker.cli", "tracker.io", "click", "tifffile", "napari", "magicgui", "qtpy", "PyQt5", "PyQt6",
             "PySide2", "PySide6")


def core_modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(tracker.__path__, "tracker.")]
    return sorted(n for n in names if not any(n == layer or n.startswith(layer + ".") for layer in LAYERS))


def imported_after(modules: list[str]) -> list[str]:
    """The names in ``sys.modules`` after a fresh interpreter imports ``modules``."""
    code = f"import importlib, json, sys\nfor m in {modules!r}: importlib.import_module(m)\n" \
           "print(json.dumps(sorted(sys.modules)))"
    root = str(Path(tracker.__file__).parent.parent)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    return json.loads(done.stdout)


def test_core_imports_no_io_cli_napari_or_qt():
    modules = core_modules()
    assert {"tracker.pipeline", "tracker.detect", "tracker.lap", "tracker.stack", "tracker.params"} <= set(modules)
    loaded = imported_after(modules)
    leaked = [name for name in loaded if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)]
    assert not leaked, f"the core imported {leaked}"


def test_cli_import_is_light():
    """``track --help`` imports no SciPy, NumPy, tifffile or linker (the verbs import them when they run)."""
    loaded = set(imported_after(["tracker.cli"]))
    assert not loaded & {"scipy", "numpy", "tifffile", "tracker.link", "tracker.linking", "tracker.lap",
                         "tracker.pipeline", "tracker.io"}
