"""The reference backward pass of the delta rule and its bounds (claims C22, C24).

The gradient of ``<G, y>`` with respect to ``q``, ``k``, ``v`` and ``beta``,
by the reverse recurrence of the adjoint state and the chain rule of the
family's canonical arrays
(:func:`~kernelcheck._src.attention.common.transition_spec.family_vjp`);
``beta`` enters twice, in the erase ``-beta k k^T`` and in the value ``beta
v``. Bounds: the normwise model of
:mod:`~kernelcheck._src.attention.common.transition_vjp`.
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transition_spec import vjp_call
from kernelcheck._src.attention.families.delta.reference import DeltaSpec


def delta_vjp(q, k, v, beta, G, *, qk_l2norm=False, scale=1.0, initial_state=None, models=None):
    """The gradients of ``<G, y>`` for the delta rule, with bounds per model if asked (C22, C24).

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
        The gradients by input name (``"q"``, ``"k"``, ``"v"``, then the
        per-token inputs), float64 arrays of their inputs' shapes; with
        ``models``, one dict of entrywise bounds per model (the model's bound
        plus the float64 reference's own).
    """
    args = (q, k, v, beta)
    return vjp_call(DeltaSpec, args, G, qk_l2norm, scale, initial_state, models)
