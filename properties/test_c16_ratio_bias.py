"""C16: the ratio of two unbiased estimates is not unbiased.

Performer attention ``phi(q)^T S / phi(q)^T z`` has an unbiased numerator and
denominator (C13, linear in the kernel estimates) but its output carries a
bias ``beta / m + O(1/m^2)``.

Statistics.  :func:`kernelcheck.verify.ratio_bias` projects the bias on a
direction from an independent pilot run and fits ``beta/m + gamma/m^2 +
delta/m^3`` over m = 8..128 (20000 trials each).  It passes when beta differs
from 0 (two-sided z test) and the fit's chi-square goodness of fit is not
rejected, both at alpha = 1e-3: a true 1/m bias fails the goodness of fit of
one example with probability about 1e-3 (3e-3 for the three examples of a
run).  Power: the inputs put one key on the query's direction and one
opposite, with values +4 and -4, so the covariance term of the bias is large;
over 12 such configurations |beta| / se ranged from 4.5 to 18 (the test
needs 3.3).  Scaled norms are 0.4, so m is well above the relative variance
of one feature (<= e^0.64 - 1 = 0.9; the 1/m law is asymptotic).  The ``ci``
profile fixes the examples.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck.verify import ratio_bias


@settings(max_examples=3)
@given(seed=st.integers(0, 2**31 - 1))
def test_c16_attention_bias_shrinks_like_one_over_m(seed):
    """C16: the attention output is biased, and the bias is beta/m + O(1/m^2), beta != 0."""
    rng = np.random.default_rng(seed)
    d, norm = 4, 0.4
    Q = rng.standard_normal((3, d))
    K = rng.standard_normal((5, d))
    Q *= norm / np.linalg.norm(Q, axis=1, keepdims=True)
    K *= norm / np.linalg.norm(K, axis=1, keepdims=True)
    K[0], K[1] = Q[0], -Q[0]
    V = rng.standard_normal((5, 2))
    V[0], V[1] = [4.0, 0.0], [-4.0, 0.0]
    res = ratio_bias(
        PositiveRandomFeatures.sampler(d, 8), Q, K, V, trials=20000, seed=seed, alpha=1e-3
    )
    assert res.relative_variance < 1.0
    assert res.passed, str(res)
    # m b(m) approaches beta: the largest m is within 4 standard errors + 20% of it
    m, b, se = res.num_features[-1], res.projected_bias[-1], res.projected_se[-1]
    assert abs(m * b - res.beta) <= 4 * m * se + 0.2 * abs(res.beta)
