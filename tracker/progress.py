"""Progress reporting: the stages of a run and the callback that hears about them.

The core reports progress through a plain callable, ``progress(stage, done, total)``;
the command line draws click progress bars from it and the napari widget its
progress bar. The stage names and their labels live here, once.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum


class Stage(str, Enum):
    """A stage of :func:`tracker.pipeline.track_stack`, in the order they run.

    A ``str`` enum: ``Stage.LINK == "link"``, so callbacks may compare with plain strings.
    """

    ESTIMATE = "estimate"
    """The spot size and the stack's threshold, those not given, from a few frames: one step per frame sampled for
    each (the spot size's frames it did not need count as done when it ends)."""
    DETECT = "detect"
    """Spot detection, one step per frame."""
    LINK = "link"
    """Frame-to-frame assignment (the forward pass), one step per frame pair."""
    SMOOTH = "smooth"
    """Forward-backward smoothing (when the motion is persistent), one step per frame pair."""
    EXCHANGE = "exchange"
    """Point exchanges between nearby tracks, three batches of frames."""

    @property
    def label(self) -> str:
        """What a progress bar says during the stage."""
        return _LABELS[self]

    def __str__(self) -> str:
        return self.value


_LABELS = {
    Stage.ESTIMATE: "Estimating spots",
    Stage.DETECT: "Detecting spots",
    Stage.LINK: "Linking frames",
    Stage.SMOOTH: "Smoothing links",
    Stage.EXCHANGE: "Exchanging spots",
}

ProgressCallback = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: called after each step of a stage (``stage`` is a :class:`Stage`)."""
