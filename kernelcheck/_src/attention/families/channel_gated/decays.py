"""The inputs and the decays of the per-channel gated forms (claim C21).

Gates multiply the state channel by channel: ``a_t`` in [0, 1]^D on the key
channels (rows of ``S``), ``b_t`` in [0, 1]^d_v on the value channels
(columns).  A decay over tokens ``j+1..i`` is ``exp(L_i - L_j)`` of the
cumulative log gates, never a running product (which underflows) and never
``exp(-L_j)`` alone (which overflows).  A gate of exactly 0 resets its
channel: ``log 0 = -inf`` would make ``L_i - L_j`` the NaN ``-inf + inf``,
so the log sums restart after each zero (:func:`local_log_sums`): with
``seg_i`` the position of the last zero at or before ``i``, the decay from
``j`` to ``i`` is ``exp(lc_i - lc_j)`` when ``seg_i <= j`` and exactly 0
otherwise.

:class:`ChannelInputs` holds the validated inputs of one call;
:class:`ChunkDecays` the decays of a block of chunks (from each chunk's start
to a query, from a key to the chunk's end, over the whole chunk).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.decays import factor_range
from kernelcheck._src.attention.common.inputs import features_iv
from kernelcheck._src.core.validate import as_array, as_bool, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "ChannelInputs",
    "ChunkDecays",
    "channel_inputs_iv",
    "gate_values_iv",
    "bonus_values_iv",
    "local_log_sums",
    "shift_one",
    "chunk_decays",
    "fast_ranges",
]


def gate_values_iv(values: Any, shape: tuple[int, ...], dtype, name: str) -> np.ndarray:
    """Gates in [0, 1] broadcast to ``shape`` in ``dtype`` (0 resets a channel, 1 keeps it).

    The last axis is the channels' and must have their number (one gate per
    channel); the leading axes broadcast (one gate vector per head, ...).
    Raises :class:`~kernelcheck.errors.InvalidArgument` naming ``name`` for a
    boolean, a NaN or infinite gate, a gate outside [0, 1] (the first one
    found is shown) or a shape that does not broadcast to ``shape``.
    """
    if isinstance(values, (bool, np.bool_)) or np.asarray(values).dtype.kind == "b":
        raise InvalidArgument(f"`{name}` must be numbers in [0, 1], got booleans {values!r}")
    arr = as_array(values, name, allow_empty=True)
    if shape == () == arr.shape:  # one number checked alone: a gate for every channel
        pass
    elif arr.ndim == 0 or arr.shape[-1] != shape[-1]:
        raise InvalidArgument(
            f"`{name}` must have a last axis of {shape[-1]} (one gate per channel; shape "
            f"{shape}), got {describe(arr)}"
        )
    try:
        out = np.broadcast_to(arr, shape, subok=True)
    except ValueError:
        raise InvalidArgument(
            f"`{name}` must broadcast to {shape} (batch + (n, width): one gate per token and "
            f"channel), got {describe(arr)}"
        ) from None
    bad = ~((arr >= 0) & (arr <= 1))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgument(
            f"`{name}` must lie in [0, 1], but {int(bad.sum())} do not "
            f"(first at index {first}: {float(arr[first])!r})"
        )
    return out.astype(dtype, copy=False)


def bonus_values_iv(values: Any, shape: tuple[int, ...], dtype, name: str = "bonus") -> np.ndarray:
    """RWKV-6's bonus ``u``: finite real numbers broadcast to ``batch + (D,)`` (one per head)."""
    if isinstance(values, (bool, np.bool_)) or np.asarray(values).dtype.kind == "b":
        raise InvalidArgument(f"`{name}` must be real numbers, got booleans {values!r}")
    arr = as_array(values, name, allow_empty=True)
    if shape == () == arr.shape:  # one number checked alone: a gate for every channel
        pass
    elif arr.ndim == 0 or arr.shape[-1] != shape[-1]:
        raise InvalidArgument(
            f"`{name}` must broadcast to {shape} (batch + (D,): one vector per head, not per "
            f"token), got {describe(arr)}"
        )
    try:
        return np.broadcast_to(arr, shape, subok=True).astype(dtype, copy=False)
    except ValueError:
        raise InvalidArgument(
            f"`{name}` must broadcast to {shape} (batch + (D,): one vector per head, not per "
            f"token), got {describe(arr)}"
        ) from None


