"""Loading this package's CUDA modules: the binaries shipped with it first, NVRTC (through CuPy) otherwise.

Every ``.cu`` file of the package (:data:`CUDA_SOURCES`) is compiled ahead of time with nvcc
(``python -m tracker.lap._build_fatbins``) into one fatbin holding machine code for the common GPU
architectures (:data:`FATBIN_ARCHS`) and PTX for later ones, saved in a ``fatbin/`` folder beside the source
and shipped as package data. A fatbin's name carries a hash of the source it was built from (local
``#include``s inlined) and of the compiler options, so an edited source never meets an old binary.

:func:`load_module` loads the binary whose hash matches; where none matches (a source edited since the last
build), or the driver cannot load it (an architecture without code in it, such as sm_70, or a driver older than
the nvcc that built it), it compiles the source with NVRTC at first use, as before; CuPy keeps that in its
on-disk cache (``CUPY_CACHE_DIR``, by default ``~/.cupy/kernel_cache``). On a fresh machine NVRTC took 16 s for
these modules (H100, ``benchmarks/results/lap_generous_h100.md``); loading the fatbins takes milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

PACKAGE_ROOT = Path(__file__).parents[1]
"""The ``tracker`` package folder; :data:`CUDA_SOURCES` are relative to it."""

CUDA_SOURCES = ("lap/auction.cu", "lap/auction_phase.cu", "lap/gated_auction.cu", "lap/components_gpu.cu",
                "lap/hungarian_tree.cu", "lap/hungarian_classical.cu", "lap/dense_input.cu", "lap/dgs.cu",
                "lap/dgs_anneal.cu", "gating_gpu.cu", "ndimage_gpu.cu", "detect_gpu.cu")
"""Every CUDA module of the package (paths relative to :data:`PACKAGE_ROOT`); each has a shipped fatbin."""

DEFAULT_OPTIONS = ("--std=c++17",)
"""Compiler options of every module (NVRTC and nvcc alike)."""

FATBIN_ARCHS = (75, 80, 86, 89, 90, 100, 120)
"""Architectures whose machine code (SASS) the fatbins hold: Turing (T4) to Blackwell (B200, RTX 50).

A cubin runs on its own architecture and later minor versions of the same major one (sm_80 code on an
sm_87 Jetson); the PTX of :data:`FATBIN_PTX_ARCH` lets the driver compile for any later GPU. nvcc 13
builds nothing older than sm_75: sm_70 (V100) compiles with NVRTC at first use."""

FATBIN_PTX_ARCH = 75
"""The PTX in each fatbin targets this virtual architecture (the oldest, so every newer GPU can use it)."""

NVCC_OPTIONS = ("-ftz=true",)
"""nvcc options beside :data:`DEFAULT_OPTIONS` that make its code match NVRTC's through CuPy (which adds
``-ftz=true`` to every compilation)."""

SHIPPED_ENV = "TRACKER_CUDA_SHIPPED"
"""Environment variable: ``0`` ignores the shipped binaries and compiles every module with NVRTC."""


def source_path(cu_file: str) -> Path:
    """The path of a module named relative to :data:`PACKAGE_ROOT` (``"lap/auction.cu"``)."""
    return PACKAGE_ROOT / cu_file


_LOCAL_INCLUDE = re.compile(r'^#include "([\w.]+)"[ \t]*$', re.MULTILINE)


def cuda_source(cu_file: str) -> str:
    """The text of a module (see :func:`source_path`) with its local ``#include "x.cuh"`` lines inlined.

    Inlining (rather than an ``-I`` option) makes CuPy's on-disk kernel cache, keyed on the source text,
    and the fatbins' source hash see every change to a shared header.
    """
    path = source_path(cu_file)
    return _LOCAL_INCLUDE.sub(lambda match: (path.parent / match.group(1)).read_text().replace("#pragma once\n", ""),
                              path.read_text())


def source_hash(source: str, options: tuple[str, ...] = DEFAULT_OPTIONS) -> str:
    """12 hex digits identifying a module's inlined source and its compiler options."""
    return hashlib.sha256("\0".join((source, *options)).encode()).hexdigest()[:12]


def fatbin_path(cu_file: str, options: tuple[str, ...] = DEFAULT_OPTIONS) -> Path:
    """Where the fatbin of the module's current source belongs: ``fatbin/<stem>-<hash>.fatbin`` beside it."""
    path = source_path(cu_file)
    return path.parent / "fatbin" / f"{path.stem}-{source_hash(cuda_source(cu_file), options)}.fatbin"


@functools.lru_cache(maxsize=None)
def load_module(cu_file: str, options: tuple[str, ...] = DEFAULT_OPTIONS, cooperative: bool = False):
    """The module ``cu_file`` (see :func:`source_path`) as a loaded ``cupy.RawModule``, once per process.

    The shipped fatbin when it matches the source and loads on this GPU, else NVRTC. Fetch kernels with
    ``.get_function(name)``; they are declared ``extern "C"``, so their names are not mangled.
    ``cooperative``: launch every kernel of the module with ``cuLaunchCooperativeKernel`` (grid-wide
    barriers; the grid must fit on the GPU at once).
    """
    import cupy

    binary = fatbin_path(cu_file, options)
    if os.environ.get(SHIPPED_ENV, "1") != "0" and binary.is_file():
        module = cupy.RawModule(path=str(binary), enable_cooperative_groups=cooperative)
        try:
            module.compile()  # loads it now, so that a binary this driver cannot use falls back below
            return module
        except cupy.cuda.driver.CUDADriverError:
            pass
    return cupy.RawModule(code=cuda_source(cu_file), options=options, enable_cooperative_groups=cooperative)


def loaded_from_binary(module) -> bool:
    """Whether :func:`load_module` gave the shipped fatbin (True) or NVRTC's compilation (False)."""
    return module.code is None
