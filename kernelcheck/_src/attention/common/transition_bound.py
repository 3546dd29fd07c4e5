"""What rounding does to a recurrence of transitions: the normwise error model (claim C24).

The delta-rule families (:mod:`~kernelcheck._src.attention.common.transitions`)
update ``S_t = M_t S_(t-1) + k_t v_t^T`` with ``M_t = Diag(w_t) + p_t r_t^T``.
Their transitions are not entrywise non-negative, so the entrywise bounds of
the linear and gated families do not apply; a normwise bound does.  Each
value column ``m`` of the state is its own vector recurrence, and an error
``f_j`` made at step j reaches step t through the product of the transitions
between them:

    |S_t - fl(S_t)|_(:,m) <= sum_(j <= t) |M_t ... M_(j+1)|_2 |f_j|_(:,m)
                          <= e_t,m,    e_t = rho_t e_(t-1) + lambda_t,

Higham's standard model (``u`` the unit roundoff, ``gamma_k = k u / (1 - k u)``)
and the inputs taken as exact.  The terms:

* ``rho_t >= |M_t|_2``, computed in float64 from the inputs (upward: the
  float64 evaluation's own error added).  For ``|x| = 1``,
  ``|M x|^2 = |Diag(w) x|^2 + x^T N x`` with ``N = r (Dp)^T + (Dp) r^T +
  |p|^2 r r^T`` (``D = Diag(w)``), of rank two: its largest eigenvalue is
  that of the 2 x 2 matrix ``[[|p|^2, 1], [1, 0]] G``, ``G`` the Gram matrix
  of ``r`` and ``D p``.  So ``|M_t|_2^2 <= max_c w_c^2 + max(0, lambda)`` with
  ``lambda = (tau + sqrt(tau^2 + 4 g)) / 2``, ``tau = |p|^2 |r|^2 + 2 r.Dp``,
  ``g = |r|^2 |Dp - c r|^2`` (``c = r.Dp / |r|^2``; any ``c`` gives an upper
  bound, this one the exact Gram determinant): exact when the decay is one
  number for every channel (then ``|I - beta k k^T|_2 = max(1, |1 - beta |k|^2|)``
  as C22 states), an upper bound otherwise.  ``rho~_t = max(rho_t, max_c w_c)``
  propagates (the chunked form decays its own terms by at most ``max_c w_c``).
* ``lambda_t`` bounds the error made at token t by the recurrence or by the
  chunked (WY) form, whichever is larger, with magnitudes bounded from the
  exact state norms ``sigma_t`` (the float64 reference's, plus its own bound):

  - the recurrence's step, every term through ``D + 10`` roundings (the read
    ``r^T S`` over D, the error, ``beta``, the outer product, two sums, the
    decay and its ``exp``):
    ``gamma_(D+10) (mu_t (sigma_(t-1) + e_(t-1)) + |k_t| |v_t,m|)``,
    ``mu_t = max_c w_c + |p_t| |r_t|``;
  - the chunked form, any chunk of at most C tokens starting anywhere: its
    pseudo-values solve ``(I - A) X = B + R~ S0`` by forward substitution,
    whose computed solution solves a system perturbed by ``gamma_C |I - A|``
    (Higham, Theorem 8.5), amplified by ``|(I - A)^(-1)|``.  That inverse is
    bounded from the transitions themselves, for every chunk at once:
    ``(I - A)^(-1)_tj = r_t^T M_(t-1) ... M_(j+1) p_j``, so
    ``|(I - A)^(-1)_tj| <= |r_t| Lambda_t |p_j|`` with ``Lambda_t`` the product
    of ``max(1, rho~)`` over the C tokens before t (1 while no transition
    expands).  With ``Z_t = 2 (|v_t| + |r_t| Lambda_t (omega_(t-1) + sigma'_t))``
    (the pseudo-values' two parts, ``omega`` the window's ``sum |k_j| |v_j|``,
    ``sigma'`` the largest state entering a window, the factor 2 for the
    computed magnitudes), ``Z' = Z + |r_t| sum_j |p_j| Z_j`` and
    ``Z'' = Z' + |r_t| Lambda_t sum_j |p_j| Z'_j`` (sums over the C - 1
    tokens before t), ``|dX_t| <= (gamma_a + gamma_s) Z''_t + gamma_(D+1) Z_t``
    and the state's share ``gamma_(C+3) (sigma'_t + 2 |p_t| Xbar_t) + |p_t| |dX_t|``;
    decays within a chunk, ``exp`` of differences of cumulative log gates,
    add ``expm1(4 gamma_(C+5) L_t) + 10 u`` (``L_t`` the window's total
    ``|log w|``), in the accumulation precision: a layer storing 16-bit
    inputs keeps its log sums in that precision, and each decayed operand's
    storage rounding is among the model's storage roundings (the
    storage format's ``u`` times ``L_t`` would leave gates near 0 unjudged).
* the output ``y_t = S_t^T q_t``:
  ``|q_t| (e_t (1 + gamma_o) + gamma_o (sigma_t + sigma'_t + e'_t + W_t))``,
  ``gamma_o = gamma_(D+C+3)`` (with the decays' error), ``W_t`` the window's
  ``sum 2 |p_j| Xbar_j (+ omega_t)``, plus gradual underflow.

Second order: the magnitudes of computed quantities are the exact ones plus
their errors, which the bound itself bounds: it is computed with a trial
error, and accepted where it does not exceed the trial (the least fixed
point of a monotone recursion lies below any post-fixed point).  Where the
transitions expand so much that ``gamma_(D+10) max_j |M_t ... M_j|`` reaches
1/2, or no trial is accepted, the bound is ``inf``: the a-priori model says
nothing there, and no verdict may come from it.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from kernelcheck._src.attention.common.bounds import underflow_term
from kernelcheck._src.attention.common.inputs import dtype_iv
from kernelcheck._src.attention.common.transition_bands import (
    Bands,
    ForwardStates,
    band_blocks,
    chained,
    lag_sum,
    state_norms,
    upward_scan,
)
from kernelcheck._src.attention.common.transitions import (
    DELTA_CHUNK,
    Transitions,
)
from kernelcheck._src.core.memo import digest, memo_active, memoized
from kernelcheck._src.core.rounding import Precision, RoundingModel, gamma, unit_roundoff
from kernelcheck._src.core.validate import as_bool, as_int
from kernelcheck.errors import InvalidArgument

__all__ = [
    "TransitionBounds",
    "Local",
    "local_terms",
    "magnitudes",
    "output_terms",
    "transition_norms",
    "transitions_bound",
    "expands",
    "bound_extra_ops",
    "family_bounds",
    "causal_iv",
    "forward_states",
]

#: The computed pseudo-values' parts may exceed the exact ones by this fraction (checked).
_SLACK = 0.25

#: How many times a trial error is doubled before the bound gives up (``inf``).
_TRIALS = 4


class TransitionBounds(NamedTuple):
    """The normwise bounds of one evaluation of the model.

    Attributes
    ----------
    out : numpy.ndarray, shape (..., n, d_v)
        Bound on every output entry.
    state : numpy.ndarray, shape (..., n, d_v)
        ``e_t``: bound on the 2-norm of the error of every column of ``S_t``.
    growth : numpy.ndarray, shape (..., n)
        ``max_j |M_t ... M_(j+1)|_2`` bounded (``>= 1``): how far an error can grow.
    """

    out: np.ndarray
    state: np.ndarray
    growth: np.ndarray


class _Magnitudes(NamedTuple):
    """Per-token norms of the canonical arrays, in float64, rounded upward."""

    q: np.ndarray  # (..., n) |q_t|
    k: np.ndarray  # |k_t|
    r: np.ndarray  # |r_t|
    p: np.ndarray  # |p_t|
    v: np.ndarray  # (..., n, d_v) |v_t,m|
    rho: np.ndarray  # (..., n) rho~_t
    mu: np.ndarray  # (..., n) max w + |p| |r|
    wmax: np.ndarray  # (..., n) max_c w_c
    logw: np.ndarray  # (..., n) max_c |log w_c| (0 for a gate of 0: nothing crosses it)
    merged: bool  # the read is written along the keys (the delta rule)
    D: int  # the key dimension


def _norm(X: np.ndarray) -> np.ndarray:
    """``|x|_2`` of every row, rounded upward (a sum of squares: ``gamma_(D+2)`` relative)."""
    return np.sqrt(np.sum(X * X, axis=-1)) * (1.0 + gamma(X.shape[-1] + 2))


def transition_norms(T: Transitions) -> tuple[np.ndarray, np.ndarray]:
    """``rho_t >= |Diag(w_t) + p_t r_t^T|_2`` and ``max_c w_tc``, in float64 (see the module).

    The 2 x 2 reduction of the module docstring, evaluated upward: ``tau``
    plus the rounding of its terms, ``g`` from the residual ``Dp - c r``
    plus its rounding (``|Dp - c r|`` is at least the exact residual for any
    computed ``c``).  Where every decay of a token is positive the transition
    is also ``Diag(w) (I + p' r^T)`` with ``p' = p / w`` (Kimi Delta
    Attention's ``Diag(alpha) (I - beta k k^T)``), whose norm is at most
    ``max_c w_c |I + p' r^T|_2``, the reduction being exact for the second
    factor; the smaller of the two bounds is kept (for KDA with unit keys and
    beta in [0, 2] it is ``max_c alpha_c`` where the first exceeds 1).
    """
    r = T.read.astype(np.float64)
    p = (T.k if T.write is None else T.write).astype(np.float64)
    if T.log_w is None:
        w = np.ones(r.shape[:-1] + (1,))
    else:
        w = np.exp(T.log_w.astype(np.float64))
    wmax = np.max(w, axis=-1) * (1.0 + 4.0 * unit_roundoff())
    rho = _dplr_norm(r, p, w, wmax)
    if T.log_w is None:
        return rho, wmax
    positive = np.all(w > 0, axis=-1)
    ones, one = np.ones(w.shape[:-1] + (1,)), np.ones(wmax.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe = np.where(w > 0, w, 1.0)
        # Diag(w) (I + (p / w) r^T) and (I + p (r / w)^T) Diag(w): the division's rounding
        # moves the factor by at most 2 u |p / w| |r| (or |p| |r / w|) in norm
        for pl, rl in ((p / safe, r), (p, r / safe)):
            shift = 2.0 * unit_roundoff() * _norm(pl) * _norm(rl)
            alt = wmax * (_dplr_norm(rl, pl, ones, one) + shift) * (1.0 + gamma(4))
            rho = np.where(positive & np.isfinite(alt), np.minimum(rho, alt), rho)
    return rho, wmax


def _dplr_norm(r: np.ndarray, p: np.ndarray, w: np.ndarray, wmax: np.ndarray) -> np.ndarray:
    """The 2 x 2 reduction's upward bound on ``|Diag(w) + p r^T|_2`` (``wmax`` >= max w)."""
    D = r.shape[-1]
    Dp = w * p
    g = gamma(D + 4)
    rr, pp, rd = (np.sum(x * y, axis=-1) for x, y in ((r, r), (p, p), (r, Dp)))
    absr, absd = np.sqrt(rr), np.sqrt(np.sum(Dp * Dp, axis=-1))
    tau = pp * rr + 2.0 * rd + g * (pp * rr + 2.0 * absr * absd)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(rr > 0, rd / rr, 0.0)
    resid = Dp - c[..., None] * r
    slack = 2.0 * unit_roundoff() * (absd + np.abs(c) * absr)
    det = rr * (np.sqrt(np.sum(resid * resid, axis=-1)) * (1.0 + g) + slack) ** 2 * (1.0 + g)
    lam = 0.5 * (tau + np.sqrt(tau * tau + 4.0 * det)) * (1.0 + g)
    return np.sqrt(wmax * wmax + np.maximum(lam, 0.0)) * (1.0 + g)


def magnitudes(T: Transitions) -> _Magnitudes:
    """Per-token norms of the canonical arrays (float64, upward) and of the transitions."""
    rho, wmax = transition_norms(T)
    k = _norm(T.k)
    r = _norm(T.read)
    p = k if T.write is None else _norm(T.write)
    if T.log_w is None:
        logw = np.zeros(rho.shape)
    else:
        finite = np.where(np.isneginf(T.log_w), 0.0, np.abs(T.log_w))
        logw = np.max(finite, axis=-1) * (1.0 + 2.0 * unit_roundoff())
    return _Magnitudes(
        _norm(T.q), k, r, p, np.abs(T.v), np.maximum(rho, wmax), wmax + p * r, wmax, logw,
        T.write is None, T.q.shape[-1],
    )  # fmt: skip


def _band(x: np.ndarray, C: int, *, own: bool, axis: int) -> np.ndarray:
    """Upper bound of ``sum_j x_j`` over the ``C - 1`` tokens before each (and itself if ``own``).

    ``x >= 0``; a difference of prefix sums, with their rounding
    (``2 gamma_n`` of the prefix sum) added so the result is never below the
    exact window sum.
    """
    n = x.shape[axis]
    cs = np.cumsum(x, axis=axis)
    zero = np.zeros_like(np.take(cs, [0], axis=axis))
    cs0 = np.concatenate([zero, cs], axis=axis)  # cs0[t] = sum_(j < t)
    hi = np.arange(n) + (1 if own else 0)
    lo = np.maximum(np.arange(n) - C + 1, 0)
    top = np.take(cs0, hi, axis=axis)
    out = top - np.take(cs0, lo, axis=axis)
    return np.maximum(out, 0.0) + 2.0 * gamma(n + 2) * top


def _window_max(x: np.ndarray, C: int, axis: int) -> np.ndarray:
    """``max`` of ``x`` over the tokens ``t - C' .. t`` (``C' >= C``, a power of two), upward."""
    out = x.copy()
    n = x.shape[axis]
    span = 1
    while span < min(C, n):
        head = np.take(out, [0] * span, axis=axis)
        shifted = np.concatenate([head, np.take(out, range(n - span), axis=axis)], axis=axis)
        out = np.maximum(out, shifted)
        span *= 2
    return out


def expands(growth: np.ndarray, dtype, ops: int) -> np.ndarray:
    """Where the transitions amplify a unit-roundoff error to order one: no bound there.

    ``gamma_ops(dtype) growth >= 1/2``.
    """
    return gamma(ops, dtype) * growth >= 0.5


def _growth(rho: np.ndarray) -> np.ndarray:
    """``G_t = max(1, rho~_t G_(t-1))``: the largest product of transitions ending at t."""
    G = np.empty_like(rho)
    g = np.ones(rho.shape[:-1])
    with np.errstate(over="ignore"):
        for t in range(rho.shape[-1]):
            g = np.maximum(1.0, rho[..., t] * g)
            G[..., t] = g
    return G


def _propagate(rho: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``e_t = rho~_t e_(t-1) + lambda_t`` (``e_(-1) = 0``), shape (..., n, d_v), upward."""
    return upward_scan(rho, lam)


class _Terms(NamedTuple):
    """The window quantities of one evaluation that do not depend on the trial error."""

    sig: np.ndarray  # (..., n, d_v) sigma_t, upward
    sig_before: np.ndarray  # sigma_(t-1)
    sig_in: np.ndarray  # sigma'_t: largest state entering a window ending at t
    omega: np.ndarray  # sum over the window before t of |k_j| |v_j|
    omega_own: np.ndarray  # ... including t
    Lam: np.ndarray  # (..., n, 1) Lambda_t
    rho_dec: np.ndarray  # (..., n, 1) the decays' relative error


def _shift_tokens(x: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``x`` one token later along axis -2 (row t holds row t - 1), row 0 ``first``."""
    return np.concatenate([first[..., None, :], x[..., :-1, :]], axis=-2)


class _Windows(NamedTuple):
    """The window sums of one input that neither the model nor the trial error changes."""

    omega: np.ndarray  # sum over the window before t of |k_j| |v_j|
    omega_own: np.ndarray  # ... including t
    Lam: np.ndarray  # (..., n, 1) Lambda_t
    L: np.ndarray  # (..., n, 1) the window's total |log w|


def _windows_of(mags: _Magnitudes, C: int) -> _Windows:
    kv = mags.k[..., None] * mags.v
    log_growth = np.log(np.maximum(mags.rho, 1.0))[..., None]
    Lam = np.exp(_band(log_growth, C, own=False, axis=-2)) * (1.0 + gamma(8))
    L = _band(mags.logw[..., None], C, own=True, axis=-2)
    return _Windows(_band(kv, C, own=False, axis=-2), _band(kv, C, own=True, axis=-2), Lam, L)


def _terms(mags: _Magnitudes, sig, sig0, C: int, dt, win: _Windows | None = None) -> _Terms:
    """The window quantities of ``sig`` (``win``: :func:`_windows_of`, computed if None)."""
    win = _windows_of(mags, C) if win is None else win
    before = _shift_tokens(sig, sig0)
    # the log sums and exp run in the accumulation precision (module docstring)
    acc = dt.accumulate if isinstance(dt, RoundingModel) else dt
    rho_dec = np.expm1(4.0 * gamma(C + 5, acc) * win.L) + 10.0 * unit_roundoff(acc)
    if not mags.logw.any():
        rho_dec = np.zeros_like(rho_dec)
    return _Terms(
        sig, before, _window_max(before, C, -2), win.omega, win.omega_own, win.Lam, rho_dec,
    )  # fmt: skip


class Local(NamedTuple):
    """The terms of one evaluation at every token (shapes (..., n, d_v)), for reading and tests."""

    recurrence: np.ndarray  # lambda of the recurrence's step
    chunk: np.ndarray  # lambda of the chunked form's share
    dX: np.ndarray  # bound on the chunked form's pseudo-values' error
    xbar: np.ndarray  # bound on the pseudo-values
    ok: np.ndarray  # where the computed parts stay within _SLACK of the exact ones


def local_terms(mags, bands: Bands, tm: _Terms, dt, C: int, extra: int, trial) -> Local:
    """The recurrence's and the chunked form's errors at each token (module docstring).

    ``dt`` is a float dtype or a RoundingModel: its accumulation precision
    rounds every operation (the state is kept in it), its storage precision
    the chunked form's stored intermediates (``T``, ``U`` and ``W``, the
    pseudo-values), ``storage_ops`` times each.  ``trial`` is the trial
    state error (the magnitudes of computed states are the exact ones plus it).
    """
    acc, u_s = _split(dt)
    Dx, x = mags.D + int(extra), int(extra)  # every rounding count grows by ``extra``
    e_before = _shift_tokens(trial, np.zeros(trial.shape[:-2] + trial.shape[-1:]))
    e_in = _window_max(e_before, C, -2)
    r, p, k = (a[..., None] for a in (mags.r, mags.p, mags.k))
    dec = tm.rho_dec
    g_A = chained(gamma(Dx + 3, acc), dec)
    g_C = gamma(C + x, acc)
    g_rhs = chained(gamma(3 + x, acc), dec)
    g_st = chained(gamma(C + 3 + x, acc), dec)
    own = mags.v if mags.merged else 0.0
    xbar = own + r * (tm.sig_before + e_before)
    Zx = own + r * (tm.sig_before + e_before + 2.0 * tm.Lam * (tm.sig_in + e_in))
    Z = (1.0 + _SLACK) * Zx  # the computed parts, at most _SLACK off (checked below)
    Y = g_rhs * Z + g_C * (Z + lag_sum(bands.A, Z, own=False))
    Y = Y + g_A * (1.0 + g_C) * lag_sum(bands.Abar, Z, own=False) + u_s * Z
    if not mags.merged:
        Y = Y + gamma(C + Dx + 3, acc) * r * tm.omega
    dX = Y + lag_sum(bands.Linv, Y, own=False) + (gamma(Dx + 1, acc) + u_s) * Z
    lam_ch = g_st * (tm.sig_in + e_in + (1.0 + _SLACK) * p * xbar) + p * dX
    if not mags.merged:
        lam_ch = lam_ch + g_st * k * mags.v
    g_rec = gamma(Dx + 10, acc)
    lam_rec = g_rec * (mags.mu[..., None] * (tm.sig_before + e_before) + k * mags.v)
    return Local(lam_rec, lam_ch, dX, xbar, dX <= _SLACK * Zx)


def output_terms(mags, bands: Bands, tm: _Terms, dt, C: int, extra: int, e, trial, local):
    """The outputs' bound from the state's ``e`` and the window's products (module docstring).

    ``trial`` bounds the errors of the states entering a window (as in
    :func:`local_terms`), ``local`` the pseudo-values.
    """
    acc, u_s = _split(dt)
    e_in = _window_max(_shift_tokens(trial, np.zeros(e.shape[:-2] + e.shape[-1:])), C, -2)
    q = mags.q[..., None]
    g_o = chained(gamma(mags.D + int(extra) + C + 3, acc), tm.rho_dec) + u_s
    W = lag_sum(bands.Aq, (1.0 + _SLACK) * local.xbar, own=True)
    if not mags.merged:
        W = W + q * tm.omega_own
    return q * e * (1.0 + g_o) + g_o * (q * (tm.sig + tm.sig_in + e_in) + W)


def _split(dt):
    """The accumulation model and the storage roundings' ``storage_ops u_s`` of ``dt``."""
    if isinstance(dt, RoundingModel):
        acc = dataclasses.replace(dt, storage_ops=0)
        return acc, gamma(dt.storage_ops, dt.storage) if dt.storage_ops else 0.0
    return dt, 0.0


def _solve(prep, C, dt, extra, sig_fixed=None):
    """The bound's fixed point (module docstring): out, e, and where it is certified.

    ``sig_fixed`` None: the float64 reference's own bound, whose exact state
    norms are ``sig_hat + e`` (the trial); else the layer's, with the exact
    norms bounded by ``sig_fixed``.  The outputs' bound is formed once, from
    the last trial.
    """
    mags, bands = prep.mags, prep.bands
    trial, nxt = None, np.zeros_like(prep.sig_hat)
    tm = None
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(_TRIALS):
            trial = nxt
            if tm is None or sig_fixed is None:
                sig = prep.sig_hat + trial if sig_fixed is None else sig_fixed
                tm = _terms(mags, sig, prep.sig0, C, dt, prep.windows)
            local = local_terms(mags, bands, tm, dt, C, extra, trial)
            e = _propagate(mags.rho, np.maximum(local.recurrence, local.chunk))
            good = (e <= trial) & local.ok
            if good.all():
                break
            nxt = 2.0 * e
        else:  # certified up to the first token where neither the trial nor the magnitudes held
            good = ~np.logical_or.accumulate(~good, axis=-2)
        out = output_terms(mags, bands, tm, dt, C, extra, e, trial, local)
    return out, e, good


def transitions_bound(
    T: Transitions, S0: np.ndarray, dtype, *, extra_ops: int = 0, chunk_size: int = 64
) -> tuple[TransitionBounds, TransitionBounds]:
    """The normwise bounds (module docstring) in float64 and in ``dtype``: (float64, dtype).

    ``T`` and ``S0`` (the handed-over state, taken as exact) are the
    canonical arrays of the inputs the forms received; ``dtype`` a float
    dtype or a :class:`~kernelcheck._src.core.rounding.RoundingModel`;
    ``extra_ops`` roundings added to every count (the layer's own input casts,
    an in-layer normalisation); ``chunk_size`` the longest chunk a chunked
    computation uses (every chunk of at most that many tokens, starting
    anywhere, is covered).  Both bounds are ``inf`` from the first token on
    where no bound is certified, or where the transitions expand too far.
    """

    def f64(x):
        return None if x is None else np.asarray(x, dtype=np.float64)

    T = Transitions(f64(T.q), f64(T.k), f64(T.v), f64(T.read), f64(T.write), f64(T.log_w))
    S0 = np.asarray(S0, dtype=np.float64)
    # an intermediate beyond the float range is an inf or a NaN, mapped to ``inf`` below
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _bounds(T, S0, dtype, extra_ops, chunk_size)


class _Prepared(NamedTuple):
    """What every model's bound of one input shares: magnitudes, exact state norms, bands."""

    mags: _Magnitudes
    sig_hat: np.ndarray
    sig0: np.ndarray
    growth: np.ndarray
    finite: np.ndarray
    bands: Bands  # as the lag sums' blocks (:func:`lag_blocks`)
    windows: _Windows


def exact_norms(T: Transitions, S0: np.ndarray, key: bytes | None = None) -> np.ndarray:
    """The 2-norm of every column of every state ``S_t``, by the float64 loop (memoized).

    The error model's magnitudes and the largest intermediates both read
    them; inside a :func:`~kernelcheck._src.core.memo.memo_scope` the loop
    runs once per input.  ``key``: ``digest(*T, S0)`` where the caller has it.
    """
    return forward_states(T, S0, key).norms


def forward_states(T: Transitions, S0: np.ndarray, key: bytes | None = None) -> ForwardStates:
    """:func:`state_norms` of the inputs, once per input in a memo scope (see :func:`exact_norms`).

    The reverse pass of the gradients starts each block from these
    checkpoints: within a verification one float64 loop serves both.
    """
    if key is None and not memo_active():
        return state_norms(T, S0)
    key = digest(*T, S0) if key is None else key
    return memoized(("forward_states", key), lambda: state_norms(T, S0))


def _prepare(T: Transitions, S0: np.ndarray, chunk_size: int, key: bytes) -> _Prepared:
    mags = magnitudes(T)
    sig_hat = exact_norms(T, S0, key)
    sig_hat = np.where(np.isfinite(sig_hat), sig_hat, np.inf) * (1.0 + gamma(mags.D + 2))
    sig0 = np.sqrt(np.sum(S0 * S0, axis=-2)) * (1.0 + gamma(mags.D + 2))
    sig0 = np.broadcast_to(sig0, sig_hat.shape[:-2] + sig_hat.shape[-1:])
    growth = _growth(mags.rho)
    # a magnitude beyond the float range leaves no bound from its token on
    finite = np.isfinite(growth)
    for x in (mags.q, mags.k, mags.r, mags.p, mags.mu, mags.logw):
        finite &= np.isfinite(x)
    finite &= np.isfinite(mags.v).all(axis=-1)
    C = min(chunk_size, T.q.shape[-2])
    # the lag sums' blocks, formed once for every evaluation
    return _Prepared(mags, sig_hat, sig0, growth, finite, band_blocks(T, mags, C),
                     _windows_of(mags, C))  # fmt: skip


def _model_bound(prep: _Prepared, dt, extra_ops: int, chunk_size: int, e64) -> TransitionBounds:
    """One model's bound; ``e64`` None: the float64 reference's own, else the layer's."""
    mags = prep.mags
    sig_fixed = None if e64 is None else prep.sig_hat + e64
    out, e, good = _solve(prep, chunk_size, dt, extra_ops, sig_fixed)
    out = out + underflow_term(
        mags.D * (chunk_size + 8), dt, mags.q, mags.k + mags.p, mags.v, mags.r
    )
    bad = ~good | expands(prep.growth, dt, mags.D + 10 + extra_ops)[..., None]
    bad |= ~(np.isfinite(out) & np.isfinite(e) & prep.finite[..., None])
    bad = np.logical_or.accumulate(bad, axis=-2)
    return TransitionBounds(np.where(bad, np.inf, out), np.where(bad, np.inf, e), prep.growth)


def _bounds(T: Transitions, S0: np.ndarray, dtype, extra_ops: int, chunk_size: int):
    """:func:`transitions_bound` on float64 arrays (under its ``np.errstate``).

    Inside a :func:`~kernelcheck._src.core.memo.memo_scope` (a verification)
    the shared parts and each model's bound are computed once per input: the
    output's bound in float64, the layer's model and the final state's bound
    of one case all read them.
    """
    inputs = digest(*T, S0)
    key = ("transitions_bound", inputs, chunk_size)
    prep = memoized(key + ("prepared",), lambda: _prepare(T, S0, chunk_size, inputs))
    f64 = np.dtype(np.float64)

    def model(dt, e64):
        label = (repr(dt), extra_ops, e64 is None)
        return memoized(key + label, lambda: _model_bound(prep, dt, extra_ops, chunk_size, e64))

    b64 = model(f64, None)
    bdt = b64 if isinstance(dtype, np.dtype) and dtype == f64 else model(dtype, b64.state)
    # memoized arrays are shared: the caller gets its own
    return tuple(TransitionBounds(*(x.copy() for x in b)) for b in (b64, bdt))


def bound_extra_ops(x, extra_ops, qk_l2norm, scale) -> int:
    """Roundings to add to every count for a form's own input handling (see the families' bounds).

    ``extra_ops`` (at least 0) plus ``2 (D + 4)`` for an in-layer L2
    normalisation (``x / sqrt(|x|^2 + eps)``: a sum of squares, the ``eps``,
    a square root and a division, ``D + 4`` roundings per entry, on keys met
    at most twice in every term) and one for a query scale other than 1.
    """
    extra = as_int(extra_ops, "extra_ops", minimum=0)
    if as_bool(qk_l2norm, "qk_l2norm"):
        extra += 2 * (x.q.shape[-1] + 4)
    return extra + (0 if float(scale) == 1.0 else 1)


def causal_iv(causal) -> None:
    """The delta-rule families are causal only: ``causal=False`` is refused."""
    if not as_bool(causal, "causal"):
        raise InvalidArgument("`causal` must be True: a recurrence orders the tokens (C22, C23)")


def family_bounds(x, T: Transitions, dtype, extra_ops, qk_l2norm, scale, chunk_size):
    """A family's bounds from its validated inputs ``x`` and transitions: (float64, dtype).

    ``dtype`` None is the inputs' own precision, else a float dtype, a
    :class:`~kernelcheck._src.core.rounding.Precision` or a RoundingModel; ``chunk_size`` None the
    default chunk (see :func:`transitions_bound`).
    """
    extra = bound_extra_ops(x, extra_ops, qk_l2norm, scale)
    dt = dtype if isinstance(dtype, Precision) else dtype_iv(dtype, x.dtype)
    C = DELTA_CHUNK if chunk_size is None else as_int(chunk_size, "chunk_size", minimum=1)
    return transitions_bound(T, x.S0, dt, extra_ops=extra, chunk_size=C)
