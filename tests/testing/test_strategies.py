"""The Hypothesis strategies of kernelcheck.strategies: validated when built, and what they draw."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from kernelcheck.errors import InvalidArgument
from kernelcheck.strategies import feature_maps, kernels, point_set_pairs, point_sets
from kernelcheck.testing import assert_feature_map

BAD_STRATEGIES = [
    (lambda: point_sets(min_points=3, max_points=2), "min_points=3 is larger than max_points=2"),
    (lambda: point_sets(min_dim=0), "`min_dim` must be >= 1"),
    (lambda: point_sets(max_norm=0.0), "`max_norm` must be > 0"),
    (lambda: point_sets(dtype=np.int64), "`dtype` must be float32 or float64"),
    (lambda: kernels(max_depth=0), "`max_depth` must be >= 1"),
    (lambda: point_set_pairs(min_dim=4, max_dim=2), "min_dim=4 is larger than max_dim=2"),
]


@pytest.mark.parametrize("call, message", BAD_STRATEGIES, ids=[m for _, m in BAD_STRATEGIES])
def test_strategy_arguments_are_validated_when_built(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


@settings(max_examples=30)
@given(point_sets(max_norm=0.75, dim=3))
def test_point_sets_respect_norm_bound(P):
    assert P.shape[1] == 3
    assert np.all(np.linalg.norm(P, axis=1) <= 0.75)


@settings(max_examples=30)
@given(feature_maps(max_depth=3), point_sets(dim=2, max_points=4))
def test_feature_map_strategy_yields_exact_maps(phi, P):
    assert phi.exact
    assert_feature_map(phi, P)


@settings(max_examples=30)
@given(kernels(max_depth=3, finite=False), point_sets(dim=2, max_points=5, max_norm=1.0))
def test_infinite_trees_evaluate_and_are_symmetric(k, P):
    G = k(P)
    assert np.all(np.abs(G - G.T) <= 2 * k.error_bound(P))
