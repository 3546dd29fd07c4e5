"""Per-channel gated linear attention: GLA, HGRN-2, RWKV-6 (claim C21).

The state decays channel by channel before the new token is added:

    S_t = Diag(a_t) S_(t-1) Diag(b_t) + phi(k_t) v_t^T,

with gates ``a_t`` in [0, 1]^D on the key channels (GLA, HGRN-2, RWKV-6's
``w``) and ``b_t`` in [0, 1]^d_v on the value channels (GLA's optional
``gv``; with ``D = 1`` and ``phi = 1``, HGRN's ``h_t = g_t h_(t-1) + x_t``).
The output reads the state after the token, ``y_t = S_t^T phi(q_t)``, or,
with RWKV-6's bonus ``u`` (one vector per head), the state before it plus
the current token through the bonus:

    y_t = S_(t-1)^T phi(q_t) + ((phi(q_t) o u) . phi(k_t)) v_t.

Both equal causal attention with per-channel weights:
``y_i = sum_(j <= i) (phi(q_i) o prod_(l=j+1..i) a_l) . phi(k_j) (v_j o prod b_l)``
(with the bonus ``j < i`` and the products to ``i - 1``, plus the bonus
term).  ``a_t = g_t 1`` is the gated recurrence of C20, ``a = b = 1`` plain
unnormalised linear attention (C19).  A gate of exactly 0 resets its channel.

* :func:`channel_gated_recurrence` -- the recurrence as an ``init`` / ``step``
  pair over its :class:`~kernelcheck._src.attention.common.types.State`;
* :func:`channel_gated_recurrent` -- the reference loop over the tokens;
* :func:`channel_gated_parallel` -- the weights formed pair by pair, channel by
  channel, from differences of cumulative log gates, in blocks of query rows;
* :func:`channel_gated_chunked` -- quadratic within chunks, the decayed state
  carried across them.

Every form is causal only and unnormalised (``normalize=True`` is refused),
batched over leading dimensions, float64 or float32; the recurrent and
chunked forms take and return a state (``S``, key-major, shape
``(..., D, d_v)``) for a hand-over between calls.  Error model:
:func:`~kernelcheck._src.attention.families.channel_gated.bound.channel_gated_error_bound`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.blocking import (
    BLOCK_ELEMENTS,
    batch_size,
    query_block_rows,
    swap,
)
from kernelcheck._src.attention.common.engine import (
    Recurrence,
    chunk_size_iv,
    empty_state,
    step_iv,
)
from kernelcheck._src.attention.common.inputs import state_matrix_iv
from kernelcheck._src.attention.common.types import State, finish_unnormalized, with_state
from kernelcheck._src.attention.families.channel_gated.decays import (
    ChannelInputs,
    ChunkDecays,
    bonus_values_iv,
    channel_inputs_iv,
    chunk_decays,
    fast_ranges,
    gate_values_iv,
    local_log_sums,
    shift_one,
)
from kernelcheck._src.core.validate import as_array, as_bool

#: Entries of one chunk group's (c x (D + d_v + c)) blocks: 2 MiB of float64, a core's cache.
GROUP_ELEMENTS = 1 << 18
#: Entries of one block of the pairwise decays (c x c x width, or rows x keys x width).
PAIR_ELEMENTS = BLOCK_ELEMENTS // 4


def channel_gated_recurrence(*, bonus: Any = None) -> Recurrence:
    """The per-channel gated recurrence as an ``init`` / ``step`` pair (claim C21).

    ``step(state, phi_q, phi_k, v, key_gate=None, value_gate=None)`` computes
    ``S_t = Diag(a_t) S_(t-1) Diag(b_t) + phi_k v^T`` and returns the new state
    with ``y_t = S_t^T phi_q``; with a ``bonus`` u, ``y_t = S_(t-1)^T phi_q +
    ((phi_q o u) . phi_k) v`` (RWKV-6).  Gates broadcast to ``batch + (D,)``
    and ``batch + (d_v,)``, in [0, 1]; None is a gate of 1.  Pure: the input
    state is never modified.

    Parameters
    ----------
    bonus : array_like, default None
        RWKV-6's ``u``, broadcastable to ``batch + (D,)``; None: the output
        reads ``S_t`` (GLA's convention).

    Returns
    -------
    Recurrence

    Notes
    -----
    Operation count per token: ``6 D d_v`` with both gates (two decays, the
    outer product, its addition, the read-out), ``3 D + 2 d_v`` more for the
    bonus; independent of the tokens seen (C3, C11).

    Examples
    --------
    >>> from kernelcheck.attention import channel_gated_recurrence
    >>> rec = channel_gated_recurrence()
    >>> s = rec.init(2, 1)
    >>> s, y = rec.step(s, [1.0, 1.0], [1.0, 1.0], [2.0], [0.5, 1.0])
    >>> s, y = rec.step(s, [1.0, 1.0], [1.0, 1.0], [2.0], [0.5, 1.0])
    >>> y.tolist()          # channel 0: 0.5 * 2 + 2; channel 1: 2 + 2
    [7.0]
    """
    u0 = None if bonus is None else as_array(bonus, "bonus", min_ndim=1)

    def init(
        D: int, d_v: int, *, batch_shape: tuple[int, ...] = (), dtype: Any = np.float64
    ) -> State:
        return empty_state(D, d_v, batch_shape=batch_shape, dtype=dtype, normalize=False)

    def step(state: State, phi_q: Any, phi_k: Any, v: Any, key_gate=None, value_gate=None):
        state, phi_q, phi_k, v, _ = step_iv(state, phi_q, phi_k, v, "raise")
        S, dt = state.S, state.S.dtype
        lead = np.broadcast_shapes(S.shape[:-2], phi_q.shape[:-1], phi_k.shape[:-1], v.shape[:-1])
        D, dv = S.shape[-2:]
        a = None if key_gate is None else gate_values_iv(key_gate, lead + (D,), dt, "key_gate")
        b = (
            None
            if value_gate is None
            else gate_values_iv(value_gate, lead + (dv,), dt, "value_gate")
        )
        u = None if u0 is None else bonus_values_iv(u0, lead + (D,), dt)
        read = phi_q[..., None, :]
        y = (read @ S)[..., 0, :] if u is not None else None
        if a is not None:
            S = a[..., :, None] * S
        if b is not None:
            S = S * b[..., None, :]
        S = S + phi_k[..., :, None] * v[..., None, :]
        if u is None:
            y = (read @ S)[..., 0, :]
        else:
            y = y + np.sum(phi_q * u * phi_k, axis=-1)[..., None] * v
        return State(S, None), finish_unnormalized(y, "channel-gated step")

    init.__doc__ = "The empty state of the per-channel gated recurrence: ``S = 0`` (no z)."
    step.__doc__ = "One token: decay S channel by channel, add phi_k v^T, read out."
    return Recurrence(init, step)


def _bonus_term(x: ChannelInputs) -> np.ndarray:
    """``((phi(q_t) o u) . phi(k_t)) v_t`` for every token (the bonus, RWKV-6)."""
    assert x.u is not None
    r = np.sum(x.q * x.u[..., None, :] * x.k, axis=-1)
    return r[..., None] * x.V


def _state_and_output(x: ChannelInputs, initial_state):
    """The running state (a copy of the handed-over one, or 0) and the output array."""
    M0 = state_matrix_iv(initial_state, x.q, x.V, False, True)
    batch, n, D, dv = x.q.shape[:-2], x.q.shape[-2], x.q.shape[-1], x.V.shape[-1]
    S = np.zeros(batch + (D, dv), dtype=x.V.dtype)
    if M0 is not None:
        S[...] = M0
    return S, np.empty(batch + (n, dv), dtype=x.V.dtype)


def _inputs(x: ChannelInputs):
    return ((x.q, "phi_q"), (x.k, "phi_k"), (x.V, "V"))


def channel_gated_recurrent(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any = None,
    value_gates: Any = None,
    bonus: Any = None,
    *,
    initial_state: State | None = None,
    return_state: bool = False,
    normalize: bool = False,
):
    """Per-channel gated linear attention by the recurrence, token by token (claim C21).

    The reference: the arithmetic of :func:`channel_gated_recurrence`'s step
    in a loop, with ``S`` updated in place (a copy of the handed-over state).

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like, default None
        ``a_t`` in [0, 1], broadcastable to (..., n, D) (its last axis D); None:
        no gates on the key channels.
    value_gates : array_like, default None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v) (its last axis d_v);
        None: no gates on the value channels.
    bonus : array_like, default None
        RWKV-6's ``u``, broadcastable to (..., D); None: the output reads ``S_t``.
    initial_state : State, default None
        ``S`` handed over from earlier tokens (its ``z`` is ignored); None: zero.
    return_state : bool, default False
        Also return the final state.
    normalize : bool, default False
        Must be False: the family is unnormalised.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v); with ``return_state`` a pair
    ``(output, State)``.

    Notes
    -----
    Operation count: ``6 n D d_v`` with both gates, plus ``n (3 D + 2 d_v)``
    with a bonus: constant per token, whatever n (C3, C11).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import channel_gated_chunked, channel_gated_recurrent
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.random((2, 9, 3))
    >>> V, a = rng.normal(size=(9, 2)), rng.uniform(0.5, 1.0, size=(9, 3))
    >>> out = channel_gated_recurrent(q, k, V, a)
    >>> bool(np.allclose(out, channel_gated_chunked(q, k, V, a, chunk_size=4)))
    True
    """
    x = channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, normalize)
    return_state = as_bool(return_state, "return_state")
    S, out = _state_and_output(x, initial_state)
    outer = np.empty_like(S)
    n = x.q.shape[-2]
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n):
            row = out[..., t, None, :]
            if x.bonus:
                np.matmul(x.q[..., t, None, :], S, out=row)
            if x.a is not None:
                S *= x.a[..., t, :, None]
            if x.b is not None:
                S *= x.b[..., t, None, :]
            np.multiply(x.k[..., t, :, None], x.V[..., t, None, :], out=outer)
            S += outer
            if not x.bonus:
                np.matmul(x.q[..., t, None, :], S, out=row)
        if x.bonus:
            out += _bonus_term(x)
    result = finish_unnormalized(out, "channel_gated_recurrent", _inputs(x))
    return with_state(result, State(S, None), return_state, "channel_gated_recurrent")


def parallel_rows(n: int, width: int, nb: int) -> int:
    """Query rows per block of the parallel form: ``rows x n x width`` within the pair budget."""
    return query_block_rows(n, PAIR_ELEMENTS // max(1, n * width * nb), True)


def _whole_logs(logs: np.ndarray | None, bonus: bool, zeros: bool):
    """``(lq, sq, lc, seg)`` over the whole sequence (one chunk), or None without gates."""
    if logs is None:
        return None
    lc, seg = local_log_sums(logs, zeros)
    lq, sq = shift_one(lc, seg) if bonus else (lc, seg)
    return lq, sq, lc, seg


def _pair_decays(lq, sq, lc, future: np.ndarray) -> np.ndarray:
    """``exp(lq_i - lc_j)`` for rows ``lq`` (..., r, w) and keys ``lc`` (..., m, w); 0 where masked.

    ``future`` (r, m) masks the pairs a row does not see, ``sq`` (the rows'
    last resets, or None) those with a zero gate between the key and the row.
    """
    E = lq[..., :, None, :] - lc[..., None, :, :]
    bad = future[..., None]
    if sq is not None:
        bad = bad | (sq[..., :, None, :] > np.arange(lc.shape[-2])[:, None])
    np.copyto(E, -np.inf, where=bad)
    np.minimum(E, 0.0, out=E)  # rounding can push a difference of one segment above 0
    return np.exp(E, out=E)


def _rows(sides, i0: int, i1: int, future: np.ndarray) -> np.ndarray:
    """The pair decays of rows ``i0:i1`` with keys ``:i1`` from whole-sequence log sums."""
    lq, sq, lc, _ = sides
    return _pair_decays(
        lq[..., i0:i1, :], None if sq is None else sq[..., i0:i1, :], lc[..., :i1, :], future
    )


def channel_gated_parallel(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any = None,
    value_gates: Any = None,
    bonus: Any = None,
    *,
    normalize: bool = False,
):
    """Per-channel gated linear attention with the weights formed pair by pair (claim C21).

    ``y_i = sum_j (sum_c q_ic k_jc exp(La_ic - La_jc)) v_j o exp(Lb_i - Lb_j)``
    over ``j <= i`` (``j < i`` and ``La``, ``Lb`` of ``i - 1`` with a bonus,
    then the bonus term), with ``L`` the cumulative log gates restarted after
    each zero gate.  Query rows go in blocks: at most
    :data:`PAIR_ELEMENTS` entries of the pairwise decays exist at once.

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like, default None
        ``a_t`` in [0, 1], broadcastable to (..., n, D) (its last axis D); None:
        no gates on the key channels.
    value_gates : array_like, default None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v) (its last axis d_v);
        None: no gates on the value channels.
    bonus : array_like, default None
        RWKV-6's ``u``, broadcastable to (..., D); None: the output reads ``S_t``.
    normalize : bool, default False
        Must be False: the family is unnormalised.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v)

    Notes
    -----
    Operation count per sequence: see
    :func:`~kernelcheck._src.attention.families.channel_gated.cost.channel_gated_parallel_cost`
    (about ``4 P D + 5 P d_v`` for the ``P ~ n (n + r) / 2`` pairs formed).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import channel_gated_parallel, channel_gated_recurrent
    >>> rng = np.random.default_rng(1)
    >>> q, k = rng.random((2, 6, 3))
    >>> V, a = rng.normal(size=(6, 2)), rng.uniform(0.0, 1.0, size=(6, 3))
    >>> a[2, 1] = 0.0                      # resets channel 1 at token 2
    >>> out = channel_gated_parallel(q, k, V, a)
    >>> bool(np.allclose(out, channel_gated_recurrent(q, k, V, a)))
    True
    """
    x = channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, normalize)
    batch, n, D, dv = x.q.shape[:-2], x.q.shape[-2], x.q.shape[-1], x.V.shape[-1]
    keys, values = _whole_logs(x.la, x.bonus, x.zeros_a), _whole_logs(x.lb, x.bonus, x.zeros_b)
    width = max(D if keys else 1, dv if values else 1)
    rows = parallel_rows(n, width, batch_size(batch))
    out = np.empty(batch + (n, dv), dtype=x.V.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            future = np.arange(i1)[None, :] >= np.arange(i0, i1)[:, None] + (0 if x.bonus else 1)
            if keys is None:
                W = x.q[..., i0:i1, :] @ swap(x.k[..., :i1, :])
            else:
                T = x.q[..., i0:i1, None, :] * x.k[..., None, :i1, :]
                np.copyto(T, 0.0, where=future[..., None])  # a product that overflows is unseen
                T *= _rows(keys, i0, i1, future)
                W = T.sum(axis=-1)
            np.copyto(W, 0.0, where=future)
            if values is None:
                out[..., i0:i1, :] = W @ x.V[..., :i1, :]
            else:
                T = W[..., None] * x.V[..., None, :i1, :]
                T *= _rows(values, i0, i1, future)
                out[..., i0:i1, :] = T.sum(axis=-2)
        if x.bonus:
            out += _bonus_term(x)
    return finish_unnormalized(out, "channel_gated_parallel", _inputs(x))


def _chunk_pairs(dec: ChunkDecays, s: slice, upper) -> np.ndarray:
    """The pair decays of the chunks ``s`` of a block, shape (..., ks, c, c, w)."""
    sq = None if dec.sq is None else dec.sq[..., s, :, :]
    return _pair_decays(dec.lq[..., s, :, :], sq, dec.lc[..., s, :, :], upper)


def _chunk_steps(lead, nk: int, c: int, w: int):
    """Slices of the chunks of a block, each within :data:`PAIR_ELEMENTS` pair decays."""
    step = max(1, PAIR_ELEMENTS // (c * c * w * batch_size(lead)))
    return [slice(s0, min(nk, s0 + step)) for s0 in range(0, nk, step)]


def _direct_weights(q, k, ka: ChunkDecays, upper) -> np.ndarray:
    """``A_ij = sum_c q_ic k_jc exp(lq_ic - lc_jc)`` of each chunk, masked, by blocks of chunks."""
    lead, (nk, c, D) = q.shape[:-3], q.shape[-3:]
    A = np.empty(lead + (nk, c, c), dtype=q.dtype)
    for s in _chunk_steps(lead, nk, c, D):
        T = q[..., s, :, None, :] * k[..., s, None, :, :]
        np.copyto(T, 0.0, where=upper[:, :, None])  # a product that overflows is unseen
        T *= _chunk_pairs(ka, s, upper)
        A[..., s, :, :] = T.sum(axis=-1)
    return A


def _direct_values(A, v, vb: ChunkDecays, upper) -> np.ndarray:
    """``Y_im = sum_j A_ij v_jm exp(lq_im - lc_jm)`` of each chunk, by blocks of chunks."""
    lead, (nk, c, dv) = v.shape[:-3], v.shape[-3:]
    Y = np.empty(lead + (nk, c, dv), dtype=v.dtype)
    for s in _chunk_steps(lead, nk, c, dv):
        T = A[..., s, :, :, None] * v[..., s, None, :, :]
        T *= _chunk_pairs(vb, s, upper)
        Y[..., s, :, :] = T.sum(axis=-2)
    return Y


def _scaled(dec: ChunkDecays | None) -> bool:
    """Whether a side's chunks take the scaled products (no reset, decays within the reach)."""
    return dec is not None and dec.growth is not None


