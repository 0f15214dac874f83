"""napari plugin for tracker3d: open stacks and track tables, track, review and correct tracks, export.

The npe2 manifest is ``napari.yaml``; its contributions live in ``_reader``,
``_writer``, ``_sample_data`` and ``_widget``. ``_edits`` (the edit model
with undo/redo) needs neither napari nor Qt. Importing this package imports
neither.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
