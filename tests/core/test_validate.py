"""Unit tests of the shared input validation, error model, results and atomic writer."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from kernelcheck._src.core.atomic import atomic_write, write_bytes_atomic, write_text_atomic
from kernelcheck._src.core.results import ResultMixin, to_jsonable
from kernelcheck._src.core.rounding import Tolerance, gamma, matmul_error_bound, unit_roundoff
from kernelcheck._src.core.validate import (
    as_array,
    as_int,
    as_points,
    as_probability,
    as_real,
    as_rng,
    as_square_matrix,
    check_callable,
    check_choice,
    check_size,
)
from kernelcheck.errors import InvalidArgument


def test_unit_roundoff_and_gamma():
    assert unit_roundoff() == 2.0**-53
    assert unit_roundoff(np.float32) == 2.0**-24
    u = 2.0**-53
    assert gamma(10) == 10 * u / (1 - 10 * u)
    with pytest.raises(InvalidArgument, match="not a useful bound"):
        gamma(2**52)


def test_matmul_error_bound_covers_the_actual_error():
    """Against an exact product in rational arithmetic (fractions) on small matrices."""
    from fractions import Fraction

    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(4, 50)), rng.normal(size=(50, 3))
    exact = np.array(
        [
            [float(sum(Fraction(a) * Fraction(b) for a, b in zip(A[i], B[:, j]))) for j in range(3)]
            for i in range(4)
        ]
    )
    bound = matmul_error_bound(A, B)
    assert np.all(np.abs(A @ B - exact) <= bound + np.finfo(float).eps / 2 * np.abs(exact))
    assert np.all(bound > 0)


def test_as_array_dtypes():
    assert as_array([[1, 2]], "x").dtype == np.float64
    assert as_array(np.array([[1, 2]], dtype=np.float32), "x").dtype == np.float32
    assert as_array(np.array([[1, 2]], dtype=np.float16), "x").dtype == np.float64
    assert as_array(np.array([True, False]), "x").dtype == np.float64


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="longdouble is float64 here")
def test_extended_precision_is_refused_not_rounded():
    with pytest.raises(InvalidArgument, match="extended precision"):
        as_array(np.array([1.0], dtype=np.longdouble), "x")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: as_array([[np.nan]], "X"), "`X` must be finite, but 1 entry is NaN"),
        (lambda: as_array([1.0, np.inf, -np.inf], "X"), "2 entries are NaN or Inf"),
        (lambda: as_array([[1.0]], "X", ndim=1), "`X` must have 1 dimension"),
        (lambda: as_array([[1.0]], "X", min_ndim=3), "at least 3 dimensions"),
        (lambda: as_array([], "X"), "must not be empty"),
        (lambda: as_array(["a"], "X"), "real numeric"),
        (lambda: as_array([1j], "X"), "must be real"),
        (lambda: as_array([[1.0], [1.0, 2.0]], "X"), "numeric array"),
        (lambda: as_points([1.0, 2.0], "X"), r"x\[None, :\]"),
        (lambda: as_points([[1.0, 2.0]], "X", dim=3), "d = 3 columns"),
        (lambda: as_square_matrix([[1.0, 2.0]], "K"), "square"),
        (lambda: as_int(2.0, "n"), "pass int"),
        (lambda: as_int("2", "n"), "must be an integer"),
        (lambda: as_int(True, "n"), "must be an integer"),
        (lambda: as_int(0, "n", minimum=1), "`n` must be >= 1"),
        (lambda: as_int(5, "n", maximum=4), "`n` must be <= 4"),
        (lambda: as_real("1", "c"), "must be a real number"),
        (lambda: as_real(float("inf"), "c"), "must be finite"),
        (lambda: as_real(0.0, "c", positive=True), "> 0"),
        (lambda: as_real(-1.0, "c", nonnegative=True), ">= 0"),
        (lambda: as_probability(1.0, "alpha"), "strictly between 0 and 1"),
        (lambda: as_probability(0.0, "alpha"), "strictly between 0 and 1"),
        (lambda: as_rng(None), "must be given"),
        (lambda: as_rng(-1), "non-negative int"),
        (lambda: as_rng(1.5), "non-negative int"),
        (lambda: check_choice("x", "method", ("a", "b")), "one of 'a', 'b'"),
        (lambda: check_callable(1, "f"), "must be callable"),
        (lambda: check_size(2**40, "the Gram block"), "GiB"),
    ],
)
def test_validation_table(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_rng_is_reproducible_and_passes_generators_through():
    g = np.random.default_rng(3)
    assert as_rng(g) is g
    assert as_rng(7).random() == as_rng(7).random()
    assert as_rng(np.random.SeedSequence(7)).random() == np.random.default_rng(7).random()
    assert as_real(np.float32(0.5), "c") == 0.5 and as_real(np.array(2.0), "c") == 2.0


class Color(enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class _Result(ResultMixin):
    value: float
    array: np.ndarray
    color: Color
    tol: Tolerance


def test_results_are_strict_json():
    r = _Result(float("nan"), np.array([1.0, np.inf]), Color.RED, Tolerance(1e-3, "model"))
    d = json.loads(r.to_json(allow_nan=False))
    assert d == {
        "value": "nan",
        "array": [1.0, "inf"],
        "color": "red",
        "tol": {"value": 1e-3, "source": "model", "kind": "absolute"},
    }
    assert to_jsonable(np.int64(3)) == 3 and to_jsonable((1, -math.inf)) == [1, "-inf"]


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sub" / "report.md"
    write_text_atomic(target, "one")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as fh:
            fh.write("half")
            raise KeyboardInterrupt
    assert target.read_text() == "one"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]
    write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(ValueError):
        with atomic_write(target, "a"):
            pass
