"""Small symmetric matrices with an exact verdict: Sylvester's criterion in fractions.

The reference is independent of the ladder: for n <= 4, Sylvester's
criterion on *all* principal minors (computed as exact fractions by cofactor
expansion) decides PSD, and the leading principal minors decide PD.  Shared
by ``test_check_psd.py`` (every rung and tolerance against it),
``test_exact.py`` (exact elimination) and ``test_mercer.py`` (Mercer
features of the PSD ones), which re-check every witness with
:func:`rayleigh`.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np


def det(M):
    n = len(M)
    if n == 0:
        return Fraction(1)
    if n == 1:
        return M[0][0]
    return sum(
        (-1) ** j * M[0][j] * det([row[:j] + row[j + 1 :] for row in M[1:]]) for j in range(n)
    )


def pd_psd(K, shift=Fraction(0)):
    n = K.shape[0]
    M = [[Fraction(float(K[i, j])) + (shift if i == j else 0) for j in range(n)] for i in range(n)]
    psd = all(
        det([[M[i][j] for j in S] for i in S]) >= 0
        for r in range(1, n + 1)
        for S in itertools.combinations(range(n), r)
    )
    pd = all(det([row[:r] for row in M[:r]]) > 0 for r in range(1, n + 1))
    return pd, psd


def rayleigh(K, v):
    vv = [Fraction(x) if not isinstance(x, (int, np.integer)) else Fraction(int(x)) for x in v]
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        vv = [Fraction(float(x)) for x in v]
    n = len(vv)
    q = sum(vv[i] * Fraction(float(K[i, j])) * vv[j] for i in range(n) for j in range(n))
    return q / sum(x * x for x in vv)


def _corpus():
    rng = np.random.default_rng(0)
    out = [
        np.array([[2.0, 1.0], [1.0, 2.0]]),  # PD
        np.array([[1.0, 2.0], [2.0, 1.0]]),  # indefinite
        np.array([[1.0, 1.0], [1.0, 1.0]]),  # singular PSD
        np.array([[0.0, 1.0], [1.0, 0.0]]),  # zero diagonal, non-zero row
        np.array([[-1.0, 0.0], [0.0, 3.0]]),  # negative diagonal
        np.array([[0.0, 0.0], [0.0, 0.0]]),  # zero matrix
        np.array([[4.0, 2.0, 2.0], [2.0, 1.0, 1.0], [2.0, 1.0, 1.0]]),  # rank 1
        np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]),  # zero row
        np.array([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]),  # PD tridiagonal
        np.array([[1.0, 0.9, 0.0], [0.9, 1.0, 0.9], [0.0, 0.9, 1.0]]),  # indefinite, PD minors
        np.array([[5.0]]),
        np.array([[-2.0]]),
        np.array([[0.0]]),
        np.array([[1e-300, 0.0], [0.0, 1e300]]),  # badly scaled PD
        np.array([[1.0, 1 + 2.0**-40], [1 + 2.0**-40, 1.0]]),  # barely indefinite
    ]
    for _ in range(6):
        B = rng.integers(-3, 4, size=(4, 2)).astype(float)
        out.append(B @ B.T)  # rank <= 2 PSD
        A = rng.integers(-3, 4, size=(4, 4)).astype(float) / 4
        out.append(A + A.T)  # mostly indefinite
        C = rng.normal(size=(3, 3))
        out.append(C @ C.T + 0.01 * np.eye(3))  # PD
    return out


CORPUS = _corpus()
