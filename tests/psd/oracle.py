"""The exact PSD oracle of the tests and property tests: rational arithmetic only.

Independent of kernelcheck's own exact rung (no shared code), so a verdict of
``check_psd`` checked against it is checked against separate arithmetic:
``exact_kind`` is a rational symmetric elimination, ``exact_rayleigh`` a
rational Rayleigh quotient, ``assert_witness`` re-verifies a NOT_PSD witness
with them.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tests.psd.sylvester import rayleigh as exact_rayleigh  # v^T K v / v^T v in Fractions


def exact_kind(S, shift: Fraction = Fraction(0)) -> str:
    """'pd', 'psd' or 'not_psd' of ``S + shift I``, ``S`` a square matrix of rationals.

    ``S`` is any nested sequence (or array) whose entries convert exactly to
    ``Fraction`` (floats do: every float is a dyadic rational).
    """
    n = len(S)
    A = [[Fraction(S[i][j]) + (shift if i == j else 0) for j in range(n)] for i in range(n)]
    singular = False
    for k in range(n):
        p = A[k][k]
        if p < 0 or (p == 0 and any(A[k][j] != 0 for j in range(k + 1, n))):
            return "not_psd"
        if p == 0:
            singular = True
            continue
        for i in range(k + 1, n):
            f = A[i][k] / p
            if f:
                for j in range(k + 1, n):
                    A[i][j] -= f * A[k][j]
    return "psd" if singular else "pd"


def reference_kind(K: np.ndarray) -> str:
    """'pd', 'psd' or 'not_psd' of a float matrix (:func:`exact_kind` of its exact values)."""
    return exact_kind(np.asarray(K, dtype=np.float64).tolist())


def assert_witness(K, r) -> None:
    """``r`` is a certified NOT_PSD result whose witness is re-verified exactly."""
    from kernelcheck.psd import Verdict

    assert r.verdict is Verdict.NOT_PSD and r.certified
    q = exact_rayleigh(K, r.witness)
    assert q < -Fraction(r.tol.value)
    assert str(q.numerator) + "/" + str(q.denominator) == r.witness_value_exact


def hilbert(n: int) -> np.ndarray:
    """The n x n Hilbert matrix rounded to float64."""
    return np.array([[1.0 / (i + j + 1) for j in range(n)] for i in range(n)])
