"""C16: the ratio of two unbiased estimates is not unbiased.

Performer attention ``phi(q)^T S / phi(q)^T z`` has an unbiased numerator and
denominator (C13, linear in the kernel estimates) but its output carries a
bias ``beta / m + O(1/m^2)``.

Statistics.  :func:`kernelcheck.verify.ratio_bias` projects the bias on a
direction from an independent pilot run and fits ``beta/m + gamma/m^2 +
delta/m^3`` over m = 8..128 (20000 trials each).  It passes when beta differs
from 0 (two-sided z test) and the fit's chi-square goodness of fit is not
rejected, both at alpha = 0.01: a true 1/m bias fails an example with
probability <= 0.01 (goodness of fit) plus the miss probability of the
beta test, which at the observed |beta| / se > 5 is below 1e-3.  Inputs have
scaled norms <= 0.5 so that m is well above the relative variance of one
feature (the 1/m law is asymptotic).  The ``ci`` profile fixes the examples.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck._src.random_features import (
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
)
from kernelcheck.verify import ratio_bias


@settings(max_examples=3)
@given(
    seed=st.integers(0, 2**31 - 1),
    cls=st.sampled_from([PositiveRandomFeatures, OptimalPositiveRandomFeatures]),
)
def test_c16_attention_bias_shrinks_like_one_over_m(seed, cls):
    """C16: the attention output is biased, and the bias is beta/m + O(1/m^2), beta != 0."""
    rng = np.random.default_rng(seed)
    d = 4
    Q = rng.standard_normal((3, d))
    K = rng.standard_normal((5, d))
    Q *= 0.5 / np.linalg.norm(Q, axis=1, keepdims=True)
    K *= 0.5 / np.linalg.norm(K, axis=1, keepdims=True)
    V = rng.standard_normal((5, 2))
    V -= V.mean(axis=0)  # the bias is a covariance term; centring keeps it visible
    V *= 4.0
    res = ratio_bias(cls.sampler(d, 8), Q, K, V, trials=20000, seed=seed)
    assert res.relative_variance < 8 < min(res.num_features) * 2
    assert res.passed, str(res)
    # m b(m) approaches beta: the largest m is within 3 standard errors + 20% of it
    m, b, se = res.num_features[-1], res.projected_bias[-1], res.projected_se[-1]
    assert abs(m * b - res.beta) <= 3 * m * se + 0.2 * abs(res.beta)
