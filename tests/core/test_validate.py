"""Unit tests of the shared input validation (kernelcheck._src.core.validate)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.validate import (
    all_finite,
    as_array,
    as_int,
    as_points,
    as_probability,
    as_real,
    as_square_matrix,
    check_callable,
    check_choice,
    check_computed,
    to_numpy,
)
from kernelcheck.errors import InvalidArgument, NumericalFailure


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
        (lambda: check_choice("x", "method", ("a", "b")), "one of 'a', 'b'"),
        (lambda: check_callable(1, "f"), "must be callable"),
        (lambda: check_size(2**40, "the Gram block"), "GiB"),
    ],
)
def test_validation_table(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_as_real_reads_numpy_scalars_and_0_d_arrays():
    assert as_real(np.float32(0.5), "c") == 0.5 and as_real(np.array(2.0), "c") == 2.0


@pytest.mark.parametrize(
    "value, index, shown",
    [
        ([1.0, float("inf")], "(1,)", "inf"),
        ([[0.0, 1.0], [float("nan"), 2.0]], "(1, 0)", "nan"),
        ([[0.0, -float("inf")]], "(0, 1)", "-inf"),
    ],
)
def test_check_computed_names_the_first_non_finite_entry_and_its_value(value, index, shown):
    with pytest.raises(NumericalFailure) as info:
        check_computed(value, "the error")
    assert str(info.value).startswith(f"the error is {shown} at index {index}:")


def test_check_computed_of_a_non_finite_scalar_has_no_index():
    with pytest.raises(NumericalFailure, match=r"^the tolerance is inf: no verdict"):
        check_computed(float("inf"), "the tolerance")


@pytest.mark.parametrize("masked, word", [(1, "1 masked entry;"), (2, "2 masked entries;")])
def test_a_masked_array_is_refused_with_the_count_of_its_masked_entries(masked, word):
    mask = np.zeros(4, dtype=bool)
    mask[:masked] = True
    with pytest.raises(InvalidArgument, match=rf"^`x` is a masked array with {word}"):
        to_numpy(np.ma.masked_array(np.arange(4.0), mask=mask), "x")


def test_a_too_flat_array_is_described_in_the_refusal():
    with pytest.raises(InvalidArgument) as info:
        as_array(np.float64(2.5), "values", min_ndim=1)
    assert "got float64" in str(info.value) or "got array" in str(info.value)
    assert str(info.value).startswith("`values` must have at least 1 dimensions, got ")
    assert "None" not in str(info.value)


def test_a_tensor_is_detached_and_converted():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, 2.0]], requires_grad=True)
    out = to_numpy(t * 3, "x")
    assert type(out) is np.ndarray and out.tolist() == [[3.0, 6.0]]


def test_check_computed_says_a_complex_quantity_is_complex():
    with pytest.raises(NumericalFailure) as info:
        check_computed(np.array([1 + 1j]), "the error")
    assert str(info.value) == "the error is complex (complex128): no verdict is drawn from it"


def test_all_finite_falls_back_to_the_entries_when_the_sum_overflows():
    """The one-sum fast path must not refuse finite arrays whose sum overflows."""
    big = np.full(4, 1.5e308)
    assert all_finite(big)  # the sum is inf, every entry is finite
    assert not all_finite(np.r_[big, np.nan])
    assert not all_finite(np.r_[1.0, -np.inf])
    assert all_finite(np.empty((0, 3)))
