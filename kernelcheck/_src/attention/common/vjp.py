"""What the reference backward passes share: the VJP record, blocks of query rows, masks.

For a cotangent ``G`` of the output's shape, the VJP of a form is the
gradient of ``<G, out>`` with respect to each input: what a layer's backward
pass computes.  The references form the n x n weights in float64 a block of
query rows at a time (:func:`vjp_block_rows`, :func:`row_blocks`); their
bounds (Higham's standard model) scale by :func:`float64_share` for the
float64 reference's own error.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.core.validate import as_array, describe
from kernelcheck.errors import InvalidArgument


class VJP(NamedTuple):
    """The gradients of ``<G, out>`` with respect to the three inputs of a form."""

    dA: np.ndarray  # dQ (softmax) or dphi_q (linear)
    dB: np.ndarray  # dK or dphi_k
    dV: np.ndarray


def swap_last(X):
    return np.swapaxes(X, -1, -2)


def cotangent(G, out_shape) -> np.ndarray:
    G = as_array(G, "G", dtype=np.float64)
    if G.shape != out_shape:
        raise InvalidArgument(f"`G` must have the output's shape {out_shape}, got {describe(G)}")
    return G


_MASK_ROWS = 256


def mask_future_entries(S: np.ndarray, value: float) -> None:
    """Set ``S[..., i, j] = value`` for every ``j > i``, in place.

    Row blocks of :data:`_MASK_ROWS`: the keys past a block are one slice,
    its diagonal square takes a small triangular mask (a boolean mask over
    the whole ``n x m`` matrix costs several passes over it).
    """
    n, m = S.shape[-2:]
    tri = np.triu(np.ones((_MASK_ROWS, _MASK_ROWS), dtype=bool), 1)
    for i0 in range(0, n, _MASK_ROWS):
        i1, c1 = min(n, i0 + _MASK_ROWS), min(m, i0 + _MASK_ROWS)
        if i1 < m:
            S[..., i0:i1, i1:] = value
        if i0 < c1:
            S[..., i0:i1, i0:c1][..., tri[: i1 - i0, : c1 - i0]] = value


#: Entries of one query block's ``rows x m`` arrays in the softmax VJP (2 MiB
#: of float64).  A block's six such arrays (weights, ``dP - c``, ``dS``,
#: ``P (|G| |V|^T)``, two of scratch) are reused from block to block, in place
#: of four ``n x m`` arrays formed afresh (at n = 4096, 537 MB, each page
#: faulted in on first touch).  ``softmax_vjp_with_bounds`` at n = 4096,
#: d = d_v = 64, one float32 bound plus float64's (interleaved, 4 rounds, load
#: below 1): causal 0.96-1.02 s before, 0.44-0.52 s with blocks of 2^18
#: entries (a causal block skips the keys after its last row); bidirectional
#: 1.08-1.28 s before, 0.80-0.82 s.  Blocks of 2^17 to 2^20 entries were within
#: 10% of each other, 2^16 1.4x slower (products of 16 rows).
_VJP_BLOCK_ELEMENTS = 1 << 18


#: Fewest query rows a block (unless n is smaller), whatever the batch: with 32
#: heads of n = 512, d = 64, blocks of 16 rows (2^18 entries over the batch)
#: took 1.28x the time of blocks of 64 (products of 16 rows lose BLAS speed).
_VJP_MIN_ROWS = 64


def vjp_block_rows(batch: tuple, n: int, m: int, arrays: int, form: str) -> int:
    """Query rows per block of a VJP pass keeping ``arrays`` blocks of its n x m weights."""
    nb = int(np.prod(batch, dtype=np.int64))
    rows = min(n, max(_VJP_MIN_ROWS, _VJP_BLOCK_ELEMENTS // max(1, nb * m)))
    check_size(arrays * nb * rows * m, f"the {form} VJP's blocks of weights")
    return rows


def row_blocks(n: int, m: int, rows: int, causal: bool):
    """``(r0, r1, c1)`` for each block of query rows ``[r0, r1)``: keys ``[0, c1)`` it sees.

    Causal, row i sees keys ``j <= i``, so a block's last row sees ``r1``
    keys; every weight of a later key is exactly 0 and is not formed.
    """
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        yield r0, r1, (min(m, r1) if causal else m)


def float64_share(dt, ks) -> float:
    """``c`` with ``B(float64) <= c B(dt)`` for the VJP bounds of this module (``c <= 1``).

    Every additive term of a bound is a product of non-negative factors, at
    least one of them first order: ``u``, ``eta``, a ``gamma_k`` with ``k``
    in ``ks``, or built from them (``theta``, ``expm1(2 theta)``, ``rho``,
    ``alpha``), and every other factor is non-decreasing in them.  Each
    first-order quantity of float64 is at most ``c`` times ``dt``'s, with
    ``c`` the largest of the ratios ``u_64 / u``, ``eta_64 / eta``,
    ``gamma_k(64) / gamma_k`` -- for ``expm1`` because
    ``expm1(c x) <= c expm1(x)`` for ``c <= 1``, ``x >= 0`` (convexity),
    for products of first-order factors because the others only shrink.
    So each term, and the bound, shrinks at least by ``c``.  ``dt`` at
    least as coarse as float64 in every ratio is required (else ``c = 1``
    would not hold and a ``ValueError`` is raised: a programming error).
    """
    ratios = [unit_roundoff(np.float64) / unit_roundoff(dt), eta(np.float64) / eta(dt)]
    ratios += [gamma(k, np.float64) / gamma(k, dt) for k in ks]
    c = max(ratios)
    if not c <= 1.0:
        raise ValueError(f"float64_share: {dt!r} is finer than float64 in some ratio ({c})")
    return c


def scaled(b: VJP, f: float) -> VJP:
    return VJP(*(x * f for x in b))
