"""Result types of the attention forms: the recurrent state, outputs with their normalisers, costs.

:func:`finish` turns a numerator and a normaliser into the output of every
normalised form, raising :class:`~kernelcheck.errors.BadNormalizer` or
reporting bad normalisers (claim C12): never an added eps.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.validate import all_finite, check_finite
from kernelcheck.errors import BadNormalizer, NumericalFailure

# ---------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------


class State(NamedTuple):
    """The recurrent state ``(S, z)`` of linear attention (claims C11, C14).

    Its size, ``D (d_v + 1)`` numbers per batch entry (``D d_v``
    unnormalised), does not depend on the number of tokens consumed (C11).
    The gated recurrence (C20) carries the same state, decayed.

    Attributes
    ----------
    S : numpy.ndarray
        ``sum_{j <= t} phi(k_j) v_j^T``, shape (..., D, d_v).
    z : numpy.ndarray or None
        ``sum_{j <= t} phi(k_j)``, shape (..., D); None for unnormalised
        attention, which needs no normaliser (C19).

    Examples
    --------
    >>> from kernelcheck.attention import linear_recurrence
    >>> linear_recurrence().init(4, 3).size
    16
    """

    S: np.ndarray
    z: np.ndarray | None = None

    @property
    def size(self) -> int:
        """Number of stored numbers, ``S.size + z.size``."""
        return int(self.S.size + (0 if self.z is None else self.z.size))

    @property
    def nbytes(self) -> int:
        """Bytes held by the state arrays."""
        return int(self.S.nbytes + (0 if self.z is None else self.z.nbytes))

    @classmethod
    def from_matrix(cls, M: np.ndarray, normalize: bool) -> State:
        """Split the matrix ``[S, z]`` of the chunked products back into a state.

        Parameters
        ----------
        M : numpy.ndarray, shape (..., D, d_v + 1) or (..., D, d_v)
            ``[S, z]`` (normalised: ``z`` its last column) or ``S`` alone.
        normalize : bool
            Whether ``M`` carries ``z`` in its last column.
        """
        if normalize:
            return cls(np.ascontiguousarray(M[..., :-1]), np.ascontiguousarray(M[..., -1]))
        return cls(M, None)


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


# Finishing: numerator / normaliser, bad normalisers
# ---------------------------------------------------------------------------
#
# The fast forms take their large inputs unchecked (``as_array(finite=False)``)
# and check the result instead: every NaN or Inf of an input provably reaches
# a numerator or a normaliser of the result (IEEE arithmetic: NaN times
# anything, Inf times 0 and Inf - Inf are NaN; a sum or product with a NaN or
# Inf operand is not finite; each form's docstring says which entries an input
# reaches), so a finite result proves finite inputs.  Only when the result is
# not finite are the inputs scanned, in argument order, to name the culprit
# (:func:`name_culprit`); if they are all finite the result overflowed.  The
# check of the result is one pass over the output, which the forms make
# anyway; the inputs are D / d_v times larger.  tests/attention/test_finite.py
# puts a NaN, +Inf and -Inf at every position of every input of every form.

_OVERFLOW = "scale the features or inputs down"


def name_culprit(inputs) -> None:
    """Raise :class:`~kernelcheck.errors.InvalidArgument` naming the first non-finite input.

    ``inputs`` is a sequence of ``(array, name)`` in argument order (the order
    in which eager validation would have checked them); returns quietly when
    every input is finite.
    """
    for arr, name in inputs:
        check_finite(arr, name)


def _overflow(form: str, what: str, dtype, inputs) -> NumericalFailure:
    name_culprit(inputs)
    return NumericalFailure(f"`{form}` attention overflowed: {what} ({dtype}); {_OVERFLOW}")


def finish_unnormalized(num: np.ndarray, form: str, inputs=()) -> np.ndarray:
    """The output of an unnormalised form (C19): the numerator, checked finite."""
    if not all_finite(num):
        raise _overflow(form, "an output is not finite", num.dtype, inputs)
    return num


def finish_state(S: np.ndarray, form: str) -> np.ndarray:
    """A state handed back to the caller, checked finite (its inputs were checked before)."""
    if not all_finite(S):
        raise _overflow(form, "the state is not finite", S.dtype, ())
    return S


def with_state(result: Any, state: State, return_state: bool, form: str) -> Any:
    """``(result, state)`` with the state's ``S`` and ``z`` checked finite, or ``result`` alone.

    A chunked or recurrent form whose outputs are finite can still hand back
    a state that overflowed after the last output was formed (one token,
    ``k = v = 1e200``): that state is a NumericalFailure, never a silent inf.
    """
    if not return_state:
        return result
    finish_state(state.S, form)
    if state.z is not None:
        finish_state(state.z, form)
    return result, state


def finish_matrix(H: np.ndarray, normalize: bool, action: str, form: str, inputs=()):
    """The output from the products ``H`` with ``[V, 1]`` (normalised) or with ``V`` (not)."""
    if not normalize:
        return finish_unnormalized(H, form, inputs)
    return finish(H[..., :-1], H[..., -1], action, form, inputs)


def finish(
    num: np.ndarray,
    den: np.ndarray,
    action: str,
    form: str,
    inputs=(),
    inplace=False,
):
    """``num / den`` row by row, checked: non-finite values, then normalisers ``<= 0`` (C12).

    ``inplace`` divides into ``num`` (the caller owns it and needs it no more).
    """
    if not (all_finite(num) and all_finite(den)):
        raise _overflow(form, "a numerator or normaliser is not finite", num.dtype, inputs)
    bad = den <= 0
    with np.errstate(divide="ignore", invalid="ignore") if bad.any() else nullcontext():
        out = np.divide(num, den[..., None], out=num if inplace else None)
    return normalized_result(out, den, bad, action, form)


def finish_divided(out, den, finite: bool, action: str, form: str, inputs=()):
    """An output already divided, judged (C12); ``finite``: its numerators and normalisers were."""
    if not finite:
        raise _overflow(form, "a numerator or normaliser is not finite", out.dtype, inputs)
    return normalized_result(out, den, None, action, form)


def normalized_result(out: np.ndarray, den: np.ndarray, bad, action: str, form: str):
    """The divided output, or :class:`BadNormalizer` / :class:`AttentionOutput` (C12).

    ``bad`` is ``den <= 0`` (or None: computed here).  Never an added eps.
    """
    if bad is None:
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
        return AttentionOutput(out=out, normalizer=den, bad_positions=positions)
    if action == "report":
        return AttentionOutput(
            out=out, normalizer=den, bad_positions=np.empty((0, den.ndim), dtype=np.intp)
        )
    return out


class RawRows:
    """Rows of a linear form's products, kept as they are (the unnormalised output).

    The kernels of :mod:`~kernelcheck._src.attention.common.blocking` write rows
    ``r0:r1`` into :meth:`target` and hand them over with :meth:`take` once
    complete; the rows are checked while they are still in cache.
    """

    def __init__(self, shape: tuple[int, ...], dtype, check: bool = True):
        self.H = np.empty(shape, dtype=dtype)
        self.check = check
        self.finite = True

    def target(self, r0: int, r1: int) -> np.ndarray:
        return self.H[..., r0:r1, :]

    def take(self, r0: int, r1: int, h: np.ndarray) -> None:
        # several threads may take rows at once: the flag is only ever lowered
        if self.check and self.finite and not all_finite(h):
            self.finite = False

    def result(self, action: str, form: str, inputs=()):
        """The rows, once checked (``action`` is unused: there are no normalisers)."""
        if not self.finite:
            raise _overflow(form, "an output is not finite", self.H.dtype, inputs)
        return self.H


class NormalizedRows:
    """Rows ``[num, den]`` of a normalised linear form, divided as they come.

    Each block of rows is computed into a reused buffer of the thread
    computing it (that thread has finished with it when :meth:`take` runs,
    and its next block overwrites it), checked finite while in cache, and
    divided straight into the output: neither ``[num, den]`` for all n nor
    a second output-sized array exists.  The normalisers (n numbers) are
    kept for the bad-normaliser verdict.
    """

    def __init__(self, batch: tuple[int, ...], n: int, d_v: int, dtype):
        self.out = np.empty(batch + (n, d_v), dtype=dtype)
        self.den = np.empty(batch + (n,), dtype=dtype)
        self._local = threading.local()  # one buffer per thread taking rows
        self.finite = True

    def target(self, r0: int, r1: int) -> np.ndarray:
        rows = r1 - r0
        buf = getattr(self._local, "buf", None)
        if buf is None or buf.shape[-2] < rows:
            buf = np.empty(self.out.shape[:-2] + (rows, self.out.shape[-1] + 1), self.out.dtype)
            self._local.buf = buf
        return buf[..., :rows, :]

    def take(self, r0: int, r1: int, h: np.ndarray) -> None:
        # several threads may take rows at once: the flag is only ever lowered
        if self.finite and not all_finite(h):
            self.finite = False
        self.den[..., r0:r1] = h[..., -1]
        # a zero normaliser divides by 0 here: it is judged (raise or report) afterwards;
        # a true division (one rounding, the error model's): a product with the
        # reciprocal measured no faster on blocks of a few hundred rows
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(h[..., :-1], h[..., -1:], out=self.out[..., r0:r1, :])

    def result(self, action: str, form: str, inputs=()):
        """The output, or the bad-normaliser verdict of :func:`normalized_result`."""
        if not self.finite:
            what = "a numerator or normaliser is not finite"
            raise _overflow(form, what, self.out.dtype, inputs)
        return normalized_result(self.out, self.den, None, action, form)
