"""Closed-form moments of random-feature estimates (claim C17).

Pure formulas, no randomness: the central moments of ``Z / E Z`` from its raw
moment ratios ``r_j = E[(Z / E Z)^j]`` (which every random map of
:mod:`kernelcheck._src.features.random` has in closed form), and the central
moments of the mean of m i.i.d. copies from those of one copy.  The random
maps' ``theory`` and the Monte Carlo statistics of ``kernelcheck.stats`` read
them from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import comb

from kernelcheck._src.core.validate import as_int, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "as_moment_array",
    "central_from_raw_ratios",
    "central_moments_of_mean",
]


def as_moment_array(value: Any, name: str, *, min_ndim: int = 0) -> np.ndarray:
    """A real float64 array (not empty); +-inf and NaN allowed: these helpers do
    arithmetic on closed-form moments, which may have overflowed."""
    if isinstance(value, (str, bytes)):
        raise InvalidArgument(f"`{name}` must be a real array, got {describe(value)}")
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged nested sequences
        raise InvalidArgument(f"`{name}` must be a real array, got {describe(value)}") from exc
    if arr.dtype.kind not in "biuf" or arr.ndim < min_ndim or arr.size == 0:
        dims = f" with at least {min_ndim} dimension" if min_ndim else ""
        raise InvalidArgument(f"`{name}` must be a non-empty real array{dims}, got {describe(arr)}")
    return arr.astype(np.float64, copy=False)


def central_from_raw_ratios(log_r: np.ndarray) -> np.ndarray:
    """Central moments of Z/E[Z] from ``log r_j = log E[(Z/E Z)^j]``, j = 0..K.

    ``mu_k = sum_j C(k, j) (-1)^(k-j) expm1(log r_j)`` (the ``-1`` terms sum to
    zero for k >= 1); ``expm1`` keeps the small-variance case accurate.
    Returns an array (K + 1, ...) with ``mu_0 = 1``, ``mu_1 = 0``.

    Parameters
    ----------
    log_r : numpy.ndarray, shape (K + 1, ...)
        ``log E[(Z / E Z)^j]`` for j = 0..K (``log_r[0] = 0``).
    """
    log_r = as_moment_array(log_r, "log_r", min_ndim=1)
    K = log_r.shape[0] - 1
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.expm1(log_r)
        out = np.empty_like(log_r)
        out[0] = 1.0
        if K >= 1:
            out[1] = 0.0
        for k in range(2, K + 1):
            acc = np.zeros_like(log_r[0])
            for j in range(2, k + 1):  # j = 0, 1 contribute -1 + 1 terms that cancel
                acc = acc + comb(k, j, exact=True) * (-1) ** (k - j) * e[j]
            acc = acc + (-1) ** (k - 1) * k * e[1]  # e[1] = 0 in exact arithmetic
            out[k] = acc
    return out


def _mix(a: np.ndarray, b: np.ndarray, p: float, q: float) -> np.ndarray:
    """Central moments of ``p U + q V`` for independent centred U, V with moments ``a``, ``b``.

    ``E (p U + q V)^k = sum_j C(k, j) p^j q^(k - j) E U^j E V^(k - j)``.
    """
    K = a.shape[0] - 1
    out = np.zeros_like(a)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(K + 1):
            for j in range(k + 1):
                out[k] = out[k] + comb(k, j, exact=True) * p**j * q ** (k - j) * a[j] * b[k - j]
    return out


def central_moments_of_mean(central: np.ndarray, m: int) -> np.ndarray:
    """Central moments of the mean of ``m`` i.i.d. copies of Z from those of Z.

    ``central[k]`` is ``E (Z - E Z)^k`` (k = 0..K, ``central[0] = 1``).  The
    mean of ``a + b`` copies is ``p A + q B`` for the means A, B of ``a`` and
    ``b`` copies, ``p = a / (a + b)``, ``q = b / (a + b)``, whose moments are
    ``sum_j C(k,j) p^j q^(k-j) E A^j E B^(k-j)`` (independent, centred): applied
    by binary powering on the means themselves, so every intermediate is a
    moment of a mean, no larger than Z's, for any ``m`` (the moments of the
    sum, ``m^k`` times larger, overflow float64 for large ``m``).

    Parameters
    ----------
    central : numpy.ndarray, shape (K + 1, ...)
        Central moments of Z, ``central[0] = 1``.
    m : int
        The number of i.i.d. copies averaged.

    Examples
    --------
    >>> import numpy as np
    >>> mu = np.array([1.0, 0.0, 1.0, 0.0, 3.0])          # a standard normal
    >>> central_moments_of_mean(mu, 4).round(12).tolist()  # N(0, 1/4)
    [1.0, 0.0, 0.25, 0.0, 0.1875]
    """
    m = as_int(m, "m", minimum=1)
    central = as_moment_array(central, "central", min_ndim=1)
    result, count = central, 0  # the mean of `count` copies (none yet)
    power, size = central, 1  # the mean of `size` copies
    e = m
    while e:
        if e & 1:
            total = count + size
            result = power if not count else _mix(result, power, count / total, size / total)
            count = total
        e >>= 1
        if e:
            power, size = _mix(power, power, 0.5, 0.5), 2 * size
    return result
