"""What the backward passes share (``attention/common/vjp.py``): the blocked mask, the blocks."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.attention.common import vjp as common_vjp


@pytest.mark.parametrize(
    "shape",
    [(1, 1), (3, 7), (7, 3), (256, 256), (257, 300), (600, 513), (2, 300, 300)],
)
def test_the_blocked_future_mask_is_the_strict_upper_triangle(shape):
    S = np.random.default_rng(0).standard_normal(shape)
    got = S.copy()
    common_vjp.mask_future_entries(got, -np.inf)
    keep = np.tril(np.ones(shape[-2:], dtype=bool))
    np.testing.assert_array_equal(got, np.where(keep, S, -np.inf))


def test_a_block_has_2_18_entries_over_the_batch_and_at_least_64_rows():
    rows = common_vjp.vjp_block_rows
    assert rows((), 2048, 2048, 6, "softmax") == 128
    assert rows((), 8192, 8192, 6, "softmax") == 64
    assert rows((32,), 512, 512, 6, "softmax") == 64  # not 16: BLAS speed
    assert rows((2, 3), 40, 50, 3, "linear") == 40  # n itself when smaller
