"""Block Schur decisions with FLINT (claim C5): the ball and exact rungs of ``check_psd``.

Both rungs decide a symmetric matrix ``T`` by the Schur-complement lemma: if
``T_PP`` is positive definite then

    T is PD (PSD)  iff  S = T_QQ - T_QP T_PP^{-1} T_PQ is PD (PSD),

and for a witness ``w`` of ``S`` (``w^T S w < 0``) the vector
``v = [-T_PP^{-1} T_PQ w; w]`` has ``v^T T v = w^T S w``.  A float
approximation of the current block chooses ``P`` (a diagonally pivoted
Cholesky, pivots within a factor :data:`PIVOT_RATIO` of the first, so ``T_PP``
is well conditioned) and proves ``T_PP`` positive definite with Rump's
certificate widened by the approximation error
(:func:`~kernelcheck._src.psd.cholesky.certified_cholesky` of ``m - r I``
with ``r >= ||T - m||_F``); the Schur complement is then formed by FLINT:

* :func:`ball_decision` -- in ball arithmetic (``arb_mat``, precision ``p``
  bits, every ball containing the exact value), so ``S`` is known up to its
  radii; decides PD, or finds a candidate witness, or reports that the
  radii hide the answer (a higher precision may not, and a matrix within
  the radii of a singular PSD one needs exact arithmetic);
* :func:`exact_decision_flint` -- in exact integer arithmetic (``fmpz_mat``,
  FLINT's p-adic solver for ``T_PP^{-1} T_PQ``), which also decides singular
  positive semi-definite matrices and returns an exact integer witness.

Cost: one solve and one product per block, in FLINT's C code; the float
guide is LAPACK.  Where entries are small integers (a rank-deficient
integer Gram) the exact rung takes about a second at n = 300; on float
matrices graded over many binades the integers grow with each block and
the ball rung is the fast one.  :func:`flint` returns the module or None.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from scipy.linalg import lapack

from kernelcheck._src.core.rounding import eta, unit_roundoff
from kernelcheck._src.psd.cholesky import certified_cholesky
from kernelcheck._src.psd.exact import ExactWitness
from kernelcheck._src.psd.tolerance import frobenius

__all__ = [
    "FLINT_MISSING",
    "PIVOT_RATIO",
    "BALL_PRECISIONS",
    "flint",
    "BallOutcome",
    "ball_decision",
    "exact_decision_flint",
]

_U = unit_roundoff(np.float64)
_ETA = eta(np.float64)

#: Pivots kept in one block: those within this factor of the block's first.
PIVOT_RATIO = 2.0**-26

#: Binary precisions of the ball rung, in order.
BALL_PRECISIONS = (128, 256, 512, 1024)

#: Why a FLINT rung did not run.
FLINT_MISSING = "python-flint is not installed (pip install python-flint)"


def flint() -> Any:
    """The ``flint`` module (python-flint), or None when it is not installed."""
    try:
        import flint as _flint
    except ImportError:
        return None
    return _flint


# ---------------------------------------------------------------------------
# The float guide: which block to eliminate, and a proof that it is definite
# ---------------------------------------------------------------------------


def _certify_near(m: np.ndarray, R: np.ndarray) -> bool:
    """Every symmetric ``T`` with ``|T - m| <= R`` entrywise is PD (Rump on ``m - ||R||_F I``)."""
    # an infinite r cannot occur (R is finite and dnrm2 does not overflow), and would
    # make every target K_jj - r negative: no certificate
    r = float(np.nextafter(frobenius(R) * (1.0 + 2.0 * (R.shape[0] + 2) * _U), math.inf))
    return certified_cholesky(m, -r).ok


def _pivot_block(m: np.ndarray, R: np.ndarray) -> list[int] | None:
    """A sorted pivot set ``P`` with ``T_PP`` proven PD for every ``T`` within ``R`` of ``m``.

    The first pivots of LAPACK's ``dpstrf`` (largest remaining diagonal
    first) within :data:`PIVOT_RATIO` of the first; halved until the
    certificate holds.  When not even the first pivot is proven, the
    diagonal entry whose ball lies furthest above 0 (largest ``m_ii - R_ii``),
    if that ball is above 0 (``m_ii - R_ii (1 + 4u) - eta > 0``, the rounding
    of the product and of the difference covered); else None.
    """
    # LAPACK's defaults: tolerance n u max(diag) and the upper factor, whose diagonal
    # holds the square roots of the pivots in their order (m is symmetric: no copy order)
    c, piv, rank, _ = lapack.dpstrf(m)
    piv = np.asarray(piv) - 1
    if rank < 1:
        k = 1
    else:
        pv = np.abs(np.diagonal(c)[:rank]) ** 2
        k = max(1, int(np.sum(pv >= pv[0] * PIVOT_RATIO)))
    while True:
        P = sorted(int(i) for i in piv[:k])
        if _certify_near(m[np.ix_(P, P)], R[np.ix_(P, P)]):
            return P
        if k == 1:
            break
        k //= 2
    i = int(np.argmax(np.diagonal(m) - np.diagonal(R)))
    if m[i, i] - R[i, i] * (1.0 + 4 * _U) - _ETA > 0:
        return [i]
    return None


def _negative_direction(m: np.ndarray, R: np.ndarray) -> np.ndarray | None:
    """A float ``w`` with ``w^T T w < 0`` for every ``T`` within ``R`` of ``m``, if one is seen."""
    dg = np.diagonal(m) + np.diagonal(R)
    i = int(np.argmin(dg))
    if dg[i] < 0:
        w = np.zeros(m.shape[0])
        w[i] = 1.0
        return w
    lam, V = np.linalg.eigh(m)
    r = frobenius(R)
    if lam[0] + 2.0 * r + 4.0 * m.shape[0] * _U * float(np.max(np.abs(lam))) < 0:
        return V[:, 0]
    return None


# ---------------------------------------------------------------------------
# Ball arithmetic
# ---------------------------------------------------------------------------


class BallOutcome(NamedTuple):
    """What :func:`ball_decision` found at one precision."""

    kind: str  # "pd", "candidate" (a vector to check exactly), "singular", "unknown"
    vector: Any  # the candidate: a list of Fractions, or None


#: Every Schur complement proven PD.
_PD = BallOutcome("pd", None)
#: The radii hide the answer at this precision.
_UNKNOWN = BallOutcome("unknown", None)


def _mid_rad(B) -> tuple[np.ndarray, np.ndarray, int]:
    """Float midpoints ``m`` and radii ``R >= |B 2^-e - m|`` entrywise, and the exponent ``e``.

    ``e`` puts the largest midpoint or radius near 1, so no entry of a deep
    Schur complement is lost to underflow when it becomes a float; converting
    a midpoint costs at most ``u`` of it, plus ``eta`` where it underflows.
    ``B`` itself is not scaled: every decision on ``m`` and ``R`` is
    invariant under a power-of-two scaling, and so is ``T_PP^{-1} T_PQ``.
    """
    k = B.nrows()
    ent = B.entries()
    mids = [x.mid().man_exp() for x in ent]
    rads = [x.rad().man_exp() for x in ent]
    tops = [int(a).bit_length() + int(b) for a, b in mids if a != 0]
    tops += [int(a).bit_length() + int(b) for a, b in rads if a != 0]
    e = max(tops) if tops else 0
    m = np.array([math.ldexp(float(int(a)), int(b) - e) for a, b in mids]).reshape(k, k)
    rad = np.array([math.ldexp(float(int(a)), int(b) - e) for a, b in rads]).reshape(k, k)
    R = rad * (1.0 + 4 * _U) + 2.0 * _U * np.abs(m) + _ETA
    m = 0.5 * (m + m.T)  # the balls are symmetric up to rounding; the radii cover it
    R = np.maximum(R, R.T) + _U * np.abs(m)
    return m, R, e


def ball_decision(A: np.ndarray, shift2: float, prec: int) -> BallOutcome:
    """Decide ``T = A + A^T + shift2 I`` (``A`` float, taken exactly) in ``prec``-bit balls.

    Returns ``"pd"`` (proven), ``"candidate"`` (a rational vector ``v``, to be
    checked exactly against ``A``: ``v^T A v < -shift2 / 2 v^T v`` means not
    PSD within ``shift2 / 2``), ``"singular"`` (the current Schur complement
    is within its radii of zero, far below ``2^(-prec/2) ||T||``: likely
    exactly singular, a question for exact arithmetic) or ``"unknown"``.
    """
    fl = flint()
    assert fl is not None  # guarded by the caller
    old = fl.ctx.prec
    fl.ctx.prec = prec
    try:
        return _ball_levels(fl, A, shift2, prec)
    finally:
        fl.ctx.prec = old


def _ball_levels(fl, A, shift2, prec) -> BallOutcome:
    n = A.shape[0]
    rows = A.tolist()
    B = fl.arb_mat(rows)
    B = B + B.transpose()
    if shift2:
        for i in range(n):
            B[i, i] = B[i, i] + fl.arb(shift2)
    log_scale = math.log2(float(np.max(np.abs(A))) * 2.0 + abs(shift2) or 1.0)
    index = list(range(n))  # positions of the current block in T
    levels: list[tuple[list[int], list[int], Any]] = []
    while True:
        m, R, e = _mid_rad(B)  # the current Schur complement is B = 2^e (m +- R)
        if _certify_near(m, R):
            return _PD
        w = _negative_direction(m, R)
        if w is not None:
            return BallOutcome("candidate", _lift(fl, levels, index, w, n))
        top = float(np.max(R))
        tiny = math.log2(top) + e <= log_scale - prec / 2  # top >= eta > 0
        if float(np.max(np.abs(m) - R)) <= 0 and tiny:
            return BallOutcome("singular", None)  # a Schur complement within its radii of 0
        P = _pivot_block(m, R)
        if P is None:
            return _UNKNOWN  # no pivot is resolved by the radii
        Q = [i for i in range(m.shape[0]) if i not in set(P)]
        if not Q:  # P proven PD is the whole block
            return _PD
        Bpp = _sub(fl, B, P, P)
        Bpq = _sub(fl, B, P, Q)
        try:
            Y = Bpp.solve(Bpq)
        except ZeroDivisionError:
            return _UNKNOWN  # a pivot block is not resolved
        B = _sub(fl, B, Q, Q) - Bpq.transpose() * Y
        levels.append(([index[i] for i in P], [index[i] for i in Q], Y))
        index = [index[i] for i in Q]


def _sub(fl, B, I, J):
    return fl.arb_mat([[B[i, j] for j in J] for i in I])


def _to_fraction(x) -> Fraction:
    man, exp = x.mid().man_exp()
    return int(man) * Fraction(2) ** int(exp)


def _lift(fl, levels, index, w: np.ndarray, n: int) -> list[Fraction]:
    """``v = [-Y w; w]`` through every level, with the midpoints of ``Y`` taken exactly."""
    cur = {index[a]: Fraction(float(x)) for a, x in enumerate(w)}
    for P, Q, Y in reversed(levels):
        rows, cols = range(Y.nrows()), range(Y.ncols())
        mid = fl.arb_mat([[fl.arb(Y[i, j].mid()) for j in cols] for i in rows])
        wq = fl.arb_mat([[fl.arb(cur[q].numerator) / cur[q].denominator] for q in Q])
        vp = mid * wq
        for a, p in enumerate(P):
            cur[p] = -_to_fraction(vp[a, 0])
    return [cur[i] for i in range(n)]  # every index is in the last block or in a P


# ---------------------------------------------------------------------------
# Exact integer arithmetic
# ---------------------------------------------------------------------------


def _approx_int(F) -> tuple[np.ndarray, np.ndarray]:
    """Float ``m`` and radii ``R`` with ``|F 2^-s - m| <= R`` (one common shift ``s``)."""
    k = F.nrows()
    vals = [int(x) for x in F.entries()]
    big = max(abs(v).bit_length() for v in vals)  # k >= 1
    s = max(big - 500, 0)
    if s:
        m = np.array([float(v >> s) for v in vals]).reshape(k, k)
        R = 1.0 + 2.0 * _U * np.abs(m)
    else:
        m = np.array([float(v) for v in vals]).reshape(k, k)
        R = 2.0 * _U * np.abs(m)
    return m, R


def _zero_diagonal_witness(F, k: int) -> list[int]:
    """A witness of a non-zero block whose diagonal is <= 0.

    With ``F_ij`` its first non-zero entry (row by row): ``e_i`` when ``i = j``
    (``F_ii < 0``), else ``v = e_j - sign(F_ij) e_i``, where ``F_ii = 0`` and
    ``v^T F v = -2 |F_ij| + F_jj < 0``.
    """
    # the first non-zero entry F_ij in row-major order has j >= i (F_ji would come
    # first) and, for j > i, F_ii = 0 (it comes before F_ij)
    i, j = next((i, j) for i in range(k) for j in range(k) if int(F[i, j]) != 0)
    v = [0] * k
    v[j] = 1
    if i != j:
        v[i] = -1 if int(F[i, j]) > 0 else 1
    return v


def exact_decision_flint(M: np.ndarray) -> ExactWitness:
    """Decide PD / PSD / not PSD of a symmetric integer matrix ``M`` exactly (FLINT).

    Block elimination as in the module docstring on ``fmpz_mat``:
    ``Y = T_PP^{-1} T_PQ = N / d`` (FLINT's solver, then the common
    denominator ``d > 0``) and the integer Schur complement
    ``d S = d T_QQ - T_PQ^T N``, whose definiteness is that of ``S``.  A
    block whose diagonal is ``<= 0`` is decided on the spot (a negative
    diagonal entry, or a zero one with a non-zero entry in its row, is a
    witness; the zero matrix is PSD).  The witness is lifted through the
    blocks as integers, ``v = [-N w; d w]``.  Returns the kind, the integer
    witness and, for PSD, the rank in ``positives``.
    """
    fl = flint()
    assert fl is not None  # guarded by the caller
    n = M.shape[0]
    F = fl.fmpz_mat([[int(x) for x in row] for row in M])
    index = list(range(n))
    levels: list[tuple[list[int], list[int], Any, int]] = []
    rank = 0
    while True:
        k = F.nrows()  # >= 1: n >= 1, and an empty complement returns "pd" below
        if F.is_zero():
            return ExactWitness("psd", positives=range(rank), zeros=range(k))
        m, R = _approx_int(F)
        if _certify_near(m, R):
            return _exact_pd(n)
        diag_max = max(int(F[i, i]) for i in range(k))
        if diag_max <= 0:
            w = _zero_diagonal_witness(F, k)  # F is not zero (tested above)
            return ExactWitness("not_psd", vector=_lift_int(levels, index, w, n))
        P = _pivot_block(m, R)
        if P is None:  # the float guide resolves nothing: one exact positive pivot
            P = [max(range(k), key=lambda a: int(F[a, a]))]
        Q = [i for i in range(k) if i not in set(P)]
        rank += len(P)
        if not Q:  # P proven PD is the whole block
            return _exact_pd(n)
        Fpp = _isub(fl, F, P, P)
        Fpq = _isub(fl, F, P, Q)
        Y = Fpp.solve(Fpq)
        N, d = Y.numer_denom()
        assert d > 0  # FLINT's common denominator (an lcm) is positive
        F = d * _isub(fl, F, Q, Q) - Fpq.transpose() * N
        levels.append(([index[i] for i in P], [index[i] for i in Q], N, int(d)))
        index = [index[i] for i in Q]


def _exact_pd(n: int) -> ExactWitness:
    return ExactWitness("pd", positives=range(n))


def _isub(fl, F, I, J):
    return fl.fmpz_mat([[F[i, j] for j in J] for i in I])


def _lift_int(levels, index, w: list[int], n: int) -> np.ndarray:
    """``v = [-N w; d w]`` through every level (integers throughout)."""
    cur = {index[a]: int(x) for a, x in enumerate(w)}
    for P, Q, N, d in reversed(levels):
        wq = [cur[q] for q in Q]
        for a, p in enumerate(P):
            cur[p] = -sum(int(N[a, b]) * wq[b] for b in range(len(Q)))
        for q in Q:
            cur[q] *= d
    v = np.zeros(n, dtype=object)
    for i, x in cur.items():
        v[i] = x
    return v
