"""The rungs of check_psd: their order, the forced methods, and which rung decides (claim C5).

``docs/psd.md`` fixes the order: with ``tol = 0`` exact elimination comes
before mpmath (it settles the question outright), with ``tol > 0`` mpmath
comes first; a forced method runs one rung (the Cholesky one includes the
certificate of ``K + tol I``).  Matrices are built so that the deciding rung
is known in exact arithmetic: integer Cholesky factors give exact Schur
complements (a failed pivot at a known position), a separated spectrum gives
a known smallest eigenvalue, ``[[1, b], [b, 1]]`` has eigenvalues ``1 +- b``
exactly, and reason texts are read back and compared with the result's own
fields and with the matrix, never with a literal string.  The eigenvalue
estimate rule is tested directly on a ladder whose estimate is set.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.linalg

from kernelcheck import Gaussian
from kernelcheck._src.core.rounding import Tolerance, gamma
from kernelcheck._src.psd.highprec import MPMATH_MAX_N, MPMATH_PRECISIONS
from kernelcheck._src.psd.inputs import check_psd_iv
from kernelcheck._src.psd.ladder import _Ladder
from kernelcheck._src.psd.schur import flint
from kernelcheck._src.psd.tolerance import EIGH_P, default_tolerance, frobenius
from kernelcheck.psd import Verdict, check_psd
from tests.psd import sylvester
from tests.psd.oracle import assert_witness, exact_kind, hilbert, reference_kind
from tests.psd.sylvester import det, rayleigh

ETA = math.ldexp(1.0, -1074)  # the smallest subnormal float64

U64 = 2.0**-53

NUM = r"(-?[0-9.]+(?:e[+-]?[0-9]+)?|nan|inf)"


def F(x) -> Fraction:
    return Fraction(float(x))


def close3(printed: str, value: float) -> bool:
    """``printed`` is ``value`` to the three significant digits of ``:.3g``."""
    return float(printed) == float(f"{value:.3g}")


def _pd_gram(n, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, 5))
    return Gaussian(2.0)(X) + 0.1 * np.eye(n)


# ---------------------------------------------------------------------------
# the order of the rungs and the forced methods
# ---------------------------------------------------------------------------


FLOAT_RUNGS = ("diagonal", "cholesky", "minor", "eigh")
#: With ``tol > 0`` the certificates of ``K + tol I`` come before the eigendecomposition.
TOL_RUNGS = ("diagonal", "cholesky", "minor", "cholesky+tol", "lowrank", "eigh")
HAS_FLINT = flint() is not None


def pair(b: float) -> np.ndarray:
    """``[[1, b], [b, 1]]``: ``lambda_min = 1 - |b|`` exactly."""
    return np.array([[1.0, b], [b, 1.0]])


def test_tol0_decides_by_exact_elimination_before_mpmath():
    """C5: ``lambda_min = 2**-50`` is below the float64 certificate's resolution
    (``c ~ 7u``): at ``tol = 0`` the exact rung decides PD, mpmath is not tried;
    with the exact rung out of reach (``max_exact_n = 1``) FLINT's ball arithmetic
    decides it (mpmath when python-flint is absent)."""
    K = pair(1 - 2.0**-50)
    r = check_psd(K, tol=0)
    assert (r.verdict, r.method, r.rungs) == (
        Verdict.POSITIVE_DEFINITE,
        "exact",
        FLOAT_RUNGS + ("exact",),
    )
    r = check_psd(K, tol=0, max_exact_n=1)
    rung = "ball" if HAS_FLINT else "mpmath"
    expected = (Verdict.POSITIVE_DEFINITE, rung, FLOAT_RUNGS + (rung,))
    assert (r.verdict, r.method, r.rungs) == expected


def test_positive_tol_tries_mpmath_before_exact():
    """C5: ``lambda_min = -(t - 2**-52)`` with ``t = 2**-40``: ``K + t I`` has
    ``lambda_min = 2**-52``, too small for the float64 certificate of ``K + tol I``
    but not for mpmath, which decides before the exact rung.  At ``b = 1 + t``
    exactly, ``K + t I`` is singular: no certificate at any precision, and the exact
    rung decides PSD within tol."""
    t = 2.0**-40
    r = check_psd(pair(1 + (t - 2.0**-52)), tol=t)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "mpmath", True)
    assert r.rungs == TOL_RUNGS + ("mpmath",)
    assert "tol I" in r.reason
    r = check_psd(pair(1 + t), tol=t)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "exact", True)
    assert r.rungs == TOL_RUNGS + ("mpmath",) + (("ball",) if HAS_FLINT else ()) + ("exact",)
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
def test_forced_eigh_hands_a_clear_estimate_to_the_certificate(lam, tol, expected):
    """C5: when ``lambda_min - error > 0`` (``>= -tol``) the forced eigh rung hands the
    estimate to the certified Cholesky of ``K`` (``K + tol I``), so the verdict is
    certified, not "estimated"; below ``-tol`` it returns the eigenvector witness."""
    K = np.diag([lam, 1.0])
    r = check_psd(K, tol=tol, method="eigh")
    assert r.rungs[0] == "eigh"
    if expected:
        assert r.min_eigenvalue - r.min_eigenvalue_error >= -tol
        pd = lam > 0
        verdict = Verdict.POSITIVE_DEFINITE if pd else Verdict.POSITIVE_SEMIDEFINITE
        assert (r.verdict, r.certified, r.method) == (verdict, True, "cholesky")
        assert r.rungs[-1] == ("cholesky" if pd else "cholesky+tol")
    else:
        assert r.method == "eigh" and r.verdict is Verdict.NOT_PSD and r.witness_value < -tol


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


def test_ladder_order_decides_cheap_cases_first():
    r = check_psd(np.array([[-1.0, 0.0], [0.0, 3.0]]), tol=0)
    assert (r.method, r.rungs) == ("diagonal", ("diagonal",))
    assert list(np.asarray(r.witness, dtype=float)) in ([1.0, 0.0], [-1.0, 0.0])
    z = check_psd(np.array([[0.0, 1.0], [1.0, 0.0]]), tol=0)
    assert (z.method, z.rungs) == ("diagonal", ("diagonal",))
    # the zero-diagonal witness is only tried for the exact question
    z2 = check_psd(np.array([[0.0, 1.0], [1.0, 0.0]]), tol=1e-3)
    assert z2.method != "diagonal" and z2.verdict is Verdict.NOT_PSD
    pd = check_psd(np.eye(3))
    assert (pd.method, pd.rungs) == ("cholesky", ("diagonal", "cholesky"))
    # PSD but singular with a positive tolerance: certified by Cholesky of K + tol I
    s = check_psd(np.array([[1.0, 1.0], [1.0, 1.0]]), tol=0.25)
    assert s.verdict is Verdict.POSITIVE_SEMIDEFINITE and s.certified and s.method == "cholesky"
    assert s.rungs[-1] == "cholesky+tol" and "eigh" not in s.rungs


def test_max_exact_n_zero_and_limits_reported():
    K = np.array([[1.0, 1.0], [1.0, 1.0]])
    r = check_psd(K, tol=0, max_exact_n=0, method="exact")
    assert r.verdict is Verdict.INCONCLUSIVE and "max_exact_n = 0" in r.reason
    auto = check_psd(K, tol=0, max_exact_n=0)
    assert auto.verdict is not Verdict.NOT_PSD  # mpmath decides or leaves it open, never refutes


@pytest.mark.parametrize("method", ["auto", "cholesky", "eigh", "mpmath", "exact"])
def test_forced_methods_agree_on_clear_cases(method):
    K = _pd_gram(20)
    r = check_psd(K, method=method)
    assert r.is_psd
    if method != "eigh":
        assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified
    bad = K - 2.0 * np.linalg.eigvalsh(K)[0] * np.eye(20) - np.eye(20) * 1.0
    bad = 0.5 * (bad + bad.T)
    rb = check_psd(bad, method=method)
    if rb.verdict is not Verdict.INCONCLUSIVE:
        assert_witness(bad, rb)
    else:  # only the certificate-only rung may fail to produce a witness
        assert method == "cholesky"


# ---------------------------------------------------------------------------
# diagonal, Cholesky and minor rungs
# ---------------------------------------------------------------------------


def test_fast_path_is_one_certified_cholesky():
    K = _pd_gram(300)
    r = check_psd(K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "cholesky"
    assert r.rungs == ("diagonal", "cholesky")
    lo, hi = r.eigenvalue_interval()
    lam = np.linalg.eigvalsh(K)[0]
    assert lo <= lam <= hi * (1 + 1e-12)


def test_negative_diagonal_is_a_cheap_witness():
    K = _pd_gram(50)
    K[7, 7] = -1.0
    r = check_psd(K)
    assert r.method == "diagonal"
    assert_witness(K, r)
    assert np.flatnonzero(r.witness).tolist() == [7]


def test_zero_diagonal_with_nonzero_row_at_tol0():
    K = np.array([[0.0, 1e-300], [1e-300, 1.0]])
    r = check_psd(K, tol=0)
    assert_witness(K, r)


def test_negative_minor_is_a_witness():
    K = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    r = check_psd(K)
    assert_witness(K, r)
    # a Rayleigh quotient is never below lambda_min = -1
    assert -1.0 - 1e-12 <= r.witness_value < 0


def failing_at(k: int, n: int, seed: int, scale_bits: int = 0) -> np.ndarray:
    """A symmetric matrix whose leading ``k - 1`` block is PD and whose ``k``-th Schur
    complement is exactly ``-1`` (``K_kk = z^T z - 1`` with ``b = L z``, ``L`` an
    integer factor of the leading block); rows after ``k`` are decoupled, diagonal 50.
    Optionally conjugated by powers of two ``2**-scale_bits .. 2**scale_bits``."""
    rng = np.random.default_rng(seed)
    m = k - 1
    L = np.tril(rng.integers(-2, 3, size=(m, m))).astype(float)
    np.fill_diagonal(L, rng.integers(2, 4, size=m))
    z = rng.integers(-2, 3, size=m).astype(float)
    z[-1] = 2.0  # z^T z - 1 >= 3: a positive diagonal, so the diagonal rung passes
    K = np.zeros((n, n))
    K[:m, :m] = L @ L.T
    K[:m, m] = K[m, :m] = L @ z
    K[m, m] = z @ z - 1.0
    for i in range(k, n):
        K[i, i] = 50.0
    if scale_bits:
        D = np.ldexp(1.0, rng.integers(-scale_bits, scale_bits + 1, size=n))
        K = D[:, None] * K * D[None, :]
    return K


CASES = [
    (k, n, seed, bits)
    for (k, n) in [(2, 2), (2, 5), (3, 6), (5, 6), (6, 6)]
    for seed in (0, 1)
    for bits in (0, 20)
]


@pytest.mark.parametrize("k,n,seed,bits", CASES)
def test_failed_pivot_gives_the_witness_on_the_leading_coordinates(k, n, seed, bits):
    """C5: for a matrix whose Cholesky must fail at pivot ``k`` (Schur complement
    exactly ``-1`` there, leading block PD), the Cholesky rung decides NOT_PSD with
    the pivot vector ``D [-B11^{-1} b; 1; 0]``: supported on the first ``k``
    coordinates, non-zero at ``k``, and exactly below ``-tol``; the reason names
    pivot ``k``."""
    K = failing_at(k, n, seed, bits)
    for tol in (0.0, None) if bits == 0 else (0.0,):
        r = check_psd(K, tol=tol)
        t = default_tolerance(K).value if tol is None else 0.0
        assert (r.verdict, r.method, r.rungs) == (
            Verdict.NOT_PSD,
            "cholesky",
            ("diagonal", "cholesky"),
        )
        v = np.asarray(r.witness, dtype=float)
        assert np.all(v[k:] == 0) and v[k - 1] != 0
        q = rayleigh(K, r.witness)
        assert q < -Fraction(t) and r.witness_value == float(q)
        assert int(re.search(r"pivot (\d+)", r.reason).group(1)) == k
        # the witness is the Schur direction: v^T K v / v_k^2 is the exact Schur complement
        # (-1 after unscaling), to the accuracy of the solve with the factor
        vk = F(v[k - 1])
        schur = q * sum(F(x) ** 2 for x in v) / (vk * vk)
        dk2 = F(K[k - 1, k - 1]) / F(failing_at(k, n, seed, 0)[k - 1, k - 1])
        assert abs(schur / dk2 + 1) < Fraction(1, 1000)


def _separated(n: int, lam_min: float, seed: int, scale_bits: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.concatenate([[lam_min], 1.0 + rng.random(n - 1)])
    K = (Q * lam) @ Q.T
    K = 0.5 * (K + K.T)
    if scale_bits:
        D = np.ldexp(1.0, rng.integers(-scale_bits, scale_bits + 1, size=n))
        K = D[:, None] * K * D[None, :]
    return K


@pytest.mark.parametrize("n", [1, 2, 5, 12])
@pytest.mark.parametrize("lam_min", [1e-4, 0.1])
@pytest.mark.parametrize("bits", [0, 8])
@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_cholesky_estimate_is_an_upper_bound_close_to_lambda_min(n, lam_min, bits, order):
    """C5: after a successful certificate, ``min_eigenvalue`` is the Rayleigh quotient
    after one inverse iteration: an upper bound of ``lambda_min`` (up to its own
    rounding, ``n u ||K||_F``), and for a separated spectrum within 5% of it:
    from a start vector ``x = sum c_i q_i`` the quotient is ``lambda_1 (1 + sum_i
    (c_i / c_1)^2 lambda_1 / lambda_i) / (1 + ...)``, below ``1.05 lambda_1`` when
    ``lambda_2 / lambda_1 >= 10^4`` unless ``|cos(x, q_1)| < 0.05`` (chance about
    ``0.05 sqrt(2n / pi) < 15%`` for a random ``Q``; the seeds here are fixed).
    The same holds whatever the memory order of ``K`` (C, Fortran, strided view).
    ``eigenvalue_interval`` contains ``lambda_min``.  The reference is LAPACK's
    ``eigvalsh`` with its backward-error bound ``gamma_{p(n)} ||K||_F``."""
    K = _separated(n, lam_min, 3 + n, bits) if n > 1 else np.array([[lam_min * 4.0**bits]])
    r = check_psd(
        {"C": K, "F": np.asfortranarray(K), "strided": np.kron(K, np.ones((2, 2)))[::2, ::2]}[order]
    )
    assert (r.verdict, r.method) == (Verdict.POSITIVE_DEFINITE, "cholesky")
    ref = float(scipy.linalg.eigvalsh(K)[0])
    err = gamma(EIGH_P(n)) * frobenius(K)
    rnd = 4 * n * 2.0**-53 * frobenius(K)
    assert r.min_eigenvalue >= ref - err - rnd
    if n > 1 and lam_min < 1e-3:
        assert r.min_eigenvalue <= 1.05 * (ref + err)
    if n == 1:
        assert r.min_eigenvalue == K[0, 0]
    low, high = r.eigenvalue_interval()
    assert low <= ref + err and ref - err <= high and low >= 0
    assert r.min_eigenvalue_error >= r.min_eigenvalue - (ref - err) - rnd
    # lambda_min in (0, estimate]: the reported error is the estimate itself
    assert r.min_eigenvalue_error <= r.min_eigenvalue
    # no global or fresh randomness: the same matrix gives the same bytes
    assert check_psd(K).to_json() == check_psd(K).to_json()


def test_minor_rung_decides_when_the_failed_pivot_is_within_tol():
    """C5: with ``tol = 1e-6`` the Cholesky fails at pivot 2 by a Schur complement of
    ``-1e-10`` (its vector is no witness below ``-tol``), while the principal minor
    on ``(2, 3)`` is ``1 - 4 < 0``: the 2 x 2 rung decides, with a witness on ``{2, 3}``."""
    K = np.eye(4)
    K[0, 1] = K[1, 0] = 1.0
    K[1, 1] = 1.0 - 1e-10
    K[2, 3] = K[3, 2] = 2.0
    t = 1e-6
    r = check_psd(K, tol=t)
    assert (r.verdict, r.method, r.rungs) == (
        Verdict.NOT_PSD,
        "minor",
        ("diagonal", "cholesky", "minor"),
    )
    i, j = map(int, re.search(r"at \((\d+), (\d+)\)", r.reason).groups())
    assert {i, j} == {2, 3}
    assert (
        F(K[i, i] + t) * F(K[j, j] + t) < F(K[i, j]) ** 2
        or (K[i, i] + t) * (K[j, j] + t) < K[i, j] ** 2
    )
    support = set(np.flatnonzero(np.asarray(r.witness, dtype=float)).tolist())
    assert support <= {i, j}
    assert rayleigh(K, r.witness) < -Fraction(t)


@pytest.mark.parametrize("seed", range(4))
def test_minor_rung_reports_the_most_violated_minor(seed):
    """C5: among several negative 2 x 2 minors (each pair ``[[1, b], [b, 1]]`` with
    ``b > 1``; all diagonal entries 1, so the gap ``b^2 - (1 + t)^2`` grows with ``b``)
    the rung reports the pair with the largest ``b``.  The first pivot of Cholesky
    fails within ``tol`` so that the minor rung is reached."""
    rng = np.random.default_rng(seed)
    n = 8
    t = 1e-6
    K = np.eye(n)
    K[0, 1] = K[1, 0] = 1.0
    K[1, 1] = 1.0 - 1e-10
    pairs = [(2, 3), (4, 5), (6, 7)]
    bs = rng.permutation([1.5, 2.0, 3.0])
    for (p, q), b in zip(pairs, bs, strict=True):
        K[p, q] = K[q, p] = b
    perm = rng.permutation(np.arange(2, n))
    perm = np.concatenate([[0, 1], perm])
    K = K[np.ix_(perm, perm)]
    r = check_psd(K, tol=t)
    assert r.method == "minor"
    i, j = map(int, re.search(r"at \((\d+), (\d+)\)", r.reason).groups())
    assert abs(K[i, j]) == 3.0
    assert set(np.flatnonzero(np.asarray(r.witness, dtype=float)).tolist()) <= {i, j}


@pytest.mark.parametrize("b,c", [(1e-300, 1e300), (3.0, 5.0), (-2.0, 1e-3), (1e-200, 1e200)])
def test_zero_diagonal_with_coupling_is_decided_by_an_exact_2x2_witness(b, c):
    """C5 at ``tol = 0``: ``K_ii = 0`` with ``K_ij = b != 0`` makes the minor
    ``[[0, b], [b, c]]`` negative (``-b^2``); the diagonal rung must find a witness
    on ``{i, j}`` even when the eigenvector of the 2 x 2 block underflows
    (``lambda = -b^2 / c`` below the float range: ``[c, -b]`` gives ``-c b^2`` exactly)."""
    K = np.diag([2.0, 0.0, c])
    K[1, 2] = K[2, 1] = b
    r = check_psd(K, tol=0)
    assert (r.verdict, r.method, r.rungs) == (Verdict.NOT_PSD, "diagonal", ("diagonal",))
    g = re.search(r"K\[(\d+),(\d+)\] = 0 but K\[(\d+),(\d+)\]", r.reason).groups()
    assert tuple(map(int, g)) == (1, 1, 1, 2)
    q = rayleigh(K, r.witness)
    assert q < 0
    assert set(np.flatnonzero(np.asarray(r.witness, dtype=float)).tolist()) <= {1, 2}


def test_negative_diagonal_reason_names_the_entry():
    """C5: the cheapest witness is the most negative diagonal entry, named in the reason."""
    K = np.diag([1.0, -0.5, 2.0, -3.25])
    r = check_psd(K, tol=0.1)
    i, j, val = re.search(r"K\[(\d+),(\d+)\] = " + NUM, r.reason).groups()
    assert int(i) == int(j) == 3 and close3(val, K[3, 3])
    assert r.witness_value == K[3, 3] and r.upper_bound == K[3, 3]


def _after_a_mild_failure(blocks: list[np.ndarray]) -> np.ndarray:
    """``[[1, 1], [1, 1 - 1e-10]]`` first (its Cholesky fails at pivot 2 by ``-1e-10``,
    no witness below a tolerance of ``1e-3``), then the given 2 x 2 blocks."""
    n = 2 + 2 * len(blocks)
    K = np.zeros((n, n))
    K[:2, :2] = [[1.0, 1.0], [1.0, 1.0 - 1e-10]]
    for m, blk in enumerate(blocks):
        K[2 + 2 * m : 4 + 2 * m, 2 + 2 * m : 4 + 2 * m] = blk
    return K


def _gap(K, i, j, t) -> Fraction:
    return F(K[i, j]) ** 2 - (F(K[i, i]) + F(t)) * (F(K[j, j]) + F(t))


@pytest.mark.parametrize(
    "blocks",
    [
        # gaps at t = 0.1: 4 - 1.21 = 2.79 and 103.8 - 102.01 = 1.79; without the
        # tolerance (or with -t) the second pair would be the larger
        [np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([[10.0, 103.8**0.5], [103.8**0.5, 10.0]])],
        [np.array([[10.0, 103.8**0.5], [103.8**0.5, 10.0]]), np.array([[1.0, 2.0], [2.0, 1.0]])],
        # a single violated minor with gap 0.5 (below 1)
        [np.array([[1.0, 1.71**0.5], [1.71**0.5, 1.0]]), np.eye(2)],
    ],
)
def test_minor_rung_ranks_minors_by_their_gap_at_tol(blocks):
    """C5: with ``tol = t`` the 2 x 2 rung reports the pair maximising
    ``K_ij^2 - (K_ii + t)(K_jj + t)`` (computed here in fractions), whenever that
    gap is positive, and its witness is the eigenvector of that 2 x 2 block: the
    witness value is the block's smallest eigenvalue to rounding: ``eigvalsh`` of a
    2 x 2 block is backward stable (``|lam_hat - lam| <= c u ||sub||_F`` with a small
    c; 8 here) and the exact Rayleigh quotient at the computed eigenvector is
    within ``O(u^2) ||sub||`` of ``lam``."""
    t = 0.1
    K = _after_a_mild_failure(blocks)
    n = K.shape[0]
    r = check_psd(K, tol=t)
    assert (r.verdict, r.method) == (Verdict.NOT_PSD, "minor")
    i, j = map(int, re.search(r"at \((\d+), (\d+)\)", r.reason).groups())
    best = max(((p, q) for p in range(n) for q in range(p + 1, n)), key=lambda pq: _gap(K, *pq, t))
    assert (i, j) == best and _gap(K, i, j, t) > 0
    sub = K[np.ix_([i, j], [i, j])]
    lam = np.linalg.eigvalsh(sub)[0]
    assert abs(r.witness_value - lam) <= 8 * 2.0**-53 * np.linalg.norm(sub)
    assert rayleigh(K, r.witness) < -Fraction(t)


def test_minor_rung_with_entries_near_the_float_limit():
    """C5: squares of entries near 1e200 overflow; the 2 x 2 rung must still give
    a verified witness (no floating-point warning escapes)."""
    K = _after_a_mild_failure([np.array([[1e200, 2e200], [2e200, 1e200]])])
    r = check_psd(K, tol=1e-3)
    assert r.verdict is Verdict.NOT_PSD and rayleigh(K, r.witness) < -Fraction(1e-3)


# ---------------------------------------------------------------------------
# the eigenvalue-estimate rung
# ---------------------------------------------------------------------------


def _ladder(t: float, lam: float, err: float) -> _Ladder:
    lad = _Ladder(check_psd_iv(np.eye(3), Tolerance(t, "test")))
    lad.lam, lad.lam_err = lam, err
    return lad


@pytest.mark.parametrize(
    ("t", "lam", "err", "decides"),
    [
        (1e-3, 0.0, 1e-4, True),  # -1e-4 >= -1e-3
        # binary values, exact differences: the boundary itself is accepted
        (2.0**-10, -(2.0**-11), 2.0**-11, True),  # -2^-10 >= -2^-10
        (2.0**-10, -(2.0**-11), 2.0**-11 + 2.0**-40, False),  # just below -tol
        (1e-3, 5.0, 0.0, True),
        (0.0, 1.0, 0.0, False),  # tol = 0 asks the exact question: no estimate answers it
        (1e-3, math.nan, 0.0, False),  # no estimate
        (1e-3, math.inf, 0.0, False),
    ],
)
def test_eigh_estimate_rule(t, lam, err, decides):
    r = _ladder(t, lam, err).eigh_estimate()
    if not decides:
        assert r is None
        return
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.is_psd
    assert not r.certified and r.method == "eigh"
    assert r.min_eigenvalue == lam and r.min_eigenvalue_error == err
    assert "not certified" in r.reason and "error bound" in r.reason


@pytest.mark.parametrize("n", [2, 5, 9])
def test_eigh_error_bound_is_the_documented_backward_error(n):
    """C5: the eigh rung reports ``gamma_{p(n)} ||K||_F`` with ``p(n) = 64 (n + 2)``
    (the documented model, ``docs/psd.md``) as the error of its estimate; here
    ``||K||_F`` is summed in 50-digit mpmath, and the bound covers the distance to
    ``lambda_min`` of ``Q diag(lambda) Q^T`` up to the rounding of forming ``K``."""
    rng = np.random.default_rng(n)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.linspace(-1.0, 2.0, n)
    K = (Q * lam) @ Q.T
    K = (K + K.T) / 2
    r = check_psd(K, tol=0, method="eigh")
    with mpmath.workdps(50):
        fro = float(mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in K.ravel())))
    p = 64 * (n + 2)
    g = p * 2.0**-53 / (1 - p * 2.0**-53)
    assert abs(r.min_eigenvalue_error - g * fro) <= 4 * 2.0**-53 * g * fro
    assert abs(r.min_eigenvalue - lam[0]) <= r.min_eigenvalue_error


# ---------------------------------------------------------------------------
# the mpmath rung
# ---------------------------------------------------------------------------


def test_mpmath_certifies_what_float64_cannot():
    H = hilbert(12)  # PD; float64 Cholesky certificate fails (c > lambda_min)
    r = check_psd(H, tol=0, method="mpmath")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "mpmath"
    assert reference_kind(H) == "pd"
    assert check_psd(H, tol=0, method="cholesky").verdict is Verdict.INCONCLUSIVE


def test_mpmath_rung_decides_what_float64_cannot():
    # 1 - 2**-50 off the diagonal: float64 Cholesky cannot certify it, the mpmath rung can
    eps = 2.0**-50
    assert (
        check_psd(np.array([[1.0, 1.0 - eps], [1.0 - eps, 1.0]]), tol=0, method="cholesky").verdict
        is Verdict.INCONCLUSIVE
    )
    K = np.array([[1.0, 1.0 - eps], [1.0 - eps, 1.0]])
    r = check_psd(K, tol=0, method="mpmath")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "mpmath"
    bad = np.array([[1.0, 1.0 + 2.0**-52], [1.0 + 2.0**-52, 1.0]])
    rb = check_psd(bad, tol=0, method="mpmath")
    assert rb.verdict is Verdict.NOT_PSD and sylvester.rayleigh(bad, rb.witness) < 0
    assert MPMATH_PRECISIONS[0] >= 113


def test_mpmath_rung_runs_at_its_size_limit():
    """C5: ``n = MPMATH_MAX_N`` is within the mpmath rung's limit (``n <= 100``): a PD
    diagonal matrix of that size is certified there."""
    K = np.diag(np.arange(1.0, MPMATH_MAX_N + 1))
    r = check_psd(K, tol=0, method="mpmath")
    assert (r.verdict, r.method, r.rungs) == (Verdict.POSITIVE_DEFINITE, "mpmath", ("mpmath",))


@pytest.mark.parametrize("k,n,seed", [(2, 3, 0), (3, 5, 1), (4, 4, 2), (5, 7, 3)])
def test_mpmath_pivot_vector_is_the_witness_on_the_leading_coordinates(k, n, seed):
    """C5: the mpmath rung on a matrix whose Schur complement at pivot ``k`` is
    exactly ``-1`` fails at that pivot at the first precision; its pivot vector
    ``[-A11^{-1} a; 1; 0]`` (solved with the computed factor) is the witness:
    zero after coordinate ``k``, non-zero at ``k``, Rayleigh quotient exactly
    negative, and ``v^T K v / v_k^2`` equal to the Schur complement ``-1`` to the
    accuracy of a 113-bit solve."""
    K = failing_at(k, n, seed)
    r = check_psd(K, tol=0, method="mpmath")
    assert (r.verdict, r.method, r.rungs) == (Verdict.NOT_PSD, "mpmath", ("mpmath",))
    assert int(re.search(r"(\d+)-bit", r.reason).group(1)) == 113
    w = [Fraction(int(x)) if not isinstance(x, float) else F(x) for x in r.witness]
    assert all(x == 0 for x in w[k:]) and w[k - 1] != 0
    q = sum(w[i] * F(K[i, j]) * w[j] for i in range(n) for j in range(n))
    assert q < 0
    assert abs(q / (w[k - 1] ** 2) + 1) < Fraction(1, 10**9)


@pytest.mark.parametrize(
    "K,tol,expected",
    [
        (np.diag([1.0, -2.0, 3.0]), 0.0, Verdict.NOT_PSD),  # negative diagonal entry
        (np.array([[1.0, 1.0], [1.0, 0.0]]), 0.0, Verdict.NOT_PSD),  # zero diagonal, coupled
        (np.array([[2.0, 1.0], [1.0, 0.0]]), 0.0, Verdict.NOT_PSD),
        (np.array([[0.1, 0.6], [0.6, 1.0]]), 0.5, Verdict.POSITIVE_SEMIDEFINITE),  # lmin = -0.2
        (np.array([[0.1, 0.6], [0.6, 1.0]]), 0.1, Verdict.NOT_PSD),
    ],
)
def test_mpmath_rung_on_small_diagonals(K, tol, expected):
    """C5: the mpmath rung with a diagonal entry that is negative, zero, or below
    ``tol`` (where only ``K + tol I`` can be certified): the verdict agrees with
    Sylvester's criterion on ``K + tol I`` (``lambda_min = -0.2`` for the last two),
    the witness is exact, and the reason says which matrix was certified."""
    r = check_psd(K, tol=tol, method="mpmath")
    assert (r.verdict, r.method, r.certified) == (expected, "mpmath", True)
    if expected is Verdict.NOT_PSD:
        n = K.shape[0]
        w = [F(x) for x in r.witness]
        q = sum(w[i] * F(K[i, j]) * w[j] for i in range(n) for j in range(n))
        assert q / sum(x * x for x in w) < -Fraction(tol)
        assert int(np.argmin(np.diagonal(K))) in np.flatnonzero(np.asarray(r.witness, float))
    else:
        assert "tol I" in r.reason  # the certificate was for K + tol I, not K
    pd = check_psd(np.array([[2.0, 1.0], [1.0, 2.0]]), tol=tol, method="mpmath")
    assert pd.verdict is Verdict.POSITIVE_DEFINITE and "tol" not in pd.reason


# ---------------------------------------------------------------------------
# reasons name the rung and carry the result's numbers
# ---------------------------------------------------------------------------


#: The words by which a reason names the rung that produced it (the rung names of
#: ``docs/psd.md``): a user reading ``reason`` learns which evidence was used.
RUNG_WORDS = {
    "diagonal": "K[",
    "cholesky": "Cholesky",
    "cholesky+tol": "Cholesky",
    "minor": "minor",
    "eigh": "eigen",
    "mpmath": "-bit",
    "ball": "ball arithmetic",
    "lowrank": "pivoted Cholesky",
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


def test_reason_texts_carry_the_result_numbers():
    """C5: the numbers quoted in ``reason`` are the result's own (3 significant digits)."""
    # inconclusive eigh: lambda_min ~ 0 within its error bound at tol = 0
    K = np.ones((3, 3))
    r = check_psd(K, tol=0, method="eigh")
    lam, err = re.search(r"lambda_min ~ " + NUM + r" \+- " + NUM, r.reason).groups()
    assert r.verdict is Verdict.INCONCLUSIVE
    assert close3(lam, r.min_eigenvalue) and close3(err, r.min_eigenvalue_error)
    # the model's bound, widened by underflow ((n + 2)^2 eta) and rounded up
    g = gamma(EIGH_P(3)) * frobenius(K)
    assert g <= r.min_eigenvalue_error <= g * (1 + 2.0**-50)
    # mpmath limit
    big = np.eye(MPMATH_MAX_N + 1)
    r = check_psd(big, tol=0, method="mpmath")
    n, lim = map(int, re.search(r"n = (\d+) exceeds the mpmath limit (\d+)", r.reason).groups())
    assert (n, lim) == (MPMATH_MAX_N + 1, MPMATH_MAX_N) and r.verdict is Verdict.INCONCLUSIVE
    # exact limit
    r = check_psd(np.eye(5), tol=0, method="exact", max_exact_n=4)
    n, lim = map(int, re.search(r"n = (\d+) exceeds max_exact_n = (\d+)", r.reason).groups())
    assert (n, lim) == (5, 4) and r.verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("n", [MPMATH_MAX_N, MPMATH_MAX_N + 2])
