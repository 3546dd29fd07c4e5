"""Reliability of the kernel objects and exact feature maps.

The contract (docs/reliability.md): every public function of
:mod:`kernelcheck.kernels` and the exact maps of :mod:`kernelcheck.features`
either returns a correct answer or raises a clean error -- ``InvalidArgument``
whose message opens with the argument in backticks (or names the size it would
need), ``NumericalFailure`` or ``InfiniteFeatureSpace`` -- never a bare NumPy
traceback, never an ``inf`` or NaN entry in a result.  No function writes into
the caller's arrays (checked with read-only inputs).  The same contract for
``verify.feature_map`` is in ``tests/verify/test_reliability.py``, for the
strategies in ``tests/testing/test_reliability.py``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import verify
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument, NumericalFailure
from kernelcheck.features import weighted_monomials
from kernelcheck.kernels import (
    Constant,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
    exp,
    kernel_from_function,
    monomial_dim,
    unweighted_monomials,
)
from tests import catalog

#: The example kernels whose values lie in [0, 1] (tests/catalog.py).
DISTANCE_KERNELS = [e.kernel for e in catalog.kernels(catalog.is_distance_kernel)]

CLEAN = (InvalidArgument, NumericalFailure)
X = np.random.default_rng(3).normal(size=(4, 2))
HUGE = np.broadcast_to(np.ones((1, 1)), (100_000, 1))  # no memory behind it


def _readonly(a):
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _point_cases(name, call):
    return [
        (
            f"{name}-1d",
            lambda: call(np.ones(3)),
            InvalidArgument,
            r"^`X` must be a 2-d array of shape \(n, d\), got array of shape \(3,\) and dtype "
            r"float64 \(a single point x is passed as x\[None, :\]",
        ),
        (
            f"{name}-3d",
            lambda: call(np.ones((2, 2, 2))),
            InvalidArgument,
            r"^`X` must be a 2-d array of shape \(n, d\), got array of shape \(2, 2, 2\)",
        ),
        (
            f"{name}-empty",
            lambda: call(np.ones((0, 2))),
            InvalidArgument,
            r"^`X` must not be empty, got array of shape \(0, 2\)",
        ),
        (
            f"{name}-nan",
            lambda: call(np.array([[1.0, np.nan]])),
            InvalidArgument,
            r"^`X` must be finite, but 1 entry is NaN or Inf \(first at index \(0, 1\)",
        ),
        (
            f"{name}-inf",
            lambda: call(np.array([[np.inf], [-np.inf]])),
            InvalidArgument,
            r"^`X` must be finite, but 2 entries are NaN or Inf \(first at index \(0, 0\)",
        ),
        (
            f"{name}-complex",
            lambda: call(X + 0j),
            InvalidArgument,
            r"^`X` must be real, got complex",
        ),
        (
            f"{name}-object",
            lambda: call(X.astype(object)),
            InvalidArgument,
            r"^`X` must be a real numeric array, got array of shape \(4, 2\) and dtype object",
        ),
        (
            f"{name}-str",
            lambda: call("points"),
            InvalidArgument,
            r"^`X` must be a numeric array, got str 'points'",
        ),
        (
            f"{name}-ragged",
            lambda: call([[1.0], [1.0, 2.0]]),
            InvalidArgument,
            r"^`X` must be a numeric array, got list",
        ),
    ]


# ---------------------------------------------------------------------------
# Bad-input table: (id, call, error, message regex from the start)
# ---------------------------------------------------------------------------


BAD_CALLS = (
    _point_cases("gram", lambda Z: Gaussian()(Z))
    + _point_cases("error_bound", lambda Z: Polynomial(2).error_bound(Z))
    + _point_cases("gram_mp", lambda Z: Linear().gram_mp(Z, dps=20))
    + _point_cases("features", lambda Z: Polynomial(2).features()(Z))
    + _point_cases("unweighted", lambda Z: unweighted_monomials(Z, 2))
    + [
        (
            "gram-Y-dim",
            lambda: Linear()(X, np.ones((2, 3))),
            InvalidArgument,
            r"^`Y` must have the same number of columns as `X` \(d = 2\), "
            r"got array of shape \(2, 3\)",
        ),
        (
            "gram-Y-nan",
            lambda: Linear()(X, np.full((2, 2), np.nan)),
            InvalidArgument,
            r"^`Y` must be finite",
        ),
        (
            "gram-Y-1d",
            lambda: Linear()(X, np.ones(2)),
            InvalidArgument,
            r"^`Y` must be a 2-d array",
        ),
        (
            "gram-huge",
            lambda: Linear()(HUGE, HUGE),
            InvalidArgument,
            r"^the Gram block of Linear\(\) would need 10000000000 entries \(74\.5 GiB\); "
            r"the limit is 2147483648 entries",
        ),
        (
            "error-bound-huge",
            lambda: Gaussian().error_bound(HUGE, HUGE),
            InvalidArgument,
            r"^the Gram block of Gaussian\(\) would need 10000000000 entries",
        ),
        (
            "features-huge",
            lambda: exp(Linear(), order=20).features()(np.ones((2, 50))),
            InvalidArgument,
            r"^the feature matrix of \(exp\(Linear\(\), order=20\)\)\.features"
            r"\(form='symmetric'\) for X of shape \(2, 50\) would need",
        ),
        (
            "tensor-huge",
            lambda: (Linear() ** 30).features("tensor")(np.ones((2, 50))),
            InvalidArgument,
            r"^the feature matrix of \(Linear\(\) \*\* 30\)",
        ),
        (
            "unweighted-huge",
            lambda: unweighted_monomials(np.ones((2, 50)), 30),
            InvalidArgument,
            r"^the monomial matrix would need 11089265668550566828760 entries",
        ),
        (
            "weighted-huge",
            lambda: weighted_monomials(np.ones((2, 50)), 30),
            InvalidArgument,
            r"^the monomial feature matrix would need 11089265668550566828760 entries",
        ),
        (
            "gram_mp-dps-low",
            lambda: Linear().gram_mp(X, dps=5),
            InvalidArgument,
            r"^`dps` must be >= 15, got 5",
        ),
        (
            "gram_mp-dps-float",
            lambda: Linear().gram_mp(X, dps=30.0),
            InvalidArgument,
            r"^`dps` must be an integer",
        ),
        (
            "gram_mp-function",
            lambda: kernel_from_function(lambda x, y: 1.0).gram_mp(X),
            InvalidArgument,
            r"^`kernel` kernel_from_function\(<lambda>\) cannot be evaluated in "
            r"mpmath; pass mp_function= to kernel_from_function",
        ),
        # constructors
        (
            "constant-nan",
            lambda: Constant(float("nan")),
            InvalidArgument,
            r"^`c` must be finite, got nan",
        ),
        (
            "constant-str",
            lambda: Constant("1"),
            InvalidArgument,
            r"^`c` must be a real number, got str '1'",
        ),
        (
            "constant-bool",
            lambda: Constant(True),
            InvalidArgument,
            r"^`c` must be a real number, got bool True",
        ),
        (
            "polynomial-degree-neg",
            lambda: Polynomial(-1),
            InvalidArgument,
            r"^`degree` must be >= 0, got -1",
        ),
        (
            "polynomial-degree-float",
            lambda: Polynomial(2.0),
            InvalidArgument,
            r"^`degree` must be an integer \(got the float 2\.0; pass int\(2\.0\)\)",
        ),
        (
            "polynomial-degree-big",
            lambda: Polynomial(65),
            InvalidArgument,
            r"^`degree` must be <= 64, got 65",
        ),
        (
            "polynomial-c-neg",
            lambda: Polynomial(2, c=-1.0),
            InvalidArgument,
            r"^`c` must be >= 0, got -1\.0",
        ),
        (
            "exponential-scale-zero",
            lambda: Exponential(0.0),
            InvalidArgument,
            r"^`scale` must be > 0, got 0\.0",
        ),
        (
            "exponential-scale-inf",
            lambda: Exponential(float("inf")),
            InvalidArgument,
            r"^`scale` must be finite, got inf",
        ),
        (
            "gaussian-lengthscale",
            lambda: Gaussian(-1.0),
            InvalidArgument,
            r"^`lengthscale` must be > 0, got -1\.0",
        ),
        (
            "laplacian-lengthscale",
            lambda: Laplacian("1"),
            InvalidArgument,
            r"^`lengthscale` must be a real number, got str '1'",
        ),
        (
            "function-not-callable",
            lambda: kernel_from_function(3),
            InvalidArgument,
            r"^`f` must be callable, got int 3",
        ),
        (
            "function-mp-not-callable",
            lambda: kernel_from_function(lambda x, y: 1.0, mp_function="mp"),
            InvalidArgument,
            r"^`mp_function` must be callable, got str 'mp'",
        ),
        (
            "function-name",
            lambda: kernel_from_function(lambda x, y: 1.0, name=3),
            InvalidArgument,
            r"^`name` must be a string, got int 3",
        ),
        # algebra
        (
            "sum-str",
            lambda: Linear() + "a",
            InvalidArgument,
            r"^`other` must be a Kernel or a real number, got str 'a'",
        ),
        (
            "radd-bool",
            lambda: True + Linear(),
            InvalidArgument,
            r"^`other` must be a Kernel or a real number, got bool True",
        ),
        (
            "power-float",
            lambda: Linear() ** 0.5,
            InvalidArgument,
            r"^`m` must be an integer, got float 0\.5",
        ),
        ("power-neg", lambda: Linear() ** -1, InvalidArgument, r"^`m` must be >= 0, got -1"),
        ("power-big", lambda: Linear() ** 65, InvalidArgument, r"^`m` must be <= 64, got 65"),
        (
            "exp-order-neg",
            lambda: exp(Linear(), order=-1),
            InvalidArgument,
            r"^`order` must be >= 0, got -1",
        ),
        (
            "exp-order-float",
            lambda: exp(Linear(), order=2.5),
            InvalidArgument,
            r"^`order` must be an integer",
        ),
        (
            "exp-kernel-str",
            lambda: exp("k"),
            InvalidArgument,
            r"^`kernel` must be a Kernel or a real number, got str 'k'",
        ),
        # feature maps
        (
            "features-form",
            lambda: Linear().features("dense"),
            InvalidArgument,
            r"^`form` must be one of 'symmetric', 'tensor'; got 'dense'",
        ),
        (
            "feature_dim-form",
            lambda: Linear().feature_dim(3, form=None),
            InvalidArgument,
            r"^`form` must be one of 'symmetric', 'tensor'; got None",
        ),
        (
            "feature_dim-d",
            lambda: Polynomial(2).feature_dim(0),
            InvalidArgument,
            r"^`d` must be >= 1, got 0",
        ),
        (
            "output_dim-d",
            lambda: Polynomial(2).features().output_dim(1.0),
            InvalidArgument,
            r"^`d` must be an integer",
        ),
        (
            "features-exponential",
            lambda: Exponential(0.5).features(),
            InfiniteFeatureSpace,
            r"^Exponential\(scale=0\.5\) has an infinite feature space \(C9\)\. Truncate its "
            r"Taylor series with kernelcheck\.kernels\.exp\(0\.5 \* Linear\(\), order=M\) "
            r"\(C12\), or sample random features with "
            r"kernelcheck\.features\.PositiveRandomFeatures\(dim, num_features, "
            r"seed=\.\.\., scale=0\.5\) \(C13\)",
        ),
        (
            "features-exponential-1",
            lambda: Exponential().feature_dim(2),
            InfiniteFeatureSpace,
            r"^Exponential\(\) has an infinite feature space \(C9\)\. Truncate its Taylor series "
            r"with kernelcheck\.kernels\.exp\(Linear\(\), order=M\)",
        ),
        (
            "features-gaussian",
            lambda: (Linear() + Gaussian(2.0)).features(),
            InfiniteFeatureSpace,
            r"^Gaussian\(lengthscale=2\.0\) has an infinite feature space; sample random Fourier "
            r"features for it, or use kernelcheck\.mercer_features on a finite point set \(C6\)",
        ),
        (
            "features-exp",
            lambda: (2.0 * exp(Linear())).features(),
            InfiniteFeatureSpace,
            r"^exp\(Linear\(\)\) has an infinite feature space \(C9\): phi\(x\) = \[1, phi_k\(x\), "
            r"phi_k\(x\)\^\(2\)/sqrt\(2!\), \.\.\.\]\. Truncate it with exp\(k, order=M\) \(C12\), "
            r"or sample random features \(C13\)",
        ),
        (
            "features-exp-order-of-infinite",
            lambda: exp(Laplacian(), order=2).features(),
            InfiniteFeatureSpace,
            r"^Laplacian\(\) has an infinite feature space",
        ),
        (
            "features-function",
            lambda: kernel_from_function(lambda x, y: 1.0).features(),
            InfiniteFeatureSpace,
            r"^kernel_from_function\(<lambda>\) is a user function with no known feature map; "
            r"kernelcheck\.mercer_features builds one on a finite point set \(Theorem 2, C6\)",
        ),
        (
            "features-negative-constant",
            lambda: (Linear() + Constant(-1.0)).features(),
            InfiniteFeatureSpace,
            r"^Constant\(-1\.0\) has a negative value, so it is not a kernel "
            r"and has no real feature map \(Theorem 1, C5\)",
        ),
        (
            "features-negative-scale",
            lambda: (-2.0 * Linear()).features(),
            InfiniteFeatureSpace,
            r"^\(-2\.0\) \* Linear\(\) scales by a negative number: it is not a kernel and has no "
            r"real feature map \(Theorem 1, C5\)",
        ),
        (
            "features-negative-scale-product",
            lambda: (Linear() * (-1.0 * Gaussian())).feature_dim(2),
            InfiniteFeatureSpace,
            r"^\(-1\.0\) \* Gaussian\(\) scales by a negative number",
        ),
        (
            "features-scaled-infinite",
            lambda: (3.0 * Laplacian()).features(),
            InfiniteFeatureSpace,
            r"^Laplacian\(\) has an infinite feature space",
        ),
        # user functions that misbehave
        (
            "function-raises",
            lambda: kernel_from_function(lambda x, y: 1 / 0)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) raised ZeroDivisionError: division by zero",
        ),
        (
            "function-nan",
            lambda: kernel_from_function(lambda x, y: np.nan, name="nanf")(X),
            InvalidArgument,
            r"^`f` \(nanf\) returned a non-finite value .*nan.* at entry \(0, 0\)",
        ),
        (
            "function-str",
            lambda: kernel_from_function(lambda x, y: "a")(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned str .a.; expected a real number",
        ),
        (
            "function-vec-shape",
            lambda: kernel_from_function(lambda a, b: np.ones(3), vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) with vectorized=True must broadcast inputs of shapes "
            r"\(4, 1, d\) and \(1, 4, d\) to a result of shape \(4, 4\), got array of shape \(3,\)",
        ),
        (
            "function-vec-complex",
            lambda: kernel_from_function(lambda a, b: (a * b).sum(-1) + 1j, vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned array of shape \(4, 4\) and dtype complex128",
        ),
        (
            "function-vec-none",
            lambda: kernel_from_function(lambda a, b: None, vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned array of shape \(\) and dtype object; expected real",
        ),
        (
            "function-vec-inf",
            lambda: kernel_from_function(lambda a, b: np.full((4, 4), np.inf), vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned a non-finite value",
        ),
        (
            "function-raises-invalid",
            lambda: kernel_from_function(lambda x, y: Constant("x"))(X),
            InvalidArgument,
            r"^`c` must be a real number",
        ),
        (
            "function-mp-raises",
            lambda: kernel_from_function(lambda x, y: 1.0, mp_function=lambda x, y: 1 / 0).gram_mp(
                X
            ),
            InvalidArgument,
            r"^`mp_function` of kernel_from_function\(<lambda>\) raised "
            r"ZeroDivisionError: division by zero",
        ),
        (
            "function-error-bound",
            lambda: kernel_from_function(lambda x, y: 1.0).error_bound(X),
            InvalidArgument,
            r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error "
            r"model; kernelcheck cannot bound its Gram entries \(pass error_bound= to "
            r"kernel_from_function, compose only built-in nodes, or judge with a tolerance of "
            r"your own\)",
        ),
        (
            "function-in-sum-error-bound",
            lambda: (Linear() + kernel_from_function(lambda x, y: 1.0)).error_bound(X),
            InvalidArgument,
            r"^`kernel` kernel_from_function",
        ),
        # monomials
        (
            "monomial_dim-d",
            lambda: monomial_dim(0, 2),
            InvalidArgument,
            r"^`d` must be >= 1, got 0",
        ),
        (
            "monomial_dim-m",
            lambda: monomial_dim(2, -1),
            InvalidArgument,
            r"^`m` must be >= 0, got -1",
        ),
        (
            "unweighted-degree",
            lambda: unweighted_monomials(X, -1),
            InvalidArgument,
            r"^`degree` must be >= 0, got -1",
        ),
        (
            "weighted-Z",
            lambda: weighted_monomials(np.ones(3), 2),
            InvalidArgument,
            r"^`Z` must be a 2-d array",
        ),
        (
            "weighted-Z-nan",
            lambda: weighted_monomials([[np.nan]], 2),
            InvalidArgument,
            r"^`Z` must be finite",
        ),
        (
            "weighted-m",
            lambda: weighted_monomials(X, 1.5),
            InvalidArgument,
            r"^`m` must be an integer",
        ),
        (
            "array-times-kernel",
            lambda: np.array([2.0, 3.0]) * Linear(),
            InvalidArgument,
            r"^`other` must be a real number or a Kernel, got array of shape \(2,\)",
        ),
        (
            "kernel-times-array",
            lambda: Linear() * np.array([2.0, 3.0]),
            InvalidArgument,
            r"^`other` must be a real number or a Kernel, got array of shape \(2,\)",
        ),
        (
            "deep-sum",
            lambda: functools.reduce(lambda a, b: a + b, [Linear()] * 300),
            InvalidArgument,
            r"^`left` is nested 100 combinators deep: the kernel expression would be 101 deep",
        ),
        (
            "deep-product",
            lambda: functools.reduce(lambda a, b: b * a, [Linear()] * 300),
            InvalidArgument,
            r"^`right` is nested 100 combinators deep",
        ),
        (
            "deep-exp",
            lambda: functools.reduce(lambda a, _: exp(a, order=1), range(200), Linear()),
            InvalidArgument,
            r"^`kernel` is nested 100 combinators deep",
        ),
    ]
)


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_python_operators_refuse_non_numbers_with_type_error():
    """``k * "a"`` follows Python's operator protocol: NotImplemented, then TypeError."""
    with pytest.raises(TypeError):
        Linear() * "a"
    with pytest.raises(TypeError):
        "a" * Linear()
    with pytest.raises(TypeError):
        True * Linear()


