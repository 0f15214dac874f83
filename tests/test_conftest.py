"""The test command on a fresh machine (tests/conftest.py): napari tests skip with a reason where Qt, OpenGL or a
display is missing, the rest still run, and the Xvfb started for them never outlives pytest."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAPARI_TESTS = ROOT / "tests" / "test_napari_plugin.py"


def pytest_in_subprocess(*args, env=None, prefix=()) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([*prefix, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.skipif(shutil.which("Xvfb") is None or not sys.platform.startswith("linux"),
                    reason="needs Xvfb and Linux")
def test_the_virtual_display_dies_with_an_aborted_process():
    code = ("import os, sys; sys.path.insert(0, 'tests'); from conftest import VirtualDisplay; "
            "display = VirtualDisplay(); assert display.start() is None; "
            "print(display.process.pid, os.environ['DISPLAY'], flush=True); os.abort()")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode != 0  # (SIGABRT)
    pid, display = done.stdout.split()
    assert display.startswith(":")
    deadline = time.monotonic() + 10
    while alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(int(pid)), "Xvfb outlived the aborted process"


@pytest.mark.skipif(not NAPARI_TESTS.exists(), reason="no napari tests")
def test_without_a_display_the_napari_tests_skip_and_the_rest_run(tmp_path):
    """No Xvfb on the PATH and no DISPLAY: a reason for each napari test, exit code 0 (not Qt's abort)."""
    env = {"PATH": str(tmp_path), "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    done = pytest_in_subprocess(NAPARI_TESTS, "tests/test_stack.py", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no display: needs Xvfb or a DISPLAY; bash .ci/install_system_deps.sh installs them" in done.stdout
    assert " passed" in done.stdout and " skipped" in done.stdout


def _loaded_library(name: str) -> Path | None:
    """The file of the shared library ``name`` (e.g. ``libGL.so``) as this process maps it."""
    try:
        ctypes.CDLL(f"{name}.1")
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = {line.split()[-1] for line in maps.splitlines() if f"/{name}." in line}
    return Path(sorted(paths)[0]).resolve() if paths else None


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not NAPARI_TESTS.exists(),
                    reason="hides libGL in a private mount namespace: needs root and unshare")
def test_without_opengl_pytest_still_runs_and_says_why(tmp_path):
    """libGL unloadable (as on a machine without Mesa): pytest loads, napari tests skip, the others pass."""
    library = _loaded_library("libGL.so")
    if library is None:
        pytest.skip("libGL is not installed here")
    hide = f"mount --bind /dev/null {library} && exec \"$@\""
    probe = subprocess.run(["unshare", "-m", "sh", "-c", hide, "sh", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no private mount namespace here")
    done = pytest_in_subprocess(NAPARI_TESTS, "tests/test_stack.py", prefix=("unshare", "-m", "sh", "-c", hide, "sh"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the OpenGL library cannot load" in done.stdout or "Qt's GUI cannot load" in done.stdout
    assert " passed" in done.stdout and " skipped" in done.stdout
