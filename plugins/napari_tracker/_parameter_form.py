"""A Qt form generated from a parameter class of :mod:`tracker.params` (defaults, ranges, units, help: all from there).

Each field becomes an input by its type and :class:`tracker.params.Meta`:
choices -> combo box, bool -> check box, int -> spin box, float -> decimal spin
box (one per axis z, y, x when ``per_axis``; a lowest "auto" entry that
means None when ``optional``), other strings -> line edit. The tooltip is the
help and the accepted range; the unit is the spin boxes' suffix.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from qtpy.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QLabel, QLineEdit, QSpinBox, QWidget

from tracker.params import Meta, parameters

from ._axis_boxes import AxisBoxes

DECIMALS = 3
"""Decimals of the float inputs (µm to the nanometre)."""
UNBOUNDED = 1e6
"""What a spin box shows as "no limit" (Qt needs a finite range)."""
AUTO = "auto"
"""The text of an optional number's lowest entry, which stands for None ("estimated" / the stage's default)."""


def field_label(name: str) -> str:
    """``"max_displacement_um"`` -> ``"Max displacement"``: the field's name in words (the unit goes elsewhere)."""
    words = name.removesuffix("_um").replace("_", " ")
    return words[:1].upper() + words[1:]


def _kind(item: dataclasses.Field) -> str:
    """``"bool"``, ``"int"``, ``"str"`` or ``"float"`` from the annotation (a string under postponed annotations)."""
    first = str(item.type).split("|")[0].strip()
    return first if first in ("bool", "int", "str") else "float"


def _step(default: Any) -> float:
    """A spin step a tenth of the default's order of magnitude (0.5 -> 0.01, 6 -> 0.1)."""
    number = abs(float(default[0] if isinstance(default, tuple) else default)) if default is not None else 0.0
    return 10.0 ** (math.floor(math.log10(number)) - 1) if number > 0 else 0.1


class ParameterForm(QWidget):
    """Inputs for every field of ``params_class`` (e.g. :class:`tracker.params.DetectionParams`).

    Parameters
    ----------
    params_class : type
        A frozen dataclass of :mod:`tracker.params`; its defaults fill the form.
    choices : mapping of field name to list of str, optional
        Choices known only at run time (e.g. the registered solvers), for string fields without ``Meta.choices``.
    """

    def __init__(self, params_class: type, choices: Mapping[str, Sequence[str]] | None = None, parent=None):
        super().__init__(parent)
        self.params_class = params_class
        self.inputs: dict[str, QWidget] = {}
        layout = QFormLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        defaults = params_class()
        for item, meta in parameters(params_class):
            options = meta.choices or (choices or {}).get(item.name)
            widget = self._make_input(item, meta, getattr(defaults, item.name), options)
            tooltip = f"{meta.help}\nAccepted: {meta.range_text()}{(' ' + meta.unit) if meta.unit else ''}."
            label = QLabel(field_label(item.name) + (" (z, y, x)" if meta.per_axis else ""))
            label.setToolTip(tooltip)
            widget.setToolTip(tooltip)
            layout.addRow(label, widget)
            self.inputs[item.name] = widget
        self.set_values(defaults.to_dict())

    @staticmethod
    def _make_input(item: dataclasses.Field, meta: Meta, default: Any, options: Sequence[str] | None):
        kind = _kind(item)
        if options:
            combo = QComboBox()
            combo.addItems(list(options))
            return combo
        if kind == "bool":
            return QCheckBox()
        if kind == "str":
            return QLineEdit()
        step = 1 if kind == "int" else _step(default)
        tick = 1 if kind == "int" else 10.0 ** -DECIMALS
        low = -UNBOUNDED if meta.minimum is None else meta.minimum + (tick if meta.minimum_open else 0)
        high = UNBOUNDED if meta.maximum is None else meta.maximum - (tick if meta.maximum_open else 0)
        if meta.per_axis:
            return AxisBoxes(low, high, step, DECIMALS, meta.unit, auto_text=AUTO if meta.optional else None)
        box = QSpinBox() if kind == "int" else QDoubleSpinBox()
        if meta.optional:
            box.setProperty("lowest", low)  # (the range's own minimum: set_values clamps to it, not to "auto")
            low -= step  # the "auto" entry, one step below the range
        if kind != "int":
            box.setDecimals(DECIMALS)
        box.setRange(int(low) if kind == "int" else low, int(high) if kind == "int" else high)
        box.setSingleStep(step)
        if meta.unit:
            box.setSuffix(f" {meta.unit}")
        if meta.optional:
            box.setSpecialValueText(AUTO)
        return box

    # ---------------------------------------------------------------- values

    def raw_values(self) -> dict[str, Any]:
        """What the form holds, field by field, unvalidated (None for an optional number at "auto"; one
        number for a per-axis value equal on every axis)."""
        values = {}
        for name, widget in self.inputs.items():
            if isinstance(widget, AxisBoxes):
                numbers = widget.value()
                if numbers is not None and len(set(numbers)) == 1:
                    numbers = numbers[0]  # one number: isotropic
                values[name] = numbers
            elif isinstance(widget, QComboBox):
                values[name] = widget.currentText()
            elif isinstance(widget, QCheckBox):
                values[name] = widget.isChecked()
            elif isinstance(widget, QLineEdit):
                values[name] = widget.text()
            elif widget.specialValueText() and widget.value() == widget.minimum():
                values[name] = None
            else:
                values[name] = widget.value()
        return values

    def values(self):
        """The form as an instance of the parameter class.

        Raises
        ------
        ValueError
            One line naming the field whose value the class refuses.
        """
        return self.params_class.from_dict(self.raw_values())

    def set_values(self, values: Mapping[str, Any]) -> None:
        """Fill in the fields named in ``values`` (None: "auto"; one number fills every axis)."""
        for name, value in values.items():
            widget = self.inputs[name]
            if isinstance(widget, AxisBoxes):
                widget.setValue(value)
            elif isinstance(widget, QComboBox):
                widget.setCurrentText(str(value))
            elif isinstance(widget, QCheckBox):
                widget.setChecked(bool(value))
            elif isinstance(widget, QLineEdit):
                widget.setText(str(value))
            else:
                lowest = widget.property("lowest")
                widget.setValue(widget.minimum() if value is None else
                                value if lowest is None else max(value, lowest))
