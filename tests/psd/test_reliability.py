"""Reliability tables for check_psd, mercer_features, assert_psd and Nystrom.

Bad input (wrong types, ranks, shapes, empty, NaN/Inf, complex/object
dtypes, user kernels that raise or return wrong shapes / NaN / complex values)
gives ``InvalidArgument`` naming the argument; extreme values (entries near
the float64 limits, subnormal entries, nearly duplicate points, badly
conditioned and rank-deficient Grams, n = 1, d = 1, float16 / int / bool /
non-contiguous input) give a correct answer or a clean ``NumericalFailure``,
never a verdict computed from inf or NaN; read-only inputs are never written.
One Hypothesis test per public function checks that contract.  The same for
``verify.kernel`` is in ``tests/verify/test_reliability.py``, for the
``psd``, ``kernel`` and ``unbiased`` commands in ``tests/cli/test_cli.py``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import Gaussian, Linear
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.psd import Nystrom, Verdict, check_psd, mercer_features
from kernelcheck.testing import assert_kernel, assert_psd
from kernelcheck.verify import kernel as verify_kernel

CLEAN = (InvalidArgument, NumericalFailure)


def _readonly(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


X = _readonly(np.random.default_rng(0).normal(size=(4, 2)))


def _raises(A, B=None):
    raise ZeroDivisionError("boom")


def _nan(A, B=None):
    return np.full((A.shape[0], A.shape[0] if B is None else B.shape[0]), np.nan)


def _complex(A, B=None):
    return (A @ (A if B is None else B).T).astype(complex)


def _lin_then_wrong(A, B=None):
    return A @ A.T if B is None else np.ones((A.shape[0], 7))


def _lin_then_nan(A, B=None):
    return A @ A.T if B is None else _nan(A, B)


MATRICES_BAD = [
    (np.ones((2, 3)), "`K` must be a square 2-d matrix"),
    (np.ones((2, 2, 2)), "`K` must be a square 2-d matrix"),
    (np.ones(3), "`K` must be a square 2-d matrix"),
    (np.zeros((0, 0)), "`K` must not be empty"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "`K` must be finite"),
    (np.array([[np.inf, 0.0], [0.0, 1.0]]), "`K` must be finite"),
    (np.eye(2) + 0j, "`K` must be real"),
    (np.array([[1, 0], [0, 1]], dtype=object), "`K` must be a real numeric array"),
    (np.eye(2, dtype=np.longdouble), "extended precision"),
    ("abc", "`K` must be a numeric array"),
    (None, "`K` must be a real numeric array"),
    ([[1, 2], [3]], "`K` must be a numeric array"),
    (np.array([[1.0, 2.0], [0.0, 1.0]]), "`K` must be symmetric"),
]


@pytest.mark.parametrize("fn", [check_psd, mercer_features, assert_psd])
@pytest.mark.parametrize("K, text", MATRICES_BAD)
def test_matrix_functions_bad_input(fn, K, text):
    if (
        K is not None
        and isinstance(K, np.ndarray)
        and K.dtype == np.longdouble
        and np.finfo(np.longdouble).bits <= 64
    ):
        pytest.skip("long double is float64 on this platform")
    with pytest.raises(InvalidArgument) as info:
        fn(K)
    assert text in str(info.value)


NYSTROM_BAD = [
    (lambda: Nystrom("lin", X), "`kernel` must be a kernel (callable), got str 'lin'"),
    (
        lambda: Nystrom(_raises, X),
        "`kernel`: the call kernel(landmarks) raised ZeroDivisionError: boom",
    ),
    (lambda: Nystrom(_nan, X), "`kernel(landmarks)` must be finite"),
    (lambda: Nystrom(_complex, X), "`kernel`: the call kernel(landmarks) returned array of shape"),
    (
        lambda: Nystrom(lambda A, B=None: np.ones((3, 5)), X),
        "`kernel(landmarks)` must be a (4, 4) Gram",
    ),
    (
        lambda: Nystrom(lambda A, B=None: np.ones(4), X),
        "`kernel(landmarks)` must have 2 dimensions",
    ),
    (lambda: Nystrom(Linear(), np.ones(3)), "`landmarks` must be a 2-d array"),
    (lambda: Nystrom(Linear(), X, tol=-1), "`tol` must be >= 0"),
    (lambda: Nystrom(lambda A, B=None: -np.eye(A.shape[0]), X), "`K` is not PSD within tol"),
    (lambda: Nystrom(_lin_then_wrong, X)(X[:2]), "`kernel(Y, landmarks)` must have shape (2, 4)"),
    (lambda: Nystrom(_lin_then_nan, X)(X[:2]), "`kernel(Y, landmarks)` must be finite"),
    (lambda: Nystrom(Linear(), X)(np.ones((2, 3))), "`Y` must have d = 2 columns"),
    (lambda: Nystrom(Linear(), X)(np.array([[np.nan, 0.0]])), "`Y` must be finite"),
    (lambda: Nystrom(Linear(), X).approximate_kernel(X, np.ones((1, 3))), "`Y` must have d = 2"),
    (lambda: mercer_features(Linear()(X)).extend(_raises, X), "raised ZeroDivisionError: boom"),
    (
        lambda: mercer_features(Linear()(X)).extend(lambda A: np.ones((2, 2)), X),
        "must be a (4, 4) Gram",
    ),
    (lambda: mercer_features(Linear()(X)).extend(_nan, X), "`kernel(landmarks)` must be finite"),
    (
        lambda: mercer_features(Linear()(X)).extend(Linear(), X[:3]),
        "`landmarks` must have n = 4 rows",
    ),
    (lambda: mercer_features(Linear()(X)).extend(Gaussian(), X), "differs from the decomposed K"),
]


@pytest.mark.parametrize("call, text", NYSTROM_BAD)
def test_nystrom_bad_input_and_bad_kernels(call, text):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert text in str(info.value)


# ---------------------------------------------------------------------------
# extreme values
# ---------------------------------------------------------------------------


def _sylvester_psd(K):
    """PSD by Sylvester's criterion on all principal minors, exactly (n <= 3)."""
    import itertools

    def det(M):
        if len(M) == 1:
            return M[0][0]
        return sum(
            (-1) ** j * M[0][j] * det([r[:j] + r[j + 1 :] for r in M[1:]]) for j in range(len(M))
        )

    n = K.shape[0]
    M = [[Fraction(float(K[i, j])) for j in range(n)] for i in range(n)]
    return all(
        det([[M[i][j] for j in S] for i in S]) >= 0
        for r in range(1, n + 1)
        for S in itertools.combinations(range(n), r)
    )


