"""The CUDA modules' shipped fatbins (tracker.lap._cuda): current for every source, complete, packaged, loaded."""

from __future__ import annotations

import fnmatch
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from tracker.lap import _cuda
from tracker.lap._build_fatbins import nvcc_command

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def fatbin_entries(data: bytes) -> list[tuple[str, int]]:
    """``(kind, arch)`` of each entry of a fatbin file: kind ``"sass"`` (an ELF cubin) or ``"ptx"``.

    The layout (``fatbinary_section.h`` names only the outer wrapper): a 16-byte header (magic 0xBA55ED50,
    version, header size, payload size), then entries, each with its own header (kind at byte 0, header size
    at 4, payload size at 8, architecture at 28) followed by its (possibly compressed) payload.
    """
    magic, _, header_size, size = struct.unpack_from("<IHHQ", data, 0)
    assert magic == 0xBA55ED50, f"not a fatbin (magic {magic:#x})"
    assert header_size + size == len(data), "the fatbin's header does not account for its length"
    entries, offset = [], header_size
    while offset < len(data):
        kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, offset)
        (arch,) = struct.unpack_from("<I", data, offset + 28)
        entries.append(({1: "ptx", 2: "sass"}[kind], arch))
        offset += entry_header + payload
    assert offset == len(data)
    return entries


def test_every_cuda_source_of_the_package_is_listed():
    found = {str(path.relative_to(_cuda.PACKAGE_ROOT)) for path in _cuda.PACKAGE_ROOT.rglob("*.cu")}
    assert found == set(_cuda.CUDA_SOURCES)


@pytest.mark.parametrize("cu_file", _cuda.CUDA_SOURCES)
def test_shipped_fatbin_matches_the_current_source(cu_file):
    """Fails after a .cu/.cuh edit until ``python -m tracker.lap._build_fatbins`` is run again."""
    path = _cuda.fatbin_path(cu_file)
    assert path.is_file(), f"{path.name} missing: run python -m tracker.lap._build_fatbins"
    stale = [p.name for p in path.parent.glob(f"{path.stem.rsplit('-', 1)[0]}-*.fatbin") if p != path]
    assert not stale, f"stale fatbins of {cu_file}: {stale}"


@pytest.mark.parametrize("cu_file", _cuda.CUDA_SOURCES)
def test_shipped_fatbin_holds_code_for_every_listed_architecture(cu_file):
    entries = fatbin_entries(_cuda.fatbin_path(cu_file).read_bytes())
    assert sorted(arch for kind, arch in entries if kind == "sass") == sorted(_cuda.FATBIN_ARCHS)
    assert [arch for kind, arch in entries if kind == "ptx"] == [_cuda.FATBIN_PTX_ARCH]


def test_source_hash_sees_headers_and_options(tmp_path, monkeypatch):
    header = tmp_path / "common.cuh"
    header.write_text("#pragma once\n__device__ int one() { return 1; }\n")
    (tmp_path / "kernel.cu").write_text('#include "common.cuh"\nextern "C" __global__ void k(int *x) { *x = one(); }\n')
    monkeypatch.setattr(_cuda, "PACKAGE_ROOT", tmp_path)
    before = _cuda.fatbin_path("kernel.cu")
    assert "return 1" in _cuda.cuda_source("kernel.cu")
    assert _cuda.fatbin_path("kernel.cu", ("--std=c++20",)) != before
    header.write_text("#pragma once\n__device__ int one() { return 2; }\n")
    assert _cuda.fatbin_path("kernel.cu") != before
    assert before.parent == tmp_path / "fatbin" and before.name.startswith("kernel-")


def test_nvcc_command_matches_nvrtc_semantics():
    command = nvcc_command("nvcc", Path("a.cu"), Path("a.fatbin"))
    assert "--std=c++17" in command and "-ftz=true" in command  # CuPy adds -ftz=true to every NVRTC compilation
    for arch in _cuda.FATBIN_ARCHS:
        assert f"-gencode=arch=compute_{arch},code=sm_{arch}" in command


def test_fatbins_are_package_data():
    """``pip install .`` ships every fatbin: pyproject's package-data globs cover them."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["tracker"]
    for cu_file in _cuda.CUDA_SOURCES:
        relative = str(_cuda.fatbin_path(cu_file).relative_to(_cuda.PACKAGE_ROOT))
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


@pytest.mark.gpu
@pytest.mark.parametrize("cu_file", _cuda.CUDA_SOURCES)
def test_gpu_loads_the_shipped_fatbin(cu_file):
    cupy = pytest.importorskip("cupy")
    capability = int(cupy.cuda.Device().compute_capability)  # "90" on an H100
    if not any(arch // 10 == capability // 10 and arch <= capability for arch in _cuda.FATBIN_ARCHS):
        pytest.skip(f"no machine code for sm_{capability} in the fatbins")
    _cuda.load_module.cache_clear()
    assert _cuda.loaded_from_binary(_cuda.load_module(cu_file))


@pytest.mark.gpu
def test_gpu_shipped_and_nvrtc_kernels_agree(monkeypatch):
    """The candidate search from the fatbin and from NVRTC: the same links, bit for bit."""
    pytest.importorskip("cupy")
    from tracker.gating_gpu import _kernels, gated_links_gpu

    rng = np.random.default_rng(3)
    source, target = rng.uniform(0, 20, (3000, 3)), rng.uniform(0, 20, (3100, 3))
    results = []
    for shipped in ("1", "0"):
        monkeypatch.setenv(_cuda.SHIPPED_ENV, shipped)
        _cuda.load_module.cache_clear()
        _kernels.cache_clear()
        assert _cuda.loaded_from_binary(_cuda.load_module("gating_gpu.cu")) == (shipped == "1")
        results.append([array.get() for array in gated_links_gpu(source, target, 1.5)])
    _cuda.load_module.cache_clear()
    _kernels.cache_clear()
    for shipped, compiled in zip(*results):
        np.testing.assert_array_equal(shipped, compiled)
    assert len(results[0][0]) > 3000
