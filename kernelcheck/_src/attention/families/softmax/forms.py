"""Exact softmax attention, numerically stable, in blocks of query rows (claims C1, C2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common import blocking
from kernelcheck._src.attention.common.blocking import (
    batch_size,
    query_block_rows,
    swap,
)
from kernelcheck._src.attention.common.inputs import softmax_iv
from kernelcheck._src.core.validate import (
    all_finite,
)
from kernelcheck.errors import NumericalFailure


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
    Q : array_like, shape (..., n, d)
        The queries.
    K : array_like, shape (..., n, d)
        The keys.
    V : array_like, shape (..., n, d_v)
        The values.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    scale : float, default None
        Logit scale; None: ``1 / sqrt(d)`` (C1).

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
