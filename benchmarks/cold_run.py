"""Where a cold ``track run`` spends its time: every kernel compilation, by the line of ``tracker`` that caused it.

Runs ``track run ARGS...`` in this process (the same code path as the command) with CuPy's compiler wrapped,
and prints the wall time, the NVRTC compilations (cache misses) grouped by the innermost ``tracker`` frame
that asked for them, the slowest of them, and how this package's modules were loaded (shipped binary or NVRTC). Run it twice with one ``CUPY_CACHE_DIR``, empty first (a fresh machine), then filled::

    export CUPY_CACHE_DIR=$(mktemp -d)
    PYTHONPATH=. python benchmarks/cold_run.py --json cold.json -- sample_data/sample.tif -o /tmp/t.csv --overwrite
    (same again, --json warm.json)

``TRACKER_CUDA_SHIPPED=0`` makes this package compile its own ``.cu`` files with NVRTC as before.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import threading
import time
import traceback
from pathlib import Path

START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
_KERNEL_NAME = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)")


def _caller() -> str:
    """``file:line`` of the innermost frame of the ``tracker`` package, and the library function it called."""
    stack = traceback.extract_stack()[:-2]
    for depth in range(len(stack) - 1, -1, -1):
        path = Path(stack[depth].filename)
        if "tracker" in path.parts and "benchmarks" not in path.parts:
            called = f" -> {stack[depth + 1].name}" if depth + 1 < len(stack) else ""
            return f"{'/'.join(path.parts[path.parts.index('tracker'):])}:{stack[depth].lineno}{called}"
    return "(outside tracker)"


def install_hooks(events: list[dict], record: list[dict] | None = None) -> None:
    """Record every NVRTC compilation and every module :func:`tracker.lap._cuda.load_module` gives in ``events``.

    ``nvrtc``: one NVRTC compilation (CuPy's cache missed); ``binary``: a shipped fatbin loaded;
    ``nvrtc-module``: a module of this package left to NVRTC (its compilation is an ``nvrtc`` event too).
    ``record``: also keep the arguments of every compilation CuPy asked for (``--precompile`` replays them).
    """
    import cupy.cuda.compiler as compiler

    lock = threading.Lock()
    program_compile = compiler._NVRTCProgram.compile

    def timed_compile(self, options=(), log_stream=None):
        start = time.perf_counter()
        try:
            return program_compile(self, options, log_stream)
        finally:
            names = _KERNEL_NAME.findall(self.src)
            includes = sorted(set(re.findall(r"#include\s*[<\"]([\w/.]+)[>\"]", self.src)))
            with lock:
                events.append({"kind": "nvrtc", "seconds": time.perf_counter() - start, "caller": _caller(),
                               "kernel": names[0] if names else "?", "kernels": len(names),
                               "includes": " ".join(includes)[:160]})

    compiler._NVRTCProgram.compile = timed_compile
    if record is not None:
        cached_compile = compiler._compile_with_cache_cuda

        def recorded(source, options, arch, extra_source=None, backend="nvrtc", enable_cooperative_groups=False,
                     name_expressions=None, *args, **kwargs):
            with lock:
                record.append({"source": source, "options": list(options), "extra_source": extra_source,
                               "backend": backend, "cooperative": enable_cooperative_groups,
                               "name_expressions": list(name_expressions) if name_expressions else None})
            return cached_compile(source, options, arch, extra_source, backend, enable_cooperative_groups,
                                  name_expressions, *args, **kwargs)

        compiler._compile_with_cache_cuda = recorded
    import tracker.lap._cuda as shipped

    load_module = shipped.load_module

    def timed_load(cu_file, *args, **kwargs):
        start = time.perf_counter()
        module = load_module(cu_file, *args, **kwargs)
        with lock:
            events.append({"kind": "binary" if shipped.loaded_from_binary(module) else "nvrtc-module",
                           "seconds": time.perf_counter() - start, "caller": _caller(), "kernel": cu_file,
                           "kernels": 1})
        return module

    shipped.load_module = timed_load


def summary(events: list[dict], wall: float) -> str:
    """A short text report of ``events`` (what :func:`install_hooks` recorded) and the run's ``wall`` seconds."""
    lines = [f"wall (process start to end of track run): {wall:.2f} s"]
    for kind in ("nvrtc", "binary", "nvrtc-module"):
        chosen = [e for e in events if e["kind"] == kind]
        lines.append(f"{kind}: {len(chosen)} modules, {sum(e['seconds'] for e in chosen):.2f} s")
    by_caller: dict[str, list[float]] = collections.defaultdict(list)
    for event in events:
        if event["kind"] == "nvrtc":
            by_caller[event["caller"]].append(event["seconds"])
    lines.append("NVRTC compilations by caller (seconds, count):")
    for caller, seconds in sorted(by_caller.items(), key=lambda item: -sum(item[1])):
        lines.append(f"  {sum(seconds):6.2f} s  {len(seconds):3d}  {caller}")
    by_include: dict[str, list[float]] = collections.defaultdict(list)
    for event in events:
        if event["kind"] == "nvrtc":
            by_include[event.get("includes", "")].append(event["seconds"])
    lines.append("NVRTC compilations by included headers (seconds, count):")
    for include, seconds in sorted(by_include.items(), key=lambda item: -sum(item[1]))[:10]:
        lines.append(f"  {sum(seconds):6.2f} s  {len(seconds):3d}  {include}")
    slowest = sorted((e for e in events if e["kind"] == "nvrtc"), key=lambda e: -e["seconds"])[:12]
    lines.append("slowest NVRTC compilations:")
    lines += [f"  {e['seconds']:6.2f} s  {e['kernel']}  <- {e['caller']}" for e in slowest]
    return "\n".join(lines)


def precompile(entries: list[dict], threads: int) -> tuple[float, int]:
    """Compile recorded CuPy compilations into CuPy's cache, ``threads`` at a time (NVRTC runs outside the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    import cupy
    import cupy.cuda.compiler as compiler

    cupy.zeros(1)  # the CUDA context, before the threads
    start = time.perf_counter()

    def one(entry):
        names = tuple(entry["name_expressions"]) if entry["name_expressions"] else None
        compiler._compile_with_cache_cuda(entry["source"], tuple(entry["options"]), None, entry["extra_source"],
                                          entry["backend"], entry["cooperative"], names)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(one, entries))
    return time.perf_counter() - start, len(entries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the events and the wall time here")
    parser.add_argument("--command", default="run", help="the track verb (default: run)")
    parser.add_argument("--record", type=Path, help="write the arguments of every compilation CuPy asked for here")
    parser.add_argument("--precompile", type=Path,
                        help="first compile the compilations of a --record file, --threads at a time")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("track_args", nargs="*", help="arguments of the track verb (after --)")
    options = parser.parse_args()
    events: list[dict] = []
    record: list[dict] | None = [] if options.record else None
    install_hooks(events, record)
    if options.precompile:
        seconds, count = precompile(json.loads(options.precompile.read_text()), options.threads)
        print(f"precompiled {count} recorded compilations on {options.threads} threads: {seconds:.2f} s", flush=True)
    code = 0
    try:
        import pyarrow  # noqa: F401  (the command writes its tables through it)
    except ImportError:
        print("pyarrow missing: tracker.pipeline.track_stack(read_stack(STACK), device='gpu') instead of the "
              "command (the same computation, no files written)", flush=True)
        from tracker.io import read_stack
        from tracker.pipeline import track_stack

        track_stack(read_stack(Path(options.track_args[0])), device="gpu")
    else:
        from tracker.cli import main as track

        try:
            track.main([options.command, *options.track_args], standalone_mode=False)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    import cupy

    cupy.cuda.Device().synchronize()
    wall = time.perf_counter() - START
    print(summary(events, wall), flush=True)
    if options.json:
        options.json.write_text(json.dumps({"wall": wall, "events": events}, indent=1))
    if options.record:
        unique = {(entry["source"], tuple(entry["options"])): entry for entry in record}
        options.record.write_text(json.dumps(list(unique.values())))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
