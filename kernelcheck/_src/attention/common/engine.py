"""The engine of the linear-type forms: products over chunks, the token loop, one step.

Shared by the plain (C14, C19) and gated (C20) linear families:
:func:`linear_rows` runs the products of a bidirectional or chunked form and
finishes its rows; :func:`run_recurrence` is the token loop of the recurrent
forms; :func:`step_raw` one token; :class:`Recurrence` the one shape of a
recurrence, an ``init`` / ``step`` pair over its state (optax style).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.blocking import (
    ValueRows,
    auto_chunk_size,
    bidirectional_normalized,
    bidirectional_products,
    causal_products,
)
from kernelcheck._src.attention.common.inputs import action_iv
from kernelcheck._src.attention.common.types import (
    NormalizedRows,
    RawRows,
    State,
    finish,
    finish_divided,
    finish_unnormalized,
)
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_float_dtype,
    as_int,
    as_int_tuple,
    describe,
    result_dtype,
)
from kernelcheck.errors import InvalidArgument


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
    :func:`~kernelcheck._src.attention.common.blocking.bidirectional_normalized`,
    :func:`~kernelcheck._src.attention.common.blocking.bidirectional_products` and
    :func:`~kernelcheck._src.attention.common.blocking.causal_products`), so a
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


def empty_state(
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


def chunk_size_iv(chunk_size: Any, D: int) -> int:
    """``chunk_size`` as an int >= 1; None gives :func:`auto_chunk_size` of D."""
    if chunk_size is None:
        return auto_chunk_size(D)
    return as_int(chunk_size, "chunk_size", minimum=1)


class Recurrence(NamedTuple):
    """A recurrence as a pair of pure functions over its state (optax style).

    Attributes
    ----------
    init : callable
        ``init(D, d_v, *, batch_shape=(), dtype=float64) -> State``.
    step : callable
        ``step(state, phi_q, phi_k, v, g, *, on_bad_normalizer="raise")
        -> (State, y)``: one token, with its gate ``g``.
    """

    init: Callable[..., State]
    step: Callable[..., tuple[State, Any]]
