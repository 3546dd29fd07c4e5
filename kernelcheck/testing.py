"""pytest assertions: each verifier's twin raises ``AssertionError`` with its report.

The message says what failed, where, by how much and against what tolerance
(and where that tolerance came from).  Each returns the report when it passes.

* :func:`assert_psd` -- :func:`kernelcheck.check_psd` (C5);
* :func:`assert_kernel` -- :func:`kernelcheck.verify.kernel` (C5, C6);
* :func:`assert_feature_map` -- :func:`kernelcheck.verify.feature_map` (C4, C7-C9);
* :func:`assert_unbiased` -- :func:`kernelcheck.verify.unbiased` (C13, C16-C18);
* :func:`assert_attention_matches` -- :func:`kernelcheck.verify.attention` (C1, C10, C14);
* :func:`assert_random_feature_attention` -- :func:`kernelcheck.verify.random_feature_attention`
  (C16).
"""

from kernelcheck._src.psd.ladder import assert_psd
from kernelcheck._src.verify.attention.api import assert_attention_matches
from kernelcheck._src.verify.kernels.feature_map import assert_feature_map
from kernelcheck._src.verify.kernels.kernel import assert_kernel
from kernelcheck._src.verify.random_features.attention import assert_random_feature_attention
from kernelcheck._src.verify.unbiased.api import assert_unbiased

__all__ = [
    "assert_psd",
    "assert_kernel",
    "assert_feature_map",
    "assert_unbiased",
    "assert_attention_matches",
    "assert_random_feature_attention",
]
