"""Random feature maps at the ends of the float range: a correct answer or a clean error (C13-C18).

Large norms work in log space (``scaled_features``, ``log_features``) or fail
with a ``NumericalFailure`` naming the remedy; tiny norms, n = 1, d = 1 and
integer, bool, float16 and float32 input give the float64 answer; the optimal
positive parameter stays finite for any squared norm.  One Hypothesis test per
public function checks that contract on drawn inputs, subnormal ones included.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck.errors import NumericalFailure
from kernelcheck.features import (
    OptimalPositiveRandomFeatures,
    draw_projection,
    optimal_positive_parameter,
)

X = np.random.default_rng(0).normal(size=(3, 2)) * 0.3
X.setflags(write=False)

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
