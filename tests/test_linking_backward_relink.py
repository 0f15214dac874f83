"""The backward relink: the first frame pair linked again from the steps that follow it."""

from __future__ import annotations

import numpy as np

from tracker.linking.backward_relink import relink_backwards
from tracker.linking.candidate_search import CandidateSearch
from tracker.linking.missing_detections import SCALED_NO_LINK_COST
from linking_cells import two_tracks


def test_relink_fixes_a_swap_in_the_first_pair():
    # The first pair swapped the tracks (A0 -> B1, B0 -> A1), the second linked them straight (A1 -> A2,
    # B1 -> B2): each frame-1 point, predicted back from its next step, came from its own track's frame-0 point.
    state, prediction = two_tracks([-1, -1, 1, 0, 2, 3, -1, -1])
    relink_backwards(state, prediction, CandidateSearch(state.positions), np.array([0, 1]), np.array([2, 3]),
                     no_link_cost=SCALED_NO_LINK_COST, solver="scipy")
    np.testing.assert_array_equal(state.predecessor, [-1, -1, 0, 1, 2, 3, -1, -1])
    np.testing.assert_array_equal(state.has_successor, [True, True, True, True, False, False, False, False])
    np.testing.assert_allclose(state.link_cost[2:4], (0.5 - 0.9 * 0.5) ** 2)  # from the backward prediction
    np.testing.assert_allclose(state.velocity[2:4], [[0.0, 0.0, 0.5]] * 2)
    assert np.all((state.confidence[2:4] > 0.5) & (state.confidence[2:4] <= 1.0))


def test_relink_keeps_links_across_a_gap():
    # A0 was joined to A2 across frame 1 (A1 unlinked): A0 is taken, though A1 lies within its reach.
    state, prediction = two_tracks([-1, -1, -1, 1, 0, 3, -1, -1])
    relink_backwards(state, prediction, CandidateSearch(state.positions), np.array([0, 1]), np.array([2, 3]),
                     no_link_cost=SCALED_NO_LINK_COST, solver="scipy")
    np.testing.assert_array_equal(state.predecessor, [-1, -1, -1, 1, 0, 3, -1, -1])
