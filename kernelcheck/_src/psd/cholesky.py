"""The certified Cholesky (claim C5): Rump's proof of positive definiteness in float64.

* :func:`certified_cholesky` -- one LAPACK ``dpotrf`` of the diagonally
  scaled, shifted matrix ``D K D - c I`` whose success *proves* ``K + shift I``
  positive definite, rounding errors included (S. M. Rump, "Verification of
  positive definiteness", BIT 46, 2006; INTLAB's ``isspd``);
* :func:`rump_shift` -- the shift ``c`` of that criterion, rounded upward,
  shared with the mpmath rung (:mod:`kernelcheck._src.psd.highprec`);
* :func:`van_der_sluis_scaling` -- the powers of two ``D`` (exact scaling);
* :func:`witness_from_failed_cholesky` -- a candidate witness from a failed
  pivot (checked exactly by the caller);
* :func:`cholesky_estimate` -- an upper estimate of ``lambda_min`` from the
  computed factor.

The unit roundoff ``u`` and the underflow unit ``eta`` of float64 come from
:mod:`kernelcheck._src.core.rounding`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import blas, lapack

from kernelcheck._src.core.rounding import eta, unit_roundoff

__all__ = [
    "Cholesky",
    "certified_cholesky",
    "rump_shift",
    "van_der_sluis_scaling",
    "witness_from_failed_cholesky",
    "cholesky_estimate",
]

_U = unit_roundoff(np.float64)
_ETA = eta(np.float64)  # smallest subnormal float64: Rump's underflow unit


@dataclass
class Cholesky:
    """What :func:`certified_cholesky` did: success, the failed pivot, the factor and the shift."""

    ok: bool
    info: int  # 0 on success, else 1-based index of the failed pivot
    R: np.ndarray | None  # upper factor (Fortran order) with R^T R = B
    d: np.ndarray  # scaling (powers of two)
    c: float  # Rump's shift
    K: np.ndarray  # the matrix whose definiteness was tested (off-diagonal of B is D K D)


def van_der_sluis_scaling(diag: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Powers of two ``d_i ~ diag_i^(-1/2)`` (van der Sluis), or ones if unsafe.

    Applied only when it cannot lose bits: for every nonzero ``K_ij`` the
    products ``K_ij d_i`` and ``K_ij d_i d_j`` (the order in which the scaled
    matrix is formed) must stay within ``[2^-969, 2^1022)``, normal with 53
    bits to spare below, a factor 4 below overflow above.  The global bound
    ``min |K| min d^2``, ``max |K| max d^2`` decides the common case in two
    passes; where it fails, the condition is checked entrywise on exponents
    (``frexp``), so a matrix ``D A D`` with ``D`` spanning hundreds of
    binades is still scaled back to ``A``.
    """
    n = diag.shape[0]  # diag > 0: certified_cholesky refuses K_jj + shift <= 0 first
    if diag.max() / math.sqrt(n) <= diag.min():  # (n = 1 too) divided: min * sqrt(n) may overflow
        return np.ones(n)
    e = -np.ceil(0.5 * np.log2(diag))
    if np.abs(e).max() > 500:
        return np.ones(n)
    ei = e.astype(np.int64)
    d = np.ldexp(1.0, ei)
    absK = np.abs(K)
    nzabs = absK[absK > 0]  # not empty: the diagonal is positive
    lo = float(nzabs.min()) * float(d.min()) ** 2
    hi = float(absK.max()) * float(d.max()) ** 2
    if lo >= np.finfo(np.float64).tiny * 2**53 and hi <= np.finfo(np.float64).max / 4:
        return d  # the global bound holds: every product is safe (the common case)
    # graded matrices whose extremes never meet in one entry: check entrywise
    mant, ex = np.frexp(K)  # |K_ij| in [2^(ex - 1), 2^ex) where K_ij != 0
    nz = mant != 0
    first = ex + ei[:, None]  # exponent of K_ij d_i
    both = first + ei[None, :]  # exponent of K_ij d_i d_j
    for p in (first, both):
        vals = p[nz]
        if vals.min() - 1 < -969 or vals.max() > 1022:
            return np.ones(n)
    return d


