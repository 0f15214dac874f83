"""The whole job: a stack in, detections and tracks out.

``track_stack`` runs detection frame by frame (on the GPU when
``device="auto"`` finds one; on the CPU, a few frames at once, one per core,
:mod:`tracker.parallel_frames`) and then linking. Only the frames being
detected are in memory during detection. Parameters are checked here, at the boundary, by the
parameter model (:mod:`tracker.params`): a bad value is a one-line
``ValueError`` naming the option before any work is done.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import resolve_device
from .detect import detect_spots, is_constant
from .errors import InputError
from .linking import LinkSummary, link_detections
from .parallel_frames import frames_in_flight, map_frames_in_order, read_ahead
from .params import DETECTION_DEFAULTS, LINKING_DEFAULTS, DetectionParams, LinkingParams
from .progress import ProgressCallback, Stage
from .quality_mixture import QualityMixture, estimate_threshold, threshold_frame_maxima, threshold_from_maxima
from .spot_scale import SpotScale, estimate_spot_radius, frames_to_sample
from .stack import Stack, as_stack
from .tables import Table, concat_tables, empty_detections
from .validation import InputWarning, check_detection_scale

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
    spot_scale: SpotScale | None = None
    """The spot size estimated from the stack (``str()``: "spot radius 0.61, 0.26, 0.26 µm (estimated from
    143 spots)"); None when ``spot_radius_um`` was given."""
    threshold_fit: QualityMixture | None = None
    """The stack's threshold from a few frames' maxima pooled (``str()``: "threshold: each frame's, at most
    4.35 (…)"); None when ``threshold`` was given."""

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


def estimate_stack_spot_scale(stack: Stack, device: str = "auto") -> SpotScale:
    """The spot size of ``stack``, from a few frames spread over it (:func:`tracker.spot_scale.estimate_spot_radius`)."""
    return _estimate_spot_scale(stack, resolve_device(device), device)[0]


class _EstimateSteps:
    """``progress(Stage.ESTIMATE, done, total)`` for the estimates of :func:`detect_stack`: a step per frame each
    estimate samples (``total`` in all), each estimate's steps ending at ``end``."""

    def __init__(self, progress: ProgressCallback | None, total: int):
        self.progress, self.total, self.done, self.end = progress, total, 0, total

    def begin(self, frames: int) -> None:
        """An estimate of ``frames`` sampled frames starts (its steps end ``frames`` later)."""
        self.end = min(self.done + frames, self.total)

    def step(self, to: int | None = None) -> None:
        """One frame more (or on to ``to``), within the current estimate's steps."""
        self.done = min(self.done + 1 if to is None else to, self.end)
        if self.progress is not None:
            self.progress(Stage.ESTIMATE, self.done, self.total)


def _sampled_frames(stack: Stack, xp: Any, sampled: Sequence[int], steps: _EstimateSteps):
    """The frames ``sampled`` as ``xp`` arrays, read one at a time, a step each."""
    for t in sampled:
        volume = xp.asarray(stack.frame(t))
        steps.step()
        yield volume


def _estimate_spot_scale(stack: Stack, xp: Any, device: str,
                         steps: _EstimateSteps | None = None) -> tuple[SpotScale, Any]:
    """The spot size on ``xp``'s device, and the array module detection goes on with (NumPy after a GPU
    out-of-memory error with ``device="auto"``, as in :func:`detect_stack`)."""
    sampled = frames_to_sample(stack.n_frames)
    steps = steps or _EstimateSteps(None, len(sampled))
    steps.begin(len(sampled))
    try:
        scale = estimate_spot_radius(_sampled_frames(stack, xp, sampled, steps), stack.voxel_size)
    except Exception as error:
        if xp is np or not _gpu_out_of_memory(error):
            raise
        xp = _cpu_after_gpu_out_of_memory(xp, device, stack, sampled[0])
        scale = estimate_spot_radius(_sampled_frames(stack, np, sampled, steps), stack.voxel_size)
    steps.step(to=steps.end)  # (the frames it did not need: it stops once it has enough spots)
    return scale, xp


def estimate_stack_threshold(stack: Stack, spot_radius_um: float | Sequence[float],
                             device: str = "auto") -> QualityMixture:
    """The stack's threshold for spots of ``spot_radius_um`` (µm), from the maxima of a few frames spread over it
    (:func:`tracker.quality_mixture.estimate_threshold`): each frame's automatic threshold is at most its
    ``threshold`` (None: each frame's own)."""
    return _estimate_threshold(stack, spot_radius_um, resolve_device(device), device)[0]


