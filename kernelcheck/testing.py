"""pytest assertions: each verifier's twin returns its result or raises.

A verified result is returned.  A refuted one raises ``AssertionError``
whose first line is ``"refuted: "`` and the first failing place (what
failed, where, by how much and against what tolerance), followed by the
result's one line and its evidence.  An inconclusive one raises
:class:`kernelcheck.errors.Inconclusive` -- not an ``AssertionError``: the
code under test was not shown wrong -- whose message says what to do (more
trials, another seed, larger m); ``allow_inconclusive=True`` returns the
result instead.  kernelcheck's own frames are hidden from pytest's traceback.

* :func:`assert_psd` -- :func:`kernelcheck.check_psd` (C5);
* :func:`assert_kernel` -- :func:`kernelcheck.verify.kernel` (C5, C6);
* :func:`assert_feature_map` -- :func:`kernelcheck.verify.feature_map` (C4, C7-C9);
* :func:`assert_unbiased` -- :func:`kernelcheck.verify.unbiased` (C13, C16-C18);
* :func:`assert_attention_matches` -- :func:`kernelcheck.verify.attention` (C1, C10, C14);
* :func:`assert_random_feature_attention` -- :func:`kernelcheck.verify.random_feature_attention`
  (C16).
"""

from kernelcheck._src.verify.attention.api import assert_attention_matches
from kernelcheck._src.verify.twins import (
    assert_feature_map,
    assert_kernel,
    assert_psd,
    assert_random_feature_attention,
    assert_unbiased,
)

__all__ = [
    "assert_psd",
    "assert_kernel",
    "assert_feature_map",
    "assert_unbiased",
    "assert_attention_matches",
    "assert_random_feature_attention",
]
