"""Decayed and gated linear attention: retention, Mamba-2 / simple-GLA style gating (claim C20).

The recurrence decays its state by a gate ``g_t`` in (0, 1] before adding
the new token:

    S_t = g_t S_{t-1} + phi(k_t) v_t^T,    z_t = g_t z_{t-1} + phi(k_t)  (normalised only),
    y_t = S_t^T phi(q_t)   (or  S_t^T phi(q_t) / z_t . phi(q_t)),

which equals causal attention with the weights
``phi(q_i) . phi(k_j) prod_{l=j+1..i} g_l`` for ``j <= i``.  A constant gate
per head is retention's decay; one gate per token and head is Mamba-2 /
simple-GLA gating; ``g = 1`` is plain linear attention (C14, C19).

* :func:`gated_recurrence` -- the recurrence as an ``init`` / ``step`` pair
  over its :class:`~kernelcheck._src.attention.common.types.State` (optax style: a
  constructor, not a flag on the plain step);
* :func:`gated_recurrent` -- the reference loop of that step over a sequence;
* :func:`gated_parallel` -- the weights formed directly, block by block of
  query rows, the decays as ``exp(L_i - L_j)`` of the cumulative log gates
  ``L_i = sum_{l <= i} log g_l`` (never a running product: a product of
  thousands of gates below 1 underflows);
* :func:`gated_chunked` -- quadratic within chunks (decays from the chunk's
  own cumulative log gates), the decayed state carried across chunks.

Gates are an array broadcastable to ``batch + (n,)``: a number (one decay
for everything), shape ``(H, 1)`` for one decay per head of a ``(B, H)``
batch, or ``(B, H, n)`` for one gate per token and head.  Every form is
causal only, batched over leading dimensions, and the recurrent and chunked
forms take and return a state for a hand-over between calls.  Error model:
:func:`~kernelcheck._src.attention.families.gated.bound.gated_error_bound`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common import blocking
from kernelcheck._src.attention.common.blocking import (
    batch_size,
    query_block_rows,
    swap,
    with_ones,
)
from kernelcheck._src.attention.common.engine import (
    Recurrence,
    chunk_size_iv,
    empty_state,
    linear_rows,
    run_recurrence,
    step_iv,
    step_raw,
)
from kernelcheck._src.attention.common.inputs import features_iv, gates_iv, state_matrix_iv
from kernelcheck._src.attention.common.types import (
    State,
    finish,
    finish_matrix,
    finish_unnormalized,
    with_state,
)
from kernelcheck._src.core.validate import (
    as_bool,
)
from kernelcheck.errors import InvalidArgument


def gated_recurrence(*, normalize: bool = False) -> Recurrence:
    """The decayed/gated recurrence as an ``init`` / ``step`` pair (claim C20).

    ``step(state, phi_q, phi_k, v, g)`` computes ``S_t = g S_{t-1} + phi_k v^T``
    (and ``z_t = g z_{t-1} + phi_k`` when normalised) and returns the new
    state with ``y_t = S_t^T phi_q`` (divided by ``z_t . phi_q`` when
    normalised).  ``g`` is a number or an array broadcastable to the batch
    dimensions, in (0, 1].  Pure: the input state is never modified.

    Parameters
    ----------
    normalize : bool, default False
        Divide by the normaliser (the state carries ``z``); unnormalised by
        default, as retention and gated layers are.

    Returns
    -------
    Recurrence

    Notes
    -----
    Operation count per token: ``5 D (d_v + 1) + d_v`` normalised (the decay
    of the state adds ``D (d_v + 1)`` multiplications to the plain step's
    ``4 D (d_v + 1) + d_v``), independent of the tokens seen.

    Examples
    --------
    >>> from kernelcheck.attention import gated_recurrence
    >>> rec = gated_recurrence()
    >>> s = rec.init(1, 1)
    >>> s, y = rec.step(s, [1.0], [1.0], [2.0], 0.5)
    >>> s, y = rec.step(s, [1.0], [1.0], [2.0], 0.5)
    >>> y.tolist()          # 0.5 * 2 + 2
    [3.0]
    """
    normalize = as_bool(normalize, "normalize")

    def init(
        D: int, d_v: int, *, batch_shape: tuple[int, ...] = (), dtype: Any = np.float64
    ) -> State:
        return empty_state(D, d_v, batch_shape=batch_shape, dtype=dtype, normalize=normalize)

    def step(state: State, phi_q: Any, phi_k: Any, v: Any, g: Any, *, on_bad_normalizer="raise"):
        state, phi_q, phi_k, v, action = step_iv(state, phi_q, phi_k, v, on_bad_normalizer)
        if normalize and state.z is None:
            raise InvalidArgument(
                "`state.z` is None, but this recurrence is normalised; make the state with "
                "its own init()"
            )
        if not normalize:
            state = State(state.S, None)
        lead = np.broadcast_shapes(state.S.shape[:-2], phi_q.shape[:-1])
        gate = gates_iv(g, lead, phi_q.dtype, "g").gates
        with np.errstate(over="ignore", invalid="ignore"):
            new, num, den = step_raw(state, phi_q, phi_k, v, gate)
        if den is None:
            return new, finish_unnormalized(num, "gated step")
        return new, finish(num, den, action, "gated step")

    init.__doc__ = "The empty state of the gated recurrence: ``S = 0`` (and ``z = 0``)."
    step.__doc__ = "One token of the gated recurrence: decay by ``g``, add, read out."
    return Recurrence(init, step)


def _gated_inputs(phi_q, phi_k, V, gates, normalize, action):
    # finite=False: every form checks its result, which every NaN or Inf of
    # phi_q, phi_k or V reaches, and then names the input (see linear_rows);
    # the gates (n numbers) are checked here
    phi_q, phi_k, V, _, action = features_iv(phi_q, phi_k, V, True, action, finite=False)
    normalize = as_bool(normalize, "normalize")
    g = gates_iv(gates, phi_q.shape[:-1], V.dtype)
    return phi_q, phi_k, V, g, normalize, action


def gated_recurrent(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    *,
    normalize: bool = False,
    initial_state: State | None = None,
    return_state: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Gated linear attention by running :func:`gated_recurrence`'s step over the sequence (C20).

    The reference recurrence, a Python loop over tokens.

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    gates : array_like, broadcastable to (..., n)
        ``g_t`` in (0, 1] (see the module docstring for the shapes).
    normalize : bool, default False
        Divide by the normaliser, or not (as retention and gated layers).
    initial_state : State, default None
        The (decayed) state after earlier tokens, handed over (C19, C20); None: zero.
    return_state : bool, default False
        Also return the final state.
    on_bad_normalizer : {"raise", "report"}, default "raise"
        As in :func:`~kernelcheck.attention.parallel`, when normalised.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``; with ``return_state`` a pair ``(result, State)``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import gated_recurrent, gated_chunked
    >>> rng = np.random.default_rng(0)
    >>> pq, pk = rng.random((2, 9, 3))
    >>> V, g = rng.normal(size=(9, 2)), rng.uniform(0.5, 1.0, size=9)
    >>> bool(np.allclose(gated_recurrent(pq, pk, V, g), gated_chunked(pq, pk, V, g, chunk_size=4)))
    True
    """
    phi_q, phi_k, V, g, normalize, action = _gated_inputs(
        phi_q, phi_k, V, gates, normalize, on_bad_normalizer
    )
    return_state = as_bool(return_state, "return_state")
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, True)
    result, state = run_recurrence(phi_q, phi_k, V, g.gates, normalize, M0, action, "gated")
    return with_state(result, state, return_state, "gated_recurrent")


