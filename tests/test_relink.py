"""tracker.linking.relink: the local re-solve with pinned and forbidden links, against an independent solve of the
same constrained problem (SciPy's dense linear_sum_assignment on Jaqaman's square matrix)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

import tracker
from tracker.linking import link_detections, relink, track_links
from tracker.linking.frame_pair import IN_PAIR_GAP_PENALTY_FACTOR
from tracker.linking.relink import predecessors
from tracker.simulate import simulate_tracks

BIG = 1e12


def oracle(tracks, pinned, forbidden, *, gate, persistence, max_gap, no_link_factor, window, radius, gap_price=0.0):
    """The predecessor of every point after re-solving the window, built from scratch (loops, dense matrices)."""
    frames = np.asarray(tracks["frame"], dtype=np.int64)
    pos = np.column_stack([tracks[a] for a in ("z", "y", "x")]).astype(float)
    pred = predecessors(np.asarray(tracks["track_id"]), frames)
    succ = np.full(len(frames), -1)
    for j, i in enumerate(pred):
        if i >= 0:
            succ[i] = j
    edited = {int(k) for pair in [*pinned, *forbidden] for k in pair}
    ends = set(edited) | {int(pred[k]) for k in edited if pred[k] >= 0} | {int(succ[k]) for k in edited
                                                                            if succ[k] >= 0}
    first, last = min(frames[k] for k in ends) - window, max(frames[k] for k in ends) + window
    inside = np.array([k in ends or (first <= frames[k] <= last and
                                     min(np.linalg.norm(pos[k] - pos[e]) for e in ends) <= radius)
                       for k in range(len(frames))])
    cost = np.full(len(frames), np.nan)
    for j in range(len(frames)):
        if inside[j] and pred[j] >= 0 and inside[pred[j]]:
            pred[j] = -1
    forbidden = {tuple(map(int, f)) for f in forbidden}
    pinned = [tuple(map(int, p)) for p in pinned]
    pending = {i for i, _ in pinned}

    def velocity(i):
        if pred[i] < 0:
            return np.zeros(3)
        return (pos[i] - pos[pred[i]]) / (frames[i] - frames[pred[i]])

    def predicted(i, n):
        return pos[i] + sum(persistence ** k for k in range(1, n + 1)) * velocity(i)

    for s in range(first + 1, last + 1):
        for i, j in pinned:
            if frames[j] == s:
                n = s - frames[i]
                cost[j] = np.sum((pos[j] - predicted(i, n)) ** 2) / n
                pred[j] = i
                pending.discard(i)
        has_succ = set(pred[pred >= 0].tolist())
        cols = [j for j in range(len(frames)) if inside[j] and frames[j] == s and pred[j] < 0]
        rows = [i for i in range(len(frames)) if inside[i] and s - 1 - max_gap <= frames[i] < s
                and i not in has_succ and i not in pending]
        if not rows or not cols:
            continue
        c = np.full((len(rows), len(cols)), np.inf)
        recorded = np.full((len(rows), len(cols)), np.nan)
        for a, i in enumerate(rows):
            n = s - frames[i]
            for b, j in enumerate(cols):
                d = np.linalg.norm(pos[j] - predicted(i, n))
                if d <= gate * np.sqrt(n) and (i, j) not in forbidden:
                    recorded[a, b] = d * d / n
                    c[a, b] = d * d / n + gap_price * (n - 1)
        if not np.isfinite(c).any():
            continue
        alt = no_link_factor * c[np.isfinite(c)].max()
        nr, nc = c.shape
        m = np.full((nr + nc, nc + nr), BIG)
        m[:nr, :nc] = np.where(np.isfinite(c), c, BIG)
        m[:nr, nc:][np.diag_indices(nr)] = alt
        m[nr:, :nc][np.diag_indices(nc)] = alt
        m[nr:, nc:] = np.where(np.isfinite(c.T), 0.0, BIG)
        r, k = linear_sum_assignment(m)
        for a, b in zip(r, k):
            if a < nr and b < nc:
                assert m[a, b] < BIG
                pred[cols[b]] = rows[a]
                cost[cols[b]] = recorded[a, b]
    return pred, cost, inside


def random_tracks(seed, n_frames, per_frame, gate):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, per_frame + 1, n_frames)
    frames = np.repeat(np.arange(n_frames), counts)
    det = {"frame": frames, "z": rng.uniform(0, 5, len(frames)), "y": rng.uniform(0, 5, len(frames)),
           "x": rng.uniform(0, 5, len(frames))}
    return link_detections(det, gate, motion="none", adaptive_radius=False, max_gap=0, smoothing=False)


VARIANCE = 0.05
"""µm² per axis: the step variance the tests give relink (the unit of gap_penalty)."""


def check_against_oracle(tracks, pinned, forbidden, gap_penalty=0.0, **options):
    out = relink(tracks, pinned=pinned, forbidden=forbidden, solver="scipy", max_displacement_um=options["gate"],
                 persistence=options["persistence"], max_gap=options["max_gap"], gap_penalty=gap_penalty,
                 variance_um2=VARIANCE, no_link_factor=options["no_link_factor"], window=options["window"],
                 radius_um=options["radius"])
    options["gap_price"] = IN_PAIR_GAP_PENALTY_FACTOR * gap_penalty * VARIANCE
    expected_pred, expected_cost, inside = oracle(tracks, pinned, forbidden, **options)
    got = predecessors(out["track_id"], np.asarray(out["frame"]))
    np.testing.assert_array_equal(got, expected_pred)
    changed = inside & ~np.isnan(expected_cost)
    np.testing.assert_allclose(out["link_cost"][changed], expected_cost[changed], rtol=1e-9)
    for i, j in pinned:  # pins respected
        assert got[j] == i and out["link_confidence"][j] == 1.0
    for i, j in forbidden:  # forbids respected
        assert got[j] != i
    # Outside the window: links, costs and confidences untouched.
    before = predecessors(np.asarray(tracks["track_id"]), np.asarray(tracks["frame"]))
    outside = ~inside
    np.testing.assert_array_equal(got[outside], before[outside])
    np.testing.assert_array_equal(out["link_cost"][outside], np.asarray(tracks["link_cost"])[outside])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_frames=st.integers(2, 6), per_frame=st.integers(1, 6),
       max_gap=st.integers(0, 2), persistence=st.sampled_from([0.0, 0.6]), window=st.integers(0, 2),
       radius=st.sampled_from([1.5, 100.0]), n_pins=st.integers(0, 3), n_forbids=st.integers(0, 3),
       gap_penalty=st.sampled_from([0.0, 2.0]))
def test_relink_equals_a_solve_from_scratch(seed, n_frames, per_frame, max_gap, persistence, window, radius, n_pins,
                                            n_forbids, gap_penalty):
    gate = 2.5
    tracks = random_tracks(seed, n_frames, per_frame, gate)
    frames = np.asarray(tracks["frame"])
    pred = predecessors(np.asarray(tracks["track_id"]), frames)
    links = [(int(i), int(j)) for j, i in enumerate(pred) if i >= 0]
    rng = np.random.default_rng(seed + 1)
    forbidden = [links[k] for k in rng.permutation(len(links))[:n_forbids]]
    pairs = [(i, j) for i in range(len(frames)) for j in range(len(frames))
             if 1 <= frames[j] - frames[i] <= max_gap + 2 and (i, j) not in forbidden]  # (some beyond max_gap)
    pinned, sources, targets = [], set(), set()
    for k in rng.permutation(len(pairs))[:n_pins]:
        i, j = pairs[k]
        if i not in sources and j not in targets:
            pinned.append((i, j))
            sources.add(i)
            targets.add(j)
    if not pinned and not forbidden:
        return
    check_against_oracle(tracks, pinned, forbidden, gap_penalty, gate=gate, persistence=persistence,
                         max_gap=max_gap, no_link_factor=1.05, window=window, radius=radius)


@pytest.fixture(scope="module")
def simulated():
    truth = simulate_tracks(n_particles=60, n_frames=12, field_of_view_um=(6.0, 12.0, 12.0), step_um=0.5, seed=3)
    det = {k: truth[k] for k in ("frame", "z", "y", "x")}
    return link_detections(det, 1.5)


def test_forbidding_a_link_relinks_locally_and_matches_the_oracle(simulated):
    tracks = simulated
    i = int(np.nanargmin(tracks["link_confidence"]))
    j = i - 1
    assert tracks["track_id"][j] == tracks["track_id"][i]
    out = check_against_oracle(tracks, [], [(j, i)], 1.0, gate=1.5, persistence=0.3, max_gap=1,
                               no_link_factor=1.05, window=1, radius=3.0)
    assert predecessors(out["track_id"], out["frame"])[i] != j


def test_pinning_a_track_keeps_every_link_and_far_tracks_keep_their_ids(simulated):
    tracks = simulated
    track = int(tracks["track_id"][int(np.nanargmin(tracks["link_confidence"]))])
    pins = track_links(tracks, track)
    out = relink(tracks, pinned=pins, max_displacement_um=1.5, window=1, radius_um=2.0)
    rows = np.flatnonzero(np.asarray(tracks["track_id"]) == track)
    assert len(set(out["track_id"][rows].tolist())) == 1
    assert np.all(out["link_confidence"][pins[:, 1]] == 1.0)
    # A point far from every pinned point (beyond the radius) keeps its track id and link.
    pos = np.column_stack([tracks[a] for a in ("z", "y", "x")])
    far = np.min(np.linalg.norm(pos[:, None] - pos[rows][None], axis=2), axis=1) > 2.0
    np.testing.assert_array_equal(out["track_id"][far], tracks["track_id"][far])


def test_the_dataframe_api_and_row_order(simulated):
    import pandas as pd

    frame = pd.DataFrame(simulated).sample(frac=1.0, random_state=0).reset_index(drop=True)
    table = {name: frame[name].to_numpy() for name in frame.columns}
    pred = predecessors(table["track_id"], table["frame"])
    j = int(np.flatnonzero(pred >= 0)[0])
    out = tracker.relink(frame, forbidden=[(int(pred[j]), j)], max_displacement_um=1.5)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(frame.columns)
    np.testing.assert_array_equal(out["frame"].to_numpy(), frame["frame"].to_numpy())  # same row order
    assert predecessors(out["track_id"].to_numpy(), out["frame"].to_numpy())[j] != pred[j]


def test_deleted_detections_come_back_through_the_detections_argument(simulated):
    tracks = {k: np.asarray(v) for k, v in simulated.items()}
    pred = predecessors(tracks["track_id"], tracks["frame"])
    j = int(np.flatnonzero(pred >= 0)[5])
    i = int(pred[j])
    kept = np.ones(len(pred), dtype=bool)
    kept[j] = False  # the reviewer deleted point j; then pins i -> j back
    reduced = {k: v[kept] for k, v in tracks.items()}
    source = int(np.count_nonzero(kept[:i]))  # (i's row in the reduced table; j is appended last)
    out = relink(reduced, tracks, pinned=[(source, len(reduced["frame"]))], max_displacement_um=1.5)
    assert len(out["frame"]) == len(pred)
    assert out["frame"][-1] == tracks["frame"][j] and out["link_confidence"][-1] == 1.0


@pytest.mark.parametrize("pinned, forbidden, message", [
    ([(0, 1), (0, 2)], [], "share a source"),
    ([(0, 0)], [], "later frame"),
    ([], [(0, 10**6)], "row numbers"),
])
def test_bad_edits_are_refused(simulated, pinned, forbidden, message):
    tracks = simulated
    frames = np.asarray(tracks["frame"])
    if pinned and pinned[0] != (0, 0):
        later = np.flatnonzero(frames == frames[0] + 1)[:2]
        pinned = [(0, int(later[0])), (0, int(later[1]))]
    with pytest.raises(ValueError, match=message):
        relink(tracks, pinned=pinned, forbidden=forbidden, max_displacement_um=1.5)


def test_pinned_and_forbidden_at_once_is_refused(simulated):
    pred = predecessors(np.asarray(simulated["track_id"]), np.asarray(simulated["frame"]))
    j = int(np.flatnonzero(pred >= 0)[0])
    with pytest.raises(ValueError, match="both pinned and forbidden"):
        relink(simulated, pinned=[(int(pred[j]), j)], forbidden=[(int(pred[j]), j)], max_displacement_um=1.5)


def test_no_edits_returns_the_tracks_unchanged(simulated):
    out = relink(simulated, max_displacement_um=1.5)
    for name in simulated:
        np.testing.assert_array_equal(out[name], simulated[name])


def test_earlier_decisions_constrain_the_window_without_widening_it(simulated):
    tracks = simulated
    pred = predecessors(np.asarray(tracks["track_id"]), np.asarray(tracks["frame"]))
    frames = np.asarray(tracks["frame"])
    i = int(np.nanargmin(tracks["link_confidence"]))
    edit = (int(pred[i]), i)
    # An earlier pin far away in time (outside the window) changes nothing; one inside is kept.
    far = [j for j in np.flatnonzero(pred >= 0) if abs(frames[j] - frames[i]) > 6][0]
    alone = relink(tracks, forbidden=[edit], max_displacement_um=1.5, window=1, radius_um=3.0)
    with_far_pin = relink(tracks, pinned=[(int(pred[far]), int(far))], forbidden=[edit], around=[edit],
                          max_displacement_um=1.5, window=1, radius_um=3.0)
    np.testing.assert_array_equal(alone["track_id"], with_far_pin["track_id"])
    # An earlier forbid inside the window (a neighbour's link in the same frame) is respected; a far one is
    # outside: its link stays.
    pos = np.column_stack([tracks[a] for a in ("z", "y", "x")])
    same = np.flatnonzero((frames == frames[i]) & (pred >= 0) & (np.arange(len(pred)) != i))
    j = int(same[np.argmin(np.linalg.norm(pos[same] - pos[i], axis=1))])
    out = relink(tracks, forbidden=[edit, (int(pred[j]), j), (int(pred[far]), int(far))], around=[edit],
                 max_displacement_um=1.5, window=1, radius_um=3.0)
    after = predecessors(out["track_id"], frames)
    assert after[j] != pred[j] and after[i] != pred[i]
    assert after[far] == pred[far]


@pytest.mark.gpu
@pytest.mark.parametrize("solver", ["hungarian-tree", "hungarian-classical", "auction"])
def test_the_gpu_solvers_give_the_same_relink(simulated, solver):
    """Through tracker.lap on the GPU: the same links as SciPy (random positions: no ties)."""
    i = int(np.nanargmin(simulated["link_confidence"]))
    options = {"forbidden": [(i - 1, i)], "max_displacement_um": 1.5, "window": 3, "radius_um": 100.0}
    expected = relink(simulated, solver="scipy", **options)
    got = relink(simulated, solver=solver, **options)
    frames = np.asarray(simulated["frame"])
    np.testing.assert_array_equal(predecessors(got["track_id"], frames), predecessors(expected["track_id"], frames))


def test_two_dimensional_tracks():
    rng = np.random.default_rng(4)
    det = {"frame": np.repeat(np.arange(6), 8), "y": rng.uniform(0, 6, 48), "x": rng.uniform(0, 6, 48)}
    tracks = link_detections(det, 2.0)
    pred = predecessors(np.asarray(tracks["track_id"]), np.asarray(tracks["frame"]))
    j = int(np.flatnonzero(pred >= 0)[3])
    out = relink(tracks, forbidden=[(int(pred[j]), j)], max_displacement_um=2.0)
    assert "z" not in out and predecessors(out["track_id"], out["frame"])[j] != pred[j]
