"""The checked input of :func:`~kernelcheck.psd.check_psd` (claim C5): which matrix is decided.

The question is always about a symmetric matrix ``S`` whose entries are exact
binary numbers.  For a symmetric ``K`` that is ``K`` itself.  For a ``K`` that
is not exactly symmetric it is the exact symmetric part ``S = (K + K^T) / 2``
-- the matrix of the quadratic form ``v^T K v``, since the antisymmetric part
contributes nothing to it -- decided when

* the asymmetry is at rounding level, ``max |K - K^T| <=`` :data:`ASYMMETRY_ULPS`
  ``u max |K|`` (``u`` the unit roundoff of the dtype ``K`` came in: what the
  different summation orders of ``K_ij`` and ``K_ji`` in a Gram routine
  produce, e.g. scikit-learn's ``rbf_kernel``); or
* the caller asks for it (``symmetrize=True``, ``--symmetrize``);

and refused otherwise, with a message naming the option in the caller's terms.

``S`` is in general not a float matrix (``K_ij + K_ji`` needs up to one more
bit, and halving an odd subnormal is inexact), so it is never rounded: the
float rungs work on ``H = fl(sigma (K + K^T) / 2 ...)``, the error-free sum

    K_ij + K_ji = H_ij + L_ij   (TwoSum; H = fl(K + K^T), L exact, |L| <= u |H|),

with ``sigma = 2`` (``sigma = 1/2`` after an exact scaling by 1/4 when
``max |K|`` is within a factor 4 of overflow), and every certificate on
``H`` is widened by ``||L||_F >= ||L||_2``; the exact rungs and every witness
check use ``K`` itself (``v^T S v = v^T K v`` exactly).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kernelcheck._src.core.rounding import Tolerance, given_precision, unit_roundoff
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_real,
    as_square_matrix,
    check_choice,
)
from kernelcheck._src.psd.tolerance import frobenius, resolve_tolerance
from kernelcheck.errors import InvalidArgument

__all__ = ["ASYMMETRY_ULPS", "PSDInput", "check_psd_iv", "symmetric_part", "METHODS"]

#: The rounding level of an asymmetry: ``max |K - K^T| <= ASYMMETRY_ULPS u max |K|``
#: is decided without ``symmetrize=True`` (a Gram routine that sums ``K_ij`` and
#: ``K_ji`` in different orders, or through ``exp`` of rounded distances, stays
#: far below it; an indexing or transposition bug lands far above it).
ASYMMETRY_ULPS = 1024

#: The rungs ``method=`` can force; ``"auto"`` runs the ladder.
METHODS = ("auto", "cholesky", "lowrank", "eigh", "ball", "mpmath", "exact")


class SymmetricPart(NamedTuple):
    """``sigma (K + K^T) / 2 = H + L`` exactly: what :func:`symmetric_part` returns."""

    H: np.ndarray  # float64, exactly symmetric
    sigma: float  # a power of two
    lo_norm: float  # an upper bound of ||L||_F (0 when H is exact)


class PSDInput(NamedTuple):
    """The checked arguments of :func:`~kernelcheck.psd.check_psd` (from :func:`check_psd_iv`)."""

    K: np.ndarray  # float64 symmetric: the decided matrix S, rounded once when symmetrized
    A: np.ndarray  # float64: the input, whose quadratic form is that of S exactly
    H: np.ndarray  # float64 symmetric: sigma S up to lo_norm (the float rungs' matrix)
    sigma: float
    lo_norm: float
    tolerance: Tolerance  # on lambda_min(S)
    method: str
    max_exact_n: int | None
    symmetrized: bool  # S = (K + K^T) / 2 of a non-symmetric input was decided
    asymmetry: float  # max |K - K^T| of the input (0 when exactly symmetric)
    symmetry_note: str  # how S was chosen ("" when K is symmetric)


def check_psd_iv(
    K,
    tol,
    method: str = "auto",
    symmetrize: bool = False,
    max_exact_n: int | None = None,
    *,
    option: str = "symmetrize=True",
) -> PSDInput:
    """Check the arguments of :func:`~kernelcheck.psd.check_psd` (also used by ``mercer_features``).

    ``K`` must be a finite real square matrix (float32, float16 and
    bfloat16 are widened exactly).  A non-symmetric ``K`` is decided through
    its exact symmetric part when the asymmetry is at rounding level or
    ``symmetrize`` is true (see the module docstring); otherwise the error
    names ``option``, the option in the caller's own terms
    (``"symmetrize=True"``, ``"--symmetrize"``).  ``tol`` becomes a
    :class:`Tolerance` by
    :func:`~kernelcheck._src.psd.tolerance.resolve_tolerance`.  The rounding
    level of both -- the asymmetry limit and the default tolerance -- is in
    the unit roundoff of the format ``K`` was given in, read before the
    widening (:func:`~kernelcheck._src.core.rounding.given_precision`: a
    float16 array is judged with ``u = 2^-11``, a bfloat16 tensor with
    ``2^-8``), since that is the rounding its entries carry.
    """
    given = given_precision(K)
    A = as_square_matrix(K, "K")
    in_dtype = A.dtype if given is None else given
    A = np.asarray(A, dtype=np.float64)  # float32 -> float64 is exact
    method = check_choice(method, "method", METHODS)
    symmetrize = as_bool(symmetrize, "symmetrize")
    if max_exact_n is not None:
        max_exact_n = as_int(max_exact_n, "max_exact_n", minimum=0)
    if tol is not None and not isinstance(tol, Tolerance):
        as_real(tol, "tol", nonnegative=True)  # before any work on K
    if is_symmetric(A):
        tolerance = resolve_tolerance(tol, A, dtype=in_dtype)
        return PSDInput(A, A, A, 1.0, 0.0, tolerance, method, max_exact_n, False, 0.0, "")
    D = np.abs(A - A.T)
    i, j = np.unravel_index(int(np.argmax(D)), D.shape)
    asym = float(D[i, j])
    scale = float(np.max(np.abs(A)))
    limit = ASYMMETRY_ULPS * unit_roundoff(in_dtype) * scale
    if asym <= limit:
        note = (
            f"decided for the exact symmetric part (K + K^T)/2: max |K - K^T| = {asym:.3g} is "
            f"at rounding level (<= {ASYMMETRY_ULPS} u max|K| = {limit:.3g})"
        )
    elif symmetrize:
        note = (
            f"decided for the exact symmetric part (K + K^T)/2 as asked ({option}; "
            f"max |K - K^T| = {asym:.3g})"
        )
    else:
        raise InvalidArgument(
            f"`K` must be symmetric, but max |K - K^T| = {asym:.3g} at index ({i}, {j}) "
            f"({asym / scale:.3g} relative to max |K| = {scale:.3g}), beyond the rounding level "
            f"{ASYMMETRY_ULPS} u max|K| = {limit:.3g}; pass {option} to test the exact symmetric "
            "part (K + K^T) / 2 instead (the result records it)"
        )
    part = symmetric_part(A)
    S = 0.5 * A + 0.5 * A.T  # rounded once: for Mercer features, never for a verdict
    tolerance = resolve_tolerance(tol, S, dtype=in_dtype)
    return PSDInput(
        S, A, part.H, part.sigma, part.lo_norm, tolerance, method, max_exact_n, True, asym, note
    )


def is_symmetric(A: np.ndarray, block: int = 256) -> bool:
    """Exact symmetry, compared in square blocks (cache-friendly transposes)."""
    n = A.shape[0]
    for i in range(0, n, block):
        if not np.array_equal(A[i : i + block, i:], A[i:, i : i + block].T):
            return False
    return True


def symmetric_part(A: np.ndarray) -> SymmetricPart:
    """``sigma (A + A^T) / 2 = H + L`` exactly, ``H`` float and symmetric, ``||L||_F <= lo_norm``.

    Knuth's TwoSum gives ``a + b = s + e`` exactly with ``s = fl(a + b)``
    (round to nearest, no overflow), so ``H = fl(A + A^T)`` with
    ``sigma = 2``.  When ``max |A| >= 2^1021`` the sum could overflow: ``A``
    is first scaled by 1/4, exact unless that pushes a bit below the
    subnormal range (then :class:`InvalidArgument`: such a matrix spans the
    whole float64 range), and ``sigma = 1/2``.  ``lo_norm`` bounds
    ``||L||_F`` from above (``dnrm2``'s relative error ``<= n u`` covered by
    a factor ``1 + 2 (n + 2) u``, then rounded up).
    """
    sigma = 2.0
    if float(np.max(np.abs(A))) >= 2.0**1021:
        A4 = np.ldexp(A, -2)
        if not np.array_equal(np.ldexp(A4, 2), A):
            raise InvalidArgument(
                "`K` is not symmetric and spans the whole float64 range (entries near overflow "
                "and bits below 4 times the smallest subnormal): its symmetric part cannot be "
                "formed exactly; scale K first"
            )
        A, sigma = A4, 0.5
    B = A.T
    with np.errstate(over="ignore", invalid="ignore"):
        s = A + B
        bb = s - A
        lo = (A - (s - bb)) + (B - bb)
    n = A.shape[0]
    lo_norm = 0.0
    if np.any(lo):
        u = unit_roundoff(np.float64)
        lo_norm = float(np.nextafter(frobenius(lo) * (1.0 + 2.0 * (n + 2) * u), math.inf))
    return SymmetricPart(s, sigma, lo_norm)
