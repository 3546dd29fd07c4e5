"""check_psd on the matrices users bring (claim C5): near-symmetric Grams, low rank, any size.

* Near-symmetric input: the decided matrix is the exact symmetric part
  ``S = (K + K^T) / 2`` -- never its rounding -- judged against Sylvester's
  criterion on ``S`` in rational arithmetic (one-ulp asymmetric matrices,
  odd subnormals whose halves are inexact), and scikit-learn's Gram matrices
  are accepted at rounding level and refused beyond it with the option named.
* Low rank: ``X X^T`` of rank r is decided PSD within the default tolerance
  by the pivoted-Cholesky certificate, whose bound is checked independently
  (exact elimination of ``K + bound I`` at n = 100, FLINT's ball arithmetic
  at n = 200).
* The exact rung: integer tolerances on matrices with a common factor 2
  (a ``min_exponent`` of 0 was once taken for "none"), and FLINT's exact
  elimination of a rank-deficient integer Gram at tol = 0.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.psd.exact import exact_decision, to_int_matrix
from kernelcheck._src.psd.inputs import ASYMMETRY_ULPS, symmetric_part
from kernelcheck._src.psd.lowrank import lowrank_certificate
from kernelcheck._src.psd.schur import ball_decision, exact_decision_flint, flint
from kernelcheck.errors import InvalidArgument
from kernelcheck.psd import Verdict, check_psd
from tests.psd import sylvester

needs_flint = pytest.mark.skipif(flint() is None, reason="python-flint is not installed")

ETA = 2.0**-1074


def exact_sym(K: np.ndarray) -> list[list[Fraction]]:
    n = K.shape[0]
    return [
        [(Fraction(float(K[i, j])) + Fraction(float(K[j, i]))) / 2 for j in range(n)]
        for i in range(n)
    ]


def kind_of(M: list[list[Fraction]], shift: Fraction = Fraction(0)) -> tuple[bool, bool]:
    """(PD, PSD) of a rational symmetric matrix by Sylvester's criterion."""
    n = len(M)
    A = [[M[i][j] + (shift if i == j else 0) for j in range(n)] for i in range(n)]
    psd = all(
        sylvester.det([[A[i][j] for j in S] for i in S]) >= 0
        for r in range(1, n + 1)
        for S in itertools.combinations(range(n), r)
    )
    pd = all(sylvester.det([row[:r] for row in A[:r]]) > 0 for r in range(1, n + 1))
    return pd, psd


def rayleigh_sym(M: list[list[Fraction]], v) -> Fraction:
    vv = [
        Fraction(float(x)) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else Fraction(x)
        for x in v
    ]
    n = len(vv)
    q = sum(vv[i] * M[i][j] * vv[j] for i in range(n) for j in range(n))
    return q / sum(x * x for x in vv)


def one_ulp_cases() -> list[np.ndarray]:
    """Symmetric matrices at the PD/PSD boundary with one entry moved by one ulp."""
    out = [
        np.array([[1.0, 1.0], [1.0 + 2.0**-52, 1.0]]),
        np.array([[1.0, 1.0], [1.0 - 2.0**-53, 1.0]]),
    ]
    # halving an odd subnormal is inexact: S_01 = 3 eta / 2
    out.append(np.array([[ETA, ETA], [2 * ETA, ETA]]))
    out.append(np.array([[2 * ETA, ETA], [2 * ETA, ETA]]))
    rng = np.random.default_rng(3)
    for n in (2, 3, 4):
        for _ in range(6):
            X = rng.integers(-2, 3, size=(n, n - 1)).astype(float)
            K = X @ X.T  # exactly singular PSD
            i, j = sorted(rng.choice(n, size=2, replace=False))
            K[i, j] = np.nextafter(K[i, j], rng.choice([-np.inf, np.inf]))
            out.append(K)
    return out


CASES = one_ulp_cases()


