"""Where a failing output stops agreeing with the reference, along the token axis.

A layer's bug usually starts somewhere: at the first token of a new block
(a chunked state handed over wrongly, an accumulator not rescaled), in the
partial last block of a sequence whose length is no multiple of the block,
or on every token (a wrong scale, a missing normaliser).  :func:`localise`
reads the rows (tokens) with an entry beyond its tolerance and says which
rows agree, where the first mismatch is, whether it sits on a multiple of a
block size layers use (:data:`BLOCKS`), and how the mismatches spread: every
row from there on, one row per block, or only the partial last block.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCKS", "mismatched_rows", "localise"]

#: Block and chunk sizes layers use, largest first: a first mismatch at a multiple of
#: one of them is named as a likely block boundary.
BLOCKS = (128, 64, 32, 16)


def mismatched_rows(err: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """The rows (axis -2) with an entry beyond its tolerance (a NaN error counts as beyond)."""
    bad = ~(err <= tol)
    axes = tuple(a for a in range(bad.ndim) if a != bad.ndim - 2)
    return np.nonzero(bad.any(axis=axes))[0] if axes else np.nonzero(bad)[0]


def _agree(first: int) -> str:
    if first == 0:
        return "first mismatch at t = 0"
    rows = "row 0 agrees" if first == 1 else f"rows 0-{first - 1} agree"
    return f"{rows}; first mismatch at t = {first}"


def _spread(rows: np.ndarray, n: int) -> str:
    """How the mismatched rows spread from the first one on."""
    first, count = int(rows[0]), rows.size
    partial = [b for b in reversed(BLOCKS) if n % b and first >= n - n % b and n > b]
    within = ""
    if partial:
        sizes = ", ".join(str(b) for b in partial)
        within = f"the partial last block of {n % partial[0]} tokens for blocks of {sizes}"
    if count == n - first:
        every = "every row from there on" if first > 0 else "every row"
        return f"{every} ({within})" if within else every
    if within:
        return f"{count} rows, all within {within}"
    if count >= 2:
        for b in BLOCKS:
            if np.all(np.diff(rows) == b):
                return f"mismatches only at rows {first % b} mod {b}: one row per block of {b}"
    last = int(rows[-1])
    return f"{count} of the {n - first} rows from there on mismatch (the last at t = {last})"


def localise(err: np.ndarray, tol: np.ndarray) -> str:
    """The token rows of a failing output, in words ('' when every entry is within tolerance).

    Parameters
    ----------
    err : numpy.ndarray, shape (..., n, m)
        ``|got - ref|`` entrywise.
    tol : numpy.ndarray, shape (..., n, m)
        The entrywise tolerance.

    Returns
    -------
    str
        E.g. ``"rows 0-63 agree; first mismatch at t = 64, a multiple of 64 (a likely
        block boundary); every row from there on"``.

    Examples
    --------
    >>> err = np.zeros((8, 2)); err[4:] = 1.0
    >>> localise(err, np.full((8, 2), 0.5))
    'rows 0-3 agree; first mismatch at t = 4; every row from there on'
    """
    if err.ndim < 2:
        return ""
    rows = mismatched_rows(err, tol)
    if rows.size == 0:
        return ""
    n, first = err.shape[-2], int(rows[0])
    text = _agree(first)
    block = next((b for b in BLOCKS if first > 0 and first % b == 0), None)
    if block is not None:
        text += f", a multiple of {block} (a likely block boundary)"
    return f"{text}; {_spread(rows, n)}"
