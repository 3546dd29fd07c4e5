"""The reference backward pass of the DPLR transition and its bounds (claims C23, C24).

The gradient of ``<G, y>`` with respect to ``q``, ``k``, ``v``, ``a``, ``b``
and ``gates``, by the reverse recurrence of the adjoint state and the chain
rule of the family's canonical arrays
(:func:`~kernelcheck._src.attention.common.transition_spec.family_vjp`);
``a`` reads the undecayed state and ``b`` writes what it read. Bounds: the
normwise model of :mod:`~kernelcheck._src.attention.common.transition_vjp`.
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transition_spec import vjp_call
from kernelcheck._src.attention.families.dplr.reference import DplrSpec


def dplr_vjp(
    q, k, v, a, b, gates, G, *, qk_l2norm=False, scale=1.0, initial_state=None, models=None
):
    """The gradients of ``<G, y>`` for the DPLR transition, with bounds per model if asked (C24).

    ``a`` and ``b`` have their own gradients, the gates theirs by channel.

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
    G : array_like, shape (..., n, d_v)
        The cotangent of the outputs.
    qk_l2norm : bool, default False
        Normalise queries and keys inside the form, ``x / sqrt(|x|^2 + 1e-6)``.
    scale : float, default 1.0
        Multiplies the queries (after the normalisation).
    initial_state : State, default None
        A state ``(S, None)`` handed over from earlier tokens (None: zeros).
    models : sequence of (dtype, int), default None
        Precisions (a dtype or RoundingModel; None the inputs') with the
        roundings added to every count: the bounds are asked for (None: not).

    Returns
    -------
    dict, or (dict, tuple of dict) with ``models``
        As :func:`~kernelcheck.attention.delta_vjp`'s, with this family's inputs.
    """
    args = (q, k, v, a, b, gates)
    return vjp_call(DplrSpec, args, G, qk_l2norm, scale, initial_state, models)