# ---------------------------------------------------------------------------
# Accepted dtypes, layouts and read-only inputs
# ---------------------------------------------------------------------------


def test_readonly_noncontiguous_lists_ints_and_float16_give_the_float64_answer(builtin_kernel):
    k = builtin_kernel
    Y = X[:3] * 0.5
    expected = k(X, Y)
    assert expected.dtype == np.float64
    assert np.array_equal(k(_readonly(X), _readonly(Y)), expected)
    wide = np.repeat(X, 3, axis=1)[:, ::3]
    assert not wide.flags.c_contiguous
    assert np.array_equal(k(wide, Y), expected)
    assert np.array_equal(k(X.tolist(), Y.tolist()), expected)
    ints = np.array([[1, 0], [0, -1], [2, 1]])
    assert np.array_equal(k(ints), k(ints.astype(float)))
    assert k(ints).dtype == np.float64
    halves = X.astype(np.float16)
    assert np.array_equal(k(halves), k(halves.astype(np.float64)))
    assert np.array_equal(k(X.astype(bool)), k(X.astype(bool).astype(float)))
    # error bounds and high precision accept the same inputs
    assert np.array_equal(k.error_bound(_readonly(X), _readonly(Y)), k.error_bound(X, Y))
    assert k.gram_mp(_readonly(X[:2]), dps=20).rows == 2


