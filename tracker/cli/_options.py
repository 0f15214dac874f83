"""What the verbs share: options generated from the parameter model, ``Z,Y,X`` values, progress bars,
logging and one-line user errors.

Every option of a :mod:`tracker.params` field is built here from its :class:`tracker.params.Meta`
(flag, type, range, default, help with unit and range), so no verb writes a parameter or a default
by hand. Nothing heavy is imported here: ``track --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import math
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from .. import __version__
from ..params import Meta, parameters, read_toml, to_toml
from ..progress import Stage

UM = "µm"
_GIVEN = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)


def user_errors(command: Callable) -> Callable:
    """The boundary of a verb: one-line errors and exit codes, signals, closed pipes, warnings.

    * User errors (``ValueError``, which :class:`tracker.errors.InputError` is, ``RuntimeError``, ``OSError``)
      print one line and exit with code 1; click's usage errors (a bad option value) exit with code 2.
    * SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the command: files being written are removed (their ``.part``
      temporaries, :func:`tracker.io.atomic_path`), one line says so, and the exit code is 128 + the signal
      (130, 143, 129).
    * A closed standard output (``track evaluate ... | head -1``) ends the command quietly, exit code 0.
    * Warnings for users (:class:`tracker.validation.InputWarning`) print as one line, ``warning: ...``.
    """

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            with _signals_stop(), _warnings_as_lines():
                result = command(*args, **kwargs)
                sys.stdout.flush()  # (a closed pipe shows here, inside, not at exit)
                return result
        except BrokenPipeError:
            _quiet_closed_stdout()
            raise click.exceptions.Exit(0) from None
        except (_Stopped, KeyboardInterrupt) as stop:
            signum = stop.signum if isinstance(stop, _Stopped) else signal.SIGINT
            click.echo(f"Error: stopped by {signal.Signals(signum).name}; files being written were removed", err=True)
            raise click.exceptions.Exit(128 + signum) from None
        except (ValueError, RuntimeError, OSError) as error:  # tracker.errors.InputError is a ValueError
            raise click.ClickException(str(error).splitlines()[0] if str(error) else type(error).__name__) from None

    return wrapper


class _Stopped(BaseException):
    """Raised by the SIGTERM/SIGHUP handler: a ``BaseException``, so that no ``except Exception`` swallows it on
    its way out, while every ``finally`` (the removal of ``.part`` files) runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`_Stopped` in the main thread while the command runs (their default
    action kills the process at once, leaving ``.part`` files behind); a repeated signal is ignored while the
    first one unwinds. Previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kinds = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]

    def stop(signum, frame):
        for kind in kinds:
            signal.signal(kind, signal.SIG_IGN)
        raise _Stopped(signum)

    previous = {kind: signal.signal(kind, stop) for kind in kinds}
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Show each warning meant for users (``UserWarning``: :class:`tracker.validation.InputWarning`, the I/O
    libraries') as one line, ``warning: MESSAGE``, on standard error; hide the others (NumPy's
    ``RuntimeWarning`` of a cast or an empty mean: details of the implementation, not of the input)."""

    def show(message, category, filename, lineno, file=None, line=None):
        click.echo(f"warning: {str(message).splitlines()[0] if str(message) else category.__name__}", err=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = show
        yield


def _quiet_closed_stdout() -> None:
    """After a closed pipe: point standard output at the null device, so that Python's flush at exit does not
    print "Exception ignored ... BrokenPipeError" (the recipe of Python's ``signal`` documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # (no file descriptor: a test's stream)
        pass


