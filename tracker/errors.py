"""The error type of bad user input, shared by the core and its layers (command line, napari, file I/O)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input (a file, a parameter): the message is one line meant for the user.

    A ``ValueError``, so that callers catching ``ValueError`` (the napari widget, scripts) catch it too.
    """


class SeveralChannelsError(InputError):
    """A stack of several channels was opened without choosing one (``channel=`` / ``--channel``).

    Attributes
    ----------
    n_channels : int
        How many the stack has (a viewer may open each as its own layer).
    """

    def __init__(self, message: str, n_channels: int):
        super().__init__(message)
        self.n_channels = int(n_channels)
