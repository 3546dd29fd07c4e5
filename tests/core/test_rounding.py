"""The error-model helpers of kernelcheck._src.core.rounding against Higham's formulas.

Reference: Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
sec. 3.1 (gamma_k = k u / (1 - k u)) and Lemma 3.4 / eq. (3.13) for the
entrywise bound of a matrix product; the bound is also checked against an
exact product in rational arithmetic.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernelcheck._src.core.rounding import (
    Tolerance,
    gamma,
    matmul_error_bound,
    unit_roundoff,
)
from kernelcheck.errors import InvalidArgument

RNG = np.random.default_rng(5)


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


def test_gamma_limits_message_names_k_and_dtype():
    with pytest.raises(
        InvalidArgument,
        match=r"^gamma_k is not a useful bound for k = 8388608 operations in float32 "
        r"\(k u = 0\.5 >= 1/2\)$",
    ):
        gamma(2**23, np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("extra", [0, 3])
def test_matmul_error_bound_is_gamma_k_times_abs_product(dtype, extra):
    A = RNG.normal(size=(3, 5)).astype(dtype)
    B = RNG.normal(size=(5, 2)).astype(dtype)
    u = unit_roundoff(dtype)
    k = 5
    g = (k + extra) * u / (1 - (k + extra) * u)
    expected = g * (1 + k * u / (1 - k * u)) * (np.abs(A) @ np.abs(B))
    got = matmul_error_bound(A, B, extra_ops=extra)
    assert np.allclose(got, expected, rtol=8 * u, atol=0)
    assert np.array_equal(matmul_error_bound(A, B), matmul_error_bound(A, B, extra_ops=0))
    # the bound covers the float product against a float64 (or exact-rational) reference
    exact = A.astype(np.float64) @ B.astype(np.float64)
    assert np.all(np.abs((A @ B) - exact) <= got + 8 * unit_roundoff(np.float64) * np.abs(exact))


def test_matmul_error_bound_dtype_argument_and_promotion():
    A = RNG.normal(size=(2, 4)).astype(np.float32)
    B = RNG.normal(size=(4, 2))
    mixed = matmul_error_bound(A, B)  # result type float64
    as64 = matmul_error_bound(A, B, dtype=np.float64)
    as32 = matmul_error_bound(A, B, dtype=np.float32)
    assert np.array_equal(mixed, as64)
    ratio = unit_roundoff(np.float32) / unit_roundoff(np.float64)
    assert np.allclose(as32 / as64, ratio, rtol=1e-5, atol=0)
    # batched: the inner dimension is the last axis of A
    Ab = RNG.normal(size=(3, 2, 6))
    Bb = RNG.normal(size=(3, 6, 2))
    for i in range(3):
        assert np.array_equal(matmul_error_bound(Ab, Bb)[i], matmul_error_bound(Ab[i], Bb[i]))


@pytest.mark.parametrize(
    "value, text",
    [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf"), (0.5, 0.5)],
)
def test_tolerance_to_dict_is_strict_json(value, text):
    tol = Tolerance(value, "gamma_3 |a||b|")
    d = tol.to_dict()
    assert d == {"value": text, "source": "gamma_3 |a||b|", "kind": "absolute"}
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert str(Tolerance(0.125, "model", "relative")) == "0.125 (relative; model)"


def test_a_matmul_bound_is_in_the_wider_operands_precision():
    from kernelcheck._src.core.rounding import matmul_error_bound

    A = np.random.default_rng(2).random((3, 4)).astype(np.float32).astype(np.float64)
    B = np.random.default_rng(3).random((4, 2)).astype(np.float32).astype(np.float64)
    wide = matmul_error_bound(A, B)  # the same numbers, all float64
    assert np.array_equal(matmul_error_bound(A, B.astype(np.float32)), wide)
    assert np.array_equal(matmul_error_bound(A.astype(np.float32), B), wide)
    narrow = matmul_error_bound(A.astype(np.float32), B.astype(np.float32))
    assert (narrow > wide).all()  # float32's u, not float64's
