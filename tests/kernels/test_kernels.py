"""Unit tests of the kernel algebra, exact feature maps, strategies and their bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from kernelcheck import verify
from kernelcheck._src.core.rounding import gamma
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument, NumericalFailure
from kernelcheck.features import ExactFeatureMap, weighted_monomials
from kernelcheck.kernels import (
    Constant,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
    Power,
    Scaled,
    Sum,
    exp,
    kernel_from_function,
    unweighted_monomials,
)
from kernelcheck.strategies import feature_maps, kernels, point_set_pairs, point_sets
from kernelcheck.testing import assert_feature_map

RNG = np.random.default_rng(20261129)
X = RNG.normal(size=(7, 3))
Y = RNG.normal(size=(5, 3))

EXAMPLES = [
    Linear(),
    Constant(0.5),
    Polynomial(2),
    Polynomial(3, c=1.0),
    exp(Linear(), order=3),
    exp(0.5 * Linear(), order=2) + 0.5 * Polynomial(2),
    (Linear() + 1) ** 2 * Linear(),
    Exponential(0.5),
    Gaussian(1.5),
    Laplacian(),
    exp(Gaussian()),
]


@pytest.mark.parametrize("k", EXAMPLES, ids=repr)
def test_gram_shape_symmetry_and_dtype(k):
    G = k(X, Y)
    assert G.shape == (7, 5) and G.dtype == np.float64
    S = k(X)
    # The symmetric Gram of a dot-product kernel is exactly symmetric only when
    # the GEMM is; the gap is bounded by twice the error bound.
    assert np.all(np.abs(S - S.T) <= 2 * k.error_bound(X))
    assert k(X.astype(np.float32), Y.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("k", EXAMPLES, ids=repr)
def test_gram_agrees_with_mpmath_within_error_bound(k):
    exact = np.array(k.gram_mp(X, Y, dps=40).tolist(), dtype=float)
    assert np.all(
        np.abs(k(X, Y) - exact) <= k.error_bound(X, Y) + np.finfo(float).eps / 2 * np.abs(exact)
    )


@pytest.mark.parametrize("k", [k for k in EXAMPLES if k.has_finite_features], ids=repr)
@pytest.mark.parametrize("form", ["symmetric", "tensor"])
def test_feature_map_reproduces_and_reports_dimension(k, form):
    phi = k.features(form)
    assert isinstance(phi, ExactFeatureMap) and phi.exact and phi.kernel == k
    assert phi(X).shape == (7, phi.output_dim(3)) == (7, k.feature_dim(3, form))
    assert_feature_map(phi, X, Y)


@pytest.mark.parametrize("k", [k for k in EXAMPLES if not k.has_finite_features], ids=repr)
def test_infinite_kernels_say_how_to_truncate_or_sample(k):
    with pytest.raises(InfiniteFeatureSpace) as info:
        k.features()
    message = str(info.value)
    assert "order=" in message or "random" in message.lower() or "mercer" in message


def test_algebra_builds_nodes_and_prints_formulas():
    k = exp(Linear(), order=3) + 0.5 * Polynomial(2)
    assert repr(k) == "exp(Linear(), order=3) + 0.5 * Polynomial(2)"
    assert isinstance(Linear() + 1, Sum) and (Linear() + 1).right == Constant(1)
    assert isinstance(2 * Linear(), Scaled) and isinstance(Linear() ** 3, Power)
    assert repr((Linear() + Constant(1.0)) ** 2) == "(Linear() + Constant(1.0)) ** 2"
    assert repr(Linear() * (Linear() + 1)) == "Linear() * (Linear() + Constant(1.0))"
    assert hash(Polynomial(2, c=1.0)) == hash(Polynomial(2, c=1.0))
    assert Polynomial(2) != Polynomial(3)


def test_algebra_values_follow_the_rules():
    a, b = Polynomial(2, c=1.0), Gaussian()
    assert np.array_equal((a + b)(X, Y), a(X, Y) + b(X, Y))
    assert np.array_equal((a * b)(X, Y), a(X, Y) * b(X, Y))
    assert np.array_equal((3 * b)(X, Y), 3 * b(X, Y))
    assert np.array_equal((b**2)(X, Y), b(X, Y) * b(X, Y))
    assert np.array_equal(exp(b)(X, Y), np.exp(b(X, Y)))


def test_kernels_are_immutable():
    k = Polynomial(2)
    with pytest.raises(AttributeError):
        k.degree = 3
    with pytest.raises(AttributeError):
        del k.c


def test_polynomial_and_power_forms_agree():
    assert np.array_equal(Polynomial(3, c=1.0)(X, Y), ((Linear() + 1.0) ** 3)(X, Y))


def test_weighted_monomials_multinomial_identity():
    """sum of squared weights = number of ordered index tuples: (1.1)^m at the all-ones point."""
    for d in range(1, 5):
        for m in range(0, 5):
            P = weighted_monomials(np.ones((1, d)), m)
            assert P.shape[1] == math.comb(d + m - 1, m)
            # each entry is a product of 2m rounded factors; the sum adds D roundings
            assert math.isclose(float((P @ P.T)[0, 0]), d**m, rel_tol=gamma(4 * m + P.shape[1]))


def test_unweighted_monomials_have_unique_count():
    P = unweighted_monomials(np.array([[2.0, 3.0]]), 2)
    assert sorted(P[0].tolist()) == [4.0, 6.0, 9.0]


def test_function_kernel_loop_and_vectorised_modes_agree():
    def rbf(x, y):
        return float(np.exp(-np.sum((x - y) ** 2) / 2))

    def rbf_vec(A, B):
        return np.exp(-np.sum((A - B) ** 2, axis=-1) / 2)

    loop = kernel_from_function(rbf)(X, Y)
    vec = kernel_from_function(rbf_vec, vectorized=True)(X, Y)
    # Both evaluate exp(-d2 / 2) with d2 summed in a different order: |delta d2| <= gamma_(d+1) d2,
    # so the relative gap is at most gamma_(d+1) d2 / 2 + 2u on each side.
    d2 = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    rel = 2 * (gamma(X.shape[1] + 1) * d2 / 2 + gamma(2))
    assert np.all(np.abs(loop - vec) <= rel * np.abs(loop))
    # against the closed form, whose own propagated bound covers the GEMM route
    G = Gaussian()(X, Y)
    assert np.all(np.abs(loop - G) <= Gaussian().error_bound(X, Y) + rel * np.abs(loop))
    assert not kernel_from_function(rbf).supports_mp
    with pytest.raises(InfiniteFeatureSpace):
        kernel_from_function(rbf).features()


def test_function_kernel_with_mp_function_evaluates_in_mpmath():
    import mpmath

    k = kernel_from_function(
        lambda x, y: float(np.tanh(x @ y - 1)),
        mp_function=lambda x, y: mpmath.tanh(mpmath.fdot(x, y) - 1),
        name="tanh",
    )
    assert k.supports_mp
    exact = np.array(k.gram_mp(X[:3], dps=30).tolist(), dtype=float)
    # float tanh (1 ulp) of a dot product accurate to gamma_d |x|.|y|; tanh' <= 1
    absdot = np.abs(X[:3]) @ np.abs(X[:3]).T
    assert np.all(np.abs(exact - k(X[:3])) <= gamma(X.shape[1] + 1) * (absdot + 1) + gamma(2))


def test_overflow_is_an_error_not_inf():
    big = np.full((1, 4), 30.0)
    with pytest.raises(NumericalFailure, match="overflows"):
        Exponential()(big)


def test_torch_like_objects_are_read_through_numpy():
    class Tensor:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    assert np.array_equal(Linear()(Tensor(X)), Linear()(X))


BAD_GRAM_CALLS = [
    (lambda: Linear()(np.array([1.0, 2.0])), "`X` must be a 2-d"),
    (lambda: Linear()(np.zeros((2, 2, 2))), "`X` must be a 2-d"),
    (lambda: Linear()(np.array([[np.nan, 1.0]])), "`X` must be finite"),
    (lambda: Linear()(np.array([[np.inf, 1.0]])), "`X` must be finite"),
    (lambda: Linear()(X, np.ones((2, 4))), "`Y` must have the same number of columns"),
    (lambda: Linear()(np.array([["a", "b"]])), "`X` must be a real numeric array"),
    (lambda: Linear()(np.array([[1 + 2j]])), "`X` must be real"),
    (lambda: Linear()(np.array([[object()]], dtype=object)), "`X` must be a real numeric array"),
    (lambda: Linear()(np.zeros((0, 3))), "`X` must not be empty"),
    (lambda: Linear()(np.zeros((3, 0))), "must not be empty"),
    (lambda: Linear()("abc"), "`X` must be a numeric array"),
    (lambda: Polynomial(-1), "`degree` must be >= 0"),
    (lambda: Polynomial(2.5), "`degree` must be an integer"),
    (lambda: Polynomial(2, c=-1.0), "`c` must be >= 0"),
    (lambda: Polynomial(True), "`degree` must be an integer"),
    (lambda: exp(Linear(), order=-1), "`order` must be >= 0"),
    (lambda: exp(Linear(), order=1000), "`order` must be <= 64"),
    (lambda: Linear() ** -2, "`m` must be >= 0"),
    (lambda: Exponential(0.0), "`scale` must be > 0"),
    (lambda: Exponential(float("nan")), "`scale` must be finite"),
    (lambda: Gaussian(-1.0), "`lengthscale` must be > 0"),
    (lambda: Constant("x"), "`c` must be a real number"),
    (lambda: Linear() + "x", "`other` must be a Kernel or a real number"),
    (lambda: Linear().features(form="full"), "`form` must be one of"),
    (lambda: Linear().feature_dim(0), "`d` must be >= 1"),
    (lambda: (-1.0 * Linear()).features(), "negative"),
    (lambda: Linear().gram_mp(X, dps=5), "`dps` must be >= 15"),
    (lambda: kernel_from_function(3), "`f` must be callable"),
    (lambda: kernel_from_function(lambda x, y: 1 / 0)(X), "`f` .* raised ZeroDivisionError"),
    (lambda: kernel_from_function(lambda x, y: float("nan"))(X), "non-finite"),
    (lambda: kernel_from_function(lambda A, B: A.sum(-1), vectorized=True)(X, Y), "must broadcast"),
    (lambda: kernel_from_function(lambda x, y: 1.0).error_bound(X), "no rounding-error model"),
    (lambda: kernel_from_function(lambda x, y: 1.0).gram_mp(X), "cannot be evaluated in mpmath"),
    (lambda: unweighted_monomials(X, -1), "`degree` must be >= 0"),
    (lambda: verify.feature_map(Linear().features(), X, kernel="linear"), "`kernel` must be"),
    (lambda: verify.feature_map(lambda Z: Z[:, :1].ravel(), X, kernel=Linear()), "must have shape"),
    (lambda: verify.feature_map(lambda Z: Z * np.nan, X, kernel=Linear()), "must be finite"),
    (lambda: verify.feature_map(lambda Z: 1 / 0, X, kernel=Linear()), "raised ZeroDivisionError"),
    (lambda: verify.feature_map(lambda Z: Z, X), "`kernel` must be given"),
    (
        lambda: verify.feature_map(Linear().features(), X, feature_ops=-1),
        "`feature_ops` must be >= 0",
    ),
]


@pytest.mark.parametrize("call, message", BAD_GRAM_CALLS, ids=[m for _, m in BAD_GRAM_CALLS])
def test_bad_input_raises_invalid_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_huge_feature_map_refused_up_front():
    phi = Polynomial(12).features("tensor")
    with pytest.raises(InvalidArgument, match="GiB"):
        phi(np.ones((10, 64)))


def test_inputs_are_not_modified():
    A = X.copy()
    A.setflags(write=False)
    for k in EXAMPLES:
        k(A)
        if k.has_finite_features:
            k.features()(A)
    assert np.array_equal(A, X)


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


@pytest.mark.parametrize("k", [k for k in EXAMPLES], ids=repr)
def test_kernels_pickle_and_stay_immutable(k):
    """Kernels travel to process pools and Dask workers by pickle."""
    import copy
    import pickle

    k2 = pickle.loads(pickle.dumps(k))
    assert k2 == k and repr(k2) == repr(k)
    assert np.array_equal(k2(X, Y), k(X, Y))
    assert copy.deepcopy(k) == k
    with pytest.raises(AttributeError):
        k2.anything = 1