class ChannelInputs(NamedTuple):
    """Validated inputs of a per-channel gated form (arrays never written to).

    ``a``, ``b``: the key and value gates (None: no gates on that side);
    ``la``, ``lb`` their logarithms (``-inf`` for a gate of 0); ``u`` the
    bonus (None: the output reads ``S_t``; given: ``S_(t-1)`` plus the bonus);
    ``zeros_a``, ``zeros_b``: whether a gate of that side is exactly 0.
    """

    q: np.ndarray
    k: np.ndarray
    V: np.ndarray
    a: np.ndarray | None
    b: np.ndarray | None
    u: np.ndarray | None
    la: np.ndarray | None
    lb: np.ndarray | None
    zeros_a: bool = False
    zeros_b: bool = False

    @property
    def bonus(self) -> bool:
        return self.u is not None


def channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, normalize) -> ChannelInputs:
    """Validate the arguments of a per-channel gated form, before any work.

    NaN or Inf anywhere is an error naming the argument; ``normalize=True`` is
    refused (the family is unnormalised, as GLA, HGRN-2 and RWKV-6 are).
    """
    phi_q, phi_k, V, _, _ = features_iv(phi_q, phi_k, V, True, "raise")
    if as_bool(normalize, "normalize"):
        raise InvalidArgument(
            "`normalize=True` is not offered by the per-channel gated forms: GLA, HGRN-2 and "
            "RWKV-6 are unnormalised (y_t = S_t^T phi(q_t)); divide by a running sum yourself "
            "or use the gated family (C20) for a normalised decay"
        )
    dt = V.dtype
    lead, n = phi_q.shape[:-2], phi_q.shape[-2]
    D, dv = phi_q.shape[-1], V.shape[-1]
    a = b = u = la = lb = None
    with np.errstate(divide="ignore"):
        if key_gates is not None:
            a = gate_values_iv(key_gates, lead + (n, D), dt, "key_gates")
            la = np.log(a)
        if value_gates is not None:
            b = gate_values_iv(value_gates, lead + (n, dv), dt, "value_gates")
            lb = np.log(b)
    if bonus is not None:
        u = bonus_values_iv(bonus, lead + (D,), dt, "bonus")
    zeros_a = a is not None and bool((a == 0).any())
    zeros_b = b is not None and bool((b == 0).any())
    return ChannelInputs(phi_q, phi_k, V, a, b, u, la, lb, zeros_a, zeros_b)


def running_sum(x: np.ndarray) -> np.ndarray:
    """``cumsum`` along axis -2 (the tokens), in the same order of additions.

    A loop of row additions for short axes: NumPy's ``cumsum`` along a
    non-last axis took three times as long for chunks of 32 tokens.
    """
    c = x.shape[-2]
    if c > 256:
        return np.cumsum(x, axis=-2)
    out = x.copy()
    for i in range(1, c):
        out[..., i, :] += out[..., i - 1, :]
    return out


