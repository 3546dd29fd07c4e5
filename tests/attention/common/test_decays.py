"""The decays of the gated chunked form (``attention/common/decays.py``, claim C20).

A chunk's decay mask is a product of per-group scales where that stays within
the float range, and ``exp`` of differences of cumulative log gates where it
does not; the group-scaled way falls back to the chunk-local way where a
scaled query underflows or the scaled state overflows.  Every way stays
within the error bound of the recurrence, on the calling thread and on worker
threads, and the scales are each group's own cumulative log gates.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking as _att
from kernelcheck._src.attention.common import decays as _dec


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# The gated chunked form's decay mask: a product of decays, or exp of differences
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gate", [0.5, 4.5e-5, 1e-30])
def test_gated_chunked_mask_both_ways_within_the_bound(gate, monkeypatch):
    """Groups decaying by e^-50 (gates 0.5) are scaled once per group; chunks decaying by
    e^-330 in groups of e^-700 (gates 4.5e-5) form the mask as exp(lc_i) exp(-lc_j);
    chunks decaying by e^-2200 (gates 1e-30: the factors would underflow and overflow,
    0 * inf) exponentiate the differences.  All stay within the bound of the recurrence,
    and forcing the differences everywhere changes the result only within it."""
    from kernelcheck._src.attention.common.decays import Decays, GroupScales, factor_range

    rng = _rng(41)
    n = 70
    pq, pk = rng.random((2, n, 4)) + 0.05
    V = rng.normal(size=(n, 3))
    g = np.full(n, gate) * rng.uniform(0.9, 1.0, n)
    plan = [(0, 2, 32), (64, 1, 6)]  # the plan of n = 70 in chunks of 32 (one group here)
    assert _att.group_chunks(1, 32, 4, 4, True, 2) >= 2
    scaled = GroupScales.of(np.log(g), plan, np.dtype(np.float64)) is not None
    assert scaled == (gate == 0.5)
    dec = Decays(np.log(g), 32)
    assert (dec.full.growth is None) == (32 * -np.log(gate) > factor_range(np.float64))
    out = att.gated_chunked(pq, pk, V, g, chunk_size=32)
    ref = att.gated_recurrent(pq, pk, V, g)
    bound = 2 * att.gated_error_bound(pq, pk, V, g)
    assert np.all(np.abs(out - ref) <= bound)
    monkeypatch.setattr(_dec, "factor_range", lambda dtype: -1.0)  # never the product
    assert np.all(np.abs(att.gated_chunked(pq, pk, V, g, chunk_size=32) - ref) <= bound)


def _scaled_results(monkeypatch) -> list:
    """Record what each group's group-scaled way returned (False: computed again)."""
    seen: list = []
    real = _att._GroupJob.scaled

    def spy(self, *args):
        ok = real(self, *args)
        seen.append(ok)
        return ok

    monkeypatch.setattr(_att._GroupJob, "scaled", spy)
    return seen


def _gated_case(seed: int, qscale: float, kscale: float, n: int = 200):
    rng = _rng(seed)
    pq = qscale * (rng.random((n, 4)) + 0.5)
    pk = kscale * (rng.random((n, 4)) + 0.5)
    V = rng.normal(size=(n, 3))
    g = rng.uniform(0.5, 0.6, n)  # groups decaying by e^-40 and more: growth up to e^40
    return pq, pk, V, g


@pytest.mark.parametrize(
    "qscale, kscale, falls_back",
    [
        (1.0, 1.0, False),  # the usual case: every group scaled
        (1e-300, 1e250, True),  # a_i exp(LC_i) underflows: its error would grow by e^40
        (1e-10, 1e300, True),  # b_j exp(-LC_j) overflows: the scaled state is not finite
    ],
)
@pytest.mark.parametrize("threads", [False, True])
def test_gated_chunked_scaled_groups_and_their_fallback_within_the_bound(
    qscale, kscale, falls_back, threads, monkeypatch
):
    """Every group is scaled unless a scaled query underflows or the scaled state
    overflows; those groups are computed again the chunk-local way.  Either way the
    result is within the error bound of the recurrence, normalised or not (the rows
    are about 1e-50 and 1e292 in the two extreme cases: each is a valid input), and
    on worker threads (many small groups) it is the inline result bit for bit."""
    pq, pk, V, g = _gated_case(77, qscale, kscale, n=192)
    if threads:  # groups of 6 chunks of 8 tokens (1760 or 1920 bytes a chunk), 4 groups:
        # each still decays by about e^-27, enough for the extreme cases to fall back
        monkeypatch.setattr(_att, "CACHE_BYTES", 11520)
        inline = {nz: att.gated_chunked(pq, pk, V, g, chunk_size=8, normalize=nz)
                  for nz in (False, True)}  # fmt: skip
        monkeypatch.setattr(_att, "_PARALLEL_WORK", 1)
    seen = _scaled_results(monkeypatch)
    for normalize in (False, True):
        seen.clear()
        out = att.gated_chunked(pq, pk, V, g, chunk_size=8, normalize=normalize)
        ways = list(seen)  # the bound below runs the products too
        ref = att.gated_recurrent(pq, pk, V, g, normalize=normalize)
        bound = 2 * att.gated_error_bound(pq, pk, V, g, normalize=normalize)
        # scaled despite the underflow, the rows were 1e20 bounds off (normalisers 0)
        assert np.all(np.isfinite(out)) and np.all(np.abs(out - ref) <= bound)
        assert ways and (False in ways) == falls_back and (True in ways) != falls_back
        if threads:
            assert len(ways) > 2 and np.array_equal(out, inline[normalize])


def test_group_scales_are_each_groups_own_cumulative_log_gates():
    """The factors restart at every group of the plan (equal groups first, then a
    shorter one and the last partial chunk), batched; None in float32 and beyond the
    range, where the chunk-local way is used."""
    from kernelcheck._src.attention.common.decays import GroupScales, factor_range

    plan = [(0, 3, 4), (12, 3, 4), (24, 2, 4), (32, 1, 3)]  # n = 35 in chunks of 4
    lg = -_rng(5).uniform(0.0, 1.0, (2, 35))
    sc = GroupScales.of(lg, plan, np.dtype(np.float64))
    for r0, k, c in plan:
        lc = np.cumsum(lg[..., r0 : r0 + k * c], axis=-1)
        up, down, last = sc.group(r0, r0 + k * c, k, c)
        assert np.array_equal(up, np.exp(lc).reshape(2, k, c))
        assert np.array_equal(down, np.exp(-lc).reshape(2, k, c))
        assert np.array_equal(last, np.exp(lc[..., -1]))
    assert GroupScales.of(lg, plan, np.dtype(np.float32)) is None
    deep = lg * (factor_range(np.float64) / 5.0)  # a group of 12 tokens beyond the range
    assert GroupScales.of(deep, plan, np.dtype(np.float64)) is None