def test_float32_stays_float32_and_mixed_promotes(builtin_kernel):
    k = builtin_kernel
    X32 = X.astype(np.float32)
    assert k(X32).dtype == np.float32
    assert k.error_bound(X32).dtype == np.float32
    assert k(X32, X).dtype == np.float64
    assert k(X, X32).dtype == np.float64
    assert k.error_bound(X, X32).dtype == np.float64


def test_feature_maps_accept_readonly_and_noncontiguous_inputs(exact_feature_map):
    k, form = exact_feature_map
    phi = k.features(form)
    expected = phi(X)
    assert np.array_equal(phi(_readonly(X)), expected)
    assert np.array_equal(phi(np.repeat(X, 2, axis=1)[:, ::2]), expected)
    assert phi(X.astype(np.float32)).dtype == np.float32
    assert expected.shape == (4, phi.output_dim(2)) == (4, k.feature_dim(2, form))
    report = verify.feature_map(phi, _readonly(X), _readonly(X[:2]))
    assert report.passed


def test_function_kernels_receive_rows_not_views_they_could_corrupt():
    """A user function that writes into its arguments cannot change the caller's X."""
    Xr = _readonly(X)

    def f(x, y):
        return float(x @ y)

    def fv(a, b):
        return (a * b).sum(-1)

    assert np.allclose(kernel_from_function(f)(Xr), X @ X.T)
    assert np.allclose(kernel_from_function(fv, vectorized=True)(Xr), X @ X.T)
    assert np.array_equal(Xr, X)


