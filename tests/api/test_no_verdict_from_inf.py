"""No verdict from inf: a verifier whose compared numbers overflow raises a kernelcheck error.

A feature map whose features reach 1e200 squared, or a kernel whose error bound
overflows, would compare ``inf <= inf`` and pass; each must instead raise
``NumericalFailure`` (or ``InvalidArgument``) saying so.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import testing, verify
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.kernels import (
    Linear,
    Polynomial,
)

RNG = np.random.default_rng(17)
X = RNG.normal(size=(4, 3))

#: verifiers fed numbers that overflow: each raises a kernelcheck error, never passes
INF_VERDICTS = {
    "verify.feature_map": lambda: verify.feature_map(
        lambda Z: 1e200 * Polynomial(2).features()(Z), X, kernel=Polynomial(2)
    ),
    "assert_feature_map": lambda: testing.assert_feature_map(
        lambda Z: 1e200 * Polynomial(2).features()(Z), X, kernel=Polynomial(2)
    ),
    "verify.feature_map-kernel-bound": lambda: verify.feature_map(
        Linear().features(), [[1e308, 1e308]], [[1.0, -1.0]]
    ),
}


@pytest.mark.parametrize("name", sorted(INF_VERDICTS))
def test_no_verdict_from_inf(name):
    with pytest.raises((NumericalFailure, InvalidArgument), match=r"inf|overflow"):
        INF_VERDICTS[name]()
