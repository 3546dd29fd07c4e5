"""Unit tests of the exact feature maps of finite kernels (claims C4, C7, C8, C9, C12).

Feature dimensions against counts of the actual feature columns, the rounding
counts (``ops``) against each node's docstring, the maps against
hand-derived ones (the C8 / C12 formulas), the monomial maps against the
multinomial theorem, and the messages of kernels without a finite map.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument, NumericalFailure
from kernelcheck.features import ExactFeatureMap, weighted_monomials
from kernelcheck.kernels import (
    Constant,
    Exponential,
    Gaussian,
    Linear,
    Polynomial,
    exp,
    monomial_dim,
    unweighted_monomials,
)
from kernelcheck.testing import assert_feature_map

RNG = np.random.default_rng(11)
X = RNG.normal(size=(5, 3))
Y = RNG.normal(size=(4, 3))
U = unit_roundoff(np.float64)
# Formulas are re-evaluated here in another order: agreement to a few ulp.
RTOL = 64 * U


def _close(a, b):
    return np.allclose(a, b, rtol=RTOL, atol=0)


# The points of the tests over the example kernels (7 x 3 and 5 x 3).
RNG7 = np.random.default_rng(20261129)
X7 = RNG7.normal(size=(7, 3))
Y5 = RNG7.normal(size=(5, 3))


# ---------------------------------------------------------------------------
# Every example map (tests/catalog.py) reproduces its kernel; infinite ones say what to do
# ---------------------------------------------------------------------------


def test_feature_map_reproduces_and_reports_dimension(exact_feature_map):
    k, form = exact_feature_map
    phi = k.features(form)
    assert isinstance(phi, ExactFeatureMap) and phi.exact and phi.kernel == k
    assert phi(X7).shape == (7, phi.output_dim(3)) == (7, k.feature_dim(3, form))
    assert_feature_map(phi, X7, Y5)


def test_infinite_kernels_say_how_to_truncate_or_sample(infinite_kernel):
    k = infinite_kernel
    with pytest.raises(InfiniteFeatureSpace) as info:
        k.features()
    message = str(info.value)
    assert "order=" in message or "random" in message.lower() or "mercer" in message


@pytest.mark.parametrize("d", [1, 2, 3])
def test_feature_dims_are_the_column_counts(exact_feature_map, d):
    k, form = exact_feature_map
    Z = X[:, :d]
    phi = k.features(form)
    P = phi(Z)
    assert P.shape == (5, k.feature_dim(d, form)) == (5, phi.output_dim(d))
    G = k(Z)
    assert np.all(np.abs(P @ P.T - G) <= phi.error_bound(Z) + k.error_bound(Z))


# ---------------------------------------------------------------------------
# Dimensions, rounding counts and values
# ---------------------------------------------------------------------------


def test_feature_dims_closed_forms():
    # symmetric: C(D + m - 1, m) unique monomials; tensor: D ** m ordered products
    assert Polynomial(3).feature_dim(4) == math.comb(6, 3)
    assert Polynomial(3).feature_dim(4, "tensor") == 4**3
    assert Polynomial(2, c=1.0).feature_dim(4) == math.comb(5 + 1, 2)
    assert Polynomial(2, c=1.0).feature_dim(4, "tensor") == 25
    assert exp(Linear(), order=3).feature_dim(4) == math.comb(4 + 3, 3)
    assert exp(Linear(), order=3).feature_dim(4, "tensor") == 1 + 4 + 16 + 64
    assert (Linear() + Constant(1.0)).feature_dim(4) == 5
    assert (Linear() * Linear()).feature_dim(4) == 16
    assert (2.0 * Linear()).feature_dim(4) == 4
    assert Constant(1.0).feature_dim(7) == 1
    assert monomial_dim(4, 3) == math.comb(6, 3) and monomial_dim(1, 0) == 1


def test_feature_ops_compose_through_the_tree():
    """ops: the rounding count per feature entry grows as each node's docstring says."""
    L = Linear()
    assert ExactFeatureMap(L).ops == 0
    assert ExactFeatureMap(Constant(2.0)).ops == 1
    assert ExactFeatureMap(3.0 * L).ops == 2
    assert ExactFeatureMap(L + Constant(2.0)).ops == 1
    assert ExactFeatureMap(L * Constant(2.0)).ops == 2
    assert ExactFeatureMap((L + Constant(2.0)) * (3.0 * L)).ops == 1 + 2 + 1
    assert ExactFeatureMap(L**3).ops == 3 * 0 + 4 * 3
    assert ExactFeatureMap((3.0 * L) ** 2).ops == 2 * 2 + 4 * 2
    assert ExactFeatureMap(exp(L, order=3)).ops == 3 * 0 + 4 * 3 + 4
    assert ExactFeatureMap(exp(3.0 * L, order=2)).ops == 2 * 2 + 4 * 2 + 4
    assert ExactFeatureMap(Polynomial(2, c=1.0)).ops == ExactFeatureMap((L + 1.0) ** 2).ops


