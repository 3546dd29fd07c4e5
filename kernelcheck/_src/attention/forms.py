"""Attention in every form: exact, kernelized, parallel, recurrent, chunked.

Claims C1, C2, C3, C10, C11, C12, C14, C15.  With rows ``q_i, k_j, v_j`` of
``Q, K`` (shape (..., n, d)) and ``V`` (shape (..., n, d_v)), every form
computes

    a_i = sum_{j in J(i)} kappa(q_i, k_j) v_j / sum_{j in J(i)} kappa(q_i, k_j),

with ``J(i) = {1..n}`` (bidirectional) or ``{1..i}`` (causal):

* :func:`softmax` -- ``kappa(q, k) = exp(scale q . k)``, computed stably (C1);
* :func:`kernelized` -- any kernel object, quadratically from its Gram block (C10);
* :func:`parallel` -- ``kappa(q, k) = phi(q) . phi(k)`` from feature matrices:
  ``phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)``; causal by prefix sums (C10);
* :func:`init` / :func:`step` / :func:`recurrent` -- the same as a recurrence
  over the state ``(S, z)`` whose size does not depend on n (C11, C14);
* :func:`chunked` -- causal: quadratic within a chunk, the recurrent state
  across chunks (C14); the fast causal form.

Leading (batch, head) dimensions are allowed and must agree between the three
inputs.  Every form takes ``Q, K, V`` (or ``phi_q, phi_k, V``) of one length n.

Normalisers.  ``phi(q_i) . z_i`` can be zero or negative for feature maps that
are not positive (odd Taylor orders, trigonometric random features; C12).  No
``eps`` is ever added: by default :class:`~kernelcheck.errors.BadNormalizer`
is raised; with ``on_bad_normalizer="report"`` the forms return an
:class:`AttentionOutput` holding the raw quotient, the normalisers and the
positions of the bad ones.

Error models (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3;
``u`` the unit roundoff, ``gamma_k = k u / (1 - k u)``), each an a-priori
entrywise bound on ``|computed - exact|`` for inputs taken as exact:

* :func:`linear_error_bound` -- the parallel, recurrent and chunked forms;
* :func:`softmax_error_bound` -- :func:`softmax`;
* :func:`kernelized_error_bound` -- :func:`kernelized`.

:func:`cost_model` states each form's operation count and state size.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_float_dtype,
    as_int,
    as_int_tuple,
    check_callable,
    check_choice,
    describe,
    result_dtype,
)
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure

__all__ = [
    "State",
    "AttentionOutput",
    "AttentionCost",
    "softmax",
    "kernelized",
    "parallel",
    "init",
    "step",
    "recurrent",
    "chunked",
    "linear_error_bound",
    "softmax_error_bound",
    "kernelized_error_bound",
    "cost_model",
    "FORMS",
    "BAD_NORMALIZER_ACTIONS",
]

#: Names of the forms known to :func:`cost_model`.
FORMS = ("softmax", "kernelized", "parallel", "recurrent", "chunked")

#: Values of ``on_bad_normalizer``.
BAD_NORMALIZER_ACTIONS = ("raise", "report")

# Intermediates are processed in blocks of at most this many entries
# (32 MiB of float64), so memory stays bounded for long sequences.
_BLOCK_ELEMENTS = 1 << 22
#: Fewest query blocks of a causal quadratic form (see ``_query_block_rows``).
CAUSAL_BLOCKS = 16
#: Smallest causal block, so that tiny inputs are not split into one-row blocks.
_MIN_CAUSAL_ROWS = 32

# Accuracy of NumPy's exp, in units of u (libm and SIMD versions are within a
# few ulp; 4 ulp is assumed by the softmax error model).
_EXP_ULPS = 4


# ---------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------


class State(NamedTuple):
    """The recurrent state ``(S, z)`` of linear attention (claims C11, C14).

    Attributes
    ----------
    S : numpy.ndarray
        ``sum_{j <= t} phi(k_j) v_j^T``, shape (..., D, d_v).
    z : numpy.ndarray
        ``sum_{j <= t} phi(k_j)``, shape (..., D).

    Its size, ``D (d_v + 1)`` numbers per batch entry, does not depend on the
    number of tokens consumed (C11).

    Examples
    --------
    >>> from kernelcheck.attention import init
    >>> init(4, 3).size
    16
    """

    S: np.ndarray
    z: np.ndarray

    @property
    def size(self) -> int:
        """Number of stored numbers, ``S.size + z.size``."""
        return int(self.S.size + self.z.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the state arrays."""
        return int(self.S.nbytes + self.z.nbytes)


@dataclass(frozen=True, eq=False)
class AttentionOutput(ResultMixin):
    """An attention output with its normalisers, for ``on_bad_normalizer="report"``.

    Attributes
    ----------
    out : numpy.ndarray
        The raw quotient ``numerator / normaliser``, shape (..., n, d_v).  At
        a bad position it is whatever the division gives (a finite value of
        the wrong sign for a negative normaliser, ``inf`` or ``nan`` for a
        zero one); it is never patched.
    normalizer : numpy.ndarray
        The computed normalisers ``sum_j kappa(q_i, k_j)``, shape (..., n).
    bad_positions : numpy.ndarray
        Integer indices into ``normalizer`` (one row per bad entry) where the
        normaliser is ``<= 0`` (claim C12).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import parallel
    >>> phi = np.array([[1.0], [-1.0]])
    >>> res = parallel(phi, phi, np.ones((2, 1)), causal=True, on_bad_normalizer="report")
    >>> res.bad_positions.tolist()
    [[1]]
    """

    out: np.ndarray
    normalizer: np.ndarray
    bad_positions: np.ndarray

    @property
    def ok(self) -> bool:
        """True when every normaliser is positive."""
        return self.bad_positions.shape[0] == 0

    @property
    def bad_values(self) -> np.ndarray:
        """The normalisers at :attr:`bad_positions`."""
        return self.normalizer[tuple(self.bad_positions.T)]

    def __str__(self) -> str:
        shape = tuple(self.out.shape)
        nbad = self.bad_positions.shape[0]
        if nbad == 0:
            return f"attention output of shape {shape}; all {self.normalizer.size} normalisers > 0"
        first = tuple(int(i) for i in self.bad_positions[0])
        return (
            f"attention output of shape {shape}; {nbad} of {self.normalizer.size} normalisers "
            f"<= 0 (first at {first}: {float(self.normalizer[first]):.3g})"
        )


