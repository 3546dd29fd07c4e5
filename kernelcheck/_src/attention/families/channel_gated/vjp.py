"""The reference backward pass of per-channel gated attention and its error bound (claim C21).

Along a cotangent ``G`` the gradients of ``<G, y>`` with respect to the
features, the values, the gates on either side (as ``d log a``,
``d log b``: flash-linear-attention hands gates over as logarithms) and the
bonus ``u``, computed in float64 by the reverse recurrence
(:func:`~kernelcheck._src.attention.common.reverse.reverse_pass`: linear in
n, no stored states).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.bounds import underflow_term
from kernelcheck._src.attention.common.inputs import dtype_iv, state_matrix_iv
from kernelcheck._src.attention.common.reverse import Adjoint, reverse_pass
from kernelcheck._src.attention.common.vjp import cotangent
from kernelcheck._src.attention.families.channel_gated.bound import decay_errors
from kernelcheck._src.attention.families.channel_gated.decays import (
    ChannelInputs,
    channel_inputs_iv,
)
from kernelcheck._src.core.rounding import gamma

__all__ = [
    "ChannelVJP",
    "channel_gated_vjp",
    "channel_gated_vjp_error_bound",
    "channel_gated_vjp_with_bounds",
    "adjoint_bounds",
]


class ChannelVJP(NamedTuple):
    """Gradients of ``<G, y>`` (or their bounds); None for an input the call did not have."""

    dphi_q: np.ndarray
    dphi_k: np.ndarray
    dV: np.ndarray
    dlog_key_gates: np.ndarray | None
    dlog_value_gates: np.ndarray | None
    dbonus: np.ndarray | None


def _f64(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def _prepared(x: ChannelInputs, G, initial_state):
    """Float64 inputs of the two sweeps: signed, and absolute values for the magnitudes."""
    M0 = state_matrix_iv(initial_state, x.q, x.V, False, True)
    G = cotangent(G, x.q.shape[:-1] + x.V.shape[-1:])
    signed = (_f64(x.q), _f64(x.k), _f64(x.V), G, _f64(x.a), _f64(x.b), _f64(x.u), _f64(M0))
    absolute = tuple(None if y is None else np.abs(y) for y in signed)
    gates = (signed[4], signed[5])  # gates are non-negative already
    return signed, absolute[:4] + gates + absolute[6:]


def _record(adj: Adjoint) -> ChannelVJP:
    return ChannelVJP(adj.dq, adj.dk, adj.dw, adj.dla, adj.dlb, adj.du)


def adjoint_bounds(mag: Adjoint, ra, rb, dt, extra_ops: int, n: int, D: int, m: int, tops):
    """Entrywise bounds from the magnitudes of the two sweeps, in the model ``dt``.

    Each term of ``dq``, ``dk``, ``dw`` passes through at most
    ``k_b = 3 n + D + m + 10`` roundings (the forward recurrence's count,
    with a sum over the ``m`` value channels for ``dq`` and ``dk``) and
    carries the decays' ``rho`` of the forward bound: per query row for
    ``dq`` (``ra``, ``rb`` of shape (..., n, 1)), the largest for the
    others, whose terms reach every later query.  The log gates' gradients
    take ``n + 2`` more (the product ``q o dq``, the difference, the
    reverse running sum) and the bonus's ``n`` more.  The magnitudes, float64
    sums of non-negative terms, are inflated by twice their own relative
    error; underflow adds ``3 (4 n (D + m)) eta`` times the inputs' maxima.
    """
    kb = 3 * n + D + m + 10 + extra_ops
    g, g2 = gamma(kb, dt), gamma(kb + n + 2, dt)
    fa, fb = 1.0 + ra, 1.0 + rb
    fa_all = 1.0 + float(np.max(ra))
    fb_all = 1.0 + float(np.max(rb))
    # the float64 magnitudes' own relative error (non-negative sums), twice
    g64 = gamma(kb + n + 2, np.float64)
    inflate = 1.0 + 2.0 * ((1.0 + g64) * fa_all * fb_all - 1.0)
    under = underflow_term(4 * n * (D + m), dt, *tops)

    def rows(M, c):
        return None if M is None else (c * M) * inflate + under

    row_c = (1.0 + g) * fa * np.max(fb, axis=-1, keepdims=True) - 1.0
    all_c = (1.0 + g) * fa_all * fb_all - 1.0
    log_c = (1.0 + g2) * fa_all * fb_all - 1.0
    return (
        rows(mag.dq, row_c),
        rows(mag.dk, all_c),
        rows(mag.dw, all_c),
        rows(mag.dla, log_c),
        rows(mag.dlb, log_c),
        rows(mag.du, log_c),
    )


def channel_gated_vjp(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any,
    value_gates: Any,
    bonus: Any,
    G: Any,
    *,
    initial_state: Any = None,
) -> ChannelVJP:
    """The VJP of the per-channel gated forms along ``G`` (claim C21).

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like or None
        ``a_t`` in [0, 1], broadcastable to (..., n, D), or None (no key gates).
    value_gates : array_like or None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v), or None.
    bonus : array_like or None
        RWKV-6's ``u``, broadcastable to (..., D), or None.
    G : array_like
        The cotangent of the output, shape (..., n, d_v).
    initial_state : State, default None
        The handed-over state (None: zero).

    Returns
    -------
    ChannelVJP
        ``(dphi_q, dphi_k, dV, dlog_key_gates, dlog_value_gates, dbonus)``;
        the gates' gradients as derivatives by their logarithms.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import channel_gated_recurrent, channel_gated_vjp
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.random((2, 6, 3)); V, G = rng.normal(size=(2, 6, 2))
    >>> a = rng.uniform(0.5, 1.0, size=(6, 3))
    >>> grads = channel_gated_vjp(q, k, V, a, None, None, G)
    >>> E = rng.normal(size=a.shape); h = 1e-6
    >>> f = lambda s: (channel_gated_recurrent(q, k, V, a * np.exp(s * E)) * G).sum()
    >>> bool(abs((f(h) - f(-h)) / (2 * h) - (grads.dlog_key_gates * E).sum()) < 1e-6)
    True
    """
    x = channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, False)
    signed, _ = _prepared(x, G, initial_state)
    return _record(reverse_pass(*signed))


def channel_gated_vjp_with_bounds(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any,
    value_gates: Any,
    bonus: Any,
    G: Any,
    *,
    initial_state: Any = None,
    models=((None, 0),),
) -> tuple[ChannelVJP, tuple[ChannelVJP, ...]]:
    """:func:`channel_gated_vjp` and its bound for each ``(dtype, extra_ops)`` of ``models``.

    The two sweeps run once on the inputs and once on their absolute values
    (with the same gates); each model scales the magnitudes (see
    :func:`adjoint_bounds`), with the decays' ``rho`` of
    :func:`~kernelcheck.attention.channel_gated_error_bound`.

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like or None
        ``a_t`` in [0, 1], broadcastable to (..., n, D), or None (no key gates).
    value_gates : array_like or None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v), or None.
    bonus : array_like or None
        RWKV-6's ``u``, broadcastable to (..., D), or None.
    G : array_like
        The cotangent of the output, shape (..., n, d_v).
    initial_state : State, default None
        The handed-over state (None: zero).
    models : sequence of (dtype, int), default ((None, 0),)
        ``(dtype or RoundingModel or None, extra_ops)``; None is the inputs' precision.

    Returns
    -------
    (ChannelVJP, tuple of ChannelVJP)
        The gradients and one record of bounds per model.
    """
    x = channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, False)
    signed, absolute = _prepared(x, G, initial_state)
    ref = reverse_pass(*signed)
    mag = reverse_pass(*absolute, magnitude=True)
    n, D, m = x.q.shape[-2], x.q.shape[-1], x.V.shape[-1]
    tops = [y for y in absolute if y is not None]
    bounds = []
    for dtype, extra in models:
        dt = dtype_iv(dtype, x.V.dtype)
        ra, rb = decay_errors(x, dt)
        ra = np.zeros(x.q.shape[:-1] + (1,)) + ra
        rb = np.zeros(x.q.shape[:-1] + (1,)) + rb
        bounds.append(ChannelVJP(*adjoint_bounds(mag, ra, rb, dt, int(extra), n, D, m, tops)))
    return _record(ref), tuple(bounds)


def channel_gated_vjp_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any,
    value_gates: Any,
    bonus: Any,
    G: Any,
    *,
    initial_state: Any = None,
    dtype: Any = None,
    extra_ops: int = 0,
) -> ChannelVJP:
    """Entrywise bounds on the rounding of a per-channel gated backward pass (claim C21).

    With ``k_b = 3 n + D + d_v + 10 + extra_ops`` and the decays' ``rho_a``,
    ``rho_b`` of :func:`~kernelcheck.attention.channel_gated_error_bound`:

        E_dphi_q,i = ((1 + gamma_(k_b))(1 + rho_a,i)(1 + rho_b,i) - 1) M_dq,i,
        E_dphi_k, E_dV = ((1 + gamma_(k_b))(1 + rho_a)(1 + rho_b) - 1) M   (largest rho),
        E_dlog, E_dbonus = ((1 + gamma_(k_b + n + 2))(1 + rho_a)(1 + rho_b) - 1) M,

    ``M`` the same gradients of the absolute values (the log gates' two
    running sums added), plus underflow (see :func:`adjoint_bounds`).

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like or None
        ``a_t`` in [0, 1], broadcastable to (..., n, D), or None (no key gates).
    value_gates : array_like or None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v), or None.
    bonus : array_like or None
        RWKV-6's ``u``, broadcastable to (..., D), or None.
    G : array_like
        The cotangent of the output, shape (..., n, d_v).
    initial_state : State, default None
        The handed-over state (None: zero).
    dtype : dtype or RoundingModel, default None
        The precision of the computation bounded (None: the inputs').
    extra_ops : int, default 0
        Additional roundings per term (feature maps, inputs cast down).

    Returns
    -------
    ChannelVJP
        The bounds, entry by entry (None where the gradient is None).
    """
    _, (b,) = channel_gated_vjp_with_bounds(
        phi_q, phi_k, V, key_gates, value_gates, bonus, G,
        initial_state=initial_state, models=((dtype, extra_ops),),
    )  # fmt: skip
    return b