def rump_shift(T_diag: np.ndarray, u: float = _U, underflow: float = _ETA) -> float:
    """Rump's shift ``c >= sum_j alpha_j T_jj + 6 n (n + max_j T_jj) eta``, rounded upward.

    ``T_diag`` is the float64 diagonal of ``T`` (each entry one rounded
    addition ``T_jj = B_jj + s_j`` away from the exact value, or exact);
    ``alpha_j = (j + 2) u`` with ``u`` the unit roundoff of the arithmetic the
    Cholesky runs in (float64, or ``2**-p`` for a ``p``-bit mpmath Cholesky),
    and ``underflow`` its underflow unit (``eta = 2**-1074`` for float64, 0 for
    mpmath, which does not underflow).  Every rounding in forming ``c`` in
    float64 is directed by an explicit margin:

    * ``T_jj (1 + 4 u_64)`` bounds the exact ``T_jj`` (``|error| <= u_64 |T_jj|``);
    * the dot product of ``n`` non-negative terms has relative error at most
      ``gamma_n <= 2 (n + 2) u_64`` (each ``alpha_j`` is exact: an integer times
      a power of two);
    * ``nextafter`` rounds the result up past the last rounding.
    """
    n = T_diag.shape[0]
    with np.errstate(over="ignore"):  # near the float64 maximum c is inf: no certificate
        Tup = T_diag * (1.0 + 4 * _U)  # upper bound of the exact T_jj
        alpha = (np.arange(1, n + 1, dtype=np.float64) + 2.0) * u
        c = float(np.dot(alpha, np.maximum(Tup, 0.0))) * (1.0 + 2.0 * (n + 2) * _U)
        if underflow:
            c += 6.0 * n * (n + float(Tup.max())) * underflow
    return float(np.nextafter(c, math.inf))


def certified_cholesky(K: np.ndarray, shift: float) -> Cholesky:
    """Try to prove ``K + shift I`` positive definite with one float Cholesky.

    Rump's criterion (BIT 46:433-452, 2006; INTLAB ``isspd``): let ``T``
    symmetric with ``T_jj >= 0``, ``alpha_j = (j + 2) u`` (an upper bound of
    ``gamma_(j+1) / (1 - gamma_(j+1))`` for n < 6.7e7), and
    ``c >= sum_j alpha_j T_jj + 6 n (n + max_j T_jj) eta`` (``eta = 2**-1074``).
    If the floating-point Cholesky of a float matrix ``B`` with the
    off-diagonal of ``T`` and ``B_jj <= T_jj - c`` runs to completion, then
    ``T`` is positive definite.  Here ``T = D (K + shift I) D`` with ``D`` a
    diagonal of powers of two (so ``T`` is PD iff ``K + shift I`` is).
    Every rounding in forming ``c`` and ``B_jj`` is directed by explicit
    margins.  The LAPACK ``dpotrf`` used is a blocked right-looking
    Cholesky; the criterion covers any summation order (the inner-product
    bound ``gamma_k`` does), assuming the BLAS uses no fast (Strassen-type)
    matrix multiplication.
    """
    diag = np.diagonal(K).copy()
    with np.errstate(over="ignore"):
        target = diag + shift
    if np.any(target <= 0):  # fl(a + b) <= 0 iff a + b <= 0: the exact K_jj + shift
        return _no_certificate(K, int(np.argmin(target)) + 1)
    if not np.isfinite(target).all():  # K_jj + shift beyond the float64 range
        return _no_certificate(K, int(np.argmax(~np.isfinite(target))) + 1)
    d = van_der_sluis_scaling(target, K)
    B = K * d[:, None]  # a new array (exact: powers of two, no underflow; checked)
    B *= d[None, :]
    s = shift * (d * d)  # exact: d^2 is a power of two and no underflow (checked)
    # B_jj + s = d_j^2 (K_jj + shift) is within range: d_j^2 (K_jj + shift) ~ 1 when
    # scaled, the finite target itself when not
    c = rump_shift(np.diagonal(B) + s)
    if not math.isfinite(c):
        # Rump's criterion needs a float c and a Cholesky that neither overflows nor
        # meets a NaN: near 1.8e308 there is none, whatever dpotrf reports (d = 1 there:
        # a scaled diagonal is near 1, and so is c)
        return _no_certificate(K, 1)
    a = np.diagonal(B).copy()
    x = (a + s) - c
    margin = 4.0 * _U * (np.abs(a) + np.abs(s) + c)
    Bd = np.nextafter(x - margin, -math.inf)
    np.fill_diagonal(B, Bd)
    # B is C-contiguous and symmetric: B.T is the same matrix in Fortran order, factored
    # in place (the upper factor, LAPACK's default; info < 0, an argument error that
    # cannot occur here, would be no certificate like any failure)
    R, info = lapack.dpotrf(B.T, overwrite_a=1)
    if info == 0 and not np.isfinite(R).all():
        # an overflow inside the factorisation: some dpotrf (OpenBLAS's) take a NaN
        # pivot for a positive one, so "ran to completion" is checked, not assumed
        # a pivot is sqrt(B_jj - sum R_ij^2) <= sqrt(B_jj): finite and positive, or NaN,
        # and a non-finite R_ij makes the pivot of its column -inf or NaN: one is bad
        bad = ~(np.diagonal(R) > 0)
        return _no_certificate(K, int(np.argmax(bad)) + 1)
    return Cholesky(info == 0, int(info), R, d, c, K)


