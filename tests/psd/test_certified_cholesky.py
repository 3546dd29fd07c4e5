"""The certified Cholesky rungs of check_psd, at the boundary of their certificate (claim C5).

Rump's certificate (``certified_cholesky``; S. M. Rump, BIT 46, 2006) proves
``K + shift I`` positive definite when a floating-point Cholesky of a matrix
``B`` succeeds, provided ``B`` has the off-diagonal of ``T = D (K + shift I) D``
exactly, ``B_jj <= T_jj - c`` exactly, and

    c >= sum_j (j + 2) u T_jj + 6 n (n + max_j T_jj) eta      (u = 2**-53, eta = 2**-1074).

The tests below check these preconditions in exact rational arithmetic on the
matrix actually handed to LAPACK (soundness), check that ``c`` and ``B_jj``
are not looser than the rounding of their own evaluation (tightness: the
certificate's power), and place the smallest eigenvalue of small matrices on
both sides of the shift, where the exact eigenvalue is known in rational
arithmetic, for the float64 and the mpmath rungs.  Graded matrices spanning hundreds of
binades check the van der Sluis scaling at the limits of the exponent range.
The refusals are checked too: an overflow inside ``dpotrf`` is a failed pivot at
the first non-positive leading minor (in fractions), a shifted diagonal of
exactly zero or beyond the float range gives no certificate and says so in
every field, and zero entries of a graded matrix do not fail its scaling.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.psd import cholesky as C
from kernelcheck._src.psd.cholesky import certified_cholesky
from kernelcheck._src.psd.highprec import MPMATH_PRECISIONS, mp_certified_cholesky
from kernelcheck._src.psd.tolerance import default_tolerance
from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import assert_witness
from tests.psd.sylvester import det, pd_psd, rayleigh

U = Fraction(1, 2**53)
ETA = Fraction(1, 2**1074)
FAST_PD = (Verdict.POSITIVE_DEFINITE, "cholesky", ("diagonal", "cholesky"))


def F(x) -> Fraction:
    return Fraction(float(x))


def rump_shift(Tdiag: list[Fraction], u: Fraction = U, eta: Fraction = ETA) -> Fraction:
    """Rump's minimal shift ``sum_j (j + 2) u T_jj + 6 n (n + max T_jj) eta``, exactly."""
    n = len(Tdiag)
    s = sum((j + 3) * u * t for j, t in enumerate(Tdiag))  # j is 0-based here
    return s + 6 * n * (n + max(Tdiag)) * eta


def lambda_min_2x2(K) -> tuple[Fraction, Fraction]:
    """Rational bounds ``det / tr <= lambda_min <= 2 det / tr`` of a 2 x 2 PD matrix."""
    a, b, c = F(K[0, 0]), F(K[0, 1]), F(K[1, 1])
    det, tr = a * c - b * b, a + c
    return det / tr, 2 * det / tr


@pytest.fixture
def handed_to_lapack(monkeypatch):
    """Record a copy of every matrix ``certified_cholesky`` gives to ``dpotrf``."""
    seen: list[np.ndarray] = []
    real = C.lapack.dpotrf

    def spy(a, *args, **kwargs):
        seen.append(np.array(a, dtype=np.float64, copy=True))
        return real(a, *args, **kwargs)

    monkeypatch.setattr(C.lapack, "dpotrf", spy)
    return seen


