"""The decays of the gated chunked form (claim C20): chunk-local and group-scaled.

:func:`~kernelcheck._src.attention.common.blocking.causal_products` applies gates in
one of two ways.  Chunk by chunk (:class:`Decays`): each chunk's cumulative
log gates give its decay mask, its keys' decays to its end and its state's
decay.  Once per group of chunks (:class:`GroupScales`, float64 within
:func:`factor_range`): rows scaled by ``exp(LC_i)`` and ``exp(-LC_j)`` from
the group's first token go through the plain products.  Every exponent is
formed from differences of log sums, never as a running product of gates.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class GroupScales:
    """``exp(LC_i)`` and ``exp(-LC_i)`` for every token, LC cumulative within its group of chunks.

    Formed once per call for the groups of the plan of
    :func:`~kernelcheck._src.attention.common.blocking.causal_products` (a
    ``cumsum`` and two ``exp`` over the n gates, 3 n numbers), in float64
    only and only when every group's ``|LC|`` is within :func:`factor_range`:
    then each factor is a normal number, accurate to the 4 ulp of ``exp``.
    ``LC`` is non-increasing (log gates are <= 0), so ``exp(LC) <= 1``.
    """

    def __init__(self, lc: np.ndarray):
        self.up, self.down = np.exp(lc), np.exp(-lc)

    @classmethod
    def of(cls, log_gates: np.ndarray, plan, dtype) -> GroupScales | None:
        """The scales for ``plan``'s groups, or None: not float64, or beyond the range."""
        if log_gates.dtype != np.float64 or dtype != np.float64:
            return None  # float32 keeps the chunk-local differences (its model counts 6 u)
        lc = np.empty(log_gates.shape, dtype=np.float64)
        first_len = plan[0][1] * plan[0][2]
        same = 0  # the leading groups of equal length: one cumsum for all of them
        while same < len(plan) and plan[same][1] * plan[same][2] == first_len:
            same += 1
        head, shape = same * first_len, log_gates.shape[:-1]
        sums = np.cumsum(log_gates[..., :head].reshape(shape + (same, first_len)), axis=-1)
        lc[..., :head] = sums.reshape(shape + (head,))
        for r0, k, c in plan[same:]:
            lc[..., r0 : r0 + k * c] = np.cumsum(log_gates[..., r0 : r0 + k * c], axis=-1)
        if lc.size and lc.min() < -factor_range(lc.dtype):
            return None
        return cls(lc)

    def group(self, r0: int, r1: int, k: int, c: int):
        """``(exp(LC), exp(-LC), exp(LC_last))`` of the group of tokens r0..r1, as (..., k, c)."""
        shape = self.up.shape[:-1] + (k, c)
        up = self.up[..., r0:r1]
        return up.reshape(shape), self.down[..., r0:r1].reshape(shape), up[..., -1]


class ChunkDecays(NamedTuple):
    """The decays of a group of k chunks of c tokens (views into :class:`Decays`)."""

    lc: np.ndarray  # (..., k, c): cumulative log gates within each chunk
    from_start: np.ndarray  # (..., k, c): exp(lc_i), the decay from the chunk's start to i
    to_end: np.ndarray  # (..., k, c): exp(lc_last - lc_j), from j to the chunk's end
    whole: np.ndarray  # (..., k): exp(lc_last), the gates' product over each chunk
    growth: np.ndarray | None  # (..., k, c): exp(-lc_j), or None beyond FACTOR_RANGE


