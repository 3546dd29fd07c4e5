"""The high-precision rung of :func:`~kernelcheck.psd.check_psd` (claim C5): Rump in mpmath.

When the float64 certificate and the eigenvalue witnesses cannot decide,
the same certified Cholesky runs in ``p``-bit arithmetic for each ``p`` in
:data:`MPMATH_PRECISIONS` (unit roundoff ``u = 2**-p``, no underflow), for
``n <=`` :data:`MPMATH_MAX_N`; its success proves ``K + shift I`` positive
definite, and its failed pivot gives a candidate witness (checked exactly by
:func:`~kernelcheck._src.psd.exact.as_witness`).  The shift ``c`` is
:func:`~kernelcheck._src.psd.cholesky.rump_shift` with ``u = 2**-p``.
"""

from __future__ import annotations

import math

import numpy as np

from kernelcheck._src.psd.cholesky import rump_shift

__all__ = ["MPMATH_MAX_N", "MPMATH_PRECISIONS", "mp_certified_cholesky"]

#: Largest n for the mpmath rung (a pure-Python Cholesky: n**3 / 6 mpf
#: operations per precision; n = 100 takes a few seconds).
MPMATH_MAX_N = 100

#: Binary precisions tried by the mpmath rung, in order.
MPMATH_PRECISIONS = (113, 226, 452)


def mp_certified_cholesky(K: np.ndarray, shift: float, prec: int):
    """Rump's criterion in ``prec``-bit mpmath arithmetic (no underflow: eta = 0).

    Returns ``(True, None)`` on a proof that ``K + shift I`` is positive
    definite, else ``(False, v)`` with ``v`` the pivot vector of the failed
    step (a list of mpf, a candidate witness) or None.
    """
    import mpmath
    from mpmath.libmp import from_float, mpf_add, mpf_sub, round_floor

    n = K.shape[0]
    diag = np.diagonal(K)
    if np.any(diag < -shift):
        i = int(np.argmin(diag))
        v = [mpmath.mpf(0)] * n
        v[i] = mpmath.mpf(1)
        return False, v
    with np.errstate(over="ignore"):
        c = rump_shift(diag + shift, u=2.0**-prec, underflow=0.0)
    if not math.isfinite(c):  # K_jj + shift near 1.8e308: no float upper bound of the shift
        return False, None
    with mpmath.workprec(prec):
        mpf = mpmath.mpf
        A = [[mpf(float(x)) for x in row] for row in K]  # exact: prec >= 53
        fc = from_float(c)
        fs = from_float(float(shift))
        for i in range(n):
            exact_sum = mpf_add(from_float(float(K[i, i])), fs, 0)  # prec 0: exact
            A[i][i] = mpf(mpf_sub(exact_sum, fc, prec, round_floor))
        L = [[mpf(0)] * n for _ in range(n)]
        for j in range(n):
            s = A[j][j] - mpmath.fdot(L[j][:j], L[j][:j]) if j else A[j][j]
            if s <= 0:
                # v = [-A11^{-1} a; 1; 0] via the computed factor (a candidate only)
                a = [A[i][j] for i in range(j)]
                y = [mpf(0)] * j
                for i in range(j):
                    y[i] = (a[i] - mpmath.fdot(L[i][:i], y[:i])) / L[i][i] if i else a[i] / L[i][i]
                x = [mpf(0)] * j
                for i in reversed(range(j)):
                    acc = mpmath.fsum(L[r][i] * x[r] for r in range(i + 1, j))
                    x[i] = (y[i] - acc) / L[i][i]
                v = [-xi for xi in x] + [mpf(1)] + [mpf(0)] * (n - j - 1)
                return False, v
            L[j][j] = mpmath.sqrt(s)
            for i in range(j + 1, n):
                L[i][j] = (A[i][j] - mpmath.fdot(L[i][:j], L[j][:j])) / L[j][j]
    return True, None
