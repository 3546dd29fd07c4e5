"""Reliability of the Hypothesis strategies (kernelcheck.strategies).

The contract of docs/reliability.md: a strategy builder either builds or
raises ``InvalidArgument`` naming the argument (checked when built, not when
drawn), and what it draws respects its bounds.  ``strategies.feature_maps``
has its rows in ``tests/api/test_reliability_api.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import strategies as kst
from kernelcheck.errors import InvalidArgument

# Bad-input table: (id, call, error, message regex from the start)
BAD_CALLS = [
    # strategies
    (
        "points-bounds",
        lambda: kst.point_sets(min_points=3, max_points=2),
        InvalidArgument,
        r"^min_points=3 is larger than max_points=2",
    ),
    (
        "points-dim-bounds",
        lambda: kst.point_sets(min_dim=4, max_dim=1),
        InvalidArgument,
        r"^min_dim=4 is larger than max_dim=1",
    ),
    (
        "points-min",
        lambda: kst.point_sets(min_points=0),
        InvalidArgument,
        r"^`min_points` must be >= 1, got 0",
    ),
    (
        "points-dim",
        lambda: kst.point_sets(dim=0),
        InvalidArgument,
        r"^`dim` must be >= 1, got 0",
    ),
    (
        "points-norm",
        lambda: kst.point_sets(max_norm=-1),
        InvalidArgument,
        r"^`max_norm` must be > 0, got -1\.0",
    ),
    (
        "points-norm-nan",
        lambda: kst.point_sets(max_norm=float("nan")),
        InvalidArgument,
        r"^`max_norm` must be finite, got nan",
    ),
    (
        "points-dtype",
        lambda: kst.point_sets(dtype=np.float16),
        InvalidArgument,
        r"^`dtype` must be float32 or float64, got float16",
    ),
    (
        "points-dtype-junk",
        lambda: kst.point_sets(dtype="junk"),
        InvalidArgument,
        r"^`dtype` must be float32 or float64, got 'junk'",
    ),
    (
        "pairs-bounds",
        lambda: kst.point_set_pairs(min_points=5, max_points=1),
        InvalidArgument,
        r"^min_points=5 is larger than max_points=1",
    ),
    (
        "pairs-dim",
        lambda: kst.point_set_pairs(max_dim=0),
        InvalidArgument,
        r"^`max_dim` must be >= 1, got 0",
    ),
    (
        "kernels-depth",
        lambda: kst.kernels(max_depth=0),
        InvalidArgument,
        r"^`max_depth` must be >= 1, got 0",
    ),
    (
        "kernels-depth-big",
        lambda: kst.kernels(max_depth=9),
        InvalidArgument,
        r"^`max_depth` must be <= 8, got 9",
    ),
    (
        "kernels-features",
        lambda: kst.kernels(max_features=0),
        InvalidArgument,
        r"^`max_features` must be >= 1, got 0",
    ),
    (
        "kernels-dim-at",
        lambda: kst.kernels(feature_dim_at=0.5),
        InvalidArgument,
        r"^`feature_dim_at` must be an integer",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


@settings(max_examples=20, deadline=None)
@given(
    st.integers(-2, 10),
    st.integers(-2, 10),
    st.integers(-2, 8),
    st.integers(-2, 8),
    st.floats(-1, 5, allow_nan=False),
    st.data(),
)
def test_strategy_builders_validate_or_build(n_lo, n_hi, d_lo, d_hi, norm, data):
    try:
        strategy = kst.point_sets(
            min_points=n_lo, max_points=n_hi, min_dim=d_lo, max_dim=d_hi, max_norm=norm
        )
    except InvalidArgument:
        assert n_lo < 1 or n_hi < n_lo or d_lo < 1 or d_hi < d_lo or norm <= 0
        return
    sample = data.draw(strategy)
    assert n_lo <= sample.shape[0] <= n_hi and d_lo <= sample.shape[1] <= d_hi
    assert np.all(np.linalg.norm(sample, axis=1) <= norm)
