"""The catalogue of kernel leaves (kernelcheck._src.kernels.catalog) and the code that reads it.

Every leaf class exported by :mod:`kernelcheck.kernels` has a row; every row
is accepted by the expression parser (each spelling, keyword and positional
arguments, each drawn value), drawn by the Hypothesis strategies, and listed
by the help of ``kernelcheck kernel``.  A new leaf is one class and one row:
these tests fail until both are there.
"""

from __future__ import annotations

import inspect
import itertools

import pytest
from hypothesis import HealthCheck, find, settings

import kernelcheck.kernels as facade
from kernelcheck._src.kernels import combinators
from kernelcheck._src.kernels.catalog import KINDS, LEAVES, REQUIRED
from kernelcheck._src.kernels.expr import FUNCTIONS, language_names, parse_kernel
from kernelcheck.cli import build_parser
from kernelcheck.kernels import FunctionKernel, Kernel
from kernelcheck.strategies import kernels

IDS = [leaf.name for leaf in LEAVES]


def _exported_leaf_classes() -> set[type]:
    """The facade's leaf classes: not the base, a combinator or a user function."""
    exported = {getattr(facade, name) for name in facade.__all__}
    classes = {obj for obj in exported if isinstance(obj, type) and issubclass(obj, Kernel)}
    combinator_classes = {getattr(combinators, name) for name in combinators.__all__}
    return classes - combinator_classes - {Kernel, FunctionKernel}


def _arguments(leaf):
    """Every combination of the row's drawn argument values, as keyword dicts."""
    names = [p.name for p in leaf.params]
    for values in itertools.product(*(tuple(p.draws) for p in leaf.params)):
        yield dict(zip(names, values, strict=True))


def _text(value) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def test_every_exported_leaf_class_has_a_row():
    rows = {leaf.cls for leaf in LEAVES}
    assert _exported_leaf_classes() <= rows, "a leaf class without a catalogue row"
    assert rows <= _exported_leaf_classes(), "a catalogue row whose class kernelcheck.kernels lacks"
    assert len(rows) == len(LEAVES)


@pytest.mark.parametrize("leaf", LEAVES, ids=IDS)
def test_a_row_describes_its_constructor(leaf):
    signature = inspect.signature(leaf.cls).parameters
    assert [p.name for p in leaf.params] == list(signature)
    assert [p.default for p in leaf.params] == [a.default for a in signature.values()]
    assert all(p.kind in KINDS for p in leaf.params)
    assert all(len(p.draws) > 0 for p in leaf.params)
    assert leaf.name in leaf.spellings and leaf.summary and "\n" not in leaf.summary


def test_spellings_are_unique_and_all_known_to_the_parser():
    spellings = [s for leaf in LEAVES for s in leaf.spellings]
    assert len(spellings) == len(set(spellings))
    assert FUNCTIONS == (*spellings, "exp")


@pytest.mark.parametrize("leaf", LEAVES, ids=IDS)
def test_drawn_arguments_build_the_leaf_with_the_features_the_row_states(leaf):
    for kwargs in _arguments(leaf):
        k = leaf.cls(**kwargs)
        assert k.has_finite_features == leaf.finite_features, (leaf.name, kwargs)


@pytest.mark.parametrize("leaf", LEAVES, ids=IDS)
def test_the_parser_accepts_every_row(leaf):
    for spelling, kwargs in itertools.product(leaf.spellings, _arguments(leaf)):
        expected = leaf.cls(**kwargs)
        keywords = ", ".join(f"{name}={_text(v)}" for name, v in kwargs.items())
        positional = ", ".join(_text(v) for v in kwargs.values())
        assert parse_kernel(f"{spelling}({keywords})") == expected
        assert parse_kernel(f"{spelling}({positional})") == expected
        assert parse_kernel(repr(expected)) == expected
    if all(p.default is not REQUIRED for p in leaf.params):
        for spelling in leaf.spellings:
            assert parse_kernel(spelling) == leaf.cls()


@pytest.mark.parametrize("leaf", LEAVES, ids=IDS)
def test_the_strategies_draw_every_row(leaf):
    quiet = settings(
        database=None,
        derandomize=True,
        max_examples=2000,
        suppress_health_check=list(HealthCheck),
    )
    found = find(kernels(max_depth=1, finite=False), lambda k: type(k) is leaf.cls, settings=quiet)
    assert type(found) is leaf.cls
    if leaf.finite_features:
        found = find(kernels(max_depth=1), lambda k: type(k) is leaf.cls, settings=quiet)
        assert type(found) is leaf.cls


def test_the_command_line_help_lists_every_row():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = " ".join(sub.choices["kernel"].format_help().split())
    assert language_names() in text
    for leaf in LEAVES:
        assert leaf.usage() in text
    assert "poly(degree, c=0)" in text and "exp(k, order=None)" in text