# ---------------------------------------------------------------------------
# Extreme values: a correct answer or a clean error
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, Z",
    [
        (Exponential(), np.full((2, 2), 100.0)),  # exp(2e4) overflows
        (Linear(), np.array([[1e200]])),
        (Polynomial(2), np.array([[1e160]])),
        (exp(Linear(), order=4), np.array([[1e100]])),
        (Gaussian(1e-160), np.array([[1.0], [-1.0]])),  # d2 / l^2 overflows, exp gives 0: fine
    ],
    ids=["exp", "linear", "poly", "taylor", "gauss-tiny-l"],
)
def test_large_norms_overflow_cleanly_or_answer(k, Z):
    try:
        G = k(Z)
    except NumericalFailure as exc:
        assert "overflows float64" in str(exc) and "scale the inputs down" in str(exc)
        with pytest.raises(NumericalFailure):
            k.error_bound(Z)
        return
    assert np.isfinite(G).all()
    assert np.isfinite(k.error_bound(Z)).all()


def test_a_finite_gram_whose_sum_overflows_is_returned_not_refused():
    """The result check sums the Gram matrix first (a finite sum proves every entry
    finite); four entries of 1e308 sum to Inf, and the entries, all finite, decide."""
    Z = np.full((2, 1), 1e154)
    G = Linear()(Z)
    assert np.array_equal(G, np.full((2, 2), 1e308))


