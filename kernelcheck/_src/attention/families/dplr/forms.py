"""The diagonal-plus-rank-one transition: RWKV-7 and the general case (claim C23).

Every recurrence of this room is one transition per token,

    S_t = M_t S_(t-1) + k_t v_t^T,    M_t = Diag(w_t) + b_t a_t^T,     y_t = S_t^T q_t,

with the key-major state ``S`` (``D x d_v``): decays ``w_t`` in [0, 1]^D on
the key channels and a rank-one part that reads ``a_t^T S_(t-1)`` (the
undecayed state) and writes it along ``b_t``.  Acting from the right on
the value-major state ``S^T``, as RWKV-7 writes it, the transition is
``Diag(w_t) + a_t b_t^T``, C23's form; flash-linear-attention's
``dplr_delta_rule(q, k, v, a, b, gk)`` takes ``a`` and ``b`` in that order.
RWKV-7 is ``a = -kappa``, ``b = kappa o a_coef`` (normalised key ``kappa``);
the delta rule is ``w = 1``, ``a = k``, ``b = -beta k`` with the value
``beta v`` (C22), Gated DeltaNet and Kimi Delta Attention the same with
decays (see their modules).

* :func:`dplr_recurrence` -- the ``init`` / ``step`` pair
  (``step(state, q, k, v, a, b, w)``);
* :func:`dplr_recurrent` -- the reference loop;
* :func:`dplr_chunked` -- the WY (UT) representation of the general case:
  per chunk the reads ``X`` solve ``(I - A_ab) X = A_ak V + (A o exp(G_(t-1))) S``.

Inputs: ``q, k, a, b`` of shape ``(..., n, D)`` (any finite values), ``v`` of
``(..., n, d_v)``, ``gates`` (the decays ``w_t``, values not logarithms) in
[0, 1] broadcastable to ``(..., n, D)``.  Options as in
:mod:`~kernelcheck._src.attention.families.delta.forms`.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.engine import Recurrence
from kernelcheck._src.attention.families.kda.forms import CHANNEL_GATE

#: The rank-one factors: any finite vectors on the key channels.
READ = tr.TokenLimits("a", True, what="finite numbers, one per key channel")
WRITE = tr.TokenLimits("b", True, what="finite numbers, one per key channel")

#: The per-token inputs after ``v``, in flash-linear-attention's order ``(a, b, gk)``.
LIMITS = (READ, WRITE, CHANNEL_GATE)


def dplr_recurrence() -> Recurrence:
    """The diagonal-plus-rank-one transition as an ``init`` / ``step`` pair (claim C23).

    ``step(state, q, k, v, a, b, w)`` reads ``x = a^T S``, then
    ``S <- Diag(w) S + b x^T + k v^T`` and returns the new state with
    ``y = S^T q``.

    Returns
    -------
    Recurrence

    Examples
    --------
    >>> from kernelcheck.attention import dplr_recurrence
    >>> rec = dplr_recurrence()
    >>> s = rec.init(1, 1)
    >>> s, y = rec.step(s, [1.0], [1.0], [2.0], [1.0], [-0.5], [1.0])  # S = 2
    >>> s, y = rec.step(s, [1.0], [1.0], [2.0], [1.0], [-0.5], [1.0])  # 2 - 1 + 2
    >>> y.tolist()
    [3.0]
    """
    return tr.transition_recurrence(tr.dplr_step, LIMITS, "DPLR")


def dplr_transitions(x: tr.FormInputs, a, b, gates) -> tr.Transitions:
    """The canonical transitions: read ``a``, write ``b``, decay ``log w``."""
    with np.errstate(divide="ignore"):
        log_w = np.log(gates)
    return tr.Transitions(x.q, x.k, x.v, a, b, log_w)


def dplr_recurrent(
    q, k, v, a, b, gates, *, initial_state=None, return_state=False,
    qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """The diagonal-plus-rank-one recurrence by running :func:`dplr_recurrence`'s step (C23).

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
    The delta rule is the transition ``I - beta k k^T`` with the value ``beta v`` (C23):

    >>> import numpy as np
    >>> from kernelcheck.attention import delta_recurrent, dplr_recurrent
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 9, 4))
    >>> b = rng.uniform(0, 1, (9, 1))
    >>> as_dplr = dplr_recurrent(q, k, b * v, k, -b * k, np.ones((9, 4)))
    >>> bool(np.allclose(as_dplr, delta_recurrent(q, k, v, b[:, 0])))
    True
    """
    x, a, b, g = tr.family_inputs(
        q, k, v, (a, b, gates), LIMITS, initial_state, return_state, qk_l2norm, scale
    )
    out, S, _ = tr.run_steps(tr.dplr_step, x.q, x.k, x.v, (a, b, g), x.S0)
    return tr.finish_form(out, S, x, "dplr_recurrent")


def dplr_chunked(
    q, k, v, a, b, gates, *, chunk_size=None, initial_state=None,
    return_state=False, qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """The diagonal-plus-rank-one recurrence in chunks by the WY (UT) representation (C23).

    Within a chunk, ``G_t`` the cumulative log decays from its start and
    ``E_tj = exp(G_(t-1) - G_j)``: the reads ``x_t = a_t^T S_(t-1)`` solve
    ``(I - A_ab) X = A_ak V + (A o exp(G_(t-1))) S`` with ``A_ab[t, j] =
    sum_c a_tc b_jc E_tj,c`` and ``A_ak`` likewise with ``k`` (``j < t``);
    the outputs and the state follow from ``X`` and ``V`` as in
    :func:`~kernelcheck._src.attention.common.transitions.chunked_transitions`.

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
    x, a, b, g = tr.family_inputs(
        q, k, v, (a, b, gates), LIMITS, initial_state, return_state, qk_l2norm, scale
    )
    out, S = tr.chunked_transitions(
        dplr_transitions(x, a, b, g), tr.delta_chunk_iv(chunk_size), x.S0
    )
    return tr.finish_form(out, S, x, "dplr_chunked")
