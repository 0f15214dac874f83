"""Writing files atomically: a temporary file beside the target, renamed onto it on success."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputError


def check_writable(path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Fail early (:class:`InputError`, one line) if ``path`` cannot be written; returns it as a ``Path``.

    Refuses an existing file unless ``overwrite``, and a folder that does not exist.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError(f"{target} already exists (use --overwrite to replace it)")
    if not target.parent.exists():
        raise InputError(f"folder {target.parent} does not exist")
    return target


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    Nothing is left at ``path`` (and an existing file there is untouched) if
    the body raises. Refuses an existing ``path`` unless ``overwrite``.
    """
    target = check_writable(path, overwrite)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str, overwrite: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (e.g. a parameters TOML)."""
    with atomic_path(path, overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
