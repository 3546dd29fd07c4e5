"""The backward pass of the gated recurrences by the reverse recurrence (claims C20, C21).

For ``S_t = Diag(a_t) S_(t-1) Diag(b_t) + k_t w_t^T`` (``S_0`` handed over),
read as ``y_t = S_t^T q_t`` (or, with RWKV-6's bonus ``u``,
``y_t = S_(t-1)^T q_t + ((q_t o u) . k_t) w_t``), and a cotangent ``G``, the
gradient of ``<G, y>`` comes from two sweeps over the tokens, each costing
``O(D m)`` per token and holding one ``D x m`` matrix (never the n states):

* forward, the state ``S`` read by each query: ``dq_t = S G_t`` and the
  state part of the output ``ys_t = S^T q_t``;
* backward, the adjoint ``H_t`` of ``S_t`` (every later read of it, decayed):
  ``H_t = Diag(a_(t+1)) H_(t+1) Diag(b_(t+1)) + q_t G_t^T`` (``q_(t+1)
  G_(t+1)^T`` with the bonus), ``dk_t = H_t w_t``, ``dw_t = H_t^T k_t``;
  the handed-over state's gradient is ``Diag(a_1) H_1 Diag(b_1)`` (plus
  ``q_1 G_1^T`` with the bonus).

The gates' gradients as ``d log a`` (flash-linear-attention's convention for
gates given as logarithms): a pair ``(i, j)`` of query and key decays by
``a_l`` exactly when ``j < l <= e(i)`` (``e(i) = i``, or ``i - 1`` with the
bonus), so with ``Rq_i = q_i o dq_i`` and ``Rk_j = k_j o dk_j`` (state parts)

    d log a_l = sum_(i: e(i) >= l) Rq_i - sum_(j >= l) Rk_j,

two reverse running sums; the value side likewise with ``G_i o ys_i`` and
``w_j o dw_j``.  A gate of 0 gives ``d log a = 0`` there (no pair crosses it
with a weight).  This is the reverse recurrence rather than the quadratic
form: linear in n in time and memory, and its error analysis is that of the
forward recurrence.  The same sweeps on absolute values (``magnitude=True``:
the two running sums added, not subtracted) bound every sum of the
rounding analysis.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Adjoint", "reverse_pass"]


class Adjoint(NamedTuple):
    """The gradients of ``<G, y>``: queries, keys, values, log gates, bonus, handed-over state."""

    dq: np.ndarray  # (..., n, D)
    dk: np.ndarray  # (..., n, D)
    dw: np.ndarray  # (..., n, m)
    dla: np.ndarray | None  # (..., n, D): d log a (None without key gates)
    dlb: np.ndarray | None  # (..., n, m): d log b (None without value gates)
    du: np.ndarray | None  # (..., D): the bonus (None without one)
    dS0: np.ndarray  # (..., D, m)


def _forward(q, k, W, G, a, b, bonus: bool, S0):
    """The reads of the state: ``S G_t`` (state part of dq) and ``S^T q_t`` (of the output)."""
    batch, n, D, m = q.shape[:-2], q.shape[-2], q.shape[-1], W.shape[-1]
    S = np.zeros(batch + (D, m), dtype=q.dtype)
    if S0 is not None:
        S[...] = S0
    dq, ys = np.empty(batch + (n, D), dtype=q.dtype), np.empty(batch + (n, m), dtype=q.dtype)
    for t in range(n):
        if bonus:
            dq[..., t, :] = (S @ G[..., t, :, None])[..., 0]
            ys[..., t, :] = (q[..., t, None, :] @ S)[..., 0, :]
        if a is not None:
            S *= a[..., t, :, None]
        if b is not None:
            S *= b[..., t, None, :]
        S += k[..., t, :, None] * W[..., t, None, :]
        if not bonus:
            dq[..., t, :] = (S @ G[..., t, :, None])[..., 0]
            ys[..., t, :] = (q[..., t, None, :] @ S)[..., 0, :]
    return dq, ys


def _backward(q, k, W, G, a, b, bonus: bool):
    """The adjoints ``H_t``: ``dk_t = H_t w_t``, ``dw_t = H_t^T k_t``; and the initial state's."""
    batch, n, D, m = q.shape[:-2], q.shape[-2], q.shape[-1], W.shape[-1]
    H = np.zeros(batch + (D, m), dtype=q.dtype)
    dk, dw = np.empty(batch + (n, D), dtype=q.dtype), np.empty(batch + (n, m), dtype=q.dtype)
    for t in range(n - 1, -1, -1):
        r = t + 1 if bonus else t  # the query that reads S_t
        if r < n:
            H += q[..., r, :, None] * G[..., r, None, :]
        dk[..., t, :] = (H @ W[..., t, :, None])[..., 0]
        dw[..., t, :] = (k[..., t, None, :] @ H)[..., 0, :]
        if a is not None:
            H *= a[..., t, :, None]
        if b is not None:
            H *= b[..., t, None, :]
    if bonus:
        H += q[..., 0, :, None] * G[..., 0, None, :]
    return dk, dw, H


