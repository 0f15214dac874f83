"""Detection mapped over the frames of a stack on a Dask cluster: one pure task per frame (on GPUs, per run of
:data:`GPU_FRAMES_PER_TASK` frames).

The spot size, when not given, is estimated once, on a worker, from the same few frames as in a single-process
run (:func:`tracker.pipeline.estimate_stack_spot_scale`), and every frame's task gets that one radius, so the
detections equal the single-process run's. Each task is keyed by the stack, the parameters and the frame
number: a worker that dies has its frames run again elsewhere by Dask (up to Dask's
``distributed.scheduler.allowed-failures``), and each frame's table is kept once, at its frame's place, so no
frame is lost or counted twice. The client receives tables only, as they complete, and reports progress
through the usual callback.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import resolve_device
from .._threads import thread_pool
from ..linking.gate import GateInputs
from ..parallel_frames import read_ahead
from ..params import DetectionParams
from ..pipeline import (
    _cpu_after_gpu_out_of_memory, _detect_volume, _gpu_out_of_memory, check_frames_detected,
    estimate_stack_spot_scale, estimate_stack_threshold,
)
from ..progress import ProgressCallback, Stage
from ..quality_mixture import QualityMixture
from ..spot_scale import SpotScale
from ..tables import Table
from ..validation import InputWarning, check_detection_scale, check_detections
from .frame_source import FrameSource

_on_cpu_after_out_of_memory: set[str] = set()  # devices this worker process has given up the GPU for

GPU_FRAMES_PER_TASK = 8
"""Frames a GPU worker's task detects, reading each next frame while detecting one
(:func:`tracker.parallel_frames.read_ahead`, as a single-process GPU run does): a GPU detects a 64 × 512 × 512
frame in less time than its compressed Zarr chunk takes to decode (17 against ~150 ms), and one frame per task
cannot overlap the two (its worker runs one task at a time: a second thread would share the worker's open TIFF
handle). Measured on one H100 (``benchmarks/results/distributed.md``, 40 frames of 64 × 512 × 512, Zarr): one
frame per task took 1.32 times the single-process run; runs of 8 took 0.95–0.99 times it, and one run of all 40
frames 1.04 times (medians of 3, spread ±8 %). Eight keep the work of a task lost with its worker small and
spread the runs over several GPUs. CPU workers take one frame per task (detection, not reading, bounds them,
and single frames spread evenly over many workers)."""

READ_NEXT_RUN = True
"""Whether a GPU worker, while it detects the last frame of a run, reads the first frame of its next run (kept in
the process for its next task: :func:`detect_run_task`), so that no frame's read waits, as in a single-process
run. The runs are cut into one chain of consecutive runs per worker (:func:`_chained_runs`) so that a worker's
next run is the one that follows; where Dask gives it another run after all, the frame read is dropped, having
cost a read that overlapped a detection. Measured on one H100 (40 frames of 64 × 512 × 512 in runs of 8): the
profiled run's detect tasks computed 4.66 s with it and 5.50 s without; the medians of 3 runs differ by less
than their spread (5.58 against 5.64 s of detection)."""

_read_lock = threading.Lock()
_next_read: list[tuple[Any, int, Any]] = []  # (source, frame, future of its read): at most one, see READ_NEXT_RUN


@dataclass
class FrameTables:
    """The detections of a stack's frames, kept on the Dask workers: one future per frame, and each frame's row
    count (all the client holds).

    Attributes
    ----------
    futures : list of distributed.Future
        In frame order; future ``t`` holds frame ``t``'s table (as :func:`tracker.pipeline.detect_stack` gives it).
    counts : (T,) int64 array
        Rows (detections) of each frame.
    gate_inputs : list of GateInputs, optional
        Each frame's (what the gate estimate needs of it besides its points: a few numbers), where known.
    """

    futures: list[Any]
    counts: np.ndarray
    gate_inputs: list[GateInputs] | None = None


def detect_on_cluster(client: Any, source: FrameSource, detection: DetectionParams,
                      progress: ProgressCallback | None = None,
                      frames_per_task: int = 1) -> tuple[Table, SpotScale | None, QualityMixture | None]:
    """Detect spots in every frame of ``source`` on the workers of ``client``, and gather the detections.

    Parameters
    ----------
    client : distributed.Client
    source : FrameSource
        The stack; the client reads its metadata only.
    detection : DetectionParams
        As for :func:`tracker.pipeline.detect_stack`.
    progress : callable, optional
        ``progress(Stage.ESTIMATE, done, total)`` as the spot size and the threshold (those not given) are
        estimated, then ``progress(Stage.DETECT, done, total)`` as frames complete (in any order).
    frames_per_task : int
        Consecutive frames detected by one task, each next one read during the detection of the one before
        (:data:`GPU_FRAMES_PER_TASK` for GPU workers; 1 for CPU workers).

    Returns
    -------
    Table
        The detections, in frame order: equal to :func:`tracker.pipeline.detect_stack`'s.
    SpotScale or None
        The spot size estimated (None where ``spot_radius_um`` was given).
    QualityMixture or None
        The fit that set the stack's threshold (None where ``threshold`` was given).

    Raises
    ------
    InputError, ValueError
        As :func:`tracker.pipeline.detect_stack` raises them on a worker (the remaining frames are cancelled).
    RuntimeError
        One line naming the frame whose task failed otherwise, or whose workers kept dying (out of memory).
    """
    tables, spot_scale, threshold_fit, n_constant = _detect_frames(client, source, detection, progress,
                                                                   frames_per_task, gather=True)
    return check_frames_detected(tables, n_constant), spot_scale, threshold_fit


def detect_frames_on_cluster(client: Any, source: FrameSource, detection: DetectionParams,
                             progress: ProgressCallback | None = None,
                             frames_per_task: int = 1) -> tuple[FrameTables, SpotScale | None, QualityMixture | None]:
    """As :func:`detect_on_cluster`, but the detections stay on the workers, one future per frame (the client
    receives each frame's row count and warnings only): for linking in time blocks on the workers
    (:func:`tracker.distributed.time_blocks.stream_time_blocks`), so that the client never holds them all.

    Returns
    -------
    FrameTables
        The frames' tables (futures) and row counts.
    SpotScale or None
        The spot size estimated (None where ``spot_radius_um`` was given).
    QualityMixture or None
        The fit that set the stack's threshold (None where ``threshold`` was given).

    Raises
    ------
    InputError, ValueError, RuntimeError
        As :func:`detect_on_cluster`.
    """
    frames, spot_scale, threshold_fit, n_constant = _detect_frames(client, source, detection, progress,
                                                                   frames_per_task, gather=False)
    # The whole-stack checks look at each frame's row count only: one row stands for a frame with spots.
    check_frames_detected([{"frame": np.zeros(min(count, 1))} for count in frames.counts], n_constant)
    return frames, spot_scale, threshold_fit


def _detect_frames(client: Any, source: FrameSource, detection: DetectionParams, progress: ProgressCallback | None,
                   frames_per_task: int, gather: bool) -> tuple[Any, SpotScale | None, QualityMixture | None, int]:
    """The frames' tables (gathered: a list) or :class:`FrameTables` (not gathered), the spot scale, the
    threshold's fit, and the number of constant frames."""
    from distributed import as_completed
    from dask.base import tokenize

    if frames_per_task < 1:
        raise ValueError(f"frames_per_task must be at least 1, got {frames_per_task}")
    stack = source.open()
    arguments = detection.to_dict()
    spot_scale = mixture = None
    estimates = (arguments["spot_radius_um"] is None) + (arguments["threshold"] is None)
    estimated = 0

    def estimate(task: Any, what: str, key: str, *args: Any) -> Any:
        """``task(*args)`` on a worker, its warnings here; one step of Stage.ESTIMATE."""
        nonlocal estimated
        result, messages = _result(client.submit(task, *args, key=key, pure=True), what)
        _warn(messages)
        estimated += 1
        if progress is not None:
            progress(Stage.ESTIMATE, estimated, estimates)
        return result

    if arguments["spot_radius_um"] is None:
        device = arguments["device"]
        spot_scale = estimate(estimate_task, "estimating the spot size",
                              f"tracker-spot-scale-{tokenize(source, device)}", source, device)
        arguments["spot_radius_um"] = spot_scale.radius_um
    check_detection_scale(stack.shape[1:], stack.voxel_size, arguments["spot_radius_um"])
    if arguments["threshold"] is None:  # the stack's threshold, on a worker (as tracker.pipeline.detect_stack)
        radius, device = arguments["spot_radius_um"], arguments["device"]
        mixture = estimate(threshold_task, "estimating the threshold",
                           f"tracker-stack-threshold-{tokenize(source, radius, device)}", source, radius, device)
        arguments["stack_threshold"] = mixture.threshold
    token = tokenize(source, sorted(arguments.items()))
    runs = [range(start, min(start + frames_per_task, stack.n_frames))
            for start in range(0, stack.n_frames, frames_per_task)]
    read_next = READ_NEXT_RUN and frames_per_task > 1
    threads = sum(client.nthreads().values())  # (every worker's: scheduler_info may list only a few)
    follows = _chained_runs(len(runs), threads) if read_next else [None] * len(runs)
    tasks: list[Any] = []
    for i, (run, before) in enumerate(zip(runs, follows)):
        then = i + 1 < len(runs) and follows[i + 1] == i  # (this worker's next run starts at run.stop)
        tasks.append(client.submit(detect_run_task, source, run.start, run.stop, arguments, read_next and then,
                                   None if before is None else tasks[before],
                                   key=f"tracker-detect-{token}-{run.start}-{run.stop}", pure=True))
    # What the client receives of each run: the whole results, or each frame's row count, constancy and warnings.
    received = tasks if gather else [client.submit(_run_summary, task, key=f"tracker-detect-summary-{token}-{i}",
                                                   pure=True) for i, task in enumerate(tasks)]
    pending = dict(zip(received, runs))
    tables: list[Table | None] = [None] * stack.n_frames
    counts = np.zeros(stack.n_frames, dtype=np.int64)
    gate_inputs: list[GateInputs | None] = [None] * stack.n_frames
    n_constant = 0
    n_done = 0
    seen: set[str] = set()
    try:
        for future in as_completed(list(pending)):
            run = pending.pop(future)
            what = f"frame {run.start}" if len(run) == 1 else f"frames {run.start}-{run.stop - 1}"
            for t, (first, constant, messages, *inputs) in zip(run, _result(future, what)):
                if gather:
                    tables[t] = first
                else:
                    counts[t], gate_inputs[t] = first, inputs[0]
                n_constant += constant
                _warn([m for m in messages if m not in seen])
                seen.update(messages)
            n_done += len(run)
            if progress is not None:
                progress(Stage.DETECT, n_done, stack.n_frames)
    finally:
        if pending:  # (an error: the frames still queued are not needed)
            client.cancel(list(pending) + ([] if gather else tasks))
    if gather:
        return tables, spot_scale, mixture, n_constant
    tables_of = [client.submit(_table_of, tasks[t // frames_per_task], t % frames_per_task,
                               key=f"tracker-detections-{token}-{t}", pure=True) for t in range(stack.n_frames)]
    return FrameTables(tables_of, counts, gate_inputs), spot_scale, mixture, n_constant


def detect_task(source: FrameSource, t: int, arguments: Mapping[str, Any]) -> tuple[Table, bool, list[str]]:
    """On a worker: frame ``t``'s detections, whether it is constant, and the warnings it raised (as text)."""
    return detect_run_task(source, t, t + 1, arguments)[0]


def detect_run_task(source: FrameSource, start: int, stop: int, arguments: Mapping[str, Any],
                    read_next: bool = False, after: Any = None) -> list[tuple[Table, bool, list[str]]]:
    """On a worker: :func:`detect_task`'s result for each frame ``start`` ≤ t < ``stop``, each next frame read
    while one is detected (:func:`tracker.parallel_frames.read_ahead`).

    With ``read_next``, frame ``stop`` (the next run's first) is read during the last frame's detection and kept
    for this process's next task (:data:`READ_NEXT_RUN`); a task starting at ``start`` takes the frame read so by
    the task before it, if that is the frame. ``after`` (the previous run's results, unused) only makes Dask run
    this task after that run, on its worker (:func:`_chained_runs`). The GPU, when ``device="auto"`` ran out of memory on this worker,
    is not tried again here (as in :func:`tracker.pipeline.detect_stack`, which goes on on the CPU).
    """
    arguments = dict(arguments)
    device = arguments.pop("device")
    stack = source.open()
    early = _take_read(source, start)  # (the frame [start] read by the task before, or None)

    def read(t: int) -> Any:
        return early.pop() if early and t == start else stack.frame(t)

    results = []
    with contextlib.closing(read_ahead(read, range(start, stop))) as frames:
        for t, volume in frames:
            if read_next and t == stop - 1 and stop < stack.n_frames:  # (read_ahead's reader is idle now)
                with _read_lock:
                    _next_read.append((source, stop, thread_pool("read", 1).submit(stack.frame, stop)))
            xp = np if device in _on_cpu_after_out_of_memory else resolve_device(device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", InputWarning)
                try:
                    table, constant = _detect_volume(xp.asarray(volume), t, stack.voxel_size, arguments)
                except Exception as error:
                    if xp is np or not _gpu_out_of_memory(error):
                        raise
                    _cpu_after_gpu_out_of_memory(xp, device, stack, t)
                    _on_cpu_after_out_of_memory.add(device)
                    table, constant = _detect_volume(np.asarray(volume), t, stack.voxel_size, arguments)
            results.append((table, constant, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]))
    return results


def _chained_runs(n_runs: int, n_workers: int) -> list[int | None]:
    """For each run, the run it follows on one worker (None: the first of its chain): the runs cut into one
    chain of consecutive runs per worker (``n_workers``: the cluster's threads; at least one chain), so that each
    worker's next run starts at the frame it read ahead (:data:`READ_NEXT_RUN`).

    Dask runs a task where its inputs are, so a chain stays on one worker, unless Dask moves a queued run to an
    idle worker (work stealing: the run's first frame is then read anew); a run lost with its worker is run again
    with the chain's runs before it that were lost too, as any task is. Runs of one chain run in order: its
    frames are detected in time order, as in a single-process run. A worker that joins once the runs are
    submitted gets runs only by work stealing.
    """
    chains = max(1, min(n_runs, n_workers))
    firsts = {n_runs * c // chains for c in range(chains)}
    return [None if i in firsts else i - 1 for i in range(n_runs)]


def _take_read(source: FrameSource, t: int) -> list[Any]:
    """``[frame t of source]`` when the task before this one in the process read it ahead (:data:`READ_NEXT_RUN`),
    else ``[]``; a read of another frame is waited for (no two reads of one file at once) and dropped."""
    with _read_lock:
        pending = _next_read.copy()
        _next_read.clear()
    taken = []
    for read_source, read_t, future in pending:
        if read_source == source and read_t == t:
            taken.append(future.result())  # (its error, if any, is this frame's)
        else:
            with contextlib.suppress(Exception):  # (a frame not needed here: its error is another task's)
                future.result()
    return taken


def estimate_task(source: FrameSource, device: str) -> tuple[SpotScale, list[str]]:
    """On a worker: the stack's spot size (:func:`tracker.pipeline.estimate_stack_spot_scale`), and its warnings."""
    _take_read(source, -1)  # (a frame still being read ahead, if any: no two reads of one file at once)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        scale = estimate_stack_spot_scale(source.open(), device)
    return scale, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def threshold_task(source: FrameSource, spot_radius_um, device: str) -> tuple[QualityMixture, list[str]]:
    """On a worker: the stack's threshold (:func:`tracker.pipeline.estimate_stack_threshold`), and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        mixture = estimate_stack_threshold(source.open(), spot_radius_um, device)
    return mixture, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _run_summary(results: list[tuple[Table, bool, list[str]]]) -> list[tuple[int, bool, list[str], GateInputs]]:
    """On a worker: for each frame of a run, the row count of its checked table (:func:`_table_of`), its
    constancy and warnings, and what the gate estimate needs of it (what the client needs of it)."""
    summary = []
    for table, constant, messages in results:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", InputWarning)
            checked = check_detections(table)
        summary.append((len(checked["frame"]), constant,
                        messages + [str(w.message) for w in caught if issubclass(w.category, UserWarning)],
                        GateInputs.of(checked)))
    return summary


def _table_of(results: list[tuple[Table, bool, list[str]]], i: int) -> Table:
    """On a worker: frame ``i`` of a run, its table checked as the linker checks the whole table (duplicated
    rows, which lie in one frame, dropped: the rows are then numbered as in the whole checked table)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)  # (the client has it from _run_summary)
        return check_detections(results[i][0])


def _result(future: Any, what: str) -> Any:
    """The future's result; its error as raised on the worker when it is the user's (a bad input or value), else
    one line naming ``what`` failed and why."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        raise RuntimeError(f"{what}: the workers running it died repeatedly (out of memory? give the workers more "
                           f"with --worker-memory, or bin the stack)") from None
    except (ValueError, RuntimeError, OSError):  # (InputError is a ValueError)
        raise
    except Exception as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise RuntimeError(f"{what} failed on a worker: {type(error).__name__}{': ' + text if text else ''}") from None


def _warn(messages: list[str]) -> None:
    for message in messages:
        warnings.warn(message, InputWarning, stacklevel=3)