class Triple(click.ParamType):
    """``Z,Y,X``: three positive finite numbers (whole numbers if ``whole``) or, if ``allow_single``, one number for
    all axes, or, if ``allow_pair``, ``Y,X`` (a 2D time series: the reader checks that each frame has one plane)."""

    name = "Z,Y,X"

    def __init__(self, allow_single: bool = False, whole: bool = False, allow_pair: bool = False):
        self.allow_single = allow_single
        self.whole = whole
        self.allow_pair = allow_pair

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        numbers_text = "whole numbers" if self.whole else "numbers"
        try:
            numbers = tuple((int if self.whole else float)(v) for v in str(value).replace(" ", "").split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of {numbers_text}", param, ctx)
        counts = (3,) + ((1,) if self.allow_single else ()) + ((2,) if self.allow_pair else ())
        if len(numbers) not in counts:
            pair = " (or Y,X for a 2D time series)" if self.allow_pair else ""
            self.fail(f"expected three {numbers_text} Z,Y,X{pair}, got {value!r}", param, ctx)
        if not all(math.isfinite(v) for v in numbers):
            self.fail(f"values must be finite numbers, got {value!r}", param, ctx)
        if not all(v > 0 for v in numbers):
            self.fail(f"values must be positive, got {value!r}", param, ctx)
        return numbers[0] if len(numbers) == 1 else numbers


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and infinities (which compare as inside every range)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class LazyChoice(click.Choice):
    """A ``click.Choice`` whose choices are listed only when needed (help, a given value).

    For ``--solver``: listing the solvers imports :mod:`tracker.lap` (SciPy), which
    ``track --help`` should not pay for.
    """

    def __init__(self, load: Callable[[], Iterable[str]]):
        self._load = load
        self._choices: tuple[str, ...] | None = None
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        if self._choices is None:
            self._choices = tuple(self._load())
        return self._choices

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The value, checked against the choices, except the option's own default (valid by the model's
        declaration): a run with the default then starts its work (``track link`` reads its table) before
        SciPy is imported for the solver registry."""
        if param is not None and value == param.default:
            return value
        return super().convert(value, param, ctx)


class ModelOption(click.Option):
    """An option built from a :class:`tracker.params.Meta`: its help already states the range."""

    def get_help_extra(self, ctx: click.Context):
        extra = super().get_help_extra(ctx)
        extra.pop("range", None)
        return extra


def _solvers() -> list[str]:
    from ..lap import available_solvers

    return available_solvers("gated")


_TYPE_OVERRIDES: dict[str, Callable[[], click.ParamType]] = {"solver": lambda: LazyChoice(_solvers)}
"""Option types the model cannot give: solver names are known only to the solver registry."""


def option_help(info: Meta) -> str:
    """The help of an option: the field's help, then its unit and range."""
    details = []
    if info.unit:
        details.append(f"unit {info.unit}")
    if info.choices is None and (info.minimum is not None or info.maximum is not None):
        details.append(f"range {info.range_text()}")
    return info.help + (f" ({'; '.join(details)})" if details else "")


def _click_type(name: str, kind: str, info: Meta) -> Any:
    if name in _TYPE_OVERRIDES:
        return _TYPE_OVERRIDES[name]()
    if info.per_axis:  # (one value for every axis, Z,Y,X, or Y,X of a 2D time series)
        return Triple(allow_single=True, allow_pair=True)
    if info.choices is not None:
        return click.Choice(info.choices)
    bounds = {"min": info.minimum, "max": info.maximum, "min_open": info.minimum_open,
              "max_open": info.maximum_open}
    if "float" in kind:
        return FiniteFloatRange(**bounds)
    if "int" in kind:
        return click.IntRange(**{k: (int(v) if isinstance(v, float) else v) for k, v in bounds.items()})
    return str


def model_option(item: Any, info: Meta) -> Callable:
    """The click option of one parameter field (``item``: a ``dataclasses.Field`` with a flag)."""
    kind, default = str(item.type), item.default
    if item.type in (bool, "bool"):
        declarations = (f"{info.cli}/--no-{info.cli[2:]}", item.name)
        return click.option(*declarations, cls=ModelOption, default=default, show_default=True,
                            help=option_help(info))
    if isinstance(default, tuple):
        default = ",".join(f"{v:g}" for v in default)
    return click.option(info.cli, item.name, cls=ModelOption, type=_click_type(item.name, kind, info),
                        default=default, show_default=default is not None, help=option_help(info))


