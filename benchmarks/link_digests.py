"""SHA-1 digests of every output column of :func:`tracker.linking.link_detections` on benchmark cells.

A guard for speed work that must not change any link: record the digests before a change, check them after.
Cells are those of ``compare_trackers.py`` (``sim`` detections, 20 frames, seed 0, gate 2.5 × step,
``solver="scipy"``).

Usage::

    python benchmarks/link_digests.py record digests.json           # the default cells
    python benchmarks/link_digests.py check digests.json            # exit status 1 on any difference
    python benchmarks/link_digests.py record d.json --cells 100000:0.5:0.5:0
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_trackers import GATE_STEPS, make_cell  # noqa: E402

DEFAULT_CELLS = [f"10000:{r}:{p}:{b}" for r, p, b in itertools.product((0.2, 0.5), (0, 0.5, 0.9), (0, 0.1))]
DEFAULT_CELLS.append("100000:0.5:0.5:0")


def cell_digests(cell: str, frames: int = 20, seed: int = 0) -> tuple[dict, float]:
    """Digest of each output column of one cell ``n:ratio:persistence:blink``, and the link time (s)."""
    from tracker.linking import link_detections

    n, ratio, persistence, blink = cell.split(":")
    _, detections, _, step = make_cell(int(n), float(ratio), float(persistence), float(blink), frames, seed, "sim")
    start = time.perf_counter()
    tracks = link_detections(detections, GATE_STEPS * step, solver="scipy")
    seconds = time.perf_counter() - start
    digests = {name: hashlib.sha1(np.ascontiguousarray(column).tobytes()).hexdigest()
               for name, column in tracks.items()}
    return digests, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["record", "check"])
    parser.add_argument("path")
    parser.add_argument("--cells", default=",".join(DEFAULT_CELLS), help="comma list of n:ratio:persistence:blink")
    args = parser.parse_args(argv)
    cells = args.cells.split(",")
    recorded = json.loads(Path(args.path).read_text()) if args.action == "check" else {}
    result, failures = {}, 0
    for cell in cells:
        digests, seconds = cell_digests(cell)
        result[cell] = digests
        status = ""
        if args.action == "check":
            if cell not in recorded:
                status = "not recorded"
            else:
                differ = [k for k in set(digests) | set(recorded[cell]) if digests.get(k) != recorded[cell].get(k)]
                status = "identical" if not differ else "DIFFERENT: " + ", ".join(sorted(differ))
                failures += bool(differ)
        print(f"{cell}: link {seconds:.3f} s {status}", flush=True)
    if args.action == "record":
        Path(args.path).write_text(json.dumps(result, indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
