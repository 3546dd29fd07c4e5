"""Branches of the rung order of ``check_psd`` that the verdict tests pass by (claim C5).

The forced eigenvalue method to its end (the certified Cholesky of ``K`` or of
``K + tol I`` behind the estimate, and the uncertified estimate when neither
certificate exists: a matrix whose Rump shift is beyond the float range), the
2 x 2 minor witness on every sign pattern of its block (its fallback vectors
``(-b, a)``, ``(c, -b)`` and ``(-sign(b) (|c| / |b| + 1), 1)`` are exact
witnesses whenever the block is indefinite, so at ``tol = 0`` the witness
exists exactly when Sylvester's 2 x 2 criterion fails), the exact rung's two
decisions (``K``, then ``K + tol I``) with the proven bounds each sets, and
the reasons of the ladder's size limits.  Every verdict is checked against
exact arithmetic (:mod:`tests.psd.oracle`, :mod:`tests.psd.sylvester`), every
estimate against the eigenvalue error model the rung documents
(``gamma_{p(n)} ||K||_F + (n + 2)^2 eta``, :mod:`~kernelcheck._src.psd.tolerance`),
every reason against the result's own fields.  Matrices are at most 4 x 4 but for
the size limits (``MPMATH_MAX_N + 1`` and ``EXACT_MAX_N + 1`` ones-matrices, decided or
declined without exact or high-precision work): the file runs in about a second.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.psd.inputs import check_psd_iv
from kernelcheck._src.psd.ladder import _Ladder, _unit_scale
from kernelcheck._src.psd.tolerance import eigh_error
from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import assert_witness, exact_kind
from tests.psd.sylvester import det, rayleigh

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


# ---------------------------------------------------------------------------
# the 2 x 2 minor witness
# ---------------------------------------------------------------------------


#: Blocks whose computed eigenvector does not verify (its small component underflows
#: or rounds the quadratic form to >= 0): the fallbacks ``(-b, a)`` (a > 0) and
#: ``(c, -b)`` (a = 0 < c) must give the witness.
FALLBACK_BLOCKS = [
    (2.0**-1004, float.fromhex("0x1.e8d203ed4e7a5p-519"), float.fromhex("0x1.6499b605150cap-58")),
    (
        float.fromhex("0x0.0000004000000p-1022"),
        float.fromhex("0x1.51cb5efdab706p-525"),
        float.fromhex("0x1.d5f2f6214b962p-47"),
    ),
    # 0 < a <= 1, c = 0: of the fallbacks only (-b, a) is a witness
    (float.fromhex("0x1.07d8c07ef00d5p-1"), float.fromhex("0x1.492a477ca1570p-1015"), 0.0),
    (float.fromhex("0x1.72e4f6a431a60p-5"), float.fromhex("0x0.00000431ed8a9p-1022"), 0.0),
    (0.0, float.fromhex("0x1.665a858b1d10ep-594"), float.fromhex("0x1.63038810681d8p-32")),
    (0.0, float.fromhex("0x1.12601062e5d38p-660"), float.fromhex("0x1.e8e61767dda17p-29")),
]


def _blocks():
    """2 x 2 blocks ``[[a, b], [b, c]]`` of every sign pattern, some a rounding away
    from singular (where the computed eigenvector may not verify)."""
    out = []
    for a, b, c in [
        (1.0, 2.0 + 2.0**-51, 4.0),  # ac - b^2 = -2^-49 - 2^-102
        (4.0, 2.0 + 2.0**-51, 1.0),
        (1.0, 1.0 + 2.0**-52, 1.0),
        (3.0, -(2.0**30 + 1.0), 2.0**60 / 3.0),
        (2.0**-30, 1.0, 2.0**30 - 2.0**-22),
        (0.0, 1.0, 5.0),  # a = 0 < c
        (0.0, -3.0, 2.0**-40),
        (-1.0, 0.5, -2.0),  # both diagonal entries negative
        (-(2.0**-60), 2.0**-61, -(2.0**-59)),
        (-1.0, 0.0, -1.0),  # b = 0
        (0.0, 2.0**-1000, 0.0),
        (-3.0, 1e-300, 0.0),
        (2.0, 1.0, 1.0),  # PD: no witness
        (1.0, 1.0, 1.0),  # singular PSD: no witness
        (0.0, 0.0, 7.0),
        (0.0, 0.0, 0.0),
        *FALLBACK_BLOCKS,
    ]:
        out.append((a, b, c))
    return out


@pytest.mark.parametrize(("a", "b", "c"), _blocks())
def test_the_minor_witness_exists_exactly_when_the_block_is_not_psd(a, b, c):
    """At ``tol = 0`` the minor witness is found iff the block ``[[a, b], [b, c]]``
    (embedded at indices 0 and 2 of a 3 x 3 matrix) is not PSD in exact
    arithmetic; it is supported on the block and verified in fractions."""
    K = np.array([[a, 0.0, b], [0.0, 1.0, 0.0], [b, 0.0, c]])
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    w = lad.minor_witness(0, 2)
    block = [[a, b], [b, c]]
    if exact_kind(block) == "not_psd":
        assert w is not None
        v = np.asarray(w.vector, dtype=float)
        assert v[1] == 0 and (v[0] != 0 or v[2] != 0)
        q = rayleigh(K, w.vector)
        assert q < 0 and q == w.value
    else:
        assert w is None


@pytest.mark.parametrize(("a", "b", "c"), FALLBACK_BLOCKS)
def test_the_minor_witness_falls_back_to_an_exact_vector_when_the_eigenvector_fails(a, b, c):
    """``a (ac - b^2)`` and ``c (ac - b^2)`` are the exact values of ``(-b, a)`` and
    ``(c, -b)`` (times ``v^T v``): negative whenever the block is indefinite."""
    K = np.array([[a, b], [b, c]])
    assert exact_kind(K.tolist()) == "not_psd"
    _, vecs = np.linalg.eigh(K)
    assert not rayleigh(K, vecs[:, 0]) < 0  # the first candidate fails here
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    w = lad.minor_witness(0, 1)
    assert w is not None and rayleigh(K, w.vector) < 0
    r = check_psd(K, tol=0)
    assert_witness(K, r)


@pytest.mark.parametrize(("a", "b", "c"), [(1.0, 3.0, 1.0), (2.0, -5.0, 1.0), (0.0, 1.0, 0.0)])
def test_the_minor_witness_prefers_the_eigenvector_of_the_block(a, b, c):
    """When the block's eigenvector of its smallest eigenvalue verifies (a clearly
    indefinite block), it is the witness: parallel to ``eigh`` of the block."""
    K = np.array([[a, b], [b, c]])
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    w = lad.minor_witness(0, 1)
    _, vecs = np.linalg.eigh(K)
    v = np.asarray(w.vector, dtype=float)
    e = vecs[:, 0]
    assert rayleigh(K, e) < 0
    assert abs(v[0] * e[1] - v[1] * e[0]) <= 4 * 2.0**-52 * float(np.linalg.norm(v))


def test_the_minor_rung_on_entries_whose_squares_overflow():
    """Entries near ``2^1000``: ``K_ij^2`` overflows unless the block is scaled by a
    power of two (exact); the most violated minor still gives an exact witness."""
    s = 2.0**1000
    K = np.array([[s, 0.0, 0.0], [0.0, s, 3 * s], [0.0, 3 * s, s]])
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    r = lad.minors()
    assert r is not None and r.method == "minor" and "(1, 2)" in r.reason
    assert_witness(K, r)
    w = lad.minor_witness(1, 2)
    assert w is not None and rayleigh(K, w.vector) < 0
    # with tol = s / 4 the shifted minor (s + t)^2 - 9 s^2 is still negative
    t = s / 4
    lad = _Ladder(check_psd_iv(K, Tolerance(t, "test")))
    r = lad.minors()
    assert r is not None and r.method == "minor" and r.tol.value == t
    assert_witness(K, r)


@pytest.mark.parametrize("e", [-1074, -10, 0, 499, 500, 700, 1023])
def test_unit_scale_is_one_below_two_to_500_and_puts_the_maximum_in_half_one(e):
    """``_unit_scale``: 1 for ``max |K| < 2^500``, else the power of two with
    ``max |K| * scale`` in ``[0.5, 1)``; for both signs and the empty matrix."""
    for x in (math.ldexp(1.0, e), math.ldexp(1.5, e) if e < 1023 else BIG):
        for sign in (1.0, -1.0):
            K = np.array([[0.25, sign * x], [sign * x, 0.0]])
            s = _unit_scale(K)
            assert math.frexp(s)[0] == 0.5  # a power of two
            top = max(abs(x), 0.25)
            if top < 2.0**500:
                assert s == 1.0
            else:
                assert 0.5 <= top * s < 1.0
    assert _unit_scale(np.zeros((0, 0))) == 1.0


# ---------------------------------------------------------------------------
# the exact rung and its bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", [0.0, 0.5, 0.7, 1.0, 1.5])
def test_the_exact_rung_decides_k_then_k_plus_tol_with_its_bounds(t):
    """``[[1, 2], [2, 1]]`` (``lambda_min = -1`` exactly): NOT_PSD with a witness below
    ``-tol`` for ``tol < 1``, PSD within ``tol`` (``K + tol I`` PSD, singular at
    ``tol = 1``) with the proven lower bound ``-tol`` otherwise."""
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    r = check_psd(K, tol=t, method="exact")
    assert r.certified and r.method == "exact" and r.rungs == ("exact",)
    kind = exact_kind(K.tolist(), shift=Fraction(t))
    if kind == "not_psd":
        assert_witness(K, r)
        assert r.upper_bound >= -1.0 and r.lower_bound == -math.inf
    else:
        assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE
        assert r.lower_bound == -t <= -1.0 and "K + tol I" in r.reason


@pytest.mark.parametrize("t", [0.0, 0.25])
def test_the_exact_rung_on_psd_pd_and_zero_matrices_sets_proven_bounds(t):
    """Singular PSD (``lambda_min = 0``: both bounds 0), PD (lower bound 0) and the
    zero matrix (both bounds 0), each against elimination in fractions."""
    sing = np.ones((3, 3))
    r = check_psd(sing, tol=t, method="exact")
    assert exact_kind(sing.tolist()) == "psd"
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.lower_bound == 0.0 == r.upper_bound and "2 zero pivot(s)" in r.reason
    pd = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    assert exact_kind(pd.tolist()) == "pd"
    r = check_psd(pd, tol=t, method="exact")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.lower_bound == 0.0
    r = check_psd(np.zeros((2, 2)), tol=t, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.lower_bound == 0.0 == r.upper_bound and "zero matrix" in r.reason


def test_forced_exact_beyond_max_exact_n_is_declined_before_any_work():
    r = check_psd(np.ones((3, 3)), tol=0, method="exact", max_exact_n=2)
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == () and r.method == "none"
    assert "n = 3 exceeds max_exact_n = 2" in r.reason
    r = check_psd(np.ones((3, 3)), tol=0, method="exact", max_exact_n=3)
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified


def test_auto_inconclusive_names_the_exact_limit_and_the_estimate():
    """The singular ``ones(3, 3)`` at ``tol = 0`` with exact arithmetic capped at
    ``n = 2``: no float rung can prove ``lambda_min = 0`` (the eigenvector's exact
    value ``(sum v)^2`` is never negative, a Cholesky certificate never exists), so
    the ladder ends INCONCLUSIVE; its reason quotes the estimate, its error and the
    limit, and the rungs tried are listed in order."""
    K = np.ones((3, 3))
    r = check_psd(K, tol=0, max_exact_n=2)
    assert r.verdict is Verdict.INCONCLUSIVE and not r.certified
    assert "exact" not in r.rungs
    assert r.rungs[:4] == ("diagonal", "cholesky", "minor", "eigh")
    assert r.method == r.rungs[-1]
    m = re.search(rf"lambda_min ~ {NUM} \+- {NUM} is within rounding of -tol \((.*)\)", r.reason)
    assert m is not None
    assert float(m.group(1)) == pytest.approx(r.min_eigenvalue, rel=1e-2, abs=1e-300)
    assert float(m.group(2)) == pytest.approx(r.min_eigenvalue_error, rel=1e-2)
    assert m.group(3) == "n = 3 > max_exact_n = 2"
    assert abs(r.min_eigenvalue) <= r.min_eigenvalue_error
    # with the limit lifted the same ladder decides it exactly, before the ball and
    # mpmath rungs (docs/psd.md: at tol = 0 the exact rung settles the question outright)
    r = check_psd(K, tol=0, max_exact_n=3)
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.method == "exact"
    assert r.rungs == ("diagonal", "cholesky", "minor", "eigh", "exact")


def test_forced_mpmath_beyond_its_limit_is_declined_before_any_work():
    from kernelcheck._src.psd.highprec import MPMATH_MAX_N

    n = MPMATH_MAX_N + 1
    r = check_psd(np.ones((n, n)), tol=0, method="mpmath")
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == () and r.method == "none"
    assert f"n = {n} exceeds the mpmath limit {MPMATH_MAX_N}" in r.reason


def test_auto_inconclusive_beyond_the_mpmath_limit_names_both_limits():
    """``ones(n, n)`` with ``n = MPMATH_MAX_N + 1`` at tol = 0, exact arithmetic capped:
    mpmath is not run, the ball rung cannot decide a singular matrix, and the reason
    lists each limit that stopped a rung."""
    from kernelcheck._src.psd.highprec import MPMATH_MAX_N

    n = MPMATH_MAX_N + 1
    r = check_psd(np.ones((n, n)), tol=0, max_exact_n=2)
    assert r.verdict is Verdict.INCONCLUSIVE and "mpmath" not in r.rungs
    assert f"n = {n} > max_exact_n = 2; n > {MPMATH_MAX_N} for mpmath)" in r.reason


# ---------------------------------------------------------------------------
# forced rungs that cannot decide, and tolerances below the float range
# ---------------------------------------------------------------------------


def test_forced_lowrank_at_tol_zero_or_on_an_indefinite_matrix_is_inconclusive():
    """The low-rank certificate needs ``tol > 0`` (at 0 it is not tried, even on the
    zero matrix); on ``[[1, 2], [2, 1]]`` (``lambda_min = -1``) no factor is within tol."""
    r = check_psd(np.zeros((2, 2)), tol=0, method="lowrank")
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == () and not r.certified
    assert isinstance(r.reason, str) and r.reason
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    r = check_psd(K, tol=1e-3, method="lowrank")
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == ("lowrank",) and r.method == "lowrank"
    assert isinstance(r.reason, str) and r.reason


def test_a_tolerance_that_rounds_away_on_the_scaled_matrix_tries_no_shifted_cholesky():
    """``S = 2^1021 [[1, 1], [1, 1]]`` (singular) given as an asymmetric matrix with
    ``max |A| = 2^1022``: the float rungs work on ``H = S / 2`` (``sigma = 1/2``), where
    ``sigma tol`` with ``tol = eta`` (the smallest subnormal) rounds down to no positive
    number: there is no ``K + tol I`` to certify, and the singular ``K`` has no
    certificate."""
    s = 2.0**1021
    K = np.array([[s, 2 * s], [0.0, s]])
    S = [[Fraction(s), Fraction(s)], [Fraction(s), Fraction(s)]]
    assert exact_kind(S) == "psd"
    r = check_psd(K, tol=ETA, method="cholesky", symmetrize=True)
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == ("cholesky",)
    assert r.symmetrized and not r.certified
    r = check_psd(K, tol=ETA, symmetrize=True)
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified and r.method == "exact"
    assert r.lower_bound == 0.0 == r.upper_bound


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


def test_the_ball_rung_with_a_tolerance_is_certified_and_says_what_it_proved():
    """The singular ``ones(2, 2)`` with ``tol = 1/8``: ``K + tol I`` is proven PD in
    balls, so PSD within tol, certified, with the proven lower bound ``-tol``."""
    pytest.importorskip("flint")
    from kernelcheck._src.psd.schur import BALL_PRECISIONS

    K = np.ones((2, 2))
    assert exact_kind(K.tolist(), shift=Fraction(1, 8)) == "pd"
    r = check_psd(K, tol=0.125, method="ball")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified is True
    assert r.lower_bound == -0.125 and r.rungs == ("ball",)
    m = re.match(r"([0-9]+)-bit ball arithmetic: K \+ tol I proven PD", r.reason)
    assert m is not None and int(m.group(1)) in BALL_PRECISIONS


def test_without_flint_the_ladder_says_so_and_decides_exactly_in_python(monkeypatch):
    """With FLINT absent (its probe returning None, as on an install without
    python-flint) the ball rung is skipped with the reason in the result, the exact
    rung keeps its Python limit and uses Python integers at any n."""
    import kernelcheck._src.psd.ladder as ladder
    from kernelcheck._src.psd.exact import EXACT_MAX_N
    from kernelcheck._src.psd.schur import FLINT_MISSING

    monkeypatch.setattr(ladder, "flint", lambda: None)
    K = np.ones((3, 3))
    r = check_psd(K, tol=0, method="ball")
    assert r.verdict is Verdict.INCONCLUSIVE and r.reason == f"ball: {FLINT_MISSING}"
    assert r.rungs == ()
    r = check_psd(K, tol=0, max_exact_n=2)
    assert r.verdict is Verdict.INCONCLUSIVE and f"ball: {FLINT_MISSING}" in r.reason
    assert "ball" not in r.rungs
    n = 10  # above the size where FLINT's elimination would be used
    G = np.ones((n, n))
    assert exact_kind(G.tolist()) == "psd"
    r = check_psd(G, tol=0, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    r = check_psd(np.ones((EXACT_MAX_N + 1,) * 2), tol=0, method="exact")
    assert r.verdict is Verdict.INCONCLUSIVE and f"max_exact_n = {EXACT_MAX_N}" in r.reason


def _failed_pivot(K, t):
    lad = _Ladder(check_psd_iv(K, Tolerance(t, "test")))
    assert lad.cholesky() is None
    return lad.failed_pivot


@pytest.mark.parametrize(
    ("K", "first_bad"),
    [
        (np.diag([0.0, 1.0, 1.0, 1.0]), 1),  # the first pivot is 0
        (np.outer([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]), 2),  # rank 1: k = n / 2
        (np.array([[1.0, 0, 1, 1], [0, 1, 1, 2], [1, 1, 2, 3], [1, 2, 3, 5]]), 3),  # rank 2
    ],
)
def test_the_low_rank_certificate_comes_first_when_the_cholesky_fails_by_pivot_n_over_2(
    K, first_bad
):
    """A rank-``r`` PSD ``K`` (exact integer entries) has positive leading minors up to
    ``r`` and a zero one at ``r + 1``: the certified Cholesky fails at that pivot
    (Sylvester).  With ``tol > 0`` the ladder tries the low-rank certificate first
    iff that pivot is at most ``min(n / 2, max_rank(n))``, else ``K + tol I`` first;
    either certifies ``lambda_min = 0 >= -tol`` with a proven bound in ``[-tol, 0]``."""
    from kernelcheck._src.psd.lowrank import max_rank

    t = 1e-3
    assert exact_kind(K.tolist()) == "psd"
    minors = [det([[Fraction(float(x)) for x in row[:r]] for row in K[:r]]) for r in range(1, 5)]
    assert next(i + 1 for i, m in enumerate(minors) if m <= 0) == first_bad
    assert _failed_pivot(K, t) == first_bad
    r = check_psd(K, tol=t)
    assert r.is_psd and r.certified and -t <= r.lower_bound <= 0.0
    after = r.rungs[r.rungs.index("minor") + 1]
    if first_bad <= min(4 // 2, max_rank(4)):
        assert after == "lowrank"
    else:
        assert after == "cholesky+tol"


def test_the_mpmath_certificate_of_k_plus_tol_bounds_lambda_min_below():
    """The singular ``ones(2, 2)`` (``lambda_min = 0``) with ``tol = 1/8``: mpmath's
    Cholesky of ``K`` fails, that of ``K + tol I`` succeeds; its proven lower bound is in
    ``[-tol, 0]``."""
    K = np.ones((2, 2))
    r = check_psd(K, tol=0.125, method="mpmath")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified and r.method == "mpmath"
    assert -0.125 <= r.lower_bound <= 0.0 and "K + tol I" in r.reason


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


def test_a_symmetrised_result_keeps_the_rungs_reason_and_adds_the_note():
    """``symmetrize=True``: the reason is the deciding rung's sentence followed by the
    note on the symmetric part -- both, the rung's first (here the Cholesky of the PD
    ``S = [[2, 1], [1, 2]]``, whose reason quotes Rump's shift)."""
    K = np.array([[2.0, 2.0], [0.0, 2.0]])
    r = check_psd(K, symmetrize=True)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.symmetrized and r.method == "cholesky"
    rung, _, note = r.reason.partition("; ")
    assert "Rump's shift" in rung and "symmetri" in note


def test_a_forced_ball_rung_says_where_it_stopped():
    """A singular PSD matrix stops the ball rung at its first precision (a Schur
    complement singular within its balls: exact arithmetic decides it); the reason
    says so, and names that precision, not the last one of the ladder."""
    pytest.importorskip("flint")
    from kernelcheck._src.psd.schur import BALL_PRECISIONS

    r = check_psd(np.ones((2, 2)), tol=0, method="ball")
    assert r.verdict is Verdict.INCONCLUSIVE and r.rungs == ("ball",)
    assert f"singular within its {BALL_PRECISIONS[0]}-bit balls" in r.reason
    assert f"{BALL_PRECISIONS[-1]}" not in r.reason and 'method="exact"' in r.reason
    exact = check_psd(np.ones((2, 2)), tol=0, method="exact")
    assert exact.verdict is Verdict.POSITIVE_SEMIDEFINITE
