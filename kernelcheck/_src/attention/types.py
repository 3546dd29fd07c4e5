"""Result types of the attention forms: the recurrent state, outputs with their normalisers, costs.

:func:`finish` turns a numerator and a normaliser into the output of every
normalised form, raising :class:`~kernelcheck.errors.BadNormalizer` or
reporting bad normalisers (claim C12): never an added eps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kernelcheck._src.core.results import ResultMixin
from kernelcheck.errors import BadNormalizer, NumericalFailure

# ---------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------


class State(NamedTuple):
    """The recurrent state ``(S, z)`` of linear attention (claims C11, C14).

    Attributes
    ----------
    S : numpy.ndarray
        ``sum_{j <= t} phi(k_j) v_j^T``, shape (..., D, d_v).
    z : numpy.ndarray or None
        ``sum_{j <= t} phi(k_j)``, shape (..., D); None for unnormalised
        attention, which needs no normaliser (C19).

    Its size, ``D (d_v + 1)`` numbers per batch entry (``D d_v``
    unnormalised), does not depend on the number of tokens consumed (C11).
    The gated recurrence (C20) carries the same state, decayed.

    Examples
    --------
    >>> from kernelcheck.attention import init
    >>> init(4, 3).size
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
        """Split the matrix ``[S, z]`` of the chunked products back into a state."""
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


def finish_unnormalized(num: np.ndarray, form: str) -> np.ndarray:
    """The output of an unnormalised form (C19): the numerator, checked finite."""
    if not np.isfinite(num).all():
        raise NumericalFailure(
            f"`{form}` attention overflowed: an output is not finite ({num.dtype}); "
            "scale the features or inputs down"
        )
    return num


def finish_matrix(H: np.ndarray, normalize: bool, action: str, form: str):
    """The output from the products ``H`` with ``[V, 1]`` (normalised) or with ``V`` (not)."""
    if not normalize:
        return finish_unnormalized(H, form)
    return finish(H[..., :-1], H[..., -1], action, form)


def finish(num: np.ndarray, den: np.ndarray, action: str, form: str):
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
