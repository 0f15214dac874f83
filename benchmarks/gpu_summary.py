"""Short summary of a ``benchmarks/gpu_check.sh`` run: one table, printed last.

Reads the reports that ``gpu_check.sh`` wrote to a folder (``gpu_tests.log``,
``lap_bench.md``, ``pipeline.md``) and prints, per dense instance class and
size, scipy against the fastest exact GPU solver, then the sparse, DGS and
pipeline tables as they are.

Usage::

    python benchmarks/gpu_summary.py OUT_DIR
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def markdown_tables(text: str) -> list[list[dict[str, str]]]:
    """Every markdown table in ``text``, as a list of rows keyed by the header cells."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[i + 1]):
            header = [cell.strip() for cell in lines[i].strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [cell.strip() for cell in lines[i].strip("|").split("|")]
                rows.append(dict(zip(header, cells)))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def seconds(text: str) -> float | None:
    """``'12.5 ms'`` or ``'1.2 s'`` in seconds; None for anything else."""
    match = re.match(r"^([\d.,]+)\s*(ms|s)$", text.strip())
    if not match:
        return None
    value = float(match.group(1).replace(",", ""))
    return value / 1e3 if match.group(2) == "ms" else value


def dense_summary(rows: list[dict[str, str]]) -> list[str]:
    """Per (class, n): scipy's time, the fastest exact GPU solver, its time and the ratio."""
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault((row["class"], row["n"]), []).append(row)
    lines = ["| class | n | scipy | fastest exact GPU | its time | speed-up | all exact |",
             "|---|---:|---:|---|---:|---:|:---:|"]
    for (kind, n), members in groups.items():
        scipy_row = next((r for r in members if r["solver"] == "scipy"), None)
        gpu = [r for r in members if r["solver"] != "scipy" and seconds(r["device"]) is not None
               and r["solver"] != "dgs"]
        best = min(gpu, key=lambda r: seconds(r["device"]), default=None)
        scipy_time = scipy_row["device"] if scipy_row else "—"
        exact = "yes" if all(r.get("exact") in ("yes", "—") for r in gpu) else "**NO**"
        if best is None:
            lines.append(f"| {kind} | {n} | {scipy_time} | — | — | — | {exact} |")
            continue
        ratio = "—"
        if scipy_row and seconds(scipy_row["device"]):
            ratio = f"{seconds(scipy_row['device']) / seconds(best['device']):.1f}×"
        lines.append(f"| {kind} | {n} | {scipy_time} | {best['solver']} | {best['device']} | {ratio} | {exact} |")
    return lines


def main(out_dir: str) -> int:
    folder = Path(out_dir)
    print("\n==================== GPU check summary ====================")
    log = folder / "gpu_tests.log"
    if log.exists():
        counts = [line for line in log.read_text().splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
        print(f"GPU tests: {counts[-1].strip('= ') if counts else 'no result line (see gpu_tests.log)'}")
    lap = folder / "lap_bench.md"
    if lap.exists():
        tables = markdown_tables(lap.read_text())
        for table in tables:
            if table and {"class", "n", "solver", "device"} <= set(table[0]):
                print("\nDense LAP (device times, CuPy in and out):")
                print("\n".join(dense_summary(table)))
            elif table and ("nodes (per frame)" in table[0] or "DGS" in table[0]):
                print("\n" + ("Sparse gated 3D:" if "nodes (per frame)" in table[0] else "DGS:"))
                header = list(table[0])
                print("| " + " | ".join(header) + " |")
                print("|" + "---|" * len(header))
                for row in table:
                    print("| " + " | ".join(row.get(h, "") for h in header) + " |")
    pipeline = folder / "pipeline.md"
    if pipeline.exists():
        print("\nPipeline:")
        print(pipeline.read_text().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/latest"))
