"""Bad input to verify.unbiased and its kin is refused by name; extreme input gives a report.

``verify.unbiased``, ``verify.ratio_bias``, ``default_points``, ``write_report``
and ``assert_unbiased`` (claims C13, C16, C17): each bad input is refused with
``InvalidArgument`` naming the argument -- samplers and feature maps that raise
or return NaN, complex or wrongly shaped features; a non-sequence ``sweep`` or
``num_features``; a report written where no folder can be.  Small and extreme
inputs (n = 1, d = 1, tiny norms) give a report; read-only inputs are never
written; one Hypothesis test per verifier, over every random feature map of the
catalogue, requires a report or a clean error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck.errors import (
    InvalidArgument,
    NumericalFailure,
)
from kernelcheck.features import (
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
)
from kernelcheck.kernels import (
    Exponential,
    Gaussian,
)
from kernelcheck.testing import assert_unbiased
from kernelcheck.verify import default_points, ratio_bias, unbiased, write_report
from tests.inputs import readonly

CLEAN = (InvalidArgument, NumericalFailure)


X_UNBIASED = readonly(np.random.default_rng(0).normal(size=(3, 2)) * 0.3)


# ---------------------------------------------------------------------------
# verify.unbiased, verify.ratio_bias, default_points, write_report, assert_unbiased
# ---------------------------------------------------------------------------


S = PositiveRandomFeatures.sampler(2, 8)


def _sample_raises(rng):
    raise RuntimeError("no map")


UNBIASED_BAD = [
    (
        lambda: unbiased(_sample_raises, Exponential(), X_UNBIASED, trials=10, seed=0),
        "raised RuntimeError: no map",
    ),
    (
        lambda: unbiased(lambda r: lambda A: 1 / 0, Exponential(), X_UNBIASED, trials=10, seed=0),
        "phi(X) raised ZeroDivisionError",
    ),
    (
        lambda: unbiased(
            lambda r: lambda A: np.full((A.shape[0], 3), np.nan),
            Exponential(),
            X_UNBIASED,
            trials=10,
            seed=0,
        ),
        "holds NaN or Inf",
    ),
    (
        lambda: unbiased(
            lambda r: lambda A: np.ones((A.shape[0], 3)) + 0j,
            Exponential(),
            X_UNBIASED,
            trials=10,
            seed=0,
        ),
        "the call phi(X) returned array of shape (3, 3) and dtype complex128; expected real",
    ),
    (
        lambda: unbiased(
            lambda r: lambda A: np.ones(A.shape[0]), Exponential(), X_UNBIASED, trials=10, seed=0
        ),
        "must have shape (3, D)",
    ),
    (
        lambda: unbiased(lambda r: 3, Exponential(), X_UNBIASED, trials=10, seed=0),
        "must return a feature map",
    ),
    (
        lambda: unbiased(S, lambda A, B: A @ B.T, X_UNBIASED, trials=10, seed=0),
        "`target` must be a kernelcheck kernel",
    ),
    (lambda: unbiased(S, Exponential(), np.ones((2, 3)), trials=10, seed=0), "`X` must have d = 2"),
    (
        lambda: unbiased(S, Exponential(), X_UNBIASED, np.ones((2, 3)), trials=10, seed=0),
        "`Y` must have d = 2",
    ),
    (
        lambda: unbiased(S, Exponential(), X_UNBIASED, trials=10, seed=0, sweep=4),
        "`sweep` must be a sequence",
    ),
    (
        lambda: unbiased(S, Exponential(), X_UNBIASED, trials=10, seed=0, sweep="ab"),
        "`sweep` must be a sequence",
    ),
    (
        lambda: unbiased(S, Exponential(), X_UNBIASED, trials=10, seed=0, sweep=()),
        "`sweep` must list at least",
    ),
    (
        lambda: unbiased(S, Exponential(), X_UNBIASED, trials=10, seed=0, sweep=(0,)),
        "`sweep` must be >= 1",
    ),
    (
        lambda: unbiased("s", Exponential(), X_UNBIASED, trials=10, seed=0),
        "`sample` must be callable",
    ),
    (
        lambda: ratio_bias(lambda r: r, X_UNBIASED, X_UNBIASED, X_UNBIASED, seed=0),
        "`sampler` must be a RandomFeatureSampler",
    ),
    (
        lambda: ratio_bias(
            S, X_UNBIASED, X_UNBIASED, X_UNBIASED[:2], seed=0, trials=10, num_features=(2, 4, 8)
        ),
        "`V` must have one row per row of `K`",
    ),
    (
        lambda: ratio_bias(
            S,
            X_UNBIASED,
            X_UNBIASED,
            X_UNBIASED * np.nan,
            seed=0,
            trials=10,
            num_features=(2, 4, 8),
        ),
        "`V` must be finite",
    ),
    (
        lambda: ratio_bias(
            S, X_UNBIASED, X_UNBIASED, X_UNBIASED, seed=0, trials=10, num_features=8
        ),
        "`num_features` must be a sequence",
    ),
    (
        lambda: ratio_bias(
            S, X_UNBIASED, X_UNBIASED, X_UNBIASED, seed=0, trials=10, num_features=(2, 2, 8)
        ),
        "three distinct m",
    ),
    (
        lambda: ratio_bias(
            S, X_UNBIASED, X_UNBIASED, X_UNBIASED, seed=None, trials=10, num_features=(2, 4, 8)
        ),
        "`seed` must be given",
    ),
    (lambda: default_points(0, 2, seed=0), "`n` must be >= 1"),
    (lambda: default_points(2, 2, seed=0, max_norm=math.inf), "`max_norm` must be finite"),
    (lambda: default_points(2, 2, seed=None), "`seed` must be given"),
    (lambda: write_report("x", "/nonexistent"), "`report` must be an UnbiasedReport"),
]


@pytest.mark.parametrize("call, text", UNBIASED_BAD)
def test_unbiased_bad_input(call, text):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert text in str(info.value)


def test_write_report_refuses_a_non_path(tmp_path):
    rep = unbiased(S, Exponential(), X_UNBIASED, trials=200, seed=0)
    with pytest.raises(InvalidArgument, match="`out_dir` must be a folder path"):
        write_report(rep, 3)
    with pytest.raises(AssertionError):
        assert_unbiased(
            PositiveRandomFeatures.sampler(2, 8, scale=2.0),
            Exponential(),
            X_UNBIASED,
            trials=2000,
            seed=0,
        )


def test_unbiased_at_n1_d1_and_tiny_norms():
    rep = unbiased(
        PositiveRandomFeatures.sampler(1, 4), Exponential(), np.array([[0.3]]), trials=4000, seed=0
    )
    assert rep.verdict == "pass" and len(rep.pairs) == 1
    # targets beyond the float range: a clean NumericalFailure, never a verdict on inf
    with pytest.raises(NumericalFailure, match="overflows float64"):
        unbiased(S, Exponential(), X_UNBIASED * 1e3, trials=10, seed=0)
    tiny = unbiased(
        TrigonometricRandomFeatures.sampler(2, 4),
        Exponential(),
        X_UNBIASED * 1e-300,
        trials=200,
        seed=0,
    )
    # at |x| ~ 1e-300 the trigonometric estimate is exactly 1 in every trial
    assert all(p.verdict == "exact" for p in tiny.pairs)


def test_gaussian_target_of_positive_features_is_a_clean_failure():
    # a sampler checked against the wrong kernel is a verdict (fail), not an error
    rep = unbiased(S, Gaussian(), X_UNBIASED, trials=3000, seed=0)
    assert rep.verdict == "fail"


def test_read_only_inputs_everywhere():
    Xr = readonly(X_UNBIASED)
    Yr = readonly(X_UNBIASED[:2] * 0.5)
    unbiased(S, Exponential(), Xr, Yr, trials=100, seed=0)
    Vr = readonly([[1.0], [-1.0]])
    ratio_bias(S, Xr, Yr, Vr, seed=0, trials=200, num_features=(2, 4, 8))
    assert np.array_equal(Xr, X_UNBIASED)


UNBIASED_POINTS = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 3), st.just(2)),
    elements=st.one_of(
        st.floats(-1e3, 1e3, allow_subnormal=True),
        st.sampled_from([0.0, 1e-300, -1e-300, 5e-324]),
    ),
)


@settings(max_examples=8, deadline=None)
@given(X=UNBIASED_POINTS)
def test_unbiased_answers_or_fails_cleanly(random_feature_map, X):
    cls = random_feature_map
    try:
        rep = unbiased(cls.sampler(2, 3), Exponential(), X, trials=50, seed=0)
    except CLEAN:
        return
    assert rep.verdict in ("pass", "fail", "inconclusive")
    assert all(not math.isnan(p.mean) for p in rep.pairs)


@settings(max_examples=5, deadline=None)
@given(scale=st.sampled_from([1e-300, 0.3, 1.0, 30.0]))
def test_ratio_bias_answers_or_fails_cleanly(scale):
    Q = np.full((1, 2), 0.2) * scale
    try:
        r = ratio_bias(S, Q, Q, np.ones((1, 1)), seed=0, trials=200, num_features=(2, 4, 8))
    except CLEAN:
        return
    assert isinstance(r.passed, bool)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 5), d=st.integers(1, 4), mx=st.floats(1e-300, 1e300))
def test_default_points_total(n, d, mx):
    P = default_points(n, d, seed=0, max_norm=mx)
    assert P.shape == (n, d) and np.isfinite(P).all()
