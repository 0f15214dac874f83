"""Frames detected side by side on the CPU's cores, results in frame order.

Detection on the CPU is SciPy's ``ndimage`` filters and NumPy, one core each; a stack's frames are independent,
so the CPU detects several at once on threads (:data:`FRAME_THREADS_SCALE` says why threads, not processes). The
frames are read one at a time by the calling thread (a TIFF file handle is not safe to share between threads)
and their results taken in frame order, so the table, the progress reports and the error raised are those of a
serial run. At most :func:`frames_in_flight` frames are held at once, so memory grows with the cores only as far
as :func:`tracker.validation.memory_budget` allows. On the GPU, frames are detected one at a time while the next
one is read (:func:`read_ahead`), by one thread at a time.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, wait
from typing import Any, TypeVar

from ._threads import available_cores, thread_pool
from .validation import DETECTION_BYTES_PER_VOXEL, memory_budget

R = TypeVar("R")

FRAME_THREADS_SCALE = True
"""Whether the CPU detects frames on threads (True) rather than processes: SciPy's ``ndimage`` filters release the
GIL while they run. Measured on 2 shared cores (2026-11-24, medians of 5): 2 frames of 32 × 256 × 256 voxels
(uint16, rendered by :func:`tracker.simulate.render_stack`), ``gaussian_filter`` 93 ms serial vs 49 ms on 2
threads (1.91×), ``maximum_filter`` 132 vs 68 ms (1.96×), the whole :func:`tracker.detect.detect_spots` 797 vs
402 ms (1.98×) — and 460 ms (1.73×) on 2 processes, which also pay for sending frames and tables between them.
Threads share the frames' memory and need nothing to be picklable, so threads it is."""


def frames_in_flight(frame_shape: Iterable[int], n_frames: int, workers: int | None = None, *,
                     budget: int | None = None) -> int:
    """How many frames the CPU detects at once: ``workers`` (None: :func:`tracker._threads.available_cores`), at
    most ``n_frames``, and at most as many frames as :func:`tracker.validation.memory_budget` (or ``budget``, bytes)
    has room for at :data:`tracker.validation.DETECTION_BYTES_PER_VOXEL` each; at least 1.

    Parameters
    ----------
    frame_shape : (Z, Y, X) ints
        Voxels of one frame.
    n_frames : int
        Frames to detect.
    workers : int, optional
        The most frames at once (1: serially).
    budget : int, optional
        Bytes the frames in flight may use together.
    """
    wanted = available_cores() if workers is None else int(workers)
    if wanted < 1:
        raise ValueError(f"workers must be at least 1 (None: the available cores), got {workers}")
    if wanted == 1 or n_frames <= 1:
        return 1
    per_frame = math.prod(int(n) for n in frame_shape) * DETECTION_BYTES_PER_VOXEL
    budget = memory_budget() if budget is None else budget
    fitting = budget // per_frame if per_frame else wanted
    return max(1, min(wanted, n_frames, fitting))


def map_in_order(function: Callable[[Any], R], items: Iterable[Any], workers: int | None = None) -> list[R]:
    """``[function(item) for item in items]`` on the process's ``"detect"`` thread pool, as many at once as it has
    threads: for a few independent pieces of NumPy and SciPy work that release the GIL (the spot-size estimate's
    scales and frames). Serially on the calling thread with ``workers`` 1 (None: the available cores), one item,
    or when called from that pool itself (its threads would wait on each other). Results in the items' order;
    the first item's error (in order) is raised."""
    items = list(items)
    wanted = available_cores() if workers is None else int(workers)
    if wanted <= 1 or len(items) <= 1 or threading.current_thread().name.startswith("tracker-detect"):
        return [function(item) for item in items]
    pool = thread_pool("detect", max(wanted, available_cores()))
    futures = [pool.submit(function, item) for item in items]
    try:
        return [future.result() for future in futures]
    finally:
        for future in futures:  # (an error: the items not started are not needed)
            future.cancel()


def map_frames_in_order(read: Callable[[int], Any], detect: Callable[[Any, int], R], frames: Iterable[int],
                        workers: int, done: Callable[[int, R], None]) -> None:
    """``done(t, detect(read(t), t))`` for every ``t`` of ``frames``, in their order, ``workers`` frames at a time.

    ``read`` runs on the calling thread, ``detect`` on the process's ``"detect"`` thread pool (``workers`` 1: all on
    the calling thread, as a serial loop). The first frame (in order) whose ``detect`` raises has its error raised
    here, after ``done`` for every frame before it, as a serial loop would; the frames queued behind it are
    cancelled.
    """
    if workers <= 1:
        for t in frames:
            done(t, detect(read(t), t))
        return
    pool = thread_pool("detect", max(workers, available_cores()))
    pending: deque[tuple[int, Future]] = deque()
    try:
        for t in frames:
            if len(pending) == workers:  # (the window is full: the oldest frame first, so memory stays bounded)
                _finish(pending, done)
            try:
                volume = read(t)
            except BaseException:  # (as a serial loop: the frames before it are done first)
                while pending:
                    _finish(pending, done)
                raise
            pending.append((t, pool.submit(detect, volume, t)))
        while pending:
            _finish(pending, done)
    finally:
        for _, future in pending:  # (an error or an interrupt: the frames not started are not needed)
            future.cancel()


def _finish(pending: deque[tuple[int, Future]], done: Callable[[int, Any], None]) -> None:
    t, future = pending.popleft()
    done(t, future.result())


def read_ahead(read: Callable[[int], R], frames: Sequence[int]) -> Iterator[tuple[int, R]]:
    """``(t, read(t))`` for every ``t`` of ``frames``, in order, frame ``t + 1`` read on a thread while the caller
    works on ``t``.

    For the GPU, which detects a frame in less time than a compressed Zarr chunk takes to decode (17 against
    ~150 ms for 64 × 512 × 512, ``benchmarks/results/distributed.md``): the two overlap. At most two frames are
    held. Reads run one at a time, in order, and none is left running when the iteration ends or is closed
    (a TIFF file handle is not safe to share: the caller may read the next frames itself). A frame whose read
    raises raises when it is reached, after the frames before it, as a serial loop would.
    """
    if not frames:
        return
    pool = thread_pool("read", 1)
    upcoming: Future | None = pool.submit(read, frames[0])
    try:
        for i, t in enumerate(frames):
            volume = upcoming.result()
            upcoming = pool.submit(read, frames[i + 1]) if i + 1 < len(frames) else None
            yield t, volume
    finally:
        if upcoming is not None and not upcoming.cancel():
            wait([upcoming])  # (a read already started: done before the caller reads again)
