"""When a measured time exponent corroborates an operation count (claims C2, C3).

The timing error model.  A form whose operation count grows as ``n^p`` runs
in time ``T(n) = c(n) n^p`` where ``c(n)``, the time per modelled
operation, is not constant: caches, the shapes BLAS gets, fixed per-call
costs and the lower-order terms of the count change it with n.  If ``c``
changes by at most a factor :data:`COST_SPREAD` (rho = 2) between the
smallest and the largest size, the exponent measured over ``n_lo .. n_hi``
lies within

    p +- log(rho) / log(n_hi / n_lo),

the *accepted range*.  Read the other way: a fitted exponent ``p'`` says
that time per operation changes by ``(n_hi / n_lo)^(p' - p)`` across the
sizes, and the range accepts a change up to rho either way.  The spread of
time per operation actually measured is reported beside it (it was 1.2-1.7
for the forms of :mod:`kernelcheck.attention` on the machines we measured).
A wider range of n makes the range narrower: over a factor 64 it is
``p +- 0.17``, over a factor 8 it is ``p +- 0.33``.

Below :data:`MIN_SIZE_RATIO` = rho^3 = 8 the accepted range would be wider
than ``p +- 1/3`` and an algorithm one power of n away could not be told
apart with a margin; below :data:`MIN_SIZES` sizes one disturbed size moves
the slope.  Either way the timing is **not judged**, with the reason, and
never refuted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from kernelcheck._src.core.validate import as_real
from kernelcheck._src.scaling.sizes import as_sizes
from kernelcheck.errors import InvalidArgument

__all__ = [
    "COST_SPREAD",
    "MIN_SIZES",
    "MIN_SIZE_RATIO",
    "AcceptedRange",
    "accepted_range",
]

#: Largest change of time per modelled operation across the sizes (the timing error model).
COST_SPREAD = 2.0
#: Fewest sizes a timing verdict is given on.
MIN_SIZES = 5
#: Smallest ratio n_hi / n_lo a timing verdict is given on: rho^3, so the range is p +- 1/3.
MIN_SIZE_RATIO = COST_SPREAD**3


class AcceptedRange(NamedTuple):
    """The accepted range of a time exponent over some sizes, or why there is none.

    ``low``/``high`` are None when the sizes cannot support a verdict; ``reason``
    then says why (and otherwise states the model the range comes from).
    """

    exponent: float
    low: float | None
    high: float | None
    reason: str

    @property
    def judged(self) -> bool:
        """Whether the sizes support a verdict."""
        return self.low is not None

    def pair(self) -> tuple[float, float] | None:
        """``(low, high)``, or None when not judged."""
        if self.low is None or self.high is None:
            return None
        return (self.low, self.high)


def accepted_range(
    exponent: float, sizes: Sequence[int], spread: float = COST_SPREAD
) -> AcceptedRange:
    """The accepted range ``exponent +- log(spread) / log(n_hi / n_lo)`` over ``sizes``.

    Not judged (``low = high = None``) with fewer than :data:`MIN_SIZES`
    sizes or a ratio ``n_hi / n_lo`` below ``spread**3``; see the module
    docstring for the model.

    Parameters
    ----------
    exponent : float
        The exponent of the cost model.
    sizes : sequence of int
        The sizes measured.
    spread : float, default 2.0
        The largest ratio of the time per modelled operation across the sizes.

    Examples
    --------
    >>> r = accepted_range(2.0, [512, 1024, 2048, 4096, 8192])
    >>> round(r.low, 3), round(r.high, 3)
    (1.75, 2.25)
    >>> accepted_range(2.0, [64, 128, 256]).judged
    False
    """
    exponent = as_real(exponent, "exponent")
    sizes = list(as_sizes(sizes))
    spread = as_real(spread, "spread")
    if not spread > 1.0:
        raise InvalidArgument(f"`spread` must be a real number > 1, got {spread!r}")
    ratio = sizes[-1] / sizes[0]
    if len(sizes) < MIN_SIZES:
        return AcceptedRange(
            exponent,
            None,
            None,
            f"{len(sizes)} sizes; a timing verdict needs at least {MIN_SIZES}",
        )
    if ratio < spread**3:
        return AcceptedRange(
            exponent,
            None,
            None,
            f"n spans a factor {ratio:.3g}; a timing verdict needs at least "
            f"{spread**3:g} (time per operation may change by a factor {spread:g} across sizes)",
        )
    half = math.log(spread) / math.log(ratio)
    return AcceptedRange(
        exponent,
        exponent - half,
        exponent + half,
        f"{exponent:g} +- log {spread:g} / log({sizes[-1]}/{sizes[0]}) = +- {half:.3f}: time per "
        f"operation may change by a factor {spread:g} across the sizes",
    )
