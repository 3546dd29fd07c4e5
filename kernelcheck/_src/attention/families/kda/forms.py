"""Kimi Delta Attention: the delta rule after a decay on every key channel (claims C22, C23).

Kimi-Linear's KDA decays each key channel of the state by its own gate
``alpha_t`` in [0, 1]^D, then takes the delta rule's step from the decayed
state (the value scaled by ``beta_t``):

    S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_(t-1) + beta_t k_t v_t^T,     y_t = S_t^T q_t,

the transition ``M_t = (I - beta_t k_t k_t^T) Diag(alpha_t)`` of C23 (spectral
norm at most ``max_c alpha_tc max(1, |1 - beta_t |k_t|^2|)``).  A gate of
exactly 0 resets its channel.  With ``alpha_t = g_t 1`` it is Gated DeltaNet.

* :func:`kda_recurrence` -- the ``init`` / ``step`` pair
  (``step(state, q, k, v, g, beta)``, flash-linear-attention's order);
* :func:`kda_recurrent` -- the reference loop;
* :func:`kda_chunked` -- the WY (UT) representation with per-channel decays
  ``exp(G_t - G_j)`` (factored as ``exp(G_t) exp(-G_j)`` while a chunk decays
  by at most ``e^-100`` and holds no gate of 0, else formed pair by pair).

Gates are values in [0, 1] (not logarithms) broadcastable to ``(..., n, D)``;
``beta >= 0`` to ``(..., n)``.  Inputs and options otherwise as in
:mod:`~kernelcheck._src.attention.families.delta.forms`.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.engine import Recurrence
from kernelcheck._src.attention.families.delta.forms import BETA

#: How gates on the key channels are checked: in [0, 1] (0 resets a channel).
CHANNEL_GATE = tr.TokenLimits(
    "gates", True, low=0.0, high=1.0, what="gates in [0, 1], one per key channel"
)

#: Kimi Delta Attention's per-token inputs after ``v``, in flash-linear-attention's order.
LIMITS = (CHANNEL_GATE, BETA)


def kda_step(S, q, k, v, g, beta):
    """One raw token (``g`` the decay, then ``beta``: flash-linear-attention's order)."""
    return tr.delta_step(S, q, k, v, beta, g)


def kda_recurrence() -> Recurrence:
    """Kimi Delta Attention as an ``init`` / ``step`` pair (claims C22, C23).

    ``step(state, q, k, v, g, beta)`` decays row c of the state by ``g_c``,
    then takes the delta rule's step ``S <- S + k (beta (v - S^T k))^T`` and
    returns the new state with ``y = S^T q``.

    Returns
    -------
    Recurrence

    Examples
    --------
    >>> from kernelcheck.attention import kda_recurrence
    >>> rec = kda_recurrence()
    >>> s = rec.init(2, 1)
    >>> s, y = rec.step(s, [1.0, 1.0], [1.0, 0.0], [2.0], [0.5, 1.0], 1.0)
    >>> s, y = rec.step(s, [1.0, 1.0], [0.0, 1.0], [4.0], [0.5, 1.0], 1.0)
    >>> y.tolist()          # channel 0 decayed once (2 -> 1), channel 1 holds 4
    [5.0]
    """
    return tr.transition_recurrence(kda_step, LIMITS, "Kimi delta attention")


def kda_transitions(x: tr.FormInputs, gates, beta) -> tr.Transitions:
    """The canonical transitions: read ``-beta alpha o k``, write ``beta v``, decay by ``alpha``."""
    b = beta[..., None]
    with np.errstate(divide="ignore"):
        log_w = np.log(gates)
    return tr.Transitions(x.q, x.k, b * x.v, -b * (gates * x.k), None, log_w)


def kda_recurrent(
    q, k, v, gates, beta, *, initial_state=None, return_state=False,
    qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """Kimi Delta Attention by running :func:`kda_recurrence`'s step over the sequence.

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
    gates : array_like, broadcastable to (..., n, D)
        The decays ``alpha_t`` in [0, 1] of every key channel (values, not logarithms).
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
    With the same gate on every channel it is Gated DeltaNet (C23):

    >>> import numpy as np
    >>> from kernelcheck.attention import gated_delta_recurrent, kda_recurrent
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 9, 4))
    >>> g, beta = rng.uniform(0.5, 1, 9), rng.uniform(0, 1, 9)
    >>> same = kda_recurrent(q, k, v, np.repeat(g[:, None], 4, axis=1), beta)
    >>> bool(np.allclose(same, gated_delta_recurrent(q, k, v, g, beta)))
    True
    """
    x, g, b = tr.family_inputs(
        q, k, v, (gates, beta), LIMITS, initial_state, return_state, qk_l2norm, scale
    )
    out, S, _ = tr.run_steps(kda_step, x.q, x.k, x.v, (g, b), x.S0)
    return tr.finish_form(out, S, x, "kda_recurrent")


def kda_chunked(
    q, k, v, gates, beta, *, chunk_size=None, initial_state=None,
    return_state=False, qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """Kimi Delta Attention in chunks by the WY (UT) representation (claims C22, C23).

    Within a chunk, ``G_t`` the cumulative log gates of every channel from its
    start: ``A[t, j] = beta_t sum_c k_tc k_jc exp(G_tc - G_jc)`` (``j < t``),
    ``T = (I + A)^(-1) Diag(beta)``, the pseudo-values
    ``T (V - (K o exp(G)) S)``, the outputs ``(Q o exp(G)) S +
    (sum_c q_tc k_jc exp(G_tc - G_jc))_(j <= t) (pseudo-values)`` and the state
    ``Diag(exp(G_C)) S + (K o exp(G_C - G_j))^T (pseudo-values)``.

    Parameters
    ----------
    q : array_like, shape (..., n, D)
        Queries.
    k : array_like, shape (..., n, D)
        Keys.
    v : array_like, shape (..., n, d_v)
        Values.
    gates : array_like, broadcastable to (..., n, D)
        The decays ``alpha_t`` in [0, 1] of every key channel (values, not logarithms).
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
    out, S = tr.chunked_transitions(kda_transitions(x, g, b), tr.delta_chunk_iv(chunk_size), x.S0)
    return tr.finish_form(out, S, x, "kda_chunked")