def _group(x: ChannelInputs, t0: int, nk: int, c: int, S: np.ndarray, out: np.ndarray, reach):
    """Chunks ``t0 .. t0 + nk c`` (``nk`` chunks of ``c`` tokens): outputs, and ``S`` carried."""
    lead, dv = x.q.shape[:-2], x.V.shape[-1]
    sl = slice(t0, t0 + nk * c)

    def blocks(arr):
        return arr[..., sl, :].reshape(lead + (nk, c, arr.shape[-1]))

    q, k, v = blocks(x.q), blocks(x.k), blocks(x.V)
    ka = None if x.la is None else chunk_decays(blocks(x.la), x.bonus, reach[0], x.zeros_a)
    vb = None if x.lb is None else chunk_decays(blocks(x.lb), x.bonus, reach[1], x.zeros_b)
    upper = np.triu(np.ones((c, c), dtype=bool), 0 if x.bonus else 1)
    qs = q if ka is None else q * ka.start  # the decays from each chunk's start
    if ka is None:
        A = q @ swap(k)
    elif _scaled(ka):
        A = qs @ swap(k * ka.growth)
    else:
        A = _direct_weights(q, k, ka, upper)
    np.copyto(A, 0.0, where=upper)
    if vb is None:
        Y = A @ v
    elif _scaled(vb):
        Y = A @ (v * vb.growth)
        Y *= vb.start
    else:
        Y = _direct_values(A, v, vb, upper)
    kt = k if ka is None else k * ka.end
    vt = v if vb is None else v * vb.end
    U = swap(kt) @ vt  # each chunk's own state, decayed to its end
    states = np.empty(U.shape, dtype=U.dtype)
    for i in range(nk):
        states[..., i, :, :] = S
        if ka is not None:
            S *= ka.whole[..., i, :, None]
        if vb is not None:
            S *= vb.whole[..., i, None, :]
        S += U[..., i, :, :]
    inter = qs @ states
    if vb is not None:
        inter *= vb.start
    Y += inter
    out[..., sl, :] = Y.reshape(lead + (nk * c, dv))


