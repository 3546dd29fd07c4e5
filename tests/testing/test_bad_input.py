"""Bad input to the Hypothesis strategies and the pytest twins is refused by name, when built.

A strategy builder either builds or raises ``InvalidArgument`` naming the
argument (checked when built, not when drawn), and what it draws respects its
bounds; the ``testing`` twins refuse bad arguments the same way, and report a
layer that raises or returns NaN as an ``AssertionError`` naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import strategies as kst
from kernelcheck import testing as T
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import PositiveRandomFeatures
from kernelcheck.kernels import (
    Exponential,
    Linear,
)
from tests.inputs import assert_refused

IA = InvalidArgument  # the error most rows expect
X = np.random.default_rng(11).normal(size=(3, 2))


def _boom(*args):
    raise ZeroDivisionError("boom")


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
    # attention_inputs: bad bounds refused when built, naming them
    (
        "ai-n-bounds",
        lambda: kst.attention_inputs(min_n=5, max_n=2),
        InvalidArgument,
        r"^min_n=5 is larger than",
    ),
    (
        "ai-min-n",
        lambda: kst.attention_inputs(min_n=0),
        InvalidArgument,
        r"^`min_n` must be >= 1, got 0",
    ),
    ("ai-d", lambda: kst.attention_inputs(d=0), InvalidArgument, r"^`d` must be >= 1, got 0"),
    (
        "ai-max-d",
        lambda: kst.attention_inputs(max_d=1.5),
        InvalidArgument,
        r"^`max_d` must be an integer",
    ),
    (
        "ai-dtype",
        lambda: kst.attention_inputs(dtypes=("float8",)),
        InvalidArgument,
        r"^`dtypes` must be one of",
    ),
    (
        "ai-no-dtype",
        lambda: kst.attention_inputs(dtypes=()),
        InvalidArgument,
        r"^`dtypes` must hold at least one",
    ),
    (
        "ai-batch",
        lambda: kst.attention_inputs(batch_shapes=((0,),)),
        InvalidArgument,
        r"^`batch_shapes` must be >=",
    ),
    (
        "ai-no-batch",
        lambda: kst.attention_inputs(batch_shapes=()),
        InvalidArgument,
        r"^`batch_shapes` must hold",
    ),
    (
        "ai-norm",
        lambda: kst.attention_inputs(max_norm=0),
        InvalidArgument,
        r"^`max_norm` must be > 0, got 0",
    ),
]


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


def _assert_attention(fn=lambda Q, K, V: V, **kw):
    return T.assert_attention_matches(fn, **kw)


STRATEGIES_TESTING_BAD = [
    ("fm-depth", lambda: kst.feature_maps(max_depth=0), IA, r"^`max_depth` must be >="),
    ("fm-depth-big", lambda: kst.feature_maps(max_depth=9), IA, r"^`max_depth` must"),
    ("fm-depth-str", lambda: kst.feature_maps(max_depth="3"), IA, r"^`max_depth` mu"),
    ("fm-features", lambda: kst.feature_maps(max_features=0), IA, r"^`max_features`"),
    ("fm-at", lambda: kst.feature_maps(feature_dim_at=0), IA, r"^`feature_dim_at`"),
    (
        "fm-at-float",
        lambda: kst.feature_maps(feature_dim_at=1.5),
        IA,
        r"^`feature_dim_at` must be an integer",
    ),
    ("aam-fn", lambda: _assert_attention(5), IA, r"^`fn` must be callable, got int 5"),
    ("aam-causal", lambda: _assert_attention(causal="yes"), IA, r"^`causal` must be"),
    ("aam-n", lambda: _assert_attention(n=1), IA, r"^`n` must be >= 2"),
    ("aam-d", lambda: _assert_attention(d=0), IA, r"^`d` must be >= 1, got 0"),
    ("aam-seed", lambda: _assert_attention(seed=None), IA, r"^`seed` must be given"),
    ("aam-kernel", lambda: _assert_attention(kernel="exp"), IA, r"^`kernel` must be"),
    ("ak-kernel", lambda: T.assert_kernel(5, X), IA, r"^`kernel` must be a kernel"),
    (
        "ak-X",
        lambda: T.assert_kernel(Linear(), np.array([[np.nan]])),
        IA,
        r"^`X` must be finite",
    ),
    ("afm-phi", lambda: T.assert_feature_map(5, X), IA, r"^`phi` must be callable"),
    (
        "afm-X",
        lambda: T.assert_feature_map(Linear().features(), np.ones(2)),
        IA,
        r"^`X` must be a 2-d array",
    ),
    (
        "au-trials",
        lambda: T.assert_unbiased(
            PositiveRandomFeatures.sampler(2, 4), Exponential(), X, trials=0, seed=0
        ),
        IA,
        r"^`trials` must be >= ",
    ),
    (
        "au-X",
        lambda: T.assert_unbiased(
            PositiveRandomFeatures.sampler(2, 4), Exponential(), np.ones((2, 3)), trials=10, seed=0
        ),
        IA,
        r"^`X` must have d = 2",
    ),
]


def test_assert_attention_matches_reports_a_failing_layer_as_an_assertion():
    """The pytest twin turns a layer that raises or returns NaN into an AssertionError naming it.

    (verify.attention reports such a layer as a failed case rather than bad input.)
    """
    with pytest.raises(AssertionError, match=r"fn raised ZeroDivisionError: boom"):
        T.assert_attention_matches(_boom, n=4, d=2)
    with pytest.raises(AssertionError, match=r"^refuted: case 'random' .*non-finite"):
        T.assert_attention_matches(lambda Q, K, V: V * np.nan, n=4, d=2)


BAD_CALLS += STRATEGIES_TESTING_BAD


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message read from the start."""
    assert_refused(call, error, message)
