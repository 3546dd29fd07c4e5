"""Unit tests of the kernel algebra (claims C4, C7, C8, C9, C12): nodes, error bounds, printing.

Each test is a relation between two computations or a check against a formula
whose origin is stated: the error bounds against the error models written in
the node docstrings (evaluated here independently, entry by entry) and
against 50-digit mpmath Grams, printing against the algebra (a printed
formula rebuilt and compared), equality and immutability, user-function
kernels, and bad input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck._src.kernels import leaves as _leaves
from kernelcheck._src.kernels import monomials as _monomials
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument, NumericalFailure
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
    unweighted_monomials,
)

RNG = np.random.default_rng(11)
X = RNG.normal(size=(5, 3))
Y = RNG.normal(size=(4, 3))
U = unit_roundoff(np.float64)
ETA = float(np.finfo(np.float64).smallest_subnormal)
# Formulas are re-evaluated here in another order: agreement to a few ulp.
RTOL = 64 * U


def _close(a, b):
    return np.allclose(a, b, rtol=RTOL, atol=0)


# The points of the tests over the example kernels (7 x 3 and 5 x 3).
RNG7 = np.random.default_rng(20261129)
X7 = RNG7.normal(size=(7, 3))
Y5 = RNG7.normal(size=(5, 3))


# ---------------------------------------------------------------------------
# Every example kernel (tests/catalog.py): Gram shape, dtype, symmetry, mpmath, pickling
# ---------------------------------------------------------------------------


def test_gram_shape_symmetry_and_dtype(builtin_kernel):
    k = builtin_kernel
    G = k(X7, Y5)
    assert G.shape == (7, 5) and G.dtype == np.float64
    S = k(X7)
    # The symmetric Gram of a dot-product kernel is exactly symmetric only when
    # the GEMM is; the gap is bounded by twice the error bound.
    assert np.all(np.abs(S - S.T) <= 2 * k.error_bound(X7))
    assert k(X7.astype(np.float32), Y5.astype(np.float32)).dtype == np.float32


def test_gram_agrees_with_mpmath_within_error_bound(builtin_kernel):
    """The bound covers the difference to a 40- and a 50-digit evaluation (the node models'
    purpose): on the 7 x 5 block, and on the 5 x 4 block of the error-bound formula tests."""
    k = builtin_kernel
    exact = np.array(k.gram_mp(X7, Y5, dps=40).tolist(), dtype=float)
    assert np.all(
        np.abs(k(X7, Y5) - exact) <= k.error_bound(X7, Y5) + np.finfo(float).eps / 2 * np.abs(exact)
    )
    exact = np.array(k.gram_mp(X, Y, dps=50).tolist(), dtype=float)
    assert np.all(np.abs(k(X, Y) - exact) <= k.error_bound(X, Y) + U * np.abs(exact)), k


def test_inputs_are_not_modified(example_kernel):
    k = example_kernel
    A = X7.copy()
    A.setflags(write=False)
    k(A)
    if k.has_finite_features:
        k.features()(A)
    assert np.array_equal(A, X7)


def test_kernels_pickle_and_stay_immutable(example_kernel):
    """Kernels travel to process pools and Dask workers by pickle."""
    import copy
    import pickle

    k = example_kernel
    k2 = pickle.loads(pickle.dumps(k))
    assert k2 == k and repr(k2) == repr(k)
    assert np.array_equal(k2(X7, Y5), k(X7, Y5))
    assert copy.deepcopy(k) == k
    with pytest.raises(AttributeError):
        k2.anything = 1


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
    val, ops = _monomials.int_power(G, m)
    assert np.allclose(val, G**m, rtol=8 * m * U + U, atol=0)
    # binary exponentiation: floor(log2 m) squarings + (popcount(m) - 1) products
    expected_ops = 0 if m == 0 else (m.bit_length() - 1) + (bin(m).count("1") - 1)
    assert ops == expected_ops


def _whole_array_power(G, m):
    """Binary exponentiation over whole arrays, as the rounding count reads."""
    result, base = None, G
    while True:
        if m & 1:
            result = base.copy() if result is None else result * base
        m >>= 1
        if not m:
            return result
        base = base * base


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("m", [1, 2, 3, 6, 7, 13])
def test_int_power_by_blocks_is_the_whole_array_power_bit_for_bit(monkeypatch, m, owned):
    """Each block runs the same products in the same order, whatever the block size
    (7 entries here: blocks end mid-row and the last one is partial), the input's
    layout (a transposed view) or ownership; an input not handed over is untouched."""
    monkeypatch.setattr(_monomials, "POWER_BLOCK", 7)
    for G in (RNG.normal(size=(5, 9)), RNG.normal(size=(9, 5)).T, RNG.normal(size=(2, 3, 4))):
        want = _whole_array_power(G, m)
        before = G.copy()
        got, _ = _monomials.int_power(G.copy() if owned else G, m, owned=owned)
        assert np.array_equal(got, want)
        assert np.array_equal(G, before)


def test_a_sum_s_bound_is_its_formula_bit_for_bit_with_a_constant_side_as_a_scalar():
    """``E1 + E2 + (u |G|)(1 + 2u)``: a constant side adds its value as a scalar and its
    error, exactly 0, changes nothing; the bound of the power node above it reads its
    children's arrays and writes only its own."""
    c = 1.5
    G1, E1 = Linear()(X, Y), Linear().error_bound(X, Y)
    G = G1 + c
    want = E1 + 0.0 + U * np.abs(G) * (1 + 2 * U)
    for k in (Linear() + Constant(c), Constant(c) + Linear()):
        assert np.array_equal(k(X, Y), G)
        assert np.array_equal(k.error_bound(X, Y), want)
    two = Linear() + Gaussian(0.7)
    G2, E2 = Gaussian(0.7)(X, Y), Gaussian(0.7).error_bound(X, Y)
    want2 = E1 + E2 + U * np.abs(G1 + G2) * (1 + 2 * U)
    assert np.array_equal(two.error_bound(X, Y), want2)


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


