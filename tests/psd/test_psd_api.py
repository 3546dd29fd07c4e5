"""The documented outputs of check_psd, default_tolerance, assert_psd, the exact helpers and
Nystrom, each against an independent computation (claims C5, C6).

``default_tolerance`` is compared with its docstring formula evaluated in
100-digit mpmath; messages are read back and compared with the result fields;
exact quadratic forms are compared with Python fractions.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from kernelcheck._src.psd.exact import quadratic_form, vector_to_ints
from kernelcheck._src.psd.ladder import MPMATH_MAX_N, default_tolerance
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.kernels import Linear
from kernelcheck.psd import Nystrom, Verdict, check_psd, mercer_features
from kernelcheck.testing import assert_psd


def reference_tolerance(K: np.ndarray, dtype) -> mpmath.mpf:
    """``2 gamma_(n+2) max(||K||_F, sum |K_ii|) + n (n + 2) eta`` at 100 digits."""
    with mpmath.workdps(100):
        n = K.shape[0]
        fi = np.finfo(np.dtype(dtype))
        u = mpmath.mpf(float(fi.eps)) / 2
        eta = mpmath.mpf(float(fi.smallest_subnormal))
        g = (n + 2) * u / (1 - (n + 2) * u)
        fro = mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in K.ravel()))
        tr = mpmath.fsum(abs(mpmath.mpf(float(x))) for x in np.diagonal(K))
        return 2 * g * max(fro, tr) + n * (n + 2) * eta


TOL_CASES = {
    "random": (np.random.default_rng(0).normal(size=(5, 5)), np.float64),
    "trace dominates": (np.eye(7), np.float64),
    "subnormal": (np.diag([3e-322, 5e-323]), np.float64),
    "float32 subnormal": (np.diag([1e-45, 3e-45, 0.0]).astype(np.float32), np.float32),
    "float32": (np.arange(9.0).reshape(3, 3).astype(np.float32), np.float32),
    "float32 diagonal": (np.diag(np.arange(1.0, 8.0) / 3).astype(np.float32), np.float32),
    "near overflow": (np.diag([1.5e308, 1.5e308, 1e308]), np.float64),
}


@pytest.mark.parametrize("name", sorted(TOL_CASES))
def test_default_tolerance_is_its_documented_formula(name):
    """C5: ``default_tolerance`` equals its formula (unit roundoff and ``eta`` of the
    input dtype) to within the rounding of its own evaluation (``(n + 8) u``
    relative, plus ``2 eta``), also when ``||K||_F`` or the trace overflow; the
    source text states ``n`` and the ``u`` used."""
    K, dtype = TOL_CASES[name]
    K = (K + K.T) / 2 if name in ("random", "float32") else K
    t = default_tolerance(K, dtype=dtype)
    ref = reference_tolerance(np.asarray(K, dtype=np.float64), dtype)
    n = K.shape[0]
    eta = float(np.finfo(np.dtype(dtype)).smallest_subnormal)
    assert math.isfinite(t.value)
    assert abs(mpmath.mpf(t.value) - ref) <= (n + 8) * 2.0**-53 * ref + 2 * eta
    u_text = float(re.search(r"u = ([0-9.e+-]+)", t.source).group(1))
    assert u_text == float(f"{float(np.finfo(np.dtype(dtype)).eps) / 2:.3g}")
    assert f"n = {n}" in t.source
    r = check_psd(K)
    assert r.tol.value == default_tolerance(K, dtype=K.dtype).value


def test_inconclusive_result_fields_and_text():
    """C5: an INCONCLUSIVE result is uncertified (``False``, not just falsy), its
    method is the last rung tried, its interval is unbounded when no estimate
    exists, and ``str`` is the verdict line followed by the reason."""
    r = check_psd(np.eye(MPMATH_MAX_N + 1), tol=0, method="mpmath")
    assert r.verdict is Verdict.INCONCLUSIVE and r.certified is False and r.is_psd is False
    assert r.eigenvalue_interval() == (-math.inf, math.inf)
    text = str(r)
    assert text.startswith("INCONCLUSIVE (") and text.endswith(": " + r.reason)
    assert r.symmetrized is False
    # at tol = 0 no certificate of K + tol I is attempted; the method is the last rung
    n = MPMATH_MAX_N + 2
    X = np.random.default_rng(1).integers(-2, 3, size=(n, 2)).astype(float)
    r = check_psd(X @ X.T, tol=0, max_exact_n=4)
    assert r.verdict is Verdict.INCONCLUSIVE and r.certified is False
    assert "cholesky+tol" not in r.rungs and r.method == r.rungs[-1]
    low, high = r.eigenvalue_interval()
    assert low == r.min_eigenvalue - r.min_eigenvalue_error
    assert high == r.min_eigenvalue + r.min_eigenvalue_error


def test_asymmetry_is_found_far_from_the_first_block():
    """C5: exact symmetry is checked over the whole matrix (n = 600, one asymmetric
    pair at (550, 590), beyond the first 512 rows and columns)."""
    K = np.eye(600)
    K[550, 590] = 1e-3
    with pytest.raises(InvalidArgument, match=r"at index \(550, 590\)|at index \(590, 550\)"):
        check_psd(K)


def _witness_with_support(k: int) -> np.ndarray:
    """Leading ``k x k`` block ``I - (2 / k) J`` (eigenvalue -1 along the all-ones
    direction) and a decoupled ``4 I``: NOT_PSD with a witness inside the block."""
    n = k + 2
    K = np.eye(n) * 4.0
    K[:k, :k] = np.eye(k) - 2.0 / k * np.ones((k, k))
    return K


@pytest.mark.parametrize("k,tol", [(2, 0.0), (8, 0.0), (12, 0.25), (17, 0.0)])
def test_assert_psd_message_quotes_the_witness_support_and_margin(k, tol):
    """C5: the AssertionError of ``assert_psd`` lists the first 8 indices of the
    witness support, with ``...`` exactly when the support is larger, and the
    margin below ``-tol`` is ``-(witness_value + tol)``."""
    K = _witness_with_support(k)
    with pytest.raises(AssertionError) as info:
        assert_psd(K, tol=tol)
    r = check_psd(K, tol=tol)
    msg = str(info.value)
    m = re.search(r"on indices \[([0-9, ]*)\](\.\.\.)? has", msg)
    assert m is not None
    support = np.flatnonzero(np.asarray([x != 0 for x in r.witness]))
    assert [int(x) for x in m.group(1).split(",")] == support[:8].tolist()
    assert (m.group(2) is not None) == (support.size > 8)
    margin = float(re.search(r"below -tol by ([0-9.e+-]+);", msg).group(1))
    assert margin == float(f"{-(r.witness_value + r.tol.value):.3g}")


def test_quadratic_form_is_exact_on_large_supports_and_integers():
    """C5: ``v^T K v`` exactly (fractions as reference) for a float vector whose
    support spans more than one block of 64 rows, for integer vectors whose
    products exceed 64 bits, and 0 for the zero vector."""
    rng = np.random.default_rng(2)
    n = 70
    K = rng.normal(size=(n, n))
    K = K + K.T
    v = rng.normal(size=n)
    ref = sum(
        Fraction(float(v[i])) * Fraction(float(K[i, j])) * Fraction(float(v[j]))
        for i in range(n)
        for j in range(n)
    )
    assert quadratic_form(K, v) == ref
    assert quadratic_form(K, np.zeros(n)) == 0
    big = np.diag([2.0**50, 3.0 * 2.0**50])
    w = [2**40 + 1, -(2**41) + 3]
    ints, scale = vector_to_ints([Fraction(x) for x in w])
    assert [int(x) * scale for x in ints] == w
    exact = 2**50 * w[0] ** 2 + 3 * 2**50 * w[1] ** 2
    assert quadratic_form(big, [Fraction(x) for x in w]) == exact
    assert quadratic_form(big, np.array(w, dtype=object)) == exact
    # plain Python floats are taken exactly too
    ints, scale = vector_to_ints([0.5, -1.25, 3.0])
    assert [int(x) * scale for x in ints] == [Fraction(1, 2), Fraction(-5, 4), Fraction(3)]


def test_mercer_features_refuse_an_overflowing_error_bound():
    """C6: eigenvalues that fit in float64 but ``||K||_F`` (hence the error bound)
    that does not: ``NumericalFailure``, not a verdict with an infinite bound."""
    with pytest.raises(NumericalFailure, match="scale K by a power of two"):
        mercer_features(np.diag([1.5e308, 1.5e308]))


def test_nystrom_of_a_rank_zero_kernel_and_default_second_argument():
    """C6: the zero kernel on 3 landmarks in R^2 has rank 0: features of width 0 for
    any points; ``approximate_kernel(Y)`` is ``approximate_kernel(Y, Y)``."""
    X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])

    def zero(A, B=None):
        return np.zeros((A.shape[0], A.shape[0] if B is None else B.shape[0]))

    phi = Nystrom(zero, X)
    Y = np.array([[3.0, -1.0], [0.5, 0.5], [1.0, 2.0], [0.0, 1.0]])
    assert phi.rank == 0 and phi(Y).shape == (4, 0)
    lin = Nystrom(Linear(), X)
    assert np.array_equal(lin.approximate_kernel(Y), lin.approximate_kernel(Y, Y))
    assert np.allclose(lin.approximate_kernel(Y), Y @ Y.T)


@pytest.mark.parametrize("n", [2, 5, 9])
def test_eigh_error_bound_is_the_documented_backward_error(n):
    """C5: the eigh rung reports ``gamma_{p(n)} ||K||_F`` with ``p(n) = 64 (n + 2)``
    (the documented model, ``docs/psd.md``) as the error of its estimate; here
    ``||K||_F`` is summed in 50-digit mpmath, and the bound covers the distance to
    ``lambda_min`` of ``Q diag(lambda) Q^T`` up to the rounding of forming ``K``."""
    rng = np.random.default_rng(n)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.linspace(-1.0, 2.0, n)
    K = (Q * lam) @ Q.T
    K = (K + K.T) / 2
    r = check_psd(K, tol=0, method="eigh")
    with mpmath.workdps(50):
        fro = float(mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in K.ravel())))
    p = 64 * (n + 2)
    g = p * 2.0**-53 / (1 - p * 2.0**-53)
    assert abs(r.min_eigenvalue_error - g * fro) <= 4 * 2.0**-53 * g * fro
    assert abs(r.min_eigenvalue - lam[0]) <= r.min_eigenvalue_error


def test_mpmath_rung_runs_at_its_size_limit():
    """C5: ``n = MPMATH_MAX_N`` is within the mpmath rung's limit (``n <= 100``): a PD
    diagonal matrix of that size is certified there."""
    K = np.diag(np.arange(1.0, MPMATH_MAX_N + 1))
    r = check_psd(K, tol=0, method="mpmath")
    assert (r.verdict, r.method, r.rungs) == (Verdict.POSITIVE_DEFINITE, "mpmath", ("mpmath",))


def test_nystrom_shape_messages_name_the_expected_and_the_returned_shape():
    """C6: a kernel returning a block of the wrong shape is refused with a message that
    states the shape expected (``(m, n)`` for ``m`` new points and ``n`` landmarks,
    ``(n, n)`` at construction) and describes the shape returned."""
    X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [2.0, 1.0]])  # n = 4 landmarks, d = 2
    Y = np.array([[3.0, -1.0], [0.5, 0.5], [1.0, 2.0]])  # m = 3

    def wrong_cross(A, B=None):
        if B is None:
            return A @ A.T
        return np.ones((A.shape[0], B.shape[0] + 1))

    with pytest.raises(InvalidArgument) as info:
        Nystrom(wrong_cross, X)(Y)
    msg = str(info.value)
    assert "must have shape (3, 4)" in msg and "(3, 5)" in msg.split("got", 1)[1]

    def wrong_gram(A, B=None):
        return np.ones((A.shape[0], A.shape[0] + 1))

    with pytest.raises(InvalidArgument) as info:
        Nystrom(wrong_gram, X)
    msg = str(info.value)
    assert "(4, 4)" in msg and "(4, 5)" in msg.split("got", 1)[1]


def test_extend_accepts_the_landmarks_the_features_came_from_after_truncation():
    """C6: with ``tol = 0.5`` the eigenvalue 0.3 of ``diag(1, 0.3)`` is dropped, so
    ``Phi Phi^T`` differs from ``K`` by 0.3 (within the bound); ``extend`` on the same
    landmarks must still accept them (their Gram matrix is the decomposed ``K``)."""
    X = np.array([[1.0, 0.0], [0.0, 0.3**0.5]])
    F = mercer_features(Linear()(X), tol=0.5)
    assert F.rank == 1 and F.residual > F.error_bound / 2
    phi = F.extend(Linear(), X)
    assert phi.rank == 1 and np.allclose(phi(X), F.phi)


@pytest.mark.parametrize("tol", [0, 0.0, 1e-3, 2])
def test_tolerance_source_says_where_the_value_came_from(tol):
    """C5: a numeric ``tol`` is recorded with its source: the exact question for 0,
    the caller otherwise (the default's source states its formula)."""
    r = check_psd(np.eye(2), tol=tol)
    assert r.tol.value == tol
    if tol == 0:
        assert "tol = 0" in r.tol.source and "caller" not in r.tol.source
    else:
        assert "caller" in r.tol.source
    assert "gamma" in check_psd(np.eye(2)).tol.source
