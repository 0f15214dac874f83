"""Linking detections into trajectories: the passes, in order.

Each pass is an exact gated assignment (:func:`tracker.lap.solve_gated`) with a
"no link" alternative (Jaqaman et al. 2008), over one :class:`~tracker.linking.
track_state.TrackState`:

1. the forward pass (:mod:`~tracker.linking.frame_pair`): frame to frame, every
   particle's next position is predicted from its recent motion
   (:mod:`~tracker.linking.prediction`; persistence estimated from the data),
   candidates are searched within a radius fitted to that particle's motion
   (:mod:`~tracker.linking.candidate_search`), and costs are squared distances
   from the prediction in units of its expected scatter. When the data show
   missing detections (:mod:`~tracker.linking.missing_detections`), the track
   ends of the last ``max_gap`` frames are extra rows of every assignment.
   Where the links show a scatter that differs between axes (noise larger
   along z), the frames are linked again with each axis in units of its own
   scatter (:mod:`~tracker.linking.axis_scatter`);
2. the backward relink (:mod:`~tracker.linking.backward_relink`) of the first
   frame pair, linked before any velocity was known;
3. forward-backward smoothing (:mod:`~tracker.linking.smoothing`): when the
   motion is persistent, every frame pair is linked once more with costs that
   also weigh how well each candidate link continues into the next frame; then
   point exchanges (:mod:`~tracker.linking.point_exchange`) between tracks that
   pass close by, a move across two frame pairs at once;
4. gap closing (:mod:`~tracker.linking.gap_closing`): track ends are joined to
   track starts up to ``max_gap`` frames later.

Every link gets a confidence (:mod:`~tracker.linking.confidence`) from the
alternatives its assignment passed over. With ``motion="none",
adaptive_radius=False, max_gap=0`` this is plain nearest-neighbour LAP linking
on squared displacements.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from ..costs import DEFAULT_NO_LINK_FACTOR
from ..params import LINKING_DEFAULTS, LinkingParams
from ..progress import ProgressCallback
from ..tables import Table, positions_um, sort_table, take_rows
from ..validation import check_detections, check_gate
from .axis_scatter import scatter_shape, whiten, whitened_gate
from .backward_relink import relink_first_pair
from .candidate_search import CandidateSearch
from .frame_pair import forward_pass
from .gate import GateEstimate, estimate_gate
from .gap_closing import DEFAULT_GAP_PENALTY, DEFAULT_MAX_GAP, bounding_box, close_track_gaps, edge_clearance
from .missing_detections import MissingRate, dark_frames, missed_detection_evidence, radius_cuts_steps
from .motion import MotionModel
from .point_exchange import exchange_pass
from .prediction import Prediction
from .smoothing import smoothing_applies, smoothing_pass
from .summary import LinkSummary
from .track_state import FrameRanges, TrackState, tracks_in_order

_log = logging.getLogger("tracker.linking")


def link_detections(
    detections: Mapping[str, np.ndarray],
    max_displacement_um: float | None = LINKING_DEFAULTS.max_displacement_um,
    *,
    no_link_factor: float = DEFAULT_NO_LINK_FACTOR,
    motion: str = LINKING_DEFAULTS.motion,
    persistence: float | None = LINKING_DEFAULTS.persistence,
    adaptive_radius: bool = LINKING_DEFAULTS.adaptive_radius,
    max_gap: int = DEFAULT_MAX_GAP,
    gap_penalty: float = DEFAULT_GAP_PENALTY,
    smoothing: bool = LINKING_DEFAULTS.smoothing,
    solver: str = LINKING_DEFAULTS.solver,
    progress: ProgressCallback | None = None,
    return_summary: bool = False,
) -> Table | tuple[Table, LinkSummary]:
    """Link detections into tracks.

    Parameters
    ----------
    detections : Table
        At least ``frame`` and ``z, y, x`` (3D) or ``y, x`` (2D), in µm; other
        columns are carried over. An axis on which every point has the same
        coordinate (``z = 0`` in a 2D table) is ignored: the motion lives in
        the other axes. Frame numbers need not be contiguous: when they
        share a stride (0, 3, 6, …) one stride is one step of the motion, and
        a frame missing from that sequence is a gap that gap closing bridges.
    max_displacement_um : float, optional
        Gate: the largest displacement between consecutive frames (µm), from
        the predicted position when ``motion`` predicts. None: estimated from
        the detections (:func:`tracker.linking.gate.estimate_gate`), reported
        in the summary (:attr:`LinkSummary.gate`).
    no_link_factor : float
        "No link" cost as a multiple of the largest candidate cost.
    motion : {"persistent", "none"}
        ``"persistent"``: predict each particle at ``x + p v`` from its last
        displacement ``v`` (biased correlated motion, Vasconcelos &
        Rosenhahn 2009) and cost links by squared distance from the
        prediction over its expected scatter. ``"none"``: squared distance
        from the last position.
    persistence : float in [0, 1], optional
        Persistence ``p``; estimated from the links when None.
    adaptive_radius : bool
        Search each particle's candidates within ``4.5`` standard deviations
        of its expected scatter, never beyond ``max_displacement_um`` (else:
        within ``max_displacement_um``). Where the tracks' scatters differ
        more than chance allows (particles of different mobility), that
        scatter is each track's own, in the radius and in the costs: the
        population's, shrunk towards the track's residuals so far as far as
        their dispersion warrants (empirical Bayes,
        :func:`tracker.linking.motion.own_scatter_prior_steps`); with one shared
        motion, the population's.
    max_gap : int
        Join track ends to track starts up to this many missing frames later
        (0: no gap closing). Gaps are closed only when the data show missed
        detections: nearby (end, start) pairs in excess of the time-reversed
        pairs chance makes (:func:`tracker.linking.missing_detections.missed_detection_evidence`), or a
        frame with far fewer points than its neighbours (a dark frame,
        :func:`tracker.linking.missing_detections.dark_frames`).
    gap_penalty : float
        Extra cost per missing frame of a gap-closing link (squared
        standard deviations).
    smoothing : bool
        With persistent motion (persistence at least
        :data:`tracker.linking.smoothing.SMOOTHING_MIN_PERSISTENCE`), link every
        frame pair a second time with costs that add, to the squared distance
        from the prediction, how well the candidate's step ``s`` leads into the
        step ``w`` found after its target: ``|w - p s|²`` over the residual
        variance (forward-backward linking; about doubles the linking time).
        Where detections are sparse enough for the prediction (see
        :data:`tracker.linking.smoothing.LOOKAHEAD_MAX_CROWDING`), ``w`` leads to
        the detection nearest to ``b + p s`` instead of to ``b``'s successor of
        the forward pass. Then nearby tracks exchange single detections where
        that makes both more likely (:func:`tracker.linking.point_exchange.exchange_points`).
    solver : str
        Assignment solver (see :func:`tracker.lap.available_solvers`).
    progress : callable, optional
        Called as ``progress(Stage.LINK, done, total)`` after each frame pair,
        then as ``progress(Stage.SMOOTH, done, total)`` in the smoothing pass if
        it runs and ``progress(Stage.EXCHANGE, done, total)`` after it
        (:class:`tracker.progress.Stage`).
    return_summary : bool
        Also return what the linker measured and decided (:class:`LinkSummary`).
        The summary's line is logged at INFO on the logger ``tracker.linking``
        either way.

    Returns
    -------
    Table
        The detections with ``track_id`` first, then ``link_cost`` (µm²:
        squared distance of the point from where the link predicted it; for
        a link across ``g`` missing frames, divided by ``g + 1``; NaN where a
        track starts; where the axes' scatters differ, the squared
        Mahalanobis distance in the per-axis scatter times the mean per-axis
        variance, :mod:`tracker.linking.axis_scatter`) and
        ``link_confidence`` (0..1, NaN at a start), sorted
        by ``track_id, frame``. Track ids are 0, 1, … in order of first
        appearance; the same input always gives the same table.
    LinkSummary
        With ``return_summary`` only.
    """
    LinkingParams(max_displacement_um=max_displacement_um, no_link_factor=no_link_factor, motion=motion,
                  persistence=persistence, adaptive_radius=adaptive_radius, smoothing=smoothing, max_gap=max_gap,
                  gap_penalty=gap_penalty, solver=solver)  # (a one-line ValueError naming a bad option)
    table = check_detections(detections)  # (whole frame numbers, finite positions, duplicated rows dropped)
    gate_estimate = (GateEstimate.given(max_displacement_um) if max_displacement_um is not None
                     else estimate_gate(table, solver=solver))
    if gate_estimate.source != "given":
        _log.debug("gate: %s", gate_estimate.evidence())
    max_displacement_um = gate_estimate.value_um
    check_gate(table, max_displacement_um)  # (a gate too large for memory refused up front)
    if np.any(np.diff(table["frame"]) < 0):  # (a stable sort of sorted frames changes nothing)
        table = sort_table(table, ["frame"])
    positions, ndim = motion_space(positions_um(table))
    gate = float(max_displacement_um)
    state = TrackState.unlinked(positions, frame_steps(np.asarray(table["frame"], dtype=np.int64)), ndim)
    prediction = Prediction(motion, adaptive_radius, gate, MotionModel(persistence=persistence, ndim=ndim))
    search = CandidateSearch(positions)
    clearance = edge_clearance(positions, bounding_box(positions)) if len(state) else np.zeros(0)
    missing = MissingRate(clearance)
    frames = FrameRanges.of(state.frames)

    forward_pass(state, prediction, search, missing, frames, no_link_factor=no_link_factor, solver=solver,
                 max_gap=max_gap, gap_penalty=gap_penalty, keep_for_smoothing=smoothing, progress=progress)
    shape = scatter_shape(prediction.model, prediction.predicts()) if prediction.scaled_costs() else None
    if shape is not None:
        # The axes' scatters differ (noise larger along z): link again, each axis in units of its own scatter.
        positions, gate = whiten(positions, shape), whitened_gate(gate, shape)
        state = TrackState.unlinked(positions, state.frames, ndim)
        prediction = Prediction(motion, adaptive_radius, gate, MotionModel(persistence=persistence, ndim=ndim),
                                np.sqrt(shape), float(max_displacement_um))
        search = CandidateSearch(positions)
        clearance = edge_clearance(positions, bounding_box(positions))
        missing = MissingRate(clearance)
        forward_pass(state, prediction, search, missing, frames, no_link_factor=no_link_factor, solver=solver,
                     max_gap=max_gap, gap_penalty=gap_penalty, keep_for_smoothing=smoothing, progress=progress)
    radius_abandoned = radius_cuts_steps(state, prediction, missing)
    if radius_abandoned:
        # The motion changes (diffusion, then a directed run): the radii fitted to it cut true steps off.
        # Link again searching the whole gate, the costs still scaled by the motion model.
        state = TrackState.unlinked(positions, state.frames, ndim)
        prediction = Prediction(motion, False, gate, MotionModel(persistence=persistence, ndim=ndim),
                                prediction.axis_sd, prediction.gate_um)
        search.forget_kept()
        missing = MissingRate(clearance)
        forward_pass(state, prediction, search, missing, frames, no_link_factor=no_link_factor, solver=solver,
                     max_gap=max_gap, gap_penalty=gap_penalty, keep_for_smoothing=smoothing, progress=progress)
    no_link_cost = missing.scaled_no_link_cost(no_link_factor)  # (the forward pass's last)
    smoothed, exchanges = "off", 0
    if smoothing and smoothing_applies(prediction):
        lookahead, candidates = smoothing_pass(state, prediction, search, frames, no_link_cost=no_link_cost,
                                               solver=solver, progress=progress)
        smoothed = "look-ahead" if lookahead else "forward successor"
        exchanges = exchange_pass(state, prediction, frames, candidates, progress)
    else:  # (the smoothing pass links the first pair again anyway)
        relink_first_pair(state, prediction, search, frames, no_link_cost=no_link_cost, solver=solver)
    search.forget_kept()  # (what the forward pass kept for the smoothing pass)
    dark = dark_frames(state.frames)
    closing_gaps = max_gap > 0 and (missing.detections_go_missing() or len(dark) > 0
                                    or missed_detection_evidence(state, prediction, missing, max_gap).worth_closing)
    if closing_gaps:
        close_track_gaps(state, prediction, max_gap=max_gap, gap_penalty=gap_penalty, no_link_factor=no_link_factor,
                         solver=solver, dark_frames=dark)

    summary = LinkSummary(
        persistence=float(prediction.model.current_persistence()) if prediction.predicts() else None,
        persistence_estimated=persistence is None, smoothing=smoothed, exchanges=exchanges,
        missing_rate=float(missing.rate()), gap_closing=closing_gaps, radius_abandoned=radius_abandoned,
        gate=gate_estimate,
    )
    _log.info("%s", summary)
    carried = {name: column for name, column in table.items()
               if name not in ("track_id", "link_cost", "link_confidence")}
    track_id, order = tracks_in_order(state.predecessor)
    tracks = take_rows({"track_id": track_id, **carried, "link_cost": state.link_cost,
                        "link_confidence": state.confidence}, order)
    return (tracks, summary) if return_summary else tracks


def motion_space(positions_um: np.ndarray) -> tuple[np.ndarray, int]:
    """The positions on the axes along which points move, as ``(n, 3)`` µm (unused axes first, at 0), and how
    many axes that is (at least 1).

    2D tables (``y, x``) and 3D tables whose ``z`` (or any axis) holds one value for every point (a 2D stack
    saved with ``z = 0``) both link in 2D: the statistics of the motion model count the axes a particle can
    move along (a Gaussian step in ``d`` dimensions has ``d`` degrees of freedom).
    """
    n, d = positions_um.shape
    if n == 0:
        return np.zeros((0, 3)), d
    moving = [k for k in range(d) if positions_um[:, k].min() != positions_um[:, k].max()]
    moving = moving or [d - 1]
    padded = np.zeros((n, 3))
    padded[:, 3 - len(moving):] = positions_um[:, moving]
    return padded, len(moving)


def frame_steps(frames: np.ndarray) -> np.ndarray:
    """Frame numbers as steps of the motion: ``(frame - first) // stride``, the stride the greatest common
    divisor of the differences between frames with points (0, 3, 6, … → 0, 1, 2, …; 0, 1, 2, 4 → the same
    numbers, frame 3 a gap)."""
    present = np.unique(frames)
    if len(present) < 2:
        return frames - (present[0] if len(present) else 0)
    stride = int(np.gcd.reduce(np.diff(present)))
    return (frames - present[0]) // stride