def _no_certificate(K: np.ndarray, pivot: int) -> Cholesky:
    """No certificate: a target ``K_jj + shift <= 0``, a matrix beyond the float64 range
    or a factorisation that overflowed; failed at ``pivot``, no factor, ``c = inf``."""
    return Cholesky(False, pivot, None, np.ones(K.shape[0]), math.inf, K)


def witness_from_failed_cholesky(K: np.ndarray, ch: Cholesky):
    """Candidate witness from a Cholesky that failed at pivot ``k = info``.

    With ``R11`` the computed factor of the leading ``k - 1`` block and ``b``
    the first ``k - 1`` entries of column ``k`` of ``B``, ``v = D [-B11^{-1} b;
    1; 0]`` makes ``v^T (D^{-1} B D^{-1}) v`` the failed pivot (in exact
    arithmetic); it is only a candidate -- the caller checks it exactly.
    """
    k = ch.info
    if ch.R is None or k < 2:  # k = 1: e_1 has v^T K v = K_11 > -shift, no witness
        return None
    v = np.zeros(K.shape[0])
    v[k - 1] = 1.0
    R11 = ch.R[: k - 1, : k - 1]
    b = ch.K[: k - 1, k - 1] * ch.d[: k - 1] * ch.d[k - 1]  # column k of B, exactly
    y, _ = lapack.dtrtrs(R11, b, trans=1)  # LAPACK's default: the upper triangle
    x, _ = lapack.dtrtrs(R11, y)
    v[: k - 1] = -x
    return v * ch.d  # possibly not finite: the exact check refuses such a vector


def cholesky_estimate(K: np.ndarray, ch: Cholesky, steps: int = 1) -> float:
    """Rayleigh-quotient upper estimate of ``lambda_min(K)`` after a successful factorisation.

    ``steps`` inverse iterations with the computed factor of ``B ~ D K D - c I``
    (two triangular solves each, O(n^2)), from a fixed start vector; the
    Rayleigh quotient of ``K`` at the result is an upper bound of
    ``lambda_min(K)`` up to its own rounding.
    """
    n = K.shape[0]
    if n == 1:
        return float(K[0, 0])
    x = np.random.default_rng(0).standard_normal(n)
    for _ in range(steps):
        y, _ = lapack.dtrtrs(ch.R, x, trans=1)  # LAPACK's default: the upper triangle
        x, _ = lapack.dtrtrs(ch.R, y)
        top = float(np.max(np.abs(x)))
        if not math.isfinite(top) or top == 0:
            return math.nan
        x = x / top  # into [-1, 1]: the Rayleigh quotient is scale-free, B^-1 x may overflow
    u = ch.d * x
    return float(u @ _symv(K, u) / (u @ u))


def _symv(K: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``K @ u`` for an exactly symmetric ``K`` through SciPy's BLAS ``dsymv``.

    SciPy's BLAS rather than NumPy's for the reason given in
    :func:`~kernelcheck._src.psd.tolerance.frobenius`;
    a C-contiguous symmetric ``K`` is its own transpose, so ``K.T`` is the
    Fortran-ordered matrix ``dsymv`` wants, without a copy.
    """
    if K.flags.f_contiguous:
        return blas.dsymv(1.0, K, u)
    if K.flags.c_contiguous:
        return blas.dsymv(1.0, K.T, u)
    return K @ u
