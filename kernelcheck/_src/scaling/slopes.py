"""Slopes on the log-log scale: Theil-Sen with Sen's interval, and the per-round median.

Two interval methods for the exponent p of ``value ~ c n^p`` (claims C2, C3):

* :func:`theil_sen`: the Theil-Sen slope (the median of the pairwise slopes)
  with Sen's (1968) interval from the distribution of Kendall's tau, for one
  value per size with independent errors (the same numbers as
  :func:`scipy.stats.theilslopes`, computed here so that fitting an
  exponent does not import :mod:`scipy.stats`, which takes about a second);
* :func:`round_slopes` and :func:`median_interval`: a timing experiment
  made of *rounds* (each round times every size once, in a fresh random
  order) gives one Theil-Sen slope per round; their median estimates p and
  a pair of order statistics bounds it.  The interval is distribution-free:
  for R independent rounds whose slopes have median p, the interval
  ``[b_(j), b_(R+1-j)]`` of the sorted slopes misses p with probability
  exactly ``2 P(Binomial(R, 1/2) <= j - 1)`` (continuous slopes), whatever
  the noise.  A load that slows a whole round down (another process, a
  frequency change) multiplies every time of the round by about the same
  factor and cancels in its slope; a burst that hits one size is outvoted
  inside the round by Theil-Sen and a disturbed round across rounds by the
  median.  ``tests/scaling/test_slopes.py`` measures the coverage by
  simulation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri

__all__ = [
    "TheilSen",
    "MedianInterval",
    "theil_sen",
    "pairwise_median_slope",
    "round_slopes",
    "median_interval",
    "min_rounds",
]


class TheilSen(NamedTuple):
    """A Theil-Sen fit: slope, intercept and Sen's interval for the slope."""

    slope: float
    intercept: float
    low: float
    high: float


class MedianInterval(NamedTuple):
    """An order-statistic interval for a median and its exact coverage."""

    median: float
    low: float
    high: float
    coverage: float
    rank: int  # the interval is [b_(rank), b_(R + 1 - rank)] of the sorted values


def _repeat_counts(v: np.ndarray) -> np.ndarray:
    """Sizes of the groups of tied values (groups of two or more)."""
    _, counts = np.unique(v, return_counts=True)
    return counts[counts > 1]


def theil_sen(x, y, confidence: float = 0.95) -> TheilSen:
    """Theil-Sen slope of ``y`` on ``x`` with Sen's interval at ``confidence``.

    The slope is the median of ``(y_j - y_i) / (x_j - x_i)`` over pairs with
    ``x_j > x_i``; the intercept is ``median(y) - slope median(x)``.  The
    interval holds the sorted slopes of ranks ``(N -+ z sigma) / 2`` where
    ``sigma^2`` is the variance of Kendall's statistic with ties (Sen 1968,
    eq. 2.6) and ``z`` the normal quantile: the method and the numbers of
    :func:`scipy.stats.theilslopes` (``method="separate"``).
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    dx = x[:, None] - x
    dy = y[:, None] - y
    slopes = np.sort(dy[dx > 0] / dx[dx > 0])
    slope = float(np.median(slopes))
    intercept = float(np.median(y) - slope * np.median(x))
    alpha = 1.0 - confidence if confidence > 0.5 else confidence
    z = float(ndtri(alpha / 2.0))
    ny, nt = len(y), len(slopes)
    ties = sum(int(k * (k - 1) * (2 * k + 5)) for v in (x, y) for k in _repeat_counts(v))
    sigma = math.sqrt((ny * (ny - 1) * (2 * ny + 5) - ties) / 18.0)
    upper = min(int(np.round((nt - z * sigma) / 2.0)), nt - 1)
    lower = max(int(np.round((nt + z * sigma) / 2.0)) - 1, 0)
    return TheilSen(slope, intercept, float(slopes[lower]), float(slopes[upper]))


def pairwise_median_slope(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The Theil-Sen slope of each row of ``Y`` (shape (..., k)) on the distinct ``x`` (k,)."""
    i, j = np.triu_indices(len(x), k=1)
    return np.median((Y[..., j] - Y[..., i]) / (x[j] - x[i]), axis=-1)


def round_slopes(sizes, times) -> np.ndarray:
    """One Theil-Sen slope of ``log time`` on ``log n`` per round.

    ``times`` has shape (k sizes, R rounds): column r holds the times of
    round r.  Returns the R slopes.
    """
    x = np.log(np.asarray(sizes, dtype=np.float64))
    return pairwise_median_slope(x, np.log(np.asarray(times, dtype=np.float64)).T)


def _binomial_tail(R: int, j: int) -> float:
    """``P(Binomial(R, 1/2) <= j)``, exactly."""
    return sum(math.comb(R, i) for i in range(j + 1)) / 2.0**R


def min_rounds(confidence: float) -> int:
    """Fewest rounds whose widest order-statistic interval (min, max) reaches ``confidence``.

    ``[min, max]`` of R values covers their median with probability
    ``1 - 2^(1 - R)``: 6 rounds for 95%, 8 for 99%.
    """
    R = 2
    while 1.0 - 2.0 ** (1 - R) < confidence:
        R += 1
    return R


def median_interval(values, confidence: float = 0.95) -> MedianInterval:
    """The distribution-free interval for the median of ``values`` at ``confidence``.

    Of the intervals ``[b_(j), b_(R+1-j)]`` between order statistics of the
    R sorted values, the narrowest whose coverage ``1 - 2 P(Bin(R, 1/2) <=
    j - 1)`` is at least ``confidence``.  With fewer than
    :func:`min_rounds` values no such interval exists: then the interval is
    ``[min, max]`` and ``coverage`` says what it reaches (below
    ``confidence``), for the caller to report as not judged.
    """
    b = np.sort(np.asarray(values, dtype=np.float64).ravel())
    R = len(b)
    rank = 1
    while rank < (R + 1) // 2 and 1.0 - 2.0 * _binomial_tail(R, rank) >= confidence:
        rank += 1
    coverage = 1.0 - 2.0 * _binomial_tail(R, rank - 1)
    return MedianInterval(
        float(np.median(b)), float(b[rank - 1]), float(b[R - rank]), coverage, rank
    )
