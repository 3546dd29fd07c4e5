"""Grids of sizes n: the geometric grid and the check of a user's sizes.

Both :func:`~kernelcheck._src.scaling.measure.measure` and
:func:`~kernelcheck._src.scaling.fit.fit_exponent` take strictly increasing
positive integer sizes; :func:`as_sizes` is the one check of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.core.validate import as_int, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["geometric_sizes", "as_sizes"]

#: Largest size n accepted: integers up to 2**53 are exact in float64, where the fits work.
_MAX_SIZE = 2**53


def geometric_sizes(start: int, stop: int, *, num: int | None = None) -> tuple[int, ...]:
    """A geometric grid of integer sizes from ``start`` to ``stop``.

    Parameters
    ----------
    start : int
        The first size, ``1 <= start < stop``.
    stop : int
        The last size, ``<= 2**53``.
    num : int or None, default None
        Number of sizes (``>= 2``, at most ``stop - start + 1``), spaced evenly
        in ``log n`` and rounded to integers (duplicates after rounding are
        dropped).  Default: the
        doubling grid ``start, 2 start, 4 start, ...`` up to ``stop``
        (``stop`` itself is included only when it is on the grid).

    Returns
    -------
    tuple of int
        Strictly increasing sizes.

    Examples
    --------
    >>> geometric_sizes(1024, 16384)
    (1024, 2048, 4096, 8192, 16384)
    >>> geometric_sizes(10, 1000, num=3)
    (10, 100, 1000)
    """
    start = as_int(start, "start", minimum=1, maximum=_MAX_SIZE)
    stop = as_int(stop, "stop", minimum=1, maximum=_MAX_SIZE)
    if stop <= start:
        raise InvalidArgument(f"`stop` must be larger than `start` = {start}, got {stop}")
    if num is None:
        out = []
        n = start
        while n <= stop:
            out.append(n)
            n *= 2
        if len(out) < 2:  # pragma: no cover - stop > start guarantees two for doubling
            out.append(stop)
        return tuple(out)
    num = as_int(num, "num", minimum=2)
    if num > stop - start + 1:
        raise InvalidArgument(
            f"`num` must be at most the {stop - start + 1} integers from `start` = {start} to "
            f"`stop` = {stop}, got {num}"
        )
    grid = np.rint(np.geomspace(start, stop, num)).astype(np.int64)
    return tuple(int(v) for v in np.unique(grid))


def as_sizes(sizes: Any, name: str = "sizes", *, minimum_count: int = 2) -> tuple[int, ...]:
    """``sizes`` as a tuple of at least ``minimum_count`` strictly increasing ints in [1, 2**53]."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__"):
        raise InvalidArgument(
            f"`{name}` must be a sequence of positive integers, got {describe(sizes)}"
        )
    out = []
    for i, s in enumerate(sizes):
        if isinstance(s, (np.integer,)):
            s = int(s)
        out.append(as_int(s, f"{name}[{i}]", minimum=1, maximum=_MAX_SIZE))
    if len(out) < minimum_count:
        raise InvalidArgument(
            f"`{name}` must hold at least {minimum_count} sizes to fit an exponent, got {len(out)}"
        )
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise InvalidArgument(f"`{name}` must be strictly increasing, got {tuple(out)}")
    return tuple(out)