EXTREME = [
    np.full((2, 2), 1e308),  # singular PSD at the top of the range
    np.array([[1e308, -1e308], [-1e308, 1e308]]),
    np.array([[1e308, 1.7e308], [1.7e308, 1e308]]),  # indefinite near overflow
    np.eye(3) * 5e-324,  # subnormal PD
    np.array([[5e-324, 1e-323], [1e-323, 5e-324]]),  # subnormal indefinite
    np.array([[1e-300, 0.0], [0.0, 1e300]]),
    np.array([[1.0, 1.0 - 2.0**-52], [1.0 - 2.0**-52, 1.0]]),  # nearly duplicate points
    np.array([[-1.0]]),
    np.array([[0.0]]),
    np.array([[7.0]]),
    np.array([[1.0 / (i + j + 1) for j in range(8)] for i in range(8)]),  # Hilbert
]


@pytest.mark.parametrize("i", range(len(EXTREME)))
def test_extreme_matrices_get_correct_exact_verdicts(i):
    K = EXTREME[i]
    r = check_psd(K, tol=0)
    assert r.verdict is not Verdict.INCONCLUSIVE and r.certified
    if K.shape[0] <= 3:
        assert r.is_psd == _sylvester_psd(K)
    if r.verdict is Verdict.NOT_PSD:
        assert r.witness_value < 0 and math.isfinite(r.witness_value)
    d = check_psd(K)  # default tolerance: finite and never NaN
    assert math.isfinite(d.tol.value) and d.verdict is not None


def test_mercer_features_beyond_the_range_fail_cleanly_and_tiny_ones_work():
    with pytest.raises(NumericalFailure, match="scale K by a power of two"):
        mercer_features(np.full((2, 2), 1e308))
    F = mercer_features(np.eye(2) * 1e-310)
    assert F.passed and F.residual == 0.0
    one = mercer_features(np.array([[4.0]]))
    assert one.rank == 1 and np.isclose(one.phi[0, 0], 2.0)
    zero = mercer_features(np.zeros((3, 3)))
    assert zero.rank == 0 and zero.phi.shape == (3, 0)


