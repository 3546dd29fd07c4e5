"""``verify.kernel`` on a function without an error model: rounding-level evidence does not
convict (C5).

The Gaussian written ``exp(-(|a|^2 + |b|^2 - 2 a.b) / 2)`` loses ``log10 |a|^2`` digits to
cancellation.  At three nearby points of norm about 16 its exact Gram is positive
definite (``lambda_min = 1.3e-15``, checked in mpmath here), yet the float Gram has a
witness of ``-5.9e-15``, beyond the float tolerance ``3.3e-15``.  Re-evaluated in long
double the witness is positive: rounding.  The same function computing in float64 inside
(no wider evaluation) is "inconclusive", never a violation; a function that is not PSD by
a margin beyond rounding is still refuted, in either case.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.core.outcome import Outcome
from kernelcheck.kernels import kernel_from_function

#: Three nearby points (found by a search for a float witness below -tol).
POINTS = np.array(
    [
        [9.492744851706483, -12.595697038032853],
        [9.492714374054968, -12.59567847807137],
        [9.492701373366645, -12.595670484283476],
    ]
)

LONG_DOUBLE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant
needs_long_double = pytest.mark.skipif(not LONG_DOUBLE, reason="long double is float64 here")


def gaussian_by_norms(A, B):
    """exp(-|a - b|^2 / 2) through |a|^2 + |b|^2 - 2 a.b: a true kernel, badly evaluated."""
    a2 = (A * A).sum(axis=1)[:, None]
    b2 = (B * B).sum(axis=1)[None, :]
    return np.exp(-(a2 + b2 - 2.0 * (A @ B.T)) / 2.0)


def in_float64(f):
    """``f`` computing in float64 whatever it is handed (no wider evaluation)."""

    def g(A, B):
        return f(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64))

    return g


def spiked(c):
    """The Gaussian minus ``c`` on the diagonal: PSD for c <= lambda_min of its Gram only."""

    def f(A, B):
        same = (A[:, None, :] == B[None, :, :]).all(axis=-1)
        d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1)
        return np.exp(-d2 / 2.0) - c * same

    return f


def exact_gaussian_lambda_min(X) -> mpmath.mpf:
    with mpmath.workdps(60):
        n = len(X)
        G = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                d2 = sum((mpmath.mpf(a) - mpmath.mpf(b)) ** 2 for a, b in zip(X[i], X[j]))
                G[i, j] = mpmath.exp(-d2 / 2)
        return min(mpmath.eigsy(G)[0])


def test_the_points_make_a_positive_definite_gram_that_rounds_indefinite():
    assert exact_gaussian_lambda_min(POINTS) > 1e-15
    rep = verify.kernel(kernel_from_function(in_float64(gaussian_by_norms), blocks=True), POINTS)
    assert rep.ladder[0][1] < -rep.tol.value  # the float witness beats the tolerance


@needs_long_double
def test_a_true_kernel_with_a_rounding_level_witness_is_rounding_in_long_double():
    rep = verify.kernel(kernel_from_function(gaussian_by_norms, blocks=True), POINTS)
    assert rep.passed and rep.verdict == "rounding", str(rep)
    assert [p for p, _ in rep.ladder] == ["float64", "longdouble"]
    assert rep.ladder[0][1] < 0 <= rep.ladder[1][1]
    # a Rayleigh quotient is >= lambda_min; the long double one is within its own
    # rounding (hundreds of times smaller than float64's) of being so
    exact = float(exact_gaussian_lambda_min(POINTS))
    assert rep.ladder[1][1] - exact > -(exact - rep.ladder[0][1]) / 100


def test_without_a_wider_evaluation_a_rounding_level_witness_is_inconclusive():
    k = kernel_from_function(in_float64(gaussian_by_norms), blocks=True)
    rep = verify.kernel(k, POINTS)
    assert rep.verdict == "inconclusive" and rep.outcome is Outcome.INCONCLUSIVE
    assert "error_bound=" in rep.reason and "mp_function=" in rep.reason


@pytest.mark.parametrize("wider", [True, False])
def test_a_function_not_psd_by_a_clear_margin_is_still_refuted(wider):
    if wider and not LONG_DOUBLE:
        pytest.skip("long double is float64 here")
    f = kernel_from_function(lambda A, B: -np.abs(A[:, None, 0] - B[None, :, 0]), blocks=True)
    f64 = kernel_from_function(in_float64(lambda A, B: -np.abs(A[:, None, 0] - B[None, :, 0])),
                               blocks=True)  # fmt: skip
    rep = verify.kernel(f if wider else f64, np.array([[0.0], [1.0], [3.0]]))
    assert rep.verdict == "violation" and not rep.passed


def _spike_depths(X):
    """lambda_min of the Gaussian Gram on X (mpmath) and the scale |v|^T |G| |v| / v^T v of
    its eigenvector (float64, close enough for the factor-of-three margins below)."""
    lam = float(exact_gaussian_lambda_min(X))
    G = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 2.0)
    w, V = np.linalg.eigh(G)
    v = V[:, 0]
    return lam, float(np.abs(v) @ np.abs(G) @ np.abs(v) / (v @ v))


@pytest.mark.parametrize("factor, verdict", [(3.0, "violation"), (0.3, "inconclusive")])
def test_without_a_wider_evaluation_the_margin_is_sqrt_u_times_the_scale(factor, verdict):
    """A Gram negative by three times ``sqrt(u) s`` is refuted from float64 alone; by
    0.3 times (far beyond the float tolerance, still rounding-level for an unknown
    formula) it is inconclusive."""
    X = np.array([[0.0, 0.0], [0.7, 0.1], [1.5, -0.4]])
    lam, s = _spike_depths(X)
    c = lam + factor * math.sqrt(2.0**-53) * s
    rep = verify.kernel(kernel_from_function(in_float64(spiked(c)), blocks=True), X)
    assert rep.verdict == verdict, str(rep)


@needs_long_double
def test_in_long_double_a_violation_just_beyond_the_tolerance_is_refuted():
    X = np.array([[0.0, 0.0], [0.7, 0.1], [1.5, -0.4]])
    lam, _ = _spike_depths(X)
    tol = verify.kernel(kernel_from_function(spiked(lam), blocks=True), X).tol.value
    rep = verify.kernel(kernel_from_function(spiked(lam + 3.0 * tol), blocks=True), X)
    assert rep.verdict == "violation" and [p for p, _ in rep.ladder] == ["float64", "longdouble"]
    assert verify.kernel(kernel_from_function(spiked(lam + 0.3 * tol), blocks=True), X).passed
