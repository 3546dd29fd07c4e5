"""Unit tests of check_psd, mercer_features and Nystrom (claims C5, C6).

References are independent of the code under test: an exact rational LDL^T
written here with ``fractions.Fraction`` (no shared code with
``kernelcheck._src.psd.exact``), and witnesses re-verified with Fractions.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck import Gaussian, InvalidArgument, Linear
from kernelcheck._src.psd.ladder import MPMATH_MAX_N, assert_psd, default_tolerance
from kernelcheck.psd import Nystrom, PSDResult, Verdict, check_psd, mercer_features

# ---------------------------------------------------------------------------
# independent exact reference
# ---------------------------------------------------------------------------


def reference_kind(K: np.ndarray) -> str:
    """'pd', 'psd' or 'not_psd' by rational symmetric elimination (Fractions)."""
    n = K.shape[0]
    A = [[Fraction(float(K[i, j])) for j in range(n)] for i in range(n)]
    singular = False
    for k in range(n):
        p = A[k][k]
        if p < 0:
            return "not_psd"
        if p == 0:
            if any(A[k][j] != 0 for j in range(k + 1, n)):
                return "not_psd"
            singular = True
            continue
        for i in range(k + 1, n):
            f = A[i][k] / p
            if f:
                for j in range(k + 1, n):
                    A[i][j] -= f * A[k][j]
    return "psd" if singular else "pd"


def exact_rayleigh(K: np.ndarray, v) -> Fraction:
    """v^T K v / v^T v with Fractions (v float or Python ints)."""
    fv = [Fraction(int(x)) if isinstance(x, int) else Fraction(float(x)) for x in v]
    n = len(fv)
    num = sum(
        fv[i] * Fraction(float(K[i, j])) * fv[j]
        for i in range(n)
        for j in range(n)
        if fv[i] and fv[j]
    )
    return num / sum(x * x for x in fv)


def assert_witness(K, r: PSDResult):
    assert r.verdict is Verdict.NOT_PSD and r.certified
    q = exact_rayleigh(K, r.witness)
    assert q < -Fraction(r.tol.value)
    assert str(q.numerator) + "/" + str(q.denominator) == r.witness_value_exact


def hilbert(n):
    return np.array([[1.0 / (i + j + 1) for j in range(n)] for i in range(n)])


KIND = {
    "pd": Verdict.POSITIVE_DEFINITE,
    "psd": Verdict.POSITIVE_SEMIDEFINITE,
    "not_psd": Verdict.NOT_PSD,
}


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------

BAD = [
    (np.ones((2, 3)), {}, "square"),
    (np.ones(3), {}, "square"),
    (np.zeros((0, 0)), {}, "empty"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), {}, "finite"),
    (np.array([[np.inf, 0.0], [0.0, 1.0]]), {}, "finite"),
    (np.eye(2) + 0j, {}, "real"),
    (np.array([[1, 0], [0, 1]], dtype=object), {}, "numeric"),
    ("abc", {}, "numeric"),
    (np.array([[1.0, 2.0], [2.0 + 1e-12, 1.0]]), {}, "max |K - K^T|"),
    (np.eye(2), {"method": "cholesky2"}, "method"),
    (np.eye(2), {"tol": -1.0}, "tol"),
    (np.eye(2), {"tol": float("nan")}, "tol"),
    (np.eye(2), {"symmetrize": "yes"}, "symmetrize"),
    (np.eye(2), {"max_exact_n": -1}, "max_exact_n"),
]


@pytest.mark.parametrize("K, kwargs, words", BAD)
def test_bad_input(K, kwargs, words):
    with pytest.raises(InvalidArgument, match=None) as info:
        check_psd(K, **kwargs)
    assert words in str(info.value)


def test_asymmetry_message_says_by_how_much():
    K = np.array([[1.0, 0.5], [0.25, 1.0]])
    with pytest.raises(InvalidArgument, match=r"0\.25 at index \(0, 1\)"):
        check_psd(K)


def test_symmetrize_is_explicit_and_recorded():
    K = np.array([[2.0, 1.0], [1.0 + 2**-40, 2.0]])
    r = check_psd(K, symmetrize=True)
    assert r.symmetrized and r.asymmetry == 2**-40
    assert r.verdict is Verdict.POSITIVE_DEFINITE


def test_float32_is_widened_exactly_and_accepted():
    K = np.array([[2.0, 1.0], [1.0, 2.0]], dtype=np.float32)
    r = check_psd(K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE
    # the default tolerance uses float32's unit roundoff
    assert r.tol.value == default_tolerance(K, dtype=np.float32).value


# ---------------------------------------------------------------------------
# hard matrices judged against exact rational arithmetic
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(6, 21))
def test_hilbert_tol0_matches_exact_rationals(n):
    H = hilbert(n)
    r = check_psd(H, tol=0)
    ref = reference_kind(H)
    assert r.verdict is KIND[ref]
    assert r.certified
    if ref == "not_psd":
        assert_witness(H, r)


@pytest.mark.parametrize("sign", [-1.0, 1.0])
@pytest.mark.parametrize("n", [8, 30])
def test_eigenvalue_1e14_relative(sign, n):
    rng = np.random.default_rng(n)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.linspace(1.0, 2.0, n)
    lam[0] = sign * 1e-14 * 2.0
    K = (Q * lam) @ Q.T
    K = 0.5 * (K + K.T)
    r = check_psd(K, tol=0)
    ref = reference_kind(K)
    assert r.verdict is KIND[ref] and r.certified
    if sign < 0:
        assert ref == "not_psd"  # rounding of the construction is far below 1e-14
        assert_witness(K, r)
        assert r.witness_value == pytest.approx(-2e-14, rel=1e-2)
    # within the default tolerance the matrix is PSD: 2e-14 is below rounding resolution
    assert check_psd(K).is_psd


def test_rank_deficient_integer_gram_is_exactly_singular_psd():
    X = np.arange(24.0).reshape(8, 3) % 5 - 2.0
    K = X @ X.T  # integers: computed exactly, rank <= 3 < 8
    r = check_psd(K, tol=0)
    assert reference_kind(K) == "psd"
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified and r.method == "exact"
    assert check_psd(K).is_psd


@pytest.mark.parametrize("seed", range(4))
def test_rank_deficient_float_gram(seed):
    X = np.random.default_rng(seed).standard_normal((12, 3))
    K = X @ X.T
    assert check_psd(K).is_psd
    r = check_psd(K, tol=0)
    assert r.verdict is KIND[reference_kind(K)] and r.certified
    if r.verdict is Verdict.NOT_PSD:
        assert_witness(K, r)


def test_gaussian_on_close_points():
    X = np.linspace(0.0, 1e-3, 10)[:, None]
    K = Gaussian(1.0)(X)
    assert check_psd(K).is_psd
    r = check_psd(K, tol=0)
    assert r.verdict is KIND[reference_kind(K)] and r.certified


def test_inconclusive_says_where_the_limit_is():
    X = (np.arange(360.0).reshape(120, 3) % 7) - 3.0
    K = X @ X.T  # exactly singular PSD, n beyond the limits given
    assert K.shape[0] > MPMATH_MAX_N
    r = check_psd(K, tol=0, max_exact_n=10)
    assert r.verdict is Verdict.INCONCLUSIVE and not r.is_psd and not r.certified
    assert "max_exact_n = 10" in r.reason


# ---------------------------------------------------------------------------
# rungs
# ---------------------------------------------------------------------------


def _pd_gram(n, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, 5))
    return Gaussian(2.0)(X) + 0.1 * np.eye(n)


def test_fast_path_is_one_certified_cholesky():
    K = _pd_gram(300)
    r = check_psd(K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "cholesky"
    assert r.rungs == ("diagonal", "cholesky")
    lo, hi = r.eigenvalue_interval()
    lam = np.linalg.eigvalsh(K)[0]
    assert lo <= lam <= hi * (1 + 1e-12)


def test_badly_scaled_pd_matrix_needs_the_diagonal_scaling():
    rng = np.random.default_rng(3)
    B = rng.standard_normal((40, 40))
    C = B @ B.T + 40 * np.eye(40)
    d = np.ldexp(1.0, rng.integers(-30, 30, size=40))
    K = C * d[:, None] * d[None, :]
    r = check_psd(K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.method == "cholesky"


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


def test_mpmath_certifies_what_float64_cannot():
    H = hilbert(12)  # PD; float64 Cholesky certificate fails (c > lambda_min)
    r = check_psd(H, tol=0, method="mpmath")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "mpmath"
    assert reference_kind(H) == "pd"
    assert check_psd(H, tol=0, method="cholesky").verdict is Verdict.INCONCLUSIVE


def test_exact_with_positive_tolerance():
    K = np.diag([1.0, -1e-10])
    assert check_psd(K, tol=1e-9, method="exact").verdict is Verdict.POSITIVE_SEMIDEFINITE
    r = check_psd(K, tol=1e-11, method="exact")
    assert_witness(K, r)


# ---------------------------------------------------------------------------
# result object and assertion twin
# ---------------------------------------------------------------------------


def test_result_is_frozen_json_and_reads_as_a_verdict():
    r = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert not r and not r.passed
    with pytest.raises(AttributeError):
        r.verdict = Verdict.POSITIVE_DEFINITE  # type: ignore[misc]
    d = json.loads(r.to_json())
    assert d["verdict"] == "not_psd" and d["tol"]["source"]
    assert str(r).startswith("NOT_PSD (certified")


def test_assert_psd_message_says_what_where_how_much_tolerance():
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(AssertionError) as info:
        assert_psd(K)
    msg = str(info.value)
    for word in ("not PSD within tol", "witness", "indices [0, 1]", "-1", "below -tol by"):
        assert word in msg
    assert assert_psd(np.eye(2)).is_psd


# ---------------------------------------------------------------------------
# Mercer features (C6)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_mercer_features_reproduce_K(seed):
    X = np.random.default_rng(seed).standard_normal((15, 4))
    K = Gaussian(1.5)(X)
    F = mercer_features(K)
    assert F.passed and F.phi.shape == (15, F.rank)
    assert np.max(np.abs(F.phi @ F.phi.T - K)) <= F.error_bound


def test_mercer_rank_of_linear_gram_is_d():
    X = np.random.default_rng(1).standard_normal((20, 3))
    F = mercer_features(X @ X.T)
    assert F.rank == 3 and F.passed


def test_mercer_refuses_non_psd():
    with pytest.raises(InvalidArgument, match="not PSD"):
        mercer_features(np.array([[1.0, 2.0], [2.0, 1.0]]))


def test_nystrom_reproduces_landmarks_and_linear_kernel():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((10, 3))
    Y = rng.standard_normal((4, 3))
    phi = Nystrom(Linear(), X)
    F = mercer_features(Linear()(X))
    # at the landmarks: the Mercer rows, up to the sign of each eigenvector
    assert np.allclose(np.abs(phi(X)), np.abs(F.phi), atol=1e-12)
    # the linear kernel lies in the span: exact on new points (error model: ~ n u |Y||X|)
    assert np.max(np.abs(phi.approximate_kernel(Y, X) - Y @ X.T)) < 1e-12
    ext = F.extend(Linear(), X)
    assert np.allclose(ext(Y) @ ext(X).T, Y @ X.T, atol=1e-12)


def test_nystrom_gaussian_matches_gram_at_landmarks():
    X = np.random.default_rng(4).standard_normal((12, 2))
    G = Gaussian(1.0)
    phi = Nystrom(G, X)
    F = phi.features
    assert np.max(np.abs(phi(X) @ phi(X).T - G(X))) <= F.error_bound + F.residual


def test_extend_refuses_other_landmarks():
    X = np.random.default_rng(5).standard_normal((6, 2))
    F = mercer_features(Gaussian(1.0)(X))
    with pytest.raises(InvalidArgument, match="landmarks"):
        F.extend(Gaussian(1.0), 2.0 * X)  # (a shift would not do: Gaussian is shift-invariant)
