"""FLINT's exact block elimination (``schur.exact_decision_flint``, claim C5) against fractions.

``check_psd`` uses FLINT's exact rung from n = 9 (below it, the Python
elimination of :mod:`kernelcheck._src.psd.exact`), so the matrices here are
9 x 9 or larger (one 2 x 2 is decided by the rung directly).  The corpus
reaches each branch of the block elimination: a positive definite matrix,
singular Grams whose Schur complement becomes the zero matrix (in one block
or in two, 2^40 apart), a negative or zero diagonal that appears only after a
block is eliminated (the witness is then lifted through the blocks), and
blocks of several sizes.  The reference is exact elimination in fractions
(:func:`tests.psd.oracle.exact_kind`) and an exact rank; every witness is
checked as an integer quadratic form.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import assert_witness, exact_kind

flint = pytest.importorskip("flint")


def exact_rank(M) -> int:
    A = [[Fraction(int(x)) for x in row] for row in M]
    n, rank, col = len(A), 0, 0
    for col in range(n):
        piv = next((r for r in range(rank, n) if A[r][col] != 0), None)
        if piv is None:
            continue
        A[rank], A[piv] = A[piv], A[rank]
        for r in range(rank + 1, n):
            f = A[r][col] / A[rank][col]
            if f:
                A[r] = [a - f * b for a, b in zip(A[r], A[rank])]
        rank += 1
    return rank


def _corpus() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(17)
    out: dict[str, np.ndarray] = {}
    B = rng.integers(-3, 4, size=(9, 9))
    out["pd"] = B @ B.T + np.eye(9, dtype=np.int64)
    for r in (1, 3, 5):
        C = rng.integers(-3, 4, size=(10, r))
        out[f"rank-{r}"] = C @ C.T
    E = np.eye(9, dtype=np.int64)
    E[0, 1] = E[1, 0] = 2  # [[1, 2], [2, 1]] (+) I_7: the Schur complement 1 - 4 < 0
    out["negative-after-block"] = E
    Z = np.eye(9, dtype=np.int64)
    Z[7, 7] = Z[8, 8] = 0
    Z[7, 8] = Z[8, 7] = 1  # I_7 (+) [[0, 1], [1, 0]]: a zero diagonal with a non-zero row
    out["zero-diagonal-after-block"] = Z
    G = rng.integers(-2, 3, size=(9, 4))
    H = G @ G.T
    H[8, :] = H[:, 8] = 0
    H[8, 0] = H[0, 8] = 1  # a zero diagonal entry coupled to the rest: not PSD
    out["coupled-zero-row"] = H
    A = rng.integers(-4, 5, size=(9, 9))
    out["indefinite"] = A + A.T
    c1 = np.array([2**20, 3 * 2**20, 0, 2**21, 0, 0, 2**20, 0, 0], dtype=np.int64)
    c2 = np.array([0, 1, 2, 0, -1, 3, 1, 1, 0], dtype=np.int64)
    out["graded-rank-2"] = np.outer(c1, c1) + np.outer(c2, c2)  # pivots 2^40 apart: two blocks
    out["small-indefinite"] = np.array([[1, 2], [2, 1]], dtype=np.int64)  # diagonal max 1
    D = np.diag(np.arange(1, 10, dtype=np.int64) ** 6)  # pivots over 54 bits: several blocks
    D[0, 8] = D[8, 0] = 1
    out["graded"] = D
    return out


CORPUS = _corpus()


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_flint_exact_decision_agrees_with_fractions(name):
    from kernelcheck._src.psd.schur import exact_decision_flint

    M = CORPUS[name]
    kind = exact_kind(M.tolist())
    dec = exact_decision_flint(M)
    assert dec.kind == kind
    n = M.shape[0]
    if kind == "not_psd":
        v = [int(x) for x in dec.vector]
        q = sum(v[i] * int(M[i, j]) * v[j] for i in range(n) for j in range(n))
        assert q < 0
    elif kind == "psd":
        rank = exact_rank(M)
        assert len(dec.positives) == rank and len(dec.zeros) == n - rank
    else:
        assert len(dec.positives) == n


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_check_psd_exact_on_flint_sizes_agrees_with_fractions(name):
    K = CORPUS[name].astype(np.float64)
    kind = exact_kind(K.tolist())
    r = check_psd(K, tol=0, method="exact")
    assert r.method == "exact" and r.certified
    expected = {
        "pd": Verdict.POSITIVE_DEFINITE,
        "psd": Verdict.POSITIVE_SEMIDEFINITE,
        "not_psd": Verdict.NOT_PSD,
    }[kind]
    assert r.verdict is expected
    if kind == "not_psd":
        assert_witness(K, r)


def test_the_zero_matrix_block_of_a_scaled_gram_is_psd_within_a_tolerance():
    """``K`` not PSD, ``K + tol I`` PSD (singular) exactly: the second exact decision."""
    Z = CORPUS["zero-diagonal-after-block"].astype(np.float64)
    t = 1.0  # lambda_min(K) = -1 exactly: K + I is PSD and singular
    assert exact_kind(Z.tolist()) == "not_psd"
    assert exact_kind(Z.tolist(), shift=Fraction(t)) == "psd"
    r = check_psd(Z, tol=t, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.lower_bound == -t


def test_flint_exact_rung_on_entries_beyond_500_bits_pivots_on_the_exact_diagonal():
    """The identity of size 9 (FLINT's exact rung is used from n = 9) with
    ``K_12 = K_21 = 2^600``: the float guide of the exact rung shifts the integers by
    ``2^100`` (to 500 bits), where every diagonal entry ``1`` becomes 0 (``dpstrf``
    finds rank 0) and no pivot is resolved; the rung must then pivot on the largest
    exact diagonal entry."""
    pytest.importorskip("flint")
    K = np.eye(9)
    K[0, 1] = K[1, 0] = 2.0**600
    K[8, 8] = 0.0  # the last index is not a pivot
    assert exact_kind(K.tolist()) == "not_psd"
    r = check_psd(K, tol=0, method="exact")
    assert r.method == "exact"
    assert_witness(K, r)


def test_flint_exact_rung_decides_a_block_that_becomes_zero():
    """A rank-one integer Gram: after one block the Schur complement is the zero matrix, PSD."""
    pytest.importorskip("flint")
    b = np.array([1.0, 2.0, 3.0])
    K = np.outer(b, b)
    assert exact_kind(K.tolist()) == "psd"
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified


def test_the_float_guide_pivots_on_the_leading_pivots_within_the_ratio():
    """``_pivot_block``'s rule (its docstring): the first pivots of ``dpstrf``, largest
    remaining diagonal first, within ``PIVOT_RATIO = 2^-26`` of the first (inclusive),
    halved until the certificate of the block holds.  On a diagonal ``m`` the pivots are
    the diagonal entries in decreasing order, so the expected set is read off by hand."""
    from kernelcheck._src.psd.schur import PIVOT_RATIO, _pivot_block

    assert PIVOT_RATIO == 2.0**-26
    dg = np.array([2.0**-27, 1.0, 2.0**-26, 0.5, 2.0**-20, 2.0**-40])
    m = np.diag(dg)
    R = np.full(m.shape, 2.0**-80)
    assert _pivot_block(m, R) == [1, 2, 3, 4]  # 1, 0.5, 2^-20 and 2^-26 (the boundary)
    assert _pivot_block(np.diag([1.0, 2.0**-30]), np.full((2, 2), 2.0**-80)) == [0]
    # radii that hide the last pivots: the block of 8 fails, its first half is proven
    m = np.eye(8)
    R = np.full((8, 8), 2.0**-80)
    R[4:, :] = R[:, 4:] = 2.0
    assert _pivot_block(m, R) == [0, 1, 2, 3]
    # nothing resolved: no pivot
    assert _pivot_block(np.eye(2), np.full((2, 2), 2.0)) is None
    # the first pivot's ball reaches 0, another one's does not: that one
    m = np.diag([1.0, 0.5])
    for r11, expected in ((0.3, [1]), (0.5, None), (0.5 * (1 - 2.0**-51), None)):
        # 0.5 - 0.3 > 0; 0.5 - 0.5 (1 + 4u) < 0; 0.5 - r11 (1 + 4u) rounds to 0 (eta decides)
        assert _pivot_block(m, np.array([[2.0, 0.0], [0.0, r11]])) == expected
