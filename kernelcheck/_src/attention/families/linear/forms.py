"""Linear attention from feature matrices: parallel, recurrent, chunked (C10, C11, C14, C19).

``a_i = phi(q_i)^T S_i / phi(q_i) . z_i`` with the running sums
``S_i = sum_{j in J(i)} phi(k_j) v_j^T`` and ``z_i = sum_{j in J(i)} phi(k_j)``,
computed as two matrix products (bidirectional), by prefix sums (causal
:func:`parallel`), token by token over the state ``(S, z)`` (:func:`recurrent`,
:func:`linear_recurrence`) or chunk by chunk (:func:`chunked`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.blocking import (
    auto_chunk_size,
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
from kernelcheck._src.attention.common.inputs import features_iv, state_matrix_iv
from kernelcheck._src.attention.common.types import (
    State,
    finish,
    finish_unnormalized,
    with_state,
)
from kernelcheck._src.core.validate import (
    as_bool,
)
from kernelcheck.errors import InvalidArgument


def parallel(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    causal: bool = False,
    normalize: bool = True,
    on_bad_normalizer: str = "raise",
):
    """Linear attention from feature matrices, in parallel (claims C10, C14, C19).

    Bidirectional: ``A = phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)`` (row-wise
    division), computed transposed as ``M = [V^T phi(K); 1^T phi(K)]`` (a
    matrix product and a matrix-vector product) and one product
    ``M phi(Q)^T`` that gives the numerators and the normalisers together,
    a token a column; the output is its transposed view (see Returns).
    Causal:
    ``a_i = phi(q_i)^T S_i / phi(q_i) . z_i`` with the prefix sums
    ``S_i = sum_{j <= i} phi(k_j) v_j^T``, ``z_i = sum_{j <= i} phi(k_j)``,
    formed block by block: within a block of ``B`` tokens as the masked
    products ``tril(phi(Q_b) phi(K_b)^T) [V_b, 1]``, across blocks through
    the running sums (the computation of :func:`chunked` with
    ``chunk_size = B``, B from the feature dimension so that the products run
    at BLAS speed; memory ``O(B (D + d_v) + D d_v)`` per block, never an
    n x n mask).  Unnormalised (``normalize=False``, C19):
    ``y_i = phi(q_i)^T S_i``, the numerator alone.

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    causal : bool, default False
        Restrict row i to keys ``j <= i``.
    normalize : bool, default True
        Divide by the normaliser, or not (C19).
    on_bad_normalizer : {"raise", "report"}, default "raise"
        When a normaliser ``phi(q_i) . z_i <= 0`` (C12): raise
        :class:`~kernelcheck.errors.BadNormalizer`, or return an
        :class:`AttentionOutput` with the positions.  Never an added eps.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``.
        Bidirectional, the transposed view of the ``(..., d_v + 1, n)``
        product (each matrix Fortran-ordered, its normalisers in the
        row after it): OpenBLAS runs that product faster than a
        C-ordered one (``np.ascontiguousarray`` copies it to C order).
        Causal, a C-ordered array.

    Notes
    -----
    Operation count per sequence (C3): bidirectional
    ``4 n D d_v + 4 n D + 2 n (d_v + 1) + n d_v`` (``V^T phi(K)`` and
    ``1^T phi(K)`` with inner dimension n, ``M phi(Q)^T`` with d_v + 1 rows
    and inner dimension D, the finiteness check's column sums of its d_v + 1
    rows, then the divisions); causal that of :func:`chunked` with its block size
    (``B = 32`` for ``D <= 1024``, else 64).  State: ``D (d_v + 1)``.  Error
    model: :func:`linear_error_bound`.

    ``[V, 1]`` is never formed for all n (causal: one cache-sized block at a
    time, each block's rows checked for NaN and Inf and divided while cached;
    bidirectional: not at all).  The inputs are not scanned for NaN or Inf up
    front: every non-finite entry reaches the checked result (an entry of
    ``phi_q`` its row, of ``phi_k`` or ``V`` every later row), and only then
    are the inputs scanned to name the argument.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import parallel
    >>> phi = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> V = np.array([[1.0], [2.0], [3.0]])
    >>> parallel(phi, phi, V, causal=True).ravel().tolist()
    [1.0, 2.0, 2.25]
    """
    # finite=False: the result is checked instead (see linear_rows)
    phi_q, phi_k, V, causal, action = features_iv(
        phi_q, phi_k, V, causal, on_bad_normalizer, finite=False
    )
    normalize = as_bool(normalize, "normalize")
    chunk = auto_chunk_size(phi_q.shape[-1]) if causal else None
    return linear_rows(phi_q, phi_k, V, normalize, action, "parallel", chunk=chunk)[0]


def _step(state: State, phi_q: Any, phi_k: Any, v: Any, *, on_bad_normalizer: str = "raise"):
    """One token of linear attention as a recurrence (claims C11, C14).

    ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``z_t = z_{t-1} + phi(k_t)``,
    ``y_t = S_t^T phi(q_t) / (z_t . phi(q_t))``; with a state from
    ``init(..., normalize=False)`` (``z`` None) the unnormalised
    ``y_t = S_t^T phi(q_t)`` (C19).  Pure: the input state is not modified; a
    new one is returned.

    Parameters
    ----------
    state : State
        From ``init`` or a previous step.
    phi_q, phi_k : array_like, shape (..., D)
    v : array_like, shape (..., d_v)
    on_bad_normalizer : {"raise", "report"}
        As in :func:`parallel`; with "report" the second value is an
        :class:`AttentionOutput` of the single token.

    Returns
    -------
    (State, numpy.ndarray of shape (..., d_v)) or (State, AttentionOutput)

    Notes
    -----
    Operation count per token: ``4 D (d_v + 1) + d_v``, independent of the
    number of tokens seen (C11, C3).
    """
    state, phi_q, phi_k, v, action = step_iv(state, phi_q, phi_k, v, on_bad_normalizer)
    with np.errstate(over="ignore", invalid="ignore"):
        new, num, den = step_raw(state, phi_q, phi_k, v)
    if den is None:
        return new, finish_unnormalized(num, "step")
    return new, finish(num, den, action, "step")


def recurrent(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    normalize: bool = True,
    initial_state: State | None = None,
    return_state: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Causal linear attention, the recurrence run over the sequence (claims C11, C14, C19).

    ``state = init(D, d_v)``; for ``t = 1..n``: ``state, y_t = step(state, ...)``
    with the pair of :func:`linear_recurrence`.
    Equals ``parallel(phi_q, phi_k, V, causal=True)`` and :func:`chunked`
    within :func:`linear_error_bound`.

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    normalize : bool, default True
        Divide by the normaliser, or not (C19; the state has no ``z``).
    initial_state : State, default None
        The state after earlier tokens (a prefill handed over to decoding,
        C19); None: zero.
    return_state : bool, default False
        Also return the final :class:`State` (its size is ``D (d_v + 1)``
        per batch entry whatever n is, C11).
    on_bad_normalizer : {"raise", "report"}, default "raise"
        As in :func:`parallel`.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``; with ``return_state`` a pair ``(result, State)``.

    Notes
    -----
    Operation count per sequence: ``4 n D (d_v + 1) + n d_v``; state
    ``D (d_v + 1)`` (C11).  This is the reference recurrence, a Python loop
    over tokens; :func:`chunked` is the fast causal form.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import recurrent, parallel
    >>> rng = np.random.default_rng(0)
    >>> pq, pk = rng.random((2, 6, 3))
    >>> V = rng.normal(size=(6, 2))
    >>> bool(np.allclose(recurrent(pq, pk, V), parallel(pq, pk, V, causal=True)))
    True
    """
    phi_q, phi_k, V, _, action = features_iv(phi_q, phi_k, V, True, on_bad_normalizer, finite=False)
    normalize = as_bool(normalize, "normalize")
    return_state = as_bool(return_state, "return_state")
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, True)
    result, state = run_recurrence(phi_q, phi_k, V, None, normalize, M0, action, "recurrent")
    return with_state(result, state, return_state, "recurrent")