def local_log_sums(lg: np.ndarray, zeros: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Cumulative log gates along axis -2, restarted after each zero gate; and the resets.

    ``lg`` holds ``log g`` (``-inf`` for a gate of 0), tokens on axis -2.
    Returns ``lc`` (finite: ``lc_i`` is the sum of ``log g_l`` over
    ``seg_i < l <= i``) and ``seg`` (the position of the last zero at or
    before each token, -1 for none), or None for ``seg`` when no gate is 0.
    With resets ``lc_i = r_i - r_(seg_i)`` for the plain running sums ``r``
    of the finite logs: one more rounding, its size within ``u |r_i|``.
    ``zeros=False`` says no gate is 0 (no search for one).
    """
    zero = np.isneginf(lg) if zeros else None
    if zero is None or not zero.any():
        return running_sum(lg), None
    raw = running_sum(np.where(zero, 0.0, lg))
    c = lg.shape[-2]
    pos = np.arange(c).reshape(c, 1)
    seg = np.maximum.accumulate(np.where(zero, pos, -1), axis=-2)
    base = np.take_along_axis(raw, np.maximum(seg, 0), axis=-2)
    return np.where(seg >= 0, raw - base, raw), seg


def shift_one(lc: np.ndarray, seg: np.ndarray | None):
    """The sums and resets of the token before: ``lc_(i-1)`` (0 first), ``seg_(i-1)`` (-1 first)."""
    lq = np.empty_like(lc)
    lq[..., :1, :] = 0.0
    lq[..., 1:, :] = lc[..., :-1, :]
    if seg is None:
        return lq, None
    sq = np.empty_like(seg)
    sq[..., :1, :] = -1
    sq[..., 1:, :] = seg[..., :-1, :]
    return lq, sq


class ChunkDecays(NamedTuple):
    """The decays of one gate side (key or value) over a block of chunks, shapes (..., k, c, w).

    ``lq``/``sq``: the query side's log sums and resets (inclusive, or of the
    token before with a bonus); ``lc``/``seg``: the keys'; ``start``: the
    decay from the chunk's start to each query; ``end``: from each key to the
    chunk's end; ``whole``: over the whole chunk, (..., k, w); ``growth``:
    ``exp(-lc)`` where the chunk takes the scaled products (None elsewhere).
    """

    lq: np.ndarray
    sq: np.ndarray | None
    lc: np.ndarray
    seg: np.ndarray | None
    start: np.ndarray
    end: np.ndarray
    whole: np.ndarray
    growth: np.ndarray | None


def chunk_decays(logs: np.ndarray, bonus: bool, reach: float, zeros: bool) -> ChunkDecays:
    """Decays of a block of chunks from its log gates (..., k, c, w).

    Every exponent is <= 0 (log sums are non-increasing within a segment),
    so no decay overflows.  Without a gate of 0 and with every ``|lc|``
    within ``reach`` (see :func:`fast_ranges`), ``exp(-lc)`` is formed for
    the scaled products and the decay to the chunk's end is the product
    ``exp(lc_last) exp(-lc_j)`` (two ``exp`` and a rounding); else it is
    ``exp(lc_last - lc_j)``, 0 across a reset.
    """
    lc, seg = local_log_sums(logs, zeros)
    lq, sq = shift_one(lc, seg) if bonus else (lc, seg)
    last = lc[..., -1:, :]
    start = np.exp(lq)
    whole = np.exp(last[..., 0, :])
    growth = None
    if seg is None and -float(last.min(initial=0.0)) <= reach:
        growth = np.exp(-lc)
        end = growth * whole[..., None, :]
    else:
        end = np.exp(last - lc)
    if seg is not None:
        c = lc.shape[-2]
        pos = np.arange(c).reshape(c, 1)
        assert sq is not None
        start = np.where(sq < 0, start, 0.0)
        end = np.where(seg[..., -1:, :] <= pos, end, 0.0)
        whole = np.where(seg[..., -1, :] < 0, whole, 0.0)
    return ChunkDecays(lq, sq, lc, seg, start, end, whole, growth)


def fast_ranges(q: np.ndarray, k: np.ndarray, V: np.ndarray, C: int) -> tuple[float, float]:
    """How far a chunk's log decays may reach for the scaled products (key side, value side).

    Within a chunk the decays ``exp(lq_i - lc_j)`` of a side are formed as
    ``exp(lq_i) exp(-lc_j)`` from rows scaled once (two ``exp`` of 4 ulp and
    one product) when every ``|lc|`` of the chunk is at most the side's
    range: :func:`~kernelcheck._src.attention.common.decays.factor_range`
    (the factors normal numbers), and, from the inputs' magnitudes, scaled
    queries ``q e^(lq)`` that stay normal, scaled keys ``k e^(-lc)`` and the
    sums ``A (V e^(-mc))`` of a chunk that stay finite.  Beyond, or with a
    gate of exactly 0, the chunk's decays are exponentiated differences.
    """
    info = np.finfo(V.dtype)
    tiny, big = float(info.tiny), float(info.max)
    R = factor_range(V.dtype)
    aq = np.abs(q)
    qmax, qmin = float(aq.max(initial=0.0)), float(aq.min(initial=np.inf))
    kmax = max(float(k.max(initial=0.0)), -float(k.min(initial=0.0)))
    vmax = max(float(V.max(initial=0.0)), -float(V.min(initial=0.0)))
    if qmin == 0.0:  # an exact 0 stays 0 when scaled: the smallest other entry counts
        nz = aq[aq > 0]
        qmin = float(nz.min()) if nz.size else 1.0
    D = q.shape[-1]
    top, lk = math.log(big), math.log(kmax + tiny)
    key = min(R, math.log(qmin) - math.log(tiny), top - math.log(4.0 * D) - lk)
    rest = math.log(4.0 * C * D) + math.log(qmax + tiny) + lk + math.log(vmax + tiny)
    return key, min(R, top - rest)
