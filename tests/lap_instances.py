"""Random cost matrices for the solver tests: the papers' instance classes and the awkward cases."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

KINDS = ("int", "int_small", "int_n", "int_10n", "float", "negative", "huge", "wide", "ties", "geometric",
         "inf", "inf_int")


def random_costs(rng: np.random.Generator, n: int, m: int, kind: str) -> np.ndarray:
    """An ``(n, m)`` float64 cost matrix of class ``kind`` (see :data:`KINDS`).

    ``int``: integers in [0, 10); ``int_small``/``int_n``/``int_10n``: integers in [0, n/10], [0, n),
    [0, 10n] (Date & Nagi's classes); ``huge``/``wide``: floats spread over 18 / 7 decades;
    ``ties``: one value everywhere; ``geometric``: squared distances (µm²) between a 3D point cloud
    and its displaced copy; ``inf``/``inf_int``: floats/integers with forbidden (inf) entries.
    """
    if kind == "int":
        return rng.integers(0, 10, (n, m)).astype(float)
    if kind == "int_small":
        return rng.integers(0, max(2, n // 10 + 1), (n, m)).astype(float)
    if kind == "int_n":
        return rng.integers(0, max(2, n), (n, m)).astype(float)
    if kind == "int_10n":
        return rng.integers(0, 10 * max(n, 1) + 1, (n, m)).astype(float)
    if kind == "float":
        return rng.random((n, m))
    if kind == "negative":
        return rng.normal(0.0, 100.0, (n, m))
    if kind == "huge":
        return rng.random((n, m)) * 10.0 ** rng.integers(-6, 12, (n, m))
    if kind == "wide":
        return rng.random((n, m)) * 10.0 ** rng.integers(-3, 4, (n, m))
    if kind == "ties":
        return np.full((n, m), float(rng.integers(-3, 4)))
    if kind == "geometric":
        points = rng.random((max(n, m), 3)) * 100
        moved = points + rng.normal(0, 2.0, points.shape)
        return ((points[:n, None, :] - moved[None, :m, :]) ** 2).sum(-1)
    if kind == "inf":
        cost = rng.random((n, m))
        cost[rng.random((n, m)) < 0.3] = np.inf
        return cost
    if kind == "inf_int":
        cost = rng.integers(-5, 20, (n, m)).astype(float)
        cost[rng.random((n, m)) < 0.5] = np.inf
        return cost
    raise ValueError(f"unknown kind {kind!r}")


@st.composite
def sparse_graphs(draw, max_size: int = 8):
    """``(mask, weights)``: which entries of an ``(n, m)`` biadjacency are edges, and their weights
    (integers in [-5, 20) or normal floats)."""
    n = draw(st.integers(1, max_size))
    m = draw(st.integers(1, max_size))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mask = rng.random((n, m)) < draw(st.sampled_from([0.3, 0.6, 1.0]))
    weights = rng.integers(-5, 20, (n, m)).astype(float) if draw(st.booleans()) else rng.normal(size=(n, m))
    return mask, weights