def chunked(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    chunk_size: int | None = None,
    normalize: bool = True,
    initial_state: State | None = None,
    return_state: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Causal linear attention in chunks: quadratic within, recurrent across (claims C14, C19).

    The sequence is cut into chunks of ``C = chunk_size`` tokens (the last
    may be shorter).  For a chunk c with rows ``i`` and the state
    ``(S, z)`` of all earlier chunks,

        H_c = tril(phi(Q_c) phi(K_c)^T) [V_c, 1] + phi(Q_c) [S, z],

    then ``[S, z] += phi(K_c)^T [V_c, 1]``; ``a_i = H_i[:d_v] / H_i[d_v]``.
    Full chunks are processed in groups that fit a core's cache, as batched
    matrix products, their states by a running sum over chunks; each group's
    rows are checked and divided while cached.  Memory beyond the inputs and
    the output (with its n normalisers) is a few groups, whatever n is.

    Parameters
    ----------
    phi_q : array_like, shape (..., n, D)
        The query features ``phi(Q)``.
    phi_k : array_like, shape (..., n, D)
        The key features ``phi(K)``.
    V : array_like, shape (..., n, d_v)
        The values.
    chunk_size : int, default None
        Any size >= 1, divisor of n or not; ``C >= n`` is one quadratic block,
        ``C = 1`` is the recurrence.  None: 32 for ``D <= 1024``, else 64,
        the sizes at which the per-chunk products run at BLAS speed
        (:func:`~kernelcheck._src.attention.common.blocking.auto_chunk_size`).
    normalize : bool, default True
        Divide by the normaliser, or not (C19; the state has no ``z``).
    initial_state : State, default None
        The state after earlier tokens, as in :func:`recurrent`; None: zero.
    return_state : bool, default False
        Also return the final :class:`State`.
    on_bad_normalizer : {"raise", "report"}, default "raise"
        As in :func:`parallel`.

    Returns
    -------
    numpy.ndarray or AttentionOutput
        Shape (..., n, d_v), or an :class:`AttentionOutput` with
        ``on_bad_normalizer="report"``; with ``return_state`` a pair ``(result, State)``.

    Notes
    -----
    Operation count per sequence with chunk sizes ``c_1..c_k`` (sum n):
    ``sum_c [2 c^2 D + 2 c^2 (d_v + 1)]`` within chunks (full square
    products), ``4 n D (d_v + 1)`` for the state products,
    ``k D (d_v + 1) + n (d_v + 1)`` additions, ``n d_v`` divisions; about
    ``2 n C (D + d_v + 1) + 4 n D (d_v + 1)``.  State ``D (d_v + 1)``.
    Error model: :func:`linear_error_bound`.

    Large inputs (about ``2**24`` multiply-adds or more) are split across
    one worker thread per BLAS thread, with BLAS limited to one thread inside
    the call (through threadpoolctl, when it is installed): the many small
    per-chunk products run faster side by side than each split across
    threads.  The limit is process-wide while the call runs.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import chunked, recurrent
    >>> rng = np.random.default_rng(0)
    >>> pq, pk = rng.random((2, 10, 3))
    >>> V = rng.normal(size=(10, 2))
    >>> bool(np.allclose(chunked(pq, pk, V, chunk_size=4), recurrent(pq, pk, V)))
    True
    """
    phi_q, phi_k, V, _, action = features_iv(phi_q, phi_k, V, True, on_bad_normalizer, finite=False)
    C = chunk_size_iv(chunk_size, phi_q.shape[-1])
    normalize = as_bool(normalize, "normalize")
    return_state = as_bool(return_state, "return_state")
    M0 = state_matrix_iv(initial_state, phi_q, V, normalize, True)
    result, M = linear_rows(phi_q, phi_k, V, normalize, action, "chunked", chunk=C, M0=M0)
    return with_state(result, State.from_matrix(M, normalize), return_state, "chunked")


def linear_recurrence(*, normalize: bool = True) -> Recurrence:
    """Linear attention as a recurrence: an ``init`` / ``step`` pair over its state (C11, C14, C19).

    ``init(D, d_v, *, batch_shape=(), dtype=float64)`` is the empty state
    ``S = 0`` (D x d_v) and ``z = 0`` (D; none unnormalised);
    ``step(state, phi_q, phi_k, v, *, on_bad_normalizer="raise")`` computes
    ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``z_t = z_{t-1} + phi(k_t)`` and returns
    the new state with ``y_t = S_t^T phi(q_t) / (z_t . phi(q_t))`` (unnormalised:
    ``S_t^T phi(q_t)``, C19).  Pure: the input state is never modified.  The
    gated recurrence (:func:`~kernelcheck.attention.gated_recurrence`) has the
    same shape, its step taking the gate after ``v``.

    Parameters
    ----------
    normalize : bool, default True
        Divide by the normaliser (the state carries ``z``) or not (C19).

    Returns
    -------
    Recurrence

    Notes
    -----
    Operation count per token: ``4 D (d_v + 1) + d_v``, independent of the
    number of tokens seen (C11, C3); the state holds ``D (d_v + 1)`` numbers.

    Examples
    --------
    >>> from kernelcheck.attention import linear_recurrence
    >>> rec = linear_recurrence()
    >>> s = rec.init(2, 1)
    >>> s, y = rec.step(s, [1.0, 0.0], [1.0, 0.0], [3.0])
    >>> s, y = rec.step(s, [1.0, 1.0], [0.0, 1.0], [5.0])
    >>> y.tolist()
    [4.0]
    """
    normalize = as_bool(normalize, "normalize")

    def init_state(
        D: int, d_v: int, *, batch_shape: tuple[int, ...] = (), dtype: Any = np.float64
    ) -> State:
        return empty_state(D, d_v, batch_shape=batch_shape, dtype=dtype, normalize=normalize)

    def step_state(state: State, phi_q: Any, phi_k: Any, v: Any, *, on_bad_normalizer="raise"):
        if normalize and isinstance(state, State) and state.z is None:
            raise InvalidArgument(
                "`state.z` is None, but this recurrence is normalised; make the state with "
                "its own init()"
            )
        if not normalize and isinstance(state, State):
            state = State(state.S, None)
        return _step(state, phi_q, phi_k, v, on_bad_normalizer=on_bad_normalizer)

    init_state.__doc__ = "The empty state of the linear recurrence: ``S = 0`` (and ``z = 0``)."
    step_state.__doc__ = "One token of the linear recurrence: add, read out."
    return Recurrence(init_state, step_state)
