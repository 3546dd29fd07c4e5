"""Bad input to verify.kernel and its twin is refused by name; extreme points give a verdict (C5).

Kernels that raise or return NaN, complex or wrongly shaped Gram blocks, and
bad points, are refused with ``InvalidArgument`` naming the argument; points
at the ends of the float range give a report or a clean error, never a
verdict computed from inf or NaN (a Hypothesis test over drawn point sets).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck.errors import (
    InvalidArgument,
    NumericalFailure,
)
from kernelcheck.kernels import (
    Gaussian,
    Linear,
    kernel_from_function,
)
from kernelcheck.verify import kernel as verify_kernel
from tests.inputs import readonly

CLEAN = (InvalidArgument, NumericalFailure)


X_KERNEL = readonly(np.random.default_rng(0).normal(size=(4, 2)))


# ---------------------------------------------------------------------------
# verify.kernel
# ---------------------------------------------------------------------------


def _nan(A, B=None):
    return np.full((A.shape[0], A.shape[0] if B is None else B.shape[0]), np.nan)


KERNEL_BAD = [
    (lambda: verify_kernel("lin", X_KERNEL), "`kernel` must be a kernel"),
    # a plain function is read as f(X, Y) -> block (then checked like any kernel's) ...
    (lambda: verify_kernel(_nan, X_KERNEL), "returned a non-finite value"),
    # ... or refused at once when no reading fits
    (
        lambda: verify_kernel(lambda A, B=None: np.ones((4, 3)), X_KERNEL),
        "no reading works",
    ),
    (
        lambda: verify_kernel(kernel_from_function(lambda x, y: float("nan")), X_KERNEL),
        "non-finite value",
    ),
    (
        lambda: verify_kernel(kernel_from_function(lambda x, y: 1 / 0), X_KERNEL),
        "raised ZeroDivisionError",
    ),
    (lambda: verify_kernel(Linear(), np.ones(3)), "`X` must be a 2-d array"),
    (lambda: verify_kernel(Linear(), np.array([[np.inf, 0.0]])), "`X` must be finite"),
    (lambda: verify_kernel(Linear(), X_KERNEL, dim=3), "does not match `X`"),
    (lambda: verify_kernel(Linear()), "`dim` must be given"),
    (lambda: verify_kernel(Linear(), dim=0), "`dim` must be >= 1"),
    (lambda: verify_kernel(Linear(), dim=2, budget=0), "`budget` must be >= 1"),
    (
        lambda: verify_kernel(Linear(), dim=2, seed=-1, budget=1),
        "`seed` must be a non-negative int",
    ),
    (
        lambda: verify_kernel(Linear(), dim=2, seed="a", budget=1),
        "`seed` must be a non-negative int",
    ),
]


@pytest.mark.parametrize("call, text", KERNEL_BAD)
def test_verify_kernel_bad_input(call, text):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert text in str(info.value)


def test_verify_kernel_extremes():
    assert verify_kernel(Gaussian(), np.ones((1, 1))).passed
    dup = verify_kernel(Gaussian(), np.ones((5, 1)) + np.arange(5)[:, None] * 1e-12)
    assert dup.passed and dup.verdict in ("psd", "rounding")
    with pytest.raises(InvalidArgument, match="raised OverflowError"):
        verify_kernel(
            kernel_from_function(lambda x, y: math.exp(x @ y), name="e"), np.array([[1e3, 0.0]])
        )
    from kernelcheck import Exponential

    with pytest.raises(NumericalFailure, match="overflows float64"):
        verify_kernel(Exponential(), np.array([[1e3, 0.0]]))


@settings(max_examples=10, deadline=None)
@given(
    P=hnp.arrays(
        np.float64, st.tuples(st.integers(1, 4), st.integers(1, 2)), elements=st.floats(-1e3, 1e3)
    )
)
def test_verify_kernel_answers_or_fails_cleanly(P):
    try:
        rep = verify_kernel(Gaussian(), P)
    except CLEAN:
        return
    assert rep.passed  # a Gaussian Gram is PSD: psd or rounding, never a violation
