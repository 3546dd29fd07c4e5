"""A-priori rounding-error bounds of the attention forms (claims C1, C10, C14).

Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3; ``u`` the
unit roundoff, ``gamma_k = k u / (1 - k u)``; each bound is entrywise on
``|computed - exact|`` for inputs taken as exact:

* :func:`linear_error_bound` -- the parallel, recurrent and chunked forms;
* :func:`softmax_error_bound` -- :func:`~kernelcheck._src.attention.exact.softmax`;
* :func:`kernelized_error_bound` -- :func:`~kernelcheck._src.attention.exact.kernelized`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kernelcheck._src.attention import exact
from kernelcheck._src.attention.blocking import chunked_products, swap, with_ones
from kernelcheck._src.attention.exact import gram_blocks
from kernelcheck._src.attention.inputs import (
    dtype_iv,
    features_iv,
    gates_iv,
    kernelized_iv,
    softmax_iv,
    state_matrix_iv,
)
from kernelcheck._src.core.rounding import (
    RoundingModel,
    eta,
    gamma,
    unit_roundoff,
)
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    describe,
)
from kernelcheck.errors import (
    InvalidArgument,
    NumericalFailure,
)

# Accuracy of NumPy's exp, in units of u (libm and SIMD versions are within a
# few ulp; 4 ulp is assumed by the softmax error model).
_EXP_ULPS = 4


def _quotient_bound(absH, E, den_hat, u):
    """Bound on ``|fl(num)/fl(den) - num/den|`` for any form sharing the error model.

    ``absH = [|kappa| |V|, |kappa| 1]`` (absolute products), ``E`` the bound on
    the numerator and normaliser errors, ``den_hat`` one form's computed
    normaliser.  For a form X whose normaliser is within ``E_den`` of the
    exact one (as is ``den_hat``'s):

        den_exact >= den_hat - E_den =: lo1,  den_X >= den_hat - 2 E_den =: lo2,
        |num_X / den_X| <= (absnum + E_num) / lo2 =: R,
        err_X <= (E_num + R E_den) / lo1 + u R (1 + u).

    The last term is the quotient's own rounding (every form divides).

    ``inf`` where ``lo2 <= 0``: the normaliser's sign is not certain there.
    """
    E_num, E_den = E[..., :-1], E[..., -1:]
    absnum = absH[..., :-1]
    den = den_hat[..., None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo1 = den - E_den  # NaN from inf - inf fails lo2 > 0 below: bound inf
        lo2 = den - 2.0 * E_den
        R = (absnum + E_num) / lo2
        bound = (E_num + R * E_den) / lo1 + u * R * (1.0 + u)
    # inf where the sign is uncertain, and where an overflowed R meets E_den = 0
    # (inf * 0): no bound is ever NaN
    bound = np.where((lo2 > 0) & ~np.isnan(bound), bound, np.inf)
    # The bound's own evaluation: a handful of roundings on non-negative terms.
    return bound * (1.0 + gamma(8, np.float64))


def _underflow_term(terms: int, dtype, *factors: np.ndarray) -> float:
    """Absolute error from gradual underflow in sums of ``terms`` triple products.

    With underflow, ``fl(a op b) = (a op b)(1 + delta) + eta`` (Higham
    sec. 2.1); subnormal additions are exact, so each product of a term
    ``a b c`` adds at most ``eta`` before being multiplied by at most one more
    factor: ``3 terms eta prod_f (1 + max |f|)``.  Negligible unless results
    are themselves near the underflow threshold.
    """
    value = 3.0 * terms * eta(dtype)
    for f in factors:
        value *= 1.0 + float(np.max(f)) if f.size else 1.0
    return value


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

    and the quotient obeys the bound of :func:`_quotient_bound`:
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
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    causal : bool
    dtype : float64 or float32, optional
        Precision whose unit roundoff u is used (default: the inputs').
    extra_ops : int >= 0
        Additional roundings per term (see above).
    normalize : bool
        The normalised forms (default) or the unnormalised ones (C19).
    initial_state : State, optional
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
    # _quotient_bound also turns into inf.
    with np.errstate(over="ignore", invalid="ignore"):
        return linear_family_bound(phi_q, phi_k, V, causal, dt, extra_ops, normalize, M0, None)


def linear_family_bound(phi_q, phi_k, V, causal, dt, extra_ops, normalize, M0, log_gates):
    """The bound of the linear and gated families on validated inputs (see the public bounds).

    ``M0`` is the initial state as one matrix ``[S0, z0]`` (or ``S0``
    unnormalised), ``log_gates`` the logs of the gates (None: ungated).  With
    gates every term passes through ``n`` more roundings (the decays of the
    recurrence), and the log-space decays of the parallel and chunked forms
    carry a relative error of at most
    ``rho_i = expm1(2 gamma_(n+5) |L_i|) + c u``, ``L_i = sum_{l <= i} log g_l``:
    each ``log g_l`` is accurate to a few ulp, their partial sums to
    ``gamma_n |L_i|`` (all terms have one sign), the difference of two to
    ``2 gamma_n |L_i|`` (``|L_j| <= |L_i|`` for ``j <= i``), and ``exp`` adds
    4 ulp (``c = 6``).  In float64 the chunked form's mask is the product
    ``exp(lc_i) exp(-lc_j)`` of two such decays, 9 ulp, and its rows scaled
    once per group of chunks, ``a_i exp(LC_i)`` and ``b_j exp(-LC_j)``, give
    their product the decay from two ``exp`` and two roundings, 10 ulp:
    ``c = 10`` for ``dtype`` float64 and for the float64 share of every bound
    (a layer in a coarser precision keeps ``c = 6``: the products are only
    formed in float64).  The decays themselves are at most ``1 + 10 u``, so
    no term grows beyond ``rho``.
    """
    n, D = phi_k.shape[-2], phi_q.shape[-1]  # n: the number of keys summed over
    W = (with_ones(V) if normalize else V).astype(np.float64)
    aq, ak = np.abs(phi_q).astype(np.float64), np.abs(phi_k).astype(np.float64)
    np.abs(W, out=W)
    if causal:
        absM0 = None if M0 is None else np.abs(M0).astype(np.float64)
        lg = None if log_gates is None else log_gates.astype(np.float64)
        absH, _ = chunked_products(aq, ak, W, 64, S0=absM0, log_gates=lg)
        Ws = (with_ones(V) if normalize else V).astype(np.float64)
        M0s = None if M0 is None else M0.astype(np.float64)
        H, _ = chunked_products(
            phi_q.astype(np.float64), phi_k.astype(np.float64), Ws, 64, S0=M0s, log_gates=lg
        )
    else:
        absH = aq @ (swap(ak) @ W)
        Ws = (with_ones(V) if normalize else V).astype(np.float64)
        H = phi_q.astype(np.float64) @ (swap(phi_k.astype(np.float64)) @ Ws)
    k = 2 * n + 2 * D + 4 + (n + 4 if log_gates is not None else 0)
    g64 = gamma(k, np.float64)
    rel_dt = gamma(k + extra_ops, dt)
    if log_gates is not None:
        L = -np.cumsum(log_gates.astype(np.float64), axis=-1)[..., None]  # |L_i| >= 0
        c_dt = 10.0 if dt == np.dtype(np.float64) else 6.0  # see the docstring
        rho_dt = np.expm1(2.0 * gamma(n + 5, dt) * L) + c_dt * unit_roundoff(dt)
        rho64 = np.expm1(2.0 * gamma(n + 5, np.float64) * L) + 10.0 * unit_roundoff(np.float64)
        # absH was formed with float64 decays: the exact sums are within (1 + 2 rho64)
        absH = absH * (1.0 + 2.0 * rho64)
        rel_dt = (1.0 + rel_dt) * (1.0 + rho_dt) - 1.0
        g64 = (1.0 + g64) * (1.0 + rho64) - 1.0
    # absH is a sum of non-negative terms: its own rounding is relative, at
    # most gamma_k in float64, absorbed by the factor (1 + g64).
    E = rel_dt * (1.0 + g64) * absH
    # decays that underflow lose at most eta per term: twice the terms
    terms = n * D * (2 if log_gates is not None else 1)
    E = E + _underflow_term(terms, dt, aq, ak, W)
    if dt != np.dtype(np.float64):
        # den_hat is the float64 normaliser, within the float64 model of the
        # exact one: the quotient bound needs both models.
        E = E + g64 * (1.0 + g64) * absH
    if not normalize:
        return E * (1.0 + gamma(4, np.float64))
    coarse = _quotient_bound(absH * (1.0 + g64), E, H[..., -1], unit_roundoff(dt))
    if not (isinstance(dt, RoundingModel) and dt.storage_ops):
        return coarse
    rho = None if log_gates is None else rho_dt
    fine = _linear_fine(absH * (1.0 + g64), H, V, causal, dt, k, D, extra_ops, rho, g64, E)
    return np.minimum(coarse, fine)


def _linear_fine(absH, H, V, causal, dt, k, D, extra_ops, rho, g64, E):
    """The quotient bound of a layer storing in a coarser format, weights' roundings shared.

    A 16-bit layer rounds its two feature vectors when it stores them (2
    storage roundings, with the ``D + extra_ops`` of the dot product and the
    maps, and the decays' ``rho``): an error ``delta_ij`` of the weight
    ``w_ij``, common to the numerator and the normaliser, moves the average
    by ``sum w delta (v - a) / sum w (1 + delta)``, at most
    ``X = rho_w sum_j |w_ij| max_j |v_j - a_i| / lo``.  The sums carry
    ``rho_s = (1 + gamma_k(acc))(1 + gamma_2(storage)) - 1`` each (the sum
    and the stored state or normaliser):
    ``Y = (rho_s |w| |v| + (|a| + X) rho_s |w| 1)(1 + rho_w) / lo``, and the
    stored output ``Z = (u_s + u_a)(|a| + X + Y)``, with
    ``lo = den - (rho_w + rho_s (1 + rho_w)) sum_j |w_ij|`` (``inf`` where it
    is not positive).  ``a``, ``den`` are float64, widened by the float64
    model's share of ``E``.
    """
    acc = dataclasses.replace(dt, storage_ops=0)
    u_s, u_a = dt.storage.u, dt.accumulate.u
    rho_w = (1.0 + gamma(D + extra_ops, acc)) * (1.0 + gamma(2, dt.storage)) - 1.0
    if rho is not None:
        rho_w = (1.0 + rho_w) * (1.0 + rho) - 1.0
    rho_s = (1.0 + gamma(k, acc)) * (1.0 + gamma(2, dt.storage)) - 1.0
    den = H[..., -1:]
    sw = absH[..., -1:]
    e64 = g64 * absH  # the float64 reference's own error, num and den
    with np.errstate(divide="ignore", invalid="ignore"):
        a = H[..., :-1] / den
        margin = (e64[..., :-1] + np.abs(a) * e64[..., -1:]) / (den - e64[..., -1:])
    V64 = np.asarray(V, dtype=np.float64)
    if causal:
        vhi, vlo = np.maximum.accumulate(V64, axis=-2), np.minimum.accumulate(V64, axis=-2)
    else:
        vhi, vlo = V64.max(axis=-2, keepdims=True), V64.min(axis=-2, keepdims=True)
    dev = np.maximum(vhi - a, a - vlo) + margin
    absa = np.abs(a) + margin
    lo = den - e64[..., -1:] - (rho_w + rho_s * (1.0 + rho_w)) * sw
    with np.errstate(divide="ignore", invalid="ignore"):
        X = rho_w * sw * dev / lo
        Y = (rho_s * absH[..., :-1] + (absa + X) * rho_s * sw) * (1.0 + rho_w) / lo
        Z = (u_s + u_a) * (absa + X + Y)
        out = (X + Y + Z + E[..., :-1] * 0.0) * (1.0 + gamma(8))
    under = _underflow_term(1, dt, absH)  # the coarse bound's underflow share, per entry
    out = out + under
    return np.where((lo > 0) & np.isfinite(out), out, np.inf)


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
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    gates : array_like, broadcastable to (..., n)
    causal : bool
        True: the gated forms are causal only (False is refused).
    normalize : bool
    initial_state : State, optional
    dtype : float64 or float32, optional
        Precision whose unit roundoff is used (default: the inputs').
    extra_ops : int >= 0
        Additional roundings per term (feature maps, inputs cast down).

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
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    causal : bool
    scale : float, optional
        ``1 / sqrt(d)`` by default.
    dtype : float64 or float32, optional
        Precision whose unit roundoff is used (default: the inputs').
    extra_ops : int >= 0
        Extra roundings per logit and per sum term (e.g. 2 for inputs rounded
        to a lower precision first).
    tight : bool
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
    theta = gamma(d + 2 + extra_ops, dt) * r + 2.0 * u * r + (_EXP_ULPS + 1) * u
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
    aA = exact.softmax(Q64, K64, np.concatenate([V64, np.abs(V64)], axis=-1),
                       causal=causal, scale=scale)  # fmt: skip
    a, A = aA[..., : V64.shape[-1]], aA[..., V64.shape[-1] :]
    if causal:
        vhi, vlo = np.maximum.accumulate(V64, axis=-2), np.minimum.accumulate(V64, axis=-2)
    else:
        vhi, vlo = V64.max(axis=-2, keepdims=True), V64.min(axis=-2, keepdims=True)
    dev = np.maximum(vhi - a, a - vlo) + margin
    theta = gamma(d + 2 + extra_ops, acc) * r + 2.0 * u_a * r + (_EXP_ULPS + 1) * u_a
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


def kernelized_error_bound(
    Q: Any,
    K: Any,
    V: Any,
    kernel: Any,
    *,
    causal: bool = False,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of :func:`kernelized` (claim C10).

    With ``G`` the computed Gram block and ``E_G = kernel.error_bound(Q, K)``
    the kernel's own entrywise bound, the products with ``[V, 1]`` of inner
    dimension at most n give

        E_num = E_G |V| + gamma_(n+1) |G| |V|,   E_den = E_G 1 + gamma_(n+1) |G| 1,

    and the quotient bound of :func:`linear_error_bound`.  For a lower
    precision ``dtype`` the kernel's bound is scaled by the ratio of unit
    roundoffs (first order in u) and ``extra_ops`` is added to the sums.

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    kernel : kernel object with ``error_bound(X, Y)``
    causal : bool
    dtype : float64 or float32, optional
    extra_ops : int >= 0

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Polynomial
    >>> from kernelcheck.attention import kernelized_error_bound
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 5, 2))
    >>> bool(kernelized_error_bound(Q, K, V, Polynomial(2)).max() < 1e-12)
    True
    """
    Q, K, V, causal, _ = kernelized_iv(Q, K, V, kernel, causal, "raise")
    err_fn = getattr(kernel, "error_bound", None)
    if not callable(err_fn):
        raise InvalidArgument(
            f"`kernel` must provide error_bound(X, Y) for an error model, got {describe(kernel)}"
        )
    dt = dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    batch, dv = Q.shape[:-2], V.shape[-1]
    n = K.shape[-2]  # the number of keys summed over
    ratio = unit_roundoff(dt) / unit_roundoff(V.dtype)
    W = np.abs(with_ones(V)).astype(np.float64)
    H = np.empty(batch + (Q.shape[-2], dv + 1))
    absH = np.empty_like(H)
    EG = np.empty_like(H)
    for idx in np.ndindex(*batch):
        Q2, K2 = Q[idx], K[idx]
        Wi = W[idx]
        Vi = with_ones(V[idx]).astype(np.float64)
        blocks = gram_blocks(kernel, Q2, K2, causal, kernel)
        eblocks = gram_blocks(kernel, Q2, K2, causal, err_fn)
        for (i0, i1, G), (_, _, E) in zip(blocks, eblocks, strict=True):
            G = G.astype(np.float64)
            m = G.shape[1]
            H[idx][i0:i1] = G @ Vi[:m]
            absH[idx][i0:i1] = np.abs(G) @ Wi[:m]
            EG[idx][i0:i1] = np.abs(E.astype(np.float64)) @ Wi[:m]
    g64 = gamma(n + 2, np.float64)
    E = (ratio * EG + gamma(n + 1 + extra_ops, dt) * absH) * (1.0 + g64)
    E = E + _underflow_term(n, dt, W)
    if dt != V.dtype:
        # The reference normaliser is computed in the inputs' precision.
        E = E + (EG + gamma(n + 1, V.dtype) * absH) * (1.0 + g64)
    return _quotient_bound(absH * (1.0 + g64) + EG * (1.0 + g64), E, H[..., -1], unit_roundoff(dt))
