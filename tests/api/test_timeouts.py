"""``timeout=`` of the verifiers: a blocking user callable is abandoned, a long timeout holds.

Every verifier that takes ``timeout=`` abandons a user callable that blocks
(also on an executor's worker thread, where the deadline is carried) with an
``InvalidArgument`` saying it did not return in time; a finite timeout longer
than ``threading`` can wait in one call still bounds the call and the check is
judged; a timeout that is not a positive number, and an executor that is not
one, are refused by name.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kernelcheck import attention, testing, verify
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import (
    Linear,
    kernel_from_function,
)

RNG = np.random.default_rng(17)
X = RNG.normal(size=(4, 3))
Q, K, V = (RNG.normal(size=(5, 3)) for _ in range(3))


def _stuck(value):
    """A user callable that blocks (an Event nobody sets) -- until the test releases it."""
    RELEASE.wait(30)
    return value


RELEASE = threading.Event()

#: verifiers with ``timeout=``: a user callable that blocks is abandoned with a clear error
TIMEOUT_CALLS = {
    "verify.feature_map": lambda: verify.feature_map(
        lambda Z: _stuck(Z), X, kernel=Linear(), timeout=0.2
    ),
    "verify.kernel": lambda: verify.kernel(
        kernel_from_function(lambda x, y: _stuck(float(x @ y))), X, timeout=0.2
    ),
    "verify.unbiased-sample": lambda: verify.unbiased(
        lambda rng: _stuck(Linear().features()), Linear(), X, trials=4, seed=0, timeout=0.2
    ),
    "verify.unbiased-phi": lambda: verify.unbiased(
        lambda rng: lambda Z: _stuck(Z), Linear(), X, trials=4, seed=0, timeout=0.2
    ),
    # an executor's worker thread does not inherit the caller's context: the deadline
    # is carried to it (the probe trial runs in-process, so it is not the one stuck)
    "verify.unbiased-executor": lambda: _on_thread_pool(
        lambda pool: verify.unbiased(
            _stuck_after_probe(), Linear(), X, trials=4, seed=0, timeout=0.2, executor=pool
        )
    ),
    "testing.assert_unbiased": lambda: testing.assert_unbiased(
        lambda rng: lambda Z: _stuck(Z), Linear(), X, trials=4, seed=0, timeout=0.2
    ),
    "verify.random_feature_attention": lambda: verify.random_feature_attention(
        lambda Q, K, V, m, rng: _stuck(np.zeros((Q.shape[0], V.shape[1]))),
        X,
        X,
        X,
        trials=4,
        seed=0,
        timeout=0.2,
    ),
    # the probe call returns; the trials run on an executor's worker thread
    "verify.random_feature_attention-executor": lambda: _on_thread_pool(
        lambda pool: verify.random_feature_attention(
            _layer_stuck_after_probe(), X, X, X, trials=4, seed=0, timeout=0.2, executor=pool
        )
    ),
}


def _layer_stuck_after_probe():
    """A layer whose first call (the in-process probe) returns; every later one blocks."""
    calls = []

    def layer(Q, K, V, m, rng):
        calls.append(None)
        out = np.zeros((Q.shape[0], V.shape[1]))
        return out if len(calls) == 1 else _stuck(out)

    return layer


def _on_thread_pool(call):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        try:
            return call(pool)
        finally:
            RELEASE.set()


def _stuck_after_probe():
    """A sampler whose first map (the in-process probe trial) returns; every later one blocks."""
    calls = []

    def sample(rng):
        calls.append(None)
        return Linear().features() if len(calls) == 1 else (lambda Z: _stuck(Z))

    return sample


@pytest.mark.parametrize("name", sorted(TIMEOUT_CALLS))
def test_a_blocking_user_callable_is_abandoned_at_the_timeout(name):
    try:
        with pytest.raises(InvalidArgument, match=r"did not return within timeout=0.2 s"):
            TIMEOUT_CALLS[name]()
    finally:
        RELEASE.set()
        RELEASE.clear()


def _slow_first(fn):
    """``fn``, whose first call takes 0.05 s: the verifier's thread waits for it on a deadline."""
    calls = []

    def call(*args):
        if not calls:
            calls.append(None)
            time.sleep(0.05)
        return fn(*args)

    return call


def _softmax_layer(Q, K, V):
    return attention.softmax(Q, K, V)


#: verifiers with ``timeout=``, each given a user callable that is slow once (all correct
#: but the random-feature layer, which returns zeros: refuted with or without a timeout)
SLOW_CALLS = {
    "verify.feature_map": lambda t: verify.feature_map(
        _slow_first(lambda Z: Z), X, kernel=Linear(), timeout=t
    ),
    "verify.kernel": lambda t: verify.kernel(
        kernel_from_function(_slow_first(lambda x, y: float(x @ y))), X, timeout=t
    ),
    "verify.unbiased": lambda t: verify.unbiased(
        _slow_first(lambda rng: Linear().features()), Linear(), X, trials=4, seed=0, timeout=t
    ),
    "testing.assert_unbiased": lambda t: testing.assert_unbiased(
        _slow_first(lambda rng: Linear().features()), Linear(), X, trials=4, seed=0, timeout=t
    ),
    "verify.random_feature_attention": lambda t: verify.random_feature_attention(
        _slow_first(lambda Q, K, V, m, rng: np.zeros((Q.shape[0], V.shape[1]))),
        X,
        X,
        X,
        trials=4,
        seed=0,
        timeout=t,
    ),
    "verify.attention": lambda t: verify.attention(
        _slow_first(_softmax_layer), cases=("random",), timeout=t
    ),
}


@pytest.mark.parametrize("timeout", [1e10, 1e300, float(np.finfo(np.float64).max)])
@pytest.mark.parametrize("name", sorted(SLOW_CALLS))
def test_a_timeout_beyond_the_platforms_clock_holds_and_the_call_is_judged(name, timeout):
    """A finite timeout longer than ``threading`` can wait in one call still bounds the call.

    The result is the report the check gives without a timeout, verdict and numbers
    alike: never an error, nor a failed case, blaming the user's callable for the
    deadline's own overflow.
    """
    report = SLOW_CALLS[name](timeout)
    assert str(report) == str(SLOW_CALLS[name](None))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), -float("inf"), "2", True])
@pytest.mark.parametrize(
    "name",
    [
        "verify.feature_map",
        "verify.kernel",
        "verify.unbiased",
        "verify.random_feature_attention",
        "verify.attention",
    ],
)
def test_timeout_must_be_a_positive_number(name, bad):
    call = {
        "verify.feature_map": lambda: verify.feature_map(Linear().features(), X, timeout=bad),
        "verify.kernel": lambda: verify.kernel(Linear(), X, timeout=bad),
        "verify.unbiased": lambda: verify.unbiased(
            lambda rng: Linear().features(), Linear(), X, trials=4, seed=0, timeout=bad
        ),
        "verify.random_feature_attention": lambda: verify.random_feature_attention(
            lambda Q, K, V, m, rng: np.zeros((3, 3)), X, X, X, trials=4, seed=0, timeout=bad
        ),
        "verify.attention": lambda: verify.attention(_softmax_layer, timeout=bad),
    }[name]
    with pytest.raises(InvalidArgument, match=r"`timeout`"):
        call()


def test_an_executor_that_is_not_one_is_refused():
    with pytest.raises(InvalidArgument, match=r"^`executor` must be a concurrent.futures"):
        verify.kernel(Linear(), X, executor=object())
