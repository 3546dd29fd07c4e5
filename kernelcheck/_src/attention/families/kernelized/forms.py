"""Exact kernelized attention from a kernel's Gram blocks (claim C10)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common import blocking
from kernelcheck._src.attention.common.blocking import (
    query_block_rows,
    with_ones,
)
from kernelcheck._src.attention.common.inputs import kernelized_iv
from kernelcheck._src.attention.common.types import finish
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.validate import describe
from kernelcheck.errors import InvalidArgument


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
    Q : array_like, shape (..., n, d)
        The queries.
    K : array_like, shape (..., n, d)
        The keys.
    V : array_like, shape (..., n, d_v)
        The values.
    kernel : callable
        A kernel object (``kernel(X, Y)`` returns the (n, m) Gram block),
        e.g. from :mod:`kernelcheck.kernels`.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    on_bad_normalizer : {"raise", "report"}, default "raise"
        A kernel with negative values (``Linear()``, odd Taylor orders) can
        give a normaliser ``<= 0``: raise :class:`~kernelcheck.errors.BadNormalizer`
        or return an :class:`AttentionOutput`.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``.

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
