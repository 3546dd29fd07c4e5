"""Vector-Jacobian products of the attention forms, with their a-priori error bounds.

For a cotangent ``G`` of the output's shape, the VJP of a form is the
gradient of ``<G, out>`` with respect to each input: what a layer's backward
pass computes.  Formulas (row ``i`` of the output, ``j`` over the keys it
sees):

* softmax, ``O = P V`` with ``P = softmax(scale Q K^T)`` (masked):
  ``dV = P^T G``, ``dP = G V^T``, ``dS = P o (dP - rowsum(P o dP))``,
  ``dQ = scale dS K``, ``dK = scale dS^T Q``;
* linear, ``a_i = num_i / den_i`` with ``num_i = sum_j w_ij v_j``,
  ``den_i = sum_j w_ij``, ``w = phi_q phi_k^T`` (masked):
  ``dW_ij = g_i . (v_j - a_i) / den_i``, ``dV = W^T (G / den)``,
  ``dphi_q = dW phi_k``, ``dphi_k = dW^T phi_q``; unnormalised
  ``dW_ij = g_i . v_j`` and ``dV = W^T G``.

The references form the n x n weight matrix in float64 a block of query
rows at a time (memory: a few blocks of about 2 MiB whatever n, the blocks
refused up front beyond the size limit); they are the
reference backward passes of ``verify.attention(..., grad=True)``.  Error
bounds (Higham's standard model, ``gamma_k = k u / (1 - k u)``; inputs taken
as exact): every entry of a VJP is a sum of products of at most three
factors computed with at most ``k`` roundings each, so it is within
``rho`` times the same sum of absolute values, with ``rho`` the relative
error of the factors (see each bound).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.inputs import dtype_iv, features_iv, softmax_iv
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.core.validate import as_array, as_bool, check_size, describe
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "VJP",
    "softmax_vjp",
    "softmax_vjp_error_bound",
    "softmax_vjp_with_bounds",
    "linear_vjp",
    "linear_vjp_error_bound",
    "linear_vjp_with_bounds",
]

#: Accuracy of exp in units of u (as in the forward bound).
_EXP_ULPS = 4


class VJP(NamedTuple):
    """The gradients of ``<G, out>`` with respect to the three inputs of a form."""

    dA: np.ndarray  # dQ (softmax) or dphi_q (linear)
    dB: np.ndarray  # dK or dphi_k
    dV: np.ndarray


def _swap(X):
    return np.swapaxes(X, -1, -2)


def _cotangent(G, out_shape) -> np.ndarray:
    G = as_array(G, "G", dtype=np.float64)
    if G.shape != out_shape:
        raise InvalidArgument(f"`G` must have the output's shape {out_shape}, got {describe(G)}")
    return G


_MASK_ROWS = 256


def _mask_future(S: np.ndarray, value: float) -> None:
    """Set ``S[..., i, j] = value`` for every ``j > i``, in place.

    Row blocks of :data:`_MASK_ROWS`: the keys past a block are one slice,
    its diagonal square takes a small triangular mask (a boolean mask over
    the whole ``n x m`` matrix costs several passes over it).
    """
    n, m = S.shape[-2:]
    tri = np.triu(np.ones((_MASK_ROWS, _MASK_ROWS), dtype=bool), 1)
    for i0 in range(0, n, _MASK_ROWS):
        i1, c1 = min(n, i0 + _MASK_ROWS), min(m, i0 + _MASK_ROWS)
        if i1 < m:
            S[..., i0:i1, i1:] = value
        if i0 < c1:
            S[..., i0:i1, i0:c1][..., tri[: i1 - i0, : c1 - i0]] = value


#: Entries of one query block's ``rows x m`` arrays in the softmax VJP (2 MiB
#: of float64).  A block's six such arrays (weights, ``dP - c``, ``dS``,
#: ``P (|G| |V|^T)``, two of scratch) are reused from block to block, in place
#: of four ``n x m`` arrays formed afresh (at n = 4096, 537 MB, each page
#: faulted in on first touch).  ``softmax_vjp_with_bounds`` at n = 4096,
#: d = d_v = 64, one float32 bound plus float64's (interleaved, 4 rounds, load
#: below 1): causal 0.96-1.02 s before, 0.44-0.52 s with blocks of 2^18
#: entries (a causal block skips the keys after its last row); bidirectional
#: 1.08-1.28 s before, 0.80-0.82 s.  Blocks of 2^17 to 2^20 entries were within
#: 10% of each other, 2^16 1.4x slower (products of 16 rows).
_VJP_BLOCK_ELEMENTS = 1 << 18


#: Fewest query rows a block (unless n is smaller), whatever the batch: with 32
#: heads of n = 512, d = 64, blocks of 16 rows (2^18 entries over the batch)
#: took 1.28x the time of blocks of 64 (products of 16 rows lose BLAS speed).
_VJP_MIN_ROWS = 64


def _vjp_block_rows(batch: tuple, n: int, m: int, arrays: int, form: str) -> int:
    """Query rows per block of a VJP pass keeping ``arrays`` blocks of its n x m weights."""
    nb = int(np.prod(batch, dtype=np.int64))
    rows = min(n, max(_VJP_MIN_ROWS, _VJP_BLOCK_ELEMENTS // max(1, nb * m)))
    check_size(arrays * nb * rows * m, f"the {form} VJP's blocks of weights")
    return rows


def _row_blocks(n: int, m: int, rows: int, causal: bool):
    """``(r0, r1, c1)`` for each block of query rows ``[r0, r1)``: keys ``[0, c1)`` it sees.

    Causal, row i sees keys ``j <= i``, so a block's last row sees ``r1``
    keys; every weight of a later key is exactly 0 and is not formed.
    """
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        yield r0, r1, (min(m, r1) if causal else m)


def softmax_vjp(Q: Any, K: Any, V: Any, G: Any, *, causal: bool = False, scale=None) -> VJP:
    """The VJP of :func:`~kernelcheck.attention.softmax` along ``G``: ``(dQ, dK, dV)`` (C1).

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
    G = _cotangent(G, Q.shape[:-1] + V.shape[-1:])
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
    """
    Q, K, V, causal, scale = softmax_iv(Q, K, V, causal, scale)
    dt = dtype_iv(dtype, V.dtype)
    G = _cotangent(G, Q.shape[:-1] + V.shape[-1:])
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
    G = _cotangent(G, Q.shape[:-1] + V.shape[-1:])
    parts = _SoftmaxPass(Q, K, V, G, causal, scale, dts)
    if not plus_float64:
        return parts.vjp, parts.bounds
    n, d, dv = K.shape[-2], Q.shape[-1], V.shape[-1]
    ks = (d + 2, n, n + 1, n + dv + 2)
    return parts.vjp, tuple(
        _scaled(b, 1.0 + float64_share(dt, ks)) for dt, b in zip(dts, parts.bounds, strict=True)
    )


def float64_share(dt, ks) -> float:
    """``c`` with ``B(float64) <= c B(dt)`` for the VJP bounds of this module (``c <= 1``).

    Every additive term of a bound is a product of non-negative factors, at
    least one of them first order: ``u``, ``eta``, a ``gamma_k`` with ``k``
    in ``ks``, or built from them (``theta``, ``expm1(2 theta)``, ``rho``,
    ``alpha``), and every other factor is non-decreasing in them.  Each
    first-order quantity of float64 is at most ``c`` times ``dt``'s, with
    ``c`` the largest of the ratios ``u_64 / u``, ``eta_64 / eta``,
    ``gamma_k(64) / gamma_k`` -- for ``expm1`` because
    ``expm1(c x) <= c expm1(x)`` for ``c <= 1``, ``x >= 0`` (convexity),
    for products of first-order factors because the others only shrink.
    So each term, and the bound, shrinks at least by ``c``.  ``dt`` at
    least as coarse as float64 in every ratio is required (else ``c = 1``
    would not hold and a ``ValueError`` is raised: a programming error).
    """
    ratios = [unit_roundoff(np.float64) / unit_roundoff(dt), eta(np.float64) / eta(dt)]
    ratios += [gamma(k, np.float64) / gamma(k, dt) for k in ks]
    c = max(ratios)
    if not c <= 1.0:
        raise ValueError(f"float64_share: {dt!r} is finer than float64 in some ratio ({c})")
    return c


def _scaled(b: VJP, f: float) -> VJP:
    return VJP(*(x * f for x in b))


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
        rows = _vjp_block_rows(batch, n, m, 6 if dts else 3, "softmax")
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
        for r0, r1, c1 in _row_blocks(n, m, rows, causal):
            P, D, dS, *rest = (b[..., : r1 - r0, :c1] for b in bufs)
            q, g = Q64[..., r0:r1, :], G[..., r0:r1, :]
            k, v = K64[..., :c1, :], V64[..., :c1, :]
            np.matmul(q, _swap(k), out=P)  # the logits, turned into the weights in place
            P *= scale
            if causal and r0 < c1:
                _mask_future(P[..., r0:c1], -np.inf)  # key j > i: j - r0 > i - r0
            mx = P.max(axis=-1, keepdims=True)
            if not np.isfinite(mx).all():
                raise NumericalFailure(
                    "softmax VJP: logits beyond the float64 range; scale the inputs down"
                )
            P -= mx
            np.exp(P, out=P)
            P /= P.sum(axis=-1, keepdims=True)
            dV[..., :c1, :] += _swap(P) @ g
            np.matmul(g, _swap(v), out=D)
            # c = rowsum(P o dP) in one pass, without forming P o dP first (24 against
            # 83 ms at n = 4096, one thread): a sum of n rounded products either way
            D -= np.einsum("...ij,...ij->...i", P, D)[..., None]
            np.multiply(P, D, out=dS)
            if vjp:
                dQ[..., r0:r1, :] = dS @ k
                dK[..., :c1, :] += _swap(dS) @ q
            if models:
                B1, *scratch = rest
                np.abs(D, out=D)
                # P |dP - c| is also |dS| = |P o (dP - c)|, entry for entry (P >= 0, and
                # a rounded product's magnitude does not depend on the signs): one
                # array and its products with |K| and |Q| serve both terms of the bound
                D *= P
                np.matmul(aG[..., r0:r1, :], _swap(aV[..., :c1, :]), out=B1)
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
        theta = gamma(d + 2, dt) * r + 2.0 * u * r + (_EXP_ULPS + 1) * u
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
        self.EdV[..., :c1, :] += _swap(P) @ (alpha * aG[..., r0:r1, :])
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
        self.EdSQ[..., :c1, :] += _swap(M) @ q

    def result(self, top) -> VJP:
        u, dt, n, d = self.u, self.dt, self.n, self.d
        EdQ = self.scale * self.EdQ * (1.0 + u)
        EdK = self.scale * self.EdSQ * (1.0 + u)
        f64 = 1.0 + gamma(n + d + 8)
        under = (3 * n + 8) * eta(dt) * (1.0 + top[0]) * (1.0 + top[1])
        return VJP(EdQ * f64 + under, EdK * f64 + under, self.EdV * f64 + under)


def linear_vjp(
    phi_q: Any, phi_k: Any, V: Any, G: Any, *, causal: bool = False, normalize: bool = True
) -> VJP:
    """The VJP of :func:`~kernelcheck.attention.parallel` along ``G``: ``(dphi_q, dphi_k, dV)``.

    Claims C10, C14, C19: the gradient of every linear form (parallel,
    recurrent, chunked compute the same function).

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
    G = _cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    return _LinearPass(phi_q, phi_k, V, G, causal, normalize, bounds=False).vjp


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
) -> VJP:
    """Entrywise bounds on the rounding of a linear attention backward pass (C10, C14, C19).

    Weights ``w_ij = phi_q_i . phi_k_j`` carry ``gamma_(D + extra_ops)``; the
    normaliser ``den_i`` and the output ``a_i`` carry ``rho_a``, the forward
    model's relative error (``gamma_(2n + 2D + 4 + extra_ops)`` on each sum,
    ``2 rho_a / (1 - rho_a)`` on the quotient); with ``g = gamma_(n + d_v + D + 2)``:

        E_dW = ((1 + g)(1 + 2 rho_a) - 1) (|G| |V|^T + |g . a| 1^T) / den   (masked),
        E_dV = ((1 + g)(1 + gamma_w)(1 + rho_a) - 1) |W|^T |G| / den,
        E_dphi_q = g |dW| |phi_k| + E_dW |phi_k|,  E_dphi_k likewise with phi_q,

    unnormalised without the ``den`` and ``a`` terms; all evaluated in
    float64 on the reference's quantities (their float64 error absorbed by a
    factor ``1 + gamma_(3n + D + 8)``), plus ``(3 n + 8) eta`` per term.
    """
    phi_q, phi_k, V, causal, _ = features_iv(phi_q, phi_k, V, causal, "raise")
    normalize = as_bool(normalize, "normalize")
    dt = dtype_iv(dtype, V.dtype)
    G = _cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    return _LinearPass(phi_q, phi_k, V, G, causal, normalize).bound(dt, extra_ops)


