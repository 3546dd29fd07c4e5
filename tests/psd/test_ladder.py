"""Which rung of check_psd decides, and what it reports (claim C5).

Matrices are built so that the deciding rung is known in exact arithmetic:
integer Cholesky factors give exact Schur complements (a failed pivot at a
known position), a separated spectrum gives a known smallest eigenvalue, and
reason texts are read back and compared with the result's own fields and with
the matrix, never with a literal string.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg

from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.psd.ladder import EIGH_P, MPMATH_MAX_N, default_tolerance, frobenius
from kernelcheck.psd import Verdict, check_psd

NUM = r"(-?[0-9.]+(?:e[+-]?[0-9]+)?|nan|inf)"


def F(x) -> Fraction:
    return Fraction(float(x))


def rayleigh(K, v) -> Fraction:
    vv = [Fraction(int(x)) if isinstance(x, (int, np.integer)) else F(x) for x in v]
    n = len(vv)
    q = sum(vv[i] * F(K[i, j]) * vv[j] for i in range(n) for j in range(n) if vv[i] and vv[j])
    return q / sum(x * x for x in vv)


def close3(printed: str, value: float) -> bool:
    """``printed`` is ``value`` to the three significant digits of ``:.3g``."""
    return float(printed) == float(f"{value:.3g}")


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
    assert r.witness_value == K[3, 3] and r.min_eigenvalue == K[3, 3]


def test_reason_texts_carry_the_result_numbers():
    """C5: the numbers quoted in ``reason`` are the result's own (3 significant digits)."""
    # inconclusive eigh: lambda_min ~ 0 within its error bound at tol = 0
    K = np.ones((3, 3))
    r = check_psd(K, tol=0, method="eigh")
    lam, err = re.search(r"lambda_min ~ " + NUM + r" \+- " + NUM, r.reason).groups()
    assert r.verdict is Verdict.INCONCLUSIVE
    assert close3(lam, r.min_eigenvalue) and close3(err, r.min_eigenvalue_error)
    assert r.min_eigenvalue_error == gamma(EIGH_P(3)) * frobenius(K)
    # mpmath limit
    big = np.eye(MPMATH_MAX_N + 1)
    r = check_psd(big, tol=0, method="mpmath")
    n, lim = map(int, re.search(r"n = (\d+) exceeds the mpmath limit (\d+)", r.reason).groups())
    assert (n, lim) == (MPMATH_MAX_N + 1, MPMATH_MAX_N) and r.verdict is Verdict.INCONCLUSIVE
    # exact limit
    r = check_psd(np.eye(5), tol=0, method="exact", max_exact_n=4)
    n, lim = map(int, re.search(r"n = (\d+) exceeds max_exact_n = (\d+)", r.reason).groups())
    assert (n, lim) == (5, 4) and r.verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_exact_rung_counts_the_zero_pivots_of_a_singular_psd_matrix(rank):
    """C5: for an integer PSD matrix ``X X^T`` of rank ``r`` (n = 4), the exact rung
    reports PSD and singular with ``n - r`` zero pivots (rank from NumPy on the
    integer factor, exact here)."""
    rng = np.random.default_rng(rank)
    X = rng.integers(-3, 4, size=(4, rank)).astype(float)
    while np.linalg.matrix_rank(X) < rank:
        X = rng.integers(-3, 4, size=(4, rank)).astype(float)
    K = X @ X.T if rank else np.zeros((4, 4))
    if rank == 0:
        K[0, 0] = 0.0
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified
    if rank:
        zeros = int(re.search(r"\((\d+) zero pivot", r.reason).group(1))
        assert zeros == 4 - rank


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


def test_exact_rung_witness_is_float_when_a_float_vector_does_it():
    """C5: the exact rung's integer witness of a small integer matrix is returned as a
    float64 vector (documented: float64 when a float vector does it), still exact."""
    K = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.NOT_PSD and r.witness.dtype == np.float64
    assert rayleigh(K, r.witness) < 0


@pytest.mark.parametrize("e", [600, 1000, 1022])
@pytest.mark.parametrize("n", [2, 5])
def test_estimate_is_scale_invariant_down_to_the_bottom_of_the_range(e, n):
    """C5: ``K = 2**-e (I + J / 2)`` (``lambda_min = 2**-e`` exactly) is certified on the
    fast path with an estimate that is ``2**-e`` times the estimate for ``e = 0``
    (multiplying by a power of two commutes with every rounding, up to the
    underflow terms of Rump's shift, relative ``< 1e-10`` here), still an upper
    bound of ``lambda_min`` up to the rounding of the Rayleigh quotient (relative
    ``gamma_(2n+2)``, taken as ``4 (n + 1) u``); ``B^-1 x`` is near the top of the
    float range there, and no overflow may leak (floating-point warnings are errors
    in this suite)."""
    A = np.eye(n) + 0.5 * np.ones((n, n))
    r0 = check_psd(A)
    r = check_psd(np.ldexp(A, -e))
    assert (r.verdict, r.method) == (Verdict.POSITIVE_DEFINITE, "cholesky")
    assert abs(np.ldexp(r.min_eigenvalue, e) - r0.min_eigenvalue) <= 1e-10 * r0.min_eigenvalue
    assert np.ldexp(r.min_eigenvalue, e) >= 1.0 - 4 * (n + 1) * 2.0**-53