def test_inconclusive_auto_reason_names_the_limits(n):
    """C5: a large exactly singular PSD matrix with exact arithmetic out of reach by
    size is INCONCLUSIVE at ``tol = 0``; the reason quotes ``n``, exactly the limits
    that were exceeded (mpmath still runs at ``n = MPMATH_MAX_N``), and the estimate."""
    X = np.random.default_rng(0).integers(-3, 4, size=(n, 3)).astype(float)
    K = X @ X.T  # exactly PSD of rank 3: no witness exists, no certificate can succeed
    r = check_psd(K, tol=0, max_exact_n=10)
    assert r.verdict is Verdict.INCONCLUSIVE and not r.certified
    assert f"n = {n} > max_exact_n = 10" in r.reason
    assert (f"n > {MPMATH_MAX_N}" in r.reason) == (n > MPMATH_MAX_N)
    assert ("mpmath" in r.rungs) == (n <= MPMATH_MAX_N)
    lam, err = re.search(r"lambda_min ~ " + NUM + r" \+- " + NUM, r.reason).groups()
    assert close3(lam, r.min_eigenvalue) and close3(err, r.min_eigenvalue_error)


@pytest.mark.parametrize("c", [1.0, 0.5])
def test_a_zero_diagonal_entry_gives_its_witness_on_the_diagonal_rung(c):
    """``[[0, b], [b, c]]`` with ``b = 1e-320``: ``v = (c, -b)`` has ``v^T K v = -b^2 c < 0``.
    The float eigenvector is ``(1, 0)`` (``b / c`` is below its rounding), and the
    fallback ``(-(c / b + 1), 1)`` overflows; the documented cheap rung (a zero diagonal
    entry with a non-zero entry in its row, at ``tol = 0``) must still decide."""
    K = np.array([[0.0, 1e-320], [1e-320, c]])
    r = check_psd(K, tol=0)
    assert_witness(K, r)
    assert r.method == "diagonal" and r.rungs == ("diagonal",)


