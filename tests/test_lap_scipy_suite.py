"""SciPy's own ``linear_sum_assignment`` test suite, run against ``tracker.lap`` (every exact solver).

Each test function of ``scipy/optimize/tests/test_linear_assignment.py`` is re-created here with
``linear_sum_assignment`` and ``min_weight_full_bipartite_matching`` in its globals replaced by ours
(``solver=`` fixed), its ``pytest`` marks kept. The GPU solvers' copies carry the ``gpu`` mark.
"""

from __future__ import annotations

import functools
import types

import pytest

from tracker import lap

scipy_suite = pytest.importorskip("scipy.optimize.tests.test_linear_assignment")

EXACT_SOLVERS = [("scipy", False), ("auto", False), ("auction", True), ("hungarian-tree", True),
                 ("hungarian-classical", True)]
TIE_BREAKING = {"test_constant_cost_matrix", "test_linear_sum_assignment_input_object",
                "test_linear_sum_assignment_input_bool"}
"""Tests that check which of several equally cheap assignments comes back (SciPy's choice): the GPU solvers'
parallel rounds choose among ties in no fixed order. ``auto`` passes them (tiny NumPy matrices go to SciPy)."""


def _rebound(function, solver: str, gpu: bool):
    """``function`` with our solvers in its globals, and its marks (plus ``gpu``)."""
    namespace = dict(function.__globals__)
    namespace["linear_sum_assignment"] = functools.partial(lap.linear_sum_assignment, solver=solver)
    namespace["min_weight_full_bipartite_matching"] = functools.partial(lap.min_weight_full_bipartite_matching,
                                                                        solver="auction" if gpu else "scipy")
    copy = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__dict__.update(function.__dict__)
    # parametrize values may be one-shot iterators (SciPy's test cases): one list for every copy
    copy.pytestmark = list(_marks(function))
    copy.__wrapped__ = function
    if gpu:
        copy = pytest.mark.gpu(copy)
        if function.__name__ in TIE_BREAKING:
            copy = pytest.mark.skip(reason="SciPy's choice among equally cheap assignments")(copy)
    return copy


@functools.cache
def _marks(function):
    """The marks of ``function``, parametrize values as lists (SciPy's may be one-shot iterators)."""
    return tuple(pytest.Mark(mark.name, tuple(list(a) if mark.name == "parametrize" and k == 1 else a
                                              for k, a in enumerate(mark.args)), mark.kwargs)
                 for mark in getattr(function, "pytestmark", ()))


for _name, _function in vars(scipy_suite).copy().items():
    if _name.startswith("test_") and callable(_function):
        for _solver, _gpu in EXACT_SOLVERS:
            globals()[f"{_name}__{_solver.replace('-', '_')}"] = _rebound(_function, _solver, _gpu)
