"""The backward pass of the transitions: the reverse recurrence and its normwise bound (C22-C24).

For ``S_t = Diag(w_t) S_(t-1) + p_t (r_t^T S_(t-1)) + k_t v_t^T`` and
``y_t = S_t^T q_t``, the gradient of ``<G, y>`` runs backwards through the
adjoint state ``H_t = dL/dS_t``:

    H_n = q_n G_n^T,    H_t = q_t G_t^T + M_(t+1)^T H_(t+1),
    M^T H = Diag(w) H + r (p^T H),

and reads every gradient off ``H_t`` and the forward states:

    dq_t = S_t G_t,   dv_t = H_t^T k_t,   dk_t = H_t v_t (the write),
    dp_t = H_t (S_(t-1)^T r_t),   dr_t = S_(t-1) (H_t^T p_t),
    dw_t = sum_m H_t[:, m] o S_(t-1)[:, m].

:func:`transition_vjp` computes them in float64, the forward states kept
only at every C-th token and recomputed a chunk at a time (memory
``O((n / C + C) D d_v)``).  The families' chain rules (``beta``, gates,
normalised keys) act on these canonical gradients
(:mod:`~kernelcheck._src.attention.common.transition_chain`).

Error model (Higham's standard model, normwise per value column as the
forward one, :mod:`~kernelcheck._src.attention.common.transition_bound`):
the adjoint is the forward recurrence run backwards with the transposed
transitions, whose norms ``rho`` are the same, so its error obeys
``e^H_t = rho_(t+1) e^H_(t+1) + gamma_c (mu_(t+1) (tau_(t+1) + e^H_(t+1)) + |q_t| |G_t|)``
(``tau`` the adjoint's column norms, ``c = D + C + 10``: a step's sums, in
any order, of at most ``D + C`` terms, so a backward pass that sums a
chunk's terms at once is covered as well as the token loop); the forward
states the backward pass reads carry the forward bound ``e^S``.  Each
gradient is a sum of products of those two; its bound is the first-order
error of each factor times the other's magnitude, plus the products'
own ``gamma_(d_v)`` or ``gamma_D``, and the product of the two errors:

    |d(dq_t)| <= sum_m |G_t,m| (e^S_t,m (1 + g) + g sigma_t,m),
    |d(dv_t,m)| <= |k_t| (e^H_t,m (1 + g) + g tau_t,m),   ...

(each a bound on a vector's 2-norm over the key channels, or entry by
entry over the value channels; see :func:`canonical_vjp_bound`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernelcheck._src.attention.common.transitions import Transitions
from kernelcheck._src.core.rounding import gamma

__all__ = ["CanonicalGrads", "transition_vjp", "canonical_vjp_bound", "Magnitudes"]


class CanonicalGrads(NamedTuple):
    """Gradients with respect to the canonical arrays (shapes of the arrays)."""

    q: np.ndarray  # (..., n, D)
    k: np.ndarray  # (..., n, D): the write key of k v^T
    v: np.ndarray  # (..., n, d_v)
    read: np.ndarray  # (..., n, D)
    write: np.ndarray  # (..., n, D): p (the keys again in the delta rule)
    w: np.ndarray  # (..., n, D): the decays (summed over channels by a family of one decay)


class Magnitudes(NamedTuple):
    """Column norms of the forward states and of the adjoint, and the reads, for the bound."""

    sigma: np.ndarray  # (..., n, d_v) |S_t[:, m]|
    sigma_before: np.ndarray  # |S_(t-1)[:, m]|
    tau: np.ndarray  # |H_t[:, m]|
    x: np.ndarray  # (..., n, d_v) |S_(t-1)^T r_t|
    y: np.ndarray  # |H_t^T p_t|


def _decays(T: Transitions) -> np.ndarray:
    """The decays ``w_t`` (width D, or 1 for one decay on every channel)."""
    if T.log_w is None:
        return np.ones(T.q.shape[:-1] + (1,))
    return np.exp(T.log_w)


def _forward_block(T, w, S, t0: int, t1: int) -> np.ndarray:
    """The states ``S_(t0-1) .. S_(t1-1)`` from ``S`` (the state before t0), stacked on axis -3."""
    p = T.k if T.write is None else T.write
    out = np.empty(S.shape[:-2] + (t1 - t0 + 1,) + S.shape[-2:])
    out[..., 0, :, :] = S
    for i, t in enumerate(range(t0, t1)):
        x = (T.read[..., t, None, :] @ S)[..., 0, :]
        S = S * w[..., t, :, None] + p[..., t, :, None] * x[..., None, :]
        S = S + T.k[..., t, :, None] * T.v[..., t, None, :]
        out[..., i + 1, :, :] = S
    return out


def transition_vjp(T: Transitions, S0: np.ndarray, G: np.ndarray, C: int = 64):
    """The canonical gradients of ``<G, y>`` and the magnitudes of the passes (module docstring).

    ``T`` in float64 (the canonical arrays of the inputs the layer received),
    ``S0`` the handed-over state (taken as exact), ``G`` the cotangent of the
    outputs.  The forward pass keeps the state at the start of every block
    of ``C`` tokens, and each block is run again from it as the adjoint
    reaches it; with the default ``C`` those checkpoints are the error
    model's forward pass (``forward_states`` of
    :mod:`~kernelcheck._src.attention.common.transition_bound`), run once per
    input in a verification.  Returns ``(CanonicalGrads, Magnitudes)``.
    """
    from kernelcheck._src.attention.common.transition_bands import STATE_BLOCK
    from kernelcheck._src.attention.common.transition_bound import forward_states

    n, D, dv = T.q.shape[-2], T.q.shape[-1], T.v.shape[-1]
    batch = np.broadcast_shapes(T.q.shape[:-2], G.shape[:-2])
    p = T.k if T.write is None else T.write
    w = _decays(T)
    kept = forward_states(T, S0).checkpoints if C == STATE_BLOCK else None
    if kept is not None and np.broadcast_shapes(batch, kept.shape[:-3]) == batch:
        # the forward pass the error model also reads (once per input in a verification)
        kept = np.broadcast_to(kept, batch + kept.shape[-3:])
        checkpoints = [kept[..., b, :, :] for b in range(kept.shape[-3])]
    else:
        checkpoints = [np.broadcast_to(S0, batch + (D, dv)).astype(np.float64)]
        for t0 in range(0, n, C):
            t1 = min(n, t0 + C)
            checkpoints.append(_forward_block(T, w, checkpoints[-1], t0, t1)[..., -1, :, :])
    grads = {name: np.zeros(batch + (n, D)) for name in ("q", "k", "read", "write", "w")}
    grads["v"] = np.zeros(batch + (n, dv))
    mags = {name: np.zeros(batch + (n, dv)) for name in Magnitudes._fields}
    H = np.zeros(batch + (D, dv))
    for b in reversed(range(len(checkpoints) - 1)):
        t0, t1 = b * C, min(n, (b + 1) * C)
        states = _forward_block(T, w, checkpoints[b], t0, t1)
        # the adjoint runs token by token; what each token's gradients read of it is kept
        Hs = np.empty(batch + (t1 - t0, D, dv))
        ys = np.empty(batch + (t1 - t0, dv))
        for t in reversed(range(t0, t1)):
            H = H + T.q[..., t, :, None] * G[..., t, None, :]
            Hs[..., t - t0, :, :] = H
            y = ys[..., t - t0, :] = (p[..., t, None, :] @ H)[..., 0, :]
            H = H * w[..., t, :, None] + T.read[..., t, :, None] * y[..., None, :]
        _chunk_grads(T, p, G, states, Hs, ys, t0, t1, grads, mags)
    if T.write is None:  # the rank-one part writes along the keys: one gradient
        grads["k"] = grads["k"] + grads["write"]
        grads["write"] = np.zeros_like(grads["write"])
    return CanonicalGrads(**grads), Magnitudes(**mags)


def _chunk_grads(T, p, G, states, Hs, ys, t0: int, t1: int, grads: dict, mags: dict) -> None:
    """Tokens ``t0 .. t1 - 1``: their gradients and magnitudes from states and adjoints, at once."""
    span = slice(t0, t1)
    before, after = states[..., :-1, :, :], states[..., 1:, :, :]
    x = (T.read[..., span, None, :] @ before)[..., 0, :]
    grads["q"][..., span, :] = (after @ G[..., span, :, None])[..., 0]
    grads["v"][..., span, :] = (T.k[..., span, None, :] @ Hs)[..., 0, :]
    grads["k"][..., span, :] = (Hs @ T.v[..., span, :, None])[..., 0]
    grads["write"][..., span, :] = (Hs @ x[..., :, None])[..., 0]
    grads["read"][..., span, :] = (before @ ys[..., :, None])[..., 0]
    grads["w"][..., span, :] = np.sum(Hs * before, axis=-1)
    for name, value in (("sigma", after), ("sigma_before", before), ("tau", Hs)):
        mags[name][..., span, :] = np.sqrt(np.sum(value * value, axis=-2))
    mags["x"][..., span, :], mags["y"][..., span, :] = np.abs(x), np.abs(ys)


def _reverse(rho: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``e_t = rho_(t+1) e_(t+1) + lambda_t`` (``e_n = lambda_n``), upward.

    :func:`~kernelcheck._src.attention.common.transition_bands.upward_scan`
    on the tokens in reverse order.
    """
    from kernelcheck._src.attention.common.transition_bands import upward_scan

    grow = np.concatenate([rho[..., 1:], np.zeros(rho.shape[:-1] + (1,))], axis=-1)
    return upward_scan(grow[..., ::-1], lam[..., ::-1, :])[..., ::-1, :]


