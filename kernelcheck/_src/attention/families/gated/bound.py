"""The a-priori error bound of the gated forms (claim C20)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.bounds import linear_family_bound
from kernelcheck._src.attention.common.inputs import (
    dtype_iv,
    features_iv,
    gates_iv,
    state_matrix_iv,
)
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
)
from kernelcheck.errors import (
    InvalidArgument,
)


def gated_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    *,
    causal: bool = True,
    normalize: bool = False,
    initial_state: Any = None,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of the gated forms (claim C20).

    The gated forms compute ``num_i = sum_{j <= i} (phi_q_i . phi_k_j) d_ij v_j``
    (``den_i`` with ``v = 1``), ``d_ij = prod_{l=j+1..i} g_l <= 1``, plus the
    handed-over state decayed by ``prod_{l <= i} g_l``.  Each term carries:

    * the roundings of the plain linear forms, ``2 n + 2 D + 4``, and ``n + 4``
      more for the decays of the recurrence (one multiplication per step):
      ``k = 3 n + 2 D + 8``;
    * in the parallel and chunked forms, the decay formed as ``exp`` of a
      difference of cumulative log gates, with a relative error of at most
      ``rho_i = expm1(2 gamma_(n+5) |L_i|) + c u``, ``L_i = sum_{l<=i} log g_l``
      (``log`` to a few ulp, partial sums of one sign to ``gamma_n |L_i|``,
      the difference of two to twice that since ``|L_j| <= |L_i|``, ``exp`` to
      4 ulp: ``c = 6``; in float64 ``c = 10``, the chunked form's mask being
      a product of two such decays, 9 ulp, and its rows scaled once per group
      of chunks by ``exp(LC_i)`` and ``exp(-LC_j)``, 10 ulp); it grows with the total decay
      ``|L_i|`` and stays below ``1e-11`` relative in float64 for
      ``|L_i| <= 1e4``, n <= 1e5.

    So ``|num_hat - num| <= ((1 + gamma_k)(1 + rho_i) - 1) |phi_q| (|phi_k|
    d)^T |V| + underflow``, where decays below the normal range lose at most
    ``eta`` per term (the underflow term counts ``2 n D`` products); the
    normalised output then obeys the quotient bound of
    :func:`linear_error_bound`.  The inputs, gates and state are taken as
    exact (the reference is computed from what the layer received).

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    gates : array_like, broadcastable to (..., n)
        ``g_t`` in (0, 1], as in :func:`gated_recurrent`.
    causal : bool, default True
        The gated forms are causal only (False is refused).
    normalize : bool, default False
        The normalised forms, or the unnormalised ones.
    initial_state : State, default None
        The state handed to the form before its first token.
    dtype : dtype or str, default None
        Precision whose unit roundoff is used (None: the inputs').
    extra_ops : int, default 0
        Additional roundings per term (>= 0: feature maps, inputs cast down).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import gated_chunked, gated_error_bound, gated_recurrent
    >>> rng = np.random.default_rng(3)
    >>> pq, pk = rng.random((2, 40, 4))
    >>> V, g = rng.normal(size=(40, 2)), rng.uniform(1e-6, 1.0, size=40)
    >>> err = np.abs(gated_chunked(pq, pk, V, g, chunk_size=8) - gated_recurrent(pq, pk, V, g))
    >>> bool((err <= 2 * gated_error_bound(pq, pk, V, g)).all())
    True
    """
    if not as_bool(causal, "causal"):
        raise InvalidArgument("`causal` must be True: a decay or gate orders the tokens (C20)")
    phi_q, phi_k, V, _, _ = features_iv(phi_q, phi_k, V, True, "raise")
    g = gates_iv(gates, phi_q.shape[:-1], np.dtype(np.float64))
    dt = dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    normalize = as_bool(normalize, "normalize")
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, True)
    with np.errstate(over="ignore", invalid="ignore"):
        return linear_family_bound(phi_q, phi_k, V, True, dt, extra_ops, normalize, M0, g.log_gates)