def channel_gated_chunked(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any = None,
    value_gates: Any = None,
    bonus: Any = None,
    *,
    chunk_size: int | None = None,
    initial_state: State | None = None,
    return_state: bool = False,
    normalize: bool = False,
):
    """Per-channel gated linear attention in chunks: decayed within, the state carried (C21).

    Within a chunk, with ``lc`` its cumulative log gates from its first token
    (restarted after a zero gate), the weights decay by ``exp(lq_i - lc_j)``
    channel by channel, the state entering it by ``exp(lq_i)``, and the state
    leaving it is ``Diag(prod a) S Diag(prod b) + sum_j (k_j o exp(lc_last -
    lc_j)) (v_j o ...)^T``.  Within the ranges of
    :func:`~kernelcheck._src.attention.families.channel_gated.decays.fast_ranges`
    the chunk's weights are one product of rows scaled by ``exp(lq_i)`` and
    ``exp(-lc_j)`` (a GEMM); beyond it, or with a gate of 0, the decays of
    every pair and channel are exponentiated differences.  Chunks go in groups
    of about :data:`GROUP_ELEMENTS` entries; the last chunk may be shorter.

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like, default None
        ``a_t`` in [0, 1], broadcastable to (..., n, D) (its last axis D); None:
        no gates on the key channels.
    value_gates : array_like, default None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v) (its last axis d_v);
        None: no gates on the value channels.
    bonus : array_like, default None
        RWKV-6's ``u``, broadcastable to (..., D); None: the output reads ``S_t``.
    chunk_size : int, default None
        Any size >= 1 (``C >= n`` is one quadratic block, ``C = 1`` a token at
        a time); None: 32, or 64 for D > 1024.
    initial_state : State, default None
        ``S`` handed over from earlier tokens (its ``z`` is ignored); None: zero.
    return_state : bool, default False
        Also return the final state.
    normalize : bool, default False
        Must be False: the family is unnormalised.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v); with ``return_state`` a pair
    ``(output, State)``.

    Notes
    -----
    Operation count: see
    :func:`~kernelcheck._src.attention.families.channel_gated.cost.channel_gated_chunked_cost`
    (the scaled products; a chunk of direct decays costs about ``4 c^2 (D + d_v)`` more).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import channel_gated_chunked, channel_gated_recurrent
    >>> rng = np.random.default_rng(2)
    >>> q, k = rng.random((2, 10, 3))
    >>> V, a, u = rng.normal(size=(10, 2)), rng.uniform(0.8, 1, (10, 3)), rng.normal(size=3)
    >>> out = channel_gated_chunked(q, k, V, a, bonus=u, chunk_size=3)
    >>> bool(np.allclose(out, channel_gated_recurrent(q, k, V, a, bonus=u)))
    True
    """
    x = channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, normalize)
    C = chunk_size_iv(chunk_size, x.q.shape[-1])
    return_state = as_bool(return_state, "return_state")
    S, out = _state_and_output(x, initial_state)
    batch, n, D, dv = x.q.shape[:-2], x.q.shape[-2], x.q.shape[-1], x.V.shape[-1]
    c = min(C, n)
    nfull, rem = divmod(n, c)
    per = max(1, GROUP_ELEMENTS // (c * (D + dv + c) * batch_size(batch)))
    with np.errstate(over="ignore", invalid="ignore"):
        reach = fast_ranges(x.q, x.k, x.V, c) if x.a is not None or x.b is not None else (0, 0)
        for g0 in range(0, nfull, per):
            _group(x, g0 * c, min(per, nfull - g0), c, S, out, reach)
        if rem:
            _group(x, nfull * c, 1, rem, S, out, reach)
        if x.bonus:
            out += _bonus_term(x)
    result = finish_unnormalized(out, "channel_gated_chunked", _inputs(x))
    return with_state(result, State(S, None), return_state, "channel_gated_chunked")