def _estimate_threshold(stack: Stack, spot_radius_um: float | Sequence[float], xp: Any, device: str,
                        workers: int | None = None,
                        steps: _EstimateSteps | None = None) -> tuple[QualityMixture, Any]:
    """The stack's threshold on ``xp``'s device, and the array module detection goes on with (as
    :func:`_estimate_spot_scale`). On the CPU the sampled frames' maxima are found ``workers`` frames at a time
    (as :func:`detect_stack` detects them): one after another they took half as long as detecting all 30 frames
    of a 32×256×256 stack on two cores."""
    sampled = frames_to_sample(stack.n_frames)
    steps = steps or _EstimateSteps(None, len(sampled))
    steps.begin(len(sampled))
    if xp is not np:
        try:
            return estimate_threshold(_sampled_frames(stack, xp, sampled, steps), stack.voxel_size,
                                      spot_radius_um), xp
        except Exception as error:
            if not _gpu_out_of_memory(error):
                raise
            xp = _cpu_after_gpu_out_of_memory(xp, device, stack, sampled[0])
    maxima: list = []

    def done(t: int, frame: Any) -> None:
        maxima.append(frame)
        steps.step()

    map_frames_in_order(lambda t: np.asarray(stack.frame(t)),
                        lambda volume, t: threshold_frame_maxima(volume, stack.voxel_size, spot_radius_um),
                        sampled, frames_in_flight(stack.shape[1:], len(sampled), workers), done)
    return threshold_from_maxima(maxima), xp


def detect_stack(
    stack: Stack,
    spot_radius_um: float | Sequence[float] | None = _D.spot_radius_um,
    threshold: float | None = _D.threshold,
    *,
    device: str = _D.device,
    detection: DetectionParams | None = None,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
) -> Table:
    """Detect spots in every frame of ``stack`` (see :func:`tracker.detect.detect_spots`).

    On the CPU, several frames at once, one per core (:mod:`tracker.parallel_frames`); the result is the same,
    bit for bit and in the same order, as one frame at a time. On the GPU, one frame at a time.

    Parameters
    ----------
    stack : Stack
    spot_radius_um, threshold, device
        See :class:`tracker.params.DetectionParams`: ``spot_radius_um=None`` estimates one spot size for the
        whole stack from a few frames (:func:`estimate_stack_spot_scale`); ``threshold=None`` chooses it per
        frame (:func:`tracker.threshold.automatic_threshold`), at most the stack's threshold from a few frames
        (:func:`estimate_stack_threshold`).
    detection : DetectionParams, optional
        All of them as one object, instead of the keywords.
    progress : callable, optional
        ``progress(Stage.ESTIMATE, done, total)`` while the spot size and the threshold are estimated (those
        not given), then ``progress(Stage.DETECT, done, total)`` after each frame, in frame order.
    workers : int, optional
        The most frames the CPU detects at once (1: one at a time); None: the cores this process may use
        (:func:`tracker._threads.available_cores`), fewer where the frames would not fit in memory
        (:func:`tracker.parallel_frames.frames_in_flight`).

    Raises
    ------
    ValueError
        A parameter out of its range (one line, naming it).
    InputError
        If a frame holds NaN/infinite values, or the whole stack is constant; if the spot radius in voxels
        exceeds the volume or a frame cannot be filtered in memory
        (:func:`tracker.validation.check_detection_scale`, before any work); if the GPU runs out of memory with
        ``device="gpu"`` (with ``"auto"``: an :class:`~tracker.validation.InputWarning`, and the CPU detects
        that frame and the rest).
    """
    keywords = {"spot_radius_um": spot_radius_um, "threshold": _D.threshold if threshold is None else threshold,
                "device": device}
    return _detect_stack(stack, _stage_params(DetectionParams, detection, _D, keywords), progress, workers).detections


@dataclass(frozen=True)
class _Detected:
    detections: Table
    spot_scale: SpotScale | None  # (None where the radius was given)
    threshold_fit: QualityMixture | None  # (None where the threshold was given)


def _detect_stack(stack: Stack, detection: DetectionParams, progress: ProgressCallback | None,
                  workers: int | None = None) -> _Detected:
    """:func:`detect_stack`, with the spot size and the stack's threshold it estimated."""
    arguments = detection.to_dict()
    device = arguments.pop("device")
    xp = resolve_device(device)
    spot_scale = mixture = None
    estimates = (arguments["spot_radius_um"] is None) + (arguments["threshold"] is None)
    steps = _EstimateSteps(progress, estimates * len(frames_to_sample(stack.n_frames)))
    if arguments["spot_radius_um"] is None:  # one scale for the whole stack, estimated from a few frames
        spot_scale, xp = _estimate_spot_scale(stack, xp, device, steps)
        arguments["spot_radius_um"] = spot_scale.radius_um
    check_detection_scale(stack.shape[1:], stack.voxel_size, arguments["spot_radius_um"])
    if arguments["threshold"] is None:  # each frame's at most the stack's, from a few frames' maxima pooled
        mixture, xp = _estimate_threshold(stack, arguments["spot_radius_um"], xp, device, workers, steps)
        arguments["stack_threshold"] = mixture.threshold
    tables = []
    n_constant = 0

    def done(t: int, result: tuple[Table, bool]) -> None:
        nonlocal n_constant
        tables.append(result[0])
        n_constant += result[1]
        if progress is not None:
            progress(Stage.DETECT, t + 1, stack.n_frames)

    t = 0
    if xp is not np:  # the GPU: one frame at a time, the next one read meanwhile
        with contextlib.closing(read_ahead(stack.frame, range(stack.n_frames))) as frames:
            for t, volume in frames:
                try:
                    result = _detect_volume(xp.asarray(volume), t, stack.voxel_size, arguments)
                except Exception as error:
                    if not _gpu_out_of_memory(error):
                        raise
                    xp = _cpu_after_gpu_out_of_memory(xp, device, stack, t)
                    break  # (this frame and the rest on the CPU)
                done(t, result)
            else:
                t = stack.n_frames
    if t < stack.n_frames:  # the CPU: several frames at once
        in_flight = frames_in_flight(stack.shape[1:], stack.n_frames - t, workers)
        map_frames_in_order(lambda t: np.asarray(stack.frame(t)),
                            lambda volume, t: _detect_volume(volume, t, stack.voxel_size, arguments),
                            range(t, stack.n_frames), in_flight, done)
    return _Detected(check_frames_detected(tables, n_constant), spot_scale, mixture)


