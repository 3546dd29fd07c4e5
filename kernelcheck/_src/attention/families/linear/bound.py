"""The a-priori error bound of the linear forms: parallel, recurrent, chunked (claims C14, C19)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.bounds import linear_family_bound
from kernelcheck._src.attention.common.inputs import (
    dtype_iv,
    features_iv,
    state_matrix_iv,
)
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
)


def linear_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    causal: bool = False,
    dtype: Any = None,
    extra_ops: int = 0,
    normalize: bool = True,
    initial_state: Any = None,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of the linear forms (parallel, recurrent, chunked).

    Every linear form computes ``num_i = sum_{j in J(i)} (phi_q_i . phi_k_j) v_j``
    and ``den_i = sum_{j in J(i)} phi_q_i . phi_k_j`` with each term passing
    through at most ``k = 2 n + 2 D + 4`` rounded operations in any of the
    summation orders the forms use (bidirectional, ``phi_k^T V`` and the
    normalisers' ``1^T phi_k`` over n terms, then D: ``n + D + 1``;
    recurrence ``n + D + 1``; chunks of C tokens, which causal ``parallel``
    uses too: ``C + 2 n / C + D + 1``).  Hence (Higham, Lemma 3.4)

        |num_hat - num| <= gamma_k |phi_q| |phi_k|^T |V| =: E_num,
        |den_hat - den| <= gamma_k |phi_q| |phi_k|^T 1   =: E_den,

    and the quotient obeys the bound of :func:`quotient_bound`:
    ``(E_num + R E_den) / (den - E_den) + u R (1 + u)``, ``R`` a bound on
    ``|a_i|`` (the last term the quotient's rounding: every form divides).
    Unnormalised (``normalize=False``, C19) the output is the numerator and
    its bound ``E_num``.  A handed-over ``initial_state`` ``(S0, z0)`` (taken
    as exact) adds ``phi_q_i . S0`` to the sums and ``|phi_q_i| |S0|`` to
    ``|phi_q| |phi_k|^T |V|``.
    Gradual underflow adds ``3 n D eta (1 + max|phi_q|)(1 + max|phi_k|)(1 + max|V|)``
    to both (``eta`` the smallest subnormal).
    The features are taken as exact.  When they were computed with a
    relative error of ``gamma_e`` per entry (``e = ExactFeatureMap.ops``),
    pass ``extra_ops = 2 e``; ``extra_ops`` also covers rounding the inputs to
    a lower precision (2 more).

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    dtype : dtype or str, default None
        Precision whose unit roundoff u is used (None: the inputs').
    extra_ops : int, default 0
        Additional roundings per term (>= 0; see above).
    normalize : bool, default True
        The normalised forms, or the unnormalised ones (C19).
    initial_state : State, default None
        The state handed to a causal form before its first token.

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
        ``inf`` where the normaliser's sign is not certain.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import linear_error_bound, parallel, recurrent
    >>> rng = np.random.default_rng(1)
    >>> pq, pk = rng.random((2, 8, 4))
    >>> V = rng.normal(size=(8, 3))
    >>> err = np.abs(parallel(pq, pk, V, causal=True) - recurrent(pq, pk, V))
    >>> bool((err <= 2 * linear_error_bound(pq, pk, V, causal=True)).all())
    True
    """
    phi_q, phi_k, V, causal, _ = features_iv(phi_q, phi_k, V, causal, "raise")
    dt = dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    normalize = as_bool(normalize, "normalize")
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, causal)
    # An overflowing product makes the bound inf ("no bound in float64"), not a
    # warning; inf - inf in the signed products gives a NaN normaliser, which
    # quotient_bound also turns into inf.
    with np.errstate(over="ignore", invalid="ignore"):
        return linear_family_bound(phi_q, phi_k, V, causal, dt, extra_ops, normalize, M0, None)
