"""Bound terms several families share: the quotient, gradual underflow, the linear-type sums.

Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3; ``u`` the
unit roundoff, ``gamma_k = k u / (1 - k u)``; every bound is entrywise on
``|computed - exact|`` for inputs taken as exact.  :func:`quotient_bound` is
the bound of every normalised form's division (kernelized, linear, gated),
:func:`underflow_term` the share of gradual underflow, and
:func:`linear_family_bound` the bound of the linear and gated families (C14,
C19, C20), whose every form sums decayed products of features.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kernelcheck._src.attention.common.blocking import chunked_products, swap, with_ones
from kernelcheck._src.core.rounding import (
    RoundingModel,
    eta,
    gamma,
    unit_roundoff,
)

# Accuracy of NumPy's exp, in units of u (libm and SIMD versions are within a
# few ulp; 4 ulp is assumed by the softmax error model).
EXP_ULPS = 4


def quotient_bound(absH, E, den_hat, u):
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


def underflow_term(terms: int, dtype, *factors: np.ndarray) -> float:
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


def accumulation_model(dt):
    """The model of the running sums alone: a RoundingModel's accumulation precision only.

    Sums carried in the accumulation precision (the cumulative log gates, a
    recurrent state) see none of the per-term storage roundings of a 16-bit
    layer: no storage roundings, and ``u``, ``eta`` of the accumulation
    precision (a probabilistic model keeps its ``lambda``).  A plain dtype is
    returned as it is.
    """
    if isinstance(dt, RoundingModel):
        return dataclasses.replace(dt, storage=dt.accumulate, storage_ops=0)
    return dt


def log_decay_error(abs_log_sums: np.ndarray, k: int, dt, ulps: float, steps=0.0) -> np.ndarray:
    """``rho = expm1(2 gamma_k |L| + steps) + ulps u``: the relative error of a decay from logs.

    A decay ``prod_(l=j+1..i) g_l`` formed as ``exp`` of a difference of
    cumulative log gates: ``|L| = sum |log g_l|`` over the tokens up to ``i``
    (all terms of one sign), each partial sum within ``gamma |L|``, the
    difference of two within twice that, ``k`` counting the sums' roundings
    and those of ``log``; ``exp`` and the products of the factors add
    ``ulps`` units of ``u``; ``steps`` the relative error of a product of
    per-token factors ``exp(log g_l)`` (a recurrence handed log gates), if
    any.  Evaluated in ``dt`` (a dtype or a RoundingModel).
    """
    return np.expm1(2.0 * gamma(k, dt) * abs_log_sums + steps) + ulps * unit_roundoff(dt)


def gated_decay_error(abs_log_sums: np.ndarray, n: int, dt) -> np.ndarray:
    """The gated forms' ``rho_i = expm1(2 gamma_(n+5) |L_i|) + c u`` (:func:`linear_family_bound`).

    ``c = 10`` for ``dt`` float64, 6 otherwise; ``u`` and ``gamma`` of the
    accumulation precision of a RoundingModel (the log sums and ``exp`` are
    running computations, not stored values).  The forward bound of C20 and
    its backward pass's bound read it here.
    """
    c = 10.0 if dt == np.dtype(np.float64) else 6.0
    acc = dt.accumulate if isinstance(dt, RoundingModel) else dt  # the log sums' precision
    return log_decay_error(abs_log_sums, n + 5, acc, c)


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
    no term grows beyond ``rho``.  For a :class:`RoundingModel` the log sums
    and ``exp`` run in its accumulation precision: ``rho`` takes that
    precision's ``gamma`` and ``u``, never the storage format's (a 16-bit
    layer accumulating in float32 stores its decays, one storage rounding
    per term already among the model's ``storage_ops``; multiplying the log
    sums by the storage format's error would let errors of several percent
    pass on long sequences).

    Never NaN: ``inf`` (no bound) where a sum of absolute products overflows
    and meets a zero (``inf * 0``).
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
        rho_dt = gated_decay_error(L, n, dt)  # see the docstring
        rho64 = gated_decay_error(L, n, np.dtype(np.float64))
        # absH was formed with float64 decays: the exact sums are within (1 + 2 rho64)
        absH = absH * (1.0 + 2.0 * rho64)
        rel_dt = (1.0 + rel_dt) * (1.0 + rho_dt) - 1.0
        g64 = (1.0 + g64) * (1.0 + rho64) - 1.0
    # absH is a sum of non-negative terms: its own rounding is relative, at
    # most gamma_k in float64, absorbed by the factor (1 + g64).
    E = rel_dt * (1.0 + g64) * absH
    # decays that underflow lose at most eta per term: twice the terms
    terms = n * D * (2 if log_gates is not None else 1)
    E = E + underflow_term(terms, dt, aq, ak, W)
    if dt != np.dtype(np.float64):
        # den_hat is the float64 normaliser, within the float64 model of the
        # exact one: the quotient bound needs both models.
        E = E + g64 * (1.0 + g64) * absH
    if not normalize:
        # a sum of absolute products that overflowed met a zero (inf * 0 in the
        # decays or |phi_q| |phi_k| times V = 0): NaN, and no bound there
        return np.where(np.isnan(E), np.inf, E) * (1.0 + gamma(4, np.float64))
    coarse = quotient_bound(absH * (1.0 + g64), E, H[..., -1], unit_roundoff(dt))
    if not (isinstance(dt, RoundingModel) and dt.storage_ops):
        return coarse
    rho = None if log_gates is None else rho_dt
    fine = _linear_fine(absH * (1.0 + g64), H, V, causal, dt, k, D, extra_ops, rho, g64, E)
    return np.fmin(coarse, fine)  # the quotient bound where the finer one is NaN (overflow)


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
    under = underflow_term(1, dt, absH)  # the coarse bound's underflow share, per entry
    out = out + under
    return np.where((lo > 0) & np.isfinite(out), out, np.inf)
