"""Detection mapped over the frames of a stack on a Dask cluster: one pure task per frame.

The spot size, when not given, is estimated once, on a worker, from the same few frames as in a single-process
run (:func:`tracker.pipeline.estimate_stack_spot_scale`), and every frame's task gets that one radius, so the
detections equal the single-process run's. Each task is keyed by the stack, the parameters and the frame
number: a worker that dies has its frames run again elsewhere by Dask (up to Dask's
``distributed.scheduler.allowed-failures``), and each frame's table is kept once, at its frame's place, so no
frame is lost or counted twice. The client receives tables only, as they complete, and reports progress
through the usual callback.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..backend import resolve_device
from ..params import DetectionParams
from ..pipeline import (
    _cpu_after_gpu_out_of_memory, _detect_frame, _gpu_out_of_memory, check_frames_detected,
    estimate_stack_spot_scale,
)
from ..progress import ProgressCallback, Stage
from ..spot_scale import SpotScale
from ..tables import Table
from ..validation import InputWarning, check_detection_scale
from .frame_source import FrameSource

_on_cpu_after_out_of_memory: set[str] = set()  # devices this worker process has given up the GPU for


def detect_on_cluster(client: Any, source: FrameSource, detection: DetectionParams,
                      progress: ProgressCallback | None = None) -> tuple[Table, SpotScale | None]:
    """Detect spots in every frame of ``source`` on the workers of ``client``.

    Parameters
    ----------
    client : distributed.Client
    source : FrameSource
        The stack; the client reads its metadata only.
    detection : DetectionParams
        As for :func:`tracker.pipeline.detect_stack`.
    progress : callable, optional
        ``progress(Stage.DETECT, done, total)`` as frames complete (in any order).

    Returns
    -------
    Table
        The detections, in frame order: equal to :func:`tracker.pipeline.detect_stack`'s.
    SpotScale or None
        The spot size estimated (None where ``spot_radius_um`` was given).

    Raises
    ------
    InputError, ValueError
        As :func:`tracker.pipeline.detect_stack` raises them on a worker (the remaining frames are cancelled).
    RuntimeError
        One line naming the frame whose task failed otherwise, or whose workers kept dying (out of memory).
    """
    from distributed import as_completed
    from dask.base import tokenize

    stack = source.open()
    arguments = detection.to_dict()
    spot_scale = None
    if arguments["spot_radius_um"] is None:
        device = arguments["device"]
        future = client.submit(estimate_task, source, device, key=f"tracker-spot-scale-{tokenize(source, device)}",
                               pure=True)
        spot_scale, messages = _result(future, "estimating the spot size")
        _warn(messages)
        arguments["spot_radius_um"] = spot_scale.radius_um
    check_detection_scale(stack.shape[1:], stack.voxel_size, arguments["spot_radius_um"])
    token = tokenize(source, sorted(arguments.items()))
    futures = {client.submit(detect_task, source, t, arguments, key=f"tracker-detect-{token}-{t}", pure=True): t
               for t in range(stack.n_frames)}
    tables: list[Table | None] = [None] * stack.n_frames
    n_constant = 0
    seen: set[str] = set()
    try:
        for done, future in enumerate(as_completed(list(futures)), 1):
            t = futures.pop(future)
            table, constant, messages = _result(future, f"frame {t}")
            tables[t] = table
            n_constant += constant
            _warn([m for m in messages if m not in seen])
            seen.update(messages)
            if progress is not None:
                progress(Stage.DETECT, done, stack.n_frames)
    finally:
        if futures:  # (an error: the frames still queued are not needed)
            client.cancel(list(futures))
    return check_frames_detected(tables, n_constant), spot_scale  # type: ignore[arg-type]


def detect_task(source: FrameSource, t: int, arguments: Mapping[str, Any]) -> tuple[Table, bool, list[str]]:
    """On a worker: frame ``t``'s detections, whether it is constant, and the warnings it raised (as text).

    The GPU, when ``device="auto"`` ran out of memory on this worker, is not tried again here (as in
    :func:`tracker.pipeline.detect_stack`, which goes on on the CPU).
    """
    arguments = dict(arguments)
    device = arguments.pop("device")
    stack = source.open()
    xp = np if device in _on_cpu_after_out_of_memory else resolve_device(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        try:
            table, constant = _detect_frame(stack, t, xp, arguments)
        except Exception as error:
            if xp is np or not _gpu_out_of_memory(error):
                raise
            xp = _cpu_after_gpu_out_of_memory(xp, device, stack, t)
            _on_cpu_after_out_of_memory.add(device)
            table, constant = _detect_frame(stack, t, xp, arguments)
    return table, constant, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def estimate_task(source: FrameSource, device: str) -> tuple[SpotScale, list[str]]:
    """On a worker: the stack's spot size (:func:`tracker.pipeline.estimate_stack_spot_scale`), and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        scale = estimate_stack_spot_scale(source.open(), device)
    return scale, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


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
