"""Input validation of the attention forms (one ``*_iv`` per family of arguments)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_float_dtype,
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


def triple_iv(A: Any, B: Any, V: Any, names: tuple[str, str, str], what: str, causal: bool):
    """Validate a (queries, keys, values) triple of shapes (..., n, x), (..., m, x), (..., m, d_v).

    ``what`` names the shared last dimension of the first two ("d" or "D").
    Keys and values have one length m; queries have the same length when
    ``causal`` (token i attends to j <= i), any length n >= 1 otherwise
    (cross-attention).  Returns the three arrays cast to one dtype (float32
    only if all are).
    """
    arrs = []
    for value, name in zip((A, B, V), names, strict=True):
        arr = as_array(value, name)
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
    if scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(scale, (bool, np.bool_)):
        raise InvalidArgument(f"`scale` must be a positive real number or None, got {scale!r}")
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise InvalidArgument(
            f"`scale` must be a positive real number or None, got {describe(scale)}"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgument(f"`scale` must be a finite number > 0, got {scale!r}")
    return value


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


def softmax_iv(Q, K, V, causal, scale) -> Inputs:
    causal = as_bool(causal, "causal")
    Q, K, V = triple_iv(Q, K, V, ("Q", "K", "V"), "d", causal)
    return Inputs(Q, K, V, causal, scale_iv(scale, Q.shape[-1]))


def kernelized_iv(Q, K, V, kernel, causal, action) -> Inputs:
    causal = as_bool(causal, "causal")
    Q, K, V = triple_iv(Q, K, V, ("Q", "K", "V"), "d", causal)
    check_callable(kernel, "kernel")
    return Inputs(Q, K, V, causal, action_iv(action))


# Linear forms
# ---------------------------------------------------------------------------


def features_iv(phi_q, phi_k, V, causal, action) -> Inputs:
    causal = as_bool(causal, "causal")
    phi_q, phi_k, V = triple_iv(phi_q, phi_k, V, ("phi_q", "phi_k", "V"), "D", causal)
    return Inputs(phi_q, phi_k, V, causal, action_iv(action))


# ---------------------------------------------------------------------------
# Error models
# ---------------------------------------------------------------------------


def dtype_iv(dtype: Any, default: np.dtype) -> np.dtype:
    return default if dtype is None else as_float_dtype(dtype, "dtype")