def test_gaussian_and_laplacian_underflow_to_exact_zero_far_apart(distance_kernel):
    Z = np.array([[1e10], [-1e10]])
    k = distance_kernel
    G = k(Z)
    assert np.array_equal(G, np.eye(2))  # exp(-huge) = 0 exactly in float64
    assert np.all(k.error_bound(Z) >= 0)


def test_tiny_norms_feature_maps_agree_with_the_kernel(exact_feature_map):
    k, form = exact_feature_map
    Z = np.array([[1e-200, -3e-201], [5e-310, 0.0]])  # products underflow to subnormal / 0
    assert verify.feature_map(k.features(form), Z).passed


def test_feature_overflow_is_a_clean_error():
    with pytest.raises(NumericalFailure, match=r"overflows float64 at feature 0 of row 1"):
        Polynomial(2).features()(np.array([[1.0], [1e200]]))
    with pytest.raises(NumericalFailure, match=r"^the degree-2 monomials of `Z` overflow float64"):
        weighted_monomials([[1e200, 1.0]], 2)
    with pytest.raises(NumericalFailure, match=r"^the degree-3 monomials of `X` overflow float64"):
        unweighted_monomials([[1e200, 1.0]], 3)


def test_nearly_duplicate_points_and_n1_d1(builtin_kernel):
    k = builtin_kernel
    x = np.array([[1.0], [np.nextafter(1.0, 2.0)]])
    G = k(x)
    E = k.error_bound(x)
    # rows of nearly equal points agree within the two entries' error bounds
    assert np.all(np.abs(G[0] - G[1]) <= E[0] + E[1] + 4 * np.finfo(float).eps * np.abs(G[0]))
    one = k(np.array([[0.3]]))
    assert one.shape == (1, 1) and np.isfinite(one).all()


