"""The a-priori error bound of exact softmax attention (claim C1)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kernelcheck._src.attention.common.bounds import EXP_ULPS
from kernelcheck._src.attention.common.inputs import (
    dtype_iv,
    softmax_iv,
)
from kernelcheck._src.attention.families.softmax.forms import softmax
from kernelcheck._src.core.rounding import (
    RoundingModel,
    eta,
    gamma,
    unit_roundoff,
)
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
)
from kernelcheck.errors import (
    NumericalFailure,
)


def softmax_error_bound(
    Q: Any,
    K: Any,
    V: Any,
    *,
    causal: bool = False,
    scale: float | None = None,
    dtype: Any = None,
    extra_ops: int = 0,
    tight: bool = True,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of :func:`softmax` (claim C1).

    Logits ``s_ij = scale q_i . k_j`` are computed to within
    ``gamma_(d+2) scale |q_i| . |k_j| <= gamma_(d+2) r_i`` with
    ``r_i = scale |q_i| . max_j |k_j|`` (the float scale's own rounding is one
    of the d + 2).  Subtracting the row maximum adds ``u |s_ij - m_i| <= 2 u r_i``
    and exp (accurate to 4 ulp) ``4 u``, all as perturbations of the logits by
    at most ``theta_i``.  Softmax weights move by a factor in
    ``[exp(-2 theta_i), exp(2 theta_i)]``, so the output moves by at most
    ``expm1(2 theta_i) max_j |v_j|``; the two sums of at most n terms and the
    division add ``(2 gamma_n / (1 - gamma_n) + u) max_j |v_j|``:

        |a_hat - a|_im <= [expm1(2 theta_i)(1 + u) + 2 gamma_n / (1 - gamma_n) + u] max_j |v_jm|,
        theta_i = gamma_(d+2) r_i + 2 u r_i + 5 u.

    Gradual underflow adds ``(3 n + 2) eta (1 + max_j |v_j|)``.
    ``max_j`` runs over ``j <= i`` when causal.  Algorithm-independent enough
    to bound any stable softmax attention (block-wise or online maxima).

    A second bound uses the output's own scale instead of ``max_j |v_j|``
    (see ``_softmax_fine``: the weights' perturbation moves the average by
    at most ``e^(2 theta) expm1(2 theta) max_j |v_j - a_i|``, the sums by
    ``gamma_n`` times ``sum_j w_ij |v_j| / sum_j w_ij + |a_i|``); it is much
    smaller where the output is as large as the values (positive values) and
    for layers that store in 16 bits, whose roundings of the weights and the
    output it counts separately.  The result is the entrywise minimum of the
    two bounds, each valid on its own.

    Parameters
    ----------
    Q : array_like, shape (..., n, d)
        The queries.
    K : array_like, shape (..., n, d)
        The keys.
    V : array_like, shape (..., n, d_v)
        The values.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    scale : float, default None
        Logit scale; None: ``1 / sqrt(d)``.
    dtype : dtype or str, default None
        Precision whose unit roundoff is used (None: the inputs').
    extra_ops : int, default 0
        Extra roundings per logit and per sum term (>= 0; e.g. 2 for inputs
        rounded to a lower precision first).
    tight : bool, default True
        ``False``: the first bound alone, without the second's float64
        softmax pass (larger, as valid, ``O(n d)``; for a term that only has
        to be small, such as a float64 reference's own error).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import softmax, softmax_error_bound
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 6, 4))
    >>> bool(softmax_error_bound(Q, K, V).max() < 1e-13)
    True
    """
    Q, K, V, causal, scale = softmax_iv(Q, K, V, causal, scale)
    dt = dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    tight = as_bool(tight, "tight")
    with np.errstate(over="ignore", invalid="ignore"):
        coarse, r, vmax = _softmax_coarse(Q, K, V, causal, scale, dt, extra_ops)
        if not tight:
            return np.broadcast_to(coarse, Q.shape[:-1] + V.shape[-1:]).copy()
        coarse64, _, _ = _softmax_coarse(Q, K, V, causal, scale, np.float64, 0)
        try:
            fine = _softmax_fine(Q, K, V, causal, scale, dt, extra_ops, r, coarse64)
        except NumericalFailure:  # the float64 reference itself overflows: the coarse bound
            fine = coarse
        out = np.minimum(coarse, fine)  # both bound the error: the smaller one does
    return np.broadcast_to(out, Q.shape[:-1] + V.shape[-1:]).copy()


