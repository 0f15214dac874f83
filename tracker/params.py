"""The parameter model: every user-facing parameter, its default, range, unit and help, written once.

Two frozen dataclasses, :class:`DetectionParams` and :class:`LinkingParams`
(LapTrack's habit: one model feeds everything). Each field carries its
documentation in ``dataclasses.field(metadata=...)`` (see :class:`Meta`), from
which the command line (:mod:`tracker.cli`) builds its options and the napari
widget its form; the core functions take their keyword defaults from
:data:`DETECTION_DEFAULTS` and :data:`LINKING_DEFAULTS`. Parameters are saved to
and read from TOML (:func:`write_toml`, :func:`read_toml`).

This module imports nothing from the rest of :mod:`tracker`, so that every
layer can import it cheaply.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

UM = "µm"


@dataclass(frozen=True)
class Meta:
    """What a parameter means, beside its default (``dataclasses.field(metadata={"meta": Meta(...)})``).

    Attributes
    ----------
    help : str
        One or two sentences, shown by ``--help``, the widget's tooltip and the docs.
    unit : str
        ``"µm"``, ``"µm²"``, ``"voxels"`` or ``""`` (dimensionless).
    cli : str or None
        The command-line flag (``"--max-gap"``; booleans get ``--x/--no-x``); None: Python API only.
    minimum, maximum : float, optional
        Allowed range (inclusive unless ``*_open``).
    choices : tuple of str, optional
        Allowed values of a string parameter (None: checked where it is used, e.g. solver names).
    optional : bool
        None is allowed, and means "estimated from the data" or "the default of the stage".
    per_axis : bool
        One number, or one per axis ``Z,Y,X``.
    """

    help: str
    unit: str = ""
    cli: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    minimum_open: bool = False
    maximum_open: bool = False
    choices: tuple[str, ...] | None = None
    optional: bool = False
    per_axis: bool = False

    def range_text(self) -> str:
        """The accepted range in words, e.g. ``"> 0"`` or ``"in [0, 1]"``."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            return f"in {'(' if self.minimum_open else '['}{low:g}, {high:g}{')' if self.maximum_open else ']'}"
        if low is not None:
            return f"{'>' if self.minimum_open else '>='} {low:g}"
        if high is not None:
            return f"{'<' if self.maximum_open else '<='} {high:g}"
        return "any value"


def _param(default: Any, **meta: Any) -> Any:
    return field(default=default, metadata={"meta": Meta(**meta)})


def meta(params: type | Any, name: str) -> Meta:
    """The :class:`Meta` of field ``name`` of a parameter class (or instance)."""
    return next(f.metadata["meta"] for f in dataclasses.fields(params) if f.name == name)


def parameters(params: type | Any) -> Iterator[tuple[dataclasses.Field, Meta]]:
    """Each field of a parameter class with its :class:`Meta`, in declaration order."""
    for item in dataclasses.fields(params):
        yield item, item.metadata["meta"]


class _Validated:
    """Checks every field against its :class:`Meta` on creation (a one-line ``ValueError`` naming it)."""

    def __post_init__(self) -> None:
        for item, info in parameters(self):
            value = getattr(self, item.name)
            if value is None:
                if not info.optional:
                    raise ValueError(f"{_label(item.name, info)} must be given")
                continue
            if info.per_axis and isinstance(value, (list, tuple)):
                value = tuple(value)
                object.__setattr__(self, item.name, value)
                if len(value) not in (2, 3):
                    raise ValueError(f"{_label(item.name, info)} must be one number or one per axis, got {value}")
                for number in value:
                    _check_number(item.name, info, number, item.type)
            elif info.choices is not None:
                if value not in info.choices:
                    raise ValueError(f"{_label(item.name, info)} must be {info.range_text()}, got {value!r}")
            elif _is_bool(item.type):
                if not isinstance(value, bool):
                    raise ValueError(f"{_label(item.name, info)} must be true or false, got {value!r}")
            elif _is_str(item.type):
                if not isinstance(value, str):
                    raise ValueError(f"{_label(item.name, info)} must be a string, got {value!r}")
            else:
                _check_number(item.name, info, value, item.type)

    def replace(self, **changes: Any):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Keyword arguments for the stage's function (tuples as tuples)."""
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """From keyword arguments (an unknown name is a ``ValueError``)."""
        names = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown {cls._section} parameter(s): {', '.join(unknown)}")
        return cls(**dict(values))


def _label(name: str, info: Meta) -> str:
    return info.cli if info.cli else name


def _is_bool(kind: Any) -> bool:
    return kind in (bool, "bool")


def _is_str(kind: Any) -> bool:
    return kind in (str, "str", "str | None")


def _check_number(name: str, info: Meta, value: Any, kind: Any) -> None:
    label = _label(name, info)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, complex):
        try:  # numpy scalars
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{label} must be a number, got {value!r}") from None
    else:
        number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{label} must be a finite number, got {value!r}")
    if "int" in str(kind) and "float" not in str(kind) and number != int(number):
        raise ValueError(f"{label} must be a whole number, got {value!r}")
    low, high = info.minimum, info.maximum
    if (low is not None and (number < low or (info.minimum_open and number == low))) or (
            high is not None and (number > high or (info.maximum_open and number == high))):
        raise ValueError(f"{label} must be {info.range_text()}{(' ' + info.unit) if info.unit else ''}, got {value!r}")


