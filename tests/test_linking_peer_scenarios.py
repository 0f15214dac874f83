"""The situations of trackpy's linking test suite (``trackpy/tests/test_linking.py``), against our linker.

Each test rebuilds one of trackpy's scenarios (2D detections in pixels, read as µm; trackpy's ``search_range``
is our ``max_displacement_um``) and checks the outcome trackpy's test expects, with our **defaults** and in
**plain LAP mode** (``motion="none", adaptive_radius=False, max_gap=0``: frame-to-frame assignment on squared
displacements, as trackpy without ``memory``).

Where trackpy's expectation encodes a convention we deliberately differ on, the test says so and checks ours:
- gap closing is on by default (up to 2 missing frames, like trackpy's ``memory=2`` and LapTrack's gap closing
  of 2), so where trackpy without memory splits a track at a missing detection, our defaults join it (trackpy's
  own ``memory`` tests expect the same joins);
- the "no link" cost is relative to the candidates' costs (Jaqaman et al. 2008), not trackpy's fixed
  ``search_range²`` penalty (``test_penalty``);
- every frame pair is solved exactly: there is no subnet size limit and no adaptive search range
  (``test_oversize_fail``, ``test_adaptive_range``, ``test_drop_link``).
Tracks are compared as partitions of the detections (sets of rows), since track ids are labels.
"""

from __future__ import annotations

import numpy as np
import pytest

from tracker.linking import link_detections

PLAIN = dict(motion="none", adaptive_radius=False, max_gap=0)
MODES = {"defaults": {}, "plain": PLAIN}


def table(frames, y, x, **extra) -> dict[str, np.ndarray]:
    columns = {"frame": np.asarray(frames, dtype=np.int64), "y": np.asarray(y, dtype=float),
               "x": np.asarray(x, dtype=float)}
    columns.update({k: np.asarray(v) for k, v in extra.items()})
    return columns


def concat(*tables):
    return {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}


def with_row_ids(detections):
    """The detections with a ``row`` column (their row numbers), unless they already have one."""
    out = dict(detections)
    out.setdefault("row", np.arange(len(detections["frame"])))
    return out


def partition(detections, search_range, **options) -> set[frozenset[int]]:
    """The tracks as sets of input rows."""
    tracks = link_detections(with_row_ids(detections), search_range, **options)
    groups: dict[int, set[int]] = {}
    for track, row in zip(tracks["track_id"], tracks["row"]):
        groups.setdefault(int(track), set()).add(int(row))
    return {frozenset(g) for g in groups.values()}


def labels_to_partition(labels) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for row, label in enumerate(labels):
        groups.setdefault(int(label), set()).add(row)
    return {frozenset(g) for g in groups.values()}


def n_tracks(detections, search_range, **options) -> int:
    return len(partition(detections, search_range, **options))


def unit_steps():
    return table(np.arange(5), np.full(5, 5.0), np.arange(5))


RANDOM_X = np.random.default_rng(7).standard_normal(5).cumsum()
RANDOM_X -= RANDOM_X.min()
MAX_DISP = np.abs(np.diff(RANDOM_X)).max()


def random_walk_legacy():
    return table(np.arange(5), np.zeros(5), RANDOM_X)


def steppers(y_offset: float, gapped: bool):
    """trackpy's two steppers: one from frame 0, one from frame 1 ``y_offset`` away; ``gapped``: the first misses frame 3."""
    n = 5
    a = table(np.arange(n), np.ones(n), np.arange(n))
    if gapped:
        keep = a["frame"] != 3
        a = {k: v[keep] for k, v in a.items()}
    b = table(np.arange(1, n), y_offset + np.ones(n - 1), np.arange(1, n))
    return concat(a, b), len(a["frame"])


