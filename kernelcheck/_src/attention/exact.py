"""Exact attention forms: softmax (claim C1) and kernelized attention from a Gram block (C10)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention import blocking
from kernelcheck._src.attention.blocking import (
    batch_size,
    query_block_rows,
    swap,
    with_ones,
)
from kernelcheck._src.attention.inputs import kernelized_iv, softmax_iv
from kernelcheck._src.attention.types import finish
from kernelcheck._src.core.validate import (
    all_finite,
    call_user,
    describe,
)
from kernelcheck.errors import InvalidArgument, NumericalFailure


def softmax(Q: Any, K: Any, V: Any, *, causal: bool = False, scale: float | None = None):
    """Exact softmax attention, numerically stable (claims C1, C2, C10).

    ``A = softmax(scale Q K^T) V`` row by row:
    ``a_i = sum_j w_ij v_j`` with ``w_ij = exp(s_ij - m_i) / sum_l exp(s_il - m_i)``,
    ``s_ij = scale q_i . k_j`` and ``m_i = max_j s_ij``.  Subtracting the row
    maximum changes nothing mathematically and keeps every exponential in
    (0, 1], so no logit overflows; the normaliser is ``>= 1`` and never bad.
    Causal attention restricts j to ``j <= i``.

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    causal : bool
        Restrict row i to keys ``j <= i``.
    scale : float, optional
        Logit scale; ``1 / sqrt(d)`` by default (C1).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Notes
    -----
    Operation count per sequence (C2): ``2 n^2 d`` for the logits, ``3 n^2``
    for the max, exp and row sums, ``2 n^2 d_v`` for the weighted sum (about
    half of all three when causal: only ``j <= i`` is formed), ``n d_v``
    divisions.  Query rows are processed in blocks so that memory stays at
    ``O(block n)``.  Error model: :func:`softmax_error_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import softmax
    >>> Q = K = np.array([[1000.0], [-1000.0]])   # logits far beyond exp's range
    >>> softmax(Q, K, np.array([[1.0], [2.0]]), scale=1.0).tolist()
    [[1.0], [2.0]]
    """
    # The inputs are checked up front (3 passes over n d numbers, against
    # n^2 (d + d_v) work): checking only the result would miss a -Inf in K,
    # whose logit is -Inf and whose weight is exactly 0 (a masked key).
    Q, K, V, causal, scale = softmax_iv(Q, K, V, causal, scale)
    batch, n, nk = Q.shape[:-2], Q.shape[-2], K.shape[-2]
    out = np.empty(Q.shape[:-1] + V.shape[-1:], dtype=V.dtype)
    Qs = Q * Q.dtype.type(scale)
    rows = query_block_rows(n, blocking.BLOCK_ELEMENTS // max(1, nk * batch_size(batch)), causal)
    # One logits buffer for every block (a fresh rows x nk array per block
    # costs its page faults each time); each block is a contiguous view of its
    # start (a strided view would make NumPy's ufuncs buffer their operands).
    nb = batch_size(batch)
    buf = np.empty(nb * min(rows, n) * nk, dtype=Q.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            kend = i1 if causal else nk
            s = buf[: nb * (i1 - i0) * kend].reshape(batch + (i1 - i0, kend))
            np.matmul(Qs[..., i0:i1, :], swap(K[..., :kend, :]), out=s)
            if causal:
                mask_future(s, i0)
            m = s.max(axis=-1, keepdims=True)
            if not np.isfinite(m).all():
                raise NumericalFailure(
                    "`softmax` logits overflowed: scale * q . k is beyond the floating-point "
                    f"range ({Q.dtype}); scale the inputs down"
                )
            s -= m
            np.exp(s, out=s)
            denom = s.sum(axis=-1, keepdims=True)
            block = out[..., i0:i1, :]
            np.matmul(s, V[..., :kend, :], out=block)
            block /= denom
    if not all_finite(out):
        raise NumericalFailure(
            "`softmax` attention overflowed: a weighted sum of values is beyond the "
            f"floating-point range ({V.dtype}, max |V| = {float(np.abs(V).max()):.3g}); "
            "scale the values down"
        )
    return out


#: Rows of the bands in which :func:`mask_future` masks a causal block's diagonal square.
FUTURE_BAND = 32
_FUTURE_TRI = np.triu(np.ones((FUTURE_BAND, FUTURE_BAND), dtype=bool), 1)


def mask_future(s: np.ndarray, i0: int) -> None:
    """Set the logits of future keys (``j > i``) of a causal query block to -Inf, in place.

    ``s`` holds the logits of queries ``i0 .. i0 + r`` against keys
    ``0 .. i0 + r`` (the block forms no later key).  Keys before ``i0`` are in
    every row's past and are not touched; the future lies in the diagonal
    square ``s[:, i0:]``.  The square is masked in bands of
    :data:`FUTURE_BAND` rows: the keys after a band's last row are wholly in
    its future (one slice assignment each), and the band's own
    ``FUTURE_BAND``-square takes a small strict upper-triangular mask.  A
    boolean mask over the block (or the square) would cost one byte and one
    masked write per logit, and dominated the causal form's time.
    ``exp(-Inf) = 0`` exactly, so the result is that of masking every future
    logit: no formed pair, sum or bound changes.
    """
    r = s.shape[-2]
    for a in range(0, r, FUTURE_BAND):
        b = min(r, a + FUTURE_BAND)
        s[..., a:b, i0 + b :] = -np.inf
        np.copyto(s[..., a:b, i0 + a : i0 + b], -np.inf, where=_FUTURE_TRI[: b - a, : b - a])


def gram_blocks(kernel, Q2, K2, causal, fn):
    """Yield ``(i0, i1, G)`` Gram blocks of ``fn(Q2[i0:i1], K2)``, causally masked."""
    n, m = Q2.shape[0], K2.shape[0]
    rows = query_block_rows(n, blocking.BLOCK_ELEMENTS // m, causal)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        kend = i1 if causal else m
        # the one wrapper of user code: copies (a kernel that writes into its arguments
        # never changes the caller's Q, K), kernelcheck errors through, others named
        G = np.asarray(call_user(fn, "`kernel`", Q2[i0:i1], K2[:kend]))
        if G.shape != (i1 - i0, kend):
            raise InvalidArgument(
                f"`kernel` returned a Gram block of shape {G.shape} for inputs of shapes "
                f"{Q2[i0:i1].shape} and {K2[:kend].shape}; expected {(i1 - i0, kend)}"
            )
        if G.dtype.kind not in "biuf":
            raise InvalidArgument(f"`kernel` must return real numbers, got {describe(G)}")
        G = G.astype(Q2.dtype, copy=True)
        if not np.isfinite(G).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(G))[0])
            raise InvalidArgument(
                f"`kernel` returned a non-finite value {G[bad]!r} at entry "
                f"{(bad[0] + i0, bad[1])} of its Gram block"
            )
        if causal:
            G[np.arange(kend)[None, :] > np.arange(i0, i1)[:, None]] = 0.0
        yield i0, i1, G


def kernelized(
    Q: Any,
    K: Any,
    V: Any,
    kernel: Any,
    *,
    causal: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Exact kernelized attention from the kernel's Gram block (claim C10).

    ``a_i = sum_j kappa(q_i, k_j) v_j / sum_j kappa(q_i, k_j)`` with
    ``j <= i`` when causal.  ``softmax(Q, K, V)`` equals
    ``kernelized(Q, K, V, Exponential(1 / sqrt(d)))`` (up to the two error
    models), since ``exp(q . k / sqrt d)`` is that kernel.

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    kernel : callable
        A kernel object (``kernel(X, Y)`` returns the (n, m) Gram block),
        e.g. from :mod:`kernelcheck.kernels`.
    causal : bool
    on_bad_normalizer : {"raise", "report"}
        A kernel with negative values (``Linear()``, odd Taylor orders) can
        give a normaliser ``<= 0``: raise :class:`~kernelcheck.errors.BadNormalizer`
        or return an :class:`AttentionOutput`.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v), or :class:`AttentionOutput`

    Notes
    -----
    Operation count per sequence: ``n^2`` kernel evaluations (about ``2 d``
    flops each for dot-product and distance kernels), ``2 n^2 (d_v + 1)`` for
    the products with ``[V, 1]``, ``n d_v`` divisions; halved when causal only
    in the products (the masked Gram block is still evaluated).  Error model:
    :func:`kernelized_error_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Exponential
    >>> from kernelcheck.attention import kernelized, softmax
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 5, 4))
    >>> a = kernelized(Q, K, V, Exponential(0.5))
    >>> bool(np.allclose(a, softmax(Q, K, V)))
    True
    """
    Q, K, V, causal, action = kernelized_iv(Q, K, V, kernel, causal, on_bad_normalizer)
    batch, dv = Q.shape[:-2], V.shape[-1]
    W = with_ones(V)
    H = np.empty(Q.shape[:-1] + (dv + 1,), dtype=V.dtype)
    for idx in np.ndindex(*batch):
        for i0, i1, G in gram_blocks(kernel, Q[idx], K[idx], causal, kernel):
            with np.errstate(over="ignore", invalid="ignore"):
                H[idx][i0:i1] = G @ W[idx][: G.shape[1]]
    return finish(H[..., :dv], H[..., dv], action, "kernelized")
