"""Reliability of the verifiers: verify.feature_map, verify.unbiased / ratio_bias,
verify.kernel and verify.attention, and their pytest twins.

The contract (docs/reliability.md): a verifier either returns a report or
raises a clean error -- ``InvalidArgument`` naming the argument,
``NumericalFailure`` (``BadNormalizer`` for attention) -- never a verdict
computed from NaN; a user's map, sampler, kernel or layer that raises or
returns NaN, complex or wrongly shaped values is refused or reported as a
failure, never passed.  One Hypothesis test per verifier checks that contract
on drawn inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck import verify
from kernelcheck.errors import (
    BadNormalizer,
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
    Linear,
    Polynomial,
    kernel_from_function,
)
from kernelcheck.testing import assert_feature_map, assert_unbiased
from kernelcheck.verify import default_points, ratio_bias, unbiased, write_report
from kernelcheck.verify import kernel as verify_kernel

CLEAN = (InvalidArgument, NumericalFailure)


def _readonly(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


X_FEATURES = np.random.default_rng(3).normal(size=(4, 2))
X_UNBIASED = _readonly(np.random.default_rng(0).normal(size=(3, 2)) * 0.3)
X_KERNEL = _readonly(np.random.default_rng(0).normal(size=(4, 2)))
CLEAN_ATTENTION = (InvalidArgument, NumericalFailure, BadNormalizer)


# ---------------------------------------------------------------------------
# verify.feature_map and assert_feature_map
# ---------------------------------------------------------------------------


def _point_cases(name, call):
    return [
        (
            f"{name}-1d",
            lambda: call(np.ones(3)),
            InvalidArgument,
            r"^`X` must be a 2-d array of shape \(n, d\), got array of shape \(3,\) and dtype "
            r"float64 \(a single point x is passed as x\[None, :\]",
        ),
        (
            f"{name}-3d",
            lambda: call(np.ones((2, 2, 2))),
            InvalidArgument,
            r"^`X` must be a 2-d array of shape \(n, d\), got array of shape \(2, 2, 2\)",
        ),
        (
            f"{name}-empty",
            lambda: call(np.ones((0, 2))),
            InvalidArgument,
            r"^`X` must not be empty, got array of shape \(0, 2\)",
        ),
        (
            f"{name}-nan",
            lambda: call(np.array([[1.0, np.nan]])),
            InvalidArgument,
            r"^`X` must be finite, but 1 entry is NaN or Inf \(first at index \(0, 1\)",
        ),
        (
            f"{name}-inf",
            lambda: call(np.array([[np.inf], [-np.inf]])),
            InvalidArgument,
            r"^`X` must be finite, but 2 entries are NaN or Inf \(first at index \(0, 0\)",
        ),
        (
            f"{name}-complex",
            lambda: call(X_FEATURES + 0j),
            InvalidArgument,
            r"^`X` must be real, got complex",
        ),
        (
            f"{name}-object",
            lambda: call(X_FEATURES.astype(object)),
            InvalidArgument,
            r"^`X` must be a real numeric array, got array of shape \(4, 2\) and dtype object",
        ),
        (
            f"{name}-str",
            lambda: call("points"),
            InvalidArgument,
            r"^`X` must be a numeric array, got str 'points'",
        ),
        (
            f"{name}-ragged",
            lambda: call([[1.0], [1.0, 2.0]]),
            InvalidArgument,
            r"^`X` must be a numeric array, got list",
        ),
    ]


# Bad-input table: (id, call, error, message regex from the start)
FEATURE_MAP_BAD = _point_cases("verify", lambda Z: verify.feature_map(Linear().features(), Z)) + [
    # verify.feature_map
    (
        "verify-phi",
        lambda: verify.feature_map(3, X_FEATURES),
        InvalidArgument,
        r"^`phi` must be callable, got int 3",
    ),
    (
        "verify-no-kernel",
        lambda: verify.feature_map(lambda Z: Z, X_FEATURES),
        InvalidArgument,
        r"^`kernel` must be given when `phi` does not carry one",
    ),
    (
        "verify-kernel-type",
        lambda: verify.feature_map(lambda Z: Z, X_FEATURES, kernel=np.dot),
        InvalidArgument,
        r"^`kernel` must be a kernelcheck Kernel, got",
    ),
    (
        "verify-Y-dim",
        lambda: verify.feature_map(Linear().features(), X_FEATURES, np.ones((2, 3))),
        InvalidArgument,
        r"^`Y` must have d = 2 columns, got array of shape \(2, 3\)",
    ),
    (
        "verify-ops",
        lambda: verify.feature_map(Linear().features(), X_FEATURES, feature_ops=-1),
        InvalidArgument,
        r"^`feature_ops` must be >= 0, got -1",
    ),
    (
        "verify-phi-raises",
        lambda: verify.feature_map(lambda Z: 1 / 0, X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi` on `X` raised ZeroDivisionError: division by zero",
    ),
    (
        "verify-phi-shape",
        lambda: verify.feature_map(lambda Z: Z[:2], X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi\(X\)` must have shape \(4, D\), got array of shape \(2, 2\)",
    ),
    (
        "verify-phi-1d",
        lambda: verify.feature_map(lambda Z: Z[:, 0], X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi\(X\)` must have shape \(4, D\), got array of shape \(4,\)",
    ),
    (
        "verify-phi-nan",
        lambda: verify.feature_map(lambda Z: Z * np.nan, X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi\(X\)` must be finite",
    ),
    (
        "verify-phi-Y-nan",
        lambda: verify.feature_map(
            lambda Z: Z if Z.shape[0] == 4 else Z * np.nan,
            X_FEATURES,
            np.ones((3, 2)),
            kernel=Linear(),
        ),
        InvalidArgument,
        r"^`phi\(Y\)` must be finite",
    ),
    (
        "verify-phi-complex",
        lambda: verify.feature_map(lambda Z: Z + 1j, X_FEATURES, kernel=Linear()),
        InvalidArgument,
        r"^`phi` on `X` returned array of shape \(4, 2\) and dtype complex128; expected real",
    ),
    (
        "verify-phi-D",
        lambda: verify.feature_map(
            lambda Z: Z[:, : 2 if Z.shape[0] == 4 else 1],
            X_FEATURES,
            np.ones((3, 2)),
            kernel=Linear(),
        ),
        InvalidArgument,
        r"^`phi` returned 2 features on X but 1 on Y",
    ),
    (
        "verify-overflow",
        lambda: verify.feature_map(Polynomial(2).features(), [[1e200]]),
        NumericalFailure,
        r"^\(Polynomial\(2\)\)\.features\(form='symmetric'\) overflows float64 "
        r"at feature 0 of row 0",
    ),
    (
        "verify-function-kernel",
        lambda: verify.feature_map(
            lambda Z: Z, X_FEATURES, kernel=kernel_from_function(lambda x, y: 0.0)
        ),
        InvalidArgument,
        r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error model",
    ),
]


EXTREME = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1e-300, -5e-324, 1e-160, 1e154, -1e154, 30.0, 700.0]),
)


POINTS = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(
    lambda nd: hnp.arrays(np.float64, nd, elements=EXTREME)
)


@settings(max_examples=40, deadline=None)
@given(Z=POINTS)
def test_verify_feature_map_gives_a_verdict_or_fails_cleanly(finite_kernel, Z):
    """A verdict is never computed from NaN: it is True for exact maps, or a clean error."""
    k = finite_kernel
    Z.setflags(write=False)
    try:
        report = verify.feature_map(k.features(), Z)
    except CLEAN:
        return
    assert math.isfinite(report.max_abs_error) and math.isfinite(report.tolerance.value)
    assert report.passed, str(report)


def test_verify_feature_map_passes_a_correct_map_whose_entries_are_subnormal():
    """The tolerance has an underflow term: sqrt(3) * 5e-324 rounds to 1e-323 (15% off),
    harmless in absolute terms (eta), and the map is correct."""
    Z = np.array([[-5e-324], [-1.4e-45], [700.0], [-5e-324]])
    report = verify.feature_map((3.0 * Linear()).features(), Z)
    assert report.passed, str(report)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["raise", "nan", "shape", "scaled"]))
def test_assert_feature_map_with_a_misbehaving_map(kind):
    def phi(Z):
        if kind == "raise":
            raise RuntimeError("boom")
        if kind == "nan":
            return np.full_like(Z, np.nan)
        if kind == "shape":
            return Z[:1]
        return 2 * Z

    if kind == "scaled":
        expected = r"(?m)^refuted: phi does NOT reproduce Linear\(\)"
        with pytest.raises(AssertionError, match=expected):
            assert_feature_map(phi, X_FEATURES, kernel=Linear())
    else:
        with pytest.raises(InvalidArgument, match=r"^`phi"):
            assert_feature_map(phi, X_FEATURES, kernel=Linear())


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
    Xr = _readonly(X_UNBIASED)
    Yr = _readonly(X_UNBIASED[:2] * 0.5)
    unbiased(S, Exponential(), Xr, Yr, trials=100, seed=0)
    Vr = _readonly([[1.0], [-1.0]])
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


# ---------------------------------------------------------------------------
# verify.kernel
# ---------------------------------------------------------------------------


def _nan(A, B=None):
    return np.full((A.shape[0], A.shape[0] if B is None else B.shape[0]), np.nan)


KERNEL_BAD = [
    (lambda: verify_kernel("lin", X_KERNEL), "`kernel` must be a kernel"),
    # a plain function is read as f(X, Y) -> block (then checked like any kernel's) ...
    (lambda: verify_kernel(_nan, X_KERNEL), "returned a non-finite value"),
    # ... or refused at once when no reading fits
    (
        lambda: verify_kernel(lambda A, B=None: np.ones((4, 3)), X_KERNEL),
        "no reading works",
    ),
    (
        lambda: verify_kernel(kernel_from_function(lambda x, y: float("nan")), X_KERNEL),
        "non-finite value",
    ),
    (
        lambda: verify_kernel(kernel_from_function(lambda x, y: 1 / 0), X_KERNEL),
        "raised ZeroDivisionError",
    ),
    (lambda: verify_kernel(Linear(), np.ones(3)), "`X` must be a 2-d array"),
    (lambda: verify_kernel(Linear(), np.array([[np.inf, 0.0]])), "`X` must be finite"),
    (lambda: verify_kernel(Linear(), X_KERNEL, dim=3), "does not match `X`"),
    (lambda: verify_kernel(Linear()), "`dim` must be given"),
    (lambda: verify_kernel(Linear(), dim=0), "`dim` must be >= 1"),
    (lambda: verify_kernel(Linear(), dim=2, budget=0), "`budget` must be >= 1"),
    (
        lambda: verify_kernel(Linear(), dim=2, seed=-1, budget=1),
        "`seed` must be a non-negative int",
    ),
    (
        lambda: verify_kernel(Linear(), dim=2, seed="a", budget=1),
        "`seed` must be a non-negative int",
    ),
]


@pytest.mark.parametrize("call, text", KERNEL_BAD)
def test_verify_kernel_bad_input(call, text):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert text in str(info.value)


def test_verify_kernel_extremes():
    assert verify_kernel(Gaussian(), np.ones((1, 1))).passed
    dup = verify_kernel(Gaussian(), np.ones((5, 1)) + np.arange(5)[:, None] * 1e-12)
    assert dup.passed and dup.verdict in ("psd", "rounding")
    with pytest.raises(InvalidArgument, match="raised OverflowError"):
        verify_kernel(
            kernel_from_function(lambda x, y: math.exp(x @ y), name="e"), np.array([[1e3, 0.0]])
        )
    from kernelcheck import Exponential

    with pytest.raises(NumericalFailure, match="overflows float64"):
        verify_kernel(Exponential(), np.array([[1e3, 0.0]]))


@settings(max_examples=10, deadline=None)
@given(
    P=hnp.arrays(
        np.float64, st.tuples(st.integers(1, 4), st.integers(1, 2)), elements=st.floats(-1e3, 1e3)
    )
)
def test_verify_kernel_answers_or_fails_cleanly(P):
    try:
        rep = verify_kernel(Gaussian(), P)
    except CLEAN:
        return
    assert rep.passed  # a Gaussian Gram is PSD: psd or rounding, never a violation


# ---------------------------------------------------------------------------
# verify.attention
# ---------------------------------------------------------------------------


# Bad-input table: (id, call, error, message regex from the start)
ATTENTION_BAD = [
    # verify.attention
    (
        "verify-fn",
        lambda: verify.attention(3),
        InvalidArgument,
        r"^`fn` must be callable, got int 3",
    ),
    (
        "verify-both",
        lambda: verify.attention(att.softmax, kernel=Linear(), feature_map=abs),
        InvalidArgument,
        r"^pass at most one of `kernel` and `feature_map`, got both",
    ),
    (
        "verify-kernel",
        lambda: verify.attention(att.softmax, kernel="exp"),
        InvalidArgument,
        r"^`kernel` must be callable, got str 'exp'",
    ),
    (
        "verify-feature-map",
        lambda: verify.attention(att.softmax, feature_map=1.0),
        InvalidArgument,
        r"^`feature_map` must be callable, got float 1\.0",
    ),
    (
        "verify-scale-with-kernel",
        lambda: verify.attention(att.softmax, kernel=Exponential(), scale=1.0),
        InvalidArgument,
        r"^`scale` applies to the softmax reference only",
    ),
    (
        "verify-scale",
        lambda: verify.attention(att.softmax, scale=-1.0),
        InvalidArgument,
        r"^`scale` must be > 0, got -1\.0",
    ),
    (
        "verify-causal",
        lambda: verify.attention(att.softmax, causal="no"),
        InvalidArgument,
        r"^`causal` must be True or False, got str 'no'",
    ),
    (
        "verify-seed-none",
        lambda: verify.attention(att.softmax, seed=None),
        InvalidArgument,
        r"^`seed` must be given",
    ),
    (
        "verify-seed-neg",
        lambda: verify.attention(att.softmax, seed=-1),
        InvalidArgument,
        r"^`seed` must be a non-negative int",
    ),
    (
        "verify-n",
        lambda: verify.attention(att.softmax, n=1),
        InvalidArgument,
        r"^`n` must be >= 2, got 1",
    ),
    (
        "verify-d",
        lambda: verify.attention(att.softmax, d=0),
        InvalidArgument,
        r"^`d` must be >= 1, got 0",
    ),
    (
        "verify-d_v",
        lambda: verify.attention(att.softmax, d_v=0),
        InvalidArgument,
        r"^`d_v` must be >= 1, got 0",
    ),
    (
        "verify-batch-list",
        lambda: verify.attention(att.softmax, batch_shape=[2]),
        InvalidArgument,
        r"^`batch_shape` must be a tuple of ints, got list \[2\]",
    ),
    (
        "verify-batch-zero",
        lambda: verify.attention(att.softmax, batch_shape=(0,)),
        InvalidArgument,
        r"^`batch_shape` must be >= 1, got 0",
    ),
    (
        "verify-dtype",
        lambda: verify.attention(att.softmax, dtype=np.int32),
        InvalidArgument,
        r"^`dtype` must be one of float64, float32, float16, bfloat16 \(or their dtype objects\), "
        r"got <class 'numpy.int32'>",
    ),
    (
        "verify-feature-ops",
        lambda: verify.attention(att.softmax, feature_ops=-1),
        InvalidArgument,
        r"^`feature_ops` must be >= 0, got -1",
    ),
]


# ---------------------------------------------------------------------------
# One bad-input table: (id, call, error, message regex from the start)
# ---------------------------------------------------------------------------


BAD_CALLS = FEATURE_MAP_BAD + ATTENTION_BAD


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["nan", "raise", "shape", "complex"]))
def test_verify_attention_with_a_misbehaving_layer_is_a_verdict_or_clean(kind):
    """A layer returning garbage is a failed verdict (not a crash); one that raises is reported."""

    def layer(Qx, Kx, Vx):
        if kind == "nan":
            return np.full(Vx.shape, np.nan)
        if kind == "raise":
            raise RuntimeError("layer exploded")
        if kind == "shape":
            return Vx[..., :1]
        return Vx + 1j

    try:
        report = verify.attention(layer, n=4, d=2)
    except CLEAN_ATTENTION:
        return
    assert not report.passed
