"""Pure, costly results computed once within one verification (a scoped memo).

A verifier judges one case several times with the same inputs: the output's
bound in float64 and in the layer's model, the final state's bound, the
bounds of a hand-over.  Some bounds (the delta-rule families' normwise model)
take as long as the reference itself, and part of each (the magnitudes, the
chunk bands, the float64 fixed point) is the same whichever model asks.
:func:`memo_scope` opens a table for the duration of a call; inside it
:func:`memoized` computes a value once per key.  Outside any scope nothing is
kept: a library call computes afresh and holds no memory afterwards.

Keys name their inputs by content (:func:`digest`), never by identity, so an
array modified in place or a new array equal to an old one is keyed right.
The table keeps the most recently used entries within :data:`BUDGET` bytes
of arrays (large inputs make large intermediates; the newest entry is kept
whatever its size).  Values are shared: a caller that changes a memoized
array must copy it first.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

__all__ = ["BUDGET", "digest", "memo_active", "memo_scope", "memoized", "nbytes"]

#: Bytes of arrays a scope keeps, the most recently used entries first.
BUDGET = 256 * 2**20

_T = TypeVar("_T")
_TABLE: contextvars.ContextVar[OrderedDict | None] = contextvars.ContextVar(
    "kernelcheck_memo", default=None
)


@contextlib.contextmanager
def memo_scope() -> Iterator[None]:
    """A memo table for the duration of the ``with`` block (nested blocks share the outer one)."""
    if _TABLE.get() is not None:
        yield
        return
    token = _TABLE.set(OrderedDict())
    try:
        yield
    finally:
        _TABLE.reset(token)


def memo_active() -> bool:
    """Whether a :func:`memo_scope` is open (a key is worth computing only then)."""
    return _TABLE.get() is not None


def digest(*arrays: Any) -> bytes:
    """A content key of arrays (None allowed): shapes, dtypes and every byte.

    SHA-256: where the processor has its instructions, the fastest of
    hashlib's functions on the large arrays keys name (a third faster than
    BLAKE2b here); a collision is as unlikely as in any cryptographic hash.
    """
    h = hashlib.sha256()
    for x in arrays:
        if x is None:
            h.update(b"|none")
            continue
        a = np.ascontiguousarray(x)
        h.update(f"|{a.shape}{a.dtype.str}".encode())
        try:  # the bytes in place; a dtype the buffer protocol lacks is copied out
            h.update(a.data.cast("B"))
        except (TypeError, ValueError):
            h.update(a.tobytes())
    return h.digest()


def memoized(key: tuple, compute: Callable[[], _T]) -> _T:
    """``compute()``, or the value kept for ``key`` inside the current :func:`memo_scope`."""
    table = _TABLE.get()
    if table is None:
        return compute()
    if key in table:
        table.move_to_end(key)
        return table[key][0]
    value = compute()
    table[key] = (value, nbytes(value))
    while len(table) > 1 and sum(size for _, size in table.values()) > BUDGET:
        table.popitem(last=False)
    return value


def nbytes(value: Any) -> int:
    """Bytes of the arrays in ``value`` (an array, or tuples of them and other values)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, tuple):
        return sum(nbytes(x) for x in value)
    return 0
