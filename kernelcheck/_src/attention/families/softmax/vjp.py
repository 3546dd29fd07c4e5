"""The reference backward pass of softmax attention and its error bound (claims C1, C2).

For a cotangent ``G`` of the output's shape, ``O = P V`` with
``P = softmax(scale Q K^T)`` (masked): ``dV = P^T G``, ``dP = G V^T``,
``dS = P o (dP - rowsum(P o dP))``, ``dQ = scale dS K``, ``dK = scale dS^T Q``.
The weights are formed in float64 a block of query rows at a time (see
:mod:`~kernelcheck._src.attention.common.vjp`); every entry of the VJP is a
sum of products of at most three factors computed with at most ``k``
roundings each, so it is within ``rho`` times the same sum of absolute
values, ``rho`` the relative error of the factors (Higham's standard model).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.bounds import EXP_ULPS
from kernelcheck._src.attention.common.inputs import dtype_iv, softmax_iv
from kernelcheck._src.attention.common.vjp import (
    VJP,
    cotangent,
    float64_share,
    mask_future_entries,
    row_blocks,
    scaled,
    swap_last,
    vjp_block_rows,
)
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck.errors import NumericalFailure


def softmax_vjp(Q: Any, K: Any, V: Any, G: Any, *, causal: bool = False, scale=None) -> VJP:
    """The VJP of :func:`~kernelcheck.attention.softmax` along ``G``: ``(dQ, dK, dV)`` (C1).

    Parameters
    ----------
    Q : array_like, shape (..., n, d)
        The queries.
    K : array_like, shape (..., n, d)
        The keys.
    V : array_like, shape (..., n, d_v)
        The values.
    G : array_like, shape (..., n, d_v)
        The cotangent.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    scale : float, default None
        Logit scale; None: ``1 / sqrt(d)``.

    Returns
    -------
    VJP

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import softmax, softmax_vjp
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, G = rng.normal(size=(4, 5, 3))
    >>> dQ, dK, dV = softmax_vjp(Q, K, V, G)
    >>> E = rng.normal(size=Q.shape); h = 1e-6
    >>> fd = ((softmax(Q + h * E, K, V) - softmax(Q - h * E, K, V)) * G).sum() / (2 * h)
    >>> bool(abs(fd - (dQ * E).sum()) < 1e-7)
    True
    """
    Q, K, V, causal, scale = softmax_iv(Q, K, V, causal, scale)
    G = cotangent(G, Q.shape[:-1] + V.shape[-1:])
    return _SoftmaxPass(Q, K, V, G, causal, scale, ()).vjp


def softmax_vjp_error_bound(
    Q: Any, K: Any, V: Any, G: Any, *, causal: bool = False, scale=None, dtype: Any = None
) -> VJP:
    """Entrywise bounds on the rounding of a softmax backward pass (C1).

    The weights carry a relative error ``rho_i = (1 + expm1(2 theta_i))(1 + gamma_(n+1)) - 1``
    (``theta_i`` of :func:`~kernelcheck.attention.softmax_error_bound`: logits,
    maximum, exp; then the normalising sum).  With ``gamma = gamma_(n + d_v + 2)``:

        E_dV = (rho + gamma (1 + rho)) P^T |G|,
        E_dP = gamma |G| |V|^T,  E_c = (rho + gamma (1 + rho)) |G| . (P |V|),
        E_dS = rho P |dP - c| + P (E_dP + E_c)(1 + rho) + u |dS|,
        E_dQ = scale (gamma |dS| |K| + E_dS |K|)(1 + u),  E_dK likewise with Q,

    evaluated in float64 on the reference's ``P``, ``dP``, ``dS`` (their own
    float64 error absorbed by a factor ``1 + gamma_(n + d + 8)`` in float64),
    plus ``(3 n + 8) eta`` per term for gradual underflow.  The products with
    ``|K|`` and ``|Q|`` are distributed over the terms of ``E_dS`` (the same
    sums of non-negative terms, in another order), so no ``n x n`` term
    depends on ``dtype``: :func:`softmax_vjp_with_bounds` shares them between
    precisions.  They are formed a block of query rows at a time, never for
    all n rows at once (memory: a few ``rows x n`` blocks of about 2 MiB).

    Parameters
    ----------
    Q : array_like, shape (..., n, d)
        The queries.
    K : array_like, shape (..., n, d)
        The keys.
    V : array_like, shape (..., n, d_v)
        The values.
    G : array_like, shape (..., n, d_v)
        The cotangent.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    scale : float, default None
        Logit scale; None: ``1 / sqrt(d)``.
    dtype : dtype or str, default None
        The precision of the backward pass bounded (None: the inputs').

    Returns
    -------
    VJP
    """
    Q, K, V, causal, scale = softmax_iv(Q, K, V, causal, scale)
    dt = dtype_iv(dtype, V.dtype)
    G = cotangent(G, Q.shape[:-1] + V.shape[-1:])
    return _SoftmaxPass(Q, K, V, G, causal, scale, (dt,), vjp=False).bounds[0]


def softmax_vjp_with_bounds(
    Q, K, V, G, *, causal=False, scale=None, dtypes=(None,), plus_float64=False
):
    """:func:`softmax_vjp` and :func:`softmax_vjp_error_bound` for each of ``dtypes``, at once.

    The weights and the ``n x n`` terms of the bound are formed once (a
    block of query rows at a time) and serve every precision; the results
    equal the separate calls' bit for bit.

    With ``plus_float64=True`` each bound also covers the float64
    reference's own error (what a comparison with the reference needs):
    ``(1 + c) B(dt) >= B(dt) + B(float64)`` with ``c`` of
    :func:`float64_share`, at the cost of one bound instead of two.
    """
    Q, K, V, causal, scale = softmax_iv(Q, K, V, causal, scale)
    dts = [dtype_iv(dt, V.dtype) for dt in dtypes]
    G = cotangent(G, Q.shape[:-1] + V.shape[-1:])
    parts = _SoftmaxPass(Q, K, V, G, causal, scale, dts)
    if not plus_float64:
        return parts.vjp, parts.bounds
    n, d, dv = K.shape[-2], Q.shape[-1], V.shape[-1]
    ks = (d + 2, n, n + 1, n + dv + 2)
    return parts.vjp, tuple(
        scaled(b, 1.0 + float64_share(dt, ks)) for dt, b in zip(dts, parts.bounds, strict=True)
    )


class _SoftmaxPass:
    """The softmax VJP and its bounds for each of ``dts``, one block of query rows at a time.

    A block of rows ``[r0, r1)`` forms its weights ``P`` and the terms of
    the bound that are ``rows x m`` (``P |dP - c|``, ``P (|G| |V|^T)``), and
    adds its share to every sum over rows (``dV = P^T G``, ``dK``, the
    bound's ``E_dV`` and ``E_dS^T |Q|``); the rows' own results (``dQ``,
    ``E_dQ``) are complete when the block is.  Causal, a block sees only the
    keys ``j < r1``: the weights of later keys are exactly 0 and every term
    they enter is 0, so the block skips them.  Every entry is the same
    sum of the same rounded products as over whole ``n x m`` arrays, in
    another order: the float64 models (``gamma_n`` per sum, the bound's own
    ``1 + gamma_(n + d + 8)``) hold for any order of summation.
    """

    def __init__(self, Q, K, V, G, causal, scale, dts, vjp=True):
        batch, n, m = Q.shape[:-2], Q.shape[-2], K.shape[-2]
        d, dv = Q.shape[-1], V.shape[-1]
        rows = vjp_block_rows(batch, n, m, 6 if dts else 3, "softmax")
        Q64, K64, V64 = (np.asarray(X, dtype=np.float64) for X in (Q, K, V))
        aQ, aK, aG, aV = (np.abs(X) for X in (Q64, K64, G, V64))
        dQ = np.empty(batch + (n, d))
        dK, dV = np.zeros(batch + (m, d)), np.zeros(batch + (m, dv))
        models = [_SoftmaxModel(dt, m, d, dv, scale, aQ, aK) for dt in dts]
        self._blocks(rows, causal, scale, (Q64, K64, V64, G), (aG, aV), (dQ, dK, dV), models, vjp)
        dQ *= scale
        dK *= scale
        self.vjp = VJP(dQ, dK, dV) if vjp else None
        top = (float(aG.max(initial=0.0)), float(aV.max()))
        self.bounds = tuple(model.result(top) for model in models)

    @staticmethod
    def _blocks(rows, causal, scale, inputs, mags, out, models, vjp) -> None:
        """Every block of query rows, into ``out`` and ``models`` (its arrays freed on return)."""
        (Q64, K64, V64, G), (aG, aV), (dQ, dK, dV) = inputs, mags, out
        batch, n, m = Q64.shape[:-2], Q64.shape[-2], K64.shape[-2]
        # the block's arrays, reused from block to block: P, dP - c, dS, then the
        # bound's B1 and two of scratch
        bufs = [np.empty(batch + (rows, m)) for _ in range(6 if models else 3)]
        for r0, r1, c1 in row_blocks(n, m, rows, causal):
            P, D, dS, *rest = (b[..., : r1 - r0, :c1] for b in bufs)
            q, g = Q64[..., r0:r1, :], G[..., r0:r1, :]
            k, v = K64[..., :c1, :], V64[..., :c1, :]
            np.matmul(q, swap_last(k), out=P)  # the logits, turned into the weights in place
            P *= scale
            if causal and r0 < c1:
                mask_future_entries(P[..., r0:c1], -np.inf)  # key j > i: j - r0 > i - r0
            mx = P.max(axis=-1, keepdims=True)
            if not np.isfinite(mx).all():
                raise NumericalFailure(
                    "softmax VJP: logits beyond the float64 range; scale the inputs down"
                )
            P -= mx
            np.exp(P, out=P)
            P /= P.sum(axis=-1, keepdims=True)
            dV[..., :c1, :] += swap_last(P) @ g
            np.matmul(g, swap_last(v), out=D)
            # c = rowsum(P o dP) in one pass, without forming P o dP first (24 against
            # 83 ms at n = 4096, one thread): a sum of n rounded products either way
            D -= np.einsum("...ij,...ij->...i", P, D)[..., None]
            np.multiply(P, D, out=dS)
            if vjp:
                dQ[..., r0:r1, :] = dS @ k
                dK[..., :c1, :] += swap_last(dS) @ q
            if models:
                B1, *scratch = rest
                np.abs(D, out=D)
                # P |dP - c| is also |dS| = |P o (dP - c)|, entry for entry (P >= 0, and
                # a rounded product's magnitude does not depend on the signs): one
                # array and its products with |K| and |Q| serve both terms of the bound
                D *= P
                np.matmul(aG[..., r0:r1, :], swap_last(aV[..., :c1, :]), out=B1)
                B1 *= P  # P (|G| |V|^T)
                GPV = np.sum(aG[..., r0:r1, :] * (P @ aV[..., :c1, :]), axis=-1, keepdims=True)
                for model in models:
                    model.add(r0, r1, c1, P, D, B1, GPV, aG, scratch)


class _SoftmaxModel:
    """The bound of :func:`softmax_vjp_error_bound` in one precision, summed block by block.

    Per row ``i`` it depends on the precision through ``rho_i`` and
    ``alpha_i = rho_i + g (1 + rho_i)`` (``r_i = scale |q_i| . max_j |k_j|``
    bounds the row's logits); with ``|dS| = P |dP - c| = A1`` the terms are

        M = w A1 + (1 + rho) (g B1 + E_c P)   (each factor per row),
        E_dQ = scale (M |K|) (1 + u),  E_dK = scale (M^T |Q|) (1 + u),  E_dV = P^T (alpha |G|),

    ``w = rho + u + gamma_n`` (the products' own ``gamma_n |dS|`` merged in),
    ``B1 = P (|G| |V|^T)``, ``E_c = alpha |G| . (P |V|)``: the docstring
    formula of :func:`softmax_vjp_error_bound` with its sums over keys and
    rows in another order (each a sum of non-negative terms).
    """

    def __init__(self, dt, n, d, dv, scale, aQ, aK):
        # n: the keys (the length of every sum over them)
        self.u, self.scale, self.n, self.d = unit_roundoff(dt), scale, n, d
        self.dt, self.aQ, self.aK = dt, aQ, aK
        absK = aK.max(axis=-2, keepdims=True)
        r = scale * np.sum(aQ * absK, axis=-1, keepdims=True)
        u = self.u
        theta = gamma(d + 2, dt) * r + 2.0 * u * r + (EXP_ULPS + 1) * u
        # (1 + e)(1 + g1) - 1 without the cancellation of forming 1 + e first
        e, g1 = np.expm1(2.0 * theta), gamma(n + 1, dt)
        self.rho = e + g1 + e * g1
        self.g = gamma(n + dv + 2, dt)
        self.alpha = self.rho + self.g * (1.0 + self.rho)
        self.w = self.rho + u + gamma(n, dt)
        self.EdQ = np.empty(aQ.shape)
        self.EdSQ = np.zeros(aK.shape)
        self.EdV = np.zeros(aK.shape[:-1] + (dv,))

    def add(self, r0, r1, c1, P, A1, B1, GPV, aG, scratch) -> None:
        """Add the rows ``[r0, r1)`` (keys ``[0, c1)``); ``scratch``: two arrays of their shape."""
        rho, alpha, w = (x[..., r0:r1, :] for x in (self.rho, self.alpha, self.w))
        k, q = self.aK[..., :c1, :], self.aQ[..., r0:r1, :]
        self.EdV[..., :c1, :] += swap_last(P) @ (alpha * aG[..., r0:r1, :])
        Ec = alpha * GPV
        # E_dS = rho A1 + (1 + rho)(g B1 + Ec P) + u |dS|, times |K| (rows) or |Q|
        # (columns); with the products' own gamma_n |dS|, and |dS| = A1:
        # E_dS + gamma_n |dS| = w A1 + (1 + rho)(g B1 + Ec P) =: M, whose factors
        # are per row, so E_dQ is M |K| and E_dK is M^T |Q|: two products, not six
        M, T = scratch
        np.multiply(A1, w, out=M)
        M += np.multiply(B1, self.g * (1.0 + rho), out=T)
        M += np.multiply(P, (1.0 + rho) * Ec, out=T)
        self.EdQ[..., r0:r1, :] = M @ k
        self.EdSQ[..., :c1, :] += swap_last(M) @ q

    def result(self, top) -> VJP:
        u, dt, n, d = self.u, self.dt, self.n, self.d
        EdQ = self.scale * self.EdQ * (1.0 + u)
        EdK = self.scale * self.EdSQ * (1.0 + u)
        f64 = 1.0 + gamma(n + d + 8)
        under = (3 * n + 8) * eta(dt) * (1.0 + top[0]) * (1.0 + top[1])
        return VJP(EdQ * f64 + under, EdK * f64 + under, self.EdV * f64 + under)
