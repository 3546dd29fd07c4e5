"""Input validation of the attention forms (one ``*_iv`` per family of arguments)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.types import State
from kernelcheck._src.core.rounding import RoundingModel
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_float_dtype,
    as_real,
    check_callable,
    check_choice,
    describe,
    result_dtype,
)
from kernelcheck.errors import InvalidArgument

#: Values of ``on_bad_normalizer``.
BAD_NORMALIZER_ACTIONS = ("raise", "report")

# Input validation
# ---------------------------------------------------------------------------


def triple_iv(
    A: Any,
    B: Any,
    V: Any,
    names: tuple[str, str, str],
    what: str,
    causal: bool,
    finite: bool = True,
):
    """Validate a (queries, keys, values) triple of shapes (..., n, x), (..., m, x), (..., m, d_v).

    ``what`` names the shared last dimension of the first two ("d" or "D").
    Keys and values have one length m; queries have the same length when
    ``causal`` (token i attends to j <= i), any length n >= 1 otherwise
    (cross-attention).  Returns the three arrays cast to one dtype (float32
    only if all are).  ``finite=False`` leaves the finiteness check to the
    caller (see :func:`~kernelcheck._src.attention.common.types.name_culprit`).
    """
    arrs = []
    for value, name in zip((A, B, V), names, strict=True):
        arr = as_array(value, name, finite=finite)
        if arr.ndim < 2:
            raise InvalidArgument(
                f"`{name}` must have shape (..., n, {what if name != names[2] else 'd_v'}) "
                f"with at least 2 dimensions, got {describe(arr)}"
            )
        arrs.append(arr)
    A, B, V = arrs
    if not (A.shape[:-2] == B.shape[:-2] == V.shape[:-2]):
        raise InvalidArgument(
            f"the leading (batch/head) dimensions of `{names[0]}`, `{names[1]}` and "
            f"`{names[2]}` must agree, got {A.shape[:-2]}, {B.shape[:-2]} and {V.shape[:-2]}"
        )
    n, m = A.shape[-2], B.shape[-2]
    if causal and (m != n or V.shape[-2] != n):
        raise InvalidArgument(
            f"`{names[0]}`, `{names[1]}` and `{names[2]}` must have the same number of "
            f"tokens n (axis -2) for causal attention, got {n}, {m} and {V.shape[-2]}"
        )
    if V.shape[-2] != m:
        raise InvalidArgument(
            f"`{names[1]}` and `{names[2]}` must have the same number of tokens (axis -2), "
            f"got {m} and {V.shape[-2]}"
        )
    if B.shape[-1] != A.shape[-1]:
        raise InvalidArgument(
            f"`{names[0]}` and `{names[1]}` must have the same last dimension {what}, got "
            f"{describe(A)} and {describe(B)}"
        )
    dtype = result_dtype(A, B, V)
    return A.astype(dtype, copy=False), B.astype(dtype, copy=False), V.astype(dtype, copy=False)


def action_iv(value: Any) -> str:
    return check_choice(value, "on_bad_normalizer", BAD_NORMALIZER_ACTIONS)


def scale_iv(scale: Any, d: int) -> float:
    """``1 / sqrt(d)`` for None, else a positive finite real number (not a string or a bool)."""
    if scale is None:
        return 1.0 / math.sqrt(d)
    return as_real(scale, "scale", positive=True)


# Exact forms
# ---------------------------------------------------------------------------


class Inputs(NamedTuple):
    """Validated inputs of a form: queries (or their features), keys, values and two options.

    ``option`` is the softmax ``scale`` or the ``on_bad_normalizer`` action.
    """

    a: np.ndarray
    b: np.ndarray
    V: np.ndarray
    causal: bool
    option: Any


def softmax_iv(Q, K, V, causal, scale, finite: bool = True) -> Inputs:
    causal = as_bool(causal, "causal")
    Q, K, V = triple_iv(Q, K, V, ("Q", "K", "V"), "d", causal, finite)
    return Inputs(Q, K, V, causal, scale_iv(scale, Q.shape[-1]))


def kernelized_iv(Q, K, V, kernel, causal, action) -> Inputs:
    causal = as_bool(causal, "causal")
    Q, K, V = triple_iv(Q, K, V, ("Q", "K", "V"), "d", causal)
    check_callable(kernel, "kernel")
    return Inputs(Q, K, V, causal, action_iv(action))


# Linear forms
# ---------------------------------------------------------------------------


def features_iv(phi_q, phi_k, V, causal, action, finite: bool = True) -> Inputs:
    causal = as_bool(causal, "causal")
    names = ("phi_q", "phi_k", "V")
    phi_q, phi_k, V = triple_iv(phi_q, phi_k, V, names, "D", causal, finite)
    return Inputs(phi_q, phi_k, V, causal, action_iv(action))


# ---------------------------------------------------------------------------
# Error models
# ---------------------------------------------------------------------------


def dtype_iv(dtype: Any, default: np.dtype) -> Any:
    """The precision an error bound is evaluated in: a float dtype, or a RoundingModel as is."""
    if dtype is None:
        return default
    if isinstance(dtype, RoundingModel):
        return dtype
    return as_float_dtype(dtype, "dtype")


def state_matrix_iv(state: Any, a: np.ndarray, V: np.ndarray, normalize: bool, causal: bool):
    """A handed-over state as one matrix ``[S, z]`` (or ``S`` unnormalised), or None.

    ``state`` is a :class:`~kernelcheck._src.attention.common.types.State` whose ``S``
    has shape ``batch + (D, d_v)`` and ``z`` shape ``batch + (D,)`` (leading
    dimensions broadcast against the inputs'); ``z`` may be None only for
    the unnormalised forms, which ignore it.  Only causal forms take a state;
    it is cast to the inputs' precision.
    """
    if state is None:
        return None
    if not causal:
        raise InvalidArgument(
            "`initial_state` applies to causal attention (a state handed over from the "
            "tokens before), not to a bidirectional call"
        )
    if not isinstance(state, State):
        raise InvalidArgument(
            f"`initial_state` must be a State (S, z) from init() or a previous call, "
            f"got {describe(state)}"
        )
    batch, D, dv = a.shape[:-2], a.shape[-1], V.shape[-1]
    S = as_array(state.S, "initial_state.S", min_ndim=2)
    if S.shape[-2:] != (D, dv):
        raise InvalidArgument(
            f"`initial_state.S` must have shape (..., D, d_v) = (..., {D}, {dv}), got {describe(S)}"
        )
    parts = [S]
    if normalize:
        if state.z is None:
            raise InvalidArgument(
                "`initial_state.z` is None, but the normalised form needs the running sum z "
                "(pass normalize=False for unnormalised attention)"
            )
        z = as_array(state.z, "initial_state.z", min_ndim=1)
        if z.shape[-1] != D:
            raise InvalidArgument(
                f"`initial_state.z` must have last dimension D = {D}, got {describe(z)}"
            )
        parts.append(z[..., None])
    try:
        parts = [np.broadcast_to(p, batch + p.shape[-2:]) for p in parts]
    except ValueError:
        raise InvalidArgument(
            f"the leading dimensions of `initial_state` ({S.shape[:-2]}) do not broadcast to "
            f"the inputs' {batch}"
        ) from None
    M = np.concatenate(parts, axis=-1) if len(parts) > 1 else np.array(parts[0])
    return M.astype(result_dtype(a, V), copy=False)


class Gates(NamedTuple):
    """Validated gates, broadcast to ``batch + (n,)``, and their logarithms."""

    gates: np.ndarray
    log_gates: np.ndarray


def gates_iv(gates: Any, shape: tuple[int, ...], dtype: np.dtype, name: str = "gates") -> Gates:
    """Gates in (0, 1], broadcast to ``shape`` in ``dtype``, with ``log g`` beside them.

    Raises :class:`~kernelcheck.errors.InvalidArgument` naming ``name`` for a
    NaN or infinite gate, a gate outside (0, 1] (the first one found is
    shown), or a shape that does not broadcast to ``shape``.
    """
    arr = as_array(gates, name, allow_empty=True)
    try:
        g = np.broadcast_to(arr, shape)
    except ValueError:
        raise InvalidArgument(
            f"`{name}` must broadcast to {shape} (batch + (n,): a number, one gate per head "
            f"as shape (H, 1), or one per token), got {describe(arr)}"
        ) from None
    bad = ~((arr > 0) & (arr <= 1))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgument(
            f"`{name}` must lie in (0, 1], but {int(bad.sum())} do not "
            f"(first at index {first}: {float(arr[first])!r})"
        )
    g = g.astype(dtype, copy=False)
    with np.errstate(divide="ignore"):
        log_g = np.log(g)
    return Gates(g, log_g)


def token_values_iv(
    value: Any,
    shape: tuple[int, ...],
    dtype: np.dtype,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    what: str = "",
) -> np.ndarray:
    """Per-token values (a delta rule's step, gates on key channels, ...) broadcast to ``shape``.

    Raises :class:`~kernelcheck.errors.InvalidArgument` naming ``name`` for a
    boolean, a NaN or infinite value, a value outside ``[low, high]`` (the
    first one found is shown, with ``what`` saying what is expected), or a
    shape that does not broadcast to ``shape``; returns a read-only view in
    ``dtype`` (never the caller's array written to).
    """
    if isinstance(value, (bool, np.bool_)) or np.asarray(value).dtype.kind == "b":
        raise InvalidArgument(f"`{name}` must be {what or 'real numbers'}, got {value!r}")
    arr = as_array(value, name, allow_empty=True)
    try:
        out = np.broadcast_to(arr, shape)
    except ValueError:
        raise InvalidArgument(f"`{name}` must broadcast to {shape}, got {describe(arr)}") from None
    bad = ~((arr >= low) & (arr <= high))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgument(
            f"`{name}` must be {what or f'in [{low}, {high}]'}, but {int(bad.sum())} "
            f"value(s) are not (first at index {first}: {float(arr[first])!r})"
        )
    return out.astype(dtype, copy=False)
