"""The a-priori error bound of the diagonal-plus-rank-one forms (claims C23, C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_bound import causal_iv, family_bounds
from kernelcheck._src.attention.families.dplr.forms import LIMITS, dplr_transitions


def dplr_error_bound(
    q, k, v, a, b, gates, *, causal=True, dtype=None, extra_ops=0, initial_state=None,
    qk_l2norm=False, scale=1.0, chunk_size=None,
):  # fmt: skip
    """Entrywise a-priori rounding-error bound of the DPLR forms (claims C23, C24).

    As :func:`~kernelcheck.attention.delta_error_bound` for the general
    transition ``Diag(w_t) + b_t a_t^T``: its spectral norm bounded in float64
    by the 2 x 2 reduction of the common model (exact for one decay on every
    channel, an upper bound otherwise), the chunked form's reads ``X`` from the
    triangular system ``I - A_ab`` and the known values' products
    ``A_ak V`` (the general case of the common model).

    Parameters
    ----------
    q, k, v, a, b, gates, initial_state, qk_l2norm, scale
        As in :func:`~kernelcheck.attention.dplr_recurrent`; the inputs are
        taken as exact (the handed-over state too).
    causal, dtype, extra_ops, chunk_size
        As in :func:`~kernelcheck.attention.delta_error_bound`.

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
    """
    causal_iv(causal)
    x, *tokens = tr.family_inputs(
        q, k, v, (a, b, gates), LIMITS, initial_state, False, qk_l2norm, scale, np.float64
    )
    T = dplr_transitions(x, *tokens)
    return family_bounds(x, T, dtype, extra_ops, qk_l2norm, scale, chunk_size)[1].out
