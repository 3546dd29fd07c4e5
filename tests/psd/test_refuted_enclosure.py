"""A NOT_PSD verdict encloses lambda_min on both sides where that is cheap (claim C5).

A witness bounds ``lambda_min`` from above only; up to ``ENCLOSURE_MAX_N``
the refuted result also carries the eigh rung's estimate with its error
model, so ``eigenvalue_interval()`` is finite, and it contains the exact
smallest eigenvalue (computed here with mpmath at 50 digits).  Beyond the
limit the lower end stays unbounded rather than estimated.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from kernelcheck._src.psd import ladder
from kernelcheck.psd import Verdict, check_psd


def _exact_lambda_min(K: np.ndarray) -> mpmath.mpf:
    with mpmath.workdps(50):
        return min(mpmath.eigsy(mpmath.matrix(K.tolist()), eigvals_only=True))


def test_the_two_by_two_example_is_enclosed_around_minus_one():
    r = check_psd([[1.0, 2.0], [2.0, 1.0]])
    assert r.verdict is Verdict.NOT_PSD and r.method == "cholesky"
    low, high = r.eigenvalue_interval()
    assert math.isfinite(low) and low <= -1.0 <= high
    assert high - low < 1e-12, (low, high)
    assert "lambda_min in [-1, -1]" in str(r)


@pytest.mark.parametrize("seed", range(12))
def test_refuted_matrices_carry_a_finite_interval_that_contains_lambda_min(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 14))
    A = rng.integers(-5, 6, size=(n, n)).astype(float)
    K = A + A.T + np.diag(rng.integers(-3, 8, size=n)).astype(float)
    r = check_psd(K)
    if r.verdict is not Verdict.NOT_PSD:
        pytest.skip(f"seed {seed} drew a PSD matrix")
    low, high = r.eigenvalue_interval()
    exact = _exact_lambda_min(K)
    assert math.isfinite(low) and math.isfinite(high)
    assert mpmath.mpf(low) <= exact <= mpmath.mpf(high), (low, float(exact), high)
    assert high - low <= 2 * r.min_eigenvalue_error * (1 + 1e-12) + 2 * abs(low) * 2**-52


def test_refuted_scaled_and_asymmetric_inputs_are_enclosed_too():
    """The enclosure follows the ladder's scaling (entries near 1e300) and symmetrisation."""
    big = 1e300 * np.array([[1.0, 2.0], [2.0, 1.0]])
    r = check_psd(big)
    low, high = r.eigenvalue_interval()
    assert r.verdict is Verdict.NOT_PSD and low <= -1e300 <= high and math.isfinite(low)
    skew = np.array([[1.0, 2.0], [2.5, 1.0]])
    r = check_psd(skew, symmetrize=True)
    low, high = r.eigenvalue_interval()
    assert r.symmetrized and low <= -1.25 <= high and high - low < 1e-12


def test_the_enclosure_is_computed_up_to_the_limit_only(monkeypatch):
    """At ``ENCLOSURE_MAX_N = 2`` a refuted 2 x 2 is enclosed and a refuted 3 x 3 keeps the
    unbounded lower end of its witness, never an estimate beyond the limit."""
    monkeypatch.setattr(ladder, "ENCLOSURE_MAX_N", 2)
    small = check_psd([[1.0, 2.0], [2.0, 1.0]])
    assert math.isfinite(small.eigenvalue_interval()[0])
    large = check_psd(np.diag([1.0, 1.0, 1.0]) + np.diag([2.0, 2.0], 1) + np.diag([2.0, 2.0], -1))
    low, high = large.eigenvalue_interval()
    assert large.verdict is Verdict.NOT_PSD and low == -math.inf and high < 0
    assert math.isnan(large.min_eigenvalue)
