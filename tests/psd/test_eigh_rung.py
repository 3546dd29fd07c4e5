"""The eigenvalue rung of ``check_psd`` (``method="eigh"`` and the estimate, claim C5).

The forced eigenvalue method to its end: the certified Cholesky of ``K`` or of
``K + tol I`` behind a clear estimate, and the uncertified estimate, said to be
uncertified, when neither certificate exists (a matrix whose Rump shift is
beyond the float range); its witness is the eigenvector; its error is the
model the rung documents (``gamma_{p(n)} ||K||_F + (n + 2)^2 eta``,
:mod:`~kernelcheck._src.psd.tolerance`) rounded up and no more, with the
remainder of an inexact symmetric part.  Every verdict is checked against
exact arithmetic (:mod:`tests.psd.oracle`, :mod:`tests.psd.sylvester`), every
reason against the result's own fields.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.psd.inputs import check_psd_iv
from kernelcheck._src.psd.ladder import _Ladder
from kernelcheck._src.psd.tolerance import eigh_error
from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import assert_witness, exact_kind

BIG = float(np.finfo(np.float64).max)
ETA = math.ldexp(1.0, -1074)
NUM = r"(-?[0-9.]+(?:e[+-]?[0-9]+)?|nan|inf)"


def _eigh_model(K) -> float:
    """The eigh rung's documented error bound on ``lambda_min`` of a symmetric float ``K``."""
    n = K.shape[0]
    return eigh_error(K) + (n + 2) ** 2 * ETA


# ---------------------------------------------------------------------------
# method="eigh" to its end
# ---------------------------------------------------------------------------


def test_forced_eigh_reports_an_uncertified_estimate_when_no_certificate_exists():
    """``[[b/2, b/4], [b/4, b/2]]`` with ``b`` the largest float has eigenvalues
    ``3b/4`` and ``b/4`` exactly (binary entries): the estimate is far above
    ``-tol`` by its error bound, but Rump's shift of either Cholesky is beyond the
    float range, so no certificate exists and the verdict is the estimate, not
    certified, with no proven lower bound."""
    K = np.array([[BIG / 2, BIG / 4], [BIG / 4, BIG / 2]])
    assert exact_kind(K.tolist()) == "pd"
    r = check_psd(K, method="eigh")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.is_psd
    assert r.certified is False and r.method == "eigh"
    assert r.rungs == ("eigh", "cholesky", "cholesky+tol")
    assert "estimate only" in r.reason
    assert r.lower_bound == -math.inf and r.witness is None
    lam = Fraction(BIG) / 4
    err = _eigh_model(K)
    assert err <= r.min_eigenvalue_error <= 2 * err
    assert abs(Fraction(r.min_eigenvalue) - lam) <= Fraction(r.min_eigenvalue_error)
    assert r.min_eigenvalue - r.min_eigenvalue_error >= -r.tol.value
    # the same matrix with method="cholesky" has no certificate: INCONCLUSIVE
    assert check_psd(K, method="cholesky").verdict is Verdict.INCONCLUSIVE


def test_forced_eigh_without_a_bounded_estimate_is_inconclusive_with_its_numbers():
    """``||K||_F`` overflows for ``[[b/2, b/2], [b/2, b]]``: the error bound is
    infinite, nothing separates, and the reason quotes the estimate and its bound."""
    K = np.array([[BIG / 2, BIG / 2], [BIG / 2, BIG]])
    r = check_psd(K, method="eigh")
    assert r.verdict is Verdict.INCONCLUSIVE and not r.certified and not r.is_psd
    assert r.rungs == ("eigh",) and r.min_eigenvalue_error == math.inf
    m = re.search(rf"lambda_min ~ {NUM} \+- {NUM} does not separate", r.reason)
    assert m is not None
    assert float(m.group(1)) == pytest.approx(r.min_eigenvalue, rel=1e-2)
    assert m.group(2) == "inf"


def test_forced_eigh_hands_a_positive_estimate_to_the_certified_cholesky():
    """``[[3, 1], [1, 3]]`` (eigenvalues 2 and 4): the estimate is above 0 by its
    bound, the Cholesky of ``K`` certifies PD; its estimate ``(0, est]`` holds 2."""
    K = np.array([[3.0, 1.0], [1.0, 3.0]])
    r = check_psd(K, method="eigh")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified
    assert r.method == "cholesky" and r.rungs == ("eigh", "cholesky")
    assert r.lower_bound == 0.0
    assert 0 < 2.0 <= r.min_eigenvalue + r.min_eigenvalue_error


@pytest.mark.parametrize("t", [2.0**-20, 2.0**-10])
def test_forced_eigh_hands_an_estimate_within_tol_to_the_cholesky_of_k_plus_tol(t):
    """The singular ``[[1, 1], [1, 1]]`` (eigenvalues 0 and 2): the estimate is within
    its bound of 0, so no PD certificate is tried; ``K + tol I`` is certified."""
    K = np.ones((2, 2))
    assert exact_kind(K.tolist()) == "psd"
    r = check_psd(K, tol=t, method="eigh")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.method == "cholesky" and r.rungs == ("eigh", "cholesky+tol")
    assert -t <= r.lower_bound <= 0.0
    assert abs(r.min_eigenvalue) <= r.min_eigenvalue_error
    assert _eigh_model(K) <= r.min_eigenvalue_error <= 2 * _eigh_model(K)


