"""Linear attention from feature matrices: parallel, recurrent (``init`` / ``step``) and chunked.

Claims C10, C11, C14: ``a_i = phi(q_i)^T S_i / phi(q_i) . z_i`` with the running
sums ``S_i = sum_{j in J(i)} phi(k_j) v_j^T`` and ``z_i = sum_{j in J(i)} phi(k_j)``,
computed as two matrix products (bidirectional), by prefix sums (causal
:func:`parallel`), token by token over the state ``(S, z)`` (:func:`recurrent`)
or chunk by chunk (:func:`chunked`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.blocking import (
    ValueRows,
    auto_chunk_size,
    bidirectional_normalized,
    bidirectional_products,
    causal_products,
)
from kernelcheck._src.attention.inputs import action_iv, features_iv, state_matrix_iv
from kernelcheck._src.attention.types import (
    NormalizedRows,
    RawRows,
    State,
    finish,
    finish_divided,
    finish_unnormalized,
)
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_float_dtype,
    as_int,
    as_int_tuple,
    check_size,
    describe,
    result_dtype,
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
    phi_q, phi_k : array_like, shape (..., n, D)
        Feature matrices ``phi(Q)``, ``phi(K)``.
    V : array_like, shape (..., n, d_v)
    causal : bool
    normalize : bool
        Divide by the normaliser (default) or not (C19).
    on_bad_normalizer : {"raise", "report"}
        What to do when a normaliser ``phi(q_i) . z_i <= 0`` (C12): raise
        :class:`~kernelcheck.errors.BadNormalizer`, or return an
        :class:`AttentionOutput` with the positions.  Never an added eps.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v), or :class:`AttentionOutput`
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


def linear_rows(phi_q, phi_k, V, normalize, action, form, *, chunk=None, M0=None, log_gates=None):
    """Run the products of a linear form on validated inputs and finish its rows.

    ``chunk`` None: bidirectional; else causal in chunks of that size (with
    an initial state ``M0`` and log gates, C19, C20).  Returns the result
    and the final state matrix (None bidirectional).

    The inputs come unchecked for NaN and Inf (``features_iv(finite=False)``):
    the result is checked (causal: each group of rows as it is finished;
    bidirectional: each block of numerators and normalisers before it is
    divided), and every non-finite input entry provably reaches a checked
    row (see
    :func:`~kernelcheck._src.attention.blocking.bidirectional_normalized`,
    :func:`~kernelcheck._src.attention.blocking.bidirectional_products` and
    :func:`~kernelcheck._src.attention.blocking.causal_products`), so a
    finite result proves finite inputs; otherwise the inputs are scanned and
    the first bad one is named.  tests/attention/test_finite.py puts NaN and
    Inf at every position of every input.
    """
    batch, n, dv = phi_q.shape[:-2], phi_q.shape[-2], V.shape[-1]
    inputs = ((phi_q, "phi_q"), (phi_k, "phi_k"), (V, "V"))
    if chunk is None:
        with np.errstate(over="ignore", invalid="ignore"):
            if not normalize:
                num = bidirectional_products(phi_q, phi_k, V)
                return finish_unnormalized(num, form, inputs), None
            out, den, finite = bidirectional_normalized(phi_q, phi_k, V)
        return finish_divided(out, den, finite, action, form, inputs), None
    values = ValueRows(V, normalize)
    if normalize:
        sink: RawRows | NormalizedRows = NormalizedRows(batch, n, dv, V.dtype)
    else:
        sink = RawRows(batch + (n, dv), V.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        M = causal_products(phi_q, phi_k, values, chunk, sink, S0=M0, log_gates=log_gates)
    return sink.result(action, form, inputs), M


def init(
    D: int,
    d_v: int,
    *,
    batch_shape: tuple[int, ...] = (),
    dtype: Any = np.float64,
    normalize: bool = True,
) -> State:
    """The empty recurrent state ``S = 0`` (D x d_v), ``z = 0`` (D) (claims C11, C14, C19).

    Parameters
    ----------
    D : int
        Feature dimension.
    d_v : int
        Value dimension.
    batch_shape : tuple of int
        Leading (batch, head) dimensions; ``()`` broadcasts against any batch.
    dtype : float64 or float32
    normalize : bool
        False for unnormalised attention: the state is ``S`` alone (``z`` None).

    Returns
    -------
    State

    Examples
    --------
    >>> from kernelcheck.attention import init
    >>> s = init(3, 2, batch_shape=(4,))
    >>> s.S.shape, s.z.shape
    ((4, 3, 2), (4, 3))
    """
    D = as_int(D, "D", minimum=1)
    d_v = as_int(d_v, "d_v", minimum=1)
    batch_shape = as_int_tuple(batch_shape, "batch_shape", minimum=1)
    dtype = as_float_dtype(dtype, "dtype")
    normalize = as_bool(normalize, "normalize")
    check_size(
        math.prod(batch_shape) * D * (d_v + normalize),
        f"the state of batch shape {batch_shape} with D = {D}, d_v = {d_v}",
        itemsize=dtype.itemsize,
    )
    z = np.zeros(batch_shape + (D,), dtype=dtype) if normalize else None
    return State(S=np.zeros(batch_shape + (D, d_v), dtype=dtype), z=z)


def step_raw(state: State, phi_q, phi_k, v, g=None):
    """One recurrence step without checks: new state, numerator, normaliser (None unnormalised).

    With a gate ``g`` (shape of the batch, C20) the old state is decayed first:
    ``S_t = g_t S_{t-1} + phi(k_t) v_t^T``, ``z_t = g_t z_{t-1} + phi(k_t)``.
    """
    S0, z0 = state.S, state.z
    if g is not None:
        S0 = g[..., None, None] * S0
        z0 = None if z0 is None else g[..., None] * z0
    S = S0 + phi_k[..., :, None] * v[..., None, :]
    num = (phi_q[..., None, :] @ S)[..., 0, :]
    if z0 is None:
        return State(S, None), num, None
    z = z0 + phi_k
    return State(S, z), num, np.sum(phi_q * z, axis=-1)


class StepInputs(NamedTuple):
    """Validated state and token of one recurrence step."""

    state: State
    phi_q: np.ndarray
    phi_k: np.ndarray
    v: np.ndarray
    action: str


def step_iv(state, phi_q, phi_k, v, action) -> StepInputs:
    """Validate one step's state and token (``state.z`` None: unnormalised)."""
    if not isinstance(state, State):
        raise InvalidArgument(f"`state` must be a State from init(), got {describe(state)}")
    S = as_array(state.S, "state.S", min_ndim=2)
    D, dv = S.shape[-2], S.shape[-1]
    z = None
    if state.z is not None:
        z = as_array(state.z, "state.z", min_ndim=1)
        if z.shape[-1] != D:
            raise InvalidArgument(f"`state.z` must have last dimension D = {D}, got {describe(z)}")
    phi_q = as_array(phi_q, "phi_q", min_ndim=1)
    phi_k = as_array(phi_k, "phi_k", min_ndim=1)
    v = as_array(v, "v", min_ndim=1)
    for arr, name, size, label in (
        (phi_q, "phi_q", D, "D"),
        (phi_k, "phi_k", D, "D"),
        (v, "v", dv, "d_v"),
    ):
        if arr.shape[-1] != size:
            raise InvalidArgument(
                f"`{name}` must have last dimension {label} = {size} (from the state), "
                f"got {describe(arr)}"
            )
    zlead = () if z is None else z.shape[:-1]
    try:
        np.broadcast_shapes(S.shape[:-2], zlead, phi_q.shape[:-1], phi_k.shape[:-1], v.shape[:-1])
    except ValueError:
        raise InvalidArgument(
            "the leading (batch/head) dimensions of `state`, `phi_q`, `phi_k` and `v` do not "
            f"broadcast: {S.shape[:-2]}, {phi_q.shape[:-1]}, {phi_k.shape[:-1]}, {v.shape[:-1]}"
        ) from None
    arrays = [a for a in (S, z, phi_q, phi_k, v) if a is not None]
    dtype = result_dtype(*arrays)
    S, phi_q, phi_k, v = (a.astype(dtype, copy=False) for a in (S, phi_q, phi_k, v))
    z = None if z is None else z.astype(dtype, copy=False)
    return StepInputs(State(S, z), phi_q, phi_k, v, action_iv(action))


