"""The a-priori error bound of Gated DeltaNet's forms (claims C22-C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_bound import causal_iv, family_bounds
from kernelcheck._src.attention.families.gated_delta.forms import LIMITS, gated_delta_transitions


def gated_delta_error_bound(
    q, k, v, gates, beta, *, causal=True, dtype=None, extra_ops=0, initial_state=None,
    qk_l2norm=False, scale=1.0, chunk_size=None,
):  # fmt: skip
    """Entrywise a-priori rounding-error bound of Gated DeltaNet's forms (claims C22-C24).

    As :func:`~kernelcheck.attention.delta_error_bound`, with the transition
    ``alpha_t (I - beta_t k_t k_t^T)`` of norm ``alpha_t max(1, |1 - beta_t |k_t|^2|)``
    and the chunk's decays ``exp(G_t - G_j)`` from cumulative log gates
    (relative error ``expm1(4 gamma_(C+5) L) + 10 u``, ``L`` a chunk's total
    ``|log alpha|``).

    Parameters
    ----------
    q, k, v, gates, beta, initial_state, qk_l2norm, scale
        As in :func:`~kernelcheck.attention.gated_delta_recurrent`; the inputs are
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
    T = gated_delta_transitions(x, *tokens)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, chunk_size)[1].out


def gated_delta_parallel_error_bound(q, k, v, gates, beta, **options):
    """:func:`gated_delta_error_bound` with one chunk of all n tokens (the parallel form).

    ``options`` are those of :func:`gated_delta_error_bound` but ``chunk_size``.
    """
    return gated_delta_error_bound(q, k, v, gates, beta, chunk_size=np.shape(q)[-2], **options)
