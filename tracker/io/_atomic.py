"""Writing files atomically: a temporary file beside the target, renamed onto it on success."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..errors import InputError


def check_writable(path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Fail early (:class:`InputError`, one line) if ``path`` cannot be written; returns it as a ``Path``.

    Refuses an existing file unless ``overwrite``; an existing folder unless ``overwrite`` and it is a Zarr store
    (a GEFF or OME-Zarr output, replaced whole: any other folder is never replaced); a folder that does not
    exist; and a folder where no file can be created (tried: a temporary file is made and removed, which also
    catches read-only file systems and full quotas that permission bits do not show).
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError(f"{target} already exists (use --overwrite to replace it)")
    if target.is_dir() and not any((target / name).is_file() for name in ("zarr.json", ".zgroup", ".zattrs")):
        raise InputError(f"{target} is a folder, not a file (only a Zarr store, such as a GEFF output, is replaced)")
    folder = target.parent
    if not folder.is_dir():
        raise InputError(f"folder {folder} does not exist" if not folder.exists() else f"{folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=folder)
    except OSError as error:
        raise InputError(f"cannot write to folder {folder} ({error.strerror or error})") from None
    os.close(fd)
    os.unlink(probe)
    return target


def same_file(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether two paths name one file: equal once resolved (symbolic links, ``..``), or hard links of one file."""
    first, second = Path(first), Path(second)
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # (one does not exist yet)
        return False


def check_outputs(inputs: Mapping[str, str | os.PathLike | None], outputs: Mapping[str, str | os.PathLike | None],
                  overwrite: bool = False) -> None:
    """Before any work: no output is an input or another output, and every output can be written.

    Parameters
    ----------
    inputs, outputs : mapping of label to path
        Labels name the paths in messages (``"STACK"``, ``"-o"``, ``"--detections"``); None paths are skipped.
    overwrite : bool
        Existing outputs may be replaced (:func:`check_writable`); an input never is.

    Raises
    ------
    InputError
        One line naming the two options that name one file, or the output that cannot be written.
    """
    given_inputs = [(label, Path(path)) for label, path in inputs.items() if path is not None]
    given_outputs = [(label, Path(path)) for label, path in outputs.items() if path is not None]
    for index, (label, path) in enumerate(given_outputs):
        for input_label, input_path in given_inputs:
            if same_file(path, input_path):
                raise InputError(f"{label} {path} is the input {input_label}: an input is never overwritten; "
                                 f"choose another output file")
        for other_label, other in given_outputs[:index]:
            if same_file(path, other):
                raise InputError(f"{label} {path} is the same file as {other_label}: give each output its own file")
    for _, path in given_outputs:
        check_writable(path, overwrite)


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