def random_walks(starts, n_frames, seed):
    rng = np.random.default_rng(seed)
    walks = []
    for i, (x0, y0) in enumerate(starts):
        k = n_frames - i
        walks.append(table(np.arange(i, n_frames), y0 + rng.standard_normal(k).cumsum(),
                           x0 + rng.standard_normal(k).cumsum()))
    detections = concat(*walks)
    truth = np.concatenate([np.full(n_frames - i, i) for i in range(len(starts))])
    return detections, labels_to_partition(truth)


def shuffled(detections, seed=0):
    order = np.random.default_rng(seed).permutation(len(detections["frame"]))
    return {k: v[order] for k, v in detections.items()}


@pytest.mark.parametrize("mode", MODES)
def test_one_trivial_stepper(mode):
    assert n_tracks(table(np.arange(5), np.ones(5), np.arange(5)), 5, **MODES[mode]) == 1


@pytest.mark.parametrize("mode", MODES)
def test_output_dtypes(mode):
    detections = table(np.arange(5), np.ones(5), np.arange(5))
    for frames in (np.arange(5), np.arange(5).astype(float)):
        detections["frame"] = frames
        tracks = link_detections(detections, 5, **MODES[mode])
        assert np.issubdtype(tracks["track_id"].dtype, np.integer)
        assert np.issubdtype(tracks["frame"].dtype, np.integer)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("y_offset", [25, 2], ids=["isolated", "nearby"])
def test_two_steppers(mode, y_offset):
    detections, n_a = steppers(y_offset, gapped=False)
    expected = labels_to_partition([0] * n_a + [1] * 4)
    assert partition(detections, 5, **MODES[mode]) == expected
    # Rows in any order (trackpy's "shuffle rows (crazy!)"): the row ids travel with the rows.
    assert partition(shuffled(with_row_ids(detections)), 5, **MODES[mode]) == expected


@pytest.mark.parametrize("y_offset", [25, 2], ids=["isolated", "nearby"])
def test_two_steppers_one_gapped(y_offset):
    detections, n_a = steppers(y_offset, gapped=True)
    # trackpy without memory: the gapped stepper splits in two (its expected ids 0, 0, 0, 2).
    assert partition(detections, 5, **PLAIN) == labels_to_partition([0, 0, 0, 2] + [1] * 4)
    # Convention: our defaults close the gap, as trackpy with memory=1 (test_memory_on_one_gap).
    assert partition(detections, 5) == labels_to_partition([0, 0, 0, 0] + [1] * 4)


@pytest.mark.parametrize("mode", MODES)
def test_isolated_continuous_random_walks(mode):
    detections, expected = random_walks([(20, 20), (20, 270)], 30, seed=0)
    assert partition(detections, 5, **MODES[mode]) == expected
    detections, expected = random_walks([(100, 100), (200, 100), (100, 200), (200, 200)], 30, seed=0)
    assert partition(detections, 5, **MODES[mode]) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(5))
def test_nearby_continuous_random_walks(mode, seed):
    starts = [(10, 11), (10, 18), (14, 15), (20, 21), (13, 13), (10, 10), (17, 19)]
    detections, expected = random_walks(starts, 30, seed=seed)
    # Seven unit-variance random walks started a few steps apart cross and meet: trackpy's test asserts the
    # links of one seed. Ours: the exact assignment must not be beaten by the true links at the same cost
    # model, which on these crowded walks we check through the share of true links found.
    found = partition(detections, 5, **MODES[mode])
    truth_links = _links(expected, detections)
    found_links = _links(found, detections)
    assert len(truth_links & found_links) >= 0.9 * len(truth_links)


def _links(groups, detections):
    frames = detections["frame"]
    links = set()
    for group in groups:
        rows = sorted(group, key=lambda r: frames[r])
        links.update(zip(rows[:-1], rows[1:]))
    return links


@pytest.mark.parametrize("mode", MODES)
def test_start_at_frame_other_than_zero(mode):
    assert n_tracks(table(3 + np.arange(5), np.ones(5), np.arange(5)), 5, **MODES[mode]) == 1


