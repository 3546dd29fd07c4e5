"""Bad input to the random feature maps, draw_projection and optimal_positive_parameter (C13-C18).

Wrong types, ranks and shapes, empty, NaN/Inf, complex and object dtypes, and
sizes beyond memory (refused up front with the size they would need) give
``InvalidArgument`` naming the argument; read-only input is never written.
Extreme values are in ``test_extreme_values.py``; the same for the Monte Carlo
engine is in ``tests/mc/test_bad_input.py``, for ``verify.unbiased`` in
``tests/verify/test_unbiased_bad_input.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck._src.features.base import ORTHOGONAL_WORKING_COPIES
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import (
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    RandomFeatureSampler,
    draw_projection,
    optimal_positive_parameter,
)
from tests.inputs import readonly

X = readonly(np.random.default_rng(0).normal(size=(3, 2)) * 0.3)


# ---------------------------------------------------------------------------
# Bad input tables
# ---------------------------------------------------------------------------


FEATURE_BAD = [
    (lambda c: c(2, 4, seed=None), "`seed`"),
    (lambda c: c(2, 4, seed=1.5), "`seed`"),
    (lambda c: c(0, 4, seed=0), "`dim` must be >= 1"),
    (lambda c: c(2, 0, seed=0), "`num_features` must be >= 1"),
    (lambda c: c(2.0, 4, seed=0), "`dim` must be an integer"),
    (
        lambda c: c(2, 4, seed=0, orthogonal="yes"),
        "`orthogonal` must be True or False, got str 'yes'",
    ),
    (lambda c: c(2, 4, seed=0, scale=0.0), "`scale` must be > 0"),
    (lambda c: c(2, 4, seed=0, scale=math.inf), "`scale` must be finite"),
    (lambda c: c(2, 4, seed=0, scale="1"), "`scale` must be a real number"),
    (lambda c: c(100_000, 100_000, seed=0), "the projection would need 10000000000 entries"),
    (lambda c: c(2, 4, seed=0)(np.ones(2)), "`X` must be a 2-d array"),
    (lambda c: c(2, 4, seed=0)(np.ones((2, 3))), "`X` must have d = 2 columns"),
    (lambda c: c(2, 4, seed=0)(np.ones((0, 2))), "`X` must not be empty"),
    (lambda c: c(2, 4, seed=0)(np.ones((2, 2)) + 1j), "`X` must be real"),
    (lambda c: c(2, 4, seed=0)(np.array([[1, None]], dtype=object)), "`X` must be a real numeric"),
    (lambda c: c(2, 4, seed=0)(np.array([[1.0, np.nan]])), "`X` must be finite"),
    (lambda c: c(2, 4, seed=0)(np.array([[1.0, np.inf]])), "`X` must be finite"),
    (lambda c: c(2, 4, seed=0)("ab"), "`X` must be a numeric array"),
    (lambda c: c(2, 4, seed=0).estimate(X, np.ones((1, 3))), "`Y` must have d = 2 columns"),
    (lambda c: c(2, 4, seed=0).scaled_features(np.ones((1, 3))), "`X` must have d = 2"),
    (lambda c: c(2, 4, seed=0).theory(X, order=1), "`order` must be >= 2"),
    (lambda c: c(2, 4, seed=0).theory(X, order=9), "`order` must be <= 8"),
    (lambda c: c(2, 4, seed=0).theoretical_mse(X, np.ones((2, 5))), "`Y` must have d = 2"),
    (lambda c: c(2, 4, seed=0).output_dim(3), "`d` must equal the map's input dimension 2"),
    (lambda c: c(2, 4, seed=0).output_dim(0), "`d` must be >= 1"),
    (lambda c: c.sampler(2, 4).batch_estimates(0, 0, X), "`n` must be >= 1"),
    (lambda c: c.sampler(2, 4).batch_estimates(None, 2, X), "`rng` must be given"),
    (lambda c: c.sampler(2, 4).batch_estimates(0, 2, np.ones((2, 3))), "`X` must have d = 2"),
    (lambda c: c.sampler(2, 4).batch_estimates(0, 2, X, np.ones(2)), "`Y` must be a 2-d"),
    (lambda c: c.sampler(0, 4), "`dim` must be >= 1"),
]


@pytest.mark.parametrize("call, text", FEATURE_BAD)
def test_feature_maps_bad_input(random_feature_map, call, text):
    cls = random_feature_map
    with pytest.raises(InvalidArgument) as info:
        call(cls)
    assert text in str(info.value)


OTHER_BAD = [
    (lambda: draw_projection(0, 0, 3), "`dim` must be >= 1"),
    (lambda: draw_projection(0, 2, 0), "`num_features` must be >= 1"),
    (lambda: draw_projection(0, 2, 3, batch=0), "`batch` must be >= 1"),
    (lambda: draw_projection(None, 2, 3), "`rng` must be given"),
    (lambda: draw_projection(0, 10**6, 10**6), "the projection would need 1000000000000 entries"),
    (lambda: draw_projection(0, 1000, 1000, batch=10**6), "would need 1000000000000 entries"),
    (
        # one 10^5 x 10^5 block and its working copies
        lambda: draw_projection(0, 10**5, 10**5, orthogonal=True),
        f"the projection and its {ORTHOGONAL_WORKING_COPIES - 1} working copies would need "
        f"{ORTHOGONAL_WORKING_COPIES * 10**10} entries",
    ),
    (lambda: optimal_positive_parameter(-1.0, 2), "`sq_norm` must be >= 0"),
    (lambda: optimal_positive_parameter(math.nan, 2), "`sq_norm` must be finite"),
    (lambda: optimal_positive_parameter(1.0, 0), "`dim` must be >= 1"),
    (lambda: OptimalPositiveRandomFeatures(2, 4, seed=0, A=0.25), "`A` must be < 1/4"),
    (lambda: OptimalPositiveRandomFeatures(2, 4, seed=0, A=math.nan), "`A` must be finite"),
    (lambda: OptimalPositiveRandomFeatures(2, 4, seed=0, sq_norm=-1.0), "`sq_norm` must be >= 0"),
    (
        lambda: OptimalPositiveRandomFeatures.fit(X, np.ones((2, 3)), 4, seed=0),
        "`Y` must have d = 2",
    ),
    (lambda: OptimalPositiveRandomFeatures.fit(np.ones(2), X, 4, seed=0), "`X` must be a 2-d"),
    (lambda: OptimalPositiveRandomFeatures.fit(X, X, 4, seed=0, scale=-1.0), "`scale` must be > 0"),
    (lambda: RandomFeatureSampler(int, 2, 4), "`cls` must be a random feature class, got type"),
    (lambda: RandomFeatureSampler(PositiveRandomFeatures, 2, 4, bogus=1), "bogus"),
]


@pytest.mark.parametrize("call, text", OTHER_BAD)
def test_projection_and_parameter_bad_input(call, text):
    with pytest.raises((InvalidArgument, TypeError)) as info:
        call()
    assert text in str(info.value)
    if "bogus" not in text:
        assert isinstance(info.value, InvalidArgument)


# ---------------------------------------------------------------------------
# Inputs are never written
# ---------------------------------------------------------------------------


def test_read_only_inputs_everywhere(random_feature_map):
    cls = random_feature_map
    Xr = readonly(X)
    Yr = readonly(X[:2] * 0.5)
    phi = cls(2, 4, seed=0)
    phi(Xr), phi.scaled_features(Xr), phi.estimate(Xr, Yr), phi.theory(Xr, Yr)
    phi.theoretical_mse(Xr)
    if hasattr(phi, "log_features"):
        phi.log_features(Xr)
    cls.sampler(2, 4).batch_estimates(0, 3, Xr, Yr)
    OptimalPositiveRandomFeatures.fit(Xr, Yr, 4, seed=0)
    assert np.array_equal(Xr, X)