def test_the_lower_bound_of_the_cholesky_of_k_plus_tol_widens_by_the_symmetric_parts_error():
    """``A = [[1, 1], [1 + 2^-52, 1]]``: ``A + A^T`` rounds its off-diagonal (a tie) so
    ``H = fl(A + A^T)`` misses ``L`` with ``||L||_F = 2^-52 sqrt 2``.  The Cholesky of
    ``H + shift I`` proves ``lambda_min(2 S) > -shift - ||L||``, and ``shift`` is
    ``2 tol - ||L||``: the bound for ``S`` is ``-tol`` (up to its rounding), not the
    ``||L|| / 2`` higher bound that would hold for ``H``."""
    A = np.array([[1.0, 1.0], [1.0 + 2.0**-52, 1.0]])
    S = [[Fraction(A[i, j]) / 2 + Fraction(A[j, i]) / 2 for j in range(2)] for i in range(2)]
    assert exact_kind(S) == "not_psd"  # lambda_min(S) = -2^-53
    t = 1e-3
    r = check_psd(A, tol=t, method="cholesky")
    assert r.symmetrized and r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    assert r.lower_bound <= -t * (1.0 - 8 * U64)
    assert exact_kind(S, shift=-Fraction(r.lower_bound)) in ("pd", "psd")