def _sqdist_err(X, Y, dtype=np.float64):
    """The distance rule of the docstring: the GEMM form, and the differences where
    ``d2 <= 2 gamma_(d+3) (|x|^2 + |y|^2)`` (cancellation), each with its error."""
    d = X.shape[1]
    eta = float(np.finfo(dtype).smallest_subnormal)
    nx, ny = (X**2).sum(1), (Y**2).sum(1)
    scale = nx[:, None] + ny[None, :]
    e = gamma(d + 3, dtype) * (1 + gamma(d, dtype)) * (scale + 2 * np.abs(X) @ np.abs(Y).T)
    e = e + 3 * d * eta
    d2 = np.maximum(scale - 2 * X @ Y.T, 0)
    doubtful = d2 <= 2 * gamma(d + 3, dtype) * scale
    direct = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    d2 = np.where(doubtful, direct, d2)
    e = np.where(doubtful, gamma(d + 2, dtype) * d2 + 3 * d * eta, e)
    return d2, e


def test_gaussian_error_bound_formula():
    ell = 0.8
    d2, e = _sqdist_err(X, Y)
    a = 0.5 / ell**2
    G = np.exp(-a * d2)
    expected = np.exp(-a * np.maximum(d2 - e, 0)) * (a * e) * (1 + 4 * U) + 4 * U * G + 2 * ETA
    assert _close(Gaussian(ell)(X, Y), G)
    assert _close(Gaussian(ell).error_bound(X, Y), expected)


def test_far_points_leave_the_two_eta_of_the_gaussian_bound():
    """Points 40 apart (exponent 800): the kernel underflows to exactly 0, the first term
    of the bound, ``exp(-t(d2 - e_d2)) t(e_d2)``, with it, and ``4u k`` is 0, so what is
    left is the ``2 eta`` of the docstring's model (the exponentials' underflow), exactly."""
    x, y = np.zeros((1, 2)), np.array([[40.0, 0.0]])
    assert Gaussian()(x, y)[0, 0] == 0.0
    assert Gaussian().error_bound(x, y)[0, 0] == 2 * ETA


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