def test_nystrom_on_nearly_duplicate_and_single_landmarks():
    P = np.array([[0.0], [1e-9], [1.0]])
    phi = Nystrom(Gaussian(), P)
    assert phi.rank <= 3 and np.isfinite(phi(P)).all()
    one = Nystrom(Linear(), np.array([[2.0]]))
    assert np.allclose(one(np.array([[3.0]])) @ one(np.array([[5.0]])).T, 15.0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int64, np.int8, np.bool_])
def test_other_dtypes_and_non_contiguous(dtype):
    K = np.array([[2, 1], [1, 2]]).astype(dtype)
    ref = check_psd(K.astype(np.float64))
    r = check_psd(K)
    assert r.verdict is ref.verdict or dtype is np.bool_
    big = np.asfortranarray(np.kron(np.eye(2), [[2.0, 1.0], [1.0, 2.0]]))
    sub = big[::2, ::2]
    assert check_psd(sub).verdict is check_psd(np.ascontiguousarray(sub)).verdict


# ---------------------------------------------------------------------------
# read-only inputs
# ---------------------------------------------------------------------------


def test_read_only_inputs_are_never_written():
    K = _readonly([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    A = _readonly([[2.0, 1.0], [3.0, 2.0]])
    check_psd(K), check_psd(K, tol=0, method="exact"), check_psd(K, method="mpmath")
    check_psd(K, method="eigh"), check_psd(A, symmetrize=True)
    check_psd(_readonly([[1.0, 2.0], [2.0, 1.0]]))
    F = mercer_features(K)
    Xr = _readonly(X)
    phi = Nystrom(Gaussian(), Xr)
    phi(Xr), phi.approximate_kernel(Xr, Xr)
    F2 = mercer_features(Gaussian()(Xr))
    F2.extend(Gaussian(), Xr)
    verify_kernel(Gaussian(), Xr)
    assert_psd(K)
    assert F.phi.flags.writeable is False and phi.landmarks.flags.writeable is False
    assert np.array_equal(Xr, X)


# ---------------------------------------------------------------------------
# one Hypothesis test per public function
# ---------------------------------------------------------------------------


sym = hnp.arrays(
    np.float64,
    st.integers(1, 4).map(lambda n: (n, n)),
    elements=st.one_of(st.floats(-1e300, 1e300), st.sampled_from([0.0, 5e-324, -1e-310, 1.0])),
).map(lambda A: np.triu(A) + np.triu(A, 1).T)


@settings(max_examples=30, deadline=None)
@given(K=sym, tol=st.sampled_from([None, 0.0, 1.0]))
def test_check_psd_answers_or_fails_cleanly(K, tol):
    try:
        r = check_psd(K, tol=tol)
    except CLEAN:
        return
    if r.verdict is Verdict.NOT_PSD:
        assert math.isfinite(r.witness_value) or r.witness_value == -math.inf
    assert math.isfinite(r.tol.value)


@settings(max_examples=25, deadline=None)
@given(K=sym)
def test_mercer_features_answer_or_fail_cleanly(K):
    try:
        F = mercer_features(K)
    except CLEAN:
        return
    assert F.passed and np.isfinite(F.phi).all() and math.isfinite(F.error_bound)


@settings(max_examples=15, deadline=None)
@given(
    P=hnp.arrays(
        np.float64, st.tuples(st.integers(1, 4), st.just(1)), elements=st.floats(-1e3, 1e3)
    ),
    kind=st.sampled_from(["gauss", "linear", "nan", "raise", "shape"]),
)
def test_nystrom_answers_or_fails_cleanly(P, kind):
    k = {
        "gauss": Gaussian(),
        "linear": Linear(),
        "nan": _lin_then_nan,
        "raise": _raises,
        "shape": _lin_then_wrong,
    }[kind]
    try:
        phi = Nystrom(k, P)
        out = phi(P)
    except CLEAN:
        assert kind not in ("gauss", "linear")
        return
    assert np.isfinite(out).all()


@settings(max_examples=10, deadline=None)
@given(K=sym)
def test_assert_psd_and_assert_kernel_raise_only_assertions_or_clean_errors(K):
    try:
        assert_psd(K)
    except (AssertionError, *CLEAN):
        pass
    assert assert_kernel(Linear(), np.array([[1.0, 2.0]])).passed
