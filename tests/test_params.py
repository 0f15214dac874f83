"""The parameter model: defaults, ranges, one-line errors, TOML, and the command line built from it."""

from __future__ import annotations

import dataclasses
import inspect
import math

import click
import pytest

from tracker import params
from tracker.cli import main
from tracker.params import (
    DETECTION_DEFAULTS, LINKING_DEFAULTS, DetectionParams, LinkingParams, parameters, read_toml, to_toml, write_toml,
)

KINDS = (DetectionParams, LinkingParams)
FLAGGED = [(kind, item, info) for kind in KINDS for item, info in parameters(kind) if info.cli]
COMMANDS = {"run": (DetectionParams, LinkingParams), "link": (LinkingParams,)}


def _id(case) -> str:
    return case[1].name if isinstance(case, tuple) else str(case)


def test_defaults_are_the_model():
    assert DETECTION_DEFAULTS == DetectionParams() and LINKING_DEFAULTS == LinkingParams()
    for kind, defaults in ((DetectionParams, DETECTION_DEFAULTS), (LinkingParams, LINKING_DEFAULTS)):
        for item, info in parameters(kind):
            assert getattr(defaults, item.name) == item.default
            assert info.help.strip().endswith(".")  # a sentence: the option help appends unit and range
            params.Meta.range_text(info)  # every range describes itself


def test_core_keyword_defaults_come_from_the_model():
    from tracker.pipeline import detect_stack, track_stack

    signature = inspect.signature(track_stack).parameters
    for defaults in (DETECTION_DEFAULTS, LINKING_DEFAULTS):
        for name, value in defaults.to_dict().items():
            assert signature[name].default == value, name
    signature = inspect.signature(detect_stack).parameters
    for name, value in DETECTION_DEFAULTS.to_dict().items():
        assert signature[name].default == value, name


def _outside(info: params.Meta, kind: str) -> list:
    """Values just outside a field's range (or choices)."""
    if info.choices:
        return ["no-such-choice"]
    values = []
    if info.minimum is not None:
        values.append(info.minimum if info.minimum_open else info.minimum - 1)
    if info.maximum is not None:
        values.append(info.maximum if info.maximum_open else info.maximum + 1)
    return values


@pytest.mark.parametrize("case", [(k, i, m) for k in KINDS for i, m in parameters(k)], ids=_id)
def test_out_of_range_is_a_one_line_error_naming_the_option(case):
    kind, item, info = case
    label = info.cli or item.name
    for value in _outside(info, str(item.type)):
        with pytest.raises(ValueError) as error:
            kind(**{item.name: value})
        assert label in str(error.value) and "\n" not in str(error.value)
    if str(item.type) not in ("bool", "str") and not info.choices:
        with pytest.raises(ValueError, match="finite|number"):
            kind(**{item.name: math.nan})
        with pytest.raises(ValueError, match="number"):
            kind(**{item.name: "three"})
    if not info.optional:
        with pytest.raises(ValueError, match="must be given"):
            kind(**{item.name: None})


def test_valid_values_and_per_axis():
    assert DetectionParams(spot_radius_um=[0.8, 0.3, 0.3]).spot_radius_um == (0.8, 0.3, 0.3)
    with pytest.raises(ValueError, match="one number or one per axis"):
        DetectionParams(spot_radius_um=(1, 2, 3, 4))
    with pytest.raises(ValueError, match="--spot-radius"):
        DetectionParams(spot_radius_um=(0.8, 0, 0.3))
    with pytest.raises(ValueError, match="whole number"):
        LinkingParams(max_gap=1.5)
    with pytest.raises(ValueError, match="true or false"):
        LinkingParams(smoothing="yes")
    assert LinkingParams().replace(max_gap=0).max_gap == 0
    with pytest.raises(ValueError, match="unknown linking parameter"):
        LinkingParams.from_dict({"max_gaps": 1})


def test_toml_round_trip(tmp_path):
    detection = DetectionParams(spot_radius_um=(0.8, 0.3, 0.3), threshold=5.5, device="cpu")
    linking = LinkingParams(max_displacement_um=1.25, motion="none", persistence=0.3, adaptive_radius=False,
                            smoothing=False, max_gap=0, gap_penalty=4.0, no_link_factor=1.2, solver="scipy")
    path = tmp_path / "p.toml"
    write_toml(path, detection, linking, extra={"tracker": {"version": "9.9"}})
    assert read_toml(path) == (detection, linking)
    assert "[tracker]" in path.read_text() and 'version = "9.9"' in path.read_text()
    # None ("estimated") is left out and reads back as None; missing sections and keys are the defaults.
    path.write_text(to_toml(LinkingParams(max_gap=1)))
    assert "persistence" not in path.read_text()
    assert read_toml(path) == (DETECTION_DEFAULTS, LinkingParams(max_gap=1))


@pytest.mark.parametrize("text, message", [
    ("[linking]\nmax_gap = \n", "not valid TOML"),
    ("[linking]\nmax_gaps = 1\n", "unknown linking parameter"),
    ("[linking]\nmax_displacement_um = -1.0\n", "--max-displacement must be > 0"),
    ("linking = 3\n", "must be a table"),
])
def test_bad_toml_is_one_line_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        read_toml(path)
    assert message in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)


def _options(command_name: str) -> dict[str, click.Option]:
    command = main.commands[command_name]
    return {p.name: p for p in command.params if isinstance(p, click.Option)}


@pytest.mark.parametrize("command_name", sorted(COMMANDS))
def test_every_cli_default_is_the_model_default(command_name):
    """Generated from the model: each flagged field has its option, with the model's flag, default and help."""
    command = main.commands[command_name]
    options = _options(command_name)
    ctx = click.Context(command)
    for kind in COMMANDS[command_name]:
        for item, info in parameters(kind):
            if info.cli is None:
                assert item.name not in options
                continue
            option = options[item.name]
            assert info.cli in option.opts
            default = option.get_default(ctx)
            if isinstance(default, str) and option.type is not click.STRING:
                default = option.type.convert(default, option, ctx)
            assert default == item.default, item.name
            assert info.help in option.help and (info.unit in option.help)
            if info.choices:
                assert tuple(option.type.choices) == info.choices


def test_solver_choices_come_from_the_registry():
    from tracker.lap import available_solvers

    assert list(_options("run")["solver"].type.choices) == available_solvers("gated")
    assert list(_options("link")["solver"].type.choices) == available_solvers("gated")


def test_fields_are_typed_for_the_command_line():
    """Every flagged field has a type the option generator understands."""
    for _, item, info in FLAGGED:
        kind = str(item.type)
        assert info.per_axis or info.choices or item.name == "solver" or \
            any(word in kind for word in ("bool", "int", "float")), (item.name, kind)
    assert len({info.cli for _, _, info in FLAGGED}) == len(FLAGGED)  # no flag twice
    assert len({item.name for _, item, _ in FLAGGED}) == len(FLAGGED)
    assert all(dataclasses.is_dataclass(kind) for kind in KINDS)