def _softmax_coarse(Q, K, V, causal, scale, dt, extra_ops):
    """The bound with ``max_j |v_j|`` as the scale of every term (see the docstring)."""
    u = unit_roundoff(dt)
    n, d = K.shape[-2], Q.shape[-1]  # n: the number of keys summed over
    absK = np.abs(K).astype(np.float64)
    absV = np.abs(V).astype(np.float64)
    if causal:
        kmax = np.maximum.accumulate(absK, axis=-2)  # (..., n, d): max over j <= i
        vmax = np.maximum.accumulate(absV, axis=-2)
    else:  # (..., 1, d) and (..., 1, d_v), broadcast against every query
        kmax = absK.max(axis=-2, keepdims=True)
        vmax = absV.max(axis=-2, keepdims=True)
    # |q| |k| beyond the range: r = inf, the bound inf
    r = (
        scale
        * np.sum(np.abs(Q).astype(np.float64) * kmax, axis=-1)
        * (1.0 + gamma(d + 2, np.float64))
    )
    theta = gamma(d + 2 + extra_ops, dt) * r + 2.0 * u * r + (EXP_ULPS + 1) * u
    gn = gamma(n + extra_ops, dt)
    factor = np.expm1(2.0 * theta) * (1.0 + u) + 2.0 * gn / (1.0 - gn) + u
    # Gradual underflow: weights and products below the normal range carry an
    # absolute error of at most 2 eta each (at most 3 n + 2 of them per entry).
    under = (3 * n + 2) * eta(dt) * (1.0 + vmax)
    # Where every value is 0 the output is exactly 0 whatever the weights:
    # the weight term is 0 there (an infinite factor must not make it NaN).
    weighted = np.where(vmax > 0, factor[..., None] * vmax, 0.0)
    out = (weighted + under) * (1.0 + gamma(6, np.float64))
    return np.broadcast_to(out, Q.shape[:-1] + V.shape[-1:]), r, vmax


def _softmax_fine(Q, K, V, causal, scale, dt, extra_ops, r, margin):
    """The bound with the output's own scale: deviations ``|v_j - a_i|`` and ``sum_j w_ij |v_j|``.

    With logit perturbations ``|t_ij| <= theta_i`` the perturbed average
    ``a' = sum w e^t v / sum w e^t`` differs from ``a`` by
    ``sum w (e^t - 1)(v - a) / sum w e^t``, at most
    ``X = e^(2 theta) expm1(2 theta) max_j |v_j - a_i|``; the two sums of at
    most n terms add ``Y = gamma_n / (1 - gamma_n) (e^(2 theta) A_i + |a_i| + X)``
    with ``A_i = sum_j w_ij |v_j| / sum_j w_ij``; the stored output (and a
    stored normaliser) ``Z = s u_s (|a_i| + X + Y)``.  ``a`` and ``A`` are
    float64 softmax outputs (of one call over ``[V, |V|]``), widened by
    ``margin`` (the float64 coarse bound, which covers either computation).
    For a :class:`~kernelcheck._src.core.rounding.RoundingModel` storing in a
    coarser format, the logits carry ``4 u_s r_i`` more (the scaled queries,
    the product and the subtraction of the maximum are stored) and the
    weights ``3 u_s`` (the exponential, the sum and the division), the output
    ``2 u_s``; the sums accumulate in the accumulation precision.
    """
    if isinstance(dt, RoundingModel) and dt.storage_ops:
        acc = dataclasses.replace(dt, storage_ops=0)
        u_a, u_s, stored = dt.accumulate.u, dt.storage.u, True
    else:
        acc, u_a = dt, unit_roundoff(dt)
        u_s, stored = u_a, False
    n, d = K.shape[-2], Q.shape[-1]
    Q64, K64, V64 = (np.asarray(X, dtype=np.float64) for X in (Q, K, V))
    # a and A share their weights: one softmax over [V, |V|] forms the logits
    # and exponentials once (they dominate when d_v is small).
    aA = softmax(Q64, K64, np.concatenate([V64, np.abs(V64)], axis=-1),
                       causal=causal, scale=scale)  # fmt: skip
    a, A = aA[..., : V64.shape[-1]], aA[..., V64.shape[-1] :]
    if causal:
        vhi, vlo = np.maximum.accumulate(V64, axis=-2), np.minimum.accumulate(V64, axis=-2)
    else:
        vhi, vlo = V64.max(axis=-2, keepdims=True), V64.min(axis=-2, keepdims=True)
    dev = np.maximum(vhi - a, a - vlo) + margin
    theta = gamma(d + 2 + extra_ops, acc) * r + 2.0 * u_a * r + (EXP_ULPS + 1) * u_a
    if stored:
        theta = theta + 4.0 * u_s * r + 3.0 * u_s
    t2 = 2.0 * theta[..., None]
    X = np.exp(t2) * np.expm1(t2) * dev
    gn = gamma(n + extra_ops, acc)
    absa = np.abs(a) + margin
    Y = gn / (1.0 - gn) * (np.exp(t2) * (A + margin) + absa + X)
    Z = (2.0 if stored else 1.0) * u_s * (absa + X + Y)
    under = (3 * n + 2) * eta(dt) * (1.0 + np.abs(V64).max())
    return (X + Y + Z + under) * (1.0 + gamma(8, np.float64))
