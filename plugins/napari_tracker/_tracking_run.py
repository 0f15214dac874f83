"""One run of :func:`tracker.pipeline.track_stack` in a worker thread, with progress and cancel."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from qtpy.QtCore import QObject, Signal


class Cancelled(Exception):
    """The user cancelled the run (what :attr:`TrackingRun.done` carries then)."""

    def __str__(self) -> str:
        return "cancelled"


class TrackingRun(QObject):
    """Runs the tracker off the GUI thread; the viewer stays responsive.

    Signals
    -------
    progressed(stage, done, total)
        After each step of a stage (``stage`` is a :class:`tracker.progress.Stage` value).
    done(outcome)
        Once, when the run ends: a :class:`tracker.pipeline.TrackingResult`, or the exception that stopped
        it (bad input: an ``InputError``/``ValueError`` and the like; :class:`Cancelled`).
    """

    progressed = Signal(str, int, int)
    done = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._worker = None
        self._outcome: Any = None
        self._cancel = threading.Event()

    @property
    def running(self) -> bool:
        return self._worker is not None

    def start(self, stack_source: Callable[[], Any], params: dict[str, Any]) -> None:
        """Track ``stack_source()`` (called in the worker) with ``track_stack`` keyword arguments ``params``."""
        from napari.qt.threading import create_worker

        if self.running:
            raise RuntimeError("a run is already going")
        self._cancel.clear()
        self._outcome = None

        def progress(stage: str, done: int, total: int) -> None:
            if self._cancel.is_set():
                raise Cancelled  # unwinds track_stack at its next step
            self.progressed.emit(str(stage), done, total)

        def work():
            from tracker.pipeline import track_stack

            try:
                return (track_stack(stack_source(), progress=progress, **params),)
            except (Cancelled, ValueError, RuntimeError, OSError, MemoryError) as error:  # InputError is a ValueError
                return (error,)  # reported by the widget; superqt raises a returned exception, not a tuple

        self._worker = create_worker(work)
        self._worker.returned.connect(lambda outcome: self._keep(outcome[0]))
        self._worker.errored.connect(self._keep)  # a bug: reported like bad input, and by napari
        self._worker.finished.connect(self._on_finished)
        self._worker.start()

    def cancel(self) -> None:
        """Stop the run at its next progress step (a frame detected or a frame pair linked)."""
        self._cancel.set()

    def _keep(self, outcome: Any) -> None:
        self._outcome = outcome

    def _on_finished(self) -> None:
        self._worker = None
        self.done.emit(self._outcome)
