"""Exact arithmetic for PSD verdicts (claim C5): integer matrices and witnesses.

Every float64 number is an integer times a power of two, so a float matrix
``K`` is exactly ``M * 2**e`` with ``M`` a matrix of Python integers and ``e``
the smallest exponent among its non-zero entries.  On ``M``:

* :func:`quadratic_form` evaluates ``v^T K v`` exactly (no rounding at all)
  for a float, integer or rational vector ``v``;
* :func:`exact_decision` decides whether ``M`` (hence ``K``) is positive
  definite, positive semi-definite or not, by fraction-free symmetric
  Gaussian elimination (Bareiss), and for a non-PSD matrix returns an integer
  witness ``w`` with ``w^T M w < 0``;
* :func:`as_witness` turns a candidate vector from any rung (float, integer,
  rational or mpf) into a :class:`Witness` when ``v^T K v < -tol v^T v``
  holds exactly -- the check behind every ``NOT_PSD`` verdict.

Bareiss elimination keeps every intermediate an integer (a minor of ``M``):
after eliminating the pivot set ``P`` the trailing entries equal
``det(M_PP) * S_ij`` with ``S`` the Schur complement, so their signs are those
of the Schur complement.  Cost: O(n^3) big-integer operations on integers of
up to about ``n (53 + exponent range)`` bits; see :data:`EXACT_MAX_N`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "EXACT_MAX_N",
    "to_int_matrix",
    "vector_to_ints",
    "quadratic_form",
    "exact_decision",
    "ExactWitness",
    "Witness",
    "as_witness",
]

#: Default largest n for which ``check_psd`` runs exact elimination.  Measured
#: on a 2-core machine: a Gaussian Gram matrix (entries spanning ~120 binary
#: orders of magnitude) takes 0.3 s at n = 60, 13 s at n = 120 and 160 s at
#: n = 200 (the integers grow to about n * (53 + exponent range) bits); a
#: float64 Hilbert matrix of n = 20 takes 2 ms.
EXACT_MAX_N = 64

#: Rows converted to Python integers at a time by :func:`quadratic_form`.
_BLOCK = 64


def _frexp_int(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer mantissas ``m`` (int64, |m| < 2**53) and exponents with a = m 2**ex."""
    mant, ex = np.frexp(a)
    mi = np.ldexp(mant, 53).astype(np.int64)
    return mi, ex.astype(np.int64) - 53


def min_exponent(a: np.ndarray) -> int | None:
    """Smallest exponent ``e`` with every entry of ``a`` an integer times ``2**e``."""
    mi, ex = _frexp_int(np.asarray(a, dtype=np.float64))
    nz = mi != 0
    if not nz.any():
        return None
    # strip trailing zero bits of the mantissas: smaller integers, same value
    tz = _trailing_zeros(mi[nz])
    return int((ex[nz] + tz).min())


def _trailing_zeros(m: np.ndarray) -> np.ndarray:
    m = np.abs(m)
    low = m & -m  # lowest set bit
    return np.log2(low.astype(np.float64)).astype(np.int64)


def to_int_matrix(a: np.ndarray, e: int | None = None) -> tuple[np.ndarray, int]:
    """``a = M * 2**e`` exactly, ``M`` an object array of Python ints.

    ``e`` defaults to :func:`min_exponent` of ``a`` (0 for an all-zero array).
    """
    a = np.asarray(a, dtype=np.float64)
    if e is None:
        e = min_exponent(a)
        if e is None:
            return np.zeros(a.shape, dtype=object), 0
    mi, ex = _frexp_int(a)
    nz = mi != 0
    out = np.zeros(a.shape, dtype=object)
    if nz.any():
        m = mi[nz]
        tz = _trailing_zeros(m)
        m = m >> tz  # exact: only zero bits are dropped
        shift = ex[nz] + tz - e
        if shift.min() < 0:
            raise ValueError(f"entries of `a` are not integer multiples of 2**{e}")
        out[nz] = np.left_shift(m.astype(object), shift.astype(object))
    return out, int(e)