def test_forced_eigh_at_tol_zero_on_a_singular_matrix_is_inconclusive():
    """tol = 0 on the singular ``[[1, 1], [1, 1]]``: an estimate cannot answer the exact
    question and no Cholesky certificate exists (lambda_min = 0 exactly)."""
    r = check_psd(np.ones((2, 2)), tol=0, method="eigh")
    assert r.verdict is Verdict.INCONCLUSIVE and not r.certified
    assert "cholesky+tol" not in r.rungs and r.rungs[0] == "eigh"


@pytest.mark.parametrize("b", [2.0, 3.0, 0.5 + 2.0**-30])
def test_the_eigh_rung_witness_is_the_eigenvector_and_its_estimate_within_the_model(b):
    """``[[1, b], [b, 1]]`` has ``lambda_min = 1 - b`` exactly; for ``b > 1`` its
    eigenvector is an exact witness, for ``b < 1`` the matrix is PD."""
    K = np.array([[1.0, b], [b, 1.0]])
    r = check_psd(K, tol=0, method="eigh")
    lam = 1 - Fraction(b)
    assert abs(Fraction(r.min_eigenvalue) - lam) <= Fraction(r.min_eigenvalue_error) or (
        r.method == "cholesky"
    )
    if b > 1:
        assert_witness(K, r)
        assert r.method == "eigh" and r.rungs == ("eigh",)
        assert r.upper_bound >= float(lam) and r.min_eigenvalue_error <= 2 * _eigh_model(K)
        assert r.min_eigenvalue_error >= _eigh_model(K)
    else:
        assert r.verdict is Verdict.POSITIVE_DEFINITE


def test_the_eigh_rung_on_the_symmetric_part_reports_lambda_min_of_the_symmetric_part():
    """``symmetrize=True``: the float rungs work on ``H = 2 S``; the reported estimate
    is ``lambda_min(S)`` (here ``S = [[1, 2], [2, 1]]``, ``lambda_min = -1``)."""
    K = np.array([[1.0, 3.0], [1.0, 1.0]])
    r = check_psd(K, tol=0, method="eigh", symmetrize=True)
    S = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert r.symmetrized and r.method == "eigh"
    assert_witness(S, r)
    assert abs(r.min_eigenvalue + 1.0) <= r.min_eigenvalue_error
    assert r.min_eigenvalue_error <= 4 * _eigh_model(S)


@pytest.mark.parametrize("scale", [ETA, 2.0**-1070, 1.0])
def test_the_eigh_rung_error_is_its_model_rounded_up_and_no_more(scale):
    """``scale [[1, 3], [3, 1]]`` (``lambda_min = -2 scale``), down to the subnormals
    where the underflow term ``(n + 2)^2 eta`` dominates: the reported error is the
    model's, rounded up by a few units in the last place (a looser bound would leave
    verdicts inconclusive for no reason)."""
    K = scale * np.array([[1.0, 3.0], [3.0, 1.0]])
    r = check_psd(K, tol=0, method="eigh")
    assert_witness(K, r)
    model = _eigh_model(K)
    # each upward rounding adds at most a few ulps: relative, or eta among the subnormals
    assert model <= r.min_eigenvalue_error <= model * (1 + 2.0**-48) + 2 * ETA
    assert abs(Fraction(r.min_eigenvalue) + 2 * Fraction(scale)) <= Fraction(r.min_eigenvalue_error)


def test_the_eigenvalue_estimate_verdict_says_it_is_not_certified():
    lad = _Ladder(check_psd_iv(np.eye(2), Tolerance(1e-3, "test")))
    lad.lam, lad.lam_err = 0.5, 1e-6
    r = lad.eigh_estimate()
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified is False
    assert "not certified" in r.reason and r.method == "eigh"


def test_the_eigh_error_of_an_inexact_symmetric_part_includes_its_remainder():
    """``K_01 + K_10 = 4 + 2^-52`` is not a float: the float rungs see ``H = 2 S - L``
    with ``||L||_F <= lo``, so the eigenvalue error of ``lambda_min(S)`` is the model's
    on ``H`` plus ``lo``, divided by ``sigma = 2`` (documented in ``_Ladder``); the
    witness is checked on ``S`` exactly (``lambda_min(S) = -1 - 2^-53``)."""
    K = np.array([[1.0, 3.0], [1.0 + 2.0**-52, 1.0]])
    args = check_psd_iv(K, Tolerance(0.0, "test"), "eigh", True)
    assert args.lo_norm > 0 and args.sigma == 2.0
    r = check_psd(K, tol=0, method="eigh", symmetrize=True)
    assert r.method == "eigh" and r.verdict is Verdict.NOT_PSD
    S = [[Fraction(K[i, j]) / 2 + Fraction(K[j, i]) / 2 for j in range(2)] for i in range(2)]
    v = [Fraction(float(x)) for x in r.witness]
    q = sum(v[i] * S[i][j] * v[j] for i in range(2) for j in range(2))
    assert q < 0 and q / sum(x * x for x in v) == Fraction(r.witness_value_exact)
    model = (_eigh_model(args.H) + args.lo_norm) / args.sigma
    assert model <= r.min_eigenvalue_error <= 2 * model
    assert abs(Fraction(r.min_eigenvalue) - (-1 - Fraction(2) ** -53)) <= Fraction(
        r.min_eigenvalue_error
    )