def test_an_error_bound_that_overflows_is_a_numerical_failure_not_inf():
    """x . y = 0 exactly while |x| . |y| overflows: the bound would be inf (no bound)."""
    Xb, Yb = [[1e308, 1e308]], [[1.0, -1.0]]
    assert np.array_equal(Linear()(Xb, Yb), [[0.0]])
    with pytest.raises(
        NumericalFailure, match=r"^the rounding-error bound of Linear\(\) overflows"
    ):
        Linear().error_bound(Xb, Yb)


def test_the_deepest_allowed_expression_answers_every_question():
    """MAX_DEPTH is what every recursive walk survives from a deep caller stack."""
    import pickle
    import sys

    from kernelcheck._src.kernels.combinators import MAX_DEPTH

    k = functools.reduce(lambda a, b: a + b, [Linear()] * MAX_DEPTH)
    j = functools.reduce(lambda a, b: a + b, [Linear()] * MAX_DEPTH)

    def deep(levels):  # use up a fifth of the recursion limit before asking
        if levels:
            return deep(levels - 1)
        return k(X), k.error_bound(X), repr(k), hash(k), k == j, pickle.loads(pickle.dumps(k))

    G, E, text, _, equal, back = deep(sys.getrecursionlimit() // 5)
    assert np.allclose(G, MAX_DEPTH * X @ X.T) and (E >= 0).all()
    assert equal and back == k and text.count("Linear()") == MAX_DEPTH


@pytest.mark.parametrize("kind", [Gaussian, Laplacian])
@pytest.mark.parametrize("ell", [1e-320, 1e-200, 1e200, 1e308])
def test_extreme_lengthscales_answer_within_their_bound(kind, ell):
    """No Python-float 1 / l^2 (ZeroDivisionError, OverflowError): the exponent is
    formed in NumPy; the answer agrees with 50-digit arithmetic within the bound."""
    k = kind(lengthscale=ell)
    G, E = k(X), k.error_bound(X)
    M = np.array(k.gram_mp(X, dps=50).tolist(), dtype=float)
    assert np.isfinite(G).all() and np.all(np.abs(G - M) <= E)
    assert np.array_equal(np.diag(G), np.ones(len(X)))


def test_distance_kernels_are_exactly_one_on_the_diagonal_where_the_gemm_form_is_not():
    """|x|^2 + |x|^2 - 2 x . x does not round to 0 on these points; k(x, x) is still 1."""
    Z = np.random.default_rng(5).normal(size=(40, 7)) * 1e3
    nx = np.einsum("ij,ij->i", Z, Z)
    assert np.count_nonzero(2 * nx - 2 * np.diag(Z @ Z.T) > 0)  # the GEMM form misses
    for k in DISTANCE_KERNELS:
        assert np.array_equal(np.diag(k(Z)), np.ones(len(Z))), k


def test_distance_kernels_are_one_on_the_diagonal(distance_kernel):
    # distance kernels: k(x, x) = 1 exactly (here |x|^2 + |x|^2 - 2 x.x rounds to 0 on X)
    assert np.array_equal(np.diag(distance_kernel(X)), np.ones(4))


# ---------------------------------------------------------------------------
# Hypothesis: arbitrary finite inputs give an answer or a clean error
# ---------------------------------------------------------------------------


EXTREME = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1e-300, -5e-324, 1e-160, 1e154, -1e154, 30.0, 700.0]),
)


