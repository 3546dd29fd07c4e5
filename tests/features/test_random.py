"""Unit tests of the random feature maps (claims C13, C17, C18).

Each test relates two computations (a map at scale s and one at scale 1 on
scaled inputs, batched trials and maps drawn one by one, the log-space and
the direct features, a closed form from the papers or the module docstring
and the theory method) or checks a documented contract (messages, row maxima
of the scaled features, parameters carried by samplers, bad input).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from kernelcheck._src.features.base import RandomFeatureSampler, draw_projection
from kernelcheck._src.features.random import (
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
    optimal_positive_parameter,
)
from kernelcheck._src.kernels.featuremap import FeatureMap
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential
from tests import catalog

U = 2.0**-53


def _pts(n, d, seed, norm=0.4):
    G = np.random.default_rng(seed).standard_normal((n, d))
    return norm * G / np.linalg.norm(G, axis=1, keepdims=True)


# ---------------------------------------------------------------------------
# Interface, state and the projection
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("orthogonal", [False, True])
def test_interface_and_state(random_feature_map, orthogonal):
    cls = random_feature_map
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


def test_sampler_protocol():
    s = HyperbolicRandomFeatures.sampler(2, 4, orthogonal=True)
    assert isinstance(s, RandomFeatureSampler)
    assert s.theory_kind == "bound"
    assert s.with_num_features(9).num_features == 9
    assert isinstance(s(np.random.default_rng(0)), HyperbolicRandomFeatures)
    assert "HyperbolicRandomFeatures.sampler(2, 4" in repr(s)


def test_orthogonal_blocks_are_orthogonal():
    W = draw_projection(0, 4, 10, orthogonal=True)
    for start in (0, 4):
        B = W[start : start + 4]
        G = B @ B.T
        off = G - np.diag(np.diag(G))
        assert np.max(np.abs(off)) <= 64 * U * np.max(np.diag(G))
    Wb = draw_projection(1, 3, 5, orthogonal=True, batch=7)
    assert Wb.shape == (7, 5, 3)
    Wg = draw_projection(2, 4, 8, orthogonal=True, batch=200)  # 400 blocks: Gram-Schmidt
    G = Wg.reshape(200, 2, 4, 4) @ np.swapaxes(Wg.reshape(200, 2, 4, 4), -1, -2)
    off = G - np.einsum("...ii->...i", G)[..., None] * np.eye(4)
    assert np.abs(off).max() <= 64 * U * np.einsum("...ii->...i", G).max()


def test_haar_factor_is_the_qr_factor_with_positive_diagonal():
    # error model: both ways are backward stable with errors of O(d u) in G, and
    # the Q factor moves by at most about kappa(G) times that (QR perturbation
    # theory); 64 d u kappa leaves a wide margin, block by block
    from kernelcheck._src.features.base import _haar_lapack, haar_factor

    rng = np.random.default_rng(11)
    for d in (1, 2, 3, 4, 8):
        G = rng.standard_normal((3, 64 * d, d, d))  # above the batch rule: Gram-Schmidt
        Q = haar_factor(G)
        ref = _haar_lapack(G)
        kappa = np.linalg.cond(G)
        assert (np.abs(Q - ref).max(axis=(-2, -1)) <= 64 * d * U * kappa).all()
        E = np.einsum("...ki,...kj->...ij", Q, Q) - np.eye(d)
        assert np.abs(E).max() <= 4 * d * U  # the certificate's bound
        R = np.einsum("...ki,...kj->...ij", Q, G)  # Q^T G: upper triangular, diag > 0
        assert (np.diagonal(R, axis1=-2, axis2=-1) > 0).all()
        assert (np.abs(np.tril(R, -1)) <= 64 * d * U * kappa[..., None, None]).all()
        if d >= 3:  # the shortcut is taken: a block recomputed by LAPACK comes back bit
            # for bit as `ref` (one Gram-Schmidt pass instead of two sends 14-27% back)
            assert np.all(Q == ref, axis=(-2, -1)).mean() < 0.05


def test_haar_factor_sends_blocks_gram_schmidt_cannot_orthogonalise_to_lapack():
    from kernelcheck._src.features.base import _haar_lapack, haar_factor

    G = np.random.default_rng(12).standard_normal((256, 4, 4))
    G[7, :, 2] = G[7, :, 0]  # singular: Gram-Schmidt divides 0 by 0, so LAPACK's QR
    G[9, :, 1] = G[9, :, 0] * (1 + 1e-15)  # kappa near 1 / u: its Q factor is fixed only
    G[9, 0, 1] += 1e-15  # up to rounding, and any Q certified orthogonal will do
    Q = haar_factor(G)
    assert np.isfinite(Q).all()
    assert np.array_equal(Q[7], _haar_lapack(G[7:8])[0])
    E = np.einsum("...ki,...kj->...ij", Q, Q) - np.eye(4)
    assert np.abs(E).max() <= 16 * 4 * U
    # backward stable either way: Q^T G is upper triangular with a diagonal >= 0, up to
    # rounding errors of O(d u) relative to the block
    R = np.einsum("...ki,...kj->...ij", Q, G)
    scale = 16 * 4 * U * np.abs(G).max(axis=(-2, -1))[:, None, None]
    assert (np.abs(np.tril(R, -1)) <= scale).all()
    assert (np.diagonal(R, axis1=-2, axis2=-1) >= -scale[..., 0]).all()


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


# ---------------------------------------------------------------------------
# Features, log-space features and estimates
# ---------------------------------------------------------------------------


def test_scaled_features_and_estimate_agree_with_phi(random_feature_map):
    cls = random_feature_map
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


def test_log_features_is_log_of_phi(positive_random_feature_map):
    cls = positive_random_feature_map
    phi = cls(3, 8, seed=2)
    X = _pts(4, 3, 5, norm=1.0)
    L = phi.log_features(X)
    assert np.allclose(np.exp(L), phi(X), rtol=1e-13, atol=0)


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
    assert np.allclose(a(X), b(X), rtol=1e-14, atol=0)
    assert np.allclose(a.estimate(X, Y), b.estimate(X, Y), rtol=1e-14, atol=0)


def test_scale_is_a_rescaling_of_the_inputs(random_feature_map):
    # exp(s x.y) = exp((sqrt(s) x).(sqrt(s) y)): a map at scale 4 is the map at scale 1 on 2 x
    cls = random_feature_map
    X = _pts(3, 2, 1)
    a = cls(2, 5, seed=2, scale=4.0)
    b = cls(2, 5, seed=2, scale=1.0)
    assert np.allclose(a(X), b(2.0 * X), rtol=1e-13, atol=0)
    assert a.kernel.scale == 4.0 if hasattr(a.kernel, "scale") else True
    assert a.scale == 4.0


def test_positive_scaled_features_have_row_maximum_one(positive_random_feature_map):
    cls = positive_random_feature_map
    phi = cls(3, 7, seed=0)
    F, ls = phi.scaled_features(_pts(4, 3, 2, norm=2.0))
    assert np.array_equal(F.max(axis=1), np.ones(4))
    assert np.all(F > 0)


def test_log_features_are_the_log_of_phi(positive_random_feature_map):
    cls = positive_random_feature_map
    phi = cls(3, 8, seed=2, scale=0.7)
    X = _pts(4, 3, 5, norm=1.5)
    assert np.allclose(np.exp(phi.log_features(X)), phi(X), rtol=1e-13)


LOG_SPACE = "use scaled_features(X), log_features(X) or estimate(X, Y), which work in log space"


def test_overflow_and_underflow_are_named(random_feature_map):
    cls = random_feature_map
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


# ---------------------------------------------------------------------------
# Closed forms: the optimal parameter, second moments, MSE
# ---------------------------------------------------------------------------


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


@pytest.mark.parametrize("cls", catalog.feature_map_params(catalog.has_performer_paper_mse))
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
    assert np.allclose(t["central"][2], ref, rtol=1e-10, atol=0)


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


def test_sampler_theoretical_mse_is_the_maps(random_feature_map):
    """The sampler's closed-form MSE is that of any map it draws (same d, m, scale):
    the formula depends on the law, not on the draw; ``Y=None`` means ``Y = X``."""
    cls = random_feature_map
    s = cls.sampler(3, 5, scale=0.7)
    phi = s(np.random.default_rng(0))
    X, Y = _pts(4, 3, 2), _pts(3, 3, 3)
    np.testing.assert_array_equal(s.theoretical_mse(X, Y), phi.theoretical_mse(X, Y))
    np.testing.assert_array_equal(s.theoretical_mse(X), phi.theoretical_mse(X, X))
    assert s.theoretical_mse(X, Y).shape == (4, 3)


# ---------------------------------------------------------------------------
# Batched trials
# ---------------------------------------------------------------------------


def test_batch_estimates_equal_single_maps_for_iid_rows(random_feature_map):
    """Batched trials and one map per trial draw the same stream for i.i.d. rows."""
    cls = random_feature_map
    sampler = cls.sampler(3, 6, scale=0.7)
    X, Y = _pts(4, 3, 0), _pts(2, 3, 1)
    est, bound = sampler.batch_estimates(np.random.default_rng(11), 1, X, Y)
    phi = sampler(np.random.default_rng(11))
    ref = phi(X) @ phi(Y).T
    assert np.allclose(est[0], ref, rtol=1e-13, atol=1e-15)
    assert np.all(bound[0] >= np.abs(ref) * (1 - 1e-12))  # Cauchy-Schwarz scale


@pytest.mark.parametrize("orthogonal", [False, True])
def test_one_trial_per_chunk_equals_maps_drawn_one_by_one(random_feature_map, orthogonal):
    # with CHUNK_ELEMENTS = 1 every chunk holds one trial, so batch_estimates draws the
    # same stream as calling the sampler once per trial
    cls = random_feature_map
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
    assert parts.shape == whole.shape and np.allclose(parts, whole, rtol=1e-13, atol=0)


def test_batch_estimates_overflow_is_inf_without_warnings():
    s = TrigonometricRandomFeatures.sampler(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est, bound = s.batch_estimates(np.random.default_rng(0), 2, np.array([[30.0, 0.0]]))
    assert np.isinf(bound).all()


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


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


def test_positive_parts_exponentiate_the_fresh_product_in_place():
    """The shortcut of ``PositiveRandomFeatures._parts``: F overwrites the product it is
    given (no second array of its size), which is safe because both callers pass a fresh
    ``X W^T`` and never read it again -- checked here by their results against the
    formula written out on separate arrays."""
    from kernelcheck._src.features.random import PositiveRandomFeatures

    rng = np.random.default_rng(12)
    phi = PositiveRandomFeatures(5, 16, seed=3, scale=0.7)
    X = 0.4 * rng.standard_normal((6, 5))
    P = X @ rng.standard_normal((16, 5)).T
    F, _ = phi._parts(P, np.zeros(6), np.zeros(16))
    assert np.shares_memory(F, P)
    Xs = X * np.sqrt(0.7)
    W = np.asarray(phi.projection)
    direct = np.exp(Xs @ W.T - 0.5 * (Xs * Xs).sum(1)[:, None]) / np.sqrt(16)
    assert np.allclose(phi(X), direct, rtol=1e-13, atol=0)
    F, ls = phi.scaled_features(X)
    assert np.allclose(np.exp(ls)[:, None] * F, direct, rtol=1e-13, atol=0)
    sampler = PositiveRandomFeatures.sampler(5, 16, scale=0.7)
    Y = 0.4 * rng.standard_normal((3, 5))
    est, _ = sampler.batch_estimates(np.random.default_rng(4), 3, X, Y)
    W3 = draw_projection(np.random.default_rng(4), 5, 16, batch=3)
    for t in range(3):
        fx = np.exp(Xs @ W3[t].T - 0.5 * (Xs * Xs).sum(1)[:, None]) / 4
        Ys = Y * np.sqrt(0.7)
        fy = np.exp(Ys @ W3[t].T - 0.5 * (Ys * Ys).sum(1)[:, None]) / 4
        assert np.allclose(est[t], fx @ fy.T, rtol=1e-12, atol=0)