def _adjoint_error(rho, mu, qn, G, tau, dt, c) -> np.ndarray:
    """The adjoint's error bound: a trial doubled until it holds (as the forward fixed point)."""
    shift = np.concatenate([mu[..., 1:], np.zeros(mu.shape[:-1] + (1,))], axis=-1)[..., None]
    tau_next = np.concatenate([tau[..., 1:, :], np.zeros_like(tau[..., :1, :])], axis=-2)
    trial = np.zeros_like(tau)
    g = gamma(c, dt)
    for _ in range(4):
        trial_next = np.concatenate([trial[..., 1:, :], np.zeros_like(trial[..., :1, :])], -2)
        e = _reverse(rho, g * (shift * (tau_next + trial_next) + qn[..., None] * np.abs(G)))
        if (e <= trial).all():
            return e
        trial = 2.0 * e
    return np.where(e <= trial, e, np.inf)


def canonical_vjp_bound(
    T, mags: Magnitudes, G, state_error, dt, extra: int = 0, C: int = 64, tnorms=None
):
    """Bounds on the canonical gradients' rounding in the model ``dt`` (module docstring).

    ``mags`` are the float64 passes' magnitudes (rounded upward here),
    ``state_error`` the forward states' bound ``e^S_t`` (per column) in the
    same model, ``tnorms`` the transitions' own
    :func:`~kernelcheck._src.attention.common.transition_bound.magnitudes`
    (computed if None).  Returns a :class:`CanonicalGrads` of bounds: ``v``
    entry by entry (..., n, d_v), every other field the 2-norm of its
    key-channel vector's error (..., n).
    """
    from kernelcheck._src.attention.common.transition_bound import magnitudes

    tb = magnitudes(T) if tnorms is None else tnorms
    D, dv = T.q.shape[-1], T.v.shape[-1]
    up = 1.0 + gamma(max(D, dv) + 4)
    sig, sigb, tau = (m * up for m in (mags.sigma, mags.sigma_before, mags.tau))
    x, y = mags.x * up, mags.y * up
    eS = state_error
    eSb = np.concatenate([np.zeros_like(eS[..., :1, :]), eS[..., :-1, :]], axis=-2)
    eH = _adjoint_error(tb.rho, tb.mu, tb.q, G, tau, dt, D + C + 10 + extra)
    gd, gD = gamma(dv + 2 + extra, dt), gamma(D + 2 + extra, dt)
    aG, av = np.abs(G), np.abs(T.v)
    r, p, k = (m[..., None] for m in (tb.r, tb.p, tb.k))
    Ex = r * (eSb * (1 + gD) + gD * sigb)
    Ey = p * (eH * (1 + gD) + gD * tau)
    with np.errstate(invalid="ignore", over="ignore"):
        E = CanonicalGrads(
            q=np.sum(aG * (eS * (1 + gd) + gd * sig), axis=-1),
            k=np.sum(av * (eH * (1 + gd) + gd * tau), axis=-1),
            v=k * (eH * (1 + gD) + gD * tau),
            read=np.sum((sigb + eSb) * Ey + eSb * y + gd * sigb * y, axis=-1),
            write=np.sum((tau + eH) * Ex + eH * x + gd * tau * x, axis=-1),
            w=np.sum(tau * eSb + sigb * eH + eH * eSb + gd * tau * sigb, axis=-1),
        )
    if T.write is None:  # the keys' two gradients are one
        E = E._replace(k=E.k + E.write, write=np.zeros_like(E.write))
    return CanonicalGrads(*(np.where(np.isnan(e), np.inf, e) for e in E))
