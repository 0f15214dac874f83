"""Loading the CUDA sources that sit next to the solvers (``*.cu``) with CuPy."""

from __future__ import annotations

import functools
from pathlib import Path

_HERE = Path(__file__).parent


@functools.lru_cache(maxsize=None)
def load_module(cu_file: str, options: tuple[str, ...] = ("--std=c++17",)):
    """Compile (once per process; CuPy caches on disk too) ``tracker/lap/<cu_file>``.

    Returns a ``cupy.RawModule``; fetch kernels with ``.get_function(name)``.
    Kernels are declared ``extern "C"`` so their names are not mangled.
    """
    import cupy

    source = (_HERE / cu_file).read_text()
    return cupy.RawModule(code=source, options=options)
