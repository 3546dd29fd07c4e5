"""Kernels and exact feature maps at the ends of the float range: a correct answer or a clean error.

Overflow is a ``NumericalFailure`` naming the node and the remedy, never an
``inf`` entry; underflow gives exact zeros; distance kernels are exactly 1 on
the diagonal; the deepest expression allowed answers every question; and
Hypothesis feeds finite values from 5e-324 to 1e300 to every public function
and example kernel, requiring an answer (finite, inputs unchanged) or a clean
error.
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
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.features import weighted_monomials
from kernelcheck.kernels import (
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
    exp,
    monomial_dim,
    unweighted_monomials,
)
from tests import catalog

X = np.random.default_rng(3).normal(size=(4, 2))

#: The example kernels whose values lie in [0, 1] (tests/catalog.py).
DISTANCE_KERNELS = [e.kernel for e in catalog.kernels(catalog.is_distance_kernel)]

CLEAN = (InvalidArgument, NumericalFailure)


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