def _spread(n, lo, hi, seed):
    """A PD matrix ``D A D`` with ``A`` well conditioned and ``D`` spanning 2**lo .. 2**hi."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    A = A @ A.T + n * np.eye(n)
    D = np.ldexp(1.0, rng.integers(lo, hi + 1, size=n))
    return D[:, None] * A * D[None, :]


def _extreme_low():
    """PD; the two large diagonal entries would put ``d_1 d_2 K_12`` below the normal range."""
    K = np.diag([2.0**600, 2.0**600, 2.0**-600])
    K[0, 1] = K[1, 0] = 2.0**-1000
    return K


def _extreme_high():
    """Not PD; scaling would overflow ``d_1 d_2 K_12 = 2**1600``."""
    K = np.diag([2.0**-600, 2.0**-600, 1.0])
    K[0, 1] = K[1, 0] = 2.0**1000
    return K


def _extreme_high_2():
    """Not PD; ``d = (2**150, 2**150, 1)`` would overflow ``d_1 d_2 K_12 = 2**1100``."""
    K = np.diag([2.0**-300, 2.0**-300, 1.0])
    K[0, 1] = K[1, 0] = 2.0**800
    return K


def _subnormal_product():
    """Scaling would put ``d_1 d_2 K_12 = (1 + 2**-52) 2**-1040`` in the subnormal range."""
    K = np.diag([2.0**340, 2.0**340, 1.0])
    K[0, 1] = K[1, 0] = (1 + 2.0**-52) * 2.0**-700
    return K


PRECONDITION_CORPUS = {
    "subnormal product": _subnormal_product(),
    "extreme high 2": _extreme_high_2(),
    "exponent 500": np.diag([2.0**-1000, 2.0**-900]),
    "2x2": np.array([[2.0, 1.0], [1.0, 2.0]]),
    "scaled 2x2": np.array([[1.0, 0.5 * 2.0**-40], [0.5 * 2.0**-40, 2.0**-80]]),
    "spread 5": _spread(5, -30, 30, 1),
    "spread 6": _spread(6, -200, 200, 2),
    "mild spread 4": _spread(4, 0, 1, 3),
    "subnormal": 1e-310 * np.array([[2.0, 1.0], [1.0, 2.0]]),
    "huge": np.array([[1e300, 5e299], [5e299, 1e300]]),
    "1e-300 and 1e300": np.diag([1e-300, 1e300]),
    "extreme low": _extreme_low(),
    "extreme high": _extreme_high(),
    "hilbert 6": 1.0 / (np.arange(6)[:, None] + np.arange(6)[None, :] + 1.0),
    "1x1": np.array([[3.0]]),
    "indefinite": np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 4.0]]),
}


@pytest.mark.parametrize("name", sorted(PRECONDITION_CORPUS))
@pytest.mark.parametrize("shift", ["zero", "tol"])
def test_rump_preconditions_hold_exactly_on_the_matrix_factorised(name, shift, handed_to_lapack):
    """C5, soundness and tightness of Rump's certificate on the matrix given to ``dpotrf``.

    Soundness (exact rationals): ``d`` are powers of two; ``B_ij = d_i d_j K_ij``
    for ``i != j``; ``c >=`` Rump's minimal shift (module docstring) of
    ``T_jj = d_j^2 (K_jj + shift)``; ``B_jj <= T_jj - c``.

    Tightness (the certificate's power): forming ``c`` takes at most ``n + 6``
    roundings and two explicit ``O(u)`` inflations (``1 + 4u`` on ``T_jj``,
    ``1 + 2 (n + 2) u`` on the sum), so ``c <= (1 + (3n + 16) u) c_min + 3 eta``;
    ``B_jj`` loses at most ``2u`` in ``(a + s) - c``, the ``4u`` margin, one
    rounding and one step down: ``T_jj - c - B_jj <= 10 u (|a| + |s| + c) + 2 eta``.
    """
    K = PRECONDITION_CORPUS[name]
    n = K.shape[0]
    s = 0.0 if shift == "zero" else default_tolerance(K).value
    ch = certified_cholesky(K, s)
    if not handed_to_lapack:  # refused before factorising: a non-positive K_jj + shift
        assert not ch.ok and any(F(K[j, j]) + F(s) <= 0 for j in range(n))
        return
    (B,) = handed_to_lapack
    d = ch.d
    assert np.all(np.frexp(d)[0] == 0.5)  # powers of two: the scaling is exact
    T = [F(d[j]) ** 2 * (F(K[j, j]) + F(s)) for j in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                assert F(B[i, j]) == F(d[i]) * F(d[j]) * F(K[i, j]), (i, j)
    c = F(ch.c)
    cmin = rump_shift(T)
    assert c >= cmin
    assert c <= (1 + (3 * n + 16) * U) * cmin + 3 * ETA
    for j in range(n):
        a, sj = F(d[j]) ** 2 * F(K[j, j]), F(d[j]) ** 2 * F(s)
        assert F(B[j, j]) <= T[j] - c, j
        assert T[j] - c - F(B[j, j]) <= 10 * U * (abs(a) + abs(sj) + c) + 2 * ETA, j
    # the verdict follows the factorisation: success proves K + shift I PD
    if ch.ok:
        assert np.linalg.eigvalsh(K.astype(np.float64) / np.max(np.abs(K)))[0] > -1e-6 or s > 0


# ---------------------------------------------------------------------------
# the van der Sluis scaling
# ---------------------------------------------------------------------------


def test_scaling_is_what_certifies_a_badly_scaled_matrix():
    """C5: ``K = D A D`` with ``A = [[1, 1/2], [1/2, 1]]``, ``D = diag(1, 2**-40)``.

    ``lambda_min(K) ~ 0.75 * 2**-80`` is far below the unscaled shift
    ``c ~ 3 u K_11 = 3 * 2**-53``, so only the scaled certificate (``T = A``,
    ``c ~ 7u``) can succeed; it must decide on the fast path, and the scaled
    shift printed in the reason must be Rump's shift of ``T = A``.
    """
    K = np.array([[1.0, 0.5 * 2.0**-40], [0.5 * 2.0**-40, 2.0**-80]])
    r = check_psd(K)
    assert (r.verdict, r.method, r.rungs) == FAST_PD
    c = float(re.search(r"c = ([0-9.e+-]+)", r.reason).group(1))
    cmin = float(rump_shift([Fraction(1), Fraction(1)]))
    assert cmin <= c * (1 + 5e-3) and c <= cmin * (1 + 5e-3)  # 3 significant digits
    # without scaling the same matrix is beyond float64 Cholesky: it needs 2**-80 resolution
    unscaled_c = float(rump_shift([F(K[0, 0]), F(K[1, 1])]))
    assert unscaled_c > 2**-80


@pytest.mark.parametrize("lo,hi", [(-40, 40), (-120, 120), (-240, 240)])
def test_scaled_certificate_decides_pd_matrices_spanning_many_binades(lo, hi):
    """C5: ``D A D`` with ``A`` well conditioned (``lambda_min(A) >= n``) and ``D``
    powers of two over ``2**lo .. 2**hi``: the scaled certificate sees ``T ~ A``
    with ``c ~ n^2 u`` and must prove it on the fast path; an unscaled shift
    ``c ~ u max K_jj`` is above the smallest diagonal entry, so the unscaled
    Cholesky fails (checked independently here)."""
    K = _spread(6, lo, hi, 7)
    r = check_psd(K, tol=0)
    assert (r.verdict, r.method, r.rungs) == FAST_PD
    dg = np.diagonal(K)
    assert float(rump_shift([F(x) for x in dg])) > dg.min()


def test_scaling_is_refused_where_products_leave_the_range(handed_to_lapack):
    """C5: a PD matrix whose scaling would underflow an off-diagonal product is
    factorised unscaled (``d = 1``), exactly as given; the verdict stays certified."""
    K = _extreme_low()
    ch = certified_cholesky(K, 0.0)
    assert np.all(ch.d == 1.0)
    assert np.array_equal(handed_to_lapack[0][~np.eye(3, dtype=bool)], K[~np.eye(3, dtype=bool)])
    K2 = _extreme_high()
    ch2 = certified_cholesky(K2, 0.0)
    assert np.all(ch2.d == 1.0) and not ch2.ok
    r = check_psd(K2, tol=0)
    assert r.verdict is Verdict.NOT_PSD and rayleigh(K2, r.witness) < 0


def test_badly_scaled_pd_matrix_needs_the_diagonal_scaling():
    rng = np.random.default_rng(3)
    B = rng.standard_normal((40, 40))
    C = B @ B.T + 40 * np.eye(40)
    d = np.ldexp(1.0, rng.integers(-30, 30, size=40))
    K = C * d[:, None] * d[None, :]
    r = check_psd(K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.method == "cholesky"


def test_graded_matrix_spanning_hundreds_of_binades_is_certified_on_the_fast_path():
    """``K = D A D`` with ``A`` well conditioned and ``D = diag(2^e_i)``, ``e_i`` from
    -300 to 300: every scaled product ``K_ij d_i d_j`` is ``A_ij`` exactly (powers of
    two), so the van der Sluis scaling must be applied and Rump's certificate on
    ``A`` succeeds (n = 120 is beyond the mpmath and exact rungs: only the fast path
    can certify).  D A D is PD exactly when A is; A = I + J / (2n) has
    ``lambda_min = 1``."""
    n = 120
    e = np.linspace(-300, 300, n).round().astype(int)
    A = np.eye(n) + np.ones((n, n)) / (2 * n)
    K = np.ldexp(np.ldexp(A, e[:, None]), e[None, :])
    r = check_psd(K)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_DEFINITE, "cholesky", True)
    r0 = check_psd(K, tol=0)
    assert (r0.verdict, r0.method, r0.certified) == (Verdict.POSITIVE_DEFINITE, "cholesky", True)


def _graded(off: tuple[int, int, float]) -> np.ndarray:
    """diag(2^600, 1, 2^-600) (scaling d = (2^-300, 1, 2^300), and the global bound
    min|K| min(d)^2 = 2^-1200 fails) with one symmetric off-diagonal pair."""
    K = np.diag([2.0**600, 1.0, 2.0**-600])
    i, j, v = off
    K[i, j] = K[j, i] = v
    return K


@pytest.mark.parametrize(
    ("off", "applied"),
    [
        # K_01 d_0 d_1 = v 2^-300 (and K_01 d_0 = v 2^-300 first): the lower limit is 2^-969
        ((0, 1, 2.0**-669), True),  # exactly 2^-969
        ((0, 1, 2.0**-670), False),  # 2^-970
        ((0, 1, 1.5 * 2.0**-670), False),  # 1.5 2^-970, still below
        # K_12 d_1 d_2 = v 2^300: the upper limit is 2^1022 (exclusive)
        ((1, 2, 1.5 * 2.0**721), True),  # 1.5 2^1021
        ((1, 2, 2.0**722), False),  # 2^1022
    ],
)
def test_entrywise_scaling_limits(off, applied):
    """The documented condition of ``van_der_sluis_scaling`` for graded matrices: every product
    ``K_ij d_i`` and ``K_ij d_i d_j`` of a nonzero entry within ``[2^-969, 2^1022)``.
    The products here are computed in exact binary arithmetic by hand (powers of
    two), so the test states the limits independently of the code's exponent
    bookkeeping."""
    from kernelcheck._src.psd.cholesky import van_der_sluis_scaling

    K = _graded(off)
    d = van_der_sluis_scaling(np.diagonal(K).copy(), K)
    if applied:
        np.testing.assert_array_equal(d, [2.0**-300, 1.0, 2.0**300])
    else:
        np.testing.assert_array_equal(d, np.ones(3))


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


# ---------------------------------------------------------------------------
# the shift boundary, float64
# ---------------------------------------------------------------------------


def _near_singular(delta_units: int, scale_bits: int = 0):
    """``K = [[1, b], [b, b^2 + delta]]`` with ``b = 2**-k`` exact: ``det = delta`` exactly."""
    b = 2.0**-scale_bits
    y = b * b + delta_units * 2.0**-52 * b * b
    K = np.array([[1.0, b], [b, y]])
    return K


@pytest.mark.parametrize("mult", [0.25, 0.5, 4.0, 16.0, 64.0])
def test_float_certificate_succeeds_above_a_multiple_of_the_shift(mult):
    """C5, tightness of the float64 certificate on 2 x 2 matrices of known spectrum.

    For ``T = [[1, b], [b, b^2 + delta]]`` (exact floats, ``det = delta``)
    the Cholesky pivot of ``B = T - c I`` is ``delta - c (1 + b^2) + O(c^2)``
    up to rounding ``<= 4u (1 + b^2)`` (Demmel's bound for n = 2), and
    ``c <= 9u`` here, so the certificate must succeed once
    ``lambda_min(T) >= det / tr > 4 c``; below ``c / 4`` the pivot is below
    ``-2c`` and it must fail (the fast path hands over; a later rung decides
    PD).  Any success is sound: ``det > 0`` exactly.
    """
    K = np.array([[1.0, 0.5], [0.5, 0.25]])  # det 0; add delta to K_22
    c = float(rump_shift([Fraction(1), F(K[1, 1])]))
    delta = float(np.ldexp(1.0, int(np.floor(np.log2(mult * c * 1.25)))))
    K[1, 1] += delta
    low, high = lambda_min_2x2(K)
    assert low > 0
    r = check_psd(K, tol=0)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified
    if low > 4 * c:
        assert (r.method, r.rungs) == ("cholesky", ("diagonal", "cholesky"))
        # the estimate is an upper bound of lambda_min, up to its rounding
        assert r.min_eigenvalue >= float(low) * (1 - 1e-6)
        assert r.min_eigenvalue_error >= r.min_eigenvalue - float(low)
    elif high < c / 4:
        assert r.rungs[:2] == ("diagonal", "cholesky") and r.method != "cholesky"


def test_float_certificate_never_certifies_an_indefinite_matrix_at_the_boundary():
    """C5, soundness: ``det = -2**-104`` exactly (``[[1, x], [x, 1 + 2**-51]]``,
    ``x = 1 + 2**-52``): every rung must say NOT_PSD with an exact witness."""
    x = 1.0 + 2.0**-52
    K = np.array([[1.0, x], [x, 1.0 + 2.0**-51]])
    assert F(K[0, 0]) * F(K[1, 1]) - F(K[0, 1]) ** 2 < 0
    for method in ("auto", "cholesky", "mpmath", "exact"):
        r = check_psd(K, tol=0, method=method)
        assert r.verdict in (Verdict.NOT_PSD, Verdict.INCONCLUSIVE), method
        if r.verdict is Verdict.NOT_PSD:
            assert rayleigh(K, r.witness) < 0
    assert check_psd(K, tol=0).verdict is Verdict.NOT_PSD


# ---------------------------------------------------------------------------
# the shift boundary, mpmath
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [Fraction(1, 8), Fraction(9, 10), Fraction(11, 10), Fraction(8)])
def test_mpmath_certificate_switches_precision_at_its_shift(ratio):
    """C5, the mpmath rung at its boundary: ``K = [[1, b], [b, b^2 + delta]]``, ``b = 2**-32``.

    At ``p`` bits the shift is ``c_p = (3 K_11 + 4 K_22) 2**-p`` (Rump, ``u = 2**-p``,
    no underflow) and the Cholesky pivot is ``delta - c_p (1 + b^2)`` up to
    roundings of relative size ``2**-p`` on entries ``<= 2**-64``, i.e. below
    ``2**-170``: the first precision ``p`` of ``MPMATH_PRECISIONS`` whose
    certificate succeeds is the first with ``c_p (1 + b^2) < delta`` (within
    1e-10 relative).  ``delta`` is placed at ``ratio * c_113 (1 + b^2)``; the
    reason names the precision used.
    """
    b = 2.0**-32
    c113 = (3 * Fraction(1) + 4 * Fraction(b) ** 2) * Fraction(1, 2**113)
    target = ratio * c113 * (1 + Fraction(b) ** 2)
    ulp = Fraction(1, 2**116)  # ulp of b^2 = 2**-64
    delta = round(target / ulp) * ulp
    K = np.array([[1.0, b], [b, float(Fraction(b) ** 2 + delta)]])
    assert F(K[1, 1]) - Fraction(b) ** 2 == delta  # exact
    r = check_psd(K, tol=0, method="mpmath")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.method == "mpmath" and r.certified
    prec = int(re.search(r"(\d+)-bit", r.reason).group(1))
    expected = next(
        p
        for p in MPMATH_PRECISIONS
        if (3 * Fraction(1) + 4 * F(K[1, 1])) * Fraction(1, 2**p) * (1 + Fraction(b) ** 2) < delta
    )
    assert prec == expected


def test_mpmath_certificate_with_tolerance_and_its_witnesses():
    """C5: the mpmath rung tries ``K`` then ``K + tol I``; an indefinite ``K`` with
    ``lambda_min = -det/tr``-ish between ``-tol`` and 0 is PSD within tol (the
    ``K + tol I`` certificate), one below ``-tol`` gets an exact witness."""
    b = 2.0**-32
    ulp = 2.0**-116
    K = np.array([[1.0, b], [b, b * b - 64 * ulp]])  # det = -64 ulp exactly
    low = -64 * ulp / (1 + K[1, 1])
    r = check_psd(K, tol=-4 * low, method="mpmath")
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "mpmath", True)
    assert "K + tol I" in r.reason
    # the pivot vector [-b / (1 - c), 1] is not integral: it must be checked exactly as it is
    r0 = check_psd(K, tol=0, method="mpmath")
    assert (r0.verdict, r0.method) == (Verdict.NOT_PSD, "mpmath")
    assert rayleigh(K, r0.witness) < 0 and r0.witness_value == float(rayleigh(K, r0.witness))
    r2 = check_psd(K, tol=-low / 4, method="mpmath")
    assert r2.verdict is Verdict.NOT_PSD and r2.method == "mpmath"
    assert rayleigh(K, r2.witness) < -Fraction(-low / 4)
    prec = int(re.search(r"(\d+)-bit", r2.reason).group(1))
    assert prec in MPMATH_PRECISIONS


@pytest.mark.parametrize(
    "K",
    [
        np.diag([2.0**-1000, 2.0**-900]),  # d = (2**500, 2**450): products stay normal
        np.array(
            [[1.0, 2.0**-41, 0.0], [2.0**-41, 2.0**-80, 0.0], [0.0, 0.0, 1.0]]
        ),  # a zero entry: only non-zero products matter
        np.diag([1.0, 2.0**-80]),
    ],
)
def test_scaling_is_applied_whenever_the_products_stay_normal(K):
    """C5: when every product ``d_i K_ij d_j`` of the van der Sluis scaling is a
    normal float (checked here) the certificate is scaled, and a PD matrix whose
    ``lambda_min`` is far below the unscaled shift ``c ~ u max K_jj`` is proven on
    the fast path."""
    n = K.shape[0]
    e = -np.ceil(0.5 * np.log2(np.diagonal(K)))
    prods = [
        abs(F(K[i, j])) * Fraction(2) ** int(e[i] + e[j])
        for i in range(n)
        for j in range(n)
        if K[i, j] != 0
    ]
    assert min(prods) >= Fraction(2) ** -900 and max(prods) <= 4
    assert float(rump_shift([F(x) for x in np.diagonal(K)])) > np.linalg.eigvalsh(K)[0]
    r = check_psd(K, tol=0)
    assert (r.verdict, r.method, r.rungs) == FAST_PD


def test_certificate_of_k_plus_tol_with_a_diagonal_entry_below_tol():
    """C5: ``K = [[0.1, 0.6], [0.6, 1]]`` has ``lambda_min = -0.2``; at ``tol = 0.5``
    it is PSD within tol, proven by the certified Cholesky of ``K + tol I`` (whose
    diagonal ``0.6, 1.5`` is positive) although ``K_11 = 0.1 < tol``; at
    ``tol = 0.05`` it is NOT_PSD with the failed pivot's witness."""
    K = np.array([[0.1, 0.6], [0.6, 1.0]])
    r = check_psd(K, tol=0.5)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "cholesky", True)
    assert r.rungs[-1] == "cholesky+tol"
    ch = certified_cholesky(K, 0.5)
    T = [F(ch.d[j]) ** 2 * (F(K[j, j]) + F(0.5)) for j in range(2)]
    assert ch.ok and F(ch.c) >= rump_shift(T)
    # the pivot vector [-6, 1] has Rayleigh quotient -2.6 / 37 ~ -0.07
    r = check_psd(K, tol=0.05, method="cholesky")
    assert r.verdict is Verdict.NOT_PSD and rayleigh(K, r.witness) < -Fraction(0.05)
    # a diagonal entry below -shift: refused without factorising
    assert not certified_cholesky(np.diag([1.0, -0.5]), 0.25).ok
    assert certified_cholesky(np.diag([1.0, -0.5]), 0.75).ok


MP_CORPUS = {
    "2x2": (np.array([[2.0, 1.0], [1.0, 2.0]]), 0.0),
    "near singular": (np.array([[1.0, 2.0**-32], [2.0**-32, 2.0**-64 + 2.0**-110]]), 0.0),
    "shifted": (np.array([[0.1, 0.6], [0.6, 1.0]]), 0.5),
    "hilbert 5": (1.0 / (np.arange(5)[:, None] + np.arange(5)[None, :] + 1.0), 0.0),
    "hilbert 5 shifted": (1.0 / (np.arange(5)[:, None] + np.arange(5)[None, :] + 1.0), 1e-3),
}


@pytest.mark.parametrize("name", sorted(MP_CORPUS))
@pytest.mark.parametrize("prec", MPMATH_PRECISIONS)
def test_mpmath_certificate_preconditions_hold_exactly(name, prec, monkeypatch):
    """C5, the mpmath rung's certificate at ``p`` bits (``u = 2**-p``, no underflow):
    the shift subtracted from every diagonal entry is at least Rump's
    ``c_min = sum_j (j + 2) u (K_jj + shift)`` and at most
    ``(1 + (3n + 16) u_53) c_min`` (its float64 evaluation, inflated by
    ``1 + 4 u_53`` and ``1 + 2 (n + 2) u_53``); the shifted diagonal handed to the
    factorisation is ``<= K_jj + shift - c`` exactly (rounded down), and within one
    ``p``-bit rounding of it."""
    import mpmath.libmp as libmp

    K, shift = MP_CORPUS[name]
    n = K.shape[0]
    seen = []
    real = libmp.mpf_sub

    def spy(s, t, prec_=0, rnd="d"):
        out = real(s, t, prec_, rnd)
        seen.append((s, t, out))
        return out

    monkeypatch.setattr(libmp, "mpf_sub", spy)
    mp_certified_cholesky(K, shift, prec)
    assert len(seen) == n

    def frac(m) -> Fraction:
        sign, man, exp, _ = m
        v = Fraction(int(man)) * Fraction(2) ** int(exp)
        return -v if sign else v

    u = Fraction(1, 2**prec)
    T = [F(K[j, j]) + F(shift) for j in range(n)]
    cmin = sum((j + 3) * u * T[j] for j in range(n))
    for j, (s, c, out) in enumerate(seen):
        assert frac(s) == T[j]
        assert cmin <= frac(c) <= (1 + (3 * n + 16) * U) * cmin
        assert frac(out) <= T[j] - frac(c)
        assert T[j] - frac(c) - frac(out) <= 2 * u * abs(T[j] - frac(c))


def _leading_minors(K) -> list[Fraction]:
    M = [[Fraction(float(x)) for x in row] for row in K]
    return [det([row[:r] for row in M[:r]]) for r in range(1, len(M) + 1)]


def test_an_overflow_inside_dpotrf_is_a_failed_pivot_at_the_first_non_positive_minor():
    """``K_13 / sqrt(K_11)`` overflows to inf and ``0 * inf`` makes the last pivot NaN,
    which OpenBLAS's ``dpotrf`` factors "successfully" (info = 0).  The result must
    say: no certificate, no factor, and the pivot where ``K`` stops being positive
    definite -- the first leading principal minor that is not positive, in fractions."""
    from kernelcheck._src.psd.cholesky import certified_cholesky

    K = np.array([[0.01, 0.0, 1e308], [0.0, 0.01, 0.0], [1e308, 0.0, 0.01]])
    minors = _leading_minors(K)
    first_bad = next(i + 1 for i, m in enumerate(minors) if m <= 0)
    assert first_bad == 3  # the matrix: positive leading 2 x 2 block, indefinite whole
    ch = certified_cholesky(K, 0.0)
    assert not ch.ok and ch.R is None
    assert ch.info == first_bad
    r = check_psd(K, tol=0)
    assert_witness(K, r)


def test_van_der_sluis_scales_a_graded_matrix_whose_zero_entries_would_fail_the_range():
    """``diag(2^1000, 2^1000, 2^-1000)`` plus a coupling: the global range test fails
    (``min |K_ij| min d^2 = 2^-2000``), every *non-zero* product ``K_ij d_i d_j`` is within
    ``[2^-969, 2^1022)``, and a zero ``K_12`` would be ``2^-1000`` if it counted.  The
    scaling must be applied: unscaled, Rump's shift ``~ 4 u 2^1000`` swamps ``K_33``
    and the certificate of this positive definite matrix fails."""
    from kernelcheck._src.psd.cholesky import certified_cholesky, van_der_sluis_scaling

    big, small = 2.0**1000, 2.0**-1000
    K = np.array([[big, 0.0, 0.5], [0.0, big, 0.0], [0.5, 0.0, small]])
    assert pd_psd(K) == (True, True)
    d = van_der_sluis_scaling(np.diagonal(K).copy(), K)
    assert not np.all(d == 1.0)
    for i, j in zip(*np.nonzero(K)):
        p = Fraction(float(K[i, j])) * Fraction(float(d[i])) * Fraction(float(d[j]))
        assert Fraction(2) ** -969 <= abs(p) < Fraction(2) ** 1022
    for i in range(3):  # d_i^2 K_ii in [1/4, 1]: a power of two near K_ii^(-1/2)
        assert Fraction(1, 4) <= Fraction(float(d[i])) ** 2 * Fraction(float(K[i, i])) <= 1
    assert certified_cholesky(K, 0.0).ok


def test_a_target_of_exactly_zero_is_no_certificate():
    """``K_jj + shift = 0`` exactly (``fl(a + b) = 0`` iff ``a + b = 0``): refused up front."""
    from kernelcheck._src.psd.cholesky import certified_cholesky

    ch = certified_cholesky(np.diag([1.0, -0.5]), 0.5)
    assert not ch.ok and ch.info == 2 and ch.R is None


def test_no_certificate_beyond_the_float_range_says_so_in_every_field():
    """``K_jj + shift`` beyond the float range, or Rump's shift ``c`` beyond it: the
    result is no certificate (``ok`` False), no factor, ``c = inf`` (the shift the
    criterion needs is not a float), the matrix tested, and a scaling of ``n`` powers of
    two (``d_i = 2^k``, ones where none was formed)."""
    from kernelcheck._src.psd.cholesky import certified_cholesky

    big = float(np.finfo(np.float64).max)
    A = np.array([[big / 2, big / 2], [big / 2, big]])
    for shift in (0.0, 2.0**1020, -big):
        ch = certified_cholesky(A, shift)
        assert ch.ok is False and ch.R is None and ch.c == math.inf and ch.K is A
        assert ch.d.shape == (2,)
        assert all(math.frexp(float(x))[0] == 0.5 for x in ch.d)  # powers of two
        exact = [Fraction(float(A[j, j])) + Fraction(shift) for j in range(2)]
        if shift > 0:  # the first target beyond the float range
            assert ch.info == 1 + next(j for j in range(2) if exact[j] > Fraction(big))
        elif shift < 0:  # the smallest target, <= 0
            assert ch.info == 1 + min(range(2), key=lambda j: exact[j]) and exact[0] <= 0
