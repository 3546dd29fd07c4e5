"""Argument types: each value the library's check accepts, and only those, read from text.

Each type reads the text as a number and hands it to its check in
``core/validate``; the table holds values on both sides of every bound, and
each row is compared with the library's check itself, so a type and its
check cannot drift apart.  A refused value is argparse's one-line usage error
naming the option, what it takes and the text typed.
"""

from __future__ import annotations

import argparse

import pytest

from kernelcheck._src.cli import arguments
from kernelcheck._src.cli.arguments import CatalogueChoices
from kernelcheck._src.core import validate
from kernelcheck.errors import InvalidArgument

#: type -> (the library's check of the value, the texts to read)
TYPES = {
    "positive_int": (
        lambda x: validate.as_int(int(x), "x", minimum=1),
        ["1", "7", " 12 ", "0", "-1", "1.5", "x", "", "1e3"],
    ),
    "nonnegative_int": (
        lambda x: validate.as_int(int(x), "x", minimum=0),
        ["0", "3", "-3", "2.0", "nan"],
    ),
    "finite_float": (
        lambda x: validate.as_real(float(x), "x"),
        ["0", "-2.5", "1e-300", "1e400", "nan", "inf", "-inf", "one"],
    ),
    "positive_seconds": (
        lambda x: validate.as_real(float(x), "x", positive=True),
        ["0.5", "30", "0", "-1", "inf", "nan", "soon"],
    ),
    "probability": (
        lambda x: validate.as_probability(float(x), "x"),
        ["0.01", "0.5", "0", "1", "1.5", "-0.1", "nan"],
    ),
    "size_list": (
        lambda x: tuple(validate.as_int(int(p), "x", minimum=1) for p in x.split(",")),
        ["64,128,256", "8", "64,abc", "64,,128", "64,0", "-1,2", ""],
    ),
}

ROWS = [(name, text) for name, (_, texts) in TYPES.items() for text in texts]


def _library(name: str, text: str):
    check, _ = TYPES[name]
    try:
        return check(text)
    except (ValueError, InvalidArgument):  # InvalidArgument is a ValueError
        return None


@pytest.mark.parametrize(("name", "text"), ROWS, ids=[f"{n}-{t!r}" for n, t in ROWS])
def test_a_type_accepts_what_the_library_s_check_accepts(name, text):
    parse = getattr(arguments, name)
    expected = _library(name, text)
    if expected is None:
        with pytest.raises(argparse.ArgumentTypeError) as info:
            parse(text)
        assert str(info.value) == f"expected {parse.expected}, got {text!r}"
    else:
        assert parse(text) == expected


def test_the_table_has_both_sides_of_every_type():
    for name, (_, texts) in TYPES.items():
        outcomes = {_library(name, t) is None for t in texts}
        assert outcomes == {True, False}, name


def test_catalogue_choices_read_the_catalogue_each_time():
    catalogue = ["a", "b"]
    choices = CatalogueChoices(lambda: catalogue)
    assert list(choices) == ["a", "b"] and "b" in choices and len(choices) == 2
    catalogue.append("c")
    assert "c" in choices and choices[-1] == "c" and choices[:2] == ("a", "b")
