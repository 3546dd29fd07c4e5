"""The a-priori error bound of the diagonal-plus-rank-one forms (claims C23, C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_bound import causal_iv, family_bounds
from kernelcheck._src.attention.families.dplr.forms import LIMITS, dplr_transitions


def dplr_error_bound(
    q, k, v, a, b, gates, *, causal=True, dtype=None, extra_ops=0, initial_state=None,
    qk_l2norm=False, scale=1.0, chunk_size=None,
):  # fmt: skip
    """Entrywise a-priori rounding-error bound of the DPLR forms (claims C23, C24).

    As :func:`~kernelcheck.attention.delta_error_bound` for the general
    transition ``Diag(w_t) + b_t a_t^T``: its spectral norm bounded in float64
    by the 2 x 2 reduction of the common model (exact for one decay on every
    channel, an upper bound otherwise), the chunked form's reads ``X`` from the
    triangular system ``I - A_ab`` and the known values' products
    ``A_ak V`` (the general case of the common model).

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
    a : array_like, broadcastable to (..., n, D)
        The vector ``a_t`` along which the transition reads the state.
    b : array_like, broadcastable to (..., n, D)
        The vector ``b_t`` along which the transition writes.
    gates : array_like, broadcastable to (..., n, D)
        The decays ``w_t`` in [0, 1] of every key channel (values, not logarithms).
    causal : bool, default True
        Must be True.
    dtype : float dtype or RoundingModel, default None
        The precision the form computes in (None: the inputs'); a
        RoundingModel's accumulation precision holds the state, its storage
        precision the chunked form's stored intermediates and the output.
    extra_ops : int >= 0, default 0
        Roundings added to every count (inputs the layer rounds itself).
    initial_state : State, default None
        A state ``(S, None)`` handed over from earlier tokens (taken as exact) (None: zeros).
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).
    chunk_size : int >= 1, default None
        The longest chunk covered (None: 64, flash-linear-attention's).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
    """
    causal_iv(causal)
    x, *tokens = tr.family_inputs(
        q, k, v, (a, b, gates), LIMITS, initial_state, False, qk_l2norm, scale, np.float64
    )
    T = dplr_transitions(x, *tokens)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, chunk_size)[1].out
