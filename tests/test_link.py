import multiprocessing

import numpy as np
import pytest

from tracker import link, metrics, simulate
from tracker.costs import nearest_target
from test_motion import _dense_cell


def _noisy_detections(truth, sigma, seed=0):
    rng = np.random.default_rng(seed)
    visible = truth["visible"]
    table = {name: np.asarray(truth[name])[visible] for name in ("frame", "z", "y", "x")}
    for axis in "zyx":
        table[axis] = table[axis] + rng.normal(0, sigma, len(table[axis]))
    return table


def test_links_simulated_particles():
    truth = simulate.simulate_tracks(80, 15, (10.0, 25.0, 25.0), 0.4, 0.5, seed=1)
    tracks = link.link_detections(_noisy_detections(truth, 0.03), 1.5, solver="scipy")
    scores = metrics.evaluate(tracks, truth, 0.5)
    assert scores["link_f1"] > 0.98
    assert list(tracks)[:2] == ["track_id", "frame"] and "link_cost" in tracks
    starts = np.r_[True, np.diff(tracks["track_id"]) != 0]
    assert np.all(np.isnan(tracks["link_cost"][starts])) and np.all(tracks["link_cost"][~starts] <= 1.5**2)


def test_gate_and_appearance():
    detections = {"frame": np.array([0, 0, 1, 1]), "z": np.zeros(4), "y": np.zeros(4),
                  "x": np.array([0.0, 10.0, 0.5, 30.0])}
    tracks = link.link_detections(detections, 1.0, solver="scipy")
    # (0 → 0.5) links; 10 ends, 30 starts.
    assert len(np.unique(tracks["track_id"])) == 3
    linked = tracks["x"][tracks["track_id"] == tracks["track_id"][tracks["x"] == 0.0][0]]
    assert sorted(linked.tolist()) == [0.0, 0.5]


def test_empty_frames_and_single_detection():
    detections = {"frame": np.array([0, 2, 3]), "z": np.zeros(3), "y": np.zeros(3), "x": np.array([0.0, 0.1, 0.2])}
    tracks = link.link_detections(detections, 1.0, max_gap=0, solver="scipy")
    # Frame 1 is empty and gaps are not closed: frame 0 cannot link to frame 2.
    assert tracks["track_id"].tolist() == [0, 1, 1]
    none = link.link_detections({"frame": np.empty(0, int), "z": np.empty(0), "y": np.empty(0),
                                 "x": np.empty(0)}, 1.0)
    assert len(none["track_id"]) == 0


def test_deterministic_and_order_independent():
    truth = simulate.simulate_tracks(60, 10, (10.0, 20.0, 20.0), 0.5, seed=2)
    detections = _noisy_detections(truth, 0.05)
    a = link.link_detections(detections, 1.5, solver="scipy")
    b = link.link_detections(detections, 1.5, solver="scipy")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_requires_positions():
    with pytest.raises(ValueError, match="missing column"):
        link.link_detections({"frame": np.array([0])}, 1.0)


def test_track_ids_from_predecessors():
    predecessor = np.array([-1, -1, 0, 1, 3, -1])
    assert link.track_ids_from_predecessors(predecessor).tolist() == [0, 1, 0, 1, 1, 2]


def test_tracks_in_order_matches_a_sort(rng):
    # Random forests of chains over points in frame order (a gap may skip frames).
    frames = np.sort(rng.integers(0, 30, 2000))
    predecessor = np.full(len(frames), -1)
    for i in range(len(frames)):
        earlier = np.flatnonzero((frames < frames[i]) & (frames >= frames[i] - 2))
        free = earlier[~np.isin(earlier, predecessor)]
        if len(free) and rng.random() < 0.8:
            predecessor[i] = rng.choice(free)
    track_id, order = link._tracks_in_order(predecessor)
    np.testing.assert_array_equal(track_id, link.track_ids_from_predecessors(predecessor))
    np.testing.assert_array_equal(order, np.lexsort((frames, track_id)))


def test_unsorted_input_gives_the_sorted_result():
    truth = simulate.simulate_tracks(60, 10, (10.0, 20.0, 20.0), 0.5, seed=3)
    detections = _noisy_detections(truth, 0.05)
    shuffled = np.random.default_rng(0).permutation(len(detections["frame"]))
    a = link.link_detections(detections, 1.5, solver="scipy")
    b = link.link_detections({k: v[shuffled] for k, v in detections.items()}, 1.5, solver="scipy")
    assert np.all(np.diff(a["track_id"]) >= 0)
    np.testing.assert_array_equal(np.lexsort((a["frame"], a["track_id"])), np.arange(len(a["frame"])))
    assert len(a["frame"]) == len(b["frame"]) == len(detections["frame"])


