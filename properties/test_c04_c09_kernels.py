"""Claims C4, C7, C8, C9, C12 (feature-map half): kernels are inner products of feature maps.

Each test is a relation between two independent computations: the kernel's
Gram block (vectorised closed form, or mpmath at 50 digits) and the inner
products of its feature map, judged against the two error models stated in
:meth:`kernelcheck.kernels.Kernel.error_bound` and
:meth:`kernelcheck.features.ExactFeatureMap.error_bound`.  A failure is a
real discrepancy: rounding cannot exceed those a-priori bounds.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import verify
from kernelcheck._src.core.rounding import gamma
from kernelcheck.kernels import Linear, Polynomial, exp, monomial_dim, unweighted_monomials
from kernelcheck.strategies import kernels, point_set_pairs, point_sets


@settings(max_examples=200)
@given(
    kernels(max_depth=4),
    point_set_pairs(max_dim=6, max_points=6),
    st.sampled_from(["symmetric", "tensor"]),
)
def test_c04_every_finite_tree_is_an_inner_product_of_its_features(k, XY, form):
    """C4: kappa(x, x') = <phi(x), phi(x')> for 200 random expression trees of depth <= 4, d <= 6.

    The closure rules (sum: concatenate; c k: sqrt(c) phi; product: Kronecker;
    power: monomials; truncated exp: Taylor map) are all exercised by the trees.
    """
    X, Y = XY
    if form == "tensor" and k.feature_dim(X.shape[1], "tensor") > 5000:
        form = "symmetric"
    report = verify.feature_map(k.features(form), X, Y)
    assert report.passed, str(report)


@given(kernels(max_depth=3), point_set_pairs(max_dim=4, max_points=4))
def test_c04_gram_matches_high_precision_within_error_bound(k, XY):
    """C4 (support): the float Gram is within its propagated error bound of the 50-digit Gram.

    This is what licenses the kernel-side term of every feature-map tolerance.
    """
    X, Y = XY
    G = k(X, Y)
    exact = np.array(k.gram_mp(X, Y, dps=50).tolist(), dtype=float)
    # converting the 50-digit value to float rounds once: add u |exact|
    slack = np.finfo(float).eps / 2 * np.abs(exact)
    assert np.all(np.abs(G - exact) <= k.error_bound(X, Y) + slack)


@given(point_set_pairs(max_dim=6))
def test_c07_linear_kernel_feature_map_is_identity(XY):
    """C7: the linear kernel x.x' has phi(x) = x (exactly the input rows)."""
    X, Y = XY
    phi = Linear().features()
    assert np.array_equal(phi(X), X)
    assert verify.feature_map(phi, X, Y).passed


@given(point_set_pairs(max_dim=5, max_points=5), st.integers(0, 4))
def test_c08_tensor_and_weighted_monomial_maps_reproduce_polynomial(XY, m):
    """C8: (x.x')^m = <x^(tensor m), x'^(tensor m)> (d^m coords).

    It also equals the inner product of the weighted unique monomials (C(d+m-1, m) coords)."""
    X, Y = XY
    d = X.shape[1]
    k = Polynomial(m)
    tensor, symmetric = k.features("tensor"), k.features("symmetric")
    assert tensor(X).shape[1] == d**m == tensor.output_dim(d)
    assert symmetric(X).shape[1] == math.comb(d + m - 1, m) == monomial_dim(d, m)
    assert verify.feature_map(tensor, X, Y).passed
    assert verify.feature_map(symmetric, X, Y).passed


