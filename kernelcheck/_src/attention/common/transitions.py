"""The engine of the delta-rule families: a transition per token, recurrent and chunked (C22, C23).

Every family of the delta rule and its kin (DeltaNet, Gated DeltaNet, Kimi
Delta Attention, the diagonal-plus-rank-one transition of RWKV-7) updates a
key-major state ``S`` (shape ``(..., D, d_v)``) by

    S_t = Diag(w_t) S_(t-1) + p_t (r_t^T S_(t-1)) + k_t v_t^T,    y_t = S_t^T q_t,

a transition ``M_t = Diag(w_t) + p_t r_t^T`` (decays ``w_t`` in [0, 1] on the
key channels, one for all channels or none; a rank-one part that writes
along ``p_t`` what it reads along ``r_t``) and a new outer product.  In the
delta rule the rank-one part writes along the key itself (``p_t = k_t``):
then ``S_t = Diag(w_t) S_(t-1) + k_t (v_t + r_t^T S_(t-1))^T`` and the chunked
form needs one set of pseudo-values.  :class:`Transitions` holds the
canonical arrays a family builds from its own inputs.

* :func:`delta_step` and :func:`dplr_step` -- one token in the order the
  shipped layers use (decay, then the error read from the decayed state;
  the rank-one read of RWKV-7 from the undecayed state);
* :func:`run_steps` -- the reference loop of a step over a sequence, with
  the column norms of every state when asked (the error model needs them);
* :func:`chunked_transitions` -- the WY (UT) representation: per chunk, the
  pseudo-values solve ``(I - A) Y = B`` with ``A`` strictly lower triangular
  (for DeltaNet ``A = -strictly-lower(Diag(beta) K K^T)``, so
  ``Y = T (V - K S0)`` with ``T = (I + strictly-lower(Diag(beta) K K^T))^(-1)
  Diag(beta)``), by forward substitution, for all chunks at once; then one
  pass over the chunks carries the state.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.blocking import swap
from kernelcheck._src.attention.common.engine import Recurrence, empty_state
from kernelcheck._src.attention.common.exact import DIGITS
from kernelcheck._src.attention.common.inputs import (
    state_matrix_iv,
    token_values_iv,
    triple_iv,
)
from kernelcheck._src.attention.common.types import State, finish_state, finish_unnormalized
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_int,
    as_real,
    describe,
    result_dtype,
)
from kernelcheck.errors import InvalidArgument

__all__ = [
    "Transitions",
    "delta_step",
    "dplr_step",
    "run_steps",
    "chunked_transitions",
    "forward_substitution",
    "FACTOR_RANGE",
    "factor_range",
    "DELTA_CHUNK",
    "L2NORM_EPS",
    "FormInputs",
    "form_inputs_iv",
    "l2_normalized",
    "per_token",
    "tokens_iv",
    "family_inputs",
    "TokenLimits",
    "transition_recurrence",
    "chunked_cost",
    "steps_cost",
    "finish_form",
    "delta_chunk_iv",
    "exact_steps",
    "Decays",
    "chunk_decays",
    "pair_decay",
]

#: The default chunk of the delta-rule families' chunked forms (flash-linear-attention's).
DELTA_CHUNK = 64

#: The ``eps`` of the in-layer L2 normalisation ``x / sqrt(|x|^2 + eps)`` of
#: flash-linear-attention's ``l2norm`` and transformers' Qwen3-Next.
L2NORM_EPS = 1e-6

#: Largest total log-decay of one chunk (over every key channel) for which the
#: float64 chunked form factors a per-channel decay ``exp(G_t - G_j)`` into
#: ``exp(G_t) exp(-G_j)`` (row scalings and one matrix product); a chunk
#: decaying further, or holding a gate of exactly 0, forms the decays pair by
#: pair.  ``e^100`` times an input of up to ``1e200`` stays finite.  Other
#: formats scale it by their exponent range (:func:`factor_range`).
FACTOR_RANGE = 100.0


def factor_range(dtype) -> float:
    """:data:`FACTOR_RANGE` scaled to ``dtype``'s exponent range (12.5 in float32).

    ``log(max) * 100 / log(max of float64)``: ``e^12.5`` times an input of
    up to ``1e25`` stays finite in float32, and ``e^-12.5`` times one of at
    least ``1e-32`` stays a normal number.
    """
    info = np.finfo(dtype)
    return FACTOR_RANGE * float(np.log(info.max) / np.log(np.finfo(np.float64).max))


class Transitions(NamedTuple):
    """The canonical arrays of a sequence of transitions (shapes ``(..., n, x)``).

    Attributes
    ----------
    q : numpy.ndarray, shape (..., n, D)
        The queries the output reads with (scaled, normalised as the layer does).
    k : numpy.ndarray, shape (..., n, D)
        The keys the values are written along.
    v : numpy.ndarray, shape (..., n, d_v)
        The values written (``beta_t v_t`` for the delta rule).
    read : numpy.ndarray, shape (..., n, D)
        ``r_t``: the rank-one part reads ``r_t^T S_(t-1)`` (the undecayed state).
    write : numpy.ndarray or None, shape (..., n, D)
        ``p_t``: where the read is written; None when it is ``k_t`` (the delta rule).
    log_w : numpy.ndarray or None, shape (..., n, D) or (..., n, 1)
        ``log w_t`` (``-inf`` for a decay of exactly 0, which resets the
        channel); width 1 is one decay for every channel; None: no decay.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    read: np.ndarray
    write: np.ndarray | None = None
    log_w: np.ndarray | None = None


