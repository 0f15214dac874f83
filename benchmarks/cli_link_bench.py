"""``track link`` at the command line against the same linking in-process (issue 26's budget).

Simulates ``--particles`` particles over ``--frames`` frames (our own simulator; 10k x 20 by default), writes the
detections as CSV, then times, interleaved so that a loaded machine slows all alike (median of ``--repeat``):

- ``in-process``: :func:`tracker.linking.link_detections` on the table already in memory (imports done, warm);
- ``--help``: a new interpreter running ``track --help`` (Python, click and our CLI module);
- ``imports``: a new interpreter importing what ``track link`` needs (the linker, SciPy's solvers, pyarrow), and
  ``imports, no shut-down`` the same ended by ``os._exit`` (without Python's shut-down of those modules, which
  ``track link`` mostly skips: :class:`tracker.cli._Program`);
- ``track link``: the whole command, read CSV -> link -> write CSV and the parameters file.

The budget is ``1.5 x in-process + start-up``, with start-up read three ways, all printed: ``track --help``
(the interpreter and the command line alone) and ``imports`` with and without shut-down (what the issue measured
as ``import tracker.cli`` when that imported everything: the time before any command can start its work). Wall and CPU seconds (user +
system, of the process and its threads) are both printed: on a shared machine the CPU times move less.

    python benchmarks/cli_link_bench.py [--particles 10000] [--frames 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds that ``command`` takes to run (it must succeed)."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gate", type=float, default=1.0, help="--max-displacement (µm)")
    args = parser.parse_args()

    from tracker.io import read_table, write_table
    from tracker.linking import link_detections
    from tracker.simulate import simulate_tracks

    side = (args.particles / 0.25) ** 0.5  # 0.25 particles per µm² in y, x; 20 µm deep
    truth = simulate_tracks(n_particles=args.particles, n_frames=args.frames, field_of_view_um=(20, side, side),
                            step_um=0.3, seed=1)
    with tempfile.TemporaryDirectory() as folder:
        detections_path, tracks_path = Path(folder) / "detections.csv", Path(folder) / "tracks.csv"
        write_table(detections_path, {name: truth[name] for name in ("frame", "z", "y", "x")})
        detections = read_table(detections_path)
        python = sys.executable
        commands = {
            "--help": [python, "-m", "tracker.cli", "--help"],
            "imports": [python, "-c", "import tracker.cli.link, tracker.linking, tracker.io, pyarrow.csv"],
            "imports, no shut-down": [python, "-c", "import tracker.cli.link, tracker.linking, tracker.io, pyarrow.csv,"
                                      " os; os._exit(0)"],
            "track link": [python, "-m", "tracker.cli", "link", str(detections_path), "-o", str(tracks_path),
                           "--overwrite", "-q", "--max-displacement", str(args.gate)],
        }
        walls: dict[str, list[float]] = {"in-process": [], **{name: [] for name in commands}}
        cpus: dict[str, list[float]] = {name: [] for name in walls}
        link_detections(detections, args.gate)  # warm caches
        load = os.getloadavg()[0]
        for _ in range(args.repeat):
            start, cpu = time.perf_counter(), time.process_time()
            link_detections(detections, args.gate)
            walls["in-process"].append(time.perf_counter() - start)
            cpus["in-process"].append(time.process_time() - cpu)
            for name, command in commands.items():
                wall, cpu = timed(command)
                walls[name].append(wall)
                cpus[name].append(cpu)
        load = (load, os.getloadavg()[0])
    print(f"{args.particles} particles x {args.frames} frames ({len(detections['frame'])} detections), "
          f"medians of {args.repeat}, interleaved; load average {load[0]:.1f} before, {load[1]:.1f} after "
          f"({os.cpu_count()} cores)")
    print(f"  {'':22s} {'wall':>7s} {'cpu':>7s}")
    for name in walls:
        print(f"  {name:22s} {statistics.median(walls[name]):7.3f} {statistics.median(cpus[name]):7.3f}")
    for kind, times in (("wall", walls), ("cpu", cpus)):
        median = {name: statistics.median(values) for name, values in times.items()}
        for startup in ("--help", "imports", "imports, no shut-down"):
            budget = 1.5 * median["in-process"] + median[startup]
            print(f"  {kind}: budget 1.5 x in-process + {startup} = {budget:.3f} s; "
                  f"track link / budget = {median['track link'] / budget:.2f}")


if __name__ == "__main__":
    main()
