"""Bad input to check_psd, mercer_features, assert_psd and Nystrom is refused by name (C5, C6).

Wrong types, ranks and shapes, empty, NaN/Inf, complex, object and
extended-precision dtypes, and user kernels that raise or return wrong shapes,
NaN or complex values give ``InvalidArgument`` naming the argument (or the call
of the user's kernel); a Hypothesis test feeds Nystrom misbehaving kernels and
requires an answer or a clean error.  Accepted inputs are in
``test_accepted_inputs.py``, extreme values in ``test_extreme_values.py``; the
same for ``verify.kernel`` is in ``tests/verify/test_kernel_bad_input.py``, for
the ``psd``, ``kernel`` and ``unbiased`` commands in ``tests/cli/``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import Gaussian, Linear
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.psd import Nystrom, check_psd, mercer_features
from kernelcheck.testing import assert_psd
from tests.inputs import readonly

CLEAN = (InvalidArgument, NumericalFailure)


X = readonly(np.random.default_rng(0).normal(size=(4, 2)))


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