@dataclass(frozen=True)
class DetectionParams(_Validated):
    """How spots are found in every frame (:func:`tracker.detect.detect_spots`)."""

    _section = "detection"

    spot_radius_um: float | tuple[float, ...] | None = _param(
        None, unit=UM, cli="--spot-radius", minimum=0, minimum_open=True, per_axis=True, optional=True,
        help="Spot radius (√3 × the PSF's Gaussian σ): one value (isotropic), Z,Y,X for an elongated PSF, or "
             "Y,X for 2D. Estimated from the stack when not given (one Gaussian fitted to the isolated spots of up "
             "to 10 frames together).")
    threshold: float | None = _param(
        None, cli="--threshold", minimum=0, minimum_open=True, optional=True,
        help="Detection threshold: the filter response over its noise at that voxel (a signal-to-noise ratio; "
             "the faces' higher noise included). Not given: chosen per frame to maximise its estimated F1, the "
             "maxima found above each level less the noise maxima expected there (from the response's smoothness "
             "and the volume); frames where noise explains every level get 8; between 3.5 and 8. Where the maxima "
             "of up to 10 frames, pooled, show spots (noise maxima plus spots fitted to their qualities), no "
             "frame's is above the threshold that maximises that fit's F1; where that is 3.5, it is sought lower, "
             "down to 2.5, but not where the fit's noise maxima outnumber its spots.")
    device: str = _param(
        "auto", cli="--device", choices=("auto", "cpu", "gpu"),
        help="Where detection runs: 'auto' uses a GPU when CuPy finds one.")


@dataclass(frozen=True)
class LinkingParams(_Validated):
    """How detections are linked into tracks (:func:`tracker.linking.link_detections`)."""

    _section = "linking"

    max_displacement_um: float | None = _param(
        None, unit=UM, cli="--max-displacement", minimum=0, minimum_open=True, optional=True,
        help="Largest distance a particle moves between two frames (the gate), from the predicted position "
             "when motion is predicted. Estimated from the detections when not given: where the steps of a first "
             "linking pass become rarer than its false links, at most 1.2 times their 99th percentile (reported "
             "in the summary, saved in the parameters file).")
    motion: str = _param(
        "persistent", cli="--motion", choices=("persistent", "none"),
        help="'persistent': predict each particle from its last step times the persistence (estimated from "
             "the data); 'none': nearest-neighbour linking.")
    persistence: float | None = _param(
        None, cli="--persistence", minimum=0, maximum=1, optional=True,
        help="Persistence of motion, 0 (Brownian) to 1 (straight lines); estimated from the data when not given.")
    adaptive_radius: bool = _param(
        True, cli="--adaptive-radius",
        help="Search each particle's candidates within 4.5 standard deviations of its expected scatter (never "
             "beyond the maximum displacement); where particles differ in mobility, each track's own scatter, "
             "in the radius and the costs.")
    smoothing: bool = _param(
        True, cli="--smoothing",
        help="With persistent motion, link every frame pair again weighing how each candidate link continues "
             "into the next frame (forward-backward), then exchange single detections between tracks where "
             "that makes both more likely (about twice the linking time, fewer wrong links where paths cross).")
    max_gap: int = _param(
        2, cli="--max-gap", minimum=0, maximum=1000,
        help="Close gaps of up to this many missing frames (0: off); only when the data show missed detections.")
    gap_penalty: float = _param(
        2.0, cli="--gap-penalty", minimum=0,
        help="Extra cost per missing frame of a gap-closing link, in squared standard deviations of the "
             "expected motion.")
    no_link_factor: float = _param(
        1.05, minimum=0, minimum_open=True,
        help="\"No link\" cost as a multiple of the largest candidate link cost (Jaqaman et al. 2008); "
             "with scaled costs, of the gate's.")
    solver: str = _param(
        "auto", cli="--solver",
        help="Assignment solver (all exact but 'dgs', a heuristic). 'auto': the GPU auction for frames of "
             "2k+ detections when a GPU is present, else SciPy. The Hungarian solvers build one dense matrix "
             "per frame pair (moderate sizes). See `track solvers`.")


