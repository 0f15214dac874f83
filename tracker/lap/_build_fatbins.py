"""Build the shipped fatbins of every CUDA module with nvcc: ``python -m tracker.lap._build_fatbins``.

Run it after editing any ``.cu`` or ``.cuh`` file of the package (``tests/test_lap_fatbins.py`` fails until the
fatbins match the sources again). For each module of :data:`~tracker.lap._cuda.CUDA_SOURCES` whose current
fatbin is missing, it compiles the inlined source (the text NVRTC would see) for
:data:`~tracker.lap._cuda.FATBIN_ARCHS` plus PTX, compressed, and removes that module's older fatbins. Needs
nvcc 12.8 or later (``--compress-mode``); about 30 s per large module on two cores.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ._cuda import (CUDA_SOURCES, DEFAULT_OPTIONS, FATBIN_ARCHS, FATBIN_PTX_ARCH, NVCC_OPTIONS, cuda_source,
                    fatbin_path)


def nvcc_command(nvcc: str, source: Path, output: Path, options: tuple[str, ...] = DEFAULT_OPTIONS) -> list[str]:
    """The nvcc command line that builds ``output`` (a fatbin) from ``source``."""
    targets = [f"-gencode=arch=compute_{arch},code=sm_{arch}" for arch in FATBIN_ARCHS]
    targets.append(f"-gencode=arch=compute_{FATBIN_PTX_ARCH},code=compute_{FATBIN_PTX_ARCH}")
    # zstd ("size"): 3.5x smaller than "default" (auction.cu for sm_90: 56 kB vs 198 kB). A driver too old to
    # read it fails the load, and load_module falls back to NVRTC.
    return [nvcc, *options, *NVCC_OPTIONS, *targets, "--compress-mode=size", "-fatbin", "-o", str(output),
            str(source)]


def build(cu_file: str, nvcc: str = "nvcc", force: bool = False) -> tuple[Path, bool]:
    """Build one module's fatbin unless it is already current; returns its path and whether it was built."""
    target = fatbin_path(cu_file)
    if target.is_file() and not force:
        return target, False
    target.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / Path(cu_file).name
        source.write_text(cuda_source(cu_file))
        partial = Path(scratch) / target.name
        subprocess.run(nvcc_command(nvcc, source, partial), check=True)
        shutil.move(partial, target)
    for old in target.parent.glob(f"{Path(cu_file).stem}-*.fatbin"):
        if old != target:
            old.unlink()
    return target, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvcc", default="nvcc", help="the nvcc to use (default: the one on PATH)")
    parser.add_argument("--force", action="store_true", help="rebuild every fatbin, current or not")
    parser.add_argument("--jobs", type=int, default=2, help="modules compiled at once (default 2)")
    options = parser.parse_args(argv)
    if shutil.which(options.nvcc) is None:
        print(f"error: {options.nvcc} not found", file=sys.stderr)
        return 1
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for cu_file, (path, built) in zip(CUDA_SOURCES, pool.map(
                lambda name: build(name, options.nvcc, options.force), CUDA_SOURCES)):
            print(f"{'built' if built else 'current':8s} {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}"
                  f" ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
