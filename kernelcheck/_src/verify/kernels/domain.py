"""Where the counterexample search of :func:`~kernelcheck.verify.kernel` looks (claim C5).

A kernel may be defined only on part of ``R^d``: histogram kernels on
``x > 0``, the Hilbert kernel ``1 / (x + y + 1)`` on ``x > -1/2``.  The
search then runs in a latent space ``R^d`` mapped strictly inside the
domain, coordinate by coordinate:

* a bounded side pair ``(low, high)``: ``c + h tanh(z)`` (``c``, ``h`` the
  centre and half-width), kept one float inside each end;
* a half-line ``(low, inf)``: ``low + log(1 + e^z)``, kept one float above
  ``low`` (and ``(-inf, high)`` mirrored);
* the whole line: ``z`` itself.

The map is smooth, so L-BFGS-B still moves the points; a sampler of points
(``sampler(rng, n)``) replaces the seeded families and the optimiser.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.validate import describe
from kernelcheck.errors import InvalidArgument

__all__ = ["Domain", "as_domain"]


class Domain(NamedTuple):
    """The checked ``domain=`` of the search (from :func:`as_domain`)."""

    low: np.ndarray | None  # (dim,) with -inf for an open side; None for a sampler
    high: np.ndarray | None
    sampler: Callable | None
    text: str  # for the report

    def map(self, Z: np.ndarray) -> np.ndarray:
        """Latent points ``Z`` (n, dim) to points strictly inside the box."""
        if self.low is None or self.high is None:
            return Z
        lo, hi = self.low, self.high
        P = np.array(Z, dtype=np.float64)
        both = np.isfinite(lo) & np.isfinite(hi)
        lo_only = np.isfinite(lo) & ~np.isfinite(hi)
        hi_only = ~np.isfinite(lo) & np.isfinite(hi)
        with np.errstate(over="ignore"):
            if both.any():
                c, h = 0.5 * (lo[both] + hi[both]), 0.5 * (hi[both] - lo[both])
                P[:, both] = c + h * np.tanh(Z[:, both])
            if lo_only.any():
                P[:, lo_only] = lo[lo_only] + np.logaddexp(0.0, Z[:, lo_only])
            if hi_only.any():
                P[:, hi_only] = hi[hi_only] - np.logaddexp(0.0, -Z[:, hi_only])
        inside_lo = np.where(np.isfinite(lo), np.nextafter(lo, math.inf), -math.inf)
        inside_hi = np.where(np.isfinite(hi), np.nextafter(hi, -math.inf), math.inf)
        return np.clip(P, inside_lo, inside_hi)

    def sample(self, rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
        """``n`` points from the sampler, checked: a finite real (n, dim) array."""
        assert self.sampler is not None  # guarded by the caller
        out = call_user(self.sampler, "`domain` (the sampler)", rng, n)
        try:
            P = np.asarray(out)
        except Exception:  # noqa: BLE001 - not an array: reported below
            P = np.empty(0, dtype=object)
        if P.shape != (n, dim) or P.dtype.kind not in "biuf" or not np.isfinite(P).all():
            raise InvalidArgument(
                f"`domain` (the sampler) must return a finite real array of shape ({n}, {dim}) "
                f"for sampler(rng, {n}), got {describe(out)}"
            )
        return np.asarray(P, dtype=np.float64)


def _side(value, name: str, dim: int) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64) if _is_real(value) else None
    if a is None or a.ndim > 1 or (a.ndim == 1 and a.shape[0] != dim):
        raise InvalidArgument(
            f"`domain` {name} must be a number or an array of length dim = {dim}, "
            f"got {describe(value)}"
        )
    if np.isnan(a).any():
        raise InvalidArgument(f"`domain` {name} must not be NaN, got {describe(value)}")
    return np.broadcast_to(a, (dim,)).copy()


def _is_real(value) -> bool:
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything numpy cannot read is not a bound
        return False
    return a.dtype.kind in "biuf"


def as_domain(domain, dim: int) -> Domain | None:
    """Check ``domain=``: None, a box ``(low, high)`` or a sampler ``(rng, n) -> (n, dim)``."""
    if domain is None:
        return None
    if callable(domain):
        name = getattr(domain, "__name__", "sampler")
        return Domain(None, None, domain, f"points drawn by {name}")
    if not isinstance(domain, (tuple, list)) or len(domain) != 2:
        raise InvalidArgument(
            "`domain` must be a box (low, high) or a sampler(rng, n) -> (n, dim) array, "
            f"got {describe(domain)}"
        )
    lo = _side(domain[0], "low", dim)
    hi = _side(domain[1], "high", dim)
    if not (lo < hi).all() or np.isposinf(lo).any() or np.isneginf(hi).any():
        j = int(np.argmax(~(lo < hi) | np.isposinf(lo) | np.isneginf(hi)))
        raise InvalidArgument(
            f"`domain` is empty: low[{j}] = {lo[j]:.6g} is not below high[{j}] = {hi[j]:.6g} "
            "(each coordinate needs low < high)"
        )
    text = "the box " + ", ".join(f"({a:.3g}, {b:.3g})" for a, b in zip(lo, hi))
    if len(set(zip(lo.tolist(), hi.tolist()))) == 1:
        text = f"the box ({lo[0]:.3g}, {hi[0]:.3g})^{dim}"
    return Domain(lo, hi, None, text)