def step(state: State, phi_q: Any, phi_k: Any, v: Any, *, on_bad_normalizer: str = "raise"):
    """One token of linear attention as a recurrence (claims C11, C14).

    ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``z_t = z_{t-1} + phi(k_t)``,
    ``y_t = S_t^T phi(q_t) / (z_t . phi(q_t))``; with a state from
    ``init(..., normalize=False)`` (``z`` None) the unnormalised
    ``y_t = S_t^T phi(q_t)`` (C19).  Pure: the input state is not modified; a
    new one is returned.

    Parameters
    ----------
    state : State
        From :func:`init` or a previous step.
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

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import init, step
    >>> s = init(2, 1)
    >>> s, y = step(s, [1.0, 0.0], [1.0, 0.0], [3.0])
    >>> s, y = step(s, [1.0, 1.0], [0.0, 1.0], [5.0])
    >>> y.tolist()
    [4.0]
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
    """Causal linear attention by running :func:`step` over the sequence (claims C11, C14, C19).

    ``state = init(D, d_v)``; for ``t = 1..n``: ``state, y_t = step(state, ...)``.
    Equals ``parallel(phi_q, phi_k, V, causal=True)`` and :func:`chunked`
    within :func:`linear_error_bound`.

    Parameters
    ----------
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    normalize : bool
        Divide by the normaliser (default) or not (C19; the state has no ``z``).
    initial_state : State, optional
        The state after earlier tokens (a prefill handed over to decoding,
        C19); zero by default.
    return_state : bool
        Also return the final :class:`State` (its size is ``D (d_v + 1)``
        per batch entry whatever n is, C11).
    on_bad_normalizer : {"raise", "report"}

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v) or :class:`AttentionOutput`;
    with ``return_state`` a pair ``(result, State)``.

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
    return (result, state) if return_state else result