@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_smoothing_pass_candidates_do_not_depend_on_the_kept_search(monkeypatch, margin):
    # Margin 0: almost every smoothing search runs afresh; 0.5: almost all come from the forward pass's.
    truth = simulate.simulate_tracks(300, 12, (12.0, 25.0, 25.0), 0.5, 0.7, blink_probability=0.05, seed=4)
    detections = _noisy_detections(truth, 0.04)
    summary = {}
    expected = link.link_detections(detections, 1.5, solver="scipy", summary=summary)
    assert summary["smoothing"] != "off"
    monkeypatch.setattr(link, "SMOOTHING_SEARCH_MARGIN", margin)
    got = link.link_detections(detections, 1.5, solver="scipy")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_lookahead_continuations_from_the_kept_search_equal_a_fresh_search(monkeypatch):
    # Persistence 0.9: the smoothing pass looks ahead; its nearest continuations come mostly from the forward
    # pass's kept candidates, the rest from the k-d tree. Each call is checked against a search of the whole
    # next frame.
    truth = simulate.simulate_tracks(400, 10, (12.0, 25.0, 25.0), 0.4, 0.9, blink_probability=0.05, seed=5)
    detections = _noisy_detections(truth, 0.03)
    queries = {"all": 0, "tree": 0}
    original = link._LinkState._nearest_continuation

    def checked(self, positions, query_um, sources, source_frame, next_frame, bound_um):
        got = original(self, positions, query_um, sources, source_frame, next_frame, bound_um)
        np.testing.assert_array_equal(got, nearest_target(query_um, positions[next_frame], bound_um)[1])
        queries["all"] += len(query_um)
        return got

    def counted(query_um, *args, **kwargs):
        queries["tree"] += len(query_um)
        return nearest_target(query_um, *args, **kwargs)

    monkeypatch.setattr(link._LinkState, "_nearest_continuation", checked)
    monkeypatch.setattr(link, "nearest_target", counted)
    summary = {}
    link.link_detections(detections, 1.2, solver="scipy", summary=summary)
    assert summary["smoothing"] == "look-ahead"
    assert 0 < queries["tree"] < 0.5 * queries["all"]  # both ways were taken, mostly the kept candidates


def _swapped_tracks(gate_um):
    """Two particles moving 0.5 µm per frame along x, 0.4 µm apart, whose links swapped their frame-1 detections
    (A0 -> B1 -> A2 -> A3, B0 -> A1 -> B2 -> B3): the linker's state after smoothing, and the positions."""
    frames = np.repeat(np.arange(4), 2)
    positions = np.stack([np.zeros(8), np.tile([0.0, 0.4], 4), 0.5 * frames], axis=1)
    predecessor = np.array([-1, -1, 1, 0, 3, 2, 4, 5])
    state = link._LinkState(8, "persistent", 0.9, True, gate_um)
    state.frames = frames
    state.predecessor[:] = predecessor
    state.successor = np.full(8, -1)
    state.successor[predecessor[predecessor >= 0]] = np.flatnonzero(predecessor >= 0)
    linked = predecessor >= 0
    state.velocity[linked] = positions[linked] - positions[predecessor[linked]]
    state.has_velocity[:] = linked
    state.confidence[linked] = 0.5
    state.exchange_candidates[1] = (np.array([2]), np.array([3]))  # (as smooth_pair leaves them)
    return state, positions


def test_point_exchange_gives_two_tracks_back_their_detections():
    # Exchanging A1 and B1 straightens both tracks.
    state, positions = _swapped_tracks(1.0)
    assert state.exchange_points(positions, [1]) == 1
    np.testing.assert_array_equal(state.predecessor, [-1, -1, 0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(state.successor, [2, 3, 4, 5, 6, 7, -1, -1])
    np.testing.assert_allclose(state.velocity[2:6], [[0, 0, 0.5]] * 4)
    # The links into the frame-3 points kept their source; their cost follows the new velocities.
    np.testing.assert_allclose(state.link_cost[6:], (0.5 - 0.9 * 0.5) ** 2)
    assert np.all((state.confidence[2:6] > 0.5) & (state.confidence[2:6] <= 1.0))
    assert not state.exchange_candidates
    # Nothing left to gain: the straight tracks stay.
    state.exchange_candidates[1] = (np.array([2]), np.array([3]))
    assert state.exchange_points(positions, [1]) == 0


def test_point_exchange_keeps_links_within_the_gate():
    # A gate below the 0.5 µm step: A0 -> A1 (no velocity known at A0, so predicted where A0 is) would leave it.
    state, positions = _swapped_tracks(0.45)
    before = state.predecessor.copy()
    assert state.exchange_points(positions, [1]) == 0
    np.testing.assert_array_equal(state.predecessor, before)


def test_point_exchanges_improve_crowded_persistent_linking(monkeypatch):
    # Step/NN 0.5, persistence 0.5: the smoothing pass leaves detections swapped between crossing tracks.
    gains = []
    for seed in (3, 4, 5):
        truth, detections, step, nn = _dense_cell(0.5, 0.5, n=1500, frames=10, seed=seed)
        summary = {}
        with_exchanges = link.link_detections(detections, 2.5 * step, solver="scipy", summary=summary)
        assert summary["exchanges"] > 0
        with monkeypatch.context() as patch:
            patch.setattr(link._LinkState, "exchange_points", lambda self, positions, frame_numbers: 0)
            without = link.link_detections(detections, 2.5 * step, solver="scipy")
        gains.append(metrics.evaluate(with_exchanges, truth, 0.5 * nn)["link_f1"]
                     - metrics.evaluate(without, truth, 0.5 * nn)["link_f1"])
    assert min(gains) > 0


def _link_in_child(detections):
    return link.link_detections(detections, 1.5, solver="scipy")["track_id"]


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
def test_links_in_a_process_forked_after_linking():
    # The linker's helper threads (k-d tree builds, shared queries) do not exist in a forked child: it must
    # make its own instead of waiting forever on the parent's.
    truth = simulate.simulate_tracks(300, 6, (12.0, 25.0, 25.0), 0.5, 0.7, seed=4)
    detections = _noisy_detections(truth, 0.04)
    expected = link.link_detections(detections, 1.5, solver="scipy")["track_id"]  # the parent's threads start
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_link_in_child, (detections,)).get(timeout=60)
    np.testing.assert_array_equal(got, expected)
