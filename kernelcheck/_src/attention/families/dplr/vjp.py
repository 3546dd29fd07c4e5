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
    q, k, v, a, b, gates, qk_l2norm, scale, initial_state
        As in :func:`~kernelcheck.attention.dplr_recurrent`.
    G, models
        As in :func:`~kernelcheck.attention.delta_vjp`.

    Returns
    -------
    dict, or (dict, tuple of dict) with ``models``
        As :func:`~kernelcheck.attention.delta_vjp`'s, with this family's inputs.
    """
    args = (q, k, v, a, b, gates)
    return vjp_call(DplrSpec, args, G, qk_l2norm, scale, initial_state, models)
