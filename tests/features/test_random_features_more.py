"""More unit tests of the random feature maps (claims C13, C17, C18), chosen by mutation testing.

Each test relates two computations (a map at scale s and one at scale 1 on
scaled inputs, batched trials and maps drawn one by one, a closed form from
the module docstring and the theory method) or checks a documented contract
(messages, row maxima of the scaled features, parameters carried by samplers).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kernelcheck._src.features.random import (
    ESTIMATORS,
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    RandomFeatureSampler,
    TrigonometricRandomFeatures,
    draw_projection,
)
from kernelcheck.errors import NumericalFailure

CLASSES = list(ESTIMATORS.values())


def _pts(n, d, seed, norm=0.4):
    G = np.random.default_rng(seed).standard_normal((n, d))
    return norm * G / np.linalg.norm(G, axis=1, keepdims=True)


def test_iid_projection_is_the_generators_normal_stream():
    # documented: i.i.d. rows w_i ~ N(0, I_d) drawn from rng (the default is i.i.d.)
    ref = np.random.default_rng(4).standard_normal((5, 3))
    assert np.array_equal(draw_projection(4, 3, 5), ref)
    assert np.array_equal(draw_projection(4, 1, 1), ref.ravel()[:1].reshape(1, 1))
    phi = PositiveRandomFeatures(1, 1, seed=4)  # d = 1 and m = 1 are accepted
    assert phi.projection.shape == (1, 1) and phi.output_dim(1) == 1


def test_orthogonal_rows_have_chi_norms():
    # each row is a uniform direction times an independent chi_d norm: |w|^2 ~ chi^2_d,
    # mean d, variance 2d; with 4000 rows the sample mean lies within 5 standard errors
    d, m = 4, 4000
    W = draw_projection(0, d, m, orthogonal=True)
    sq = (W * W).sum(axis=1)
    assert abs(sq.mean() - d) < 5 * np.sqrt(2 * d / m)
    assert abs(sq.var() - 2 * d) < 5 * np.sqrt(2 * d / m) * 2 * d  # loose: fourth moment
    assert len(set(np.round(sq[:4], 12))) == 4  # norms within a block differ


@pytest.mark.parametrize("cls", CLASSES)
def test_scale_is_a_rescaling_of_the_inputs(cls):
    # exp(s x.y) = exp((sqrt(s) x).(sqrt(s) y)): a map at scale 4 is the map at scale 1 on 2 x
    X = _pts(3, 2, 1)
    a = cls(2, 5, seed=2, scale=4.0)
    b = cls(2, 5, seed=2, scale=1.0)
    assert np.allclose(a(X), b(2.0 * X), rtol=1e-13)
    assert a.kernel.scale == 4.0 if hasattr(a.kernel, "scale") else True
    assert a.scale == 4.0


@pytest.mark.parametrize(
    "cls", [PositiveRandomFeatures, HyperbolicRandomFeatures, OptimalPositiveRandomFeatures]
)
def test_positive_scaled_features_have_row_maximum_one(cls):
    phi = cls(3, 7, seed=0)
    F, ls = phi.scaled_features(_pts(4, 3, 2, norm=2.0))
    assert np.array_equal(F.max(axis=1), np.ones(4))
    assert np.all(F > 0)


@pytest.mark.parametrize(
    "cls", [PositiveRandomFeatures, HyperbolicRandomFeatures, OptimalPositiveRandomFeatures]
)
def test_log_features_are_the_log_of_phi(cls):
    phi = cls(3, 8, seed=2, scale=0.7)
    X = _pts(4, 3, 5, norm=1.5)
    assert np.allclose(np.exp(phi.log_features(X)), phi(X), rtol=1e-13)


LOG_SPACE = "use scaled_features(X), log_features(X) or estimate(X, Y), which work in log space"


@pytest.mark.parametrize("cls", CLASSES)
def test_overflow_and_underflow_are_named(cls):
    phi = cls(2, 4, seed=0)
    big = np.array([[300.0, 0.0]])
    with pytest.raises(NumericalFailure) as info:
        phi(big)
    text = str(info.value)
    assert text.startswith(repr(phi) + ": the features of row 0 ")
    assert text.endswith(LOG_SPACE)
    # the trigonometric map grows like exp(|x|^2/2): overflow; the positive ones
    # decay like exp(w.x - |x|^2/2): underflow
    word = "overflow" if cls is TrigonometricRandomFeatures else "underflow"
    assert f"row 0 {word} float64" in text


def test_trigonometric_estimate_overflow_is_a_clean_error_without_warnings():
    phi = TrigonometricRandomFeatures(2, 4, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NumericalFailure) as info:
            phi.estimate(np.array([[30.0, 0.0]]))
    assert str(info.value) == f"{phi!r}: the kernel estimate itself overflows float64"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert phi.theoretical_mse(np.array([[19.0, 0.0]]))[0, 0] == 0.0  # exact at x = y


def test_optimal_theory_follows_its_closed_form_for_positive_A():
    # module docstring: relative second moment (1-4A)^d (1-8A)^(-d/2) exp(2(1-4A)s^2/(1-8A) - s^2),
    # finite for A < 1/8, infinite from A = 1/8 on
    d, A = 3, 0.05
    phi = OptimalPositiveRandomFeatures(d, 1, seed=0, A=A)
    x = np.array([[0.2, -0.1, 0.3]])
    s2 = float(((2 * x) ** 2).sum())
    ref = (1 - 4 * A) ** d * (1 - 8 * A) ** (-d / 2) * np.exp(
        2 * (1 - 4 * A) * s2 / (1 - 8 * A) - s2
    ) - 1
    assert np.isclose(phi.theory(x, order=2)["central"][2][0, 0], ref, rtol=1e-12)
    at_limit = OptimalPositiveRandomFeatures(d, 1, seed=0, A=0.125)
    assert np.isinf(at_limit.theory(np.zeros((1, d)), order=2)["central"][2][0, 0])
    assert np.isinf(at_limit.theory(x, order=2)["central"][2][0, 0])


def test_repr_lists_the_parameters():
    phi = OptimalPositiveRandomFeatures(2, 4, seed=0, A=-0.1)
    assert repr(phi) == (
        "OptimalPositiveRandomFeatures(2, 4, orthogonal=False, scale=1.0, sq_norm=1.0, A=-0.1)"
    )
    s = OptimalPositiveRandomFeatures.sampler(2, 4, orthogonal=True, scale=2.0, A=-0.1)
    assert repr(s) == (
        "OptimalPositiveRandomFeatures.sampler(2, 4, orthogonal=True, scale=2.0, A=-0.1)"
    )
    assert repr(PositiveRandomFeatures(3, 5, seed=1)) == (
        "PositiveRandomFeatures(3, 5, orthogonal=False, scale=1.0)"
    )


def test_samplers_carry_every_parameter_to_the_maps_they_draw():
    s = OptimalPositiveRandomFeatures.sampler(2, 4, orthogonal=True, scale=2.0, A=-0.1)
    assert (s.dim, s.num_features, s.orthogonal, s.scale) == (2, 4, True, 2.0)
    for t in (s, s.with_num_features(6)):
        phi = t(np.random.default_rng(0))
        assert (phi.orthogonal, phi.scale, phi.A) == (True, 2.0, -0.1)
        assert t.kernel.scale == 2.0 if hasattr(t.kernel, "scale") else True
    assert s.with_num_features(6).num_features == 6
    assert s.theory_kind == "bound" and PositiveRandomFeatures.sampler(2, 4).theory_kind == "exact"
    fit = OptimalPositiveRandomFeatures.fit(
        _pts(3, 2, 0), _pts(2, 2, 1), 4, seed=0, orthogonal=True, scale=2.0
    )
    assert fit.orthogonal and fit.scale == 2.0
    plain = RandomFeatureSampler(PositiveRandomFeatures, 2, 4, scale=3.0)
    assert plain(np.random.default_rng(0)).scale == 3.0


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("orthogonal", [False, True])
def test_one_trial_per_chunk_equals_maps_drawn_one_by_one(cls, orthogonal):
    # with CHUNK_ELEMENTS = 1 every chunk holds one trial, so batch_estimates draws the
    # same stream as calling the sampler once per trial
    s = cls.sampler(3, 4, orthogonal=orthogonal, scale=0.8)
    s.CHUNK_ELEMENTS = 1
    X, Y = _pts(3, 3, 0), _pts(2, 3, 1)
    est, bound = s.batch_estimates(np.random.default_rng(5), 4, X, Y)
    rng = np.random.default_rng(5)
    for t in range(4):
        phi = s(rng)
        ref = phi(X) @ phi(Y).T
        assert np.allclose(est[t], ref, rtol=1e-12, atol=1e-15)
    assert est.shape == (4, 3, 2) and bound.shape == (4, 3, 2)
    same, _ = s.batch_estimates(np.random.default_rng(5), 4, X)
    full, _ = s.batch_estimates(np.random.default_rng(5), 4, X, X)
    assert np.array_equal(same, full)


def test_chunked_and_unchunked_iid_batches_agree():
    s = PositiveRandomFeatures.sampler(2, 3)
    X = _pts(2, 2, 3)
    whole, _ = s.batch_estimates(np.random.default_rng(1), 10, X)
    s.CHUNK_ELEMENTS = 3 * (2 * 3 + 2 * 4 * 3)  # three trials per chunk
    parts, _ = s.batch_estimates(np.random.default_rng(1), 10, X)
    assert parts.shape == whole.shape and np.allclose(parts, whole, rtol=1e-13)


def test_batch_estimates_overflow_is_inf_without_warnings():
    s = TrigonometricRandomFeatures.sampler(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est, bound = s.batch_estimates(np.random.default_rng(0), 2, np.array([[30.0, 0.0]]))
    assert np.isinf(bound).all()


@pytest.mark.parametrize("cls", CLASSES)
def test_sampler_theoretical_mse_is_the_maps(cls):
    """The sampler's closed-form MSE is that of any map it draws (same d, m, scale):
    the formula depends on the law, not on the draw; ``Y=None`` means ``Y = X``."""
    s = cls.sampler(3, 5, scale=0.7)
    phi = s(np.random.default_rng(0))
    X, Y = _pts(4, 3, 2), _pts(3, 3, 3)
    np.testing.assert_array_equal(s.theoretical_mse(X, Y), phi.theoretical_mse(X, Y))
    np.testing.assert_array_equal(s.theoretical_mse(X), phi.theoretical_mse(X, X))
    assert s.theoretical_mse(X, Y).shape == (4, 3)