def linear_vjp_with_bounds(
    phi_q, phi_k, V, G, *, causal=False, normalize=True, models=((None, 0),)
):
    """:func:`linear_vjp` and :func:`linear_vjp_error_bound` for each ``(dtype, extra_ops)``.

    Every precision-dependent factor of the bound is a scalar, so the
    ``n x n`` terms are formed once (a block of query rows at a time) and
    scaled per model.
    """
    phi_q, phi_k, V, causal, _ = features_iv(phi_q, phi_k, V, causal, "raise")
    normalize = as_bool(normalize, "normalize")
    dts = [(dtype_iv(dt, V.dtype), int(extra)) for dt, extra in models]
    G = _cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    parts = _LinearPass(phi_q, phi_k, V, G, causal, normalize)
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

    def __init__(self, phi_q, phi_k, V, G, causal, normalize, bounds=True):
        batch, n, m = phi_q.shape[:-2], phi_q.shape[-2], phi_k.shape[-2]
        D, dv = phi_q.shape[-1], V.shape[-1]
        rows = _vjp_block_rows(batch, n, m, 3 if bounds else 2, "linear")
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
        for r0, r1, c1 in _row_blocks(n, m, rows, causal):
            W, dW, *rest = (b[..., : r1 - r0, :c1] for b in bufs)
            q, g = pq[..., r0:r1, :], G[..., r0:r1, :]
            k, v = pk[..., :c1, :], V64[..., :c1, :]
            np.matmul(q, _swap(k), out=W)
            if causal and r0 < c1:
                _mask_future(W[..., r0:c1], 0.0)  # key j > i: j - r0 > i - r0
            if normalize:
                den = W.sum(axis=-1, keepdims=True)
                if not (den > 0).all():
                    raise NumericalFailure(
                        "linear VJP: a normaliser is <= 0 (claim C12); no gradient there"
                    )
                a = (W @ v) / den
                Gn = g / den
            else:
                Gn = g
            np.matmul(Gn, _swap(v), out=dW)
            if normalize:
                dW -= np.sum(Gn * a, axis=-1, keepdims=True)
            if causal and r0 < c1:
                _mask_future(dW[..., r0:c1], 0.0)
            self.dV[..., :c1, :] += _swap(W) @ Gn
            dq[..., r0:r1, :] = dW @ k
            dk[..., :c1, :] += _swap(dW) @ q
            if not bounds:
                continue
            (mag,) = rest
            np.matmul(aG[..., r0:r1, :], _swap(aV[..., :c1, :]), out=mag)
            np.abs(W, out=W)
            if normalize:
                mag += np.abs(np.sum(g * a, axis=-1, keepdims=True))
                mag /= den
                self.WG[..., :c1, :] += _swap(W) @ (aG[..., r0:r1, :] / den)
            else:
                self.WG[..., :c1, :] += _swap(W) @ aG[..., r0:r1, :]
            if causal and r0 < c1:
                _mask_future(mag[..., r0:c1], 0.0)
            np.abs(dW, out=dW)
            kk, qq = ak[..., :c1, :], aq[..., r0:r1, :]
            self.dWk[..., r0:r1, :], self.magk[..., r0:r1, :] = dW @ kk, mag @ kk
            self.dWq[..., :c1, :] += _swap(dW) @ qq
            self.magq[..., :c1, :] += _swap(mag) @ qq
        self.vjp = VJP(dq, dk, self.dV)
        self.top = float(max(aq.max(), ak.max(), aV.max(), aG.max(initial=0.0)))

    def bound(self, dt, extra_ops: int = 0) -> VJP:
        n, D = self.pk.shape[-2], self.pq.shape[-1]
        dv = self.dV.shape[-1]
        g = gamma(n + dv + D + 2 + extra_ops, dt)
        gw = gamma(D + extra_ops, dt)
        if self.normalize:
            rho_a = gamma(2 * n + 2 * D + 4 + extra_ops, dt)
            rho_a = 2.0 * rho_a / (1.0 - rho_a)
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
