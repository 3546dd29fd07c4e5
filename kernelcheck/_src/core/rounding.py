"""The floating-point error model behind every tolerance in kernelcheck.

Standard model (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., ch. 2-3): for a basic operation, ``fl(a op b) = (a op b)(1 + delta)``
with ``|delta| <= u``, the unit roundoff (2**-53 for float64, 2**-24 for
float32).  Products of ``k`` such factors are covered by

    gamma_k = k u / (1 - k u),   valid while k u < 1,

and an inner product of length ``k``, computed in any order, satisfies

    |fl(x . y) - x . y| <= gamma_k |x| . |y|.

So a matrix product ``A @ B`` with inner dimension ``k`` is accurate entrywise
to ``gamma_k (|A| @ |B|)``.  Tolerances built here are *a priori worst-case*
bounds: a test that uses them cannot fail from rounding, and any failure beyond
them is a real discrepancy.  BLAS implementations that use FMA or blocked
summation only do better than the bound.
"""

from __future__ import annotations

import math

import numpy as np

from kernelcheck.errors import InvalidArgument

__all__ = ["unit_roundoff", "gamma", "matmul_error_bound", "Tolerance"]

from dataclasses import dataclass


def unit_roundoff(dtype=np.float64) -> float:
    """Unit roundoff ``u = eps / 2`` of a floating dtype (2**-53 for float64)."""
    return float(np.finfo(np.dtype(dtype)).eps) / 2.0


def gamma(k: float, dtype=np.float64) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)`` for ``k`` rounding errors.

    Raises
    ------
    InvalidArgument
        When ``k u >= 1/2``: the model gives no useful bound that far out.
    """
    u = unit_roundoff(dtype)
    ku = float(k) * u
    if not ku < 0.5:
        raise InvalidArgument(
            f"gamma_k is not a useful bound for k = {k} operations in {np.dtype(dtype)} "
            f"(k u = {ku:.3g} >= 1/2)"
        )
    return ku / (1.0 - ku)


def matmul_error_bound(
    A: np.ndarray, B: np.ndarray, *, extra_ops: int = 0, dtype=None
) -> np.ndarray:
    """Entrywise bound on ``|fl(A @ B) - A @ B|`` for float inputs taken as exact.

    Returns ``gamma_{k + extra_ops} * (|A| @ |B|)`` with ``k = A.shape[-1]``,
    the inner dimension.  The product ``|A| @ |B|`` is itself computed in
    floating point; it is non-negative, so its relative error is at most
    ``gamma_k``, which is absorbed by inflating the factor by ``(1 + gamma_k)``.
    """
    dtype = np.result_type(A, B) if dtype is None else dtype
    k = A.shape[-1]
    g = gamma(k + extra_ops, dtype)
    return (g * (1.0 + gamma(k, dtype))) * (np.abs(A) @ np.abs(B))


@dataclass(frozen=True)
class Tolerance:
    """A tolerance and where it came from.

    Attributes
    ----------
    value : float
        The tolerance (absolute unless ``kind`` says otherwise).
    source : str
        The error model that produced it, as a formula with its numbers.
    kind : str
        ``"absolute"`` or ``"relative"``.
    """

    value: float
    source: str
    kind: str = "absolute"

    def __str__(self) -> str:
        return f"{self.value:.3g} ({self.kind}; {self.source})"

    def to_dict(self) -> dict:
        return {"value": _json_float(self.value), "source": self.source, "kind": self.kind}


def _json_float(x: float):
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
