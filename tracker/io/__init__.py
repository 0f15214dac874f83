"""File I/O: stacks (TIFF) and tables (CSV), read with one-line errors and written atomically.

A layer over the core, which never imports it: :func:`read_stack` gives a
:class:`tracker.stack.Stack` for :func:`tracker.pipeline.track_stack`, tables
are the ``dict`` of columns of :mod:`tracker.tables`. One module per format
(:mod:`.tiff`, :mod:`.tables`); every writer goes through :func:`atomic_path`.
"""

from __future__ import annotations

from ..errors import InputError
from ..stack import FrameArray, Stack, as_stack
from ._atomic import atomic_path, check_writable, write_text
from .tables import read_table, write_table
from .tiff import read_stack, write_stack

__all__ = [
    "FrameArray",
    "InputError",
    "Stack",
    "as_stack",
    "atomic_path",
    "check_writable",
    "read_stack",
    "read_table",
    "write_stack",
    "write_table",
    "write_text",
]
