"""The a-priori error bound of exact kernelized attention (claim C10)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.blocking import with_ones
from kernelcheck._src.attention.common.bounds import quotient_bound, underflow_term
from kernelcheck._src.attention.common.inputs import (
    dtype_iv,
    kernelized_iv,
)
from kernelcheck._src.attention.families.kernelized.forms import gram_blocks
from kernelcheck._src.core.rounding import (
    gamma,
    unit_roundoff,
)
from kernelcheck._src.core.validate import (
    as_int,
    describe,
)
from kernelcheck.errors import (
    InvalidArgument,
)


def kernelized_error_bound(
    Q: Any,
    K: Any,
    V: Any,
    kernel: Any,
    *,
    causal: bool = False,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of :func:`kernelized` (claim C10).

    With ``G`` the computed Gram block and ``E_G = kernel.error_bound(Q, K)``
    the kernel's own entrywise bound, the products with ``[V, 1]`` of inner
    dimension at most n give

        E_num = E_G |V| + gamma_(n+1) |G| |V|,   E_den = E_G 1 + gamma_(n+1) |G| 1,

    and the quotient bound of :func:`linear_error_bound`.  For a lower
    precision ``dtype`` the kernel's bound is scaled by the ratio of unit
    roundoffs (first order in u) and ``extra_ops`` is added to the sums.

    Parameters
    ----------
    Q : array_like, shape (..., n, d)
        The queries.
    K : array_like, shape (..., n, d)
        The keys.
    V : array_like, shape (..., n, d_v)
        The values.
    kernel : kernel object
        The kernel of :func:`kernelized`, with its bound ``error_bound(X, Y)``.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    dtype : dtype or str, default None
        Precision whose unit roundoff is used (None: the inputs').
    extra_ops : int, default 0
        Additional roundings per sum term (>= 0).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Polynomial
    >>> from kernelcheck.attention import kernelized_error_bound
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 5, 2))
    >>> bool(kernelized_error_bound(Q, K, V, Polynomial(2)).max() < 1e-12)
    True
    """
    Q, K, V, causal, _ = kernelized_iv(Q, K, V, kernel, causal, "raise")
    err_fn = getattr(kernel, "error_bound", None)
    if not callable(err_fn):
        raise InvalidArgument(
            f"`kernel` must provide error_bound(X, Y) for an error model, got {describe(kernel)}"
        )
    dt = dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    batch, dv = Q.shape[:-2], V.shape[-1]
    n = K.shape[-2]  # the number of keys summed over
    ratio = unit_roundoff(dt) / unit_roundoff(V.dtype)
    W = np.abs(with_ones(V)).astype(np.float64)
    H = np.empty(batch + (Q.shape[-2], dv + 1))
    absH = np.empty_like(H)
    EG = np.empty_like(H)
    for idx in np.ndindex(*batch):
        Q2, K2 = Q[idx], K[idx]
        Wi = W[idx]
        Vi = with_ones(V[idx]).astype(np.float64)
        blocks = gram_blocks(kernel, Q2, K2, causal, kernel)
        eblocks = gram_blocks(kernel, Q2, K2, causal, err_fn)
        for (i0, i1, G), (_, _, E) in zip(blocks, eblocks, strict=True):
            G = G.astype(np.float64)
            m = G.shape[1]
            H[idx][i0:i1] = G @ Vi[:m]
            absH[idx][i0:i1] = np.abs(G) @ Wi[:m]
            EG[idx][i0:i1] = np.abs(E.astype(np.float64)) @ Wi[:m]
    g64 = gamma(n + 2, np.float64)
    E = (ratio * EG + gamma(n + 1 + extra_ops, dt) * absH) * (1.0 + g64)
    E = E + underflow_term(n, dt, W)
    if dt != V.dtype:
        # The reference normaliser is computed in the inputs' precision.
        E = E + (EG + gamma(n + 1, V.dtype) * absH) * (1.0 + g64)
    return quotient_bound(absH * (1.0 + g64) + EG * (1.0 + g64), E, H[..., -1], unit_roundoff(dt))