def test_feature_map_error_bound_formula():
    k = (Linear() + 1.0) ** 2
    phi = k.features()
    P, Q = phi(X), phi(Y)
    D = P.shape[1]
    expected = gamma(D + 2 * phi.ops) * (1 + gamma(D)) * (np.abs(P) @ np.abs(Q).T)
    assert _close(phi.error_bound(X, Y), expected)
    assert np.array_equal(phi.error_bound(X), phi.error_bound(X, X))


def test_feature_map_values():
    """Features against hand-derived maps (the C8 / C12 formulas)."""
    x = np.array([[2.0, 3.0]])
    # Polynomial(2): [x1^2, sqrt(2) x1 x2, x2^2] (symmetric), [x1x1, x1x2, x2x1, x2x2] (tensor)
    assert np.allclose(Polynomial(2).features()(x), [[4.0, math.sqrt(2) * 6.0, 9.0]])
    assert np.allclose(Polynomial(2).features("tensor")(x), [[4.0, 6.0, 6.0, 9.0]])
    # exp order 2: [1, x1, x2, x1^2/sqrt2, x1x2, x2^2/sqrt2]
    got = exp(Linear(), order=2).features()(x)
    assert np.allclose(got, [[1, 2, 3, 4 / math.sqrt(2), 6, 9 / math.sqrt(2)]])
    got_t = exp(Linear(), order=2).features("tensor")(x)
    assert np.allclose(
        got_t, [[1, 2, 3, 4 / math.sqrt(2), 6 / math.sqrt(2), 6 / math.sqrt(2), 9 / math.sqrt(2)]]
    )
    assert np.allclose((4.0 * Linear()).features()(x), 2.0 * x)
    assert np.allclose(Constant(9.0).features()(x), [[3.0]])
    assert np.allclose((Linear() + Constant(4.0)).features()(x), [[2.0, 3.0, 2.0]])
    assert np.allclose((Linear() * Linear()).features()(x), [[4.0, 6.0, 6.0, 9.0]])
    assert np.array_equal((Linear() ** 0).features()(x), [[1.0]])
    assert np.array_equal((Linear() ** 0).features("tensor")(x), [[1.0]])
    # features copy: writing into the output cannot change the input
    P = Linear().features()(x)
    P[0, 0] = 99.0
    assert x[0, 0] == 2.0


# ---------------------------------------------------------------------------
# Monomial maps
# ---------------------------------------------------------------------------


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


def test_weighted_monomials_against_the_multinomial_theorem():
    Z = RNG.normal(size=(4, 3))
    for m in range(0, 5):
        W = weighted_monomials(Z, m)
        assert W.shape == (4, monomial_dim(3, m))
        assert np.allclose(W @ W.T, (Z @ Z.T) ** m, rtol=1e-13, atol=1e-13)
    # float32 in, float32 out
    assert weighted_monomials(Z.astype(np.float32), 2).dtype == np.float32


