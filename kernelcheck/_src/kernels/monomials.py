"""Monomial feature maps and integer powers of Gram blocks (claim C8).

The building blocks of the polynomial side of the algebra: the count of
degree-m monomials, the weighted monomial map whose inner products are
``(z(x) . z(y)) ** m`` (multinomial theorem), the unweighted map the essay
describes in words, and ``G ** m`` by binary exponentiation with its
rounding count.  Nothing here knows about kernel nodes.
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement
from typing import Any

import numpy as np

from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.validate import as_int, as_points
from kernelcheck.errors import NumericalFailure

__all__ = [
    "MAX_ORDER",
    "check_degree",
    "monomial_dim",
    "int_power",
    "weighted_monomials",
    "weighted_monomials_unchecked",
    "unweighted_monomials",
]

#: Largest order accepted by ``exp(k, order=M)`` and degree by powers: beyond
#: it the feature dimension and the factorials leave any useful range.
MAX_ORDER = 64


def check_degree(m: Any, name: str) -> int:
    """``m`` as a degree (or a Taylor order): an integer in ``[0, MAX_ORDER]``."""
    return as_int(m, name, minimum=0, maximum=MAX_ORDER)


def monomial_dim(d: int, m: int) -> int:
    """Number of unique degree-``m`` monomials in ``d`` variables, C(d+m-1, m) (claim C8).

    Parameters
    ----------
    d : int
        The number of variables, ``>= 1``.
    m : int
        The degree, ``>= 0``.

    Examples
    --------
    >>> monomial_dim(3, 2)
    6
    """
    d = as_int(d, "d", minimum=1)
    m = as_int(m, "m", minimum=0)
    return math.comb(d + m - 1, m)


#: Entries of one block of :func:`int_power` (1 MiB of float64): the power of a
#: block is taken while it is cached, with one block of scratch, instead of
#: whole-array products that each read and write all of G and a fresh G-sized
#: array for the running square.
POWER_BLOCK = 1 << 17


def int_power(G: np.ndarray, m: int, *, owned: bool = False) -> tuple[np.ndarray, int]:
    """``G ** m`` by binary exponentiation; returns the value and the rounding count.

    The count is ``floor(log2 m)`` squarings plus ``popcount(m) - 1``
    products, the ``p`` of the power rules' error models.  With
    ``owned=True`` the caller hands ``G`` over and it may be updated in place
    (no copy); otherwise ``G`` is left untouched.

    Each block of :data:`POWER_BLOCK` entries goes through the whole
    exponentiation at once (entry by entry the same products in the same
    order, so the result is that of whole-array products bit for bit).  The
    cube of a 4000 x 4000 Gram matrix in place (``Polynomial(3, c=1)``, six
    interleaved rounds, load below 1): 65-76 ms as one square and one product
    over the whole array, 26-30 ms by blocks.
    """
    if m == 0:
        return np.ones_like(G), 0
    ops = (m.bit_length() - 1) + (bin(m).count("1") - 1)
    if not G.flags.c_contiguous:
        G, owned = np.ascontiguousarray(G), True  # a copy, ours to update
    out = G if owned else np.empty_like(G)
    src, dst = G.reshape(-1), out.reshape(-1)
    scratch = np.empty(min(POWER_BLOCK, src.size), dtype=G.dtype)
    for s0 in range(0, src.size, POWER_BLOCK):
        block = slice(s0, s0 + POWER_BLOCK)
        _block_power(src[block], m, dst[block], scratch, owned)
    return out, ops


def _block_power(g, m: int, out, scratch, inplace: bool) -> None:
    """``out = g ** m`` (``m >= 1``) by binary exponentiation; ``inplace``: ``out`` is ``g``.

    ``base`` runs through ``g, g^2, g^4, ...`` (the squares in ``scratch``);
    ``out`` takes the first base of a set bit of m (a copy, none when that
    is ``g`` itself in place) and is multiplied by each later one.  ``g`` is
    read only before ``out`` is first written or by the first square, so
    ``out`` may be ``g``.
    """
    base, started = g, False
    sq = scratch[: g.size]
    while True:
        if m & 1:
            if not started:
                if not (inplace and base is g):
                    out[...] = base
                started = True
            else:
                out *= base
        m >>= 1
        if not m:
            return
        np.multiply(base, base, out=sq)
        base = sq


def weighted_monomials(Z: Any, m: int) -> np.ndarray:
    """The symmetric degree-``m`` feature map of the rows of ``Z`` (claim C8).

    Columns are the unique monomials ``z ** alpha`` (``|alpha| = m``) times
    ``sqrt(m! / alpha!)``, so that ``phi(x) . phi(y) = (z(x) . z(y)) ** m``
    (the multinomial theorem).  Built degree by degree: a degree-j column is a
    degree-(j-1) column whose last variable index is ``<= i`` times ``z_i``
    and ``sqrt(j / alpha_i)``, so the cost is one multiplication per output
    entry (time proportional to the output size).

    ``Z`` is validated (a finite real (n, D) array) and the output size is
    checked up front; an entry beyond the floating-point range raises
    :class:`~kernelcheck.errors.NumericalFailure`.

    Parameters
    ----------
    Z : array_like, shape (n, D)
        The rows to map (finite, real).
    m : int
        The degree, ``>= 0``.
    """
    Z = as_points(Z, "Z")
    m = check_degree(m, "m")
    check_size(Z.shape[0] * monomial_dim(Z.shape[1], m), "the monomial feature matrix")
    with np.errstate(over="ignore", invalid="ignore"):
        out = weighted_monomials_unchecked(Z, m)
    if not np.isfinite(out).all():
        raise NumericalFailure(
            f"the degree-{m} monomials of `Z` overflow {out.dtype} (max |Z| = "
            f"{float(np.abs(Z).max()):.3g}); scale the inputs down"
        )
    return out


def weighted_monomials_unchecked(Z: np.ndarray, m: int) -> np.ndarray:
    """:func:`weighted_monomials` without checks (inputs already validated by the caller)."""
    n, D = Z.shape
    if m == 0:
        return np.ones((n, 1), dtype=Z.dtype)
    # blocks[i]: columns whose largest variable is i; mult[i]: alpha_i of each column
    blocks = [Z[:, i : i + 1].copy() for i in range(D)]
    mults = [np.ones(1) for _ in range(D)]
    for j in range(2, m + 1):
        new_blocks, new_mults = [], []
        for i in range(D):
            prev = np.concatenate(blocks[: i + 1], axis=1)
            # the multiplicity of i rises by one in columns that already end in i
            prev_mult = np.concatenate(
                [np.zeros(blocks[l].shape[1]) for l in range(i)] + [mults[i]]
            )
            mult = prev_mult + 1.0
            factor = np.sqrt(j / mult).astype(Z.dtype)
            new_blocks.append(prev * (Z[:, i : i + 1] * factor[None, :]))
            new_mults.append(mult)
        blocks, mults = new_blocks, new_mults
    return np.concatenate(blocks, axis=1)


def unweighted_monomials(X: Any, degree: int) -> np.ndarray:
    """The unique degree-``degree`` monomials of each row, *without* weights.

    This is the map the essay describes in words ("maps out all the unique
    degree m monomials", claim C8).  It has C(d+m-1, m) coordinates but does
    **not** reproduce ``(x . y) ** m`` for m >= 2 and d >= 2: the cross terms
    lack their multinomial coefficients.  Provided so the claim can be
    checked; use ``Polynomial(m).features()`` for the correct map.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The rows to map.
    degree : int
        The degree m, ``>= 0``.
    """
    X = as_points(X, "X")
    degree = check_degree(degree, "degree")
    # Refuse before listing the index tuples: the list alone can exhaust memory.
    check_size(X.shape[0] * math.comb(X.shape[1] + degree - 1, degree), "the monomial matrix")
    check_size(math.comb(X.shape[1] + degree - 1, degree) * degree, "the monomial index table")
    combos = list(combinations_with_replacement(range(X.shape[1]), degree))
    if degree == 0:
        return np.ones((X.shape[0], 1), dtype=X.dtype)
    idx = np.array(combos, dtype=np.intp)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.prod(X[:, idx], axis=2)
    if not np.isfinite(out).all():
        raise NumericalFailure(
            f"the degree-{degree} monomials of `X` overflow {out.dtype} (max |X| = "
            f"{float(np.abs(X).max()):.3g}); scale the inputs down"
        )
    return out
