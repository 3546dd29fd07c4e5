"""Verifiers: what other projects call.

Each verifier takes the user's object (a kernel, a feature map, a sampler, an
attention function), runs kernelcheck's reference computation, and returns a
report object with a boolean ``passed``, the measured numbers, the tolerance
used and where it came from, ``__str__`` (a one-line verdict) and ``to_dict()``.

* :func:`kernel` -- is this a kernel (claims C5, C6)?
* :func:`feature_map` -- does this feature map reproduce its kernel (C4, C7-C9)?
* :func:`unbiased` -- is this random-feature estimator unbiased, how noisy (C13, C16-C18)?
* :func:`attention` -- does this attention layer compute what it claims (C1, C10, C14)?
* :func:`random_feature_attention` -- does this random-feature attention layer converge to
  exact attention over redraws, with the ratio's 1/m bias (C16)?
"""

from kernelcheck._src.verify.attention.api import AttentionCase, AttentionReport, attention
from kernelcheck._src.verify.kernels.feature_map import FeatureMapReport, feature_map
from kernelcheck._src.verify.kernels.kernel import KernelReport, kernel
from kernelcheck._src.verify.random_features.attention import (
    RandomFeatureAttentionReport,
    random_feature_attention,
)
from kernelcheck._src.verify.random_features.ratio_bias import RatioBiasResult, ratio_bias
from kernelcheck._src.verify.unbiased.api import PairResult, SweepPoint, UnbiasedReport, unbiased
from kernelcheck._src.verify.unbiased.writer import default_points, write_report

__all__ = [
    "kernel",
    "KernelReport",
    "feature_map",
    "FeatureMapReport",
    "unbiased",
    "UnbiasedReport",
    "PairResult",
    "SweepPoint",
    "write_report",
    "default_points",
    "ratio_bias",
    "RatioBiasResult",
    "attention",
    "AttentionReport",
    "AttentionCase",
    "random_feature_attention",
    "RandomFeatureAttentionReport",
]