@dataclass(frozen=True)
class AttentionCost(ResultMixin):
    """Operation count and state size of one attention form (claims C2, C3, C11).

    Attributes
    ----------
    form : str
        One of :data:`FORMS`.
    causal : bool
        Whether the count is for causal attention.
    n, d, D, d_v, chunk_size : int
        The sizes the count is for.
    flops : int
        Floating-point operations for one sequence (one batch entry): a
        multiply-add counts 2, an ``exp``, a division, an addition 1 each.
        Feature maps are not counted (they are the caller's input).
    state_size : int
        Numbers carried from one token to the next in the recurrent view: the
        state ``(S, z)``, ``D (d_v + 1)``, for the linear forms (independent
        of n, C11); the key/value cache ``n (d + d_v)`` for the exact forms.
    """

    form: str
    causal: bool
    n: int
    d: int
    D: int
    d_v: int
    chunk_size: int
    flops: int
    state_size: int

    def flops_per_token(self) -> float:
        """``flops / n``: constant in n for linear forms (C3), linear in n for exact ones (C2)."""
        return self.flops / self.n

    def __str__(self) -> str:
        kind = "causal" if self.causal else "bidirectional"
        return (
            f"{self.form} ({kind}), n={self.n}: {self.flops:.3e} flops, "
            f"state of {self.state_size} numbers"
        )


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def _triple_iv(A: Any, B: Any, V: Any, names: tuple[str, str, str], what: str):
    """Validate a (queries, keys, values) triple of shape (..., n, x).

    ``what`` names the shared last dimension of the first two ("d" or "D").
    Returns the three arrays cast to one dtype (float32 only if all are).
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
    n = A.shape[-2]
    if B.shape[-2] != n or V.shape[-2] != n:
        raise InvalidArgument(
            f"`{names[0]}`, `{names[1]}` and `{names[2]}` must have the same number of "
            f"tokens n (axis -2), got {n}, {B.shape[-2]} and {V.shape[-2]}"
        )
    if B.shape[-1] != A.shape[-1]:
        raise InvalidArgument(
            f"`{names[0]}` and `{names[1]}` must have the same last dimension {what}, got "
            f"{describe(A)} and {describe(B)}"
        )
    dtype = result_dtype(A, B, V)
    return A.astype(dtype, copy=False), B.astype(dtype, copy=False), V.astype(dtype, copy=False)


def _action_iv(value: Any) -> str:
    return check_choice(value, "on_bad_normalizer", BAD_NORMALIZER_ACTIONS)


def _scale_iv(scale: Any, d: int) -> float:
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


def _swap(A: np.ndarray) -> np.ndarray:
    return np.swapaxes(A, -1, -2)


def _with_ones(V: np.ndarray) -> np.ndarray:
    """``[V, 1]``: one product then gives numerators and normalisers together."""
    W = np.empty(V.shape[:-1] + (V.shape[-1] + 1,), dtype=V.dtype)
    W[..., :-1] = V
    W[..., -1] = 1.0
    return W


def _batch_size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


# ---------------------------------------------------------------------------
# Finishing: numerator / normaliser, bad normalisers
# ---------------------------------------------------------------------------


def _finish(num: np.ndarray, den: np.ndarray, action: str, form: str):
    if not (np.isfinite(num).all() and np.isfinite(den).all()):
        raise NumericalFailure(
            f"`{form}` attention overflowed: a numerator or normaliser is not finite "
            f"({num.dtype}); scale the features or inputs down"
        )
    bad = den <= 0
    if bad.any():
        positions = np.argwhere(bad)
        if action == "raise":
            first = tuple(int(i) for i in positions[0])
            raise BadNormalizer(
                f"{len(positions)} of {den.size} attention normalisers are <= 0 in `{form}` "
                f"(first at position {first}: {float(den[first]):.6g}); the features are "
                "not positive (odd Taylor order or trigonometric features, claim C12). "
                "kernelcheck never adds an eps: pass on_bad_normalizer='report' to get the "
                "raw output with the bad positions",
                positions=positions,
                values=den[bad],
            )
        with np.errstate(divide="ignore", invalid="ignore"):
            out = num / den[..., None]
        return AttentionOutput(out=out, normalizer=den, bad_positions=positions)
    out = num / den[..., None]
    if action == "report":
        return AttentionOutput(
            out=out, normalizer=den, bad_positions=np.empty((0, den.ndim), dtype=np.intp)
        )
    return out


# ---------------------------------------------------------------------------
# Exact forms
# ---------------------------------------------------------------------------


def _softmax_iv(Q, K, V, causal, scale):
    Q, K, V = _triple_iv(Q, K, V, ("Q", "K", "V"), "d")
    causal = as_bool(causal, "causal")
    scale = _scale_iv(scale, Q.shape[-1])
    return Q, K, V, causal, scale


def _query_block_rows(n: int, budget_rows: int, causal: bool) -> int:
    """Rows per query block for the quadratic forms.

    Memory caps a block at ``budget_rows`` rows.  Causal forms also use at
    least ``CAUSAL_BLOCKS`` blocks, so a block forms logits only up to its own
    last row: the pairs formed are ``n (n + r) / 2`` for ``r`` rows a block,
    within ``1 + 1 / CAUSAL_BLOCKS`` of the ``n (n + 1) / 2`` the mask keeps,
    at every n (a single block would form all ``n^2`` at small n and half of
    them at large n, bending the measured exponent of C2).
    """
    rows = max(1, min(n, budget_rows))
    if causal:
        rows = min(rows, max(_MIN_CAUSAL_ROWS, -(-n // CAUSAL_BLOCKS)))
    return rows


def _formed_pairs(n: int, causal: bool) -> int:
    """(query, key) pairs the quadratic forms evaluate for one sequence of length n.

    ``n^2`` bidirectional; causal, ``sum_b r_b * e_b`` over query blocks of
    ``r_b`` rows ending at row ``e_b`` (see ``_query_block_rows``), which is
    ``n (n + r) / 2`` for equal blocks of r rows: the masked pairs inside each
    diagonal block are formed and then zeroed.
    """
    if not causal:
        return n * n
    rows = _query_block_rows(n, _BLOCK_ELEMENTS // n, True)
    return sum((min(n, i0 + rows) - i0) * min(n, i0 + rows) for i0 in range(0, n, rows))


def softmax(Q: Any, K: Any, V: Any, *, causal: bool = False, scale: float | None = None):
    """Exact softmax attention, numerically stable (claims C1, C2, C10).

    ``A = softmax(scale Q K^T) V`` row by row:
    ``a_i = sum_j w_ij v_j`` with ``w_ij = exp(s_ij - m_i) / sum_l exp(s_il - m_i)``,
    ``s_ij = scale q_i . k_j`` and ``m_i = max_j s_ij``.  Subtracting the row
    maximum changes nothing mathematically and keeps every exponential in
    (0, 1], so no logit overflows; the normaliser is ``>= 1`` and never bad.
    Causal attention restricts j to ``j <= i``.

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    causal : bool
        Restrict row i to keys ``j <= i``.
    scale : float, optional
        Logit scale; ``1 / sqrt(d)`` by default (C1).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Notes
    -----
    Operation count per sequence (C2): ``2 n^2 d`` for the logits, ``3 n^2``
    for the max, exp and row sums, ``2 n^2 d_v`` for the weighted sum (about
    half of all three when causal: only ``j <= i`` is formed), ``n d_v``
    divisions.  Query rows are processed in blocks so that memory stays at
    ``O(block n)``.  Error model: :func:`softmax_error_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import softmax
    >>> Q = K = np.array([[1000.0], [-1000.0]])   # logits far beyond exp's range
    >>> softmax(Q, K, np.array([[1.0], [2.0]]), scale=1.0).tolist()
    [[1.0], [2.0]]
    """
    Q, K, V, causal, scale = _softmax_iv(Q, K, V, causal, scale)
    batch, n = Q.shape[:-2], Q.shape[-2]
    out = np.empty(V.shape, dtype=V.dtype)
    Qs = Q * Q.dtype.type(scale)
    rows = _query_block_rows(n, _BLOCK_ELEMENTS // max(1, n * _batch_size(batch)), causal)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        kend = i1 if causal else n
        with np.errstate(over="ignore", invalid="ignore"):
            s = Qs[..., i0:i1, :] @ _swap(K[..., :kend, :])
        if causal:
            future = np.arange(kend)[None, :] > np.arange(i0, i1)[:, None]
            s[..., future] = -np.inf
        m = s.max(axis=-1, keepdims=True)
        if not np.isfinite(m).all():
            raise NumericalFailure(
                "`softmax` logits overflowed: scale * q . k is beyond the floating-point "
                f"range ({Q.dtype}); scale the inputs down"
            )
        s -= m
        np.exp(s, out=s)
        denom = s.sum(axis=-1, keepdims=True)
        with np.errstate(over="ignore", invalid="ignore"):
            out[..., i0:i1, :] = (s @ V[..., :kend, :]) / denom
    if not np.isfinite(out).all():
        raise NumericalFailure(
            "`softmax` attention overflowed: a weighted sum of values is beyond the "
            f"floating-point range ({V.dtype}, max |V| = {float(np.abs(V).max()):.3g}); "
            "scale the values down"
        )
    return out


def _kernelized_iv(Q, K, V, kernel, causal, action):
    Q, K, V = _triple_iv(Q, K, V, ("Q", "K", "V"), "d")
    check_callable(kernel, "kernel")
    causal = as_bool(causal, "causal")
    action = _action_iv(action)
    return Q, K, V, causal, action


def _gram_blocks(kernel, Q2, K2, causal, fn):
    """Yield ``(i0, i1, G)`` Gram blocks of ``fn(Q2[i0:i1], K2)``, causally masked."""
    n = Q2.shape[0]
    rows = _query_block_rows(n, _BLOCK_ELEMENTS // n, causal)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        kend = i1 if causal else n
        try:
            G = np.asarray(fn(Q2[i0:i1], K2[:kend]))
        except (InvalidArgument, NumericalFailure, BadNormalizer):
            raise
        except Exception as exc:
            raise InvalidArgument(f"`kernel` raised {type(exc).__name__}: {exc}") from exc
        if G.shape != (i1 - i0, kend):
            raise InvalidArgument(
                f"`kernel` returned a Gram block of shape {G.shape} for inputs of shapes "
                f"{Q2[i0:i1].shape} and {K2[:kend].shape}; expected {(i1 - i0, kend)}"
            )
        if G.dtype.kind not in "biuf":
            raise InvalidArgument(f"`kernel` must return real numbers, got {describe(G)}")
        G = G.astype(Q2.dtype, copy=True)
        if not np.isfinite(G).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(G))[0])
            raise InvalidArgument(
                f"`kernel` returned a non-finite value {G[bad]!r} at entry "
                f"{(bad[0] + i0, bad[1])} of its Gram block"
            )
        if causal:
            G[np.arange(kend)[None, :] > np.arange(i0, i1)[:, None]] = 0.0
        yield i0, i1, G


def kernelized(
    Q: Any,
    K: Any,
    V: Any,
    kernel: Any,
    *,
    causal: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Exact kernelized attention from the kernel's Gram block (claim C10).

    ``a_i = sum_j kappa(q_i, k_j) v_j / sum_j kappa(q_i, k_j)`` with
    ``j <= i`` when causal.  ``softmax(Q, K, V)`` equals
    ``kernelized(Q, K, V, Exponential(1 / sqrt(d)))`` (up to the two error
    models), since ``exp(q . k / sqrt d)`` is that kernel.

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    kernel : callable
        A kernel object (``kernel(X, Y)`` returns the (n, m) Gram block),
        e.g. from :mod:`kernelcheck.kernels`.
    causal : bool
    on_bad_normalizer : {"raise", "report"}
        A kernel with negative values (``Linear()``, odd Taylor orders) can
        give a normaliser ``<= 0``: raise :class:`~kernelcheck.errors.BadNormalizer`
        or return an :class:`AttentionOutput`.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v), or :class:`AttentionOutput`

    Notes
    -----
    Operation count per sequence: ``n^2`` kernel evaluations (about ``2 d``
    flops each for dot-product and distance kernels), ``2 n^2 (d_v + 1)`` for
    the products with ``[V, 1]``, ``n d_v`` divisions; halved when causal only
    in the products (the masked Gram block is still evaluated).  Error model:
    :func:`kernelized_error_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Exponential
    >>> from kernelcheck.attention import kernelized, softmax
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 5, 4))
    >>> a = kernelized(Q, K, V, Exponential(0.5))
    >>> bool(np.allclose(a, softmax(Q, K, V)))
    True
    """
    Q, K, V, causal, action = _kernelized_iv(Q, K, V, kernel, causal, on_bad_normalizer)
    batch, dv = Q.shape[:-2], V.shape[-1]
    W = _with_ones(V)
    H = np.empty(V.shape[:-1] + (dv + 1,), dtype=V.dtype)
    for idx in np.ndindex(*batch):
        for i0, i1, G in _gram_blocks(kernel, Q[idx], K[idx], causal, kernel):
            with np.errstate(over="ignore", invalid="ignore"):
                H[idx][i0:i1] = G @ W[idx][: G.shape[1]]
    return _finish(H[..., :dv], H[..., dv], action, "kernelized")


# ---------------------------------------------------------------------------
# Linear forms
# ---------------------------------------------------------------------------


def _features_iv(phi_q, phi_k, V, causal, action):
    phi_q, phi_k, V = _triple_iv(phi_q, phi_k, V, ("phi_q", "phi_k", "V"), "D")
    causal = as_bool(causal, "causal")
    action = _action_iv(action)
    return phi_q, phi_k, V, causal, action


def _prefix_sum_inplace(P: np.ndarray) -> None:
    """Running sum over axis -3, in place, one slice at a time.

    A loop over the axis adds whole (D, m) slices at memory speed;
    ``np.cumsum`` along a non-last axis walks the array with a large stride
    and is tens of times slower for these shapes.
    """
    for t in range(1, P.shape[-3]):
        np.add(P[..., t, :, :], P[..., t - 1, :, :], out=P[..., t, :, :])


def _causal_prefix(A: np.ndarray, B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``H_i = sum_{j <= i} (a_i . b_j) w_j`` by prefix sums of ``b_j w_j^T``.

    Blocks of tokens hold at most ``_BLOCK_ELEMENTS`` state entries; the state
    at the end of a block is carried into the next.
    """
    batch, n, D = A.shape[:-2], A.shape[-2], A.shape[-1]
    m = W.shape[-1]
    H = np.empty(batch + (n, m), dtype=W.dtype)
    S = np.zeros(batch + (D, m), dtype=W.dtype)
    rows = max(1, min(n, _BLOCK_ELEMENTS // max(1, D * m * _batch_size(batch))))
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        P = B[..., i0:i1, :, None] * W[..., i0:i1, None, :]  # (..., b, D, m)
        P[..., 0, :, :] += S
        _prefix_sum_inplace(P)
        H[..., i0:i1, :] = (A[..., i0:i1, None, :] @ P)[..., 0, :]
        S = P[..., -1, :, :].copy()
    return H


def parallel(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    causal: bool = False,
    on_bad_normalizer: str = "raise",
):
    """Linear attention from feature matrices, in parallel (claims C10, C14).

    Bidirectional: ``A = phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)`` (row-wise
    division), computed as two matrix products with ``[V, 1]``.  Causal:
    ``a_i = phi(q_i)^T S_i / phi(q_i) . z_i`` with the prefix sums
    ``S_i = sum_{j <= i} phi(k_j) v_j^T``, ``z_i = sum_{j <= i} phi(k_j)``,
    formed block by block (memory ``O(block D d_v)``, never an n x n mask).

    Parameters
    ----------
    phi_q, phi_k : array_like, shape (..., n, D)
        Feature matrices ``phi(Q)``, ``phi(K)``.
    V : array_like, shape (..., n, d_v)
    causal : bool
    on_bad_normalizer : {"raise", "report"}
        What to do when a normaliser ``phi(q_i) . z_i <= 0`` (C12): raise
        :class:`~kernelcheck.errors.BadNormalizer`, or return an
        :class:`AttentionOutput` with the positions.  Never an added eps.

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v), or :class:`AttentionOutput`

    Notes
    -----
    Operation count per sequence (C3): bidirectional
    ``4 n D (d_v + 1) + n d_v`` (two products with inner dimensions n and D,
    then the divisions); causal ``4 n D (d_v + 1) + n d_v`` as well (outer
    products, prefix sums, contraction).  State: ``D (d_v + 1)``.  Error
    model: :func:`linear_error_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import parallel
    >>> phi = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> V = np.array([[1.0], [2.0], [3.0]])
    >>> parallel(phi, phi, V, causal=True).ravel().tolist()
    [1.0, 2.0, 2.25]
    """
    phi_q, phi_k, V, causal, action = _features_iv(phi_q, phi_k, V, causal, on_bad_normalizer)
    dv = V.shape[-1]
    W = _with_ones(V)
    with np.errstate(over="ignore", invalid="ignore"):
        if causal:
            H = _causal_prefix(phi_q, phi_k, W)
        else:
            H = phi_q @ (_swap(phi_k) @ W)
    return _finish(H[..., :dv], H[..., dv], action, "parallel")


def init(D: int, d_v: int, *, batch_shape: tuple[int, ...] = (), dtype: Any = np.float64) -> State:
    """The empty recurrent state ``S = 0`` (D x d_v), ``z = 0`` (D) (claims C11, C14).

    Parameters
    ----------
    D : int
        Feature dimension.
    d_v : int
        Value dimension.
    batch_shape : tuple of int
        Leading (batch, head) dimensions; ``()`` broadcasts against any batch.
    dtype : float64 or float32

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
    return State(
        S=np.zeros(batch_shape + (D, d_v), dtype=dtype), z=np.zeros(batch_shape + (D,), dtype=dtype)
    )


def _step_raw(state: State, phi_q, phi_k, v):
    """One recurrence step without checks: new state, numerator, normaliser."""
    S = state.S + phi_k[..., :, None] * v[..., None, :]
    z = state.z + phi_k
    num = (phi_q[..., None, :] @ S)[..., 0, :]
    den = np.sum(phi_q * z, axis=-1)
    return State(S, z), num, den


def _step_iv(state, phi_q, phi_k, v, action):
    if not isinstance(state, State):
        raise InvalidArgument(f"`state` must be a State from init(), got {describe(state)}")
    S = as_array(state.S, "state.S", min_ndim=2)
    z = as_array(state.z, "state.z", min_ndim=1)
    D, dv = S.shape[-2], S.shape[-1]
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
    try:
        np.broadcast_shapes(
            S.shape[:-2], z.shape[:-1], phi_q.shape[:-1], phi_k.shape[:-1], v.shape[:-1]
        )
    except ValueError:
        raise InvalidArgument(
            "the leading (batch/head) dimensions of `state`, `phi_q`, `phi_k` and `v` do not "
            f"broadcast: {S.shape[:-2]}, {phi_q.shape[:-1]}, {phi_k.shape[:-1]}, {v.shape[:-1]}"
        ) from None
    dtype = result_dtype(S, z, phi_q, phi_k, v)
    cast = [a.astype(dtype, copy=False) for a in (S, z, phi_q, phi_k, v)]
    return State(cast[0], cast[1]), cast[2], cast[3], cast[4], _action_iv(action)


def step(state: State, phi_q: Any, phi_k: Any, v: Any, *, on_bad_normalizer: str = "raise"):
    """One token of linear attention as a recurrence (claims C11, C14).

    ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``z_t = z_{t-1} + phi(k_t)``,
    ``y_t = S_t^T phi(q_t) / (z_t . phi(q_t))``.  Pure: the input state is
    not modified; a new one is returned.

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
    state, phi_q, phi_k, v, action = _step_iv(state, phi_q, phi_k, v, on_bad_normalizer)
    with np.errstate(over="ignore", invalid="ignore"):
        new, num, den = _step_raw(state, phi_q, phi_k, v)
    return new, _finish(num, den, action, "step")


def recurrent(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    on_bad_normalizer: str = "raise",
    return_state: bool = False,
):
    """Causal linear attention by running :func:`step` over the sequence (claims C11, C14).

    ``state = init(D, d_v)``; for ``t = 1..n``: ``state, y_t = step(state, ...)``.
    Equals ``parallel(phi_q, phi_k, V, causal=True)`` and :func:`chunked`
    within :func:`linear_error_bound`.

    Parameters
    ----------
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    on_bad_normalizer : {"raise", "report"}
    return_state : bool
        Also return the final :class:`State` (its size is ``D (d_v + 1)``
        per batch entry whatever n is, C11).

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
    phi_q, phi_k, V, _, action = _features_iv(phi_q, phi_k, V, True, on_bad_normalizer)
    return_state = as_bool(return_state, "return_state")
    batch, n, D, dv = phi_q.shape[:-2], phi_q.shape[-2], phi_q.shape[-1], V.shape[-1]
    state = init(D, dv, batch_shape=batch, dtype=V.dtype)
    num = np.empty(V.shape, dtype=V.dtype)
    den = np.empty(batch + (n,), dtype=V.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n):
            state, num[..., t, :], den[..., t] = _step_raw(
                state, phi_q[..., t, :], phi_k[..., t, :], V[..., t, :]
            )
    result = _finish(num, den, action, "recurrent")
    return (result, state) if return_state else result


def chunked(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    chunk_size: int = 64,
    on_bad_normalizer: str = "raise",
):
    """Causal linear attention in chunks: quadratic within, recurrent across (claim C14).

    The sequence is cut into chunks of ``C = chunk_size`` tokens (the last
    may be shorter).  For a chunk c with rows ``i`` and the state
    ``(S, z)`` of all earlier chunks,

        H_c = tril(phi(Q_c) phi(K_c)^T) [V_c, 1] + phi(Q_c) [S, z],

    then ``[S, z] += phi(K_c)^T [V_c, 1]``; ``a_i = H_i[:d_v] / H_i[d_v]``.
    Full chunks are processed together as batched matrix products, their
    states by a cumulative sum over chunks (in groups, so memory stays
    bounded).

    Parameters
    ----------
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    chunk_size : int >= 1
        Any size, divisor of n or not; ``C >= n`` is one quadratic block,
        ``C = 1`` is the recurrence.
    on_bad_normalizer : {"raise", "report"}

    Returns
    -------
    numpy.ndarray of shape (..., n, d_v), or :class:`AttentionOutput`

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
    phi_q, phi_k, V, _, action = _features_iv(phi_q, phi_k, V, True, on_bad_normalizer)
    C = as_int(chunk_size, "chunk_size", minimum=1)
    dv = V.shape[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        H = _chunked_products(phi_q, phi_k, _with_ones(V), C)
    return _finish(H[..., :dv], H[..., dv], action, "chunked")


def _chunked_products(A: np.ndarray, B: np.ndarray, W: np.ndarray, C: int) -> np.ndarray:
    """``H_i = sum_{j <= i} (a_i . b_j) w_j`` in chunks of C tokens.

    Per group of full chunks: the chunk-local products (scores, their
    product with ``w``, the state increments) are independent across chunks
    and run on worker threads, each on a slice of chunks with single-threaded
    BLAS (many small GEMMs parallelise better across chunks than inside one
    GEMM); the running sum of the states is sequential; the products with the
    state before each chunk are again independent.  Each chunk's products
    are the same calls whatever the number of workers, so the error model
    does not depend on it.
    """
    batch, n, D = A.shape[:-2], A.shape[-2], A.shape[-1]
    m = W.shape[-1]
    C = min(C, n)
    H = np.empty(batch + (n, m), dtype=W.dtype)
    S = np.zeros(batch + (D, m), dtype=W.dtype)
    nfull = n // C
    keep = np.tril(np.ones((C, C), dtype=W.dtype))
    # Chunks per group: bounds the (group, D, m) stack of per-chunk states.
    group = max(1, min(nfull or 1, _BLOCK_ELEMENTS // max(1, D * m * _batch_size(batch))))
    big = n * (C + D) * m * _batch_size(batch) >= _PARALLEL_WORK
    with _chunk_workers(big) as workers:
        for g0 in range(0, nfull, group):
            g1 = min(nfull, g0 + group)
            k = g1 - g0
            a = A[..., g0 * C : g1 * C, :].reshape(batch + (k, C, D))
            b = B[..., g0 * C : g1 * C, :].reshape(batch + (k, C, D))
            w = W[..., g0 * C : g1 * C, :].reshape(batch + (k, C, m))
            h = np.empty(batch + (k, C, m), dtype=W.dtype)
            dS = np.empty(batch + (k, D, m), dtype=W.dtype)

            def local(lo, hi, a=a, b=b, w=w, h=h, dS=dS):
                bT = _swap(b[..., lo:hi, :, :])
                scores = a[..., lo:hi, :, :] @ bT  # (..., chunks, C, C)
                scores *= keep
                np.matmul(scores, w[..., lo:hi, :, :], out=h[..., lo:hi, :, :])
                np.matmul(bT, w[..., lo:hi, :, :], out=dS[..., lo:hi, :, :])

            def carry(lo, hi, a=a, h=h, dS=dS, S=S):
                if lo == 0:
                    h[..., 0, :, :] += a[..., 0, :, :] @ S
                    lo = 1
                if hi > lo:
                    h[..., lo:hi, :, :] += a[..., lo:hi, :, :] @ dS[..., lo - 1 : hi - 1, :, :]

            _split(local, k, workers)
            dS[..., 0, :, :] += S
            _prefix_sum_inplace(dS)  # dS[c] is now the state after chunk c
            _split(carry, k, workers)
            H[..., g0 * C : g1 * C, :] = h.reshape(batch + (k * C, m))
            S = dS[..., -1, :, :].copy()
    r0 = nfull * C
    if r0 < n:
        a, b, w = A[..., r0:, :], B[..., r0:, :], W[..., r0:, :]
        c = n - r0
        scores = a @ _swap(b)
        scores *= keep[:c, :c]
        H[..., r0:, :] = scores @ w + a @ S
    return H


# Below this many multiply-adds (about 2**24) the chunked form runs inline.
_PARALLEL_WORK = 1 << 24


class _Workers:
    """A thread pool and its size, or ``None`` for inline execution."""

    def __init__(self, pool, size):
        self.pool = pool
        self.size = size


@contextmanager
def _chunk_workers(enabled: bool):
    """Worker threads with BLAS limited to one thread each, if threadpoolctl is present.

    Without threadpoolctl (or for small work, or on one core) everything runs
    inline with the BLAS library's own threading.
    """
    controller = _blas_controller() if enabled else None
    threads = 1
    if controller is not None:
        threads = max((lib.num_threads for lib in controller.lib_controllers), default=1)
    if controller is None or threads < 2:
        yield _Workers(None, 1)
        return
    with controller.limit(limits=1, user_api="blas"):
        with ThreadPoolExecutor(max_workers=threads) as pool:
            yield _Workers(pool, threads)


_CONTROLLER: list = []


def _blas_controller():
    """The threadpoolctl controller of the BLAS libraries (created once), or None."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController

            controller = ThreadpoolController().select(user_api="blas")
            _CONTROLLER.append(controller if controller.lib_controllers else None)
        except Exception:  # threadpoolctl missing or unable to inspect: run inline
            _CONTROLLER.append(None)
    return _CONTROLLER[0]


def _split(fn, k: int, workers: _Workers) -> None:
    """Run ``fn(lo, hi)`` over ``[0, k)``, cut into one contiguous range per worker.

    The workers run under the caller's floating-point error state
    (``np.errstate`` is per thread: without this, warnings the caller
    silenced would leak from the worker threads).
    """
    if workers.pool is None or k < 2:
        fn(0, k)
        return
    parts = min(workers.size, k)
    edges = [round(i * k / parts) for i in range(parts + 1)]
    err = np.geterr()

    def run(lo: int, hi: int) -> None:
        with np.errstate(**err):
            fn(lo, hi)

    futures = [
        workers.pool.submit(run, lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]
    for f in futures:
        f.result()


# ---------------------------------------------------------------------------
# Error models
# ---------------------------------------------------------------------------


def _dtype_iv(dtype: Any, default: np.dtype) -> np.dtype:
    return default if dtype is None else as_float_dtype(dtype, "dtype")


def _quotient_bound(absH, E, den_hat, u):
    """Bound on ``|fl(num)/fl(den) - num/den|`` for any form sharing the error model.

    ``absH = [|kappa| |V|, |kappa| 1]`` (absolute products), ``E`` the bound on
    the numerator and normaliser errors, ``den_hat`` one form's computed
    normaliser.  For a form X whose normaliser is within ``E_den`` of the
    exact one (as is ``den_hat``'s):

        den_exact >= den_hat - E_den =: lo1,  den_X >= den_hat - 2 E_den =: lo2,
        |num_X / den_X| <= (absnum + E_num) / lo2 =: R,
        err_X <= (E_num + R E_den) / lo1 + u R (1 + u).

    ``inf`` where ``lo2 <= 0``: the normaliser's sign is not certain there.
    """
    E_num, E_den = E[..., :-1], E[..., -1:]
    absnum = absH[..., :-1]
    den = den_hat[..., None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo1 = den - E_den  # NaN from inf - inf fails lo2 > 0 below: bound inf
        lo2 = den - 2.0 * E_den
        R = (absnum + E_num) / lo2
        bound = (E_num + R * E_den) / lo1 + u * R * (1.0 + u)
    bound = np.where(lo2 > 0, bound, np.inf)
    # The bound's own evaluation: a handful of roundings on non-negative terms.
    return bound * (1.0 + gamma(8, np.float64))


def _underflow_term(terms: int, dtype, *factors: np.ndarray) -> float:
    """Absolute error from gradual underflow in sums of ``terms`` triple products.

    With underflow, ``fl(a op b) = (a op b)(1 + delta) + eta`` (Higham
    sec. 2.1); subnormal additions are exact, so each product of a term
    ``a b c`` adds at most ``eta`` before being multiplied by at most one more
    factor: ``3 terms eta prod_f (1 + max |f|)``.  Negligible unless results
    are themselves near the underflow threshold.
    """
    value = 3.0 * terms * eta(dtype)
    for f in factors:
        value *= 1.0 + float(np.max(f)) if f.size else 1.0
    return value


def linear_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    *,
    causal: bool = False,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of the linear forms (parallel, recurrent, chunked).

    Every linear form computes ``num_i = sum_{j in J(i)} (phi_q_i . phi_k_j) v_j``
    and ``den_i = sum_{j in J(i)} phi_q_i . phi_k_j`` with each term passing
    through at most ``k = 2 n + 2 D + 4`` rounded operations in any of the
    three summation orders (bidirectional ``n + D + 1``; prefix sums and
    recurrence ``n + D + 1`` plus one carry per block; chunks
    ``C + 2 n / C + D + 1``).  Hence (Higham, Lemma 3.4)

        |num_hat - num| <= gamma_k |phi_q| |phi_k|^T |V| =: E_num,
        |den_hat - den| <= gamma_k |phi_q| |phi_k|^T 1   =: E_den,

    and the quotient obeys the bound of :func:`_quotient_bound`:
    ``(E_num + R E_den) / (den - E_den) + u R``, ``R`` a bound on ``|a_i|``.
    Gradual underflow adds ``3 n D eta (1 + max|phi_q|)(1 + max|phi_k|)(1 + max|V|)``
    to both (``eta`` the smallest subnormal).
    The features are taken as exact.  When they were computed with a
    relative error of ``gamma_e`` per entry (``e = ExactFeatureMap.ops``),
    pass ``extra_ops = 2 e``; ``extra_ops`` also covers rounding the inputs to
    a lower precision (2 more).

    Parameters
    ----------
    phi_q, phi_k : array_like, shape (..., n, D)
    V : array_like, shape (..., n, d_v)
    causal : bool
    dtype : float64 or float32, optional
        Precision whose unit roundoff u is used (default: the inputs').
    extra_ops : int >= 0
        Additional roundings per term (see above).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
        ``inf`` where the normaliser's sign is not certain.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import linear_error_bound, parallel, recurrent
    >>> rng = np.random.default_rng(1)
    >>> pq, pk = rng.random((2, 8, 4))
    >>> V = rng.normal(size=(8, 3))
    >>> err = np.abs(parallel(pq, pk, V, causal=True) - recurrent(pq, pk, V))
    >>> bool((err <= 2 * linear_error_bound(pq, pk, V, causal=True)).all())
    True
    """
    phi_q, phi_k, V, causal, _ = _features_iv(phi_q, phi_k, V, causal, "raise")
    dt = _dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    # An overflowing product makes the bound inf ("no bound in float64"), not a
    # warning; inf - inf in the signed products gives a NaN normaliser, which
    # _quotient_bound also turns into inf.
    with np.errstate(over="ignore", invalid="ignore"):
        return _linear_error_bound(phi_q, phi_k, V, causal, dt, extra_ops)


def _linear_error_bound(phi_q, phi_k, V, causal, dt, extra_ops):
    n, D = phi_q.shape[-2], phi_q.shape[-1]
    W = _with_ones(V).astype(np.float64)
    aq, ak = np.abs(phi_q).astype(np.float64), np.abs(phi_k).astype(np.float64)
    np.abs(W, out=W)
    if causal:
        absH = _chunked_products(aq, ak, W, 64)
        H = _chunked_products(
            phi_q.astype(np.float64), phi_k.astype(np.float64), _with_ones(V.astype(np.float64)), 64
        )
    else:
        absH = aq @ (_swap(ak) @ W)
        H = phi_q.astype(np.float64) @ (
            _swap(phi_k.astype(np.float64)) @ _with_ones(V.astype(np.float64))
        )
    # absH is a sum of non-negative terms: its own rounding is relative, at
    # most gamma_k in float64, absorbed by the factor (1 + g64).
    k = 2 * n + 2 * D + 4
    g64 = gamma(k, np.float64)
    E = gamma(k + extra_ops, dt) * (1.0 + g64) * absH
    E = E + _underflow_term(n * D, dt, aq, ak, W)
    if dt != np.dtype(np.float64):
        # den_hat is the float64 normaliser, within the float64 model of the
        # exact one: the quotient bound needs both models.
        E = E + g64 * (1.0 + g64) * absH
    return _quotient_bound(absH * (1.0 + g64), E, H[..., -1], unit_roundoff(dt))


def softmax_error_bound(
    Q: Any,
    K: Any,
    V: Any,
    *,
    causal: bool = False,
    scale: float | None = None,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of :func:`softmax` (claim C1).

    Logits ``s_ij = scale q_i . k_j`` are computed to within
    ``gamma_(d+2) scale |q_i| . |k_j| <= gamma_(d+2) r_i`` with
    ``r_i = scale |q_i| . max_j |k_j|`` (the float scale's own rounding is one
    of the d + 2).  Subtracting the row maximum adds ``u |s_ij - m_i| <= 2 u r_i``
    and exp (accurate to 4 ulp) ``4 u``, all as perturbations of the logits by
    at most ``theta_i``.  Softmax weights move by a factor in
    ``[exp(-2 theta_i), exp(2 theta_i)]``, so the output moves by at most
    ``expm1(2 theta_i) max_j |v_j|``; the two sums of at most n terms and the
    division add ``(2 gamma_n / (1 - gamma_n) + u) max_j |v_j|``:

        |a_hat - a|_im <= [expm1(2 theta_i)(1 + u) + 2 gamma_n / (1 - gamma_n) + u] max_j |v_jm|,
        theta_i = gamma_(d+2) r_i + 2 u r_i + 5 u.

    Gradual underflow adds ``(3 n + 2) eta (1 + max_j |v_j|)``.
    ``max_j`` runs over ``j <= i`` when causal.  Algorithm-independent enough
    to bound any stable softmax attention (block-wise or online maxima).

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    causal : bool
    scale : float, optional
        ``1 / sqrt(d)`` by default.
    dtype : float64 or float32, optional
        Precision whose unit roundoff is used (default: the inputs').
    extra_ops : int >= 0
        Extra roundings per logit and per sum term (e.g. 2 for inputs rounded
        to a lower precision first).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import softmax, softmax_error_bound
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 6, 4))
    >>> bool(softmax_error_bound(Q, K, V).max() < 1e-13)
    True
    """
    Q, K, V, causal, scale = _softmax_iv(Q, K, V, causal, scale)
    dt = _dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    u = unit_roundoff(dt)
    n, d = Q.shape[-2], Q.shape[-1]
    absK = np.abs(K).astype(np.float64)
    absV = np.abs(V).astype(np.float64)
    if causal:
        kmax = np.maximum.accumulate(absK, axis=-2)  # (..., n, d): max over j <= i
        vmax = np.maximum.accumulate(absV, axis=-2)
    else:
        kmax = np.broadcast_to(absK.max(axis=-2, keepdims=True), absK.shape)
        vmax = np.broadcast_to(absV.max(axis=-2, keepdims=True), absV.shape)
    with np.errstate(over="ignore"):  # |q| |k| beyond the range: r = inf, the bound inf
        r = (
            scale
            * np.sum(np.abs(Q).astype(np.float64) * kmax, axis=-1)
            * (1.0 + gamma(d + 2, np.float64))
        )
        theta = gamma(d + 2 + extra_ops, dt) * r + 2.0 * u * r + (_EXP_ULPS + 1) * u
    gn = gamma(n + extra_ops, dt)
    with np.errstate(over="ignore"):
        factor = np.expm1(2.0 * theta) * (1.0 + u) + 2.0 * gn / (1.0 - gn) + u
    # Gradual underflow: weights and products below the normal range carry an
    # absolute error of at most 2 eta each (at most 3 n + 2 of them per entry).
    under = (3 * n + 2) * eta(dt) * (1.0 + vmax)
    # Where every value is 0 the output is exactly 0 whatever the weights:
    # the weight term is 0 there (an infinite factor must not make it NaN).
    with np.errstate(invalid="ignore", over="ignore"):
        weighted = np.where(vmax > 0, factor[..., None] * vmax, 0.0)
        return (weighted + under) * (1.0 + gamma(6, np.float64))


def kernelized_error_bound(
    Q: Any,
    K: Any,
    V: Any,
    kernel: Any,
    *,
    causal: bool = False,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of :func:`kernelized` (claim C10).

    With ``G`` the computed Gram block and ``E_G = kernel.error_bound(Q, K)``
    the kernel's own entrywise bound, the products with ``[V, 1]`` of inner
    dimension at most n give

        E_num = E_G |V| + gamma_(n+1) |G| |V|,   E_den = E_G 1 + gamma_(n+1) |G| 1,

    and the quotient bound of :func:`linear_error_bound`.  For a lower
    precision ``dtype`` the kernel's bound is scaled by the ratio of unit
    roundoffs (first order in u) and ``extra_ops`` is added to the sums.

    Parameters
    ----------
    Q, K : array_like, shape (..., n, d)
    V : array_like, shape (..., n, d_v)
    kernel : kernel object with ``error_bound(X, Y)``
    causal : bool
    dtype : float64 or float32, optional
    extra_ops : int >= 0

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Polynomial
    >>> from kernelcheck.attention import kernelized_error_bound
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 5, 2))
    >>> bool(kernelized_error_bound(Q, K, V, Polynomial(2)).max() < 1e-12)
    True
    """
    Q, K, V, causal, _ = _kernelized_iv(Q, K, V, kernel, causal, "raise")
    err_fn = getattr(kernel, "error_bound", None)
    if not callable(err_fn):
        raise InvalidArgument(
            f"`kernel` must provide error_bound(X, Y) for an error model, got {describe(kernel)}"
        )
    dt = _dtype_iv(dtype, V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    batch, n, dv = Q.shape[:-2], Q.shape[-2], V.shape[-1]
    ratio = unit_roundoff(dt) / unit_roundoff(V.dtype)
    W = np.abs(_with_ones(V)).astype(np.float64)
    H = np.empty(batch + (n, dv + 1))
    absH = np.empty_like(H)
    EG = np.empty_like(H)
    for idx in np.ndindex(*batch):
        Q2, K2 = Q[idx], K[idx]
        Wi = W[idx]
        Vi = _with_ones(V[idx]).astype(np.float64)
        blocks = _gram_blocks(kernel, Q2, K2, causal, kernel)
        eblocks = _gram_blocks(kernel, Q2, K2, causal, err_fn)
        for (i0, i1, G), (_, _, E) in zip(blocks, eblocks, strict=True):
            G = G.astype(np.float64)
            m = G.shape[1]
            H[idx][i0:i1] = G @ Vi[:m]
            absH[idx][i0:i1] = np.abs(G) @ Wi[:m]
            EG[idx][i0:i1] = np.abs(E.astype(np.float64)) @ Wi[:m]
    g64 = gamma(n + 2, np.float64)
    E = (ratio * EG + gamma(n + 1 + extra_ops, dt) * absH) * (1.0 + g64)
    E = E + _underflow_term(n, dt, W)
    if dt != V.dtype:
        # The reference normaliser is computed in the inputs' precision.
        E = E + (EG + gamma(n + 1, V.dtype) * absH) * (1.0 + g64)
    return _quotient_bound(absH * (1.0 + g64) + EG * (1.0 + g64), E, H[..., -1], unit_roundoff(dt))


# ---------------------------------------------------------------------------
# Cost model
# ---------------------------------------------------------------------------


def cost_model(
    form: str,
    n: int,
    d: int,
    D: int,
    d_v: int,
    chunk_size: int = 64,
    *,
    causal: bool | None = None,
) -> AttentionCost:
    """Operation count and state size of an attention form (claims C2, C3, C11).

    Counts per sequence (one batch entry), multiply-add = 2 flops, ``exp``,
    division and addition 1 each, feature maps not counted:

    * ``softmax``: bidirectional ``2 n^2 d + 3 n^2 + 2 n^2 d_v + n d_v``;
      causal, ``2 P d + 3 P + 2 P d_v + n d_v`` with ``P ~ n (n + r) / 2``
      pairs formed (r rows a query block, ``r <= n / 16`` for large n); both
      plus ``n d + 2 n d_v`` for the query scaling and the output check.
      State: the key/value cache ``n (d + d_v)`` (grows with n, C2).
    * ``kernelized``: ``P (2 d + 1)`` for the Gram block (a dot product or a
      distance and one elementwise map) and ``2 P (d_v + 1) + n d_v`` for the
      products, with ``P`` the pairs formed as for softmax.  State ``n (d + d_v)``.
    * ``parallel``: ``4 n D (d_v + 1) + n d_v`` both ways (C3).
    * ``recurrent``: ``4 n D (d_v + 1) + n d_v`` (causal only).
    * ``chunked``: chunks ``c_1..c_k``: ``sum 2 c^2 (D + d_v + 1)``
      + ``4 n D (d_v + 1)`` + ``k D (d_v + 1) + n (d_v + 1) + n d_v``
      (causal only).

    The linear forms' state is ``D (d_v + 1)``, independent of n (C11).

    Parameters
    ----------
    form : {"softmax", "kernelized", "parallel", "recurrent", "chunked"}
    n, d, D, d_v, chunk_size : int >= 1
        ``D`` is ignored by the exact forms, ``d`` by the linear ones.
    causal : bool, optional
        Default False for softmax, kernelized and parallel; recurrent and
        chunked are causal (passing False raises).

    Returns
    -------
    AttentionCost

    Examples
    --------
    >>> from kernelcheck.attention import cost_model
    >>> cost_model("parallel", 1000, 64, 256, 64).flops == 4 * 1000 * 256 * 65 + 1000 * 64
    True
    >>> short = cost_model("recurrent", 10, 64, 256, 64)
    >>> short.state_size == cost_model("recurrent", 10**6, 64, 256, 64).state_size
    True
    """
    form = check_choice(form, "form", FORMS)
    n = as_int(n, "n", minimum=1)
    d = as_int(d, "d", minimum=1)
    D = as_int(D, "D", minimum=1)
    d_v = as_int(d_v, "d_v", minimum=1)
    C = as_int(chunk_size, "chunk_size", minimum=1)
    if causal is None:
        causal = form in ("recurrent", "chunked")
    causal = as_bool(causal, "causal")
    if form in ("recurrent", "chunked") and not causal:
        raise InvalidArgument(f"`causal` must be True for form {form!r} (it is causal only)")
    pairs = _formed_pairs(n, causal)
    linear_state = D * (d_v + 1)
    if form == "softmax":
        # logits, max/subtract/exp/sum, weighted values, division; plus the
        # query scaling (n d) and the output's finiteness pass (2 n d_v)
        flops = 2 * pairs * d + 3 * pairs + 2 * pairs * d_v + n * d_v + n * d + 2 * n * d_v
        state = n * (d + d_v)
    elif form == "kernelized":
        flops = pairs * (2 * d + 1) + 2 * pairs * (d_v + 1) + n * d_v
        state = n * (d + d_v)
    elif form in ("parallel", "recurrent"):
        flops = 4 * n * D * (d_v + 1) + n * d_v
        state = linear_state
    else:
        c = min(C, n)
        sizes = [c] * (n // c) + ([n % c] if n % c else [])
        flops = (
            sum(2 * s * s * (D + d_v + 1) for s in sizes)
            + 4 * n * D * (d_v + 1)
            + len(sizes) * D * (d_v + 1)
            + n * (d_v + 1)
            + n * d_v
        )
        state = linear_state
    return AttentionCost(
        form=form,
        causal=causal,
        n=n,
        d=d,
        D=D,
        d_v=d_v,
        chunk_size=C,
        flops=int(flops),
        state_size=int(state),
    )
