"""The reference backward pass of Gated DeltaNet and its bounds (claims C22-C24).

The gradient of ``<G, y>`` with respect to ``q``, ``k``, ``v``, ``gates``
and ``beta``, by the reverse recurrence of the adjoint state and the chain
rule of the family's canonical arrays
(:func:`~kernelcheck._src.attention.common.transition_spec.family_vjp`); a
gate's gradient is with respect to its value (times the gate: with respect
to its logarithm, flash-linear-attention's ``g``). Bounds: the normwise
model of :mod:`~kernelcheck._src.attention.common.transition_vjp`.
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transition_spec import vjp_call
from kernelcheck._src.attention.families.gated_delta.reference import GatedDeltaSpec


def gated_delta_vjp(
    q, k, v, gates, beta, G, *, qk_l2norm=False, scale=1.0, initial_state=None, models=None
):
    """The gradients of ``<G, y>`` for Gated DeltaNet, with bounds per model if asked (C24).

    The gates' gradient is with respect to their values; times the gates it is the
    gradient with respect to their logarithms (flash-linear-attention's ``g``).

    Parameters
    ----------
    q, k, v, gates, beta, qk_l2norm, scale, initial_state
        As in :func:`~kernelcheck.attention.gated_delta_recurrent`.
    G, models
        As in :func:`~kernelcheck.attention.delta_vjp`.

    Returns
    -------
    dict, or (dict, tuple of dict) with ``models``
        As :func:`~kernelcheck.attention.delta_vjp`'s, with this family's inputs.
    """
    args = (q, k, v, gates, beta)
    return vjp_call(GatedDeltaSpec, args, G, qk_l2norm, scale, initial_state, models)
