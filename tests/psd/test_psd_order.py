"""The order of the rungs of check_psd and the forced methods (claim C5).

``docs/psd.md`` fixes the order: with ``tol = 0`` exact elimination comes
before mpmath (it settles the question outright), with ``tol > 0`` mpmath comes
first; a forced method runs one rung (the Cholesky one includes the
certificate of ``K + tol I``).  The matrices are ``[[1, b], [b, 1]]`` with
eigenvalues ``1 +- b`` exactly, so every verdict has an exact reference.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernelcheck._src.psd.ladder import MPMATH_PRECISIONS
from kernelcheck.psd import Verdict, check_psd

FLOAT_RUNGS = ("diagonal", "cholesky", "minor", "eigh")


def pair(b: float) -> np.ndarray:
    """``[[1, b], [b, 1]]``: ``lambda_min = 1 - |b|`` exactly."""
    return np.array([[1.0, b], [b, 1.0]])


def test_tol0_decides_by_exact_elimination_before_mpmath():
    """C5: ``lambda_min = 2**-50`` is below the float64 certificate's resolution
    (``c ~ 7u``): at ``tol = 0`` the exact rung decides PD, mpmath is not tried;
    with the exact rung out of reach (``max_exact_n = 1``) mpmath decides it."""
    K = pair(1 - 2.0**-50)
    r = check_psd(K, tol=0)
    assert (r.verdict, r.method, r.rungs) == (
        Verdict.POSITIVE_DEFINITE,
        "exact",
        FLOAT_RUNGS + ("exact",),
    )
    r = check_psd(K, tol=0, max_exact_n=1)
    assert (r.verdict, r.method, r.rungs) == (
        Verdict.POSITIVE_DEFINITE,
        "mpmath",
        FLOAT_RUNGS + ("mpmath",),
    )


def test_positive_tol_tries_mpmath_before_exact():
    """C5: ``lambda_min = -(t - 2**-52)`` with ``t = 2**-40``: ``K + t I`` has
    ``lambda_min = 2**-52``, too small for the float64 certificate of ``K + tol I``
    but not for mpmath, which decides before the exact rung.  At ``b = 1 + t``
    exactly, ``K + t I`` is singular: no certificate at any precision, and the exact
    rung decides PSD within tol."""
    t = 2.0**-40
    r = check_psd(pair(1 + (t - 2.0**-52)), tol=t)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "mpmath", True)
    assert r.rungs == FLOAT_RUNGS + ("cholesky+tol", "mpmath")
    assert "tol I" in r.reason
    r = check_psd(pair(1 + t), tol=t)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "exact", True)
    assert r.rungs == FLOAT_RUNGS + ("cholesky+tol", "mpmath", "exact")
    # a hair below: NOT_PSD, with an exact witness below -tol
    r = check_psd(pair(1 + t + 2.0**-52), tol=t)
    assert r.verdict is Verdict.NOT_PSD and r.witness_value < -t


def test_forced_cholesky_includes_the_certificate_of_k_plus_tol():
    """C5: the singular ``[[1, 1], [1, 1]]`` cannot be proven PD, but ``K + tol I``
    can (default tol): the forced Cholesky rung certifies PSD within tol."""
    r = check_psd(pair(1.0), method="cholesky")
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "cholesky", True)
    assert r.rungs == ("cholesky", "cholesky+tol")
    r = check_psd(pair(1.0), tol=0, method="cholesky")
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == ("cholesky",)


@pytest.mark.parametrize(
    "lam,tol,expected", [(0.1, 0.5, True), (-0.2, 0.5, True), (-0.7, 0.5, False)]
)
def test_forced_eigh_reads_psd_off_the_estimate_uncertified(lam, tol, expected):
    """C5: the forced eigh rung says PSD (``certified is False``, the reason naming the
    Cholesky rung as the one that certifies) when ``lambda_min - error >= -tol``;
    below ``-tol`` it returns the eigenvector witness."""
    K = np.diag([lam, 1.0])
    r = check_psd(K, tol=tol, method="eigh")
    assert r.method == "eigh"
    if expected:
        assert (r.verdict, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, False)
        assert r.min_eigenvalue - r.min_eigenvalue_error >= -tol
        # uncertified: the reason points to the rung that can certify
        assert RUNG_WORDS["cholesky"] in r.reason
    else:
        assert r.verdict is Verdict.NOT_PSD and r.witness_value < -tol


def test_forced_mpmath_names_its_last_precision_when_it_cannot_decide():
    """C5: an exactly singular PSD matrix at ``tol = 0``: no certificate and no
    witness at any precision; the reason names the last precision tried."""
    r = check_psd(pair(1.0), tol=0, method="mpmath")
    assert r.verdict is Verdict.INCONCLUSIVE and r.certified is False
    bits = int(re.search(r"at (\d+) bits", r.reason).group(1))
    assert bits == MPMATH_PRECISIONS[-1] == max(MPMATH_PRECISIONS)


def test_exact_rung_decides_k_plus_tol_on_a_finer_binary_grid():
    """C5: ``[[1, b], [b, 1]]`` with ``b = 1 + 2**-10`` has ``lambda_min = -2**-10``;
    with ``tol = 2**-10 - 2**-22`` (finer than the entries) it is NOT_PSD within tol,
    but the exact witness of ``K`` itself, ``[-b, 1]`` (Rayleigh quotient
    ``(1 - b^2) / (1 + b^2) > -tol``), is no witness below ``-tol``: the exact rung
    must decide ``K + tol I`` on the common grid of ``K`` and ``tol`` and return
    its witness.  At ``max_exact_n = n`` the exact rung runs."""
    b = 1 + 2.0**-10
    t = 2.0**-10 - 2.0**-22
    K = pair(b)
    assert (1 - b * b) / (1 + b * b) > -t  # the witness of K alone does not do it
    r = check_psd(K, tol=t, method="exact", max_exact_n=2)
    assert (r.verdict, r.method, r.certified) == (Verdict.NOT_PSD, "exact", True)
    w = [float(x) for x in r.witness]
    q = (w[0] ** 2 + w[1] ** 2 + 2 * b * w[0] * w[1]) / (w[0] ** 2 + w[1] ** 2)
    assert q < -t and r.witness_value < -t
    assert "tol I" in r.reason  # the verdict was reached on K + tol I, and says so
    # and with tol above |lambda_min| it is PSD within tol, decided on the same grid
    r = check_psd(K, tol=2.0**-10 + 2.0**-22, method="exact")
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "exact", True)


#: The words by which a reason names the rung that produced it (the rung names of
#: ``docs/psd.md``): a user reading ``reason`` learns which evidence was used.
RUNG_WORDS = {
    "diagonal": "K[",
    "cholesky": "Cholesky",
    "cholesky+tol": "Cholesky",
    "minor": "minor",
    "eigh": "eigen",
    "mpmath": "-bit",
    "exact": ("exact elimination", "zero matrix"),
}

REASON_CASES = [
    (np.diag([1.0, -1.0]), {"tol": 0}),
    (pair(0.5), {}),
    (pair(2.0), {"tol": 0}),
    (pair(1.0), {"method": "cholesky"}),
    (pair(1.0), {"tol": 0, "method": "cholesky"}),
    (np.diag([0.1, 1.0]), {"tol": 0.5, "method": "eigh"}),
    (pair(1 - 2.0**-50), {"tol": 0}),
    (pair(1 - 2.0**-50), {"tol": 0, "method": "mpmath"}),
    (pair(1 + 2.0**-40 - 2.0**-52), {"tol": 2.0**-40}),
    (pair(1 + 2.0**-40), {"tol": 2.0**-40}),
    (pair(1 + 2.0**-10), {"tol": 2.0**-10 - 2.0**-22, "method": "exact"}),
    (pair(2.0), {"tol": 0, "method": "exact"}),
    (pair(1.0), {"tol": 0, "method": "exact"}),
    (np.eye(3), {"tol": 0, "method": "exact", "max_exact_n": 2}),
    (np.zeros((3, 3)), {"tol": 0, "method": "exact"}),
]


@pytest.mark.parametrize("i", range(len(REASON_CASES)))
def test_reason_names_the_rung_and_the_matrix_certified(i):
    """C5: every ``reason`` names the rung that decided (for INCONCLUSIVE, the last one
    tried, or the forced one when it could not run); a verdict certified through
    ``K + tol I`` says so (``tol I``), a certificate of ``K`` itself does not
    mention the tolerance."""
    K, kwargs = REASON_CASES[i]
    r = check_psd(K, **kwargs)
    # the rung that decided, else the last one tried, else the one asked for
    rung = r.method if r.rungs else kwargs["method"]
    words = RUNG_WORDS[rung]
    assert any(w in r.reason for w in ((words,) if isinstance(words, str) else words)), r.reason
    if r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified and r.method != "exact":
        assert "tol I" in r.reason
    if r.verdict is Verdict.POSITIVE_DEFINITE:
        assert "tol" not in r.reason
    if r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.method == "exact":
        assert ("tol I" in r.reason) == bool(kwargs.get("tol"))
