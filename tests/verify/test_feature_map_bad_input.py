"""Bad input to verify.feature_map and assert_feature_map is refused by name (claims C4-C9).

Every way a point set can be refused (:func:`tests.inputs.point_set_rows`),
maps and kernels of the wrong kind, and maps that raise or return NaN,
complex or wrongly shaped features: each row raises ``InvalidArgument`` whose
message opens with the argument in backticks.  Hypothesis feeds finite points
from 5e-324 to 1e300 to every finite example kernel's exact map and requires a
passing verdict or a clean error, never a verdict computed from NaN; a correct
map whose entries are subnormal passes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import verify
from kernelcheck.errors import (
    InvalidArgument,
    NumericalFailure,
)
from kernelcheck.kernels import (
    Linear,
    Polynomial,
    kernel_from_function,
)
from kernelcheck.testing import assert_feature_map
from tests.inputs import point_set_rows

CLEAN = (InvalidArgument, NumericalFailure)


X_FEATURES = np.random.default_rng(3).normal(size=(4, 2))


# ---------------------------------------------------------------------------
# verify.feature_map and assert_feature_map
# ---------------------------------------------------------------------------


FEATURE_MAP_BAD = point_set_rows("verify", lambda Z: verify.feature_map(Linear().features(), Z)) + [
    # verify.feature_map
    (
        "verify-phi",
        lambda: verify.feature_map(3, X_FEATURES),
        InvalidArgument,
        r"^`phi` must be callable, got int 3",
    ),
    (
        "verify-no-kernel",
        lambda: verify.feature_map(lambda Z: Z, X_FEATURES),
        InvalidArgument,
        r"^`kernel` must be given when `phi` does not carry one",
    ),
    (
        "verify-kernel-type",
        lambda: verify.feature_map(lambda Z: Z, X_FEATURES, kernel=np.dot),
        InvalidArgument,
        r"^`kernel` must be a kernelcheck Kernel, got",
    ),
    (
        "verify-Y-dim",
        lambda: verify.feature_map(Linear().features(), X_FEATURES, np.ones((2, 3))),
        InvalidArgument,
        r"^`Y` must have d = 2 columns, got array of shape \(2, 3\)",
    ),
    (
        "verify-ops",
        lambda: verify.feature_map(Linear().features(), X_FEATURES, feature_ops=-1),
        InvalidArgument,
        r"^`feature_ops` must be >= 0, got -1",
    ),
    (
        "verify-phi-raises",
        lambda: verify.feature_map(lambda Z: 1 / 0, X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi` on `X` raised ZeroDivisionError: division by zero",
    ),
    (
        "verify-phi-shape",
        lambda: verify.feature_map(lambda Z: Z[:2], X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi\(X\)` must have shape \(4, D\), got array of shape \(2, 2\)",
    ),
    (
        "verify-phi-1d",
        lambda: verify.feature_map(lambda Z: Z[:, 0], X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi\(X\)` must have shape \(4, D\), got array of shape \(4,\)",
    ),
    (
        "verify-phi-nan",
        lambda: verify.feature_map(lambda Z: Z * np.nan, X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi\(X\)` must be finite",
    ),
    (
        "verify-phi-Y-nan",
        lambda: verify.feature_map(
            lambda Z: Z if Z.shape[0] == 4 else Z * np.nan,
            X_FEATURES,
            np.ones((3, 2)),
            kernel=Linear(),
        ),
        InvalidArgument,
        r"^`phi\(Y\)` must be finite",
    ),
    (
        "verify-phi-complex",
        lambda: verify.feature_map(lambda Z: Z + 1j, X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi` on `X` returned array of shape \(4, 2\) and dtype complex128; expected real",
    ),
    (
        "verify-phi-D",
        lambda: verify.feature_map(
            lambda Z: Z[:, : 2 if Z.shape[0] == 4 else 1],
            X_FEATURES,
            np.ones((3, 2)),
            kernel=Linear(),
        ),
        InvalidArgument,
        r"^`phi` returned 2 features on X but 1 on Y",
    ),
    (
        "verify-overflow",
        lambda: verify.feature_map(Polynomial(2).features(), [[1e200]]),
        NumericalFailure,
        r"^\(Polynomial\(2\)\)\.features\(form='symmetric'\) overflows float64 "
        r"at feature 0 of row 0",
    ),
    (
        "verify-function-kernel",
        lambda: verify.feature_map(
            lambda Z: Z, X_FEATURES, kernel=kernel_from_function(lambda x, y: 0.0)
        ),
        InvalidArgument,
        r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error model",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in FEATURE_MAP_BAD], ids=[c[0] for c in FEATURE_MAP_BAD]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


EXTREME = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1e-300, -5e-324, 1e-160, 1e154, -1e154, 30.0, 700.0]),
)


POINTS = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(
    lambda nd: hnp.arrays(np.float64, nd, elements=EXTREME)
)


@settings(max_examples=40, deadline=None)
@given(Z=POINTS)
def test_verify_feature_map_gives_a_verdict_or_fails_cleanly(finite_kernel, Z):
    """A verdict is never computed from NaN: it is True for exact maps, or a clean error."""
    k = finite_kernel
    Z.setflags(write=False)
    try:
        report = verify.feature_map(k.features(), Z)
    except CLEAN:
        return
    assert math.isfinite(report.max_abs_error) and math.isfinite(report.tolerance.value)
    assert report.passed, str(report)


def test_verify_feature_map_passes_a_correct_map_whose_entries_are_subnormal():
    """The tolerance has an underflow term: sqrt(3) * 5e-324 rounds to 1e-323 (15% off),
    harmless in absolute terms (eta), and the map is correct."""
    Z = np.array([[-5e-324], [-1.4e-45], [700.0], [-5e-324]])
    report = verify.feature_map((3.0 * Linear()).features(), Z)
    assert report.passed, str(report)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["raise", "nan", "shape", "scaled"]))
def test_assert_feature_map_with_a_misbehaving_map(kind):
    def phi(Z):
        if kind == "raise":
            raise RuntimeError("boom")
        if kind == "nan":
            return np.full_like(Z, np.nan)
        if kind == "shape":
            return Z[:1]
        return 2 * Z

    if kind == "scaled":
        expected = r"(?m)^refuted: phi does NOT reproduce Linear\(\)"
        with pytest.raises(AssertionError, match=expected):
            assert_feature_map(phi, X_FEATURES, kernel=Linear())
    else:
        with pytest.raises(InvalidArgument, match=r"^`phi"):
            assert_feature_map(phi, X_FEATURES, kernel=Linear())
