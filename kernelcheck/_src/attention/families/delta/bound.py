"""The a-priori error bound of the delta rule's forms (claims C22, C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_bound import causal_iv, family_bounds
from kernelcheck._src.attention.families.delta.forms import LIMITS, delta_transitions


def delta_error_bound(
    q, k, v, beta, *, causal=True, dtype=None, extra_ops=0, initial_state=None,
    qk_l2norm=False, scale=1.0, chunk_size=None,
):  # fmt: skip
    """Entrywise a-priori rounding-error bound of the delta rule's forms (claims C22, C24).

    The normwise model of
    :mod:`~kernelcheck._src.attention.common.transition_bound`: the error of
    each value column of the state after token t is at most ``e_t``,
    ``e_t = rho_t e_(t-1) + lambda_t`` with ``rho_t = max(1, |1 - beta_t |k_t|^2|)``
    the transition's spectral norm and ``lambda_t`` the larger of the
    recurrence's and the chunked form's error at token t; the output
    ``y_t = S_t^T q_t`` adds its own products.  Linear in t while every
    ``beta_t |k_t|^2 <= 2``; exponential otherwise, and ``inf`` from the token
    on where the growth leaves no bound.  It covers the recurrence in any
    order of its operations and the chunked (WY) form with chunks of at most
    ``chunk_size`` tokens starting anywhere (the parallel form: chunks of n).

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
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

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import delta_chunked, delta_error_bound, delta_recurrent
    >>> rng = np.random.default_rng(3)
    >>> q, k, v = rng.normal(size=(3, 40, 8))
    >>> beta = rng.uniform(0, 1, 40)
    >>> f32 = [x.astype(np.float32) for x in (q, k, v, beta)]
    >>> exact = delta_recurrent(q, k, v, beta, qk_l2norm=True)
    >>> err = np.abs(delta_chunked(*f32, qk_l2norm=True) - exact)
    >>> bool((err <= delta_error_bound(*f32, qk_l2norm=True)).all())
    True
    """
    x, T = _validated(q, k, v, beta, causal, initial_state, qk_l2norm, scale)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, chunk_size)[1].out


def delta_parallel_error_bound(
    q, k, v, beta, *, causal=True, dtype=None, extra_ops=0, qk_l2norm=False, scale=1.0
):
    """:func:`delta_error_bound` with one chunk of all n tokens (the parallel form, C22).

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
    beta : array_like, broadcastable to (..., n)
        The step ``beta_t >= 0`` of each token and head.
    causal : bool, default True
        Must be True.
    dtype : float dtype or RoundingModel, default None
        The precision the form computes in (None: the inputs'), as in
        :func:`delta_error_bound`.
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
    x, T = _validated(q, k, v, beta, causal, None, qk_l2norm, scale)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, x.q.shape[-2])[1].out


def _validated(q, k, v, beta, causal, initial_state, qk_l2norm, scale):
    """The bounds' inputs validated (in float64) and their transitions: ``(FormInputs, T)``."""
    causal_iv(causal)
    x, *tokens = tr.family_inputs(
        q, k, v, (beta,), LIMITS, initial_state, False, qk_l2norm, scale, np.float64
    )
    return x, delta_transitions(x, *tokens)
