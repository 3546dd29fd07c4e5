"""Gated DeltaNet: the delta rule with a decay per token and head (claims C22, C23).

Qwen3-Next's and flash-linear-attention's gated delta rule decays the state
by ``alpha_t`` in (0, 1] before the delta rule's step, the error read from
the decayed state and the value scaled by ``beta_t``:

    S_t = alpha_t (I - beta_t k_t k_t^T) S_(t-1) + beta_t k_t v_t^T,      y_t = S_t^T q_t,

the transition ``M_t = alpha_t (I - beta_t k_t k_t^T)`` of C23 (spectral norm
``alpha_t max(1, |1 - beta_t |k_t|^2|)``).  With ``alpha = 1`` it is the
delta rule (C22).

* :func:`gated_delta_recurrence` -- the ``init`` / ``step`` pair
  (``step(state, q, k, v, g, beta)``, flash-linear-attention's argument order);
* :func:`gated_delta_recurrent` -- the reference loop;
* :func:`gated_delta_chunked` -- the WY (UT) representation with the decays
  ``exp(G_t - G_j)`` of a chunk's cumulative log gates;
* :func:`gated_delta_parallel` -- the quadratic form, one chunk of all tokens.

Gates are values in (0, 1] (not their logarithms), broadcastable to
``(..., n)``; ``beta >= 0`` likewise.  Inputs and options otherwise as in
:mod:`~kernelcheck._src.attention.families.delta.forms`.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.engine import Recurrence
from kernelcheck._src.attention.families.delta.forms import BETA

#: How a gate is checked: in (0, 1] (the smallest subnormal is the lowest value above 0).
GATE = tr.TokenLimits("gates", False, low=5e-324, high=1.0, what="a gate in (0, 1]")

#: Gated DeltaNet's per-token inputs after ``v``, in flash-linear-attention's order.
LIMITS = (GATE, BETA)


def gated_delta_step(S, q, k, v, g, beta):
    """One raw token (``g`` the decay, then ``beta``: flash-linear-attention's order)."""
    return tr.delta_step(S, q, k, v, beta, g)


def gated_delta_recurrence() -> Recurrence:
    """Gated DeltaNet as an ``init`` / ``step`` pair (claims C22, C23).

    ``step(state, q, k, v, g, beta)`` decays the state by ``g``, then takes
    the delta rule's step ``S <- S + k (beta (v - S^T k))^T`` and returns the
    new state with ``y = S^T q``.

    Returns
    -------
    Recurrence

    Examples
    --------
    >>> from kernelcheck.attention import gated_delta_recurrence
    >>> rec = gated_delta_recurrence()
    >>> s = rec.init(1, 1)
    >>> s, y = rec.step(s, [1.0], [1.0], [2.0], 0.5, 0.5)   # S = 0.5 * 2 = 1
    >>> s, y = rec.step(s, [1.0], [1.0], [2.0], 0.5, 0.5)   # 0.5 + 0.5 (2 - 0.5)
    >>> y.tolist()
    [1.25]
    """
    return tr.transition_recurrence(gated_delta_step, LIMITS, "gated delta rule")


def gated_delta_transitions(x: tr.FormInputs, gates, beta) -> tr.Transitions:
    """The canonical transitions: read ``-alpha beta k``, write ``beta v``, decay ``log alpha``."""
    b = beta[..., None]
    return tr.Transitions(
        x.q, x.k, b * x.v, -(gates[..., None] * b) * x.k, None, np.log(gates)[..., None]
    )


def gated_delta_recurrent(
    q, k, v, gates, beta, *, initial_state=None, return_state=False,
    qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """Gated DeltaNet by running :func:`gated_delta_recurrence`'s step over the sequence.

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
    initial_state : State, default None
        A state ``(S, None)`` handed over from earlier tokens (None: zeros).
    return_state : bool, default False
        Also return the final state.
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v); with ``return_state`` a pair
    ``(output, State)``.

    Examples
    --------
    With every gate 1 it is the delta rule (C23's special case):

    >>> import numpy as np
    >>> from kernelcheck.attention import delta_recurrent, gated_delta_recurrent
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 9, 4))
    >>> beta = rng.uniform(0, 1, 9)
    >>> one = gated_delta_recurrent(q, k, v, np.ones(9), beta, qk_l2norm=True)
    >>> bool(np.allclose(one, delta_recurrent(q, k, v, beta, qk_l2norm=True)))
    True
    """
    x, g, b = tr.family_inputs(
        q, k, v, (gates, beta), LIMITS, initial_state, return_state, qk_l2norm, scale
    )
    out, S, _ = tr.run_steps(gated_delta_step, x.q, x.k, x.v, (g, b), x.S0)
    return tr.finish_form(out, S, x, "gated_delta_recurrent")


def gated_delta_chunked(
    q, k, v, gates, beta, *, chunk_size=None, initial_state=None,
    return_state=False, qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """Gated DeltaNet in chunks by the WY (UT) representation (claims C22, C23).

    Within a chunk, ``G_t`` the cumulative log gates from its start:
    ``T = (I + strictly-lower(Diag(beta) (K K^T o exp(G_t - G_j))))^(-1)
    Diag(beta)``, the pseudo-values ``T (V - Diag(exp(G)) K S)``, the outputs
    ``Diag(exp(G)) Q S + (tril(Q K^T) o exp(G_t - G_j)) (pseudo-values)`` and
    the state ``exp(G_C) S + (K o exp(G_C - G_j))^T (pseudo-values)``.

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
    chunk_size : int >= 1, default None
        Any size (the last chunk may be shorter; None: 64).
    initial_state : State, default None
        A state ``(S, None)`` handed over from earlier tokens (None: zeros).
    return_state : bool, default False
        Also return the final state.
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v); with ``return_state`` a pair
    ``(output, State)``.
    """
    x, g, b = tr.family_inputs(
        q, k, v, (gates, beta), LIMITS, initial_state, return_state, qk_l2norm, scale
    )
    T = gated_delta_transitions(x, g, b)
    out, S = tr.chunked_transitions(T, tr.delta_chunk_iv(chunk_size), x.S0)
    return tr.finish_form(out, S, x, "gated_delta_chunked")


def gated_delta_parallel(q, k, v, gates, beta, *, qk_l2norm=False, scale=1.0):
    """Gated DeltaNet's quadratic form: the chunked form with one chunk of all n tokens.

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
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v)
    """
    x, g, b = tr.family_inputs(q, k, v, (gates, beta), LIMITS, None, False, qk_l2norm, scale)
    out, S = tr.chunked_transitions(gated_delta_transitions(x, g, b), x.q.shape[-2], x.S0)
    return tr.finish_form(out, S, x, "gated_delta_parallel")