def test_a_distance_its_gemm_bound_cannot_vouch_for_is_recomputed_from_the_differences():
    """The threshold of the distance rule, ``d2 <= 2 gamma_(d+3) S`` (``S = |x|^2 + |y|^2``):
    ``x = e1``, ``y = e1 + 2^-25 (e2 + e3)`` has ``d2 = 2^-49`` between ``gamma S`` and
    ``2 gamma S``, computed exactly by the GEMM form, whose bound ``e_d2`` (2.7e-15) still
    exceeds it (``2 |x| . |y|`` is ``S`` here), so the GEMM form cannot vouch for one
    digit: the entry comes from the differences, with their bound ``gamma_(d+2) d2 +
    3 d eta``.  A threshold of ``gamma S`` would keep the GEMM's bound, and the
    Gaussian's bound there would be 2.5 times as large."""
    x, y = np.array([[1.0, 0.0, 0.0]]), np.array([[1.0, 2.0**-25, 2.0**-25]])
    d, d2, S = 3, 2.0**-49, 2.0 + 2.0**-49
    assert gamma(d + 3) * S < d2 <= 2 * gamma(d + 3) * S
    e_gemm = gamma(d + 3) * (1 + gamma(d)) * (S + 2.0) + 3 * d * ETA
    assert e_gemm > d2
    got, err = _leaves._DistanceKernel._sqdist_err(x, y)
    assert got[0, 0] == d2
    assert err[0, 0] == gamma(d + 2) * d2 + 3 * d * ETA
    t = 0.5 * d2  # the Gaussian's exponent at lengthscale 1
    bound = Gaussian().error_bound(x, y)[0, 0]
    assert bound == pytest.approx(0.5 * err[0, 0] * (1 + 4 * U) + 4 * U * math.exp(-t) + 2 * ETA)
    assert bound < 0.5 * e_gemm