def _reverse_sum(X: np.ndarray) -> np.ndarray:
    """``sum_(s >= l) X_s`` along the token axis (-2)."""
    return np.flip(np.cumsum(np.flip(X, axis=-2), axis=-2), axis=-2)


def _log_gate_grad(Rq, Rk, bonus: bool, magnitude: bool) -> np.ndarray:
    """``sum_(e(i) >= l) Rq_i -+ sum_(j >= l) Rk_j`` (``+`` for the magnitudes)."""
    cq = _reverse_sum(Rq)
    if bonus:  # e(i) = i - 1 >= l  <=>  i >= l + 1
        cq = np.concatenate([cq[..., 1:, :], np.zeros_like(cq[..., :1, :])], axis=-2)
    ck = _reverse_sum(Rk)
    return cq + ck if magnitude else cq - ck


def reverse_pass(q, k, W, G, a=None, b=None, u=None, S0=None, *, magnitude=False) -> Adjoint:
    """The VJP of the gated recurrence along ``G`` (see the module docstring).

    Computed in the precision of ``q`` (every input in one floating dtype).

    Parameters
    ----------
    q, k : numpy.ndarray, shape (..., n, D)
        Queries and keys (their features).
    W : numpy.ndarray, shape (..., n, m)
        The values (``[V, 1]`` for a normalised recurrence).
    G : numpy.ndarray, shape (..., n, m)
        The cotangent of the output.
    a, b : numpy.ndarray, optional
        Gates on the key channels (..., n, D) and the value channels
        (..., n, m), in [0, 1]; default None (no gates).
    u : numpy.ndarray, optional
        The bonus (..., D); default None (the output reads ``S_t``).
    S0 : numpy.ndarray, optional
        The handed-over state (..., D, m); default None (zero).
    magnitude : bool, optional
        The sums of absolute values (inputs given as absolute values): the
        log gates' two running sums are added; default False.

    Returns
    -------
    Adjoint
    """
    bonus = u is not None
    dq, ys = _forward(q, k, W, G, a, b, bonus, S0)
    dk, dw, dS0 = _backward(q, k, W, G, a, b, bonus)
    dla = None if a is None else _log_gate_grad(q * dq, k * dk, bonus, magnitude)
    dlb = None if b is None else _log_gate_grad(G * ys, W * dw, bonus, magnitude)
    du = None
    if bonus:
        r = np.sum(W * G, axis=-1)[..., None]  # w_t . G_t
        s = np.sum(q * u[..., None, :] * k, axis=-1)[..., None]
        dq = dq + u[..., None, :] * k * r
        dk = dk + u[..., None, :] * q * r
        dw = dw + s * G
        du = np.sum(r * q * k, axis=-2)
    return Adjoint(dq, dk, dw, dla, dlb, du, dS0)
