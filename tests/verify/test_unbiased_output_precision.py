"""``verify.unbiased`` allows a sampler the rounding of its own output format (C13, C17).

A faithful float32 re-implementation of fast-transformers' ``RandomFourierFeatures``
(``x * sqrt(t)``, ``u = x @ omega`` with ``omega ~ N(0, 1)`` of shape (d, m/2),
``[cos u, sin u] * sqrt(2/m)``, float32 throughout) estimates the Gaussian kernel
``exp(-t |x - y|^2 / 2)``.  At x = y its estimate is ``sin^2 + cos^2`` summed in float32:
exact in real arithmetic, off by a few float32 roundings, systematically.  Judged with
float64's unit roundoff that is a "bias"; with the features' own float32 model it is
rounding.  A real bias (features scaled so the estimate is 3% high, or just beyond the
rounding tolerance) still fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.core.rounding import PRECISIONS, default_feature_ops, gamma
from kernelcheck._src.verify.unbiased.trials import _rounding_scale
from kernelcheck.kernels import Gaussian

D_IN, M = 4, 64
TEMP = 1.0 / math.sqrt(D_IN)  # fast-transformers' default softmax_temp


class RandomFourierFeatures32:
    """fast-transformers' RandomFourierFeatures in float32: one ``omega`` per trial."""

    def __init__(self, scale: float = 1.0):
        self.scale = scale

    def __call__(self, rng):
        omega = rng.standard_normal((D_IN, M // 2)).astype(np.float32)
        s = np.float32(math.sqrt(TEMP))
        c = np.float32(math.sqrt(2.0 / M) * self.scale)

        def phi(X):
            u = (np.asarray(X, dtype=np.float32) * s) @ omega
            return np.concatenate([np.cos(u), np.sin(u)], axis=-1) * c

        return phi


#: exp(-t |x - y|^2 / 2) = Gaussian with lengthscale 1 / sqrt(t)
TARGET = Gaussian(lengthscale=1.0 / math.sqrt(TEMP))


def diagonal_points(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(2, D_IN))


@pytest.mark.parametrize("seed", range(5))
def test_a_correct_float32_sampler_passes_on_x_equal_y_pairs(seed):
    X = diagonal_points(seed)
    for x in X:  # one point: the single pair is (x, x)
        rep = verify.unbiased(RandomFourierFeatures32(), TARGET, x[None], trials=500, seed=seed)
        assert rep.passed, str(rep)
        (pair,) = rep.pairs
        assert pair.verdict == "exact"
        assert pair.mean != 1.0  # float32 rounding is there ...
        assert abs(pair.mean - 1.0) <= pair.rounding_tolerance  # ... and allowed for


@pytest.mark.parametrize("seed", range(3))
def test_a_float32_sampler_scaled_by_1_03_fails(seed):
    X = diagonal_points(seed)
    rep = verify.unbiased(
        RandomFourierFeatures32(math.sqrt(1.03)), TARGET, X[:1], trials=500, seed=seed
    )
    assert not rep.passed
    assert rep.pairs[0].verdict == "fail"


def test_a_bias_just_beyond_the_float32_rounding_tolerance_fails():
    """Features scaled so that the x = y estimate is 1 + 3 tol: tol is the rounding
    tolerance of the correct sampler's run, the deviation three times it."""
    x = diagonal_points(0)[:1]
    good = verify.unbiased(RandomFourierFeatures32(), TARGET, x, trials=500, seed=1)
    tol = good.pairs[0].rounding_tolerance
    assert tol < 1e-5  # float32 rounding, not a blanket
    bad = verify.unbiased(
        RandomFourierFeatures32(math.sqrt(1.0 + 3.0 * tol)), TARGET, x, trials=500, seed=1
    )
    assert not bad.passed and bad.pairs[0].verdict == "fail"


def test_pairs_with_x_unequal_y_are_still_tested_by_their_statistics():
    X = np.array([[0.3, -0.2, 0.1, 0.0], [0.1, 0.0, 0.2, -0.1]])
    rep = verify.unbiased(RandomFourierFeatures32(), TARGET, X, trials=4000, seed=3)
    assert rep.passed, str(rep)
    assert {p.test for p in rep.pairs if p.i != p.j} == {"t"}
    assert {p.verdict for p in rep.pairs if p.i == p.j} == {"exact"}


@pytest.mark.parametrize("fmt", ["float32", "float16"])
def test_the_rounding_scale_is_the_features_format_composed_with_the_float64_product(fmt):
    """``((1 + gamma_D)(1 + gamma_(2 ops)(f)) - 1)(1 + gamma_D)``, D in float64; float64
    features keep ``gamma_(D + 2 ops)(1 + gamma_D)``."""
    p = PRECISIONS[fmt]
    ops = 2 * default_feature_ops(D_IN)
    g64 = gamma(M)
    want = ((1 + g64) * (1 + gamma(ops, p)) - 1) * (1 + g64)
    assert _rounding_scale(M, D_IN, p) == pytest.approx(want, rel=1e-12)
    assert _rounding_scale(M, D_IN) == gamma(M + ops) * (1 + g64)
    assert _rounding_scale(M, D_IN, p) > 1e6 * _rounding_scale(M, D_IN)
