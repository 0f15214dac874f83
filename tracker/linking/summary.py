"""What the linker measured and decided, for reports: :class:`LinkSummary`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .gate import GateEstimate

Smoothing = Literal["off", "forward successor", "look-ahead"]


@dataclass(frozen=True)
class LinkSummary:
    """What :func:`tracker.linking.link_detections` measured and decided; ``str()`` gives a one-line report.

    Attributes
    ----------
    persistence : float or None
        Persistence of the motion, given or estimated; None where the linker did not predict.
    persistence_estimated : bool
        Whether it was estimated from the links (not given).
    smoothing : {"off", "forward successor", "look-ahead"}
        Whether the smoothing pass ran, and with which next step (:mod:`tracker.linking.smoothing`).
    exchanges : int
        Point exchanges made after smoothing (:mod:`tracker.linking.point_exchange`).
    missing_rate : float
        Fraction of the points away from the volume's edge without a link into the next frame, net of steps
        past the search radius (:class:`tracker.linking.missing_detections.MissingRate`).
    gap_closing : bool
        Whether gaps were closed (:mod:`tracker.linking.gap_closing`).
    radius_abandoned : bool
        Whether the adaptive search radii cut off true steps far more often than the motion model predicts
        (motion that changes, :func:`tracker.linking.missing_detections.radius_cuts_steps`), so that the
        frames were linked again within the whole gate.
    gate : GateEstimate or None
        The gate used (µm), and whether it was given, estimated from the detections or a fallback
        (:func:`tracker.linking.gate.estimate_gate`); ``gate.value_um`` reproduces the run when given back.
        The line reports it unless given.
    """

    persistence: float | None
    persistence_estimated: bool
    smoothing: Smoothing
    exchanges: int
    missing_rate: float
    gap_closing: bool
    radius_abandoned: bool = False
    gate: GateEstimate | None = None

    def __str__(self) -> str:
        motion = ("no prediction" if self.persistence is None else
                  f"persistence {self.persistence:.2f} ({'estimated' if self.persistence_estimated else 'given'})")
        smoothing = self.smoothing + (f" ({self.exchanges} point exchanges)" if self.exchanges else "")
        radius = ", search radius: the gate (motion changes)" if self.radius_abandoned else ""
        gate = f"{self.gate}, " if self.gate is not None and self.gate.source != "given" else ""
        return (f"linking: {gate}{motion}{radius}, smoothing {smoothing}, "
                f"{100 * self.missing_rate:.1f} % of points unlinked, "
                f"gap closing {'on' if self.gap_closing else 'off'}")
