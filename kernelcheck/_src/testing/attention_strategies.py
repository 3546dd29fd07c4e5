"""Hypothesis strategies for attention inputs, to drive ``verify.attention(..., inputs=...)``.

Every number is drawn through Hypothesis (``hypothesis.extra.numpy.arrays``),
not generated from a drawn seed, so a failing example shrinks to a short
sequence of small, readable values (zeros, ones, halves) and Hypothesis'
own edge cases (repeated rows, zeros, the largest norm) come for free.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck._src.core.rounding import ARRAY_FORMATS
from kernelcheck._src.core.validate import as_int, as_real, check_choice
from kernelcheck._src.testing.strategies import rows_within_norm
from kernelcheck.errors import InvalidArgument

__all__ = ["AttentionInputs", "attention_inputs"]


class AttentionInputs(NamedTuple):
    """One drawn input: arrays of shape (*batch, n, d), (*batch, n, d), (*batch, n, d_v).

    ``causal`` and ``dtype`` are drawn too, so a test passes them on:
    ``verify.attention(fn, inputs=(x.Q, x.K, x.V), causal=x.causal, dtype=x.dtype)``.
    """

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    causal: bool
    dtype: str


def attention_inputs(
    *,
    min_n: int = 1,
    max_n: int = 32,
    d: int | None = None,
    max_d: int = 8,
    d_v: int | None = None,
    batch_shapes: Any = ((), (2,), (2, 3)),
    dtypes: Any = ("float64", "float32"),
    causal: bool | None = None,
    max_norm: float = 3.0,
    positive_values: bool = False,
) -> st.SearchStrategy[AttentionInputs]:
    """Inputs of an attention layer: shapes, dtypes, norms and causality drawn by Hypothesis.

    Parameters
    ----------
    min_n : int, default 1
        The shortest sequence length.
    max_n : int, default 32
        The longest sequence length.
    d : int or None, default None
        A fixed key dimension (a layer with a fixed head size); drawn from
        1..``max_d`` when None.
    max_d : int, default 8
        The largest drawn key dimension.
    d_v : int or None, default None
        A fixed value dimension; ``d`` (fixed or drawn) when None.
    batch_shapes : sequence of tuples, default ((), (2,), (2, 3))
        Leading shapes to choose from.
    dtypes : sequence of str, default ('float64', 'float32')
        Precisions to choose from (names of float64, float32, float16, bfloat16).
    causal : bool or None, default None
        Fixed, or drawn when None.
    max_norm : float, default 3.0
        Largest row norm of Q and K (logits stay below ``max_norm**2``).  Rows
        are drawn entry by entry in ``[-max_norm, max_norm]``, scaled back
        onto the ball when longer, then scaled by 1, 0.25 or 1e-3 (small
        norms: near-uniform softmax weights, rounding-level logits).
    positive_values : bool, default False
        Values in [0.5, 1.5] (the power case) instead of [-2, 2].

    Examples
    --------
    >>> from hypothesis import given, settings
    >>> from kernelcheck.strategies import attention_inputs
    >>> @settings(max_examples=5)
    ... @given(attention_inputs(d=4))
    ... def test_shapes(x):
    ...     assert x.Q.shape[-1] == 4 and x.V.shape[:-1] == x.K.shape[:-1]
    >>> test_shapes()
    """
    min_n = as_int(min_n, "min_n", minimum=1)
    max_n = as_int(max_n, "max_n", minimum=1)
    if min_n > max_n:
        raise InvalidArgument(f"min_n={min_n} is larger than max_n={max_n}")
    max_d = as_int(max_d, "max_d", minimum=1)
    d = None if d is None else as_int(d, "d", minimum=1)
    d_v = None if d_v is None else as_int(d_v, "d_v", minimum=1)
    shapes = tuple(tuple(as_int(b, "batch_shapes", minimum=1) for b in s) for s in batch_shapes)
    if not shapes:
        raise InvalidArgument("`batch_shapes` must hold at least one shape")
    names = tuple(check_choice(t, "dtypes", ARRAY_FORMATS) for t in dtypes)
    if not names:
        raise InvalidArgument("`dtypes` must hold at least one precision")
    max_norm = as_real(max_norm, "max_norm", positive=True)

    value_range = (0.5, 1.5) if positive_values else (-2.0, 2.0)

    @st.composite
    def draw(data):
        batch = data(st.sampled_from(shapes))
        n = data(st.integers(min_n, max_n))
        dd = d if d is not None else data(st.integers(1, max_d))
        dv = d_v if d_v is not None else dd
        # rows within max_norm, then a common scale: 1 (the simplest, where shrinking
        # goes), or small norms, where rounding and softmax's near-uniform weights live
        scale = data(st.sampled_from(_SCALES))
        Q = scale * rows_within_norm(data(_array(batch + (n, dd), -max_norm, max_norm)), max_norm)
        K = scale * rows_within_norm(data(_array(batch + (n, dd), -max_norm, max_norm)), max_norm)
        V = data(_array(batch + (n, dv), *value_range))
        is_causal = causal if causal is not None else data(st.booleans())
        return AttentionInputs(Q, K, V, bool(is_causal), data(st.sampled_from(names)))

    return draw()


#: Common scales of the rows of Q and K, simplest first.
_SCALES = (1.0, 0.25, 1e-3)


def _array(shape: tuple, lo: float, hi: float) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays of ``shape`` with entries in ``[lo, hi]``, drawn entry by entry."""
    elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    return hnp.arrays(np.float64, shape, elements=elements)
