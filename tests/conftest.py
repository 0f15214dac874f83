"""Shared fixtures, and tests that need hardware or a display skip cleanly instead of aborting the run.

* GPU tests (``@pytest.mark.gpu``) skip without CuPy or a GPU.
* napari tests (``@pytest.mark.napari``; a module marks itself with ``pytestmark = pytest.mark.napari``) need
  Qt's GUI libraries, OpenGL (``libGL``, ``libEGL``) and a display. The napari and pytest-qt pytest plugins
  import Qt and OpenGL when they load, and one that fails to load stops pytest before any test runs, so
  ``pyproject.toml`` keeps them from loading by themselves (``-p no:napari -p no:pytest-qt``) and this file
  loads them only where Qt's GUI imports. The display is a private Xvfb started here (not by pytest-xvfb,
  also kept off: ``-p no:xvfb``) when the napari tests are selected, which dies with pytest even when pytest
  itself is killed or aborts; without Xvfb, the display of ``DISPLAY`` is used. Before any napari test runs,
  a separate process makes an OpenGL context on that display (Qt aborts the whole process where it cannot).
  Where anything is missing, the napari tests skip with the reason and the rest run.
  ``bash .ci/install_system_deps.sh`` installs what they need (Debian).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib.util
import os
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tracker.backend import gpu_available

GUI_PLUGINS = ("pytestqt.plugin", "napari.utils._testsupport")
"""The pytest plugins of pytest-qt (``qtbot``) and napari (``make_napari_viewer``), loaded where Qt's GUI imports."""

INSTALL_HINT = "bash .ci/install_system_deps.sh installs them (Debian)"

_NAPARI_MODULE = re.compile(r"^pytestmark\s*=.*\bmark\.napari\b", re.MULTILINE)

_OPENGL_PROBE = """
from qtpy.QtGui import QOffscreenSurface, QOpenGLContext
from qtpy.QtWidgets import QApplication
app = QApplication([])
context, surface = QOpenGLContext(), QOffscreenSurface()
surface.create()
assert context.create() and context.makeCurrent(surface), "no OpenGL context on this display"
print(context.format().majorVersion())
"""


@functools.lru_cache(maxsize=1)
def gui_problem() -> str | None:
    """Why Qt's GUI and OpenGL cannot load in this process (a missing library or binding), or None."""
    if ctypes.util.find_library("GL") is None:
        return "no OpenGL library (libGL): " + INSTALL_HINT
    try:
        ctypes.CDLL(ctypes.util.find_library("GL"))
    except OSError as error:
        return f"the OpenGL library cannot load ({_first_line(error)}): " + INSTALL_HINT
    try:
        from qtpy import QtGui  # noqa: F401  (PyQt6's QtGui links libGL and libEGL)
    except Exception as error:  # ImportError, OSError, qtpy's error without a binding
        return f"Qt's GUI cannot load ({_first_line(error)}): " + INSTALL_HINT
    return None


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


_PLUGIN_PROBLEMS: list[str] = []
"""Why a GUI plugin that is installed failed to load (its tests then skip with the reason)."""


def pytest_addoption(parser, pluginmanager):
    """Load the GUI plugins now, where Qt's GUI imports: still in time for their own options."""
    if gui_problem() is not None:
        return
    for name in GUI_PLUGINS:
        if importlib.util.find_spec(name.split(".")[0]) is None:
            continue  # (not installed: its tests skip through importorskip)
        try:
            pluginmanager.import_plugin(name)
        except Exception as error:  # (an ImportError, or OpenGL's OSError, from deep inside)
            while error.__cause__ or error.__context__:  # (the first error, not pytest's wrapping of it)
                error = error.__cause__ or error.__context__
            _PLUGIN_PROBLEMS.append(f"the pytest plugin {name} cannot load ({_first_line(error)}): " + INSTALL_HINT)


def napari_problem() -> str | None:
    """Why napari tests cannot run in this process (Qt's GUI, OpenGL, a GUI plugin), or None."""
    return gui_problem() or (_PLUGIN_PROBLEMS[0] if _PLUGIN_PROBLEMS else None)


def no_display() -> str | None:
    """Why no display can be had (no Xvfb to start, none in ``DISPLAY``), or None."""
    if shutil.which("Xvfb") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    return "no display: needs Xvfb or a DISPLAY; " + INSTALL_HINT


def pytest_pycollect_makemodule(module_path, parent):
    """A napari test module that cannot run here (no Qt GUI, no display): skipped whole, with the reason, without
    importing it (which may fail, or take seconds)."""
    problem = napari_problem() or no_display()
    if problem is not None and _NAPARI_MODULE.search(Path(module_path).read_text(encoding="utf-8")):
        return _SkippedModule.from_parent(parent, path=Path(module_path), reason=problem)
    return None


class _SkippedModule(pytest.Module):
    def __init__(self, *args, reason: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.reason = reason

    def collect(self):
        pytest.skip(self.reason, allow_module_level=True)


def pytest_collection_modifyitems(config, items):
    if not gpu_available():
        skip_gpu = pytest.mark.skip(reason="needs CuPy and a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)
    napari_items = [item for item in items if "napari" in item.keywords]
    if napari_items:
        problem = napari_problem() or _display_problem(config)
        if problem is not None:
            for item in napari_items:
                item.add_marker(pytest.mark.skip(reason=problem))


def _display_problem(config) -> str | None:
    """Start the display (our Xvfb, or the one in DISPLAY) and make an OpenGL context on it; why not, or None."""
    if no_display():
        return no_display()
    if shutil.which("Xvfb"):
        display = VirtualDisplay()
        problem = display.start()
        if problem is not None:
            return problem
        config.add_cleanup(display.stop)
    try:
        probe = subprocess.run([sys.executable, "-c", _OPENGL_PROBE], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "no OpenGL context on the display (timed out)"
    if probe.returncode != 0:
        lines = [line for line in (probe.stderr or "").splitlines() if line.strip()]
        return f"no OpenGL context on the display ({lines[-1] if lines else f'exit code {probe.returncode}'}): " + \
            INSTALL_HINT
    return None


class VirtualDisplay:
    """A private Xvfb on a free display number, which dies with this process (Linux: ``PR_SET_PDEATHSIG``)."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.previous = os.environ.get("DISPLAY")

    def start(self) -> str | None:
        """Start it and point ``DISPLAY`` at it; a reason on failure, else None."""
        read_end, write_end = os.pipe()
        try:
            self.process = subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
                pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        except OSError as error:
            os.close(read_end)
            return f"Xvfb does not start ({error})"
        finally:
            os.close(write_end)
        number = b""
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while not number.endswith(b"\n") and select.select([pipe], [], [], 20)[0]:
                chunk = pipe.read(16)
                if not chunk:
                    break
                number += chunk
        if not number.strip().isdigit():
            self.stop()
            return "Xvfb did not report a display: " + INSTALL_HINT
        os.environ["DISPLAY"] = f":{int(number)}"
        return None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.previous is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = self.previous


def _die_with_parent() -> None:
    """In the child, before exec: receive SIGTERM when the parent dies, however it dies (Linux only)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