POINTS = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(
    lambda nd: hnp.arrays(np.float64, nd, elements=EXTREME)
)


def _answer_or_clean(fn, *arrays):
    copies = [a.copy() for a in arrays]
    for a in arrays:
        a.setflags(write=False)
    try:
        out = fn(*arrays)
    except CLEAN:
        out = None
    for a, c in zip(arrays, copies):
        assert np.array_equal(a, c)
    if out is not None:
        assert np.isfinite(np.asarray(out, dtype=float)).all(), "a result with NaN or Inf"
    return out


@settings(max_examples=40, deadline=None)
@given(Z=POINTS)
def test_gram_answers_or_fails_cleanly(builtin_kernel, Z):
    k = builtin_kernel
    G = _answer_or_clean(k, Z)
    if G is not None and k in DISTANCE_KERNELS:
        assert np.all((G >= 0) & (G <= 1))


@settings(max_examples=40, deadline=None)
@given(Z=POINTS)
def test_error_bound_answers_or_fails_cleanly(builtin_kernel, Z):
    k = builtin_kernel
    E = _answer_or_clean(k.error_bound, Z)
    if E is not None:
        assert (E >= 0).all()


@settings(max_examples=20, deadline=None)
@given(Z=POINTS)
def test_gram_mp_is_finite_and_matches_float_where_float_answers(builtin_kernel, Z):
    k = builtin_kernel
    Z = Z[:2, :2]
    try:
        G = k(Z)
    except NumericalFailure:
        return
    M = np.array(k.gram_mp(Z, dps=30).tolist(), dtype=float)
    assert np.all(np.abs(G - M) <= k.error_bound(Z) + np.abs(M) * (2 * np.finfo(float).eps))


@settings(max_examples=40, deadline=None)
@given(Z=POINTS)
def test_feature_maps_answer_or_fail_cleanly(exact_feature_map, Z):
    k, form = exact_feature_map
    _answer_or_clean(k.features(form), Z)


@settings(max_examples=40, deadline=None)
@given(POINTS, st.integers(0, 4))
def test_monomials_answer_or_fail_cleanly(Z, m):
    W = _answer_or_clean(lambda a: weighted_monomials(a, m), Z)
    U = _answer_or_clean(lambda a: unweighted_monomials(a, m), Z)
    if W is not None:
        assert W.shape == (Z.shape[0], monomial_dim(Z.shape[1], m))
    if U is not None:
        assert U.shape == (Z.shape[0], math.comb(Z.shape[1] + m - 1, m))