def delta_step(S, q, k, v, beta, alpha=None):
    """One token of a delta rule, as the shipped layers order it: a new state and the output.

    ``S <- alpha S`` (``alpha`` one number per batch entry, shape ``batch``,
    or one per key channel, ``batch + (D,)``; None: no decay), then the error
    ``v - S^T k`` read from the decayed state, scaled by ``beta`` and written
    along ``k``: ``S <- S + k (beta (v - S^T k))^T``; ``y = S^T q``.  ``S`` is
    not modified.
    """
    if alpha is not None:
        S = S * (alpha[..., None, None] if alpha.ndim == k.ndim - 1 else alpha[..., :, None])
    err = v - (k[..., None, :] @ S)[..., 0, :]
    S = S + k[..., :, None] * (beta[..., None] * err)[..., None, :]
    return S, (q[..., None, :] @ S)[..., 0, :]


def dplr_step(S, q, k, v, a, b, w):
    """One token of the diagonal-plus-rank-one transition (RWKV-7, flash-linear-attention order).

    ``x = a^T S`` read from the undecayed state, then
    ``S <- Diag(w) S + b x^T + k v^T`` and ``y = S^T q`` (``a`` reads, ``b``
    writes: ``S_t = (Diag(w_t) + b_t a_t^T) S_(t-1) + k_t v_t^T``).  ``S`` is
    not modified.
    """
    x = (a[..., None, :] @ S)[..., 0, :]
    S = S * w[..., :, None] + b[..., :, None] * x[..., None, :] + k[..., :, None] * v[..., None, :]
    return S, (q[..., None, :] @ S)[..., 0, :]


