"""Unit tests of verify.feature_map and its pytest twin testing.assert_feature_map (claim C4).

The report's numbers are recomputed here from the map and the kernel (the
worst entry, its ratio to the tolerance ``k.error_bound + phi.error_bound``),
a hand-made wrong map must fail with a readable verdict, and bad input is
refused with the argument named.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.core.rounding import unit_roundoff
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import (
    Linear,
    Polynomial,
)
from kernelcheck.testing import assert_feature_map

RNG = np.random.default_rng(11)
X = RNG.normal(size=(5, 3))
Y = RNG.normal(size=(4, 3))
U = unit_roundoff(np.float64)
# Formulas are re-evaluated here in another order: agreement to a few ulp.
RTOL = 64 * U
# The bad-input table's points (7 x 3)
X7 = np.random.default_rng(20261129).normal(size=(7, 3))


def test_feature_map_report_fields_for_a_correct_map():
    k = Polynomial(2, c=1.0)
    phi = k.features()
    report = verify.feature_map(phi, X, Y)
    assert report.passed
    assert (report.n, report.m, report.d, report.D) == (5, 4, 3, k.feature_dim(3))
    F, G = phi(X) @ phi(Y).T, k(X, Y)
    assert report.max_abs_error == float(np.abs(F - G).max())
    i, j = report.worst_index
    assert report.kernel_value == G[i, j] and report.feature_value == F[i, j]
    tol = k.error_bound(X, Y) + phi.error_bound(X, Y)
    assert np.isclose(report.tolerance.value, tol.max(), rtol=RTOL)
    ratio = np.abs(F - G) / tol
    assert np.isclose(report.worst_ratio, ratio.max(), rtol=RTOL) and report.worst_ratio <= 1
    assert report.kernel == repr(k) and report.feature_map == repr(phi)
    assert f"D={report.D}, ops={phi.ops}" in report.tolerance.source
    assert str(report).startswith(f"verified: {phi!r} reproduces {k!r} on 5x4 pairs (D={report.D})")
    assert report.to_dict()["passed"] is True
    same = verify.feature_map(phi, X)
    assert (same.n, same.m) == (5, 5) and same.passed


def test_feature_map_report_for_a_wrong_map_and_its_assert_twin():
    def doubled(Z):
        return 2.0 * np.asarray(Z)

    report = verify.feature_map(doubled, X, Y, kernel=Linear())
    assert not report.passed
    F, G = 4.0 * (X @ Y.T), X @ Y.T
    assert report.max_abs_error == float(np.abs(F - G).max())
    i, j = report.worst_index
    assert report.feature_value == F[i, j] and report.kernel_value == G[i, j]
    assert report.worst_ratio > 1
    assert report.feature_map == "doubled"
    assert str(report).startswith("refuted: doubled does NOT reproduce Linear() on 5x4 pairs (D=3)")
    # default rounding count for a user map: 16 operations per entry
    # a user map on R^3 is modelled with default_feature_ops(3) = 2 * 3 + 8 roundings per entry
    assert "ops=14" in report.tolerance.source
    assert (
        "ops=3" in verify.feature_map(doubled, X, kernel=Linear(), feature_ops=3).tolerance.source
    )
    with pytest.raises(AssertionError, match=r"^refuted: phi\(X\)\[\d\] \. phi\(Y\)\[\d\] = "):
        assert_feature_map(doubled, X, kernel=Linear())
    ok = assert_feature_map(Linear().features(), X, Y)
    assert ok.passed


def test_feature_map_zero_tolerance_entries():
    """Zero features and a zero kernel: tolerance 0, error 0, ratio 0 (not NaN)."""
    Z = np.zeros((2, 2))
    report = verify.feature_map(Linear().features(), Z)
    assert report.passed and report.worst_ratio == 0.0 and report.max_abs_error == 0.0


def test_feature_map_with_an_explicit_kernel_overrides_the_maps_own():
    phi = Polynomial(2).features()
    assert not verify.feature_map(phi, X, kernel=Polynomial(2, c=1.0)).passed
    assert verify.feature_map(phi, X, kernel=Linear() ** 2).passed


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


BAD_GRAM_CALLS = [
    (lambda: verify.feature_map(Linear().features(), X7, kernel="linear"), "`kernel` must be"),
    (
        lambda: verify.feature_map(lambda Z: Z[:, :1].ravel(), X7, kernel=Linear()),
        "must have shape",
    ),
    (lambda: verify.feature_map(lambda Z: Z * np.nan, X7, kernel=Linear()), "must be finite"),
    (lambda: verify.feature_map(lambda Z: 1 / 0, X7, kernel=Linear()), "raised ZeroDivisionError"),
    (lambda: verify.feature_map(lambda Z: Z, X7), "`kernel` must be given"),
    (
        lambda: verify.feature_map(Linear().features(), X7, feature_ops=-1),
        "`feature_ops` must be >= 0",
    ),
]


@pytest.mark.parametrize("call, message", BAD_GRAM_CALLS, ids=[m for _, m in BAD_GRAM_CALLS])
def test_bad_input_raises_invalid_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()
