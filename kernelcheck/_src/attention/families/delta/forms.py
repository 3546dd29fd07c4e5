"""The delta rule: DeltaNet's recurrence and its chunked and parallel forms (claim C22).

The state takes one step of gradient descent on ``1/2 |S^T k_t - v_t|^2``
with step ``beta_t`` per token:

    S_t = S_(t-1) + beta_t k_t (v_t - S_(t-1)^T k_t)^T
        = (I - beta_t k_t k_t^T) S_(t-1) + beta_t k_t v_t^T,      y_t = S_t^T q_t.

With ``|k_t| = 1`` and ``beta_t = 1`` the state returns ``v_t`` exactly at
``k_t``.  The transition's spectral norm is ``max(1, |1 - beta_t |k_t|^2|)``:
it never expands while ``0 <= beta_t |k_t|^2 <= 2`` (see
:func:`~kernelcheck._src.attention.families.delta.bound.delta_error_bound`).

* :func:`delta_recurrence` -- the ``init`` / ``step`` pair;
* :func:`delta_recurrent` -- the reference loop of that step;
* :func:`delta_chunked` -- the WY (UT) representation: per chunk
  ``T = (I + strictly-lower(Diag(beta) K K^T))^(-1) Diag(beta)``, ``W = T K``,
  ``U = T V``, the pseudo-values ``U - W S`` written into the state;
* :func:`delta_parallel` -- the quadratic form: one chunk of the whole sequence,
  ``Y = tril(Q K^T) T V``.

Inputs: ``q, k`` of shape ``(..., n, D)``, ``v`` of ``(..., n, d_v)`` and
``beta >= 0`` broadcastable to ``(..., n)`` (one step per token and head).
Every form is causal, unnormalised, batched over leading dimensions,
float64 or float32; ``qk_l2norm=True`` normalises queries and keys inside
the form as the shipped layers do (``x / sqrt(|x|^2 + 1e-6)``), then the
queries are multiplied by ``scale``.
"""

from __future__ import annotations

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.engine import Recurrence

#: How a step ``beta`` is checked: non-negative (no upper limit: ``beta |k|^2 > 2`` expands).
BETA = tr.TokenLimits("beta", False, low=0.0, what="a step >= 0, one per token and head")

#: The delta rule's per-token inputs after ``v``.
LIMITS = (BETA,)


def delta_recurrence() -> Recurrence:
    """The delta rule as an ``init`` / ``step`` pair (claim C22).

    ``step(state, q, k, v, beta)`` computes ``S <- S + k (beta (v - S^T k))^T``
    and returns the new state with ``y = S^T q``.

    Returns
    -------
    Recurrence

    Examples
    --------
    >>> from kernelcheck.attention import delta_recurrence
    >>> rec = delta_recurrence()
    >>> s = rec.init(2, 1)
    >>> s, y = rec.step(s, [1.0, 0.0], [1.0, 0.0], [3.0], 1.0)
    >>> s, y = rec.step(s, [1.0, 0.0], [1.0, 0.0], [5.0], 1.0)
    >>> y.tolist()          # beta = 1 and a unit key: the state returns v_t at k_t
    [5.0]
    """
    return tr.transition_recurrence(tr.delta_step, LIMITS, "delta rule")


def delta_transitions(x: tr.FormInputs, beta) -> tr.Transitions:
    """The canonical transitions of the delta rule: read ``-beta k``, write ``beta v``."""
    b = beta[..., None]
    return tr.Transitions(x.q, x.k, b * x.v, -b * x.k)


def delta_recurrent(
    q, k, v, beta, *, initial_state=None, return_state=False, qk_l2norm=False, scale=1.0
):
    """The delta rule by running :func:`delta_recurrence`'s step over the sequence (C22).

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
    >>> import numpy as np
    >>> from kernelcheck.attention import delta_chunked, delta_recurrent
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 9, 4))
    >>> beta = rng.uniform(0, 1, 9)
    >>> a = delta_recurrent(q, k, v, beta, qk_l2norm=True)
    >>> bool(np.allclose(a, delta_chunked(q, k, v, beta, chunk_size=4, qk_l2norm=True)))
    True
    """
    x, b = tr.family_inputs(q, k, v, (beta,), LIMITS, initial_state, return_state, qk_l2norm, scale)
    out, S, _ = tr.run_steps(tr.delta_step, x.q, x.k, x.v, (b,), x.S0)
    return tr.finish_form(out, S, x, "delta_recurrent")


def delta_chunked(
    q, k, v, beta, *, chunk_size=None, initial_state=None, return_state=False,
    qk_l2norm=False, scale=1.0,
):  # fmt: skip
    """The delta rule in chunks by the WY (UT) representation (claim C22).

    Per chunk of ``C`` tokens entering with state ``S``:
    ``T = (I + strictly-lower(Diag(beta) K K^T))^(-1) Diag(beta)`` (forward
    substitution), ``W = T K``, ``U = T V``, the pseudo-values
    ``U - W S``; the outputs ``Q S + tril(Q K^T) (U - W S)`` and the state
    ``S + K^T (U - W S)``.

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
    x, b = tr.family_inputs(q, k, v, (beta,), LIMITS, initial_state, return_state, qk_l2norm, scale)
    out, S = tr.chunked_transitions(delta_transitions(x, b), tr.delta_chunk_iv(chunk_size), x.S0)
    return tr.finish_form(out, S, x, "delta_chunked")


def delta_parallel(q, k, v, beta, *, qk_l2norm=False, scale=1.0):
    """The delta rule's quadratic form: ``Y = tril(Q K^T) T V``, T over the whole sequence (C22).

    The UT transform of all n tokens at once, ``T = (I + strictly-lower(Diag(beta)
    K K^T))^(-1) Diag(beta)``: the chunked form with one chunk.

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
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v)
    """
    x, b = tr.family_inputs(q, k, v, (beta,), LIMITS, None, False, qk_l2norm, scale)
    out, S = tr.chunked_transitions(delta_transitions(x, b), x.q.shape[-2], x.S0)
    return tr.finish_form(out, S, x, "delta_parallel")