@dataclass(frozen=True)
class SimulationParams(_Validated):
    """The ground truth ``track simulate`` makes (:func:`tracker.simulate.simulate_tracks`, :func:`tracker.simulate.
    render_stack`): the motion, births and deaths, blinking and noise; the volume's shape, voxel size and PSF are
    options of the command."""

    _section = "simulation"

    n_frames: int = _param(20, cli="--frames", minimum=1, help="Number of frames.")
    n_particles: int = _param(50, cli="--particles", minimum=0, help="Particles in view at the start.")
    step_um: float = _param(0.5, unit=UM, cli="--step", minimum=0, help="RMS displacement per frame.")
    persistence: float = _param(
        0.5, cli="--persistence", minimum=0, maximum=1, help="Persistence of motion: 0 Brownian, 1 straight lines.")
    snr: float = _param(6.0, cli="--snr", minimum=0, minimum_open=True, help="Peak signal over background noise.")
    birth_rate: float = _param(0.0, cli="--birth-rate", minimum=0,
                               help="New particles per frame, as a fraction of the particles at the start.")
    death_rate: float = _param(0.0, cli="--death-rate", minimum=0, maximum=1, help="Per-frame probability of dying.")
    blink_probability: float = _param(0.0, cli="--blink", minimum=0, maximum=1,
                                      help="Per-frame probability that a particle is invisible.")
    seed: int = _param(0, cli="--seed", minimum=0, help="Seed of the random generators: same seed, same data.")


@dataclass(frozen=True)
class ClusterParams(_Validated):
    """Where ``track run`` runs (:mod:`tracker.distributed`): this process (the default), a local Dask cluster of
    worker processes, an existing Dask scheduler, or one Dask-CUDA worker per GPU. The results do not depend on it."""

    _section = "cluster"

    workers: int | None = _param(
        None, cli="--workers", minimum=1, optional=True,
        help="Detect on a local Dask cluster of this many worker processes (one thread each); needs the "
             "[distributed] extra. Not given: this process alone.")
    scheduler: str | None = _param(
        None, cli="--scheduler", optional=True,
        help="Detect on the existing Dask cluster of this scheduler (e.g. tcp://host:8786, started by "
             "dask-jobqueue or `dask scheduler`); its workers must reach the stack by the same path.")
    gpus: bool = _param(
        False, cli="--gpus",
        help="Detect on a local Dask-CUDA cluster of one worker per GPU (needs dask-cuda).")
    worker_memory_gb: float | None = _param(
        None, unit="GB", cli="--worker-memory", minimum=0, minimum_open=True, optional=True,
        help="Memory limit of each local worker (Dask pauses a worker at 80 % and restarts it at 95 %); "
             "not given: the machine's memory shared between the workers.")
    link_block_frames: int | None = _param(
        None, cli="--link-blocks", minimum=2, optional=True,
        help="Link in time blocks of this many frames, in parallel on the workers, stitched at the block "
             "boundaries (for stacks whose linking takes long): link F1 >= 0.999 against one linking; the same "
             "tracks with --motion none --no-adaptive-radius --max-gap 0. The detections stay on the workers and "
             "the client holds one block at a time (CSV, Parquet and GEFF outputs are written as the blocks come; "
             "TrackMate and ISBI at the end). Not given: the client links all frames at once (the single-process "
             "tracks).")


DETECTION_DEFAULTS = DetectionParams()
"""The defaults; core functions take their keyword defaults from here."""

LINKING_DEFAULTS = LinkingParams()
"""The defaults; core functions take their keyword defaults from here."""

SIMULATION_DEFAULTS = SimulationParams()
"""The defaults of :func:`tracker.simulate.simulate_tracks` and ``track simulate``."""

MATCH_DISTANCE_UM = 1.0
"""Default gate (µm) within which a point is matched to a ground-truth point (:mod:`tracker.metrics`,
``track evaluate --match-distance``): about twice the localisation error of a diffraction-limited spot."""

CLUSTER_DEFAULTS = ClusterParams()
"""The defaults of :mod:`tracker.distributed`."""

_SECTIONS = {"detection": DetectionParams, "linking": LinkingParams}


def to_toml(*params: _Validated, extra: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """TOML text with one table per parameter object (None values are left out: "estimated")."""
    lines: list[str] = []
    sections = [(p._section, p.to_dict()) for p in params] + list((extra or {}).items())
    for section, values in sections:
        lines.append(f"[{section}]")
        for name, value in values.items():
            if value is not None:
                lines.append(f"{name} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return repr(float(value)) if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                               ("inf" if value > 0 else "-inf"))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    try:  # numpy scalars
        return _toml_value(value.item())
    except AttributeError:
        raise TypeError(f"cannot write {value!r} to TOML") from None


def write_toml(path: str | os.PathLike, *params: _Validated,
               extra: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Write parameter objects (and optional ``extra`` tables, e.g. ``{"tracker": {"version": ...}}``) to TOML."""
    Path(path).write_text(to_toml(*params, extra=extra), encoding="utf-8")


def read_toml(path: str | os.PathLike) -> tuple[DetectionParams, LinkingParams]:
    """Parameters from a TOML file written by :func:`write_toml` (missing sections or keys: defaults).

    Raises
    ------
    ValueError
        One line naming the file and what is wrong (syntax, unknown names, values out of range).
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML ({error})") from None
    result = []
    for section, kind in _SECTIONS.items():
        values = document.get(section, {})
        if not isinstance(values, dict):
            raise ValueError(f"{path}: [{section}] must be a table")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        try:
            result.append(kind.from_dict(values))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None
    return result[0], result[1]
