"""``track link`` at the command line against the same linking in-process (issue 26's budget).

Simulates ``--particles`` particles over ``--frames`` frames (our own simulator; 10k x 20 by default), writes the
detections as CSV, then times, interleaved so that a loaded machine slows all alike (median of ``--repeat``):

- ``in-process``: :func:`tracker.linking.link_detections` on the table already in memory (imports done);
- ``start-up``: a new interpreter running ``track --help`` (Python, click and our CLI module);
- ``imports``: a new interpreter importing what ``track link`` needs (the linker, SciPy's solvers, pyarrow);
- ``track link``: the whole command, read CSV -> link -> write CSV and the parameters file.

The budget is ``1.5 x in-process + start-up``; the ratio of ``track link`` to it is printed (<= 1 meets it).

    python benchmarks/cli_link_bench.py [--particles 10000] [--frames 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(command: list[str]) -> float:
    """Seconds that ``command`` takes to run (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


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
            "start-up": [python, "-m", "tracker.cli", "--help"],
            "imports": [python, "-c", "import tracker.cli.link, tracker.linking, tracker.io, pyarrow.csv"],
            "track link": [python, "-m", "tracker.cli", "link", str(detections_path), "-o", str(tracks_path),
                           "--overwrite", "-q", "--max-displacement", str(args.gate)],
        }
        times: dict[str, list[float]] = {"in-process": [], **{name: [] for name in commands}}
        link_detections(detections, args.gate)  # warm caches
        for _ in range(args.repeat):
            start = time.perf_counter()
            link_detections(detections, args.gate)
            times["in-process"].append(time.perf_counter() - start)
            for name, command in commands.items():
                times[name].append(wall(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    budget = 1.5 * median["in-process"] + median["start-up"]
    print(f"{args.particles} particles x {args.frames} frames ({len(detections['frame'])} detections), "
          f"median of {args.repeat}")
    for name, value in median.items():
        print(f"  {name:12s} {value:7.3f} s")
    print(f"  budget 1.5 x in-process + start-up = {budget:.3f} s; track link / budget = "
          f"{median['track link'] / budget:.2f}")
    print(f"  track link - imports = {median['track link'] - median['imports']:.3f} s "
          f"({(median['track link'] - median['imports']) / median['in-process']:.2f} x in-process)")


if __name__ == "__main__":
    main()
