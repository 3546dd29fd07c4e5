"""The a-priori error bound of Gated DeltaNet's forms (claims C22-C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_bound import causal_iv, family_bounds
from kernelcheck._src.attention.families.gated_delta.forms import LIMITS, gated_delta_transitions


def gated_delta_error_bound(
    q, k, v, gates, beta, *, causal=True, dtype=None, extra_ops=0, initial_state=None,
    qk_l2norm=False, scale=1.0, chunk_size=None,
):  # fmt: skip
    """Entrywise a-priori rounding-error bound of Gated DeltaNet's forms (claims C22-C24).

    As :func:`~kernelcheck.attention.delta_error_bound`, with the transition
    ``alpha_t (I - beta_t k_t k_t^T)`` of norm ``alpha_t max(1, |1 - beta_t |k_t|^2|)``
    and the chunk's decays ``exp(G_t - G_j)`` from cumulative log gates
    (relative error ``expm1(4 gamma_(C+5) L) + 10 u``, ``L`` a chunk's total
    ``|log alpha|``).

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
    gates : array_like, broadcastable to (..., n)
        The decays ``alpha_t`` in (0, 1] (values, not logarithms).
    beta : array_like, broadcastable to (..., n)
        The step ``beta_t >= 0`` of each token and head.
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
    x, T = _validated(q, k, v, gates, beta, causal, initial_state, qk_l2norm, scale)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, chunk_size)[1].out


def gated_delta_parallel_error_bound(
    q, k, v, gates, beta, *, causal=True, dtype=None, extra_ops=0, qk_l2norm=False, scale=1.0
):
    """:func:`gated_delta_error_bound` with one chunk of all n tokens (the parallel form, C22, C23).

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
    gates : array_like, broadcastable to (..., n)
        The decays ``alpha_t`` in (0, 1] (values, not logarithms).
    beta : array_like, broadcastable to (..., n)
        The step ``beta_t >= 0`` of each token and head.
    causal : bool, default True
        Must be True.
    dtype : float dtype or RoundingModel, default None
        The precision the form computes in (None: the inputs'), as in
        :func:`gated_delta_error_bound`.
    extra_ops : int >= 0, default 0
        Roundings added to every count (inputs the layer rounds itself).
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
    """
    x, T = _validated(q, k, v, gates, beta, causal, None, qk_l2norm, scale)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, x.q.shape[-2])[1].out


def _validated(q, k, v, gates, beta, causal, initial_state, qk_l2norm, scale):
    """The bounds' inputs validated (in float64) and their transitions: ``(FormInputs, T)``."""
    causal_iv(causal)
    x, *tokens = tr.family_inputs(
        q, k, v, (gates, beta), LIMITS, initial_state, False, qk_l2norm, scale, np.float64
    )
    return x, gated_delta_transitions(x, *tokens)
