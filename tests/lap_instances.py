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


FAMILIES = ("uniform", "plane", "slab", "clustered", "mixed", "drift")
"""Point-cloud families of :func:`generous_gate_instance` (independent of the family the gated solver's
settings were tuned on, ``uniform``): ``plane``: 2D; ``slab``: 3D, 1/10 as deep as wide (a monolayer);
``clustered``: a Thomas process (clusters of ~20 points, Gaussian spread 1/4 of the cluster spacing), so the
density varies ~tenfold; ``mixed``: every point's sigma log-uniform from 1/10 of the nominal one to it (bound and free
particles; the gate is set for the fastest); ``drift``: a common drift of 3 sigma along x (the
gate widened by it, as a user would set it)."""


def _family_points(rng: np.random.Generator, n: int, family: str):
    """``n`` points at unit mean density in the family's box, ``(n, 2)`` for ``plane``, else ``(n, 3)``; and the
    box's sides."""
    if family == "plane":
        side = n ** 0.5
        return rng.random((n, 2)) * side, side
    if family == "slab":
        side = (10 * n) ** (1 / 3)
        box = np.array([side / 10, side, side])
        return rng.random((n, 3)) * box, box
    side = n ** (1 / 3)
    if family == "clustered":
        centres = rng.random((max(1, n // 20), 3)) * side
        spacing = 20 ** (1 / 3)
        points = centres[rng.integers(0, len(centres), n)] + rng.normal(0.0, spacing / 4, (n, 3))
        return np.mod(points, side), side
    if family in ("uniform", "mixed", "drift"):
        return rng.random((n, 3)) * side, side
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


def _displaced_clouds(n: int, step: float, seed: int, died: float, born: float, xp, family: str = "uniform"):
    """``n`` points of ``family`` (:data:`FAMILIES`), the displaced copy (per-axis sigma = ``step`` x the mean
    nearest-neighbour distance) with a fraction ``died`` removed and ``born`` new points, shuffled; sigma; and
    the displacement that the gate must cover beyond the Gaussian's (the drift)."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    points, box = _family_points(rng, n, family)
    sigma = step * float(cKDTree(points).query(points, k=2, workers=-1)[0][:, 1].mean())
    per_point = np.full((n, 1), sigma)
    extra = 0.0
    if family == "mixed":
        per_point = sigma * 10.0 ** rng.uniform(-1.0, 0.0, (n, 1))
    moved = points + rng.normal(0.0, 1.0, points.shape) * per_point
    if family == "drift":
        moved[:, -1] += 3.0 * sigma
        extra = 3.0 * sigma
    moved = moved[rng.random(n) >= died]
    moved = np.concatenate([moved, rng.random((int(round(born * n)), points.shape[1])) * box])
    return xp.asarray(points), xp.asarray(moved[rng.permutation(len(moved))]), sigma, extra


def _gate(points, moved, radius, backend):
    if backend == "gpu":
        from tracker.gating_gpu import gated_links_gpu

        if points.shape[1] == 2:  # the GPU gate takes (z, y, x): a plane at z = 0
            import cupy

            points, moved = (cupy.pad(cupy.asarray(a), ((0, 0), (1, 0))) for a in (points, moved))
        return gated_links_gpu(points, moved, radius)
    from scipy.spatial import cKDTree

    pairs = cKDTree(points).sparse_distance_matrix(cKDTree(moved), radius, output_type="coo_matrix")
    return pairs.row.astype(np.int64), pairs.col.astype(np.int64), pairs.data**2


def generous_gate_instance(n: int, step: float, seed: int = 0, backend: str = "cpu", family: str = "uniform"):
    """Issue 27's generous-gate family: a gated linking problem with tens of candidates per row.

    Uniform points at unit density, displaced by a Gaussian of per-axis sigma = ``step`` x the mean
    nearest-neighbour distance, 5 % of them dying and 5 % born; candidates within 4.5 sqrt(3) sigma (4.5
    RMS steps), cost = squared distance, no-link cost 1.05 x the largest candidate cost. ``backend="gpu"``
    gates on the GPU (``tracker.gating_gpu``; CuPy arrays out). Candidates per row: about 1.3 / 9.5 / 38 /
    104 at steps 0.1 / 0.3 / 0.5 / 0.7. ``family`` (:data:`FAMILIES`) swaps the uniform 3D cloud for another
    (the gate is then 4.5 RMS steps in the family's dimension, plus the drift).
    Returns ``rows, cols, cost, (n_rows, n_cols), no_link_cost``.
    """
    import numpy as xp_np

    xp = xp_np
    if backend == "gpu":
        import cupy as xp
    points, moved, sigma, extra = _displaced_clouds(n, step, seed, 0.05, 0.05, xp, family)
    rows, cols, cost = _gate(points, moved, 4.5 * np.sqrt(points.shape[1]) * sigma + extra, backend)
    no_link = 1.05 * float(cost.max()) if cost.size else 1.0
    return rows, cols, cost, (n, int(moved.shape[0])), no_link


def full_matching_instance(n: int, step: float, seed: int = 0, backend: str = "cpu"):
    """Issue 27's full-matching family: the clouds of :func:`generous_gate_instance` with no births (5 %
    dying), gated at 6 sigma, so that every surviving point can match its origin (a full matching of the
    smaller side exists with probability about 1 - 1e-7 n). Returns ``rows, cols, cost, (n_rows, n_cols)``."""
    import numpy as xp_np

    xp = xp_np
    if backend == "gpu":
        import cupy as xp
    points, moved, sigma, _ = _displaced_clouds(n, step, seed, 0.05, 0.0, xp)
    rows, cols, cost = _gate(points, moved, 6.0 * sigma, backend)
    return rows, cols, cost, (n, int(moved.shape[0]))


def gated_objective(rows, cols, cost, shape, un, chosen_r, chosen_c) -> float:
    """The objective of a gated problem's solution: the chosen candidates' costs plus ``un`` for every row and
    every column left unlinked (a Jaqaman block matrix with one no-link cost).

    ``rows, cols, cost``: the candidates (one entry per (row, col) pair); ``shape``: (rows, cols);
    ``chosen_r, chosen_c``: the linked pairs, each among the candidates.
    """
    key = rows * shape[1] + cols
    order = np.argsort(key)
    index = order[np.searchsorted(key[order], np.asarray(chosen_r) * shape[1] + np.asarray(chosen_c))]
    links = len(chosen_r)
    return float(cost[index].sum() + un * (shape[0] - links) + un * (shape[1] - links))