def run_steps(step, q, k, v, tokens, S0, *, norms: bool = False):
    """The reference loop: ``step(S, q_t, k_t, v_t, *tokens_t)`` over the sequence.

    ``tokens`` are the per-token arrays after ``v`` (token axis -2 for those
    of ndim equal to ``q``'s, else -1).  Returns the outputs (``(..., n, d_v)``),
    the final state and, with ``norms``, the 2-norm of every column of every
    state ``S_t`` (``(..., n, d_v)``; the error model's magnitudes).  A state
    that leaves the float range gives ``inf`` or NaN without a warning: the
    caller checks the result (:func:`finish_form`).
    """
    n = q.shape[-2]
    S = S0
    out = np.empty(q.shape[:-1] + v.shape[-1:], dtype=S.dtype)
    col = np.empty_like(out) if norms else None
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n):
            here = [x[..., t, :] if x.ndim == q.ndim else x[..., t] for x in tokens]
            S, out[..., t, :] = step(S, q[..., t, :], k[..., t, :], v[..., t, :], *here)
            if col is not None:
                col[..., t, :] = np.sqrt(np.sum(S * S, axis=-2))
    return out, S, col


def forward_substitution(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve ``(I - A) X = B`` for ``A`` strictly lower triangular, row by row (a new array).

    ``X_t = B_t + sum_(j < t) A_tj X_j``: forward substitution (Higham,
    Algorithm 8.1), batched over every leading axis (all chunks at once).
    Rounding: the computed ``X`` solves ``(I - A + E) X = B`` with
    ``|E| <= gamma_c |I - A|`` for ``c`` rows (Higham, Theorem 8.5).
    """
    X = np.empty(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:],
                 dtype=np.result_type(A, B))  # fmt: skip
    X[...] = B
    for t in range(1, A.shape[-1]):
        X[..., t : t + 1, :] += A[..., t : t + 1, :t] @ X[..., :t, :]
    return X


class Decays(NamedTuple):
    """Per-chunk cumulative log decays, a gate of 0 counted apart (shapes (..., c, C, x))."""

    G: np.ndarray  # sum of log w over the chunk so far, gates of 0 left out
    Z: np.ndarray  # how many gates of exactly 0 so far in the chunk


def chunk_decays(log_w: np.ndarray) -> Decays:
    """Cumulative log decays along axis -2 (``-inf`` for a gate of 0, counted apart in ``Z``)."""
    zero = np.isneginf(log_w)
    G = np.cumsum(np.where(zero, 0.0, log_w), axis=-2)
    return Decays(G, np.cumsum(zero, axis=-2))


def _shift(X: np.ndarray, fill) -> np.ndarray:
    """``X`` one token later along axis -2: row t holds row t - 1, row 0 ``fill``."""
    out = np.empty_like(X)
    out[..., 0, :] = fill
    out[..., 1:, :] = X[..., :-1, :]
    return out


def pair_decay(G_a, Z_a, G_b, Z_b) -> np.ndarray:
    """``exp(G_a - G_b)``, 0 where a gate of 0 lies between (``Z_a != Z_b``)."""
    with np.errstate(over="ignore"):
        return np.where(Z_a == Z_b, np.exp(np.minimum(G_a - G_b, 0.0)), 0.0)


class _Chunked(NamedTuple):
    """The products of every chunk that do not depend on the state entering it."""

    Aq: np.ndarray  # (..., c, C, C) decayed q.p products, lower with the diagonal
    W: np.ndarray  # (..., c, C, D) (I - A)^(-1) R~: how the entering state is read
    U: np.ndarray  # (..., c, C, d_v) the pseudo-values from the chunk alone
    Qd: np.ndarray  # (..., c, C, D) queries decayed from the chunk's start
    Pd: np.ndarray  # (..., c, C, D) write vectors decayed to the chunk's end
    wtot: np.ndarray | None  # (..., c, x) the chunk's total decay
    Oextra: np.ndarray | None  # general case: the outputs of k v^T within the chunk
    Sextra: np.ndarray | None  # general case: the state's share of k v^T


def _pair_products(L, R, G, Z, shift_rows: bool, strict: bool, pair=None) -> np.ndarray:
    """``sum_c L_tc R_jc exp(G_t' - G_j)`` for ``j <= t`` (``j < t`` if strict), else 0.

    ``G_t'`` is ``G_(t-1)`` (0 at the chunk's first row) when ``shift_rows``.
    Decays on every channel are factored (``L exp(G') . R exp(-G)``, one
    product) in chunks whose total log decay stays within the arrays'
    :func:`factor_range` and that hold no gate of 0; the others form the
    decays pair by pair.  One decay for every channel comes as ``pair``, the
    chunk's pair decays ``exp(G_t - G_j)`` formed once (row t - 1 are row t's
    when ``shift_rows``).  The pairs above the band are selected away, never
    multiplied by 0: a product that overflows there (``inf * 0``) changes no
    row.  Called under the caller's ``np.errstate`` (see :func:`chunked_transitions`).
    """
    C = L.shape[-2]
    keep = np.tril(np.ones((C, C), dtype=bool), -1 if strict else 0)
    if pair is not None:
        return np.where(keep, (L @ swap(R)) * (_shift(pair, 0.0) if shift_rows else pair), 0.0)
    if G is None:
        return np.where(keep, L @ swap(R), 0.0)
    Gr = _shift(G, 0.0) if shift_rows else G
    Zr = _shift(Z, 0) if shift_rows else Z
    safe = (Z[..., -1, :].max(-1) == 0) & (-G[..., -1, :].min(-1) <= factor_range(L.dtype))
    out = np.where(keep, (L * np.exp(Gr)) @ swap(R * np.exp(-G)), 0.0)
    for idx in zip(*np.nonzero(~safe), strict=True):
        d = pair_decay(Gr[idx][:, None, :], Zr[idx][:, None, :], G[idx][None], Z[idx][None])
        out[idx] = np.where(keep, np.einsum("tc,jc,tjc->tj", L[idx], R[idx], d), 0.0)
    return out


def _prepare(T: Transitions, C: int) -> _Chunked:
    """Pad to whole chunks and form every chunk's products that do not involve the state."""
    n = T.q.shape[-2]
    pad = -n % C

    def chunks(X):
        if X is None:
            return None
        # a contiguous copy, padded with tokens that change nothing (no key, no
        # read, no value, decay 1)
        out = np.zeros(X.shape[:-2] + ((n + pad) // C, C, X.shape[-1]), X.dtype)
        out.reshape(X.shape[:-2] + (n + pad, X.shape[-1]))[..., :n, :] = X
        return out

    q, k, v, r = chunks(T.q), chunks(T.k), chunks(T.v), chunks(T.read)
    p = k if T.write is None else chunks(T.write)
    G = Z = None
    Qd, Rd, Pd, wtot = q, r, p, None
    if T.log_w is not None:
        G, Z = chunk_decays(chunks(T.log_w))
        zero = np.zeros_like(G[..., -1:, :])
        Qd = q * pair_decay(G, Z, zero, 0)
        Rd = r * pair_decay(_shift(G, 0.0), _shift(Z, 0), zero, 0)
        Pd = p * pair_decay(G[..., -1:, :], Z[..., -1:, :], G, Z)
        wtot = pair_decay(G[..., -1, :], Z[..., -1, :], 0.0, 0)
    pair = None
    if G is not None and Z is not None and G.shape[-1] == 1:
        pair = pair_decay(G, Z, swap(G), swap(Z))  # one decay for every channel: once a chunk
    Arp = _pair_products(r, p, G, Z, True, True, pair)
    Aq = _pair_products(q, p, G, Z, False, False, pair)
    Oextra = Sextra = None
    D = T.q.shape[-1]
    rhs = np.empty(v.shape[:-1] + (D + v.shape[-1],), dtype=v.dtype)
    rhs[..., :D] = Rd
    if T.write is None:
        rhs[..., D:] = v
    else:  # the values k v^T are known: their reads, outputs and state share
        Ark = _pair_products(r, k, G, Z, True, True, pair)
        rhs[..., D:] = Ark @ v
        Oextra = _pair_products(q, k, G, Z, False, False, pair) @ v
        Kd = k if G is None or Z is None else k * pair_decay(G[..., -1:, :], Z[..., -1:, :], G, Z)
        Sextra = swap(Kd) @ v
    X = forward_substitution(Arp, rhs)
    return _Chunked(Aq, X[..., :D], X[..., D:], Qd, Pd, wtot, Oextra, Sextra)


def chunked_transitions(T: Transitions, C: int, S0: np.ndarray):
    """The WY (UT) chunked form of :class:`Transitions`: outputs and final state.

    Per chunk of ``C`` tokens (the last one shorter, padded with tokens that
    change nothing) entering with state ``S``, with ``G_t`` the cumulative log
    decays from the chunk's start: the pseudo-values ``X = U + W S`` solve
    ``(I - A_rp) X = B + R~ S`` (``A_rp[t, j] = sum_c r_tc p_jc
    exp(G_(t-1),c - G_j,c)`` for ``j < t``, ``R~_t = r_t exp(G_(t-1))``,
    ``B = V`` when the read is written along the keys, else the reads of
    the chunk's own ``k v^T``), then ``O = Q~ S + A_qp X (+ the outputs of
    k v^T)`` and ``S <- Diag(exp(G_C)) S + P~^T X (+ K~^T V)``.  ``U`` and
    ``W`` of every chunk come from one forward substitution
    (:func:`forward_substitution`) before the pass over the chunks.

    Finite inputs whose products leave the float range give an ``inf`` or a
    NaN in the result, without a warning: the caller checks the result
    (:func:`finish_form`).

    Operation count: see the families' cost models (``cost.py``).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _chunked_pass(T, C, S0)


def _chunked_pass(T: Transitions, C: int, S0: np.ndarray):
    """:func:`chunked_transitions`' computation (under its ``np.errstate``)."""
    n, dv = T.q.shape[-2], T.v.shape[-1]
    ch = _prepare(T, min(C, n))
    nc = ch.Aq.shape[-3]
    out = np.empty(ch.U.shape, dtype=ch.U.dtype)
    S = np.zeros(ch.U.shape[:-3] + S0.shape[-2:], dtype=ch.U.dtype)
    S[...] = S0
    C = ch.W.shape[-2]
    WQ = np.empty(ch.W.shape[:-2] + (2 * C, ch.W.shape[-1]), dtype=ch.W.dtype)
    WQ[..., :C, :], WQ[..., C:, :] = ch.W, ch.Qd  # both read the entering state: one product
    for c in range(nc):
        Y = WQ[..., c, :, :] @ S
        X = ch.U[..., c, :, :] + Y[..., :C, :]
        o = Y[..., C:, :] + ch.Aq[..., c, :, :] @ X
        if ch.Oextra is not None:
            o += ch.Oextra[..., c, :, :]
        out[..., c, :, :] = o
        if ch.wtot is not None:
            S = S * ch.wtot[..., c, :, None]
        S = S + swap(ch.Pd[..., c, :, :]) @ X
        if ch.Sextra is not None:
            S = S + ch.Sextra[..., c, :, :]
    return out.reshape(out.shape[:-3] + (-1, dv))[..., :n, :], S


# ----- the forms' shared plumbing ------------------------------------------------


class FormInputs(NamedTuple):
    """Validated inputs of a delta-rule form: queries and keys as the transitions use them."""

    q: np.ndarray  # (..., n, D), normalised (qk_l2norm) and scaled
    k: np.ndarray  # (..., n, D), normalised (qk_l2norm)
    v: np.ndarray  # (..., n, d_v)
    S0: np.ndarray  # (..., D, d_v): the handed-over state, zeros if none
    return_state: bool
    shape: tuple[int, ...]  # batch + (n,): the shape of one value per token and head
    dtype: np.dtype  # the inputs' own precision (float32 only if all three are)


def l2_normalized(X: np.ndarray, eps: float = L2NORM_EPS) -> np.ndarray:
    """``x / sqrt(|x|^2 + eps)`` row by row: the in-layer normalisation of the shipped layers.

    A row whose ``|x|^2`` leaves the float range (there ``eps`` is far below
    its rounding) is first scaled by a power of two, exactly: ``y / |y|``
    with ``y = 2^-e x``, never ``x / inf = 0``.  Either way ``D + 2``
    roundings an entry (the sum of squares, the square root, the quotient).
    """
    with np.errstate(over="ignore"):
        ss = np.sum(X * X, axis=-1, keepdims=True)
    out = X / np.sqrt(ss + eps)
    big = np.isinf(ss[..., 0])
    if big.any():
        Y = X[big]
        Y = np.ldexp(Y, -np.frexp(np.max(np.abs(Y), axis=-1, keepdims=True))[1])
        out[big] = Y / np.sqrt(np.sum(Y * Y, axis=-1, keepdims=True))
    return out


def form_inputs_iv(
    q: Any,
    k: Any,
    v: Any,
    initial_state: Any,
    return_state: Any,
    qk_l2norm: Any,
    scale: Any,
    dtype: Any = None,
) -> FormInputs:
    """Validate a delta-rule form's inputs (finite; shapes (..., n, D), (..., n, D), (..., n, d_v)).

    With ``qk_l2norm`` the queries and keys are L2-normalised
    (:func:`l2_normalized`) before the queries are multiplied by ``scale``,
    the order of flash-linear-attention's kernels.  ``dtype`` (the error
    bounds' float64) casts the inputs before that; default their own.
    """
    q, k, v = triple_iv(q, k, v, ("q", "k", "v"), "D", True)
    own = v.dtype
    if dtype is not None:
        q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    return_state = as_bool(return_state, "return_state")
    if as_bool(qk_l2norm, "qk_l2norm"):
        q, k = l2_normalized(q), l2_normalized(k)
    scale = as_real(scale, "scale", positive=True)
    if scale != 1.0:
        q = q * q.dtype.type(scale)
    M0 = state_matrix_iv(initial_state, q, v, False, True)
    S0 = np.zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1]), v.dtype) if M0 is None else M0
    return FormInputs(q, k, v, S0, return_state, q.shape[:-1], own)


