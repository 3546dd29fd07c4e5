"""Reliability tables for the random feature maps, draw_projection and optimal_positive_parameter.

Every public random-feature function of ``kernelcheck.features`` gets: bad
input (wrong types, ranks, shapes, empty, NaN/Inf, complex/object dtypes, huge
sizes refused up front with the size they would need) -> ``InvalidArgument``
naming the argument; extreme values (large and tiny norms, n = 1, d = 1,
float16 / int / non-contiguous input) -> a correct answer or a clean
``NumericalFailure``; read-only input is never written.  One Hypothesis test
per public function checks that contract on drawn inputs.  The same for the
Monte Carlo engine is in ``tests/mc/test_reliability.py``, for
``verify.unbiased`` in ``tests/verify/test_reliability.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck._src.features.base import ORTHOGONAL_WORKING_COPIES
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.features import (
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    RandomFeatureSampler,
    draw_projection,
    optimal_positive_parameter,
)

CLEAN = (InvalidArgument, NumericalFailure)


def _readonly(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


X = _readonly(np.random.default_rng(0).normal(size=(3, 2)) * 0.3)


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
# Extreme values
# ---------------------------------------------------------------------------


def test_large_norms_work_in_log_space_or_fail_cleanly(random_feature_map):
    cls = random_feature_map
    phi = cls(2, 8, seed=0)
    big = X * 1e3
    with pytest.raises(NumericalFailure, match="log space"):
        phi(big)
    F, ls = phi.scaled_features(big)  # never overflows for finite input
    assert np.isfinite(F).all() and not np.isnan(ls).any()
    try:
        est = phi.estimate(big)
    except NumericalFailure as exc:
        assert "overflows float64" in str(exc)
    else:
        assert np.isfinite(est).all()
    t = phi.theory(big)
    assert not np.isnan(t["mean"]).any()


def test_tiny_norms_d1_n1_and_other_dtypes(random_feature_map):
    cls = random_feature_map
    phi = cls(1, 4, seed=3)
    x = np.array([[1e-300]])
    # at |x| ~ 0 every estimate is phi(0).phi(0), which is 1 for unbiased maps up to noise;
    # exactly the same as at x = 0
    assert np.array_equal(phi.estimate(x), phi.estimate(np.zeros((1, 1))))
    for arr in (
        np.array([[1]], dtype=np.int64),
        np.array([[0.5]], dtype=np.float16),
        np.array([[True]]),
    ):
        ref = phi(np.asarray(arr, dtype=np.float64))
        assert np.array_equal(phi(arr), ref) and phi(arr).dtype == np.float64
    f32 = phi(np.array([[0.5]], dtype=np.float32))
    assert f32.shape == (1, phi.output_dim(1))
    wide = np.asfortranarray(np.random.default_rng(1).normal(size=(4, 6)) * 0.2)
    phi6 = cls(3, 4, seed=0)
    assert np.array_equal(phi6(wide[:, ::2]), phi6(np.ascontiguousarray(wide[:, ::2])))


def test_optimal_parameter_for_huge_sq_norm_is_finite_and_features_fail_cleanly():
    a = optimal_positive_parameter(1e308, 1)
    assert math.isfinite(a) and a < 0
    # A* ~ -phi/4 for large phi = sq_norm / d (leading term of the closed form)
    assert a == pytest.approx(-0.25e308, rel=1e-6)
    phi = OptimalPositiveRandomFeatures(2, 4, seed=0, A=-1e308)
    for f in (phi.scaled_features, phi.log_features, phi, phi.estimate):
        with pytest.raises(NumericalFailure, match="A"):
            f(X)


# ---------------------------------------------------------------------------
# Inputs are never written
# ---------------------------------------------------------------------------


def test_read_only_inputs_everywhere(random_feature_map):
    cls = random_feature_map
    Xr = _readonly(X)
    Yr = _readonly(X[:2] * 0.5)
    phi = cls(2, 4, seed=0)
    phi(Xr), phi.scaled_features(Xr), phi.estimate(Xr, Yr), phi.theory(Xr, Yr)
    phi.theoretical_mse(Xr)
    if hasattr(phi, "log_features"):
        phi.log_features(Xr)
    cls.sampler(2, 4).batch_estimates(0, 3, Xr, Yr)
    OptimalPositiveRandomFeatures.fit(Xr, Yr, 4, seed=0)
    assert np.array_equal(Xr, X)


# ---------------------------------------------------------------------------
# One Hypothesis test per public function: a correct answer or a clean error
# ---------------------------------------------------------------------------


points = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 3), st.just(2)),
    elements=st.one_of(
        st.floats(-1e3, 1e3, allow_subnormal=True),
        st.sampled_from([0.0, 1e-300, -1e-300, 5e-324]),
    ),
)


@settings(max_examples=25, deadline=None)
@given(X=points, orth=st.booleans())
def test_feature_maps_answer_or_fail_cleanly(random_feature_map, X, orth):
    cls = random_feature_map
    phi = cls(2, 3, seed=0, orthogonal=orth)
    for f in (phi, phi.estimate, phi.scaled_features, phi.theoretical_mse):
        try:
            out = f(X)
        except NumericalFailure:
            continue
        arrs = out if isinstance(out, tuple) else (out,)
        assert all(not np.isnan(a).any() for a in arrs)


@settings(max_examples=20, deadline=None)
@given(
    d=st.integers(1, 6),
    m=st.integers(1, 9),
    orth=st.booleans(),
    batch=st.none() | st.integers(1, 3),
)
def test_draw_projection_shapes(d, m, orth, batch):
    W = draw_projection(5, d, m, orthogonal=orth, batch=batch)
    assert W.shape == ((m, d) if batch is None else (batch, m, d)) and np.isfinite(W).all()


@settings(max_examples=25, deadline=None)
@given(s=st.floats(0, 1e308), d=st.integers(1, 100))
def test_optimal_positive_parameter_total(s, d):
    a = optimal_positive_parameter(s, d)
    assert math.isfinite(a) and a <= 0.0