@pytest.mark.parametrize("i", range(len(CASES)))
@pytest.mark.parametrize("tol", [0.0, None])
def test_one_ulp_asymmetric_decides_the_exact_symmetric_part(i, tol):
    """C5: the verdict is right for ``S = (K + K^T)/2`` exactly (Sylvester on ``S``);
    a witness is one for ``S``; the result says it decided the symmetric part."""
    K = CASES[i]
    r = check_psd(K, tol=tol, symmetrize=True)
    S = exact_sym(K)
    t = Fraction(r.tol.value)
    pd, psd = kind_of(S)
    _, psd_t = kind_of(S, t)
    assert r.symmetrized and "(K + K^T)/2" in r.reason
    if r.verdict is Verdict.POSITIVE_DEFINITE:
        assert pd
    elif r.verdict is Verdict.POSITIVE_SEMIDEFINITE:
        assert psd_t and (psd or tol != 0.0)
    elif r.verdict is Verdict.NOT_PSD:
        assert not psd_t and rayleigh_sym(S, r.witness) < -t
    if tol == 0.0 and K.shape[0] <= 4:
        assert r.verdict is not Verdict.INCONCLUSIVE  # exact arithmetic settles it
        assert (r.verdict is Verdict.POSITIVE_DEFINITE) == pd and r.is_psd == psd


def test_rounding_the_symmetric_part_would_flip_the_verdict():
    """C5: ``fl(0.5 K + 0.5 K^T)`` of ``[[1, 1], [1 + 2^-52, 1]]`` is the singular
    ``[[1, 1], [1, 1]]`` (PSD), but ``S`` has ``lambda_min = -2^-53``: NOT_PSD at tol = 0."""
    K = CASES[0]
    rounded = 0.5 * K + 0.5 * K.T
    assert kind_of(exact_sym(rounded))[1] and not kind_of(exact_sym(K))[1]
    r = check_psd(K, tol=0)
    assert r.verdict is Verdict.NOT_PSD and r.symmetrized


def test_symmetric_part_is_error_free():
    """C5: ``sigma (A + A^T) / 2 = H + L`` exactly with ``||L||_F <= lo_norm``, for
    entries near 1, subnormal, and near overflow (where ``sigma = 1/2``)."""
    rng = np.random.default_rng(0)
    for scale in (1.0, 2.0**-1060, 2.0**1022):
        A = rng.standard_normal((4, 4)) * scale
        part = symmetric_part(A)
        assert np.array_equal(part.H, part.H.T) and np.isfinite(part.H).all()
        lo2 = Fraction(0)
        for i in range(4):
            for j in range(4):
                exact = (
                    Fraction(part.sigma) * (Fraction(float(A[i, j])) + Fraction(float(A[j, i]))) / 2
                )
                lo2 += (exact - Fraction(float(part.H[i, j]))) ** 2
        assert lo2 <= Fraction(part.lo_norm) ** 2


def test_sklearn_gram_is_accepted_at_rounding_level_and_refused_beyond():
    """C5: scikit-learn's ``rbf_kernel`` is symmetric only up to rounding; it is decided
    without options and says so; an asymmetry of 1e-6 is refused naming ``symmetrize=``."""
    pairwise = pytest.importorskip("sklearn.metrics.pairwise")
    X = np.random.default_rng(0).standard_normal((60, 3))
    K = pairwise.rbf_kernel(X)
    r = check_psd(K)
    assert r.is_psd and r.certified
    if not np.array_equal(K, K.T):
        assert r.symmetrized and "rounding level" in r.reason
        assert r.asymmetry <= ASYMMETRY_ULPS * 2.0**-53 * np.abs(K).max()
    bad = K.copy()
    bad[0, 1] += 1e-6
    with pytest.raises(InvalidArgument, match="symmetrize=True"):
        check_psd(bad)
    assert check_psd(bad, symmetrize=True).symmetrized