def per_token(x: FormInputs, value: Any, name: str, *, channels: bool = False, **limits):
    """A per-token input (one value per token and head, or one per key channel) validated."""
    shape = x.shape + ((x.q.shape[-1],) if channels else ())
    return token_values_iv(value, shape, x.v.dtype, name, **limits)


def tokens_iv(x: FormInputs, values, limits) -> tuple:
    """Each per-token input checked against its :class:`TokenLimits` (named by it), broadcast."""
    return tuple(
        per_token(
            x, value, lim.name, channels=lim.channels, low=lim.low, high=lim.high, what=lim.what
        )  # fmt: skip
        for value, lim in zip(values, limits, strict=True)
    )


def family_inputs(q, k, v, tokens, limits, initial_state, return_state, qk_l2norm, scale,
                  dtype=None) -> tuple:  # fmt: skip
    """A family's inputs validated: ``(FormInputs, *per-token inputs)`` (see :func:`tokens_iv`)."""
    x = form_inputs_iv(q, k, v, initial_state, return_state, qk_l2norm, scale, dtype)
    return (x,) + tokens_iv(x, tokens, limits)


def delta_chunk_iv(chunk_size: Any, name: str = "chunk_size") -> int:
    """``chunk_size`` as an int >= 1, refused under ``name`` (None: :data:`DELTA_CHUNK`)."""
    return DELTA_CHUNK if chunk_size is None else as_int(chunk_size, name, minimum=1)


