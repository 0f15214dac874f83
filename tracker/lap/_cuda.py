"""Loading the CUDA sources that sit next to the solvers (``*.cu``) with CuPy."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_HERE = Path(__file__).parent


@functools.lru_cache(maxsize=None)
def load_module(cu_file: str, options: tuple[str, ...] = ("--std=c++17",), cooperative: bool = False):
    """Compile (once per process; CuPy caches on disk too) ``tracker/lap/<cu_file>``.

    Returns a ``cupy.RawModule``; fetch kernels with ``.get_function(name)``.
    Kernels are declared ``extern "C"`` so their names are not mangled.
    ``cooperative``: compile with cooperative groups and launch every kernel of the module with
    ``cuLaunchCooperativeKernel`` (grid-wide barriers; the grid must fit on the GPU at once).
    """
    import cupy

    return cupy.RawModule(code=cuda_source(cu_file), options=options, enable_cooperative_groups=cooperative)


_LOCAL_INCLUDE = re.compile(r'^#include "([\w.]+)"[ \t]*$', re.MULTILINE)


def cuda_source(cu_file: str) -> str:
    """The text of ``tracker/lap/<cu_file>`` with its local ``#include "x.cuh"`` lines inlined.

    Inlining (rather than an ``-I`` option) makes CuPy's on-disk kernel cache,
    keyed on the source text, see every change to a shared header.
    """
    source = (_HERE / cu_file).read_text()
    return _LOCAL_INCLUDE.sub(lambda match: (_HERE / match.group(1)).read_text().replace("#pragma once\n", ""),
                              source)
