"""Unit tests of the random feature maps (claims C13, C17, C18)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from kernelcheck._src.features.random import (
    ESTIMATORS,
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    RandomFeatureSampler,
    TrigonometricRandomFeatures,
    draw_projection,
    optimal_positive_parameter,
)
from kernelcheck._src.kernels.featuremap import FeatureMap
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential

CLASSES = list(ESTIMATORS.values())
U = 2.0**-53


def _pts(n, d, seed, norm=0.4):
    G = np.random.default_rng(seed).standard_normal((n, d))
    return norm * G / np.linalg.norm(G, axis=1, keepdims=True)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("orthogonal", [False, True])
def test_interface_and_state(cls, orthogonal):
    phi = cls(5, 12, seed=3, orthogonal=orthogonal, scale=0.5)
    assert isinstance(phi, FeatureMap)
    assert phi.exact is False
    assert phi.kernel == Exponential(0.5)
    X = _pts(7, 5, 0)
    F = phi(X)
    assert F.shape == (7, phi.output_dim(5))
    assert phi.output_dim(5) == (
        24 if cls in (TrigonometricRandomFeatures, HyperbolicRandomFeatures) else 12
    )
    assert phi.projection.shape == (12, 5)
    with pytest.raises(ValueError):
        phi.projection[0, 0] = 1.0  # read-only state
    # same seed, same bytes; another seed, another projection
    again = cls(5, 12, seed=3, orthogonal=orthogonal, scale=0.5)
    assert again.projection.tobytes() == phi.projection.tobytes()
    assert not np.array_equal(cls(5, 12, seed=4, orthogonal=orthogonal).projection, phi.projection)
    assert cls.__name__ in repr(phi)


@pytest.mark.parametrize("cls", CLASSES)
def test_scaled_features_and_estimate_agree_with_phi(cls):
    phi = cls(4, 16, seed=1, scale=0.8)
    X, Y = _pts(5, 4, 1), _pts(3, 4, 2)
    F, ls = phi.scaled_features(X)
    direct = phi(X)
    # phi = exp(ls) F: both sides exponentiate the same log feature L, rounded
    # differently; exp turns an absolute argument error e into a relative one,
    # e <= 8 u (1 + |L|) for these few additions (|L| <= 5 here)
    assert np.allclose(np.exp(ls)[:, None] * F, direct, rtol=8 * U * 6 + 4 * U, atol=0)
    G = phi(X) @ phi(Y).T
    bound = 40 * U * (np.abs(phi(X)) @ np.abs(phi(Y)).T) * 16  # gamma_D with slack
    assert np.all(np.abs(phi.estimate(X, Y) - G) <= bound)


@pytest.mark.parametrize(
    "cls", [PositiveRandomFeatures, HyperbolicRandomFeatures, OptimalPositiveRandomFeatures]
)
def test_log_features_is_log_of_phi(cls):
    phi = cls(3, 8, seed=2)
    X = _pts(4, 3, 5, norm=1.0)
    L = phi.log_features(X)
    assert np.allclose(np.exp(L), phi(X), rtol=1e-13)


def test_large_norms_work_in_log_space():
    """|x|^2 = 1800: phi(x) underflows (trig: overflows), the estimate does not."""
    phi = PositiveRandomFeatures(2, 8, seed=0)
    x = np.array([[30.0, 30.0]])
    y = np.array([[-0.01, 0.02]])
    with pytest.raises(NumericalFailure, match="underflow"):
        phi(x)
    with pytest.raises(NumericalFailure, match="overflow"):
        TrigonometricRandomFeatures(2, 8, seed=0)(x)
    est = phi.estimate(x, y)
    # reference: log-space sum, computed independently with logaddexp
    L = phi.log_features(x)[0] + phi.log_features(y)[0]
    ref = math.exp(np.logaddexp.reduce(L))
    assert est[0, 0] == pytest.approx(ref, rel=1e-12)
    assert np.isfinite(phi.log_features(x * 1e3)).all()


def test_trig_map_is_exact_on_the_diagonal():
    phi = TrigonometricRandomFeatures(3, 5, seed=0)
    X = _pts(4, 3, 0)
    d = np.diag(phi.estimate(X))
    assert np.allclose(d, np.exp((X * X).sum(1)), rtol=1e-14)


@pytest.mark.parametrize("orthogonal", [False, True])
def test_optimal_with_A_zero_is_favor_plus(orthogonal):
    X, Y = _pts(3, 4, 0), _pts(2, 4, 1)
    a = OptimalPositiveRandomFeatures(4, 9, seed=7, A=0.0, orthogonal=orthogonal)
    b = PositiveRandomFeatures(4, 9, seed=7, orthogonal=orthogonal)
    assert np.allclose(a(X), b(X), rtol=1e-14)
    assert np.allclose(a.estimate(X, Y), b.estimate(X, Y), rtol=1e-14)


@pytest.mark.parametrize("s2, d", [(0.5, 4), (3.0, 8), (10.0, 2), (0.0, 16)])
def test_optimal_parameter_minimises_the_second_moment(s2, d):
    """A* (closed form) against a numerical minimiser of the log second moment."""

    def log_m2(A):
        return (
            d * math.log(1 - 4 * A)
            - 0.5 * d * math.log(1 - 8 * A)
            + 2 * (1 - 4 * A) * s2 / (1 - 8 * A)
        )

    res = minimize_scalar(log_m2, bounds=(-20.0, 0.124), method="bounded", options={"xatol": 1e-12})
    assert optimal_positive_parameter(s2, d) == pytest.approx(res.x, abs=1e-6)


def test_fit_uses_mean_pair_norm():
    X, Y = _pts(6, 3, 0, norm=1.0), _pts(5, 3, 1, norm=1.0)
    phi = OptimalPositiveRandomFeatures.fit(X, Y, 8, seed=0, scale=0.5)
    Z = 0.5 * ((X[:, None, :] + Y[None, :, :]) ** 2).sum(-1)  # all pairs, by brute force
    assert phi.sq_norm == pytest.approx(Z.mean(), rel=1e-12)


def _lemma2(cls, x, y, m):
    """Choromanski et al. 2021 Lemma 2 (and Sec. 2.4 for cosh), written from the paper."""
    sm = math.exp(x @ y)
    sp = float((x + y) @ (x + y))
    sd = float((x - y) @ (x - y))
    pos = math.exp(sp) * sm**2 * (1 - math.exp(-sp)) / m
    if cls is PositiveRandomFeatures:
        return pos
    if cls is TrigonometricRandomFeatures:
        return math.exp(sp) * sm**-2 * (1 - math.exp(-sd)) ** 2 / (2 * m)
    if cls is HyperbolicRandomFeatures:
        return 0.5 * (1 - math.exp(-sp)) * pos
    raise AssertionError


@pytest.mark.parametrize(
    "cls", [PositiveRandomFeatures, TrigonometricRandomFeatures, HyperbolicRandomFeatures]
)
def test_theoretical_mse_matches_lemma2(cls):
    X, Y = _pts(3, 4, 3, norm=0.9), _pts(3, 4, 4, norm=0.6)
    phi = cls(4, 10, seed=0)
    M = phi.theoretical_mse(X, Y)
    for i in range(3):
        for j in range(3):
            assert M[i, j] == pytest.approx(_lemma2(cls, X[i], Y[j], 10), rel=1e-10)


def test_optimal_theory_second_moment_closed_form():
    """Relative second moment (1-4A)^d (1-8A)^(-d/2) exp(2(1-4A)s^2/(1-8A) - s^2) - 1."""
    d, m = 4, 5
    phi = OptimalPositiveRandomFeatures(d, m, seed=0, sq_norm=2.0)
    A = phi.A
    X, Y = _pts(2, d, 0, 0.8), _pts(2, d, 1, 0.8)
    t = phi.theory(X, Y, order=2)
    s2 = ((X[:, None] + Y[None]) ** 2).sum(-1)
    ref = (
        (1 - 4 * A) ** d * (1 - 8 * A) ** (-d / 2) * np.exp(2 * (1 - 4 * A) * s2 / (1 - 8 * A) - s2)
        - 1
    ) / m
    assert np.allclose(t["central"][2], ref, rtol=1e-10)


@pytest.mark.parametrize("cls", CLASSES)
def test_batch_estimates_equal_single_maps_for_iid_rows(cls):
    """Batched trials and one map per trial draw the same stream for i.i.d. rows."""
    sampler = cls.sampler(3, 6, scale=0.7)
    X, Y = _pts(4, 3, 0), _pts(2, 3, 1)
    est, bound = sampler.batch_estimates(np.random.default_rng(11), 1, X, Y)
    phi = sampler(np.random.default_rng(11))
    ref = phi(X) @ phi(Y).T
    assert np.allclose(est[0], ref, rtol=1e-13, atol=1e-15)
    assert np.all(bound[0] >= np.abs(ref) * (1 - 1e-12))  # Cauchy-Schwarz scale


def test_orthogonal_blocks_are_orthogonal():
    W = draw_projection(0, 4, 10, orthogonal=True)
    for start in (0, 4):
        B = W[start : start + 4]
        G = B @ B.T
        off = G - np.diag(np.diag(G))
        assert np.max(np.abs(off)) <= 64 * U * np.max(np.diag(G))
    Wb = draw_projection(1, 3, 5, orthogonal=True, batch=7)
    assert Wb.shape == (7, 5, 3)


def test_sampler_protocol():
    s = HyperbolicRandomFeatures.sampler(2, 4, orthogonal=True)
    assert isinstance(s, RandomFeatureSampler)
    assert s.theory_kind == "bound"
    assert s.with_num_features(9).num_features == 9
    assert isinstance(s(np.random.default_rng(0)), HyperbolicRandomFeatures)
    assert "HyperbolicRandomFeatures.sampler(2, 4" in repr(s)


BAD = [
    (lambda: PositiveRandomFeatures(0, 4, seed=0), "`dim`"),
    (lambda: PositiveRandomFeatures(2, 0, seed=0), "`num_features`"),
    (lambda: PositiveRandomFeatures(2, 4.0, seed=0), "`num_features`"),
    (lambda: PositiveRandomFeatures(2, 4, seed=None), "`seed`"),
    (lambda: PositiveRandomFeatures(2, 4, seed=0, scale=-1.0), "`scale`"),
    (lambda: PositiveRandomFeatures(2, 4, seed=0, orthogonal="yes"), "`orthogonal`"),
    (lambda: OptimalPositiveRandomFeatures(2, 4, seed=0, A=0.3), "`A`"),
    (lambda: PositiveRandomFeatures(2, 4, seed=0)(np.ones((3, 3))), "`X`"),
    (lambda: PositiveRandomFeatures(2, 4, seed=0)(np.array([[np.nan, 1.0]])), "`X`"),
    (lambda: PositiveRandomFeatures(2, 4, seed=0).output_dim(3), "`d`"),
    (lambda: RandomFeatureSampler(int, 2, 4), "`cls`"),
]


@pytest.mark.parametrize("call, name", BAD)
def test_bad_input(call, name):
    with pytest.raises(InvalidArgument, match=name):
        call()