def test_proven_bounds_of_psd_verdicts_bracket_the_exact_lambda_min():
    """The zero matrix (exact rung) and a rank-one Gram with entries below 1 (low-rank
    rung): ``lambda_min = 0`` exactly, which every proven lower bound must not exceed."""
    r = check_psd(np.zeros((3, 3)), method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.lower_bound <= 0.0 <= r.upper_bound
    b = np.array([0.125, 0.25, 0.375])
    K = np.outer(b, b)  # exact products: rank one exactly
    assert exact_kind(K.tolist()) == "psd"
    r = check_psd(K, tol=1e-3, method="lowrank")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified and r.method == "lowrank"
    assert -1e-3 <= r.lower_bound <= 0.0


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


def test_a_symmetrised_result_keeps_the_rungs_reason_and_adds_the_note():
    """``symmetrize=True``: the reason is the deciding rung's sentence followed by the
    note on the symmetric part -- both, the rung's first (here the Cholesky of the PD
    ``S = [[2, 1], [1, 2]]``, whose reason quotes Rump's shift)."""
    K = np.array([[2.0, 2.0], [0.0, 2.0]])
    r = check_psd(K, symmetrize=True)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.symmetrized and r.method == "cholesky"
    rung, _, note = r.reason.partition("; ")
    assert "Rump's shift" in rung and "symmetri" in note