@given(
    point_sets(min_dim=2, max_dim=5, min_points=2, max_points=5, max_norm=2.0), st.integers(2, 4)
)
def test_c08_unweighted_unique_monomials_do_not_reproduce_polynomial(X, m):
    """C8 (the essay's loose statement): unweighted unique monomials are NOT a map of (x.x')^m.

    For d >= 2 and m >= 2 the cross terms lack their multinomial coefficients.
    The witness is the all-ones point: (1.1)^m = d^m exactly, but the unweighted
    map gives C(d+m-1, m) < d^m, a gap far beyond any rounding.  On random points
    the failure is asserted wherever the mixed monomials do not vanish.
    """
    ones = np.ones((1, X.shape[1]))
    P = unweighted_monomials(ones, m)
    assert P.shape[1] == monomial_dim(X.shape[1], m) < X.shape[1] ** m
    report = verify.feature_map(
        lambda Z: unweighted_monomials(Z, m), np.vstack([ones, X]), kernel=Polynomial(m)
    )
    assert not report.passed, str(report)


@given(point_set_pairs(max_dim=4, max_points=5, max_norm=1.5), st.integers(0, 6))
def test_c09_truncated_taylor_map_reproduces_truncated_series(XY, M):
    """C9/C12: the order-M Taylor map [1, x, x(x)x/sqrt(2!), ...] gives sum_{j<=M} (x.x')^j / j!.

    The kernel side is checked against the series summed term by term in
    mpmath at 50 digits, so the map is compared with the mathematical
    definition, not with kernelcheck's own Horner evaluation alone.
    """
    X, Y = XY
    k = exp(Linear(), order=M)
    phi = k.features()
    assert phi(X).shape[1] == math.comb(X.shape[1] + M, M)
    F = phi(X) @ phi(Y).T
    with mpmath.workdps(50):
        series = np.array(
            [
                [
                    float(
                        mpmath.fsum(
                            mpmath.fdot([mpmath.mpf(v) for v in x], [mpmath.mpf(v) for v in y]) ** j
                            / mpmath.factorial(j)
                            for j in range(M + 1)
                        )
                    )
                    for y in Y
                ]
                for x in X
            ]
        )
    tol = phi.error_bound(X, Y) + np.finfo(float).eps * np.abs(series)
    assert np.all(np.abs(F - series) <= tol)


@given(point_set_pairs(max_dim=4, max_points=5, max_norm=1.5), st.integers(0, 12))
def test_c09_c12_truncated_series_converges_to_exp_within_remainder_bound(XY, M):
    """C9/C12: |exp(s) - T_M(s)| <= |s|^(M+1) e^max(s,0) / (M+1)!  (Lagrange remainder).

    T_M is evaluated by the order-M kernel in float64; exp(s) in mpmath; the
    comparison allows the kernel's own rounding bound on top of the remainder.
    """
    X, Y = XY
    k = exp(Linear(), order=M)
    T = k(X, Y)
    S = np.array(Linear().gram_mp(X, Y, dps=50).tolist(), dtype=float)
    with mpmath.workdps(50):
        E = np.array(
            [
                [
                    float(
                        mpmath.exp(
                            mpmath.fdot([mpmath.mpf(v) for v in x], [mpmath.mpf(v) for v in y])
                        )
                    )
                    for y in Y
                ]
                for x in X
            ]
        )
    remainder = np.abs(S) ** (M + 1) * np.exp(np.maximum(S, 0)) / math.factorial(M + 1)
    slack = k.error_bound(X, Y) + np.finfo(float).eps * (np.abs(E) + remainder)
    # the remainder itself is computed with about M + 6 roundings
    assert np.all(np.abs(E - T) <= remainder * (1 + gamma(M + 6)) + slack)


@pytest.mark.parametrize("M", [1, 3, 5])
def test_c12_remainder_bound_is_attained_in_order_of_magnitude(M):
    """C12 (bound is informative): at s = 1 the true error is within a factor e of the bound.

    exp(1) - T_M(1) = sum_{j > M} 1/j!, between 1/(M+1)! and e/(M+1)!.
    """
    x = np.array([[1.0]])
    T = exp(Linear(), order=M)(x)[0, 0]
    err = math.e - T
    bound = math.e / math.factorial(M + 1)
    assert bound / math.e <= err <= bound
