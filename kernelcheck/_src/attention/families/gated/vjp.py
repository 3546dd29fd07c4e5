"""The reference backward pass of gated linear attention and its error bound (claim C20).

Along a cotangent ``G`` the gradients of ``<G, y>`` with respect to the
features, the values and the gates, the latter as ``d log g``
(flash-linear-attention's convention: its layers take ``log g``; a layer
taking ``g`` has ``dL/dg = d log g / g``).  Computed in float64 by the reverse
recurrence (:func:`~kernelcheck._src.attention.common.reverse.reverse_pass`)
with the gate on every key channel: linear in n, no stored states, and the
error analysis of the forward recurrence.  The normalised output
``num / den`` is the unnormalised recurrence on ``[V, 1]`` with the cotangent
``[G / den, -(G . y) / den]``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.blocking import with_ones
from kernelcheck._src.attention.common.bounds import gated_decay_error, underflow_term
from kernelcheck._src.attention.common.inputs import (
    dtype_iv,
    features_iv,
    gates_iv,
    state_matrix_iv,
)
from kernelcheck._src.attention.common.reverse import Adjoint, reverse_pass
from kernelcheck._src.attention.common.types import State
from kernelcheck._src.attention.common.vjp import cotangent
from kernelcheck._src.attention.families.gated.forms import gated_chunked
from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.core.validate import as_bool
from kernelcheck.errors import NumericalFailure

__all__ = ["GatedVJP", "gated_vjp", "gated_vjp_error_bound", "gated_vjp_with_bounds"]


class GatedVJP(NamedTuple):
    """Gradients of ``<G, y>`` (or their bounds): features, values and ``d log g``."""

    dphi_q: np.ndarray
    dphi_k: np.ndarray
    dV: np.ndarray
    dlog_gates: np.ndarray


class _Pass(NamedTuple):
    ref: Adjoint
    mag: Adjoint
    absL: np.ndarray  # |L_i| = -sum_(l <= i) log g_l, shape (..., n, 1)
    lo: np.ndarray | None  # normalised: a lower bound on den in the coarsest model


class _Inputs(NamedTuple):
    q: np.ndarray
    k: np.ndarray
    V: np.ndarray
    gates: np.ndarray
    absL: np.ndarray  # |L_i| = -sum_(l <= i) log g_l, shape (..., n, 1)
    G: np.ndarray
    M0: np.ndarray | None
    normalize: bool
    dtype: np.dtype  # the inputs' precision (the default model)


def _vjp_iv(phi_q, phi_k, V, gates, G, normalize, initial_state) -> _Inputs:
    """Validated float64 inputs of the gated VJP (InvalidArgument naming the argument)."""
    phi_q, phi_k, V, _, _ = features_iv(phi_q, phi_k, V, True, "raise")
    normalize = as_bool(normalize, "normalize")
    g = gates_iv(gates, phi_q.shape[:-1], np.dtype(np.float64))
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, True)
    G = cotangent(G, phi_q.shape[:-1] + V.shape[-1:])
    dtype = V.dtype
    q, k, V = (np.asarray(y, dtype=np.float64) for y in (phi_q, phi_k, V))
    M0 = None if M0 is None else np.asarray(M0, dtype=np.float64)
    absL = -np.cumsum(g.log_gates, axis=-1)[..., None]
    return _Inputs(q, k, V, g.gates, absL, G, M0, normalize, dtype)


def _sweeps(x: _Inputs, rho_f: float) -> _Pass:
    """The two sweeps (signed and absolute), normalised through ``[V, 1]``.

    ``rho_f`` is the largest relative error of the forward sums over the
    models to be bounded (for the normalisers' lower bound ``lo``).
    """
    q, k, V, G, M0 = x.q, x.k, x.V, x.G, x.M0
    a = np.broadcast_to(x.gates[..., None], q.shape)  # the gate on every key channel
    aq, ak, aM0 = np.abs(q), np.abs(k), None if M0 is None else np.abs(M0)
    if not x.normalize:
        ref = reverse_pass(q, k, V, G, a, S0=M0)
        mag = reverse_pass(aq, ak, np.abs(V), np.abs(G), a, S0=aM0, magnitude=True)
        return _Pass(ref, mag, x.absL, None)
    W = with_ones(V)
    H = gated_chunked(q, k, W, x.gates, initial_state=None if M0 is None else State(M0))
    den = H[..., -1:]
    if not (den > 0).all():
        raise NumericalFailure("gated VJP: a normaliser is <= 0 (claim C12); no gradient there")
    y = H[..., :-1] / den
    Gt = np.concatenate([G / den, -np.sum(G * y, axis=-1, keepdims=True) / den], axis=-1)
    ref = reverse_pass(q, k, W, Gt, a, S0=M0)
    S0abs = None if aM0 is None else State(aM0)
    Habs = gated_chunked(aq, ak, np.abs(W), x.gates, initial_state=S0abs)
    lo = den - rho_f * Habs[..., -1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        aG = np.abs(G) / lo
        Gm = np.concatenate([aG, np.sum(aG * Habs[..., :-1], axis=-1, keepdims=True) / lo], -1)
    Gm = np.where(lo > 0, Gm, np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        mag = reverse_pass(aq, ak, np.abs(W), Gm, a, S0=aM0, magnitude=True)
    return _Pass(ref, mag, x.absL, lo)


def _forward_rel(dt, extra: int, n: int, D: int, absL) -> np.ndarray:
    """The forward sums' relative error in ``dt``: ``(1 + gamma_(3n+2D+8))(1 + rho_i) - 1``."""
    return (1.0 + gamma(3 * n + 2 * D + 8 + extra, dt)) * (
        1.0 + gated_decay_error(absL, n, dt)
    ) - 1.0


def _bounds(p: _Pass, dt, extra: int, n: int, D: int, dv: int, normalize: bool, tops) -> GatedVJP:
    """The bounds in one model from the magnitudes (see :func:`gated_vjp_error_bound`)."""
    rho = gated_decay_error(p.absL, n, dt)  # per query row, (..., n, 1)
    rho_all = float(np.max(rho, initial=0.0))
    m = dv + (1 if normalize else 0)
    kb = 3 * n + D + m + 10 + extra
    g, g2 = gamma(kb, dt), gamma(kb + n + D + 2, dt)
    fq = 1.0
    if normalize:
        rf = float(np.max(_forward_rel(dt, extra, n, D, p.absL), initial=0.0))
        fq = 1.0 + 2.0 * rf / (1.0 - rf)  # the cotangent's quotients
    g64 = gamma(kb + n + D + 2, np.float64)
    inflate = 1.0 + 2.0 * ((1.0 + g64) * (1.0 + rho_all) * fq - 1.0)
    under = underflow_term(4 * n * (D + m), dt, *tops)
    row_c = (1.0 + g) * (1.0 + rho) * fq - 1.0
    all_c = (1.0 + g) * (1.0 + rho_all) * fq - 1.0
    log_c = (1.0 + g2) * (1.0 + rho_all) * fq - 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        dq = row_c * p.mag.dq * inflate + under
        dk = all_c * p.mag.dk * inflate + under
        dV = all_c * p.mag.dw[..., :dv] * inflate + under
        assert p.mag.dla is not None
        dlg = log_c * p.mag.dla.sum(axis=-1) * inflate + under
    return GatedVJP(*(np.where(np.isnan(x), np.inf, x) for x in (dq, dk, dV, dlg)))


def _record(adj: Adjoint, dv: int) -> GatedVJP:
    assert adj.dla is not None
    return GatedVJP(adj.dq, adj.dk, adj.dw[..., :dv], adj.dla.sum(axis=-1))


def gated_vjp(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    G: Any,
    *,
    normalize: bool = False,
    initial_state: Any = None,
) -> GatedVJP:
    """The VJP of the gated forms along ``G``: features, values and ``d log g`` (claim C20).

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    gates : array_like
        ``g_t`` in (0, 1], broadcastable to (..., n).
    G : array_like
        The cotangent of the output, shape (..., n, d_v).
    normalize : bool, default False
        The normalised forms.
    initial_state : State, default None
        The handed-over state (None: zero).

    Returns
    -------
    GatedVJP
        ``(dphi_q, dphi_k, dV, dlog_gates)``, the last of the gates' shape
        broadcast to (..., n).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import gated_recurrent, gated_vjp
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.random((2, 6, 3)); V, G = rng.normal(size=(2, 6, 2))
    >>> g = rng.uniform(0.5, 1.0, size=6)
    >>> grads = gated_vjp(q, k, V, g, G)
    >>> e = rng.normal(size=6); h = 1e-6
    >>> f = lambda s: (gated_recurrent(q, k, V, g * np.exp(s * e)) * G).sum()
    >>> bool(abs((f(h) - f(-h)) / (2 * h) - (grads.dlog_gates * e).sum()) < 1e-6)
    True
    """
    x = _vjp_iv(phi_q, phi_k, V, gates, G, normalize, initial_state)
    return _record(_sweeps(x, 0.0).ref, x.V.shape[-1])


def gated_vjp_with_bounds(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    G: Any,
    *,
    normalize: bool = False,
    initial_state: Any = None,
    models=((None, 0),),
) -> tuple[GatedVJP, tuple[GatedVJP, ...]]:
    """:func:`gated_vjp` and :func:`gated_vjp_error_bound` for each ``(dtype, extra_ops)``.

    The two sweeps run once (on the inputs, on their absolute values); each
    model scales the magnitudes.

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    gates : array_like
        ``g_t`` in (0, 1], broadcastable to (..., n).
    G : array_like
        The cotangent of the output, shape (..., n, d_v).
    normalize : bool, default False
        The normalised forms.
    initial_state : State, default None
        The handed-over state (None: zero).
    models : sequence of (dtype, int), default ((None, 0),)
        ``(dtype or RoundingModel or None, extra_ops)``; None is the inputs' precision.

    Returns
    -------
    (GatedVJP, tuple of GatedVJP)
    """
    x = _vjp_iv(phi_q, phi_k, V, gates, G, normalize, initial_state)
    dts = [(dtype_iv(dt, x.dtype), int(extra)) for dt, extra in models]
    n, D, dv = x.q.shape[-2], x.q.shape[-1], x.V.shape[-1]
    rels = [_forward_rel(dt, e, n, D, x.absL) for dt, e in dts + [(np.dtype(np.float64), 0)]]
    p = _sweeps(x, max(float(np.max(r, initial=0.0)) for r in rels))
    tops = [np.abs(y) for y in (x.q, x.k, x.V, x.G)]
    bounds = tuple(_bounds(p, dt, e, n, D, dv, x.normalize, tops) for dt, e in dts)
    return _record(p.ref, dv), bounds


def gated_vjp_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    G: Any,
    *,
    normalize: bool = False,
    initial_state: Any = None,
    dtype: Any = None,
    extra_ops: int = 0,
) -> GatedVJP:
    """Entrywise bounds on the rounding of a gated backward pass (claim C20).

    Every term of a gradient is a product of features, values, the cotangent
    and decays ``prod g_l <= 1``; with ``k_b = 3 n + D + m + 10 + extra_ops``
    (``m = d_v``, or ``d_v + 1`` normalised: the forward recurrence's
    roundings, a sum over ``m`` value channels) and the decays' relative
    error ``rho_i = expm1(2 gamma_(n+5) |L_i|) + c u`` of
    :func:`~kernelcheck.attention.gated_error_bound` (read from the same
    helper, per query row for ``dphi_q``, the largest for the others):

        E_dphi_q,i = ((1 + gamma_(k_b))(1 + rho_i) f - 1) M_dq,i,
        E_dphi_k, E_dV = ((1 + gamma_(k_b))(1 + rho) f - 1) M,
        E_dlog g = ((1 + gamma_(k_b + n + D + 2))(1 + rho) f - 1) M_dlog,

    ``M`` the same gradients computed on absolute values (the log gate's two
    running sums added, its ``D`` channels summed), inflated by twice their
    own float64 error, plus ``3 (4 n (D + m)) eta`` times the inputs' maxima.
    Unnormalised ``f = 1``; normalised the cotangent ``[G / den, -(G . y) / den]``
    carries the forward quotient's ``f = 1 + 2 rho_f / (1 - rho_f)``,
    ``rho_f = (1 + gamma_(3n+2D+8))(1 + rho) - 1``, and ``M`` is formed
    with ``|G| / lo`` and ``(|G| . |y|_abs) / lo``, ``lo = den - rho_f den_abs``
    (``inf`` where ``lo <= 0``: the normaliser's sign is uncertain).

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    gates : array_like
        ``g_t`` in (0, 1], broadcastable to (..., n).
    G : array_like
        The cotangent of the output, shape (..., n, d_v).
    normalize : bool, default False
        The normalised forms.
    initial_state : State, default None
        The handed-over state (None: zero).
    dtype : dtype or RoundingModel, default None
        The precision of the computation bounded (None: the inputs').
    extra_ops : int, default 0
        Additional roundings per term (feature maps, inputs cast down).

    Returns
    -------
    GatedVJP
    """
    _, (b,) = gated_vjp_with_bounds(
        phi_q, phi_k, V, gates, G, normalize=normalize, initial_state=initial_state,
        models=((dtype, extra_ops),),
    )  # fmt: skip
    return b