def vector_to_ints(v) -> tuple[np.ndarray, Fraction]:
    """Write a float, integer or rational vector as ``w * s`` (``w`` ints, ``s`` > 0 rational).

    Accepts a float ndarray, or any sequence of ints / Fractions / mpmath mpf.
    """
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        w, e = to_int_matrix(v.astype(np.float64))
        return w, Fraction(2) ** e
    items = [_to_fraction(x) for x in v]
    den = 1
    for x in items:
        den = den * x.denominator // _gcd(den, x.denominator)
    w = np.array([x.numerator * (den // x.denominator) for x in items], dtype=object)
    return w, Fraction(1, den)


def _gcd(a: int, b: int) -> int:
    import math

    return math.gcd(a, b)


def _to_fraction(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    mpf = getattr(x, "_mpf_", None)
    if mpf is not None:
        sign, man, exp, _ = mpf
        if not man and exp:  # inf / nan in mpmath's encoding
            raise ValueError("non-finite mpf")
        val = Fraction(int(man)) * (Fraction(2) ** int(exp))
        return -val if sign else val
    return Fraction(float(x))


def quadratic_form(K: np.ndarray, v, *, e: int | None = None) -> Fraction:
    """The exact rational value of ``v^T K v`` for a float matrix ``K``.

    Parameters
    ----------
    K : ndarray (n, n) float64
        Taken entrywise as exact binary numbers.
    v : ndarray (n,) float, or a sequence of ints / Fractions / mpf
        The vector, also taken exactly.
    e : int, optional
        A common exponent of ``K`` (from :func:`min_exponent`), if known;
        otherwise that of the rows and columns in the support of ``v``.

    Notes
    -----
    Computed as ``sum_i w_i (M_i . w)`` over Python integers, ``_BLOCK`` rows
    of ``M`` at a time, so memory stays O(n) integers per block; the cost is
    n**2 big-integer multiply-adds.
    """
    w, s = vector_to_ints(v)
    n = K.shape[0]
    nz = np.flatnonzero(w != 0)
    if nz.size == 0:
        return Fraction(0)
    # only rows and columns in the support of w contribute
    Ks = K[np.ix_(nz, nz)] if nz.size < n else K
    if e is None:  # a common exponent of the entries that contribute
        e = min_exponent(Ks)
        if e is None:
            return Fraction(0)
    ws = w[nz]
    total = 0
    for start in range(0, nz.size, _BLOCK):
        Mb, _ = to_int_matrix(Ks[start : start + _BLOCK], e)
        total += int(np.dot(ws[start : start + _BLOCK], Mb.dot(ws)))
    del n
    return Fraction(total) * (Fraction(2) ** e) * s * s


class ExactWitness:
    """What exact elimination found: kind, an integer witness and the pivot set."""

    __slots__ = ("kind", "vector", "positives", "zeros")

    def __init__(self, kind: str, vector=None, positives=(), zeros=()):
        self.kind = kind  # "pd", "psd" or "not_psd"
        self.vector = vector
        self.positives = tuple(positives)
        self.zeros = tuple(zeros)


def exact_decision(M: np.ndarray) -> ExactWitness:
    """Decide PD / PSD / not PSD for a symmetric integer matrix ``M`` exactly.

    Symmetric Bareiss elimination in the natural order.  A positive pivot is
    eliminated; a zero pivot whose row of the Schur complement is zero is
    skipped (it contributes a zero eigenvalue direction); a negative pivot, or
    a zero pivot with a non-zero entry in its row, proves the matrix is not
    PSD (a negative diagonal entry, or a 2 x 2 principal minor
    ``[[0, b], [b, c]]`` with determinant ``-b**2 < 0``, of the Schur
    complement).  The witness is then rebuilt by rerunning the elimination
    with the transformation tracked (:func:`_witness`).
    """
    n = M.shape[0]
    A = M.copy()
    prev = 1
    positives: list[int] = []
    zeros: list[int] = []
    for k in range(n):
        p = A[k, k]
        if p > 0:
            if k + 1 < n:
                col = A[k + 1 :, k]
                A[k + 1 :, k + 1 :] = (
                    p * A[k + 1 :, k + 1 :] - np.multiply.outer(col, col)
                ) // prev
            prev = p
            positives.append(k)
        elif p == 0:
            row = A[k, k + 1 :]
            nzj = np.flatnonzero(row != 0)
            if nzj.size == 0:
                zeros.append(k)
                continue
            return _witness(M, k, k + 1 + int(nzj[0]), positives)
        else:
            return _witness(M, k, None, positives)
    return ExactWitness("psd" if zeros else "pd", positives=positives, zeros=zeros)


def _witness(M: np.ndarray, k: int, j: int | None, positives: list[int]) -> ExactWitness:
    """Integer witness after the elimination over ``positives`` stopped at ``k``.

    Rows of ``W`` carry the fraction-free transformation: after the pivots in
    ``P``, ``W[i] M`` is the current row ``i`` (zero in the columns of ``P``)
    and ``W[i]`` is supported on ``P`` and ``i``, with ``W[i, i] = det(M_PP)``.
    So ``W[k]^T M W[k] = det(M_PP) * A[k, k]`` and, for a zero pivot with
    ``A[k, j] != 0``, ``v = t W[k] + W[j]`` gives
    ``v^T M v = det(M_PP) (2 t A[k, j] + A[j, j])``, negative for the ``t`` below.
    """
    n = M.shape[0]
    idx = list(positives) + [k] + ([j] if j is not None else [])
    sub = M[np.ix_(idx, idx)].copy()
    m = len(idx)
    W = np.zeros((m, m), dtype=object)
    for i in range(m):
        W[i, i] = 1
    prev = 1
    npos = len(positives)
    for s in range(npos):
        p = sub[s, s]
        col = sub[s + 1 :, s].copy()
        sub[s + 1 :, s + 1 :] = (p * sub[s + 1 :, s + 1 :] - np.multiply.outer(col, col)) // prev
        W[s + 1 :] = (p * W[s + 1 :] - np.multiply.outer(col, W[s])) // prev
        prev = p
    if j is None:
        w_sub = W[npos]
    else:
        akj = sub[npos, npos + 1]
        ajj = sub[npos + 1, npos + 1]
        q = abs(ajj) // (2 * abs(akj)) + 1
        t = -q if akj > 0 else q
        w_sub = t * W[npos] + W[npos + 1]
    v = np.zeros(n, dtype=object)
    for pos, i in enumerate(idx):
        v[i] = w_sub[pos]
    g = 0
    for x in v:
        g = _gcd(g, int(x))
    if g > 1:
        v = np.array([int(x) // g for x in v], dtype=object)
    return ExactWitness("not_psd", vector=v, positives=positives)


# ---------------------------------------------------------------------------
# Exact witness verification
# ---------------------------------------------------------------------------


@dataclass
class Witness:
    """A vector ``v`` with ``v^T K v < -tol v^T v``, verified exactly, and its Rayleigh quotient."""

    vector: Any
    value: Fraction  # v^T K v / v^T v, exact


def as_witness(K: np.ndarray, v, t: float, e: int | None) -> Witness | None:
    """Return the witness if ``v^T K v < -t v^T v`` holds exactly, else None.

    A float vector is tried first as given; an integer vector is also tried
    rounded to float64 (a float witness is easier to use), keeping the exact
    integers when rounding destroys it.  ``e`` is a common exponent of ``K``
    (:func:`min_exponent`), passed on to :func:`quadratic_form`.
    """
    candidates = []
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        if not np.isfinite(v).all() or not np.any(v):
            return None
        candidates.append(v.astype(np.float64))
    else:
        # exact: Python ints, Fractions or mpf (the mpmath rung's pivot vector), times
        # a common positive scale, which the Rayleigh quotient does not see
        ints, _ = vector_to_ints(v)
        if not any(ints):
            return None
        big = max(abs(int(x)) for x in ints)
        shift = max(big.bit_length() - 1000, 0)
        vf = np.array([float(int(x) >> shift) if shift else float(x) for x in ints])
        if np.isfinite(vf).all() and np.any(vf):
            candidates.append(vf)
        candidates.append(ints)
    for cand in candidates:
        q = quadratic_form(K, cand, e=e)
        norm2 = _exact_norm2(cand)
        rq = q / norm2
        if rq < -Fraction(t):
            return Witness(cand, rq)
    return None


def _exact_norm2(v) -> Fraction:
    """``v^T v`` exactly, for a float or an integer vector."""
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return sum((Fraction(float(x)) ** 2 for x in v), Fraction(0))
    return Fraction(sum(int(x) * int(x) for x in v))
