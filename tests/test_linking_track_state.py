"""The track state: links recorded and undone, frame ranges, track ids from predecessors."""

import numpy as np

from tracker.linking import track_ids_from_predecessors
from tracker.linking.track_state import FrameRanges, TrackState, tracks_in_order


def test_record_links_and_unlink():
    positions = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 5.0], [0.0, 0.0, 0.5], [0.0, 0.0, 6.0]])
    state = TrackState.unlinked(positions, np.array([0, 0, 2, 2]))
    assert np.all(state.predecessor == -1) and np.all(np.isnan(state.link_cost))
    # Both links span two frames (frame 1 has no points): cost and velocity are per frame spanned.
    state.record_links(np.array([0, 1]), np.array([2, 3]), np.array([0.04, 0.09]), np.array([0.01, 0.03]),
                       np.array([0.9, 0.6]), steps=np.array([2, 2]))
    np.testing.assert_array_equal(state.predecessor, [-1, -1, 0, 1])
    np.testing.assert_array_equal(state.has_successor, [True, True, False, False])
    np.testing.assert_allclose(state.link_cost[2:], [0.02, 0.045])
    np.testing.assert_allclose(state.velocity[2:], [[0, 0, 0.25], [0, 0, 0.5]])
    np.testing.assert_allclose(state.ratio_sum[2:], [0.04 / 0.03, 0.09 / 0.09])
    np.testing.assert_array_equal(state.ratio_count[2:], [1, 1])
    np.testing.assert_array_equal(state.successors(), [2, 3, -1, -1])
    state.unlink(np.array([3]))
    np.testing.assert_array_equal(state.predecessor, [-1, -1, 0, -1])
    np.testing.assert_array_equal(state.has_successor, [True, False, False, False])
    assert np.isnan(state.link_cost[3]) and np.isnan(state.confidence[3]) and not state.has_velocity[3]
    assert state.ratio_count[3] == 0 and np.all(state.velocity[3] == 0)


def test_frame_ranges():
    frames = FrameRanges.of(np.array([0, 0, 1, 3, 3, 3]))
    assert frames.values.tolist() == [0, 1, 3] and frames.n_pairs == 2
    assert frames.points(2).tolist() == [3, 4, 5]
    assert frames.consecutive(0) and not frames.consecutive(1)
    assert frames.index_of(3) == 2 and frames.index_of(2) is None and frames.index_of(7) is None
    assert FrameRanges.of(np.empty(0, np.int64)).n_pairs == 0


def test_track_ids_from_predecessors():
    predecessor = np.array([-1, -1, 0, 1, 3, -1])
    assert track_ids_from_predecessors(predecessor).tolist() == [0, 1, 0, 1, 1, 2]


def test_tracks_in_order_matches_a_sort(rng):
    # Random forests of chains over points in frame order (a gap may skip frames).
    frames = np.sort(rng.integers(0, 30, 2000))
    predecessor = np.full(len(frames), -1)
    for i in range(len(frames)):
        earlier = np.flatnonzero((frames < frames[i]) & (frames >= frames[i] - 2))
        free = earlier[~np.isin(earlier, predecessor)]
        if len(free) and rng.random() < 0.8:
            predecessor[i] = rng.choice(free)
    track_id, order = tracks_in_order(predecessor)
    np.testing.assert_array_equal(track_id, track_ids_from_predecessors(predecessor))
    np.testing.assert_array_equal(order, np.lexsort((frames, track_id)))
