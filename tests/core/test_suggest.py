"""The one "did you mean" rule: the closest known name, when it is close enough to be a typo."""

from __future__ import annotations

import difflib

import pytest

from kernelcheck._src.core.suggest import SIMILARITY, closest, did_you_mean

KNOWN = ["--tol", "--method", "--key", "--symmetrize", "--json", "--timeout"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("--tool", "--tol"),
        ("--methd", "--method"),
        ("--symetrize", "--symmetrize"),
        ("--JSON", "--json"),  # case alone
        ("--fast", None),
        ("", None),
    ],
)
def test_closest(word, expected):
    assert closest(word, KNOWN) == expected


@pytest.mark.parametrize("word", ["--tool", "--time", "--jsn", "--ky", "--x", "method"])
def test_a_name_is_proposed_exactly_when_it_is_similar_enough(word):
    ratios = {k: difflib.SequenceMatcher(None, word, k).ratio() for k in KNOWN}
    best = max(ratios.values())
    match = closest(word, KNOWN)
    if best >= SIMILARITY:
        assert match is not None and ratios[match] == best
    else:
        assert match is None


def test_did_you_mean_ends_a_message():
    assert did_you_mean("gausian", ["linear", "gaussian"]) == "; did you mean 'gaussian'?"
    assert did_you_mean("tanh", ["linear", "gaussian"]) == ""