def gated_parallel(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    *,
    normalize: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Gated linear attention with the decayed weights formed directly (claim C20).

    ``y_i = sum_{j <= i} (phi(q_i) . phi(k_j)) exp(L_i - L_j) v_j`` with
    ``L_i = sum_{l <= i} log g_l`` (divided by the same sum with ``v = 1``
    when normalised).  Query rows are processed in blocks: at most
    :data:`~kernelcheck._src.attention.common.blocking.BLOCK_ELEMENTS` entries of
    the n x n decay mask exist at once, whatever n is.

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    gates : array_like, broadcastable to (..., n)
        ``g_t`` in (0, 1], as in :func:`gated_recurrent`.
    normalize : bool, default False
        Divide by the normaliser, or not (as retention and gated layers).
    on_bad_normalizer : {"raise", "report"}, default "raise"
        As in :func:`~kernelcheck.attention.parallel`, when normalised.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``.

    Notes
    -----
    Operation count per sequence: ``2 P D + 4 P + 2 P (d_v + 1) + n d_v`` for
    the ``P ~ n (n + r) / 2`` (query, key) pairs the blocks form (scores,
    decay exponent, its clamp, exp and product; weighted values), the
    quadratic reference of C20.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import gated_parallel, parallel
    >>> rng = np.random.default_rng(1)
    >>> pq, pk = rng.random((2, 6, 3))
    >>> V = rng.normal(size=(6, 2))
    >>> bool(np.allclose(gated_parallel(pq, pk, V, 1.0), parallel(pq, pk, V, causal=True,
    ...                                                           normalize=False)))
    True
    """
    phi_q, phi_k, V, g, normalize, action = _gated_inputs(
        phi_q, phi_k, V, gates, normalize, on_bad_normalizer
    )
    batch, n = phi_q.shape[:-2], phi_q.shape[-2]
    W = with_ones(V) if normalize else V
    L = np.cumsum(g.log_gates, axis=-1)  # (..., n), non-increasing
    H = np.empty(phi_q.shape[:-1] + W.shape[-1:], dtype=W.dtype)
    rows = query_block_rows(n, blocking.BLOCK_ELEMENTS // max(1, n * batch_size(batch)), True)
    with np.errstate(over="ignore", invalid="ignore"):
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            scores = phi_q[..., i0:i1, :] @ swap(phi_k[..., :i1, :])  # (..., r, i1)
            expo = L[..., i0:i1, None] - L[..., None, :i1]
            future = np.arange(i1)[None, :] > np.arange(i0, i1)[:, None]
            expo[..., future] = -np.inf  # masked: weight exactly 0
            np.minimum(expo, 0.0, out=expo)  # rounding can push L_i - L_i' above 0
            np.exp(expo, out=expo)
            # the scores of later keys are set to 0, not multiplied by 0: one may
            # overflow (a key the row never sees) and inf * 0 would be NaN in a row
            # whose value is finite; a non-finite input still reaches H through the
            # diagonal, whose decay is 1
            np.copyto(scores, 0.0, where=future)
            scores *= expo
            H[..., i0:i1, :] = scores @ W[..., :i1, :]
    inputs = ((phi_q, "phi_q"), (phi_k, "phi_k"), (V, "V"))
    return finish_matrix(H, normalize, action, "gated_parallel", inputs)


def gated_chunked(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    gates: Any,
    *,
    chunk_size: int | None = None,
    normalize: bool = False,
    initial_state: State | None = None,
    return_state: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Gated linear attention in chunks: decayed within, the decayed state carried across (C20).

    Within a chunk starting at token t0, ``lc_i = sum_{l=t0..i} log g_l``:
    the chunk's own weights decay by ``exp(lc_i - lc_j)``, the state before
    the chunk by ``exp(lc_i)``, and the state after it is
    ``exp(lc_last) S + sum_j exp(lc_last - lc_j) phi(k_j) [v_j, 1]^T``.
    In float64, unless a group of chunks decays beyond about ``e^-531``, the
    same weights come from rows scaled once per group:
    ``phi(q_i) exp(LC_i) . phi(k_j) exp(-LC_j)`` with ``LC`` the log sums from
    the group's first token, through the plain products, the state decayed
    once per group (see
    :func:`~kernelcheck._src.attention.common.blocking.causal_products`).

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    gates : array_like, broadcastable to (..., n)
        ``g_t`` in (0, 1], as in :func:`gated_recurrent`.
    chunk_size : int, default None
        Any size >= 1; ``C >= n`` is :func:`gated_parallel`'s computation in
        one block, ``C = 1`` the recurrence.  None: as in :func:`~kernelcheck.attention.chunked`.
    normalize : bool, default False
        Divide by the normaliser, or not (as retention and gated layers).
    initial_state : State, default None
        The (decayed) state after earlier tokens, as in :func:`gated_recurrent`.
    return_state : bool, default False
        Also return the final state.
    on_bad_normalizer : {"raise", "report"}, default "raise"
        As in :func:`~kernelcheck.attention.parallel`, when normalised.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``; with ``return_state`` a pair ``(result, State)``.

    Notes
    -----
    Operation count: that of :func:`~kernelcheck.attention.chunked` plus
    ``4 C^2`` per chunk for its decay mask, ``n (D + d_v + 3)`` for the key
    and query decays and the log sums, and ``D (d_v + 1)`` per chunk for the
    state's decay; scaled once per group, ``2 n D + 3 n`` and
    ``2 D (d_v + 1)`` per group instead.  The cost model counts the larger.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import gated_chunked, gated_parallel
    >>> rng = np.random.default_rng(2)
    >>> pq, pk = rng.random((2, 10, 3))
    >>> V, g = rng.normal(size=(10, 2)), np.full(10, 0.9)
    >>> bool(np.allclose(gated_chunked(pq, pk, V, g, chunk_size=3), gated_parallel(pq, pk, V, g)))
    True
    """
    phi_q, phi_k, V, g, normalize, action = _gated_inputs(
        phi_q, phi_k, V, gates, normalize, on_bad_normalizer
    )
    C = chunk_size_iv(chunk_size, phi_q.shape[-1])
    return_state = as_bool(return_state, "return_state")
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, True)
    result, M = linear_rows(
        phi_q, phi_k, V, normalize, action, "gated_chunked", chunk=C, M0=M0, log_gates=g.log_gates
    )
    return with_state(result, State.from_matrix(M, normalize), return_state, "gated_chunked")