def check_frames_detected(tables: Sequence[Table], n_constant: int) -> Table:
    """The detections of every frame as one table (``tables`` in frame order), after checking the stack as a whole:
    an :class:`InputError` if all its ``n_constant`` frames are constant, an :class:`InputWarning` if no frame
    has a spot (shared by :mod:`tracker.distributed`, which detects the frames elsewhere)."""
    if tables and n_constant == len(tables):
        raise InputError("every frame of the stack is constant (a blank image): there is nothing to detect")
    if tables and not any(len(table["frame"]) for table in tables):
        warnings.warn(f"no spots found in {len(tables)} frame(s): check --spot-radius and --voxel-size (both in "
                      f"µm) and --threshold", InputWarning, stacklevel=4)
    return concat_tables(tables) if tables else empty_detections()


def _detect_volume(volume: Any, t: int, voxel_size: Sequence[float],
                   arguments: Mapping[str, Any]) -> tuple[Table, bool]:
    """The detections of ``volume``, frame ``t`` (on its array's device), and whether it is constant."""
    try:
        return detect_spots(volume, voxel_size, frame=t, **arguments), is_constant(volume)
    except ValueError as error:
        raise InputError(str(error)) from None


def _gpu_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is CuPy's out-of-memory error (or CUDA's allocation failure), without importing CuPy."""
    kind = type(error)
    return kind.__module__.startswith(("cupy", "cupy_backends")) and (
        "OutOfMemory" in kind.__name__ or "cudaErrorMemoryAllocation" in str(error))


def _cpu_after_gpu_out_of_memory(xp: Any, device: str, stack: Stack, t: int) -> Any:
    """NumPy, to detect frame ``t`` and the rest on the CPU, with a warning (``device="auto"``); else a one-line
    :class:`InputError` (``device="gpu"``: the user asked for the GPU)."""
    shape = " × ".join(map(str, stack.shape[1:]))
    xp.get_default_memory_pool().free_all_blocks()
    if device != "auto":
        raise InputError(f"the GPU ran out of memory detecting frame {t} ({shape} voxels): use --device cpu (or "
                         f"auto), or crop or bin the stack")
    warnings.warn(f"the GPU ran out of memory detecting frame {t} ({shape} voxels): detecting it and the rest on "
                  f"the CPU (slower)", InputWarning, stacklevel=3)
    return np


def track_stack(
    stack: Stack | np.ndarray,
    *,
    voxel_size_um: Sequence[float] | None = None,
    spot_radius_um: float | Sequence[float] = _D.spot_radius_um,
    threshold: float | None = _D.threshold,
    device: str = _D.device,
    max_displacement_um: float | None = _L.max_displacement_um,
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
    spot_radius_um : float, (3,) floats or None
        Spot radius in µm (isotropic, or ``z, y, x``); None (the default): estimated from a few frames of the
        stack (:func:`estimate_stack_spot_scale`, reported in :attr:`TrackingResult.spot_scale`).
    threshold : float, optional
        Detection threshold in units of the filter response's noise; None (the default): chosen per frame
        (:func:`tracker.threshold.automatic_threshold`).
    device : {"auto", "cpu", "gpu"}
        Where detection runs.
    max_displacement_um : float or None
        Largest displacement of a particle between frames (µm); None (the default): estimated from the
        detections (:func:`tracker.linking.gate.estimate_gate`, reported in :attr:`TrackingResult.linking`'s
        ``gate``).
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
        Bad input data (see :func:`detect_stack`); a ``max_displacement_um`` whose candidate links cannot fit in
        memory (:func:`tracker.validation.check_gate`, in the linker, before linking).
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
    detected = _detect_stack(stack, detection, progress)
    timings["detect"] = time.perf_counter() - start
    start = time.perf_counter()
    tracks, summary = link_detections(detected.detections, progress=progress, return_summary=True,
                                      **linking.to_dict())
    timings["link"] = time.perf_counter() - start
    return TrackingResult(detected.detections, tracks, stack.voxel_size, timings, summary, detected.spot_scale,
                          detected.threshold_fit)
