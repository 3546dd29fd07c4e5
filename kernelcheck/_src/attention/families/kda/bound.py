"""The a-priori error bound of Kimi Delta Attention's forms (claims C22-C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_bound import causal_iv, family_bounds
from kernelcheck._src.attention.families.kda.forms import LIMITS, kda_transitions


def kda_error_bound(
    q, k, v, gates, beta, *, causal=True, dtype=None, extra_ops=0, initial_state=None,
    qk_l2norm=False, scale=1.0, chunk_size=None,
):  # fmt: skip
    """Entrywise a-priori rounding-error bound of Kimi Delta Attention's forms (claims C22-C24).

    As :func:`~kernelcheck.attention.delta_error_bound`, with the transition
    ``(I - beta_t k_t k_t^T) Diag(alpha_t)``, whose norm is bounded by the 2 x 2
    reduction of the common model (at most ``max_c alpha_tc max(1, |1 - beta_t
    |k_t|^2|)``), and the chunk's per-channel decays as in
    :func:`~kernelcheck.attention.gated_delta_error_bound`.

    Parameters
    ----------
    q, k, v, gates, beta, initial_state, qk_l2norm, scale
        As in :func:`~kernelcheck.attention.kda_recurrent`; the inputs are
        taken as exact (the handed-over state too).
    causal, dtype, extra_ops, chunk_size
        As in :func:`~kernelcheck.attention.delta_error_bound`.

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
    """
    causal_iv(causal)
    x, *tokens = tr.family_inputs(
        q, k, v, (gates, beta), LIMITS, initial_state, False, qk_l2norm, scale, np.float64
    )
    T = kda_transitions(x, *tokens)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, chunk_size)[1].out
