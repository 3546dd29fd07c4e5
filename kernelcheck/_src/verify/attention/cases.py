"""The inputs ``verify.attention`` hands to a layer: generated cases, user inputs, layouts.

Every case uses the layer's own sizes (``d``, ``d_v``, batch and heads); a
case that cannot apply to them is listed as skipped with the reason, never
run.  Inputs are generated in float64 and then rounded (by the caller) to the
precision the layer computes in; the reference sees exactly the rounded
values.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.validate import as_array, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["CASES", "LAYOUTS", "Case", "generate_cases", "user_case", "to_layout", "from_layout"]

#: The generated cases, in order.  ``positive values`` (values in [0.5, 1.5],
#: moderate logits) is where the output is as large as the sums behind it, so
#: the tolerance is smallest relative to the output: the case with the most
#: power against small relative errors.  Its values move with the keys
#: (:func:`_values_along_keys`), so the gradients through queries and keys
#: do not cancel to noise either.
CASES = (
    "random",
    "odd length",
    "n=1",
    "d=1",
    "repeated tokens",
    "large norms",
    "tiny norms",
    "positive values",
    "across blocks",
)

#: Length of the "across blocks" case: ``3 * 64 + 5`` tokens cross the block and
#: chunk sizes layers use (16, 32, 64, 128) and are a multiple of none of them, so a
#: block boundary, a partial last block and the state carried between blocks are
#: all exercised.
ACROSS_BLOCKS = 197

#: The generated cases whose tokens are each drawn independently from a continuous
#: law: the data the probabilistic error model may judge
#: (:func:`~kernelcheck._src.core.rounding.model_for_data`).  "repeated tokens"
#: repeats three tokens, and the caller's own inputs are not a random draw:
#: both are judged with the worst case.
IID_CASES = (
    "random",
    "odd length",
    "n=1",
    "d=1",
    "large norms",
    "tiny norms",
    "positive values",
    "across blocks",
)

#: Layouts of the arrays handed to the layer: ``"...nd"`` (batch and heads
#: leading, then tokens, then features) or ``"bnhd"`` (batch, tokens, heads,
#: features: flash-linear-attention and many torch layers; gates ``(b, n, h)``).
LAYOUTS = ("...nd", "bnhd")

#: Logit size reached by the "large norms" case (beyond exp's float64 range, 709).
LARGE_LOGIT = 1000.0

#: Factor applied to Q and K in the "tiny norms" case.
TINY = 1e-8


class Case(NamedTuple):
    """One input of the layer, in the internal ``(..., n, d)`` layout, float64.

    ``skip`` is the reason the case cannot apply (then the arrays are None).
    """

    name: str
    Q: np.ndarray | None
    K: np.ndarray | None
    V: np.ndarray | None
    skip: str = ""


def _rescale_rows(X: np.ndarray, norm: float) -> np.ndarray:
    lengths = np.linalg.norm(X, axis=-1, keepdims=True)
    lengths[lengths == 0] = 1.0
    return X / lengths * norm


#: Why the ``d=1`` case is left out for a layer whose key size the caller fixes (``d=``):
#: the layer's choice, not a case that could not be judged.
FIXED_D = "the layer's key dimension is fixed"

#: Weight of the independent part of a ``positive values`` value (see :func:`_values_along_keys`).
VALUE_NOISE = 0.3


def _values_along_keys(rng, Z_keys, spread, batch, d: int, d_v: int) -> np.ndarray:
    """Values in (0.5, 1.5), uniform, each channel a monotone function of a key direction.

    Channel ``m`` of token ``j`` is ``0.5 + Phi(z)`` with ``z = (a_m . x_j +
    c e_jm) / sqrt(1 + c^2)``: ``x_j`` the token's key standardised (its
    entries N(0, 1)), ``a_m`` a random unit direction (one per channel, per
    draw), ``e_jm = Phi^-1(spread_jm)`` independent N(0, 1) noise, ``c`` =
    :data:`VALUE_NOISE`.  So ``z`` is N(0, 1) and each value uniform on
    (0.5, 1.5), as independent values would be, but the values move with
    the keys: the gradients with respect to queries and keys, sums of
    ``g . (v_j - out_i)`` times the keys, are then covariances of values
    and keys that add up, where independent values make them sums of
    terms of either sign that cancel to noise (the gradient small next to
    the rounding of its terms).  Tokens stay independent draws given the
    directions.
    """
    from scipy.special import ndtr, ndtri

    A = rng.standard_normal(batch + (d, d_v))
    A = A / np.linalg.norm(A, axis=-2, keepdims=True)
    with np.errstate(divide="ignore"):  # spread == 0 (probability 2^-53) maps to -inf: v = 0.5
        z = (Z_keys @ A + VALUE_NOISE * ndtri(spread)) / math.sqrt(1.0 + VALUE_NOISE**2)
    return 0.5 + ndtr(z)


def generate_cases(
    rng: np.random.Generator,
    n: int,
    d: int,
    d_v: int,
    batch: tuple[int, ...],
    *,
    fixed_d: bool,
    names: tuple[str, ...] = CASES,
) -> list[Case]:
    """The named cases for a layer of key dimension ``d`` (``fixed_d``: it takes no other)."""

    def normal(*shape):
        return rng.standard_normal(batch + shape)

    def draws():
        # every case draws its numbers in the same order whichever cases are asked for,
        # so a case's inputs depend on the seed and the sizes only
        yield "random", (normal(n, d), normal(n, d), normal(n, d_v))
        yield "odd length", (normal(2 * n + 5, d), normal(2 * n + 5, d), normal(2 * n + 5, d_v))
        yield "n=1", (normal(1, d), normal(1, d), normal(1, d_v))
        yield "d=1", (normal(n, 1), normal(n, 1), normal(n, d_v))
        tokens, values = normal(3, d), normal(3, d_v)
        idx = rng.integers(0, 3, size=n)
        X = np.take(tokens, idx, axis=-2)
        yield "repeated tokens", (X, X.copy(), np.take(values, idx, axis=-2))
        big = math.sqrt(LARGE_LOGIT * math.sqrt(d))
        yield "large norms", (
            _rescale_rows(normal(n, d), big),
            _rescale_rows(normal(n, d), big),
            normal(n, d_v),
        )  # fmt: skip
        yield "tiny norms", (TINY * normal(n, d), TINY * normal(n, d), normal(n, d_v))
        small = 0.5 / math.sqrt(d)
        Kp, spread = small * normal(n, d), rng.random(batch + (n, d_v))
        Qp = small * normal(n, d)
        m = ACROSS_BLOCKS
        yield "across blocks", (normal(m, d), normal(m, d), normal(m, d_v))
        # the values' key directions are drawn last: every other case keeps its numbers
        yield "positive values", (Qp, Kp, _values_along_keys(rng, Kp / small, spread, batch,
                                                             d, d_v))  # fmt: skip

    made: dict[str, tuple] = {}
    for name, inputs in draws():  # drawing stops once every case asked for is drawn
        made[name] = inputs
        if made.keys() >= set(names):
            break
    out: list[Case] = []
    for name in names:
        if name == "d=1" and fixed_d and d != 1:
            out.append(Case(name, None, None, None, f"{FIXED_D} at d = {d}"))
            continue
        Q, K, V = made[name]
        out.append(Case(name, Q, K, V))
    return out


def user_case(inputs: Any, layout: str) -> Case:
    """The user's own ``(Q, K, V)``, validated and brought to the internal layout."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 3:
        raise InvalidArgument(
            f"`inputs` must be a tuple (Q, K, V) of three arrays, got {describe(inputs)}"
        )
    Q, K, V = (
        as_array(a, name, min_ndim=2, dtype=np.float64)
        for a, name in zip(inputs, ("inputs[0] (Q)", "inputs[1] (K)", "inputs[2] (V)"), strict=True)
    )
    if layout == "bnhd":
        for arr, name in ((Q, "Q"), (K, "K"), (V, "V")):
            if arr.ndim != 4:
                raise InvalidArgument(
                    f"`inputs` {name} must have 4 dimensions (batch, n, heads, dim) for "
                    f"layout='bnhd', got {describe(arr)}"
                )
        Q, K, V = (from_layout(a, layout) for a in (Q, K, V))
    if not (Q.shape[:-1] == K.shape[:-1] and Q.shape[-1] == K.shape[-1]):
        raise InvalidArgument(
            f"`inputs` Q and K must have the same shape, got {describe(Q)} and {describe(K)}"
        )
    if V.shape[:-1] != K.shape[:-1]:
        raise InvalidArgument(
            f"`inputs` V must have the leading shape of K ({K.shape[:-1]}), got {describe(V)}"
        )
    return Case("user inputs", Q, K, V)


def to_layout(X: np.ndarray, layout: str) -> np.ndarray:
    """Internal ``(..., h, n, d)`` to the layer's layout (``bnhd``: ``(b, n, h, d)``)."""
    if layout == "bnhd":
        return np.swapaxes(X, -3, -2)
    return X


def from_layout(X: np.ndarray, layout: str) -> np.ndarray:
    """The layer's layout back to the internal ``(..., h, n, d)``."""
    return to_layout(X, layout)  # the swap is its own inverse


def gates_to_layout(g: np.ndarray, layout: str) -> np.ndarray:
    """Gates ``(..., h, n)`` to the layer's layout (``bnhd``: ``(b, n, h)``)."""
    if layout == "bnhd":
        return np.swapaxes(g, -2, -1)
    return g
