"""Shared fixtures. GPU tests (``@pytest.mark.gpu``) skip cleanly without CuPy or a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from tracker.backend import gpu_available


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CuPy and a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