def finish_form(out: np.ndarray, S: np.ndarray, x: FormInputs, form: str):
    """The output checked finite (an expanding transition can overflow), with the state if asked.

    A returned state is checked too (a last query of 0 reads nothing of it).
    NumericalFailure where either holds an ``inf`` or a NaN.
    """
    out = finish_unnormalized(out, form)
    if not x.return_state:
        return out
    return out, State(finish_state(S, form), None)


class TokenLimits(NamedTuple):
    """How one per-token input of a step is checked: its name, width and interval."""

    name: str
    channels: bool  # one value per key channel (else one per token and head)
    low: float = -np.inf
    high: float = np.inf
    what: str = ""


def transition_recurrence(raw_step, tokens: tuple[TokenLimits, ...], family: str) -> Recurrence:
    """An ``init`` / ``step`` pair around a raw step (:func:`delta_step`, :func:`dplr_step`).

    ``step(state, q, k, v, *tokens)`` checks one token (``q, k`` of shape
    ``(..., D)``, ``v`` of ``(..., d_v)`` matching the state, each per-token
    input against its :class:`TokenLimits`) and returns the new state and
    ``y = S^T q``; the input state is never modified.
    """

    def init(
        D: int, d_v: int, *, batch_shape: tuple[int, ...] = (), dtype: Any = np.float64
    ) -> State:
        return empty_state(D, d_v, batch_shape=batch_shape, dtype=dtype, normalize=False)

    def step(state: State, q: Any, k: Any, v: Any, *values: Any):
        if not isinstance(state, State):
            raise InvalidArgument(f"`state` must be a State from init(), got {describe(state)}")
        S = as_array(state.S, "state.S", min_ndim=2)
        if len(values) != len(tokens):
            raise InvalidArgument(
                f"the {family} step takes {len(tokens)} per-token input(s) after v "
                f"({', '.join(t.name for t in tokens)}), got {len(values)}"
            )
        arrays = [as_array(x, name, min_ndim=1) for x, name in ((q, "q"), (k, "k"), (v, "v"))]
        for arr, name, size in zip(
            arrays, ("q", "k", "v"), (S.shape[-2], S.shape[-2], S.shape[-1])
        ):
            if arr.shape[-1] != size:
                raise InvalidArgument(
                    f"`{name}` must have last dimension {size} (the state's), got {describe(arr)}"
                )
        try:
            batch = np.broadcast_shapes(S.shape[:-2], *(a.shape[:-1] for a in arrays))
        except ValueError:
            raise InvalidArgument(
                "the leading (batch/head) dimensions of `state`, `q`, `k` and `v` do not "
                f"broadcast: {S.shape[:-2]}, {', '.join(str(a.shape[:-1]) for a in arrays)}"
            ) from None
        dt = result_dtype(S, *arrays)
        q, k, v = (np.broadcast_to(a, batch + a.shape[-1:]).astype(dt) for a in arrays)
        checked = [
            token_values_iv(
                x, batch + ((S.shape[-2],) if t.channels else ()), dt, t.name,
                low=t.low, high=t.high, what=t.what,
            )
            for x, t in zip(values, tokens, strict=True)
        ]  # fmt: skip
        S = np.broadcast_to(S, batch + S.shape[-2:]).astype(dt)
        with np.errstate(over="ignore", invalid="ignore"):
            new, y = raw_step(S, q, k, v, *checked)
        y = finish_unnormalized(y, f"{family} step")
        return State(finish_state(new, f"{family} step"), None), y

    init.__doc__ = f"The empty state of the {family} recurrence: ``S = 0`` (no normaliser)."
    step.__doc__ = f"One token of the {family} recurrence: ``(state, q, k, v, ...) -> (state, y)``."
    return Recurrence(init, step)