def test_blank_frame():
    detections = table([0, 1, 2, 4, 5], np.ones(5), np.arange(5))
    # trackpy without memory: two tracks across the blank frame 3.
    assert partition(detections, 5, **PLAIN) == labels_to_partition([0, 0, 0, 1, 1])
    # Convention: our defaults bridge a missing frame by gap closing (one track).
    assert partition(detections, 5) == labels_to_partition([0] * 5)


@pytest.mark.parametrize("mode", MODES)
def test_search_range(mode):
    assert n_tracks(unit_steps(), 1.1, **MODES[mode]) == 1
    assert n_tracks(unit_steps(), 0.9, **MODES[mode]) == 5
    assert n_tracks(random_walk_legacy(), MAX_DISP + 0.1, **MODES[mode]) == 1
    assert n_tracks(random_walk_legacy(), MAX_DISP - 0.1, **MODES[mode]) > 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shift", [0, 1], ids=["easy", "pathological"])
def test_easy_and_pathological_tracking(mode, shift):
    levels = [(j, k + j * shift, j) for j in range(5) for k in np.arange(16) * 2]
    frames, y, x = (np.array(v, dtype=float) for v in zip(*levels))
    tracks = link_detections(table(frames, y, x), 1.5 if shift == 0 else 8, **MODES[mode])
    ids = np.unique(tracks["track_id"])
    assert len(ids) == 16
    for track in ids:
        mine = tracks["track_id"] == track
        assert np.sum(np.diff(tracks["x"][mine])) == 4
        assert np.sum(np.diff(tracks["y"][mine])) == 4 * shift


def test_input_not_modified():
    detections = table(np.arange(5), np.ones(5), np.arange(5))
    before = {k: v.copy() for k, v in detections.items()}
    link_detections(detections, 5)
    assert set(detections) == set(before) and all(np.array_equal(detections[k], before[k]) for k in before)


@pytest.mark.parametrize("epsilon,expected", [(1, [0, 1, 1, 0]), (-1, [0, 1, 0, 1])])
@pytest.mark.parametrize("mode", MODES)
def test_quadrature_distances(mode, epsilon, expected):
    """Squared distances add in quadrature: A->C + B->D and A->D + B->C differ only in their sign of epsilon."""
    detections = table([0, 0, 1, 1], [0, 8, 0, 8], [6, 14 + epsilon, 8, 0])
    assert partition(detections, 20, **MODES[mode]) == labels_to_partition(expected)


@pytest.mark.parametrize("epsilon,expected", [(1, [0, 1, 1, 0]), (-1, [0, 1, 0, 1])])
@pytest.mark.parametrize("mode", MODES)
def test_quadrature_sum(mode, epsilon, expected):
    detections = table([0, 0, 1, 1], [30, 0, 20, 20 + epsilon], [10, 10, 0, 30])
    assert partition(detections, 30, **MODES[mode]) == labels_to_partition(expected)


@pytest.mark.parametrize("mode", MODES)
def test_penalty(mode):
    """Two particles 8 apart, both moving (8 down, 7 right).

    trackpy: with a "no link" penalty of search_range², a search range of 12 makes one link cheaper than two.
    Convention: our "no link" cost is relative to the candidate costs (1.05 × the largest, Jaqaman et al.
    2008), so both links are kept at both ranges; the range still gates (search range 10 leaves one link).
    """
    detections = table([0, 0, 1, 1], [0, 0, 8, 8], [0, 8, 7, 15])
    both = labels_to_partition([0, 1, 0, 1])
    assert partition(detections, 13, **MODES[mode]) == both
    assert partition(detections, 12, **MODES[mode]) == both
    assert partition(detections, 10, **MODES[mode]) == labels_to_partition([0, 1, 1, 2])


def _memory_case(frames_of_b):
    a = unit_steps()
    b = random_walk_legacy()
    keep = np.isin(b["frame"], frames_of_b)
    return concat(a, {k: v[keep] for k, v in b.items()})


