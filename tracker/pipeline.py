"""The whole job: a stack in, detections and tracks out.

``track_stack`` runs detection frame by frame (on the GPU when
``device="auto"`` finds one) and then linking. Only the current frame is in
memory during detection. Parameters are checked here, at the boundary, by the
parameter model (:mod:`tracker.params`): a bad value is a one-line
``ValueError`` naming the option before any work is done.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import resolve_device
from .detect import detect_spots
from .errors import InputError
from .linking import LinkSummary, link_detections
from .params import DETECTION_DEFAULTS, LINKING_DEFAULTS, DetectionParams, LinkingParams
from .progress import ProgressCallback, Stage
from .stack import Stack, as_stack
from .tables import Table, concat_tables, empty_detections

DEFAULT_SPOT_RADIUS_UM = DETECTION_DEFAULTS.spot_radius_um
"""Kept for the napari widget until it reads :data:`tracker.params.DETECTION_DEFAULTS`."""
DEFAULT_MAX_DISPLACEMENT_UM = LINKING_DEFAULTS.max_displacement_um
"""Kept for the napari widget until it reads :data:`tracker.params.LINKING_DEFAULTS`."""

_D, _L = DETECTION_DEFAULTS, LINKING_DEFAULTS


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


def _stage_params(kind: type, given: Any, defaults: Any, keywords: Mapping[str, Any]) -> Any:
    """The validated parameters of one stage: ``given`` (an object of ``kind``) or the keywords.

    Keywords differing from their defaults beside an object are refused: which should win is not clear.
    """
    if given is None:
        return kind(**keywords)
    if not isinstance(given, kind):
        raise TypeError(f"expected {kind.__name__} or None, got {type(given).__name__}")
    changed = [name for name, value in keywords.items() if not _same(value, getattr(defaults, name))]
    if changed:
        raise ValueError(f"give the {kind._section} parameters either as a {kind.__name__} or as keywords, "
                         f"not both ({', '.join(changed)})")
    return given


def _same(value: Any, default: Any) -> bool:
    try:
        return bool(value == default)
    except ValueError:  # an array of several values: not the default's scalar or tuple
        return False


def detect_stack(
    stack: Stack,
    spot_radius_um: float | Sequence[float] = _D.spot_radius_um,
    threshold: float | None = _D.threshold,
    *,
    device: str = _D.device,
    detection: DetectionParams | None = None,
    progress: ProgressCallback | None = None,
) -> Table:
    """Detect spots in every frame of ``stack`` (see :func:`tracker.detect.detect_spots`).

    Parameters
    ----------
    stack : Stack
    spot_radius_um, threshold, device
        See :class:`tracker.params.DetectionParams` (``threshold=None``: the default).
    detection : DetectionParams, optional
        All of them as one object, instead of the keywords.
    progress : callable, optional
        ``progress(Stage.DETECT, done, total)`` after each frame.

    Raises
    ------
    ValueError
        A parameter out of its range (one line, naming it).
    InputError
        If a frame holds NaN/infinite values, or the whole stack is constant.
    """
    keywords = {"spot_radius_um": spot_radius_um, "threshold": _D.threshold if threshold is None else threshold,
                "device": device}
    arguments = _stage_params(DetectionParams, detection, _D, keywords).to_dict()
    xp = resolve_device(arguments.pop("device"))
    tables = []
    n_constant = 0
    for t in range(stack.n_frames):
        volume = xp.asarray(stack.frame(t))
        if float(volume.max()) == float(volume.min()):
            n_constant += 1
        try:
            tables.append(detect_spots(volume, stack.voxel_size, frame=t, **arguments))
        except ValueError as error:
            raise InputError(str(error)) from None
        if progress is not None:
            progress(Stage.DETECT, t + 1, stack.n_frames)
    if stack.n_frames and n_constant == stack.n_frames:
        raise InputError("every frame of the stack is constant (a blank image): there is nothing to detect")
    return concat_tables(tables) if tables else empty_detections()


def track_stack(
    stack: Stack | np.ndarray,
    *,
    voxel_size_um: Sequence[float] | None = None,
    spot_radius_um: float | Sequence[float] = _D.spot_radius_um,
    threshold: float | None = _D.threshold,
    device: str = _D.device,
    max_displacement_um: float = _L.max_displacement_um,
    no_link_factor: float = _L.no_link_factor,
    motion: str = _L.motion,
    persistence: float | None = _L.persistence,
    adaptive_radius: bool = _L.adaptive_radius,
    smoothing: bool = _L.smoothing,
    max_gap: int = _L.max_gap,
    gap_penalty: float = _L.gap_penalty,
    solver: str = _L.solver,
    detection: DetectionParams | None = None,
    linking: LinkingParams | None = None,
    progress: ProgressCallback | None = None,
) -> TrackingResult:
    """Detect spots in a ``(T, Z, Y, X)`` stack and link them into tracks.

    The parameters of each stage are given either as keywords or as one object
    (``detection=DetectionParams(...)``, ``linking=LinkingParams(...)``, e.g. from
    :func:`tracker.params.read_toml`), not both. Their meaning, unit, range and
    default are those of :class:`tracker.params.DetectionParams` and
    :class:`tracker.params.LinkingParams`.

    Parameters
    ----------
    stack : Stack or (T, Z, Y, X) array
        From :func:`tracker.io.read_stack`, or an array in memory.
    voxel_size_um : (3,) floats, optional
        ``z, y, x`` voxel size in µm; overrides the stack's.
    spot_radius_um : float or (3,) floats
        Spot radius in µm (isotropic, or ``z, y, x``).
    threshold : float, optional
        Detection threshold in units of background noise (None: the default).
    device : {"auto", "cpu", "gpu"}
        Where detection runs.
    max_displacement_um : float
        Largest displacement of a particle between frames (µm).
    no_link_factor, motion, persistence, adaptive_radius, smoothing, max_gap, gap_penalty, solver
        "No link" cost, motion prediction, per-particle search radius,
        forward-backward smoothing, gap closing and the assignment solver; see
        :func:`tracker.linking.link_detections`.
    detection : DetectionParams, optional
        The detection keywords as one object.
    linking : LinkingParams, optional
        The linking keywords as one object.
    progress : callable, optional
        ``progress(stage, done, total)`` with a :class:`tracker.progress.Stage`
        (detection, then the linker's stages).

    Returns
    -------
    TrackingResult

    Raises
    ------
    ValueError
        A parameter out of its range (one line, naming it), before any work.
    InputError
        Bad input data (see :func:`detect_stack`).
    """
    stack = as_stack(stack, voxel_size_um)
    keywords = {"spot_radius_um": spot_radius_um, "threshold": _D.threshold if threshold is None else threshold,
                "device": device}
    detection = _stage_params(DetectionParams, detection, _D, keywords)
    keywords = {"max_displacement_um": max_displacement_um, "no_link_factor": no_link_factor, "motion": motion,
                "persistence": persistence, "adaptive_radius": adaptive_radius, "smoothing": smoothing,
                "max_gap": max_gap, "gap_penalty": gap_penalty, "solver": solver}
    linking = _stage_params(LinkingParams, linking, _L, keywords)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    detections = detect_stack(stack, detection=detection, progress=progress)
    timings["detect"] = time.perf_counter() - start
    start = time.perf_counter()
    tracks, summary = link_detections(detections, progress=progress, return_summary=True, **linking.to_dict())
    timings["link"] = time.perf_counter() - start
    return TrackingResult(detections, tracks, stack.voxel_size, timings, summary)
