"""The reference backward pass of linear attention and its error bound (claims C14, C19).

For a cotangent ``G``, ``a_i = num_i / den_i`` with ``num_i = sum_j w_ij v_j``,
``den_i = sum_j w_ij``, ``w = phi_q phi_k^T`` (masked):
``dW_ij = g_i . (v_j - a_i) / den_i``, ``dV = W^T (G / den)``,
``dphi_q = dW phi_k``, ``dphi_k = dW^T phi_q``; unnormalised
``dW_ij = g_i . v_j`` and ``dV = W^T G``.  The weights are formed in float64
a block of query rows at a time (see
:mod:`~kernelcheck._src.attention.common.vjp`); the bounds follow Higham's
standard model as for softmax.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernelcheck._src.attention.common.inputs import dtype_iv, features_iv
from kernelcheck._src.attention.common.vjp import (
    VJP,
    cotangent,
    mask_future_entries,
    row_blocks,
    swap_last,
    vjp_block_rows,
)
from kernelcheck._src.core.rounding import eta, gamma
from kernelcheck._src.core.validate import as_bool, as_real
from kernelcheck.errors import NumericalFailure


def linear_vjp(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    G: Any,
    *,
    causal: bool = False,
    normalize: bool = True,
    stabilizer: float = 0.0,
) -> VJP:
    """The VJP of :func:`~kernelcheck.attention.parallel` along ``G``: ``(dphi_q, dphi_k, dV)``.

    Claims C10, C14, C19: the gradient of every linear form (parallel,
    recurrent, chunked compute the same function).

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    G : array_like, shape (..., n, d_v)
        The cotangent.
    causal : bool, default False
        Causal mask.
    normalize : bool, default True
        Normalised (C10) or unnormalised (C19) attention.
    stabilizer : float, default 0.0
        An eps added to every normaliser (``a_i = num_i / (den_i + eps)``).

    Returns
    -------
    VJP

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import linear_vjp, parallel
    >>> rng = np.random.default_rng(0)
    >>> pq, pk = rng.random((2, 6, 3)); V, G = rng.normal(size=(2, 6, 2))
    >>> dq, dk, dV = linear_vjp(pq, pk, V, G, causal=True)
    >>> E = rng.normal(size=pk.shape); h = 1e-7
    >>> f = lambda x: (parallel(pq, x, V, causal=True) * G).sum()
    >>> bool(abs((f(pk + h * E) - f(pk - h * E)) / (2 * h) - (dk * E).sum()) < 1e-6)
    True
    """
    phi_q, phi_k, V, causal, _ = features_iv(phi_q, phi_k, V, causal, "raise")
    normalize = as_bool(normalize, "normalize")
    eps = as_real(stabilizer, "stabilizer", nonnegative=True)
    G = cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    return _LinearPass(phi_q, phi_k, V, G, causal, normalize, eps, bounds=False).vjp


def linear_vjp_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    G: Any,
    *,
    causal: bool = False,
    normalize: bool = True,
    dtype: Any = None,
    extra_ops: int = 0,
    stabilizer: float = 0.0,
) -> VJP:
    """Entrywise bounds on the rounding of a linear attention backward pass (C10, C14, C19).

    A weight ``w_ij = phi_q_i . phi_k_j`` is computed to within
    ``gamma_(D + extra_ops) m_ij`` with ``m_ij = |phi_q_i| . |phi_k_j|``
    (``m = |w|`` for non-negative features, larger for mixed signs); the
    normaliser ``den_i + eps`` to within ``rho_den s`` relative, with
    ``rho_den = gamma_(2n + 2D + 4 + extra_ops)`` and ``s = max_i (m 1)_i /
    (den_i + eps)`` (1 for non-negative features and no eps), the output
    ``a_i`` to within ``rho_a = 2 rho_den s / (1 - rho_den s)``; with
    ``g = gamma_(n + d_v + D + 2)``:

        E_dW = ((1 + g)(1 + 2 rho_a) - 1) (|G| |V|^T + |g . a| 1^T) / (den + eps)   (masked),
        E_dV = ((1 + g)(1 + gamma_w)(1 + rho_a) - 1) m^T |G| / (den + eps),
        E_dphi_q = g |dW| |phi_k| + E_dW |phi_k|,  E_dphi_k likewise with phi_q,

    unnormalised without the ``den`` and ``a`` terms; all evaluated in
    float64 on the reference's quantities (their float64 error absorbed by a
    factor ``1 + gamma_(3n + D + 8)``), plus ``(3 n + 8) eta`` per term;
    ``inf`` where ``rho_den s >= 1`` (the normaliser's sign is not certain).

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    G : array_like, shape (..., n, d_v)
        The cotangent.
    causal : bool, default False
        Causal mask.
    normalize : bool, default True
        Normalised (C10) or unnormalised (C19) attention.
    dtype : str or RoundingModel, default None
        The precision of the backward pass bounded (None: the inputs').
    extra_ops : int, default 0
        Roundings per term of the feature maps (``2 ops``).
    stabilizer : float, default 0.0
        An eps added to every normaliser.

    Returns
    -------
    VJP
    """
    phi_q, phi_k, V, causal, _ = features_iv(phi_q, phi_k, V, causal, "raise")
    normalize = as_bool(normalize, "normalize")
    eps = as_real(stabilizer, "stabilizer", nonnegative=True)
    dt = dtype_iv(dtype, V.dtype)
    G = cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    return _LinearPass(phi_q, phi_k, V, G, causal, normalize, eps).bound(dt, extra_ops)


def linear_vjp_with_bounds(
    phi_q, phi_k, V, G, *, causal=False, normalize=True, models=((None, 0),), stabilizer=0.0
):
    """:func:`linear_vjp` and :func:`linear_vjp_error_bound` for each ``(dtype, extra_ops)``.

    Every precision-dependent factor of the bound is a scalar, so the
    ``n x n`` terms are formed once (a block of query rows at a time) and
    scaled per model.
    """
    phi_q, phi_k, V, causal, _ = features_iv(phi_q, phi_k, V, causal, "raise")
    normalize = as_bool(normalize, "normalize")
    eps = as_real(stabilizer, "stabilizer", nonnegative=True)
    dts = [(dtype_iv(dt, V.dtype), int(extra)) for dt, extra in models]
    G = cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    parts = _LinearPass(phi_q, phi_k, V, G, causal, normalize, eps)
    return parts.vjp, tuple(parts.bound(dt, extra) for dt, extra in dts)


class _LinearPass:
    """The linear VJP and the precision-independent terms of its bound, by blocks of query rows.

    Each block of rows ``[r0, r1)`` forms its ``rows x m`` weights ``W``,
    ``dW`` and (for the bound) ``mag``, in arrays reused from block to
    block; it completes its rows' ``dphi_q`` terms and adds its share to
    every sum over rows (``dV``, ``dphi_k``, ``|W|^T |G| / den``,
    ``|dW|^T |phi_q|``, ``mag^T |phi_q|``).  Causal, a block sees only the
    keys ``j < r1``: every term of a later key is exactly 0.  The sums are
    those over whole ``n x m`` arrays in another order (the float64 factor
    ``1 + gamma_(3n + D + 8)`` holds for any order).
    """

    def __init__(self, phi_q, phi_k, V, G, causal, normalize, eps=0.0, bounds=True):
        batch, n, m = phi_q.shape[:-2], phi_q.shape[-2], phi_k.shape[-2]
        D, dv = phi_q.shape[-1], V.shape[-1]
        rows = vjp_block_rows(batch, n, m, 3 if bounds else 2, "linear")
        pq, pk, V64 = (np.asarray(X, dtype=np.float64) for X in (phi_q, phi_k, V))
        self.pq, self.pk, self.normalize = pq, pk, normalize
        aG, aV, aq, ak = (np.abs(X) for X in (G, V64, pq, pk))
        dq, dk = np.empty(batch + (n, D)), np.zeros(batch + (m, D))
        self.dV = np.zeros(batch + (m, dv))
        if bounds:
            self.dWk, self.magk = np.empty(batch + (n, D)), np.empty(batch + (n, D))
            self.dWq, self.magq = np.zeros(batch + (m, D)), np.zeros(batch + (m, D))
            self.WG = np.zeros(batch + (m, dv))
        bufs = [np.empty(batch + (rows, m)) for _ in range(3 if bounds else 2)]
        spread = 1.0  # max_i (m 1)_i / (den_i + eps): the normalisers' relative condition
        for r0, r1, c1 in row_blocks(n, m, rows, causal):
            W, dW, *rest = (b[..., : r1 - r0, :c1] for b in bufs)
            q, g = pq[..., r0:r1, :], G[..., r0:r1, :]
            k, v = pk[..., :c1, :], V64[..., :c1, :]
            np.matmul(q, swap_last(k), out=W)
            if causal and r0 < c1:
                mask_future_entries(W[..., r0:c1], 0.0)  # key j > i: j - r0 > i - r0
            if normalize:
                den = W.sum(axis=-1, keepdims=True) + eps
                if not (den > 0).all():
                    raise NumericalFailure(
                        "linear VJP: a normaliser is <= 0 (claim C12); no gradient there"
                    )
                a = (W @ v) / den
                Gn = g / den
            else:
                Gn = g
            np.matmul(Gn, swap_last(v), out=dW)
            if normalize:
                dW -= np.sum(Gn * a, axis=-1, keepdims=True)
            if causal and r0 < c1:
                mask_future_entries(dW[..., r0:c1], 0.0)
            self.dV[..., :c1, :] += swap_last(W) @ Gn
            dq[..., r0:r1, :] = dW @ k
            dk[..., :c1, :] += swap_last(dW) @ q
            if not bounds:
                continue
            (mag,) = rest
            np.matmul(aG[..., r0:r1, :], swap_last(aV[..., :c1, :]), out=mag)
            # the weights' magnitudes m_ij = |phi_q_i| . |phi_k_j| (>= |w_ij|), in W's buffer
            np.matmul(aq[..., r0:r1, :], swap_last(ak[..., :c1, :]), out=W)
            if causal and r0 < c1:
                mask_future_entries(W[..., r0:c1], 0.0)
            if normalize:
                spread = max(spread, float(np.max(W.sum(axis=-1, keepdims=True) / den)))
                mag += np.abs(np.sum(g * a, axis=-1, keepdims=True))
                mag /= den
                self.WG[..., :c1, :] += swap_last(W) @ (aG[..., r0:r1, :] / den)
            else:
                self.WG[..., :c1, :] += swap_last(W) @ aG[..., r0:r1, :]
            if causal and r0 < c1:
                mask_future_entries(mag[..., r0:c1], 0.0)
            np.abs(dW, out=dW)
            kk, qq = ak[..., :c1, :], aq[..., r0:r1, :]
            self.dWk[..., r0:r1, :], self.magk[..., r0:r1, :] = dW @ kk, mag @ kk
            self.dWq[..., :c1, :] += swap_last(dW) @ qq
            self.magq[..., :c1, :] += swap_last(mag) @ qq
        self.vjp = VJP(dq, dk, self.dV)
        self.spread = spread
        self.top = float(max(aq.max(), ak.max(), aV.max(), aG.max(initial=0.0)))

    def bound(self, dt, extra_ops: int = 0) -> VJP:
        n, D = self.pk.shape[-2], self.pq.shape[-1]
        dv = self.dV.shape[-1]
        g = gamma(n + dv + D + 2 + extra_ops, dt)
        gw = gamma(D + extra_ops, dt)
        if self.normalize:
            rho_den = gamma(2 * n + 2 * D + 4 + extra_ops, dt) * self.spread
            rho_a = 2.0 * rho_den / (1.0 - rho_den) if rho_den < 1.0 else math.inf
            cW = (1.0 + g) * (1.0 + 2.0 * rho_a) - 1.0
            cV = (1.0 + g) * (1.0 + gw) * (1.0 + rho_a) - 1.0
        else:
            cW, cV = g, (1.0 + g) * (1.0 + gw) - 1.0
        # E_dW = cW mag (masked); E_dphi_q = g |dW| |phi_k| + E_dW |phi_k|, likewise phi_k
        Edq = g * self.dWk + cW * self.magk
        Edk = g * self.dWq + cW * self.magq
        EdV = cV * self.WG
        f64 = 1.0 + gamma(3 * n + D + 8)
        under = (3 * n + 8) * eta(dt) * (1.0 + self.top) ** 3
        return VJP(Edq * f64 + under, Edk * f64 + under, EdV * f64 + under)