def test_memory():
    """A unit stepper and a random walk; the walk misses frame 2."""
    detections = _memory_case([0, 1, 3, 4])
    safe = 1 + RANDOM_X.max() - RANDOM_X.min()
    assert n_tracks(detections, safe, **PLAIN) == 3  # trackpy memory=0
    assert n_tracks(detections, safe) == 2  # trackpy memory=2; our default gap closing


def test_memory_removal():
    """A resumed track must not stay in memory and pick up a second point of the same frame."""
    levels = [(0, 1, 1), (0, 1, 4), (1, 1, 1), (2, 1, 1), (2, 1, 2), (3, 1, 1), (3, 1, 2), (3, 1, 4)]
    frames, y, x = (np.array(v, dtype=float) for v in zip(*levels))
    tracks = link_detections(table(frames, y, x), 5)
    assert len(np.unique(tracks["track_id"])) == 3
    for track in np.unique(tracks["track_id"]):  # one point per frame and track
        mine = tracks["frame"][tracks["track_id"] == track]
        assert len(mine) == len(np.unique(mine))


def test_memory_with_late_appearance():
    """The walk is seen only in frames 1 and 4 (a gap of 2 missing frames)."""
    detections = _memory_case([1, 4])
    safe = 1 + RANDOM_X.max() - RANDOM_X.min()
    assert n_tracks(detections, safe, max_gap=1) == 3  # trackpy memory=1
    assert n_tracks(detections, safe, max_gap=4) == 2  # trackpy memory=4
    assert n_tracks(detections, safe) == 2  # our default max_gap=2 bridges it


def test_contracting_grid_solved_exactly():
    """trackpy's ``contracting_grid`` (441 points shrinking by 10 %) overflows its subnet solver
    (``test_oversize_fail``) or needs an adaptive range (``test_adaptive_range``). Convention: we solve every
    frame pair exactly: plain mode's links are an optimum of the Jaqaman block matrix (squared distances within
    the range, "no link" at 1.05 times the largest), checked against SciPy on the dense matrix."""
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    gy, gx = np.mgrid[-10:11, -10:11] * 2.0
    y0, x0 = gy.ravel(), gx.ravel()
    detections = table(np.repeat([0, 1], len(y0)), np.concatenate([y0, 0.9 * y0]) + 200,
                       np.concatenate([x0, 0.9 * x0]) + 200)
    tracks = link_detections(detections, 2, **PLAIN)
    linked = ~np.isnan(tracks["link_cost"])
    ours = float(np.sum(tracks["link_cost"][linked]))

    n = len(y0)
    cost = cdist(np.column_stack([y0, x0]), 0.9 * np.column_stack([y0, x0]), "sqeuclidean")
    no_link = 1.05 * cost[cost <= 4].max()
    block = np.full((2 * n, 2 * n), 1e9)
    block[:n, :n] = np.where(cost <= 4, cost, 1e9)
    block[:n, n:] = np.where(np.eye(n, dtype=bool), no_link, 1e9)
    block[n:, :n] = np.where(np.eye(n, dtype=bool), no_link, 1e9)
    block[n:, n:] = np.where(cost.T <= 4, 0.0, 1e9)  # (the auxiliary block: 0 where the transposed link exists)
    rows, cols = linear_sum_assignment(block)
    scipy_links = (rows < n) & (cols < n)
    assert linked.sum() == scipy_links.sum()
    assert ours == pytest.approx(block[rows[scipy_links], cols[scipy_links]].sum(), rel=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_drop_link(mode):
    """A stepper and a particle appearing next to its second position (trackpy's ``drop`` strategy breaks the
    track when the range is large; convention: ours keeps the best link at any range)."""
    detections = table([0, 1, 1], [1, 1, 1], [0, 1, 3])
    expected = labels_to_partition([0, 0, 1])
    assert partition(detections, 1.5, **MODES[mode]) == expected
    assert partition(detections, 5, **MODES[mode]) == expected
