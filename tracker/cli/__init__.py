"""The ``track`` command line: a thin layer over :mod:`tracker`, one module per verb.

Bad input (files, values that only the data show to be wrong) prints one line
and exits with code 1; a bad option value is a usage error, code 2 (click's);
a signal removes the files being written and exits with 128 + its number
(:func:`._options.user_errors`). Outputs are written atomically, never replace a
file without ``--overwrite``, and never replace an input. The options of the parameters are generated from
:mod:`tracker.params` (:mod:`._options`); the verbs import the core only when
they run, so ``track --help`` stays fast.
"""

from __future__ import annotations

import atexit
import gc
from typing import Any

import click

from .. import __version__
from .convert import convert_command
from .evaluate import evaluate_command
from .link import link_command
from .run import run_command
from .simulate import simulate_command
from .solvers import solvers_command


class _Program(click.Group):
    """The ``track`` group; run as the program (its arguments from ``sys.argv``), it also makes the
    interpreter's exit quick.

    At exit, Python clears every module and runs the cyclic garbage collector over the objects still alive
    (55,000 tracked ones once what ``track link`` needs is imported): 0.035 s of CPU and of wall time in a
    process that imports what ``track link`` imports (medians of 11 interleaved runs, this shared 2-core
    machine; 0.045 s after the command itself). :func:`gc.freeze`, registered to run at exit, exempts those
    objects from that pass. The files are written, closed and renamed before; the ``atexit`` functions, the
    flush of standard output and error, and the exit code are unchanged. Only for the program itself: a process
    that calls the group in-process (``CliRunner``, a notebook) keeps its own shut-down.
    """

    def main(self, args: Any = None, *more: Any, **options: Any) -> Any:
        if args is None:  # the process's own command line: ``track ...`` or ``python -m tracker.cli ...``
            atexit.register(gc.freeze)
        return super().main(args, *more, **options)


@click.group(cls=_Program, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="track")
def main() -> None:
    """Track particles in 3D microscopy time-lapses.

    \b
    Typical use:
      track run stack.tif -o tracks.csv --spot-radius 0.4 --max-displacement 1.5
    Positions, radii and displacements are in micrometres (µm); the voxel
    size comes from the TIFF metadata unless --voxel-size is given.
    """


for _command in (run_command, link_command, simulate_command, evaluate_command, convert_command, solvers_command):
    main.add_command(_command)

__all__ = ["main"]