def model_options(*kinds: type, config: bool = True) -> Callable:
    """One option per flagged field of each parameter class, and ``--config FILE`` (unless ``config=False``).

    The command receives one validated object per class, as the keyword named by its section
    (``detection=DetectionParams(...)``, ``linking=LinkingParams(...)``): the values of the file
    given by ``--config`` (a TOML written by :func:`tracker.params.write_toml`, e.g. a
    ``*.params.toml`` saved beside an earlier output), with the options given on the command line
    winning over the file, and the defaults for the rest.
    """

    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            ctx = click.get_current_context()
            config_path = kwargs.pop("config", None)
            saved = {p._section: p for p in read_toml(config_path)} if config_path else {}
            for kind in kinds:
                given = {}
                for item, info in parameters(kind):
                    if info.cli is not None:
                        value = kwargs.pop(item.name)
                        if ctx.get_parameter_source(item.name) in _GIVEN:
                            given[item.name] = value
                kwargs[kind._section] = saved.get(kind._section, kind()).replace(**given)
            return command(*args, **kwargs)

        for kind in reversed(kinds):
            for item, info in reversed(list(parameters(kind))):
                if info.cli is not None:
                    wrapper = model_option(item, info)(wrapper)
        if not config:
            return wrapper
        return click.option(
            "--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Parameters from a TOML file, e.g. the OUTPUT.params.toml written beside an earlier "
                 "output; options given on the command line win over the file.")(wrapper)

    return decorate


def echo_summary(summary: Any) -> None:
    """Print the linker's one-line summary on standard error, unless ``-v`` already shows its log line."""
    if not logging.getLogger("tracker.linking").isEnabledFor(logging.INFO):
        click.echo(str(summary), err=True)


def parameters_path(output: Path) -> Path:
    """Where the parameters of ``output`` are saved: ``tracks.csv`` → ``tracks.params.toml``."""
    return output.with_suffix(".params.toml")


def parameters_text(*params: Any) -> str:
    """The TOML saved beside an output: the parameters used and the tracker's version."""
    return to_toml(*params, extra={"tracker": {"version": __version__}})


class _EchoHandler(logging.Handler):
    """Log records as lines on the current standard error (click's, so that tests capture them)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


def verbosity_options(command: Callable) -> Callable:
    """``-v/--verbose`` and ``-q/--quiet``: the level of the ``tracker`` logger, shown on standard error.

    The command receives ``quiet`` (no progress bars or summary either).
    """

    @click.option("-v", "--verbose", count=True, help="More messages: -v what each stage did, -vv debugging.")
    @click.option("-q", "--quiet", is_flag=True, help="No progress bars, summary or messages, only errors.")
    @functools.wraps(command)
    def wrapper(*args, verbose: int, quiet: bool, **kwargs):
        logger = logging.getLogger("tracker")
        level = logging.ERROR if quiet else max(logging.WARNING - 10 * verbose, logging.DEBUG)
        handler = _EchoHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if verbose > 1
                                               else "%(message)s"))
        previous = logger.level
        logger.setLevel(level)
        logger.addHandler(handler)
        try:
            with warnings.catch_warnings():
                if quiet:
                    warnings.simplefilter("ignore")
                return command(*args, quiet=quiet, **kwargs)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)

    return wrapper


class ProgressBars:
    """A click progress bar per :class:`tracker.progress.Stage`, on standard error."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar: Any = None
        self.stage: str | None = None
        self._done = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage != self.stage:
            self.close()
            self.stage = stage
            label = Stage(stage).label if stage in Stage._value2member_map_ else str(stage)
            self.bar = click.progressbar(length=total, label=f"{label:16s}", file=sys.stderr, show_pos=True)
            self.bar.__enter__()
            self._done = 0
        self.bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
