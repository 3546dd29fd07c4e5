"""More unit tests of the kernel objects, exact feature maps and verify.feature_map.

Each test is a relation between two computations or a check against a formula
whose origin is stated: the error bounds against the error models written in
the node docstrings (evaluated here independently, entry by entry), feature
dimensions against counts of the actual feature columns, printing against the
algebra (a printed formula rebuilt and compared), the feature verifier against
a hand-made wrong map.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck._src.kernels import algebra as _k
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import ExactFeatureMap, weighted_monomials
from kernelcheck.kernels import (
    Constant,
    Exp,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
    Power,
    Product,
    Scaled,
    Sum,
    exp,
    kernel_from_function,
    monomial_dim,
    unweighted_monomials,
)
from kernelcheck.testing import assert_feature_map

RNG = np.random.default_rng(11)
X = RNG.normal(size=(5, 3))
Y = RNG.normal(size=(4, 3))
U = unit_roundoff(np.float64)
ETA = float(np.finfo(np.float64).smallest_subnormal)
# Formulas are re-evaluated here in another order: agreement to a few ulp.
RTOL = 64 * U


def _close(a, b):
    return np.allclose(a, b, rtol=RTOL, atol=0)


# ---------------------------------------------------------------------------
# Error bounds: the node docstrings' error models, evaluated independently
# ---------------------------------------------------------------------------


def _linear_err(X, Y):
    d = X.shape[1]
    g = gamma(d)
    return g * (1 + g) * (np.abs(X) @ np.abs(Y).T) + d * ETA


def test_linear_error_bound_formula():
    assert _close(Linear().error_bound(X, Y), _linear_err(X, Y))
    assert np.array_equal(Linear().error_bound(X), Linear().error_bound(X, X))


def test_constant_and_scaled_and_sum_error_bound_formulas():
    assert np.array_equal(Constant(2.5).error_bound(X, Y), np.zeros((5, 4)))
    G1, E1 = X @ Y.T, _linear_err(X, Y)
    # Scaled: |c| E1 (1 + 2u) + u |G| + eta
    c = -1.5
    G = c * G1
    assert _close(
        Scaled(c, Linear()).error_bound(X, Y), abs(c) * E1 * (1 + 2 * U) + U * np.abs(G) + ETA
    )
    # Sum: E1 + E2 + u |G| (1 + 2u)
    G = G1 + 0.75
    assert _close((Linear() + 0.75).error_bound(X, Y), E1 + U * np.abs(G) * (1 + 2 * U))


def test_product_error_bound_formula():
    G1, E1 = X @ Y.T, _linear_err(X, Y)
    G2 = np.full_like(G1, 3.0)
    G = G1 * G2
    expected = (np.abs(G1) * 0 + np.abs(G2) * E1 + E1 * 0) * (1 + 4 * U) + U * np.abs(G) + ETA
    assert _close((Linear() * Constant(3.0)).error_bound(X, Y), expected)


@pytest.mark.parametrize("m", [0, 1, 2, 3, 5])
def test_power_error_bound_formula(m):
    G1, E1 = X @ Y.T, _linear_err(X, Y)
    got = (Linear() ** m).error_bound(X, Y)
    if m == 0:
        assert np.array_equal(got, np.zeros((5, 4)))
        return
    ops = {1: 0, 2: 1, 3: 2, 5: 3}[m]  # multiplications of binary exponentiation
    prop = m * (np.abs(G1) + E1) ** (m - 1) * E1
    expected = prop * (1 + gamma(ops + 3)) + gamma(ops + 1) * np.abs(G1**m) + (ops + 1) * ETA
    assert _close(got, expected)


@pytest.mark.parametrize("m", range(0, 9))
def test_int_power_value_and_count(m):
    G = RNG.normal(size=(3, 3))
    val, ops = _k._int_power(G, m)
    assert np.allclose(val, G**m, rtol=8 * m * U + U, atol=0)
    # binary exponentiation: floor(log2 m) squarings + (popcount(m) - 1) products
    expected_ops = 0 if m == 0 else (m.bit_length() - 1) + (bin(m).count("1") - 1)
    assert ops == expected_ops


def test_polynomial_is_power_of_linear_plus_constant():
    for degree, c in ((0, 0.0), (1, 0.0), (3, 0.0), (2, 1.5), (4, 0.25)):
        k = Polynomial(degree, c=c)
        ref = (Linear() + Constant(c)) ** degree if c else Linear() ** degree
        assert np.array_equal(k(X, Y), ref(X, Y))
        assert np.array_equal(k.error_bound(X, Y), ref.error_bound(X, Y))
        assert k.feature_dim(3) == ref.feature_dim(3)
        assert np.array_equal(k.features()(X), ref.features()(X))
        assert k.features().ops == ref.features().ops


def test_exponential_error_bound_formula_and_equivalence():
    s = 0.3
    G1 = s * (X @ Y.T)
    E1 = abs(s) * _linear_err(X, Y) * (1 + 2 * U) + U * np.abs(G1) + ETA
    G = np.exp(G1)
    expected = np.exp(G1 + E1) * (np.expm1(E1) + 2 * U) * (1 + 4 * U) + ETA
    assert _close(Exponential(s).error_bound(X, Y), expected)
    assert np.array_equal(Exponential(s)(X, Y), G)
    assert np.array_equal(Exponential()(X, Y), np.exp(X @ Y.T))
    assert np.array_equal(Exponential().error_bound(X, Y), exp(Linear()).error_bound(X, Y))


@pytest.mark.parametrize("M", [0, 1, 2, 4])
def test_truncated_exp_value_and_error_bound_formula(M):
    G1, E1 = X @ Y.T, _linear_err(X, Y)

    def taylor(g, order):
        return sum(g**j / math.factorial(j) for j in range(order + 1))

    k = exp(Linear(), order=M)
    assert _close(k(X, Y), taylor(G1, M))
    if M == 0:
        assert np.array_equal(k.error_bound(X, Y), np.zeros((5, 4)))
        return
    A = np.abs(G1)
    expected = (
        taylor(A + E1, M - 1) * E1 * (1 + gamma(3 * M + 2))
        + gamma(3 * M + 1) * taylor(A, M)
        + 3 * M * ETA
    )
    assert _close(k.error_bound(X, Y), expected)


def _sqdist_err(X, Y):
    d = X.shape[1]
    nx, ny = (X**2).sum(1), (Y**2).sum(1)
    e = gamma(d + 3) * (1 + gamma(d)) * (nx[:, None] + ny[None, :] + 2 * np.abs(X) @ np.abs(Y).T)
    d2 = np.maximum(nx[:, None] + ny[None, :] - 2 * X @ Y.T, 0)
    return d2, e + 3 * d * ETA


def test_gaussian_error_bound_formula():
    ell = 0.8
    d2, e = _sqdist_err(X, Y)
    a = 0.5 / ell**2
    G = np.exp(-a * d2)
    expected = np.exp(-a * np.maximum(d2 - e, 0)) * (a * e) * (1 + 4 * U) + 4 * U * G + 2 * ETA
    assert _close(Gaussian(ell)(X, Y), G)
    assert _close(Gaussian(ell).error_bound(X, Y), expected)


def test_laplacian_error_bound_formula():
    ell = 1.7
    Z = np.vstack([X, X[:1]])  # a repeated point: distance exactly 0
    d2, e = _sqdist_err(Z, Z)
    r = np.sqrt(d2)
    with np.errstate(divide="ignore"):
        er = np.minimum(np.sqrt(e), np.where(d2 > 0, e / np.where(d2 > 0, r, 1), np.inf))
    er = er * (1 + 4 * U) + 2 * U * r
    G = np.exp(-r / ell)
    expected = np.exp(-np.maximum(r - er, 0) / ell) * er / ell * (1 + 4 * U) + 4 * U * G + 2 * ETA
    assert _close(Laplacian(ell)(Z), G)
    assert _close(Laplacian(ell).error_bound(Z), expected)
    # at distance 0 the bound uses sqrt(e): finite, and covers the computed 1
    assert np.isfinite(Laplacian(ell).error_bound(Z)).all()
    assert Laplacian(ell)(Z)[0, -1] == 1.0


def test_sqdist_is_clipped_at_zero():
    Z = np.array([[1e8, 1.0], [1e8, 1.0 + 2**-20]])
    d2 = _k._DistanceKernel._sqdist(Z, Z)
    d2e, _ = _k._DistanceKernel._sqdist_err(Z, Z)
    assert (d2 >= 0).all() and (d2e >= 0).all()
    assert np.array_equal(d2, d2e)


def test_error_bounds_hold_against_mpmath_for_composites():
    """The bound covers the difference to a 50-digit evaluation (the node models' purpose)."""
    kernels = [
        0.5 * Gaussian(0.9) + Laplacian(1.3) * Linear(),
        exp(0.2 * Linear() + 1.0, order=5) * Constant(2.0),
        (Polynomial(2, c=0.5) + Exponential(0.1)) ** 3,
        -1.0 * Linear() + exp(Gaussian()),
    ]
    for k in kernels:
        exact = np.array(k.gram_mp(X, Y, dps=50).tolist(), dtype=float)
        assert np.all(np.abs(k(X, Y) - exact) <= k.error_bound(X, Y) + U * np.abs(exact)), k


def test_error_bound_float32_uses_float32_roundoff():
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    g = gamma(3, np.float32)
    eta32 = float(np.finfo(np.float32).smallest_subnormal)
    expected = g * (1 + g) * (np.abs(X32) @ np.abs(Y32).T) + 3 * eta32
    assert np.allclose(Linear().error_bound(X32, Y32), expected, rtol=1e-6)
    assert Linear().error_bound(X32, Y32).dtype == np.float32


# ---------------------------------------------------------------------------
# Feature maps: dimensions are the column counts, ops grow with the tree
# ---------------------------------------------------------------------------

FINITE = [
    Linear(),
    Constant(4.0),
    Polynomial(3),
    Polynomial(2, c=2.0),
    Linear() + Constant(1.0),
    3.0 * Linear(),
    Linear() * Polynomial(2),
    (Linear() + 1.0) ** 3,
    exp(Linear(), order=3),
    exp(0.5 * Linear() + 1.0, order=2),
    Linear() ** 0,
    exp(Linear(), order=0),
    (Linear() ** 2) ** 2,
    exp(Polynomial(2), order=2),
]


@pytest.mark.parametrize("k", FINITE, ids=repr)
@pytest.mark.parametrize("form", ["symmetric", "tensor"])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_feature_dims_are_the_column_counts(k, form, d):
    Z = X[:, :d]
    phi = k.features(form)
    P = phi(Z)
    assert P.shape == (5, k.feature_dim(d, form)) == (5, phi.output_dim(d))
    G = k(Z)
    assert np.all(np.abs(P @ P.T - G) <= phi.error_bound(Z) + k.error_bound(Z))


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


# ---------------------------------------------------------------------------
# Algebra, printing, identity
# ---------------------------------------------------------------------------

PRINTED = [
    (Linear(), "Linear()"),
    (Constant(2.0), "Constant(2.0)"),
    (Polynomial(3), "Polynomial(3)"),
    (Polynomial(3, c=0.5), "Polynomial(3, c=0.5)"),
    (Exponential(), "Exponential()"),
    (Exponential(0.5), "Exponential(scale=0.5)"),
    (Gaussian(), "Gaussian()"),
    (Gaussian(2.0), "Gaussian(lengthscale=2.0)"),
    (Laplacian(0.5), "Laplacian(lengthscale=0.5)"),
    (Laplacian(), "Laplacian()"),
    (Linear() + Constant(1.0), "Linear() + Constant(1.0)"),
    (2.0 * Linear(), "2.0 * Linear()"),
    (-2.0 * Linear(), "(-2.0) * Linear()"),
    (0.0 * Linear(), "0.0 * Linear()"),
    (2.0 * (Linear() + 1.0), "2.0 * (Linear() + Constant(1.0))"),
    (2.0 * Linear() ** 2, "2.0 * Linear() ** 2"),
    (Linear() * Gaussian(), "Linear() * Gaussian()"),
    (Linear() * (Linear() * Gaussian()), "Linear() * (Linear() * Gaussian())"),
    ((Linear() * Gaussian()) * Linear(), "Linear() * Gaussian() * Linear()"),
    (Linear() + (Linear() + Gaussian()), "Linear() + (Linear() + Gaussian())"),
    ((Linear() + Gaussian()) + Linear(), "Linear() + Gaussian() + Linear()"),
    ((Linear() + 1.0) ** 2, "(Linear() + Constant(1.0)) ** 2"),
    ((2.0 * Linear()) ** 2, "(2.0 * Linear()) ** 2"),
    ((Linear() ** 2) ** 3, "(Linear() ** 2) ** 3"),
    (Linear() ** 2 * Linear(), "Linear() ** 2 * Linear()"),
    (exp(Linear()), "exp(Linear())"),
    (exp(Linear(), order=3), "exp(Linear(), order=3)"),
    (exp(Linear() + 1.0, order=0), "exp(Linear() + Constant(1.0), order=0)"),
]


@pytest.mark.parametrize("k, text", PRINTED, ids=[t for _, t in PRINTED])
def test_repr_is_the_formula_and_rebuilds_an_equal_kernel(k, text):
    assert repr(k) == text
    namespace = {
        "Linear": Linear,
        "Constant": Constant,
        "Polynomial": Polynomial,
        "Exponential": Exponential,
        "Gaussian": Gaussian,
        "Laplacian": Laplacian,
        "exp": exp,
    }
    rebuilt = eval(text, namespace)  # the printed formula is valid kernelcheck code
    assert rebuilt == k and hash(rebuilt) == hash(k)
    assert np.array_equal(rebuilt(X, Y), k(X, Y))


def test_equality_is_structural():
    assert Linear() == Linear() and Linear() != Constant(1.0)
    assert Polynomial(2, c=1.0) != Polynomial(2, c=0.5) != Polynomial(3, c=0.5)
    assert Gaussian() != Laplacian()  # same parameters, different type
    assert Linear() + 1.0 == Sum(Linear(), Constant(1.0)) != Sum(Constant(1.0), Linear())
    assert 2.0 * Linear() == Scaled(2.0, Linear()) == Linear() * 2.0
    assert Linear() * Gaussian() == Product(Linear(), Gaussian())
    assert Linear() ** 2 == Power(Linear(), 2) != Power(Linear(), 3)
    assert exp(Linear(), order=2) == Exp(Linear(), 2) != Exp(Linear(), None)
    assert 1.0 + Linear() == Sum(Constant(1.0), Linear())
    assert len({Linear(), Linear(), Constant(1.0), Constant(1.0)}) == 2
    assert Linear() != "Linear()"


def test_nodes_are_immutable():
    k = Polynomial(2, c=1.0)
    with pytest.raises(AttributeError, match="^Polynomial is immutable$"):
        k.degree = 3
    with pytest.raises(AttributeError, match="^Polynomial is immutable$"):
        del k.c
    assert k.degree == 2


def test_has_finite_features_and_supports_mp_through_the_tree():
    f = kernel_from_function(lambda x, y: 1.0)
    fm = kernel_from_function(lambda x, y: 1.0, mp_function=lambda x, y: 1)
    assert not f.supports_mp and fm.supports_mp
    assert not (Linear() + f).supports_mp and (Linear() + fm).supports_mp
    assert (Linear() * 2.0).supports_mp
    assert Constant(0.0).has_finite_features and not Constant(-0.5).has_finite_features
    assert (0.0 * Linear()).has_finite_features and not (-1.0 * Linear()).has_finite_features
    assert not (2.0 * Gaussian()).has_finite_features
    assert not (Linear() + Gaussian()).has_finite_features
    assert not (Gaussian() + Linear()).has_finite_features
    assert not (Linear() * Gaussian()).has_finite_features
    assert not (Gaussian() * Linear()).has_finite_features
    assert not (Gaussian() ** 2).has_finite_features and (Linear() ** 2).has_finite_features
    assert not exp(Linear()).has_finite_features and exp(Linear(), order=1).has_finite_features
    assert not exp(Gaussian(), order=1).has_finite_features
    assert not Exponential().has_finite_features and not Gaussian().has_finite_features
    assert not f.has_finite_features


def test_check_dim_reaches_every_child():
    seen = []

    class Spy(Linear):
        __slots__ = ()

        def _check_dim(self, d):
            seen.append(d)

    for k in (Spy() + Linear(), 2.0 * Spy(), Linear() * Spy(), Spy() ** 2, exp(Spy())):
        seen.clear()
        k(X)
        k.error_bound(X)
        k.gram_mp(X[:1], dps=20)
        assert seen == [3, 3, 3], repr(k)


def test_constant_gram_shape_dtype_and_mp():
    G = Constant(-2.0)(X, Y)
    assert G.shape == (5, 4) and (G == -2.0).all() and G.dtype == np.float64
    assert Constant(1.0)(X.astype(np.float32)).dtype == np.float32
    M = Constant(0.1).gram_mp(X[:2], dps=30)
    assert M.rows == 2 and M.cols == 2 and M[0, 1] == 0.1


def test_gram_mp_values_and_dps():
    import mpmath

    k = Gaussian(0.5) + exp(Linear(), order=2) * Laplacian() + (-1.0) * Polynomial(2, c=1.0)
    M = k.gram_mp(X[:2], Y[:3], dps=40)
    assert (M.rows, M.cols) == (2, 3)
    for i in range(2):
        for j in range(3):
            with mpmath.workdps(40):
                x = [mpmath.mpf(float(v)) for v in X[i]]
                y = [mpmath.mpf(float(v)) for v in Y[j]]
                dot = mpmath.fdot(x, y)
                d2 = mpmath.fsum((a - b) ** 2 for a, b in zip(x, y))
                ref = (
                    mpmath.exp(-d2 / (2 * mpmath.mpf(0.25)))
                    + (1 + dot + dot**2 / 2) * mpmath.exp(-mpmath.sqrt(d2))
                    - (dot + 1) ** 2
                )
                assert abs(M[i, j] - ref) <= mpmath.mpf(10) ** -35 * (1 + abs(ref))
    with mpmath.workdps(60):
        x0 = [mpmath.mpf(float(v)) for v in X[0]]
        ref = mpmath.exp(mpmath.mpf(0.5) * mpmath.fdot(x0, x0))
        assert abs(Exponential(0.5).gram_mp(X[:1], dps=60)[0, 0] - ref) < mpmath.mpf(10) ** -55


def test_function_kernels_scalar_and_vectorized_agree():
    f = kernel_from_function(lambda x, y: float(np.exp(-np.sum((x - y) ** 2))), name="rbf")
    fv = kernel_from_function(
        lambda a, b: np.exp(-np.sum((a - b) ** 2, axis=-1)), vectorized=True, name="rbfv"
    )
    assert repr(f) == "kernel_from_function(rbf)" and repr(fv) == "kernel_from_function(rbfv)"
    assert np.allclose(f(X, Y), fv(X, Y), rtol=4 * U, atol=0)
    assert np.allclose(f(X, Y), Gaussian(math.sqrt(0.5))(X, Y), rtol=1e-13)
    assert f(X.astype(np.float32)).dtype == np.float32
    assert fv(X.astype(np.float32)).dtype == np.float32
    ints = kernel_from_function(
        lambda a, b: np.ones((a.shape[0], b.shape[1]), int), vectorized=True
    )
    assert ints(X).dtype == np.float64 and (ints(X) == 1).all()

    def named(x, y):
        return 0.0

    assert repr(kernel_from_function(named)) == "kernel_from_function(named)"
    assert kernel_from_function(named) == kernel_from_function(named)
    assert kernel_from_function(named) != kernel_from_function(named, vectorized=True)
    mp = kernel_from_function(named, mp_function=lambda x, y: x[0] * y[0])
    M = mp.gram_mp(X[:2], dps=20)
    assert abs(M[0, 1] - X[0, 0] * X[1, 0]) < 1e-15


def test_algebra_promotes_numbers_and_refuses_others():
    assert 1 + Linear() == Sum(Constant(1.0), Linear())
    assert Linear() + 2 == Sum(Linear(), Constant(2.0))
    assert np.float64(2.0) * Linear() == Scaled(2.0, Linear())
    assert Linear().__mul__("a") is NotImplemented
    assert Linear().__rmul__("a") is NotImplemented
    assert Linear().__rmul__(True) is NotImplemented
    assert Linear().__mul__(np.bool_(True)) is NotImplemented
    with pytest.raises(InvalidArgument, match=r"^`left` must be a Kernel or a real number"):
        Sum("a", Linear())
    with pytest.raises(InvalidArgument, match=r"^`right` must be a Kernel or a real number"):
        Product(Linear(), None)
    with pytest.raises(InvalidArgument, match=r"^`kernel` must be a Kernel or a real number"):
        Power([1], 2)
    with pytest.raises(InvalidArgument, match=r"^`c` must be a real number"):
        Scaled("2", Linear())
    with pytest.raises(InvalidArgument, match=r"^`right` must be a Kernel or a real number"):
        Sum(Linear(), "a")
    with pytest.raises(InvalidArgument, match=r"^`left` must be a Kernel or a real number"):
        Product("a", Linear())
    with pytest.raises(InvalidArgument, match=r"^`kernel` must be a Kernel or a real number"):
        Scaled(2.0, "a")
    with pytest.raises(InvalidArgument, match=r"^`dps` must be <= 100000, got 100001"):
        Linear().gram_mp(X, dps=100001)
    with pytest.raises(
        InvalidArgument,
        match=r"^the monomial index table would need "
        r"8391423040 entries \(62\.5 GiB\)",
    ):
        unweighted_monomials(np.ones((1, 7)), 64)  # C(70, 64) * 64 = 8391423040 indices
    assert unweighted_monomials(np.ones((2, 3), np.float32), 0).dtype == np.float32
    assert unweighted_monomials(np.ones((2, 3), np.float32), 2).dtype == np.float32
    assert _k.MAX_ORDER == 64
    assert Power(Linear(), 64).m == 64 and Exp(Linear(), 64).order == 64


# ---------------------------------------------------------------------------
# verify.feature_map: verdicts, report fields and text
# ---------------------------------------------------------------------------


def test_feature_map_report_fields_for_a_correct_map():
    k = Polynomial(2, c=1.0)
    phi = k.features()
    report = verify.feature_map(phi, X, Y)
    assert report.passed
    assert (report.n, report.m, report.d, report.D) == (5, 4, 3, k.feature_dim(3))
    F, G = phi(X) @ phi(Y).T, k(X, Y)
    assert report.max_abs_error == float(np.abs(F - G).max())
    i, j = report.worst_index
    assert report.kernel_value == G[i, j] and report.feature_value == F[i, j]
    tol = k.error_bound(X, Y) + phi.error_bound(X, Y)
    assert np.isclose(report.tolerance.value, tol.max(), rtol=RTOL)
    ratio = np.abs(F - G) / tol
    assert np.isclose(report.worst_ratio, ratio.max(), rtol=RTOL) and report.worst_ratio <= 1
    assert report.kernel == repr(k) and report.feature_map == repr(phi)
    assert f"D={report.D}, ops={phi.ops}" in report.tolerance.source
    assert str(report).startswith(f"{phi!r} reproduces {k!r} on 5x4 pairs (D={report.D})")
    assert report.to_dict()["passed"] is True
    same = verify.feature_map(phi, X)
    assert (same.n, same.m) == (5, 5) and same.passed


def test_feature_map_report_for_a_wrong_map_and_its_assert_twin():
    def doubled(Z):
        return 2.0 * np.asarray(Z)

    report = verify.feature_map(doubled, X, Y, kernel=Linear())
    assert not report.passed
    F, G = 4.0 * (X @ Y.T), X @ Y.T
    assert report.max_abs_error == float(np.abs(F - G).max())
    i, j = report.worst_index
    assert report.feature_value == F[i, j] and report.kernel_value == G[i, j]
    assert report.worst_ratio > 1
    assert report.feature_map == "doubled"
    assert str(report).startswith("doubled does NOT reproduce Linear() on 5x4 pairs (D=3)")
    # default rounding count for a user map: 16 operations per entry
    assert "ops=16" in report.tolerance.source
    assert (
        "ops=3" in verify.feature_map(doubled, X, kernel=Linear(), feature_ops=3).tolerance.source
    )
    with pytest.raises(AssertionError, match=r"^doubled does NOT reproduce Linear\(\)"):
        assert_feature_map(doubled, X, kernel=Linear())
    ok = assert_feature_map(Linear().features(), X, Y)
    assert ok.passed


def test_feature_map_zero_tolerance_entries():
    """Zero features and a zero kernel: tolerance 0, error 0, ratio 0 (not NaN)."""
    Z = np.zeros((2, 2))
    report = verify.feature_map(Linear().features(), Z)
    assert report.passed and report.worst_ratio == 0.0 and report.max_abs_error == 0.0


def test_feature_map_with_an_explicit_kernel_overrides_the_maps_own():
    phi = Polynomial(2).features()
    assert not verify.feature_map(phi, X, kernel=Polynomial(2, c=1.0)).passed
    assert verify.feature_map(phi, X, kernel=Linear() ** 2).passed


# ---------------------------------------------------------------------------
# Distance kernels near coincident points, float32 models, odd callables
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_distance_kernel_bounds_at_close_and_coincident_points(dtype):
    """Rows at distance 0 and below 1 exercise the clipping and ratio branches of the models."""
    Z = np.vstack([0.05 * X, 0.05 * X[:2]]).astype(dtype)  # squared distances < 1, some 0
    u = unit_roundoff(dtype)
    eta = float(np.finfo(dtype).smallest_subnormal)
    d = Z.shape[1]
    Zf = Z.astype(np.float64)
    nx = (Zf**2).sum(1)
    e = (
        gamma(d + 3, dtype)
        * (1 + gamma(d, dtype))
        * (nx[:, None] + nx[None, :] + 2 * np.abs(Zf) @ np.abs(Zf).T)
        + 3 * d * eta
    )
    d2 = np.maximum(nx[:, None] + nx[None, :] - 2 * Zf @ Zf.T, 0)
    d2[np.arange(len(Z)), np.arange(len(Z))] = 0.0
    d2[-2:, :2] = d2[:2, -2:] = np.where(np.eye(2) > 0, 0.0, d2[:2, -2:])
    rtol = 64 * u
    ell = 0.6
    a = 0.5 / ell**2
    G = np.exp(-a * d2)
    expected = np.exp(-a * np.maximum(d2 - e, 0)) * (a * e) * (1 + 4 * u) + 4 * u * G + 2 * eta
    got = Gaussian(ell).error_bound(Z)
    assert got.dtype == dtype
    assert np.allclose(got, expected, rtol=rtol, atol=2 * eta)
    r = np.sqrt(d2)
    with np.errstate(divide="ignore"):
        ratio = np.where(d2 > 0, e / np.where(d2 > 0, r, 1.0), np.inf)
    er = np.minimum(np.sqrt(e), ratio) * (1 + 4 * u) + 2 * u * r
    Gl = np.exp(-r / ell)
    expected_l = (
        np.exp(-np.maximum(r - er, 0) / ell) * er / ell * (1 + 4 * u) + 4 * u * Gl + 2 * eta
    )
    got_l = Laplacian(ell).error_bound(Z)
    assert got_l.dtype == dtype
    assert np.allclose(got_l, expected_l, rtol=rtol, atol=2 * eta)


def test_zero_scale_of_an_infinite_kernel_names_the_kernel_not_a_negative_scale():
    from kernelcheck.errors import InfiniteFeatureSpace

    with pytest.raises(InfiniteFeatureSpace, match=r"^Gaussian\(\) has an infinite feature space"):
        (0.0 * Gaussian()).features()
    assert (0.0 * Linear()).features()(X).shape == (5, 3)


def test_function_kernel_of_a_callable_without_a_name():
    import functools

    f = functools.partial(lambda x, y, s: s * float(x @ y), s=2.0)
    k = kernel_from_function(f)
    assert repr(k) == "kernel_from_function(f)"
    assert np.allclose(k(X, Y), 2.0 * X @ Y.T, rtol=4 * U)


def test_weighted_monomials_overflow_leaks_no_warning():
    import warnings

    from kernelcheck.errors import NumericalFailure

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


def test_exact_feature_map_construction_identity_and_messages():
    from kernelcheck.errors import NumericalFailure

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
    assert np.allclose(phi.error_bound(X32), expected, rtol=64 * unit_roundoff(np.float32))
