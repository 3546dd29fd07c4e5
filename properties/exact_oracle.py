"""The exact PSD oracle of the property tests: rational symmetric elimination.

Independent of kernelcheck's own exact rung (no shared code), so a verdict of
``check_psd`` checked against it is checked against separate arithmetic.
"""

from __future__ import annotations

from fractions import Fraction


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
