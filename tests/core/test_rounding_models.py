"""The underflow term of the feature-product bound and the probabilistic model, against
their stated formulas evaluated independently.

* ``feature_product_bound`` (its docstring): ``gamma_(D + 2 ops) (1 + gamma_D) (|PX| |PY|^T)
  + (D + ops (|PX| 1)_i + ops (|PY| 1)_j) eta (1 + gamma_(D+1))``.  Feature rows
  with disjoint supports make the first term exactly zero, so the bound is the
  underflow term alone, rounded upward into the features' format: at least the
  formula (evaluated in 50-digit arithmetic) and at most one subnormal step
  above it (``N eta (1 + gamma)`` lies strictly between ``N eta`` and
  ``(N + 1) eta``: it is ``(N + 1) eta``).
  Shapes (n, D), (m, D) with n, m, D all different and rows of different sums
  and signs tell every axis and sign apart.
* ``probabilistic_lambda`` and ``RoundingModel.gamma`` with ``lam`` (Higham and
  Mary, SIAM J. Sci. Comput. 41(5), 2019, Theorem 2.4): evaluated in mpmath at 50
  digits and compared with a relative tolerance of a few float64 ulps (the code
  evaluates the same closed forms in float64: a handful of roundings).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from kernelcheck._src.core.rounding import (
    PRECISIONS,
    RoundingModel,
    feature_product_bound,
    probabilistic_lambda,
)

#: A few roundings of float64 closed forms, relative.
REL = 16 * 2.0**-53


def disjoint_rows(dtype):
    """PX (n=2, D=5) uses columns 0-1, PY (m=3, D=5) columns 2-4: PX @ PY.T is 0."""
    PX = np.array([[1.0, -2.0, 0, 0, 0], [-3.0, 0.0, 0, 0, 0]], dtype=dtype)
    PY = np.array([[0, 0, 4.0, 0, 0], [0, 0, -1.0, 1.0, -1.0], [0, 0, 0, 0, 0.0]], dtype=dtype)
    return PX, PY


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ops", [0, 1, 3])
def test_the_underflow_term_alone(dtype, ops):
    PX, PY = disjoint_rows(dtype)
    D = 5
    row_x = [3, 3]  # sums of |PX| by row
    row_y = [4, 3, 0]
    eta = float(np.finfo(dtype).smallest_subnormal)
    u = mpmath.mpf(float(np.finfo(dtype).eps)) / 2
    mpmath.mp.dps = 50
    got = feature_product_bound(PX, PY, ops)
    assert got.shape == (2, 3)
    assert got.dtype == dtype
    for i, a in enumerate(row_x):
        for j, b in enumerate(row_y):
            formula = (D + ops * (a + b)) * mpmath.mpf(eta) * (1 + gamma_ref(D + 1, u))
            assert formula <= mpmath.mpf(float(got[i, j])) <= formula + eta, (i, j)
    # the next multiple of eta above the formula, exactly
    expected = np.array([[(D + ops * (a + b) + 1) * eta for b in row_y] for a in row_x])
    assert np.array_equal(got, expected.astype(dtype))
    # the same rows in the other order: the bound is transposed
    assert np.array_equal(feature_product_bound(PY, PX, ops), got.T)


def gamma_ref(k, u):
    return mpmath.mpf(k) * u / (1 - mpmath.mpf(k) * u)


@pytest.mark.parametrize("ops", [0, 2])
def test_both_terms_on_overlapping_rows(ops):
    """Float64 rows with small integer entries (so |PX| |PY|^T is exact), D = 4, n = 3,
    m = 2: the bound against the docstring's formula in 50-digit arithmetic, within a
    few roundings of its first term and the upward rounding (one eta) of the second."""
    PX = np.array([[1.0, -2.0, 0.0, 3.0], [0.0, 1.0, 1.0, -1.0], [2.0, 0.0, 0.0, 0.0]])
    PY = np.array([[-1.0, 1.0, 2.0, 0.0], [0.0, 0.0, -5.0, 1.0]])
    got = feature_product_bound(PX, PY, ops)
    mpmath.mp.dps = 50
    u = mpmath.mpf(2) ** -53
    eta = mpmath.mpf(2) ** -1074
    D = 4
    factor = gamma_ref(D + 2 * ops, u) * (1 + gamma_ref(D, u))
    for i in range(3):
        for j in range(2):
            absdot = sum(abs(PX[i, k]) * abs(PY[j, k]) for k in range(D))
            sx, sy = np.abs(PX[i]).sum(), np.abs(PY[j]).sum()
            under = (D + ops * (sx + sy)) * eta * (1 + gamma_ref(D + 1, u))
            ref = factor * absdot + under
            # a few roundings of the first term; the underflow term rounded up by at most eta
            assert ref * (1 - REL) <= got[i, j] <= ref * (1 + REL) + eta, (i, j)


@pytest.mark.parametrize("terms", [0.5, 1, 2, 10, 1e6, 3.7e12])
@pytest.mark.parametrize("failure", [0.5, 1e-3, 1e-9, 1e-30])
def test_probabilistic_lambda_is_the_documented_formula(terms, failure):
    """``lambda = 1.01 sqrt(2 log(2 terms / failure))``, ``terms`` at least 1; and the
    union bound ``terms 2 exp(-lambda^2 (1 - u)^2 / 2)`` it was chosen for is at most
    ``failure`` in every format kernelcheck knows (the 1% margin covers ``(1 - u)^2``
    while ``u < 0.0099``), and not by more than the margin: at ``1.00 lambda / 1.01``
    the bound is the failure probability itself."""
    mpmath.mp.dps = 50
    t = max(mpmath.mpf(terms), 1)
    f = mpmath.mpf(failure)
    core = mpmath.sqrt(2 * mpmath.log(2 * t / f))
    lam = probabilistic_lambda(terms, failure)
    assert abs(lam - mpmath.mpf("1.01") * core) <= REL * lam
    for p in PRECISIONS.values():
        u = mpmath.mpf(p.u)
        assert t * 2 * mpmath.exp(-(mpmath.mpf(lam) ** 2) * (1 - u) ** 2 / 2) <= f
    assert abs(t * 2 * mpmath.exp(-(core**2) / 2) - f) <= 1e-40 * f


def test_probabilistic_lambda_counts_at_least_one_term():
    assert probabilistic_lambda(0, 1e-6) == probabilistic_lambda(1, 1e-6)
    assert probabilistic_lambda(1, 1e-6) < probabilistic_lambda(1.5, 1e-6)


@pytest.mark.parametrize("acc", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("k", [0, 1, 7, 1000, 10**9])
def test_the_probabilistic_factor_with_its_k_u2_term(acc, k):
    """``exp(lam sqrt(k) u + k u^2 / (1 - u)) - 1`` in 50 digits.  In bfloat16 (u = 2**-8)
    the ``k u^2`` term is a large part of the exponent (k u / (lam sqrt(k)) of it),
    so a wrong ``k u^2 / (1 - u)`` changes the factor far beyond the tolerance."""
    p = PRECISIONS[acc]
    lam = 6.5
    if k * p.u > 0.05:
        pytest.skip("k u beyond the model's range")
    got = RoundingModel(p, p, lam=lam, failure=1e-9).gamma(k)
    mpmath.mp.dps = 50
    u = mpmath.mpf(p.u)
    ref = mpmath.expm1(lam * mpmath.sqrt(k) * u + k * u * u / (1 - u))
    assert abs(got - ref) <= REL * ref
    if k == 0:
        assert got == 0.0


def test_the_k_u2_term_is_visible_in_bfloat16():
    """The test above can tell the k u^2 term: leaving it out changes the factor by
    more than its tolerance (so the comparison is not vacuous)."""
    p = PRECISIONS["bfloat16"]
    lam, k = 6.5, 10
    with_term = RoundingModel(p, p, lam=lam, failure=1e-9).gamma(k)
    without = math.expm1(lam * math.sqrt(k) * p.u)
    assert abs(with_term - without) > 1e3 * REL * with_term


def test_the_probabilistic_factor_with_storage_roundings():
    """``(1 + g_acc)(1 + gamma_s(storage)) - 1`` with float32 accumulation, float16 storage.

    Formed in float64 around 1, so its absolute error is a few roundings of
    numbers near 1 (``4 u_64``), not relative to the small result."""
    acc, sto = PRECISIONS["float32"], PRECISIONS["float16"]
    lam, k, s = 5.0, 300, 2
    got = RoundingModel(acc, sto, storage_ops=s, lam=lam, failure=1e-6).gamma(k)
    mpmath.mp.dps = 50
    ua, us = mpmath.mpf(acc.u), mpmath.mpf(sto.u)
    g = mpmath.expm1(lam * mpmath.sqrt(k) * ua + k * ua * ua / (1 - ua))
    ref = (1 + g) * (1 + gamma_ref(s, us)) - 1
    assert abs(got - ref) <= 4 * 2.0**-53 + REL * ref
    # the storage roundings are visible: far above that tolerance
    assert ref - g > 1e6 * 2.0**-53


ETA = float(np.nextafter(0.0, 1.0))


@pytest.mark.parametrize("ops", [1, 2, 3])
@pytest.mark.parametrize(
    "px, py",
    [
        ([0.5], [ETA]),
        ([0.75], [3 * ETA]),
        ([0.3], [7 * ETA]),
        ([0.5, 0.5], [ETA, ETA]),
        ([0.25, 0.75, 0.5], [5 * ETA, 3 * ETA, ETA]),
        ([1.0, 2.0**-1070], [2.0**-1070, 1.0]),
    ],
)
def test_the_feature_product_bound_covers_products_that_underflow(px, py, ops):
    """``|fl(PX @ PY.T) - PX PY^T|`` in exact fractions is within the bound, also where
    every product is subnormal (the underflow term carries the bound there)."""
    PX, PY = np.array([px]), np.array([py])
    computed = float((PX @ PY.T)[0, 0])
    exact = sum(Fraction(a) * Fraction(b) for a, b in zip(px, py))
    bound = float(feature_product_bound(PX, PY, ops)[0, 0])
    assert abs(Fraction(computed) - exact) <= Fraction(bound)


def test_the_rounding_models_factor_composes_its_two_precisions():
    """Worst case: exactly Higham's gamma of the accumulation precision, then composed
    with the storage roundings; probabilistic: below the worst case once k > lambda^2,
    increasing in k, and 0 at k = 0."""
    from kernelcheck._src.core.rounding import RoundingModel, gamma, probabilistic_lambda

    f64, f32, f16 = PRECISIONS["float64"], PRECISIONS["float32"], PRECISIONS["float16"]
    for k in (1, 7, 1000):
        assert RoundingModel(f32, f32).gamma(k) == gamma(k, f32)
        mixed = RoundingModel(f32, f16, storage_ops=2).gamma(k)
        assert mixed == pytest.approx((1 + gamma(k, f32)) * (1 + gamma(2, f16)) - 1, rel=1e-12)
        assert mixed > gamma(k, f32) and mixed > gamma(2, f16)
    lam = probabilistic_lambda(1e6, 1e-9)
    prob = RoundingModel(f64, f64, lam=lam, failure=1e-9)
    assert prob.gamma(0) == 0.0
    ks = [10**j for j in range(2, 9)]
    values = [prob.gamma(k) for k in ks]
    assert values == sorted(values) and len(set(values)) == len(values)
    for k in ks:
        if k > 4 * lam**2:
            assert prob.gamma(k) < gamma(k, f64)


def test_probabilistic_lambda_keeps_the_union_bound_below_the_failure_probability():
    from kernelcheck._src.core.rounding import probabilistic_lambda

    for terms in (1, 10, 1e6, 1e12):
        for failure in (1e-3, 1e-9, 1e-15):
            lam = probabilistic_lambda(terms, failure)
            assert 2 * max(terms, 1) * np.exp(-(lam**2) / 2) <= failure
            assert lam < probabilistic_lambda(terms, failure / 10)
            assert lam < probabilistic_lambda(10 * max(terms, 1), failure)


def test_the_rounding_model_describes_itself():
    from kernelcheck._src.core.rounding import RoundingModel

    f32, f16 = PRECISIONS["float32"], PRECISIONS["float16"]
    assert RoundingModel(f32, f32).describe() == "accumulate in float32, worst case"
    text = RoundingModel(f32, f16, storage_ops=3, lam=5.0, failure=1e-9).describe()
    assert text.startswith("accumulate in float32, probabilistic (Higham-Mary, lambda = 5")
    assert "fails with probability <= 1e-09" in text
    assert text.endswith("; 3 roundings per term stored in float16")


def test_a_rounding_model_reads_as_its_coarser_precision():
    """unit_roundoff, eta and gamma of a mixed model: the coarser of its two formats for
    u and eta (the last rounding is to storage), its own factor for gamma; and the
    inner-product factor in that model's arithmetic."""
    from kernelcheck._src.core.rounding import (
        RoundingModel,
        eta,
        gamma,
        inner_product_factor,
        unit_roundoff,
    )

    f32, f16 = PRECISIONS["float32"], PRECISIONS["float16"]
    for acc, sto in ((f32, f16), (f16, f32)):
        model = RoundingModel(acc, sto, storage_ops=1)
        assert unit_roundoff(model) == f16.u
        assert eta(model) == f16.eta
        assert gamma(9, model) == model.gamma(9)
    model = RoundingModel(f16, f16)
    assert inner_product_factor(5, 0, model) == gamma(5, f16) * (1 + gamma(5, f16))
    assert inner_product_factor(5) == gamma(5) * (1 + gamma(5))