class Decays:
    """The chunk-local log sums of the gates and the decays from them, for all chunks at once.

    Formed once per call in a few vectorised passes over the n gates (one
    ``cumsum`` and three ``exp``), instead of a handful of small calls per
    group; 4 n numbers, like the normalisers of a normalised form.  Every
    exponent is <= 0 (``lc`` is non-increasing within a chunk, log gates
    being <= 0), so no decay overflows.
    """

    def __init__(self, log_gates: np.ndarray, C: int):
        n = log_gates.shape[-1]
        nfull, rem = divmod(n, C)
        self.C, self.nfull = C, nfull
        self.full = self._forms(log_gates[..., : nfull * C], nfull, C) if nfull else None
        self.rest = self._forms(log_gates[..., nfull * C :], 1, rem) if rem else None

    @staticmethod
    def _forms(log_gates: np.ndarray, k: int, c: int) -> ChunkDecays:
        lc = np.cumsum(log_gates.reshape(log_gates.shape[:-1] + (k, c)), axis=-1)
        last = lc[..., -1:]
        growth = None  # float32 keeps exp of the differences (its model counts 6 u)
        if lc.dtype == np.float64 and lc.size and lc.min() >= -factor_range(lc.dtype):
            growth = np.exp(-lc)
        return ChunkDecays(lc, np.exp(lc), np.exp(last - lc), np.exp(last[..., 0]), growth)

    def chunks(self, r0: int, k: int, c: int) -> ChunkDecays:
        """The decays of the k chunks from token r0 (the shorter last chunk: c < C)."""
        if c < self.C and self.rest is not None:
            return self.rest
        assert self.full is not None
        t0 = r0 // self.C
        lc, start, end, whole, growth = self.full
        rows = (Ellipsis, slice(t0, t0 + k), slice(None))
        grow = None if growth is None else growth[rows]
        return ChunkDecays(lc[rows], start[rows], end[rows], whole[..., t0 : t0 + k], grow)


def factor_range(dtype) -> float:
    """The largest chunk-local log decay ``|lc|`` for which the mask is formed as a product.

    ``exp(lc_i - lc_j) = exp(lc_i) exp(-lc_j)``: both factors are normal
    numbers (so accurate to the 4 ulp of ``exp``) while ``|lc| <= 0.75
    |log tiny|`` (531 in float64, 65 in float32), and the products above the
    diagonal, at most ``exp(|lc|)``, stay finite.
    """
    return -0.75 * math.log(float(np.finfo(dtype).tiny))


def decay_mask(dec: ChunkDecays, out: np.ndarray) -> np.ndarray:
    """``exp(lc_i - lc_j)`` for ``j <= i`` (anything finite above the diagonal), a stack of chunks.

    ``dec.lc`` (shape (..., k, c)) is each chunk's cumulative sum of log
    gates; ``out`` a buffer of shape (..., k, c, c); the caller has zeroed
    the scores above the diagonal.  Within :func:`factor_range` the mask is
    the outer product ``exp(lc_i) exp(-lc_j)`` of the 2c decays formed once
    per call (one pass; the ``exp`` of all c^2 differences was 60% of the
    gated form's extra cost at n = 16384, D = d_v = 64): two ``exp`` of 4 ulp
    and one product, a relative error within the ``10 u`` of the float64
    error model (:func:`~kernelcheck._src.attention.families.gated.bound.gated_error_bound`;
    float32 keeps the differences, within its ``6 u``), entries for
    ``j <= i`` in ``[exp(-range), 1 + 9u]``.  Beyond it (chunks decaying
    by more than ``exp(-531)``, gates below about ``1e-7`` each), the factors
    would underflow and overflow (``0 * inf``): the differences are
    exponentiated instead, with ``-inf`` above the diagonal and clamped to
    at most 0 (``lc`` is non-increasing, log gates being <= 0, so they are
    already), in [0, 1].  tests/attention/common/test_decays.py runs both.
    """
    if dec.growth is not None:
        return np.multiply(dec.from_start[..., :, None], dec.growth[..., None, :], out=out)
    lc = dec.lc
    c = lc.shape[-1]
    np.subtract(lc[..., :, None], lc[..., None, :], out=out)
    np.minimum(out, _upper_minus_inf(c, out.dtype), out=out)
    np.exp(out, out=out)
    return out


def _upper_minus_inf(c: int, dtype) -> np.ndarray:
    """A c x c matrix: 0 on and below the diagonal, ``-inf`` above (cached per size)."""
    key = (c, np.dtype(dtype))
    mask = _MASKS.get(key)
    if mask is None:
        mask = np.where(np.tri(c, dtype=bool), 0.0, -np.inf).astype(dtype)
        _MASKS[key] = mask
    return mask


_MASKS: dict = {}