@pytest.mark.parametrize("r", [1, 5, 50])
def test_low_rank_gram_is_decided_with_a_checked_certificate(r):
    """C5: a rank-r ``X X^T`` (n = 100, or 40 without FLINT; integer X so K is exact)
    is PSD within the default tolerance by the low-rank rung; its bound b is checked
    independently: exact elimination of ``K + b I`` is PSD."""
    n = 100 if flint() is not None else 40
    X = np.random.default_rng(r).integers(-3, 4, size=(n, r)).astype(float)
    K = X @ X.T
    res = check_psd(K)
    assert res.verdict is Verdict.POSITIVE_SEMIDEFINITE and res.certified
    low, _ = res.eigenvalue_interval()
    assert -res.tol.value <= low <= 0
    if res.method == "lowrank":
        b = -res.lower_bound
        M, e = to_int_matrix(K, min(to_int_matrix(K)[1], to_int_matrix(np.array([b]))[1]))
        s, _ = to_int_matrix(np.array([b]), e)
        for i in range(n):
            M[i, i] += s[0]
        decide = exact_decision_flint if flint() is not None else exact_decision
        assert decide(M).kind in ("pd", "psd")


@needs_flint
def test_low_rank_certificate_is_confirmed_by_ball_arithmetic():
    """C5: on a float rank-5 Gram at n = 200 the certificate ``lambda_min >= -b`` is
    confirmed independently: FLINT's ball arithmetic proves ``K + b I`` PD."""
    X = np.random.default_rng(1).standard_normal((200, 5))
    K = X @ X.T
    res = check_psd(K)
    assert (res.verdict, res.method) == (Verdict.POSITIVE_SEMIDEFINITE, "lowrank")
    b = -res.lower_bound
    assert 0 < b <= res.tol.value
    assert ball_decision(K / 2, 2 * b, 256).kind == "pd"  # T = K + 2b I, 2b > b


def test_low_rank_certificate_fails_on_a_not_psd_matrix():
    """C5: the certificate is not a rubber stamp: ``X X^T - 1e-3 I`` is not PSD within
    1e-6 (its bound exceeds the target), and check_psd gives an exact witness."""
    X = np.random.default_rng(2).standard_normal((80, 3))
    K = X @ X.T - 1e-3 * np.eye(80)
    assert not lowrank_certificate(K, 1e-6).ok
    r = check_psd(K, tol=1e-6)
    assert r.verdict is Verdict.NOT_PSD and r.witness_value < -1e-6


@pytest.mark.parametrize("k", [0, 1, 2, 5])
@pytest.mark.parametrize("tol", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("b", [1.5, 2.0, 3.0])
def test_exact_rung_takes_integer_tolerances_on_matrices_with_common_factors(k, tol, b):
    """C5: ``2^k [[1, b], [b, 1]]`` (``lambda_min = 2^k (1 - b)``) with an integer tol:
    the exact rung decides ``K + tol I`` on the common grid (no ValueError)."""
    K = 2.0**k * np.array([[1.0, b], [b, 1.0]])
    r = check_psd(K, tol=tol, method="exact")
    lam = Fraction(2) ** k * (1 - Fraction(b))
    assert r.verdict is not Verdict.INCONCLUSIVE
    assert r.is_psd == (lam >= -tol)


@needs_flint
def test_flint_exact_decides_a_rank_deficient_integer_gram():
    """C5: FLINT's exact elimination decides a 120 x 120 rank-7 integer Gram at tol = 0
    (exactly PSD) and, with one entry of a row made inconsistent, finds an exact witness."""
    X = np.random.default_rng(4).integers(-5, 6, size=(120, 7)).astype(float)
    K = X @ X.T
    r = check_psd(K, tol=0)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "exact", True)
    M, _ = to_int_matrix(K, 0)
    assert exact_decision_flint(M).kind == "psd"
    K2 = K.copy()
    K2[3, 3] -= 1.0  # the Schur complement of the rank-7 part gets a -1 pivot
    r2 = check_psd(K2, tol=0)
    assert r2.verdict is Verdict.NOT_PSD
    assert sylvester.rayleigh(K2, r2.witness) < 0
