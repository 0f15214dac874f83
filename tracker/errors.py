"""The error type of bad user input, shared by the core and its layers (command line, napari, file I/O)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input (a file, a parameter): the message is one line meant for the user.

    A ``ValueError``, so that callers catching ``ValueError`` (the napari widget, scripts) catch it too.
    """
