"""The families' definitions evaluated in high precision (mpmath): the yardstick of every bound.

Each family's specification has an ``exact_output`` that evaluates the
family's defining formula on float inputs taken as exact binary numbers,
at 50 significant digits, and rounds the result once to float64 (half an
ulp).  The forms and their a-priori bounds are tested against it.  These
are brute-force loops for small inputs (a few dozen tokens): never the fast
path.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import numpy as np

__all__ = ["DIGITS", "mp_matrix", "mp_dot", "weighted_rows", "over_batch"]

#: Significant decimal digits of the high-precision evaluations.
DIGITS = 50


def mp_matrix(X: np.ndarray) -> list[list]:
    """Rows of a 2-D float array as lists of exact mpmath numbers."""
    return [[mpmath.mpf(float(x)) for x in row] for row in np.asarray(X, dtype=np.float64)]


def mp_dot(a: list, b: list):
    """The exact dot product of two lists of mpmath numbers (to the working precision)."""
    return mpmath.fsum(x * y for x, y in zip(a, b, strict=True))


def weighted_rows(weights: Callable[[int, int], object], V: np.ndarray, n: int, *,
                  causal: bool, normalize: bool) -> np.ndarray:  # fmt: skip
    """``a_i = sum_j w_ij v_j`` (divided by ``sum_j w_ij`` when normalised), in mpmath.

    ``weights(i, j)`` is the exact weight of key j for query i; ``j`` runs
    over ``0..i`` when causal, over every key otherwise.  Returns float64
    (each entry rounded once).
    """
    m, d_v = V.shape
    Vm = mp_matrix(V)
    out = np.empty((n, d_v))
    with mpmath.workdps(DIGITS):
        for i in range(n):
            js = range(i + 1) if causal else range(m)
            w = [weights(i, j) for j in js]
            den = mpmath.fsum(w) if normalize else mpmath.mpf(1)
            for c in range(d_v):
                num = mpmath.fsum(wj * Vm[j][c] for wj, j in zip(w, js, strict=True))
                out[i, c] = float(num / den)
    return out


def over_batch(fn: Callable[..., np.ndarray], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` applied to every batch entry of ``arrays`` (leading dimensions), stacked.

    Arrays of per-token values (one dimension fewer) are indexed the same way.
    """
    batch = arrays[0].shape[:-2]
    if not batch:
        return fn(*arrays)
    rows = [fn(*(a[idx] for a in arrays)) for idx in np.ndindex(*batch)]
    return np.stack(rows).reshape(batch + rows[0].shape)
