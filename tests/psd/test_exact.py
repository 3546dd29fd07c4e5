"""Exact elimination (``kernelcheck._src.psd.exact``) against rational references (claim C5).

For small integer matrices the reference is independent of Bareiss
elimination: Sylvester's criterion on all principal minors (fractions, by
cofactor expansion) for the kind, and ranks of leading blocks (fraction
Gaussian elimination) for which pivots are positive and which are zero.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.psd.exact import exact_decision
from kernelcheck.psd import Verdict, check_psd


def det(M) -> Fraction:
    n = len(M)
    if n == 0:
        return Fraction(1)
    return sum(
        (-1) ** j * M[0][j] * det([row[:j] + row[j + 1 :] for row in M[1:]])
        for j in range(n)
        if M[0][j]
    )


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