# ----- operation counts ------------------------------------------------------------


def steps_cost(n: int, D: int, d_v: int, *, decay: bool, dplr: bool) -> int:
    """Flops of the reference loop over n tokens (the transitions' own; inputs checked apart).

    :func:`delta_step`: the read ``k^T S`` and the output ``S^T q`` (``2 D d_v``
    each), the outer product and its addition (``D d_v`` each), the error and
    its scaling (``d_v`` each), and the decay (``D d_v``) when there is one:
    ``6 D d_v + 2 d_v (+ D d_v)`` a token.  :func:`dplr_step`: the read, the
    output, the decay, two outer products and two additions, ``9 D d_v``.
    Independent of the tokens seen (C3, C11).
    """
    per = 9 * D * d_v if dplr else 6 * D * d_v + 2 * d_v + (D * d_v if decay else 0)
    return n * per


def chunked_cost(n: int, D: int, d_v: int, C: int, *, width: int, general: bool) -> int:
    """Flops of :func:`chunked_transitions` (decays on ``width`` channels: 0 none, 1, or D).

    With ``C' = min(C, n)``, ``k = ceil(n / C')`` chunks and ``n' = k C'``
    padded tokens: the pair products of each chunk (two in the delta rule,
    four in the general case: ``2 n' C' D + n' C'`` each, with ``n' C'`` for
    one decay on every channel (its pair decays, ``2 n' C'``, formed once)
    or ``4 n' D + k D`` for factored channel decays), the
    decayed rows (``3 n' D`` and ``6 n' w + 2 k w`` for the decays and their
    cumulative sums), the forward substitution ``k (C'^2 - 1)(D + d_v)``, and
    per chunk the state's products ``6 C' D d_v``, the output's
    ``2 C'^2 d_v`` and ``2 C' d_v + D d_v`` additions (``D d_v`` for the
    decay); the general case adds the products of ``k v^T``
    (``4 n' C' d_v + 2 n' D d_v``, ``n' (D + 2 w)``) and two additions.
    """
    c = min(C, n)
    k = -(-n // c)
    m = k * c
    pair = 2 * m * c * D + m * c
    pair += m * c if width == 1 else (4 * m * D + k * D) if width else 0
    flops = pair * (4 if general else 2) + (2 * m * c if width == 1 else 0)
    flops += k * (c * c - 1) * (D + d_v)
    flops += 6 * m * D * d_v + 2 * m * c * d_v + 2 * m * d_v + k * D * d_v
    if width:
        flops += 8 * m * width + 2 * k * width + 3 * m * D + k * D * d_v
    if general:
        flops += 4 * m * c * d_v + 2 * m * D * d_v + m * D + m * d_v + k * D * d_v
        flops += 2 * m * width
    return flops


def exact_steps(step, q, k, v, tokens, S0, *, qk_l2norm=False, scale=1.0, digits: int = DIGITS):
    """The reference loop of ``step`` in high precision: every input taken as an exact number.

    The arrays become arrays of mpmath numbers (``digits`` significant
    digits, by default :data:`~kernelcheck._src.attention.common.exact.DIGITS`),
    so :func:`run_steps` and the family's own step evaluate the defining
    recurrence with no rounding of consequence; the in-layer L2
    normalisation ``x / sqrt(|x|^2 + eps)`` and the query scale are applied
    in the same precision.  Returns the outputs and the final state as float64.
    For small inputs (tens of tokens): each number is a Python object.
    """
    import mpmath

    with mpmath.workdps(digits):
        exact = np.vectorize(mpmath.mpf, otypes=[object])
        q, k, v, S = (exact(np.asarray(x, dtype=np.float64)) for x in (q, k, v, S0))
        tokens = [exact(np.asarray(t, dtype=np.float64)) for t in tokens]
        if qk_l2norm:
            root = np.vectorize(mpmath.sqrt, otypes=[object])
            eps = mpmath.mpf(L2NORM_EPS)
            q, k = (x / root(np.sum(x * x, axis=-1, keepdims=True) + eps) for x in (q, k))
        q = q * mpmath.mpf(float(scale))
        out, S, _ = run_steps(step, q, k, v, tokens, S)
        to_float = np.vectorize(float, otypes=[np.float64])
        return to_float(out), to_float(S)
