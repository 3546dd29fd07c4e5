"""Rigorous bounds on ``lambda_min`` for :func:`~kernelcheck.psd.check_psd` (claim C5).

Every number here is an *outward* bound: a lower bound is rounded down, an
upper bound up, with the margin of the float computation behind it stated.

* :func:`fraction_up` / :func:`fraction_down` -- an exact rational to the
  nearest float on the safe side;
* :func:`scale_down` / :func:`scale_up` -- ``x / sigma`` for a power of two
  ``sigma``, outward where the quotient underflows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = [
    "fraction_up",
    "fraction_down",
    "scale_down",
    "scale_up",
]


def fraction_up(q: Fraction) -> float:
    """The smallest float ``>= q`` (``inf`` beyond the range)."""
    try:
        f = float(q)
    except OverflowError:
        return math.inf if q > 0 else -np.finfo(np.float64).max
    if Fraction(f) < q:
        f = float(np.nextafter(f, math.inf))
    return f


def fraction_down(q: Fraction) -> float:
    """The largest float ``<= q`` (``-inf`` beyond the range)."""
    return -fraction_up(-q)


def scale_down(x: float, sigma: float) -> float:
    """A float ``<= x / sigma`` (exact unless the quotient is subnormal)."""
    y = x / sigma
    if math.isfinite(y) and y * sigma != x:
        y = float(np.nextafter(y, -math.inf))
    return y


def scale_up(x: float, sigma: float) -> float:
    """A float ``>= x / sigma`` (exact unless the quotient is subnormal)."""
    return -scale_down(-x, sigma)
