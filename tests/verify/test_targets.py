"""User kernels as targets of the verifiers (claims C5, C13): validated before any trial.

``verify.unbiased`` compares a sampler's mean with ``target(X, Y)`` within the
target's own error bound, so a target without an error model cannot be
judged: it is refused before a single trial runs (the sampler here fails the
test if it is ever called).  With ``kernel_from_function(f, error_bound=...)``
the same user function is a target like a built-in kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import kernel_from_function
from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import Exponential
from kernelcheck.verify import unbiased

X = np.random.default_rng(0).standard_normal((3, 2)) * 0.3


def _exp_blocks(A, B):
    return np.exp(A @ B.T)


def _never(*args, **kwargs):
    raise AssertionError("a trial ran before the target was validated")


def test_a_target_without_error_model_is_refused_before_any_trial():
    target = kernel_from_function(_exp_blocks, blocks=True)
    with pytest.raises(InvalidArgument, match="no rounding-error model") as info:
        unbiased(_never, target, X, trials=1000, seed=0)
    assert "error_bound=" in str(info.value)


def test_a_user_kernel_with_an_error_bound_is_a_target_like_a_built_in():
    """C13: the user's exp(x.y) with Exponential's own bound gives the same report as
    Exponential() itself (same seed, same sampler)."""
    sampler = PositiveRandomFeatures.sampler(2, 64)
    ref = Exponential()
    mine = kernel_from_function(_exp_blocks, blocks=True, error_bound=ref.error_bound)
    a = unbiased(sampler, mine, X, trials=400, seed=1)
    b = unbiased(sampler, ref, X, trials=400, seed=1)
    assert a.passed == b.passed
    assert [p.mean for p in a.pairs] == [p.mean for p in b.pairs]
    assert np.allclose([p.target for p in a.pairs], [p.target for p in b.pairs], rtol=1e-14, atol=0)