def run_recurrence(phi_q, phi_k, V, gates, normalize, M0, action, form):
    """The token loop of the recurrent forms (plain or gated) on validated inputs.

    The arithmetic of :func:`step_raw` token by token (so the result equals
    a loop of :func:`step` bit for bit), with the state ``S`` (and ``z``)
    updated in place instead of a new state per token: the loop owns them
    (copies of the handed-over state, never the caller's arrays).
    ``phi_q``, ``phi_k`` and ``V`` may come unchecked for NaN and Inf: an
    entry of ``phi_k`` at token t reaches a row of S (and an entry of z),
    of ``v_t`` a column of S, hence the numerator or the normaliser of token
    t; an entry of ``phi_q`` its own (see :func:`linear_rows`).
    """
    batch, n, D, dv = phi_q.shape[:-2], phi_q.shape[-2], phi_q.shape[-1], V.shape[-1]
    S = np.zeros(batch + (D, dv), dtype=V.dtype)
    z = np.zeros(batch + (D,), dtype=V.dtype) if normalize else None
    if M0 is not None:
        S[...] = M0[..., :dv]
        if z is not None:
            z[...] = M0[..., dv]
    num = np.empty(V.shape, dtype=V.dtype)
    den = np.empty(batch + (n,), dtype=V.dtype)
    outer = np.empty_like(S)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n):
            if gates is not None:
                g = gates[..., t]
                S *= g[..., None, None]
                if z is not None:
                    z *= g[..., None]
            np.multiply(phi_k[..., t, :, None], V[..., t, None, :], out=outer)
            S += outer
            np.matmul(phi_q[..., t, None, :], S, out=num[..., t, None, :])
            if z is not None:
                z += phi_k[..., t, :]
                den[..., t] = np.sum(phi_q[..., t, :] * z, axis=-1)
    inputs = ((phi_q, "phi_q"), (phi_k, "phi_k"), (V, "V"))
    if z is None:
        return finish_unnormalized(num, form, inputs), State(S, None)
    return finish(num, den, action, form, inputs, inplace=True), State(S, z)


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
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    chunk_size : int >= 1, optional
        Any size, divisor of n or not; ``C >= n`` is one quadratic block,
        ``C = 1`` is the recurrence.  Default: 32 for ``D <= 1024``, else 64,
        the sizes at which the per-chunk products run at BLAS speed
        (:func:`~kernelcheck._src.attention.blocking.auto_chunk_size`).
    normalize, initial_state, return_state, on_bad_normalizer
        As in :func:`recurrent`.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v), or :class:`AttentionOutput`; with
    ``return_state`` a pair ``(result, State)``.

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
    return (result, State.from_matrix(M, normalize)) if return_state else result


def chunk_size_iv(chunk_size: Any, D: int) -> int:
    """``chunk_size`` as an int >= 1; None gives :func:`auto_chunk_size` of D."""
    if chunk_size is None:
        return auto_chunk_size(D)
    return as_int(chunk_size, "chunk_size", minimum=1)
