"""The whole job: a stack in, detections and tracks out.

``track_stack`` runs detection frame by frame (on the GPU when
``device="auto"`` finds one) and then linking. Only the current frame is in
memory during detection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .backend import resolve_device
from .costs import DEFAULT_NO_LINK_FACTOR
from .detect import detect_spots
from .io import InputError, Stack, as_stack
from .linking import LinkSummary, link_detections
from .linking.gap_closing import DEFAULT_GAP_PENALTY, DEFAULT_MAX_GAP
from .params import DETECTION_DEFAULTS, LINKING_DEFAULTS
from .tables import Table, concat_tables, empty_detections

ProgressCallback = Callable[[str, int, int], None]

DEFAULT_SPOT_RADIUS_UM = DETECTION_DEFAULTS.spot_radius_um
DEFAULT_MAX_DISPLACEMENT_UM = LINKING_DEFAULTS.max_displacement_um


@dataclass
class TrackingResult:
    """What :func:`track_stack` returns."""

    detections: Table
    tracks: Table
    voxel_size: tuple[float, float, float]
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per stage (``detect``, ``link``)."""
    linking: LinkSummary | None = None
    """What the linker measured and decided (:func:`tracker.linking.link_detections`)."""

    @property
    def n_tracks(self) -> int:
        return int(len(np.unique(self.tracks["track_id"]))) if len(self.tracks["track_id"]) else 0


def detect_stack(
    stack: Stack,
    spot_radius_um: float | Sequence[float] = DEFAULT_SPOT_RADIUS_UM,
    threshold: float | None = None,
    *,
    device: str = "auto",
    progress: ProgressCallback | None = None,
) -> Table:
    """Detect spots in every frame of ``stack`` (see :func:`tracker.detect.detect_spots`).

    Raises
    ------
    InputError
        If a frame holds NaN/infinite values, or the whole stack is constant.
    """
    xp = resolve_device(device)
    tables = []
    n_constant = 0
    for t in range(stack.n_frames):
        volume = xp.asarray(stack.frame(t))
        if float(volume.max()) == float(volume.min()):
            n_constant += 1
        try:
            tables.append(detect_spots(volume, stack.voxel_size, spot_radius_um, threshold, frame=t))
        except ValueError as error:
            raise InputError(str(error)) from None
        if progress is not None:
            progress("detect", t + 1, stack.n_frames)
    if stack.n_frames and n_constant == stack.n_frames:
        raise InputError("every frame of the stack is constant (a blank image): there is nothing to detect")
    return concat_tables(tables) if tables else empty_detections()


def track_stack(
    stack: Stack | np.ndarray,
    *,
    voxel_size_um: Sequence[float] | None = None,
    spot_radius_um: float | Sequence[float] = DEFAULT_SPOT_RADIUS_UM,
    threshold: float | None = None,
    max_displacement_um: float = DEFAULT_MAX_DISPLACEMENT_UM,
    no_link_factor: float = DEFAULT_NO_LINK_FACTOR,
    motion: str = "persistent",
    persistence: float | None = None,
    adaptive_radius: bool = True,
    smoothing: bool = True,
    max_gap: int = DEFAULT_MAX_GAP,
    gap_penalty: float = DEFAULT_GAP_PENALTY,
    solver: str = "auto",
    device: str = "auto",
    progress: ProgressCallback | None = None,
) -> TrackingResult:
    """Detect spots in a ``(T, Z, Y, X)`` stack and link them into tracks.

    Parameters
    ----------
    stack : Stack or (T, Z, Y, X) array
        From :func:`tracker.io.read_stack`, or an array in memory.
    voxel_size_um : (3,) floats, optional
        ``z, y, x`` voxel size in µm; overrides the stack's.
    spot_radius_um : float or (3,) floats
        Spot radius in µm (isotropic, or ``z, y, x``).
    threshold : float, optional
        Detection threshold in units of background noise (default 6).
    max_displacement_um : float
        Largest displacement of a particle between frames (µm).
    no_link_factor : float
        "No link" cost as a multiple of the largest candidate link cost.
    motion, persistence, adaptive_radius, smoothing, max_gap, gap_penalty
        Motion prediction, per-particle search radius, forward-backward
        smoothing and gap closing; see
        :func:`tracker.linking.link_detections`.
    solver : str
        Assignment solver name, or ``"auto"``.
    device : {"auto", "cpu", "gpu"}
        Where detection runs.
    progress : callable, optional
        ``progress(stage, done, total)`` with stage ``"detect"``, ``"link"``,
        ``"smooth"`` or ``"exchange"`` (the linker's smoothing pass and its point
        exchanges, when they run).

    Returns
    -------
    TrackingResult
    """
    stack = as_stack(stack, voxel_size_um)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    detections = detect_stack(stack, spot_radius_um, threshold, device=device, progress=progress)
    timings["detect"] = time.perf_counter() - start
    start = time.perf_counter()
    tracks, linking = link_detections(
        detections, max_displacement_um, no_link_factor=no_link_factor, motion=motion,
        persistence=persistence, adaptive_radius=adaptive_radius, smoothing=smoothing, max_gap=max_gap,
        gap_penalty=gap_penalty, solver=solver, progress=progress, return_summary=True,
    )
    timings["link"] = time.perf_counter() - start
    return TrackingResult(detections, tracks, stack.voxel_size, timings, linking)