@pytest.mark.parametrize("block", [1, 7, 1 << 17])
def test_squared_distances_by_blocks_of_rows_are_the_same_bit_for_bit(monkeypatch, block):
    """The distances and their bounds are finished a block of rows at a time (one row,
    blocks ending mid-way, one block); every entry gets the same operations in the same
    order, so the results are those of one block, bit for bit, with repeated and
    nearly repeated points (recomputed from their differences) among them."""
    Z = np.vstack([X, X[:2], X[:1] + 1e-9, Y])
    whole = _leaves._DistanceKernel._sqdist_err(Z, Z[3:])
    monkeypatch.setattr(_leaves, "_GRAM_BLOCK", block)
    got = _leaves._DistanceKernel._sqdist_err(Z, Z[3:])
    for a, b in zip(got, whole, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(_leaves._DistanceKernel._sqdist(Z, Z[3:]), whole[0])


@pytest.mark.parametrize("ell", [1.0, 0.3, 1e-160])
def test_the_gaussian_gram_is_exp_of_the_documented_exponent_bit_for_bit(ell):
    """``exp(-((d2 / l) / l) / 2)``: the Gram folds the sign into the factor 1/2 and skips
    dividing by a lengthscale of 1, both exact; a tiny lengthscale overflows the
    exponent to inf and the kernel to exactly 0.  The Laplacian's, ``exp(-sqrt(d2) / l)``,
    is applied to each block of rows as well."""
    Z = np.vstack([X, X[:1]])
    d2 = _leaves._DistanceKernel._sqdist(Z, Z)
    with np.errstate(over="ignore"):
        want = np.exp(-(d2 / ell / ell * 0.5))
    assert np.array_equal(Gaussian(ell)(Z), want)
    assert np.array_equal(Laplacian(ell)(Z), np.exp(-(np.sqrt(d2) / ell)))


@pytest.mark.parametrize("block", [7, 1 << 17])
@pytest.mark.parametrize("ell", [1.0, 0.3])
def test_the_gaussian_bound_by_blocks_is_the_whole_array_formula_bit_for_bit(
    monkeypatch, ell, block
):
    """The bound is finished a block of rows at a time in the distances' own arrays:
    bit for bit the docstring's formula over whole arrays, in its order of operations.
    Two far-out points at distance sqrt(3) (norms about 1e6) make the first term, the
    distances' own error, dominate the bound, so its factor ``1 + 4u`` shows in it."""
    monkeypatch.setattr(_leaves, "_GRAM_BLOCK", block)
    Z = np.vstack([X, X[:1], X[:1] + 1e-9, 1e6 * X[:1], 1e6 * X[:1] + 1.0])
    d2, e = _leaves._DistanceKernel._sqdist_err(Z, Z)
    t = lambda a: a / ell / ell * 0.5  # noqa: E731
    G = np.exp(-t(d2))
    E = np.exp(-t(np.maximum(d2 - e, 0.0))) * t(e) * (1 + 4 * U)
    E = np.fmin(E + 4 * U * G + 2 * ETA, np.maximum(G, 1.0 - G))
    k = Gaussian(ell)
    assert np.array_equal(k(Z), G)
    assert np.array_equal(k.error_bound(Z), E)


def test_sqdist_is_clipped_at_zero():
    Z = np.array([[1e8, 1.0], [1e8, 1.0 + 2**-20]])
    d2 = _leaves._DistanceKernel._sqdist(Z, Z)
    d2e, _ = _leaves._DistanceKernel._sqdist_err(Z, Z)
    assert (d2 >= 0).all() and (d2e >= 0).all()
    assert np.array_equal(d2, d2e)


def test_error_bound_float32_uses_float32_roundoff():
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    g = gamma(3, np.float32)
    eta32 = float(np.finfo(np.float32).smallest_subnormal)
    expected = g * (1 + g) * (np.abs(X32) @ np.abs(Y32).T) + 3 * eta32
    assert np.allclose(Linear().error_bound(X32, Y32), expected, rtol=1e-6, atol=0)
    assert Linear().error_bound(X32, Y32).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_distance_kernel_bounds_at_close_and_coincident_points(dtype):
    """Rows at distance 0 and below 1 exercise the clipping and ratio branches of the models."""
    Z = np.vstack([0.05 * X, 0.05 * X[:2]]).astype(dtype)  # squared distances < 1, some 0
    u = unit_roundoff(dtype)
    eta = float(np.finfo(dtype).smallest_subnormal)
    Zf = Z.astype(np.float64)
    d2, e = _sqdist_err(Zf, Zf, dtype)
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


# ---------------------------------------------------------------------------
# Algebra, printing, identity
# ---------------------------------------------------------------------------


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
    assert np.array_equal((a + b)(X7, Y5), a(X7, Y5) + b(X7, Y5))
    assert np.array_equal((a * b)(X7, Y5), a(X7, Y5) * b(X7, Y5))
    assert np.array_equal((3 * b)(X7, Y5), 3 * b(X7, Y5))
    assert np.array_equal((b**2)(X7, Y5), b(X7, Y5) * b(X7, Y5))
    assert np.array_equal(exp(b)(X7, Y5), np.exp(b(X7, Y5)))


def test_kernels_are_immutable():
    k = Polynomial(2)
    with pytest.raises(AttributeError):
        k.degree = 3
    with pytest.raises(AttributeError):
        del k.c


def test_polynomial_and_power_forms_agree():
    assert np.array_equal(Polynomial(3, c=1.0)(X7, Y5), ((Linear() + 1.0) ** 3)(X7, Y5))


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


def test_repr_of_every_example_kernel_rebuilds_it(builtin_kernel):
    """The printed formula of every example kernel is kernelcheck code for an equal kernel."""
    k = builtin_kernel
    namespace = {
        "Linear": Linear,
        "Constant": Constant,
        "Polynomial": Polynomial,
        "Exponential": Exponential,
        "Gaussian": Gaussian,
        "Laplacian": Laplacian,
        "exp": exp,
    }
    rebuilt = eval(repr(k), namespace)
    assert rebuilt == k and hash(rebuilt) == hash(k) and repr(rebuilt) == repr(k)
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
    assert _monomials.MAX_ORDER == 64
    assert Power(Linear(), 64).m == 64 and Exp(Linear(), 64).order == 64


# ---------------------------------------------------------------------------
# Kernels from user functions; overflow; array-likes
# ---------------------------------------------------------------------------


def test_function_kernel_loop_and_vectorised_modes_agree():
    def rbf(x, y):
        return float(np.exp(-np.sum((x - y) ** 2) / 2))

    def rbf_vec(A, B):
        return np.exp(-np.sum((A - B) ** 2, axis=-1) / 2)

    loop = kernel_from_function(rbf)(X7, Y5)
    vec = kernel_from_function(rbf_vec, vectorized=True)(X7, Y5)
    # Both evaluate exp(-d2 / 2) with d2 summed in a different order: |delta d2| <= gamma_(d+1) d2,
    # so the relative gap is at most gamma_(d+1) d2 / 2 + 2u on each side.
    d2 = ((X7[:, None, :] - Y5[None, :, :]) ** 2).sum(-1)
    rel = 2 * (gamma(X7.shape[1] + 1) * d2 / 2 + gamma(2))
    assert np.all(np.abs(loop - vec) <= rel * np.abs(loop))
    # against the closed form, whose own propagated bound covers the GEMM route
    G = Gaussian()(X7, Y5)
    assert np.all(np.abs(loop - G) <= Gaussian().error_bound(X7, Y5) + rel * np.abs(loop))
    assert not kernel_from_function(rbf).supports_mp
    with pytest.raises(InfiniteFeatureSpace):
        kernel_from_function(rbf).features()


def test_function_kernel_gives_the_user_function_copies():
    """A user function that writes into its arguments changes neither the caller's points
    nor the other entries: each call receives its own copies (user callbacks get copies,
    never the caller's data), so the Gram of x . y is exact and symmetric whatever the
    function does."""
    import mpmath

    def doubling(x, y):
        x *= 2.0
        return float(x @ y)

    def zeroing(A, B):
        out = (A * B).sum(-1)
        A[...] = 0.0
        B[...] = 0.0
        return out

    def mp_clearing(x, y):
        value = mpmath.fdot(x, y)
        x.clear()
        return value

    P = np.arange(6.0).reshape(3, 2)
    Q = np.arange(4.0).reshape(2, 2)
    P0, Q0 = P.copy(), Q.copy()
    assert np.array_equal(kernel_from_function(doubling)(P, Q), 2 * (P0 @ Q0.T))
    assert np.array_equal(kernel_from_function(zeroing, vectorized=True)(P, Q), P0 @ Q0.T)
    k = kernel_from_function(doubling, mp_function=mp_clearing)
    assert np.array_equal(np.array(k.gram_mp(P, Q, dps=20).tolist(), dtype=float), P0 @ Q0.T)
    assert np.array_equal(P, P0) and np.array_equal(Q, Q0)


def test_function_kernel_with_mp_function_evaluates_in_mpmath():
    import mpmath

    k = kernel_from_function(
        lambda x, y: float(np.tanh(x @ y - 1)),
        mp_function=lambda x, y: mpmath.tanh(mpmath.fdot(x, y) - 1),
        name="tanh",
    )
    assert k.supports_mp
    exact = np.array(k.gram_mp(X7[:3], dps=30).tolist(), dtype=float)
    # float tanh (1 ulp) of a dot product accurate to gamma_d |x|.|y|; tanh' <= 1
    absdot = np.abs(X7[:3]) @ np.abs(X7[:3]).T
    assert np.all(np.abs(exact - k(X7[:3])) <= gamma(X7.shape[1] + 1) * (absdot + 1) + gamma(2))


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

    assert np.array_equal(Linear()(Tensor(X7)), Linear()(X7))


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


def test_function_kernel_of_a_callable_without_a_name():
    import functools

    f = functools.partial(lambda x, y, s: s * float(x @ y), s=2.0)
    k = kernel_from_function(f)
    assert repr(k) == "kernel_from_function(f)"
    assert np.allclose(k(X, Y), 2.0 * X @ Y.T, rtol=4 * U, atol=0)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


BAD_GRAM_CALLS = [
    (lambda: Linear()(np.array([1.0, 2.0])), "`X` must be a 2-d"),
    (lambda: Linear()(np.zeros((2, 2, 2))), "`X` must be a 2-d"),
    (lambda: Linear()(np.array([[np.nan, 1.0]])), "`X` must be finite"),
    (lambda: Linear()(np.array([[np.inf, 1.0]])), "`X` must be finite"),
    (lambda: Linear()(X7, np.ones((2, 4))), "`Y` must have the same number of columns"),
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
    (lambda: Linear().gram_mp(X7, dps=5), "`dps` must be >= 15"),
    (lambda: kernel_from_function(3), "`f` must be callable"),
    (lambda: kernel_from_function(lambda x, y: 1 / 0)(X7), "`f` .* raised ZeroDivisionError"),
    (lambda: kernel_from_function(lambda x, y: float("nan"))(X7), "non-finite"),
    (
        lambda: kernel_from_function(lambda A, B: A.sum(-1), vectorized=True)(X7, Y5),
        "must broadcast",
    ),
    (lambda: kernel_from_function(lambda x, y: 1.0).error_bound(X7), "no rounding-error model"),
    (lambda: kernel_from_function(lambda x, y: 1.0).gram_mp(X7), "cannot be evaluated in mpmath"),
]


@pytest.mark.parametrize("call, message", BAD_GRAM_CALLS, ids=[m for _, m in BAD_GRAM_CALLS])
def test_bad_input_raises_invalid_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()
