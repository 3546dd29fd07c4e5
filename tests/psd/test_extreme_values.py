"""PSD verdicts, Mercer features and Nystrom maps at the ends of the float range (claims C5, C6).

Entries near the float64 limits, subnormal entries, nearly duplicate points,
a Hilbert matrix, n = 1: an exact verdict checked against Sylvester's
criterion in fractions, or a clean ``NumericalFailure``, never a verdict
computed from inf or NaN.  One Hypothesis test per public function feeds
symmetric matrices with entries from 5e-324 to 1e300 and requires an answer
with finite numbers or a clean error.  The top of the float64 range is also
in ``test_float_range.py``.
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

CLEAN = (InvalidArgument, NumericalFailure)

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
    d = check_psd(K)  # the default tolerance: a finite number >= 0, never NaN
    assert math.isfinite(d.tol.value) and d.tol.value >= 0
    # a tolerance only widens what is accepted: what is PSD stays PSD, and what the
    # default tolerance refutes is refuted exactly too, by a witness below zero
    if r.is_psd:
        assert d.is_psd, (d.verdict, d.reason)
    if d.verdict is Verdict.NOT_PSD:
        assert r.verdict is Verdict.NOT_PSD and d.witness_value < 0


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


@settings(max_examples=10, deadline=None)
@given(K=sym)
def test_assert_psd_and_assert_kernel_raise_only_assertions_or_clean_errors(K):
    try:
        assert_psd(K)
    except (AssertionError, *CLEAN):
        pass
    assert assert_kernel(Linear(), np.array([[1.0, 2.0]])).passed
