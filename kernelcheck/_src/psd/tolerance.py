"""Tolerances of the PSD decisions (claims C5, C6): where each number comes from.

* :func:`default_tolerance` -- the default ``tol`` of :func:`~kernelcheck.psd.check_psd`
  and :func:`~kernelcheck.psd.mercer_features`: what rounding cannot resolve;
* :func:`resolve_tolerance` -- the ``tol`` argument (``None``, a number or a
  :class:`~kernelcheck._src.core.rounding.Tolerance`) as a tolerance with its source;
* :func:`eigh_error` -- the error bound of LAPACK's symmetric eigensolver,
  ``gamma_{p(n)} ||K||_F`` with ``p(n) =`` :func:`EIGH_P` ``(n)``, shared by the
  eigh rung and the Mercer features;
* :func:`frobenius` -- ``||K||_F`` without overflow, through SciPy's BLAS.

The rounding units (``u``, ``eta``) and ``gamma_k`` come from
:mod:`kernelcheck._src.core.rounding`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import blas

from kernelcheck._src.core.rounding import Tolerance, eta, gamma, precision, unit_roundoff
from kernelcheck._src.core.validate import as_real
from kernelcheck.errors import InvalidArgument

__all__ = ["EIGH_P", "eigh_error", "frobenius", "default_tolerance", "resolve_tolerance"]


def EIGH_P(n: int) -> int:
    """The ``p(n)`` of LAPACK's symmetric-eigensolver error bound ``p(n) u ||K||_2``.

    LAPACK documents ``p(n)`` only as a modestly growing function of n
    (LAPACK Users' Guide, section 4.7); kernelcheck takes ``64 (n + 2)``,
    which covers what the property tests of claim C6 show on Gram matrices
    with a wide eigenvalue range (up to about 50 (n + 2) for the
    reconstruction ``U Lambda U^T`` of a 4 x 4 matrix).
    """
    return 64 * (n + 2)


def eigh_error(K: np.ndarray) -> float:
    """Bound on the error of a computed eigenvalue of the symmetric ``K``: ``gamma_{p(n)} ||K||_F``.

    LAPACK's symmetric eigensolvers are backward stable: the computed
    eigenvalues are exact for ``K + E`` with ``||E||_2 <= p(n) u ||K||_2``, so
    each is within that of the exact one (Weyl); ``gamma_{p(n)} ||K||_F``
    with ``p(n) =`` :func:`EIGH_P` ``(n)`` bounds it from above
    (``||K||_2 <= ||K||_F``, ``p u <= gamma_p``).
    """
    return gamma(EIGH_P(K.shape[0])) * frobenius(K)


def frobenius(A: np.ndarray) -> float:
    """``||A||_F`` without overflow or underflow for any finite float64 ``A``.

    One pass of BLAS ``dnrm2`` (specified to accumulate without overflow or
    harmful underflow: scaled sums in the reference BLAS, extended precision in
    OpenBLAS; ``inf`` only when ``||A||_F`` itself exceeds the range), taken from SciPy's BLAS --
    the library of the Cholesky that follows.  Calling NumPy's BLAS here
    (``np.linalg.norm``) leaves NumPy's OpenBLAS worker threads spinning for a
    while after the call; where NumPy and SciPy ship separate OpenBLAS builds
    (the PyPI wheels do), they then compete with SciPy's threads during
    ``dpotrf`` and slowed it by 1.8x on a 2-core machine.  Relative error
    ``<= n u`` in any summation order, far below what a tolerance needs.
    """
    if A.size == 0:
        return 0.0
    return float(blas.dnrm2(np.asarray(A, dtype=np.float64).ravel(order="K")))


def default_tolerance(K, *, dtype=np.float64) -> Tolerance:
    """The default tolerance of :func:`~kernelcheck.psd.check_psd`: what rounding cannot resolve.

    ``tol = 2 gamma_{n+2} max(||K||_F, sum_i |K_ii|)`` in the unit roundoff
    ``u`` of ``dtype`` (the format the entries were computed and stored in:
    2^-53 for float64, 2^-24 for float32, 2^-11 for float16, 2^-8 for
    bfloat16), where

    * ``gamma_{n+2} ||K||_F`` bounds ``||E||_2`` for an entrywise perturbation
      ``|E_ij| <= gamma_{n+2} |K_ij|``: the rounding error of a Gram matrix
      whose entries each carry up to ``n + 2`` roundings;
    * ``gamma_{n+2} sum_i K_ii`` bounds the shift ``c`` of Rump's Cholesky
      certificate (``c ~ sum_j (j + 2) u K_jj``) and the backward error of
      the symmetric eigensolver (``~ n u ||K||_2 <= n u tr K`` for PSD ``K``);
      no floating-point test of this size resolves eigenvalues below it;
    * the factor 2 leaves room for the certificate of ``K + tol I`` to succeed
      whenever ``lambda_min(K) > -tol / 2``;
    * ``n (n + 2) eta`` (``eta`` the smallest subnormal) covers underflow:
      each entry may lose up to ``(n + 2) eta`` absolutely, and
      ``||E||_2 <= n max |E_ij|``.

    What a verdict at this tolerance means: the matrix as given is exact data
    (every rung decides ``lambda_min`` of ``K`` itself), and the tolerance
    asks whether it is within rounding of a PSD one.  If ``K`` is a Gram
    ``G`` (PSD) computed in ``dtype`` under the model above, ``||K - G||_2``
    is about ``gamma_{n+2} ||K||_F <= tol / 2``, so ``lambda_min(K) >=
    -tol``: ``NOT_PSD`` proves that ``K``
    is no such rounding of a PSD matrix, and ``is_psd`` says that rounding in
    ``dtype`` explains any negative eigenvalue.  A 16-bit ``K`` therefore
    gets a tolerance in its own ``u``, thousands of times float64's: a
    float16 Gram of a PSD kernel is negative by about ``u_16 ||K||``, which
    is rounding, not a violation.  ``tol=0`` asks the exact question of the
    given entries whatever their format.

    Parameters
    ----------
    K : array_like (n, n)
        The matrix (its values; its format is ``dtype``).
    dtype : dtype, str or Precision, default float64
        The format the entries were given in: float64, float32, float16 or
        bfloat16.

    Returns
    -------
    Tolerance
        Absolute tolerance on ``lambda_min``.

    Raises
    ------
    InvalidArgument
        Naming ``K`` and ``tol`` when ``(n + 2) u >= 1/2`` (n >= 1022 in
        float16, n >= 126 in bfloat16): the model gives no bound there.

    Examples
    --------
    >>> import numpy as np
    >>> t = default_tolerance(np.eye(3))
    >>> bool(abs(t.value - 2 * 5 * 2.0**-53 / (1 - 5 * 2.0**-53) * 3) < 1e-30)
    True
    """
    A = np.asarray(K, dtype=np.float64)
    n = A.shape[0]
    p = precision(dtype)
    if not (n + 2) * p.u < 0.5:
        raise InvalidArgument(
            f"`K` came in {p.name} with n = {n}: the default tolerance models each entry "
            f"with up to n + 2 roundings in {p.name} (u = {p.u:.3g}), which bounds nothing "
            "once (n + 2) u >= 1/2; pass `tol=` (an absolute tolerance on lambda_min, such "
            "as the entries' own error bound times n), or K in a wider format"
        )
    g = gamma(n + 2, dtype)
    fro = frobenius(A)
    with np.errstate(over="ignore"):
        tr = float(np.abs(np.diagonal(A)).sum())
    e = eta(dtype)
    value = 2.0 * g * max(fro, tr) + n * (n + 2) * e
    if not math.isfinite(value):  # ||K|| beyond the float range: the same bound, scaled
        top = float(np.max(np.abs(A)))
        fro_s = float(np.linalg.norm(A / top))
        tr_s = float((np.abs(np.diagonal(A)) / top).sum())
        value = 2.0 * g * max(fro_s, tr_s) * top + n * (n + 2) * e
    u = unit_roundoff(dtype)
    return Tolerance(
        value,
        f"2 gamma_(n+2) max(||K||_F, sum|K_ii|) + n (n+2) eta with n = {n}, u = {u:.3g} "
        f"({p.name}), "
        f"||K||_F = {fro:.3g}, sum|K_ii| = {tr:.3g}",
    )


def resolve_tolerance(tol, K: np.ndarray, *, dtype=np.float64) -> Tolerance:
    """The ``tol`` argument of :func:`~kernelcheck.psd.check_psd` as a :class:`Tolerance`.

    ``None``: :func:`default_tolerance` of ``K`` in the unit roundoff of
    ``dtype`` (the dtype the entries were given in); a :class:`Tolerance`: used
    as given (its value must be a finite number >= 0); a number >= 0: an
    absolute tolerance on ``lambda_min``, its source "exact question
    (tol = 0)" for zero and "given by the caller" otherwise.
    """
    if tol is None:
        return default_tolerance(K, dtype=dtype)
    if isinstance(tol, Tolerance):
        as_real(tol.value, "tol", nonnegative=True)
        return tol
    value = as_real(tol, "tol", nonnegative=True)
    source = "exact question (tol = 0)" if value == 0 else "given by the caller"
    return Tolerance(value, source)
