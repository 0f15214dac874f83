"""Linking detections into tracks, one module per pass (see :mod:`tracker.linking.linker` for the order).

* :mod:`~tracker.linking.track_state`: what linking knows about every point (the per-point arrays);
* :mod:`~tracker.linking.motion` and :mod:`~tracker.linking.prediction`: the motion model, predictions and
  search radii;
* :mod:`~tracker.linking.candidate_search`: candidates within the search radii (k-d trees, GPU grid);
* :mod:`~tracker.linking.frame_pair`: the forward frame-to-frame assignment;
* :mod:`~tracker.linking.missing_detections`: how often detections go missing, the "no link" cost;
* :mod:`~tracker.linking.backward_relink`: the first frame pair linked again backwards;
* :mod:`~tracker.linking.smoothing`: forward-backward smoothing;
* :mod:`~tracker.linking.point_exchange`: nearby tracks exchanging single detections;
* :mod:`~tracker.linking.gap_closing`: track ends joined to later track starts;
* :mod:`~tracker.linking.confidence`: each link's confidence;
* :mod:`~tracker.linking.relink`: a local re-solve with a reviewer's pinned and forbidden links;
* :mod:`~tracker.linking.summary`: what the linker measured and decided (:class:`LinkSummary`).
"""

from .frame_pair import link_frame_pair
from .linker import link_detections
from .relink import relink, track_links
from .summary import LinkSummary
from .track_state import track_ids_from_predecessors

__all__ = ["LinkSummary", "link_detections", "link_frame_pair", "relink", "track_ids_from_predecessors", "track_links"]
