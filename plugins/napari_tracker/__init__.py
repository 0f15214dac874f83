"""napari plugin for tracker3d: open stacks and track tables, track, review and correct tracks, export.

The npe2 manifest is ``napari.yaml`` (plugin name ``tracker3d``, the package's: npe2 requires them equal).
Contributions: ``_reader``, ``_writer``, ``_sample_data`` and ``_widget``.

The dock widget (``_widget.TrackerWidget``) lays out ``_track_panel.TrackPanel`` (stack, voxel size,
parameter forms generated from :mod:`tracker.params` by ``_parameter_form``, a ``_tracking_run`` worker with
cancel) over ``_review_panel.ReviewPanel`` (layer choice, colours and legend, the ``_track_table`` model,
edit buttons), which drives ``_review.TrackReview`` (the layer, colours, selection, jumps, undo on the viewer;
helpers in ``_view``, ``_selection_overlay``, ``_shortcuts``) and ``_corrections.TrackCorrections`` (delete, split,
join, reassign). Below it, ``_queue_panel.QueuePanel`` drives
``_link_review.LinkReview`` (the review queue ``_review_queue.ReviewQueue`` of doubtful links; accept, reject
with a local re-solve through :func:`tracker.linking.relink`, pin a track: ``_decisions.LinkDecisions``),
``_analysis_panel.AnalysisPanel`` plots the selected track (``_track_plot.TrackPlot``) and filters the view, and
``_session_keeper.SessionKeeper`` autosaves and restores the review session (``_session``). The edit model
``_edits.TrackEdits`` (over ``_live_tracks.LiveTracks`` and ``_track_summary``), the decisions, the queue and the
session file need neither napari nor Qt. Importing this package imports neither.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