def test_unweighted_monomials_are_the_plain_products():
    x = np.array([[2.0, 3.0, 5.0]])
    assert np.array_equal(unweighted_monomials(x, 2), [[4.0, 6.0, 10.0, 9.0, 15.0, 25.0]])
    assert np.array_equal(unweighted_monomials(x, 0), [[1.0]])
    assert np.array_equal(unweighted_monomials(x, 1), x)
    Z = RNG.normal(size=(3, 2))
    U2 = unweighted_monomials(Z, 2)
    # without weights the cross term is short by the multinomial coefficient 2 (C8)
    assert not np.allclose(U2 @ U2.T, (Z @ Z.T) ** 2)


def test_weighted_monomials_overflow_leaks_no_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NumericalFailure):
            weighted_monomials([[1e200, 1.0]], 2)
        with pytest.raises(NumericalFailure):
            unweighted_monomials([[1e200, 1.0]], 2)
        with pytest.raises(NumericalFailure):
            Polynomial(2).features()([[1e200, 1.0]])
        with pytest.raises(NumericalFailure):
            Exponential()([[100.0]])


# ---------------------------------------------------------------------------
# ExactFeatureMap: construction, identity, float32 model, messages
# ---------------------------------------------------------------------------


def test_zero_scale_of_an_infinite_kernel_names_the_kernel_not_a_negative_scale():
    from kernelcheck.errors import InfiniteFeatureSpace

    with pytest.raises(InfiniteFeatureSpace, match=r"^Gaussian\(\) has an infinite feature space"):
        (0.0 * Gaussian()).features()
    assert (0.0 * Linear()).features()(X).shape == (5, 3)


def test_exact_feature_map_construction_identity_and_messages():

    with pytest.raises(InvalidArgument, match=r"^`form` must be one of 'symmetric', 'tensor'"):
        ExactFeatureMap(Linear(), "dense")
    with pytest.raises(InvalidArgument, match=r"^`d` must be >= 1, got 0"):
        Linear().features().output_dim(0)
    a, b = Polynomial(2).features(), Polynomial(2).features()
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Polynomial(2).features("tensor") != Polynomial(3).features("tensor")
    assert a != Polynomial(3).features() and a != "features"
    assert hash(a) != hash(Polynomial(2).features("tensor"))
    assert repr(a) == "(Polynomial(2)).features(form='symmetric')"
    with pytest.raises(NumericalFailure) as info:
        Polynomial(2).features()([[1.0], [1e200]])
    assert str(info.value) == (
        "(Polynomial(2)).features(form='symmetric') overflows float64 at feature 0 of row 1 "
        "(the exact value is beyond the floating-point range); scale the inputs down"
    )


def test_exact_feature_map_error_bound_in_float32():
    k = (Linear() + 1.0) ** 2
    phi = k.features()
    X32 = X.astype(np.float32)
    P = phi(X32)
    D = P.shape[1]
    g = gamma(D + 2 * phi.ops, np.float32) * (1 + gamma(D, np.float32))
    expected = g * (np.abs(P) @ np.abs(P).T)
    assert np.allclose(phi.error_bound(X32), expected, rtol=64 * unit_roundoff(np.float32), atol=0)


def test_huge_feature_map_refused_up_front():
    phi = Polynomial(12).features("tensor")
    with pytest.raises(InvalidArgument, match="GiB"):
        phi(np.ones((10, 64)))


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


BAD_GRAM_CALLS = [
    (lambda: Linear().features(form="full"), "`form` must be one of"),
    (lambda: Linear().feature_dim(0), "`d` must be >= 1"),
    (lambda: (-1.0 * Linear()).features(), "negative"),
    (lambda: unweighted_monomials(X7, -1), "`degree` must be >= 0"),
]


@pytest.mark.parametrize("call, message", BAD_GRAM_CALLS, ids=[m for _, m in BAD_GRAM_CALLS])
def test_bad_input_raises_invalid_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()
