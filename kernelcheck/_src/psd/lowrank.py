"""The low-rank certificate of :func:`~kernelcheck.psd.check_psd` (claim C5).

A Gram matrix of ``n`` points with a feature space of dimension ``r < n``
(``X X^T`` with ``X`` of shape (n, r), a polynomial kernel, a truncated
exponential) is singular; rounding makes the stored matrix ``K`` definite or
indefinite by about ``u ||K||``, far below Rump's shift ``~ n^2 u / 2``, so the
certified Cholesky of ``K + tol I`` cannot resolve it.  A pivoted Cholesky
can: after ``k`` steps, ``K = L L^T + E`` *exactly*, with ``L`` (n, k) the
computed factor and ``E`` whatever is left.  ``L L^T`` is positive
semi-definite for any real ``L``, so by Weyl's inequality

    lambda_min(K) >= -||E||_2 >= -||E||_F,

and ``||E||_F`` is bounded rigorously from the float residual
``fl(K - L L^T)`` (:func:`lowrank_certificate`).  No property of the
factorisation is assumed: ``L`` is any matrix, the bound covers every
rounding of the residual.  Cost: ``k`` steps of O(n k) to build ``L``, then
one matrix product O(n^2 k) for the residual, taken in row blocks (memory
O(n x block)); below a full Cholesky while ``k <= n / 8``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.psd.tolerance import frobenius

__all__ = ["LowRank", "lowrank_certificate", "max_rank"]

_U = unit_roundoff(np.float64)
_ETA = eta(np.float64)
#: Rows of the residual formed at a time.
_BLOCK = 512


class LowRank(NamedTuple):
    """What :func:`lowrank_certificate` proved: ``lambda_min(K) >= -bound`` (``ok``)."""

    ok: bool
    bound: float  # an upper bound of ||K - L L^T||_F (inf when not computed)
    rank: int  # columns of L
    reason: str


def max_rank(n: int) -> int:
    """Largest rank tried: ``max(32, n / 8)`` (the residual then costs about a Cholesky)."""
    return min(n, max(32, n // 8))


def lowrank_certificate(
    K: np.ndarray, target: float, *, extra: float = 0.0, rank: int | None = None
) -> LowRank:
    """Prove ``lambda_min(K + F) >= -target`` for a symmetric float ``K`` and ``||F||_F <= extra``.

    A diagonally pivoted Cholesky (largest remaining diagonal first) runs
    until the remaining diagonal sums to at most ``target / 4`` or until
    ``rank`` (default :func:`max_rank`) columns; then the residual
    ``E = K - L L^T`` is formed in floating point and

        ||E||_F <= ||fl(E)||_F (1 + 2u) + gamma_k ||L||_F^2 + n k eta,

    because each entry of ``fl(L L^T)`` is an inner product of length ``k``
    (error ``<= gamma_k (|L| |L|^T)_ij + k eta``, gradual underflow
    included), the subtraction adds one rounding (``<= u |fl(E)_ij| / (1 - u)``),
    and ``|| |L| |L|^T ||_F <= ||L||_F^2``.  The computed norms carry their
    own relative error (``<= n^2 u``), covered by a factor ``1 + 4 (n + 2)^2 u``
    and an upward rounding.  Then ``lambda_min(K + F) >= -(||E||_F + extra)``.
    """
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return _lowrank(K, target, extra, rank)


def _lowrank(K: np.ndarray, target: float, extra: float, rank: int | None) -> LowRank:
    n = K.shape[0]
    kmax = max_rank(n) if rank is None else min(rank, n)
    if not (math.isfinite(target) and target > 0):
        return LowRank(False, math.inf, 0, "no positive tolerance to certify")
    d = np.diagonal(K).astype(np.float64, copy=True)
    L = np.zeros((n, kmax))
    done = np.zeros(n, dtype=bool)
    k = 0
    stop = target / 4.0
    while k < kmax:
        rest = np.where(done, 0.0, d)
        if float(np.abs(rest).sum()) <= stop:
            break
        p = int(np.argmax(rest))
        if not (rest[p] > 0 and math.isfinite(rest[p])):
            break  # the remaining diagonal is <= 0: no further positive pivot
        col = K[:, p] - L[:, :k] @ L[p, :k] if k else K[:, p].astype(np.float64, copy=True)
        col /= math.sqrt(rest[p])
        col[done] = 0.0
        L[:, k] = col
        d -= col * col
        done[p] = True
        k += 1
    L = L[:, :k]
    left = float(np.abs(np.where(done, 0.0, d)).sum())
    if not left <= 4.0 * target:
        return LowRank(False, math.inf, k, f"rank {k}: the remaining diagonal exceeds 4 tol")
    norms = [frobenius(K[s : s + _BLOCK] - L[s : s + _BLOCK] @ L.T) for s in range(0, n, _BLOCK)]
    res = frobenius(np.array(norms))  # sqrt of the sum of squares, without overflow
    lf = frobenius(L) if k else 0.0
    g = gamma(max(k, 1))
    grow = 1.0 + 4.0 * (n + 2) ** 2 * _U
    bound = (res * (1.0 + 2.0 * _U) + g * lf * lf + n * k * _ETA) * grow + extra
    bound = float(np.nextafter(bound * grow, math.inf))
    if not math.isfinite(bound):
        return LowRank(False, math.inf, k, "the residual overflows")
    return LowRank(
        bound <= target,
        bound,
        k,
        f"pivoted Cholesky of rank {k}: K = L L^T + E with ||E||_F <= {bound:.3g}",
    )
