"""Time ``tracker.io.read_table`` / ``write_table`` on a tracks table (200k rows, 9 columns by default).

Reads three files: the one ``write_table`` wrote, and two that pandas wrote (with and without its index
column; pandas writes NaN as an empty cell). Prints the median of ``--repeat`` runs of each, beside pandas
with the pyarrow engine as a reference.

    python benchmarks/tables_bench.py [--rows 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def tracks_table(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A tracks table of ``n`` rows: tracks of 20 points, NaN link costs at track starts."""
    rng = np.random.default_rng(seed)
    track_id = np.arange(n) // 20
    frame = np.arange(n) % 20
    start = frame == 0
    link_cost = np.where(start, np.nan, rng.random(n))
    return {"track_id": track_id, "frame": frame, "z": rng.random(n) * 10, "y": rng.random(n) * 100,
            "x": rng.random(n) * 100, "intensity": rng.random(n) * 1000, "quality": rng.random(n) * 50,
            "link_cost": link_cost, "link_confidence": np.where(start, np.nan, rng.random(n))}


def median_time(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import pandas as pd

    from tracker.io import read_table, write_table

    table = tracks_table(args.rows)
    with tempfile.TemporaryDirectory() as folder:
        ours, by_pandas, with_index = (Path(folder) / name for name in ("ours.csv", "pandas.csv", "index.csv"))
        write = median_time(lambda: write_table(ours, table, overwrite=True), args.repeat)
        frame = pd.DataFrame(table)
        frame.to_csv(by_pandas, index=False)
        frame.to_csv(with_index)
        print(f"{args.rows} rows x {len(table)} columns, median of {args.repeat}")
        print(f"write_table                        {write:.3f} s")
        for label, path in (("ours", ours), ("pandas, no index", by_pandas), ("pandas, index", with_index)):
            read = median_time(lambda: read_table(path), args.repeat)
            print(f"read_table  ({label:16s})     {read:.3f} s")
        reference = median_time(lambda: pd.read_csv(by_pandas, engine="pyarrow"), args.repeat)
        print(f"pandas.read_csv(engine='pyarrow')  {reference:.3f} s  (reference)")


if __name__ == "__main__":
    main()
