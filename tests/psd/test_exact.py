"""Exact elimination (``kernelcheck._src.psd.exact``) and exact witnesses (claim C5).

References are rational and independent of Bareiss elimination: for small
integer matrices Sylvester's criterion on all principal minors (fractions, by
cofactor expansion) for the kind, ranks of leading blocks (fraction Gaussian
elimination) for which pivots are positive and which are zero, and exact
quadratic forms and Rayleigh quotients in fractions for every witness.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from kernelcheck._src.psd.exact import exact_decision, quadratic_form, to_int_matrix, vector_to_ints
from kernelcheck.psd import Verdict, check_psd
from tests.psd import sylvester
from tests.psd.oracle import assert_witness, exact_kind
from tests.psd.sylvester import det, rayleigh


def rank(M) -> int:
    A = [[Fraction(x) for x in row] for row in M]
    r = 0
    cols = len(A[0]) if A else 0
    for c in range(cols):
        p = next((i for i in range(r, len(A)) if A[i][c] != 0), None)
        if p is None:
            continue
        A[r], A[p] = A[p], A[r]
        for i in range(len(A)):
            if i != r and A[i][c] != 0:
                f = A[i][c] / A[r][c]
                A[i] = [a - f * b for a, b in zip(A[i], A[r], strict=True)]
        r += 1
    return r


def kind(M) -> str:
    n = len(M)
    F = [[Fraction(int(x)) for x in row] for row in M]
    psd = all(
        det([[F[i][j] for j in S] for i in S]) >= 0
        for r in range(1, n + 1)
        for S in itertools.combinations(range(n), r)
    )
    if not psd:
        return "not_psd"
    return "pd" if det(F) > 0 else "psd"


def corpus():
    rng = np.random.default_rng(5)
    out = []
    for _ in range(60):
        n = int(rng.integers(1, 6))
        r = int(rng.integers(0, n + 1))
        X = rng.integers(-2, 3, size=(n, r))
        D = np.diag(rng.choice([-1, 1, 1, 1], size=r))
        M = X @ D @ X.T
        z = rng.random(n) < 0.25  # zero rows and columns in the middle
        M[z, :] = 0
        M[:, z] = 0
        out.append(M)
    # a zero pivot whose row is non-zero, after a positive pivot, with negative coupling
    out.append(np.array([[1, 1, 0], [1, 1, -3], [0, -3, 2]]))
    out.append(np.array([[1, 1, 0], [1, 1, 3], [0, 3, -5]]))
    out.append(np.array([[0, 0, 0], [0, 1, 2], [0, 2, 1]]))  # zero row, then indefinite
    out.append(np.array([[0, 0, 2], [0, 1, 0], [2, 0, 1]]))  # zero pivot coupled further on
    out.append(np.array([[4, 2, 2], [2, 1, 1], [2, 1, 1]]))  # rank 1
    # common factors: the integer witness must still come back primitive
    out += [4 * M for M in out[-5:-1]] + [2 * out[-2], 6 * out[-2], 2 * out[30]]
    return [np.array([[int(x) for x in row] for row in M], dtype=object) for M in out]


CORPUS = corpus()


# ---------------------------------------------------------------------------
# exact_decision and the exact rung against Sylvester's criterion
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("i", range(len(CORPUS)))
def test_exact_decision_matches_sylvester_and_leading_ranks(i):
    """C5: kind from Sylvester's criterion; for PD / PSD, pivot ``k`` is positive exactly
    when the leading ``k + 1`` block has higher rank than the leading ``k`` block
    (else zero); for NOT_PSD the integer witness ``w`` has ``w^T M w < 0``, Python
    integer entries with no common factor, and lives on the eliminated pivots plus
    the one or two indices where elimination stopped."""
    M = CORPUS[i]
    n = M.shape[0]
    dec = exact_decision(M)
    assert dec.kind == kind(M)
    ranks = [rank([list(row[:k]) for row in M[:k]]) if k else 0 for k in range(n + 1)]
    if dec.kind in ("pd", "psd"):
        assert list(dec.positives) == [k for k in range(n) if ranks[k + 1] > ranks[k]]
        assert list(dec.zeros) == [k for k in range(n) if ranks[k + 1] == ranks[k]]
        assert dec.vector is None
        return
    w = dec.vector
    assert all(type(x) is int for x in w)
    q = sum(w[a] * int(M[a, b]) * w[b] for a in range(n) for b in range(n))
    assert q < 0
    assert math.gcd(*[int(x) for x in w]) == 1
    support = {a for a in range(n) if w[a] != 0}
    extra = support - set(dec.positives)
    assert 1 <= len(extra) <= 2 and min(extra) > max(dec.positives, default=-1)
    # the positives are an initial run of pivots the reference also calls positive
    for k in dec.positives:
        assert ranks[k + 1] > ranks[k]


@pytest.mark.parametrize("i", range(len(CORPUS)))
def test_exact_rung_verdict_and_witness(i):
    """C5: ``method="exact"`` gives the Sylvester verdict with a witness checked in
    fractions here; the zero-pivot count in the reason is ``n - rank``."""
    M = CORPUS[i]
    K = np.array(M, dtype=float)
    n = K.shape[0]
    r = check_psd(K, tol=0, method="exact")
    expected = {
        "pd": Verdict.POSITIVE_DEFINITE,
        "psd": Verdict.POSITIVE_SEMIDEFINITE,
        "not_psd": Verdict.NOT_PSD,
    }[kind(M)]
    assert (r.verdict, r.method, r.certified) == (expected, "exact", True)
    if expected is Verdict.NOT_PSD:
        v = [Fraction(int(x)) if not isinstance(x, float) else Fraction(x) for x in r.witness]
        q = sum(v[a] * int(M[a, b]) * v[b] for a in range(n) for b in range(n))
        assert q < 0
        assert r.witness_value == float(q / sum(x * x for x in v))
    elif expected is Verdict.POSITIVE_SEMIDEFINITE and np.any(K):
        zeros = int(r.reason.split("(")[1].split(" zero")[0])
        assert zeros == n - rank([list(row) for row in M])


@pytest.mark.parametrize("t", [0.5, 2.0, 8.0])
def test_exact_rung_with_tolerance_decides_k_plus_tol(t):
    """C5: with ``tol > 0`` an exactly indefinite ``K`` is PSD within tol iff
    ``K + tol I`` is PSD (Sylvester on the shifted matrix); otherwise a witness below ``-tol``."""
    K = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])  # lambda_min = -1
    r = check_psd(K, tol=t, method="exact")
    shifted = np.array(K + t * np.eye(3))
    ok = all(
        det([[Fraction(float(shifted[a, b])) for b in S] for a in S]) >= 0
        for k in range(1, 4)
        for S in itertools.combinations(range(3), k)
    )
    if ok:
        assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "exact", True)
    else:
        assert r.verdict is Verdict.NOT_PSD
        v = [Fraction(float(x)) for x in r.witness]
        q = sum(v[a] * Fraction(float(K[a, b])) * v[b] for a in range(3) for b in range(3))
        assert q / sum(x * x for x in v) < -Fraction(t)


def test_exact_with_positive_tolerance():
    K = np.diag([1.0, -1e-10])
    assert check_psd(K, tol=1e-9, method="exact").verdict is Verdict.POSITIVE_SEMIDEFINITE
    r = check_psd(K, tol=1e-11, method="exact")
    assert_witness(K, r)


@pytest.mark.parametrize("i", range(len(sylvester.CORPUS)))
def test_exact_decision_and_quadratic_form_against_fractions(i):
    K = sylvester.CORPUS[i]
    M, e = to_int_matrix(K)
    assert all(
        Fraction(int(M[a, b])) * Fraction(2) ** e == Fraction(float(K[a, b]))
        for a in range(K.shape[0])
        for b in range(K.shape[0])
    )
    dec = exact_decision(M)
    pd, psd = sylvester.pd_psd(K)
    assert dec.kind == ("pd" if pd else "psd" if psd else "not_psd")
    if dec.kind == "not_psd":
        assert sylvester.rayleigh(K, dec.vector) < 0
    v = np.linspace(-1.0, 1.0, K.shape[0]) + 0.125
    q = sum(
        Fraction(float(v[a])) * Fraction(float(K[a, b])) * Fraction(float(v[b]))
        for a in range(K.shape[0])
        for b in range(K.shape[0])
    )
    assert quadratic_form(K, v) == q
    assert quadratic_form(K, [Fraction(x) for x in v]) == q


@pytest.mark.parametrize("c", [-5.0, 0.0, 1.0, 2.0, 100.0, 1e6])
def test_zero_pivot_witnesses_are_exact(c):
    # after eliminating the first pivot the Schur complement is [[0, 1], [1, c - 1]]:
    # a zero pivot with a non-zero entry in its row, so K is not PSD for every c
    K = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 2.0], [1.0, 2.0, c]])
    M, _ = to_int_matrix(K)
    dec = exact_decision(M)
    assert dec.kind == "not_psd" and dec.positives == (0,)
    assert sylvester.rayleigh(K, dec.vector) < 0
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.NOT_PSD and sylvester.rayleigh(K, r.witness) < 0


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_exact_rung_counts_the_zero_pivots_of_a_singular_psd_matrix(rank):
    """C5: for an integer PSD matrix ``X X^T`` of rank ``r`` (n = 4), the exact rung
    reports PSD and singular with ``n - r`` zero pivots (rank from NumPy on the
    integer factor, exact here)."""
    rng = np.random.default_rng(rank)
    X = rng.integers(-3, 4, size=(4, rank)).astype(float)
    while np.linalg.matrix_rank(X) < rank:
        X = rng.integers(-3, 4, size=(4, rank)).astype(float)
    K = X @ X.T if rank else np.zeros((4, 4))
    if rank == 0:
        K[0, 0] = 0.0
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    if rank:
        zeros = int(re.search(r"\((\d+) zero pivot", r.reason).group(1))
        assert zeros == 4 - rank


def test_exact_rung_witness_is_float_when_a_float_vector_does_it():
    """C5: the exact rung's integer witness of a small integer matrix is returned as a
    float64 vector (documented: float64 when a float vector does it), still exact."""
    K = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.NOT_PSD and r.witness.dtype == np.float64
    assert rayleigh(K, r.witness) < 0


# ---------------------------------------------------------------------------
# exact helpers: quadratic forms and integer vectors
# ---------------------------------------------------------------------------


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


def test_vector_to_ints_for_every_input_kind():

    for v in (
        np.array([0.5, -0.25, 3.0]),
        [Fraction(1, 2), Fraction(-1, 4), 3],
        [mpmath.mpf(0.5), mpmath.mpf(-0.25), mpmath.mpf(3)],
        [1, -2, 3],
    ):
        w, s = vector_to_ints(v)
        got = [Fraction(int(x)) * s for x in w]
        ref = [Fraction(float(x)) if not isinstance(x, Fraction) else x for x in v]
        assert got == ref


def test_vector_to_ints_keeps_mpf_digits_beyond_float64():

    with mpmath.workprec(200):
        x = mpmath.mpf(1) / 3
        w, s = vector_to_ints([x, mpmath.mpf(0)])
        got = Fraction(int(w[0])) * s
        assert got != Fraction(float(x))  # more than 53 bits survive
        num, den = got.numerator, got.denominator
        assert mpmath.mpf(num) / mpmath.mpf(den) == x
    with pytest.raises(ValueError, match="non-finite mpf"):
        vector_to_ints([mpmath.mpf("inf")])


def test_the_exact_rung_keeps_its_size_limit_for_wide_integers():
    """Without ``max_exact_n``, a float Gram whose integer form is wide (random float
    entries: far more than 64 bits) keeps ``EXACT_MAX_N`` (64), not FLINT's small-integer
    limit: at n = 65 the forced exact rung declines and says which limit applied."""
    from kernelcheck._src.psd.exact import EXACT_MAX_N

    rng = np.random.default_rng(3)
    X = rng.standard_normal((EXACT_MAX_N + 1, 2))
    r = check_psd(X @ X.T, tol=0, method="exact")
    assert r.verdict is Verdict.INCONCLUSIVE
    assert f"max_exact_n = {EXACT_MAX_N}" in r.reason


@pytest.mark.parametrize("t", [0.0, 0.0125, 0.25])
def test_the_exact_rung_decides_the_exact_symmetric_part(t):
    """``symmetrize=True`` with the exact rung: the integer form is ``2 (S + t I)`` of
    ``S = (K + K^T) / 2``, decided against elimination in fractions (``lambda_min(S)``
    is about -0.0156: ``t = 0.0125`` is just short of it, ``0.25`` well past it)."""
    K = np.array([[1.0, 3.0, 0.0], [-1.0, 1.0, 0.5], [0.0, 0.0, 2.0]])
    S = [[Fraction(K[i, j]) / 2 + Fraction(K[j, i]) / 2 for j in range(3)] for i in range(3)]
    r = check_psd(K, tol=t, method="exact", symmetrize=True)
    assert r.symmetrized and r.method == "exact" and r.certified
    kind = exact_kind(S)
    if kind == "not_psd" and exact_kind(S, shift=Fraction(t)) == "not_psd":
        assert r.verdict is Verdict.NOT_PSD
        v = [Fraction(float(x)) for x in r.witness]
        q = sum(v[i] * S[i][j] * v[j] for i in range(3) for j in range(3))
        assert q < -Fraction(t) * sum(x * x for x in v)
    else:
        assert r.is_psd


# ---------------------------------------------------------------------------
# the exact rung and its bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", [0.0, 0.5, 0.7, 1.0, 1.5])
def test_the_exact_rung_decides_k_then_k_plus_tol_with_its_bounds(t):
    """``[[1, 2], [2, 1]]`` (``lambda_min = -1`` exactly): NOT_PSD with a witness below
    ``-tol`` for ``tol < 1``, PSD within ``tol`` (``K + tol I`` PSD, singular at
    ``tol = 1``) with the proven lower bound ``-tol`` otherwise."""
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    r = check_psd(K, tol=t, method="exact")
    assert r.certified and r.method == "exact" and r.rungs == ("exact",)
    kind = exact_kind(K.tolist(), shift=Fraction(t))
    if kind == "not_psd":
        assert_witness(K, r)
        assert r.upper_bound >= -1.0 and r.lower_bound == -math.inf
    else:
        assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE
        assert r.lower_bound == -t <= -1.0 and "K + tol I" in r.reason


@pytest.mark.parametrize("t", [0.0, 0.25])
def test_the_exact_rung_on_psd_pd_and_zero_matrices_sets_proven_bounds(t):
    """Singular PSD (``lambda_min = 0``: both bounds 0), PD (lower bound 0) and the
    zero matrix (both bounds 0), each against elimination in fractions."""
    sing = np.ones((3, 3))
    r = check_psd(sing, tol=t, method="exact")
    assert exact_kind(sing.tolist()) == "psd"
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.lower_bound == 0.0 == r.upper_bound and "2 zero pivot(s)" in r.reason
    pd = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    assert exact_kind(pd.tolist()) == "pd"
    r = check_psd(pd, tol=t, method="exact")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.lower_bound == 0.0
    r = check_psd(np.zeros((2, 2)), tol=t, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.lower_bound == 0.0 == r.upper_bound and "zero matrix" in r.reason
