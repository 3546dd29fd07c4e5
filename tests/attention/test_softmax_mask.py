"""Causal softmax masks only the diagonal part of each query block (claims C1, C2).

A causal query block of rows ``i0 .. i0 + r`` forms logits against keys
``0 .. i0 + r``; the future (``j > i``) lies in the block's diagonal square
only.  :func:`~kernelcheck._src.attention.families.softmax.forms.mask_future` masks it by
slices (the keys after a band of rows) and one small triangular mask per
band, never a boolean mask over the block.  These tests pin both halves of
that shortcut: that no future key is seen (bit for bit: the rows before a cut
do not change when every key and value after it does, for block and band
sizes with remainders), and that no block-sized mask is allocated (a
deterministic ``tracemalloc`` bound, not a time).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking
from kernelcheck._src.attention.families.softmax.forms import FUTURE_BAND, mask_future


def _direct_causal(Q, K, V):
    """Row by row on the prefix ``j <= i``: no mask at all."""
    out = np.empty((Q.shape[0], V.shape[1]))
    for i in range(Q.shape[0]):
        s = K[: i + 1] @ Q[i] / np.sqrt(Q.shape[1])
        w = np.exp(s - s.max())
        out[i] = (w @ V[: i + 1]) / w.sum()
    return out


@pytest.mark.parametrize("rows", [70, 97, 200])  # blocks of 70 or 97 rows, or one block
def test_causal_softmax_sees_no_future_key(rows, monkeypatch):
    n = 200
    monkeypatch.setattr(blocking, "BLOCK_ELEMENTS", rows * n)
    monkeypatch.setattr(blocking, "CAUSAL_BLOCKS", 1)
    assert blocking.query_block_rows(n, blocking.BLOCK_ELEMENTS // n, True) == rows
    assert rows % FUTURE_BAND and rows > 2 * FUTURE_BAND  # bands with a remainder
    rng = np.random.default_rng(41)
    Q, K, V = rng.standard_normal((3, n, 5))
    out = att.softmax(Q, K, V, causal=True)
    bound = att.softmax_error_bound(Q, K, V, causal=True)
    assert (np.abs(out - _direct_causal(Q, K, V)) <= 2 * bound).all()
    # every cut: inside a band, at a band's edge, at a block's edge, in the last block
    for cut in (1, FUTURE_BAND - 1, FUTURE_BAND, FUTURE_BAND + 1, rows - 1, rows, rows + 5, n - 1):
        K2, V2 = K.copy(), V.copy()
        K2[cut:] = 50 * rng.standard_normal(K2[cut:].shape)  # would dominate every logit
        V2[cut:] = 1e6
        again = att.softmax(Q, K2, V2, causal=True)
        assert np.array_equal(again[:cut], out[:cut]), cut


def test_mask_future_masks_exactly_the_strict_upper_triangle_of_the_square():
    for r, i0 in ((1, 0), (31, 3), (32, 64), (33, 10), (100, 7)):
        s = np.zeros((2, r, i0 + r))  # with a batch dimension
        mask_future(s, i0)
        queries = i0 + np.arange(r)[:, None]
        future = np.arange(i0 + r)[None, :] > queries
        assert np.array_equal(np.isneginf(s[0]), future) and np.array_equal(s[0], s[1])
        assert (s[0][~future] == 0).all()


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_causal_softmax_allocates_no_block_sized_mask():
    """Beyond the logits buffer (rows x n), the scaled queries and the output,
    causal softmax allocates only per-row vectors, the band's triangle and
    NumPy's ufunc buffers (``np.getbufsize()`` elements per operand, which the
    broadcast subtraction of the row maxima uses): a boolean mask over a block
    (rows x n bytes, 1/8 of the logits) or a fresh logits array per block
    would exceed the allowance below."""
    n, d = 4096, 4
    rows = blocking.query_block_rows(n, blocking.BLOCK_ELEMENTS // n, True)
    rng = np.random.default_rng(3)
    Q, K, V = rng.standard_normal((3, n, d))
    att.softmax(Q, K, V, causal=True)  # warm: import-time and first-call allocations
    logits = rows * n * 8
    arrays = 2 * n * d * 8  # Qs and the output
    # max and row sums (rows floats each), small objects, two ufunc buffers
    allowance = 64 * rows + 4096 + 2 * 8 * np.getbufsize()
    assert rows * n > allowance  # a block-sized boolean mask (one byte a logit) would not fit
    peak = _peak(lambda: att.softmax(Q, K, V, causal=True))
    assert peak <= logits + arrays + allowance, (peak, logits + arrays)
