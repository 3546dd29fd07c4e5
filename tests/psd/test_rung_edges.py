"""Edges of the PSD rungs that no other test reaches (claim C5).

Each test takes one rung into a branch that the verdict tests of
``test_check_psd.py`` and ``test_boundary.py`` pass by: the overflow guard of
the certified Cholesky, van der Sluis scaling of a graded matrix with zero
entries, the ball rung's witness, its multi-level Schur complements and its
``tol > 0`` certificate, FLINT's exact rung on entries beyond 500 bits, the
zero-diagonal minor witness, the float32 default tolerance of an asymmetric
input, the underflow term of the eigenvalue error and the lower bound of the
Cholesky of ``K + tol I`` for an input whose symmetric part is not a float
matrix.  Every verdict is checked against exact arithmetic (Sylvester's
minors or exact elimination in fractions, :mod:`tests.psd.sylvester` and
:mod:`tests.psd.oracle`), every bound against the error model its rung
documents.  All matrices are at most 14 x 14: the file runs in about a second.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import assert_witness, exact_kind, hilbert, reference_kind
from tests.psd.sylvester import det, pd_psd

ETA = math.ldexp(1.0, -1074)  # the smallest subnormal float64
U64 = 2.0**-53
U32 = 2.0**-24


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


def test_frobenius_of_an_empty_matrix_is_zero():
    from kernelcheck._src.psd.tolerance import frobenius

    assert frobenius(np.zeros((0, 0))) == 0.0
    assert frobenius(np.zeros((0, 3))) == 0.0


@pytest.mark.parametrize("n", [12, 14])
def test_the_ball_rung_decides_hilbert_matrices_through_their_schur_complements(n):
    """The float Cholesky cannot decide the rounded Hilbert matrix (n = 12 is PD, n = 14
    is indefinite once rounded, exactly); the ball rung must, through Schur complements
    whose balls have non-zero radii (the divisions by the pivot blocks are inexact)."""
    pytest.importorskip("flint")
    H = hilbert(n)
    kind = reference_kind(H)
    assert check_psd(H, tol=0, method="cholesky").verdict is Verdict.INCONCLUSIVE
    r = check_psd(H, tol=0, method="ball")
    assert r.certified and r.method == "ball"
    if kind == "pd":
        assert r.verdict is Verdict.POSITIVE_DEFINITE
    else:
        assert kind == "not_psd"
        assert_witness(H, r)


def test_the_ball_rung_finds_a_witness_of_an_indefinite_matrix():
    pytest.importorskip("flint")
    K = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    r = check_psd(K, method="ball")
    assert r.method == "ball" and "ball arithmetic" in r.reason
    assert_witness(K, r)


def test_the_ball_rung_with_a_tolerance_proves_psd_within_it():
    """``K + tol I`` proven PD in balls: the verdict is PSD (within tol), the lower bound
    ``-tol`` is below the exact ``lambda_min = 0`` of the singular ``K``."""
    pytest.importorskip("flint")
    K = np.array([[1.0, 1.0], [1.0, 1.0]])
    assert pd_psd(K) == (False, True)
    r = check_psd(K, tol=0.1, method="ball")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.is_psd and r.certified
    assert r.method == "ball"
    assert r.lower_bound <= 0.0 and r.lower_bound >= -0.1


def test_flint_exact_rung_on_entries_beyond_500_bits_pivots_on_the_exact_diagonal():
    """The identity of size 9 (FLINT's exact rung is used from n = 9) with
    ``K_12 = K_21 = 2^600``: the float guide of the exact rung shifts the integers by
    ``2^100`` (to 500 bits), where every diagonal entry ``1`` becomes 0 (``dpstrf``
    finds rank 0) and no pivot is resolved; the rung must then pivot on the largest
    exact diagonal entry."""
    pytest.importorskip("flint")
    K = np.eye(9)
    K[0, 1] = K[1, 0] = 2.0**600
    K[8, 8] = 0.0  # the last index is not a pivot
    assert exact_kind(K.tolist()) == "not_psd"
    r = check_psd(K, tol=0, method="exact")
    assert r.method == "exact"
    assert_witness(K, r)


def _fibonacci_gram():
    """``[[F_75, F_76], [F_76, F_77]]``: integers below ``2^53`` (exact floats) with
    determinant ``F_75 F_77 - F_76^2 = 1``, so ``lambda_min ~ 2^-53`` while
    ``||T|| ~ 2^53``: far below what a float Cholesky resolves, far above 128-bit balls."""
    f = [0, 1]
    while len(f) < 78:
        f.append(f[-1] + f[-2])
    a, b, c = f[75], f[76], f[77]
    assert a * c - b * b == 1 and c < 2**53
    return np.array([[a, b], [b, c]], dtype=np.float64)


def test_the_ball_rung_resolves_a_schur_complement_at_its_precision():
    """The Schur complement ``det / F_75 ~ 2^-51`` of the Fibonacci Gram, relative
    ``2^-104`` to the entries, is computed in 128-bit balls with radii near
    ``2^-128`` relative (one inexact division, one product): 128 bits must prove it PD.
    The float Cholesky cannot (Rump's shift is ``~ 2^-51`` relative)."""
    pytest.importorskip("flint")
    from kernelcheck._src.psd.schur import ball_decision

    T = _fibonacci_gram()
    assert exact_kind(T.tolist()) == "pd"
    assert check_psd(T, tol=0, method="cholesky").verdict is Verdict.INCONCLUSIVE
    out = ball_decision(T / 2.0, 0.0, 128)  # decides T/2 + (T/2)^T = T (halving is exact)
    assert out.kind == "pd"


def test_flint_exact_rung_decides_a_block_that_becomes_zero():
    """A rank-one integer Gram: after one block the Schur complement is the zero matrix, PSD."""
    pytest.importorskip("flint")
    b = np.array([1.0, 2.0, 3.0])
    K = np.outer(b, b)
    assert exact_kind(K.tolist()) == "psd"
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified


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


def test_the_default_tolerance_of_an_asymmetric_float32_input_is_in_float32_units():
    """The symmetric part of a float32 input at rounding-level asymmetry is decided with
    ``tol = 2 gamma_(n+2) max(||S||_F, tr S) + ...`` in the float32 unit roundoff."""
    K = np.array([[1.0, 0.5], [0.5 + 2.0**-23, 1.0]], dtype=np.float32)
    r = check_psd(K)
    assert r.symmetrized
    n = 2
    S = 0.5 * (K.astype(np.float64) + K.astype(np.float64).T)
    floor = 2.0 * (n + 2) * U32 * max(float(np.linalg.norm(S)), float(np.trace(S)))
    assert floor <= r.tol.value <= 1.01 * floor / (1.0 - (n + 2) * U32) + 1e-40


def test_the_eigenvalue_error_covers_underflow_on_a_subnormal_matrix():
    """On a matrix of subnormals the relative model ``gamma_p ||K||_F`` is below ``eta``;
    the documented underflow allowance ``(n + 2)^2 eta`` (each of the eigensolver's
    ``O(n^2)`` operations loses up to ``eta``) must be in the error bound."""
    K = np.array([[8.0, 2.0, 0.0], [2.0, 8.0, 2.0], [0.0, 2.0, 8.0]]) * ETA
    r = check_psd(K, method="eigh")
    assert r.min_eigenvalue_error >= (3 + 2) ** 2 * ETA


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


def test_the_ball_rung_goes_on_through_levels_whose_complement_is_still_undecided():
    """Two Fibonacci Grams ``2^200`` apart, weakly coupled: each level's Schur complement
    is as ill-conditioned as the first (Rump's certificate fails again), its radii far
    below ``2^(-prec/2)`` but its midpoints far outside them: not a singular complement,
    so the rung must eliminate again (four levels) and prove the matrix PD."""
    pytest.importorskip("flint")
    F = _fibonacci_gram()
    T = np.zeros((4, 4))
    T[:2, :2] = F
    T[2:, 2:] = F * 2.0**-200
    T[0, 3] = T[3, 0] = 2.0**-300
    assert exact_kind(T.tolist()) == "pd"
    r = check_psd(T, tol=0, method="ball")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.method == "ball"
    assert "128-bit" in r.reason  # decided at the first precision: the radii were small


@pytest.mark.parametrize("scale", [2.0**1000, 2.0**-1073])
def test_the_ball_rung_decides_matrices_at_the_ends_of_the_float_range(scale):
    """Midpoints are converted to floats relative to the largest entry of each level:
    ``[[3, 1], [1, 3]]`` times ``2^1000`` or times the smallest subnormal (every entry a
    multiple of ``eta``), and matrices spanning the whole range (the largest entry
    a power of two, zeros, radii that are zero), are proven PD."""
    pytest.importorskip("flint")
    K = np.array([[3.0, 1.0], [1.0, 3.0]]) * scale
    r = check_psd(K, tol=0, method="ball")
    assert exact_kind(K.tolist()) == "pd" and r.verdict is Verdict.POSITIVE_DEFINITE
    for W in (
        _fibonacci_gram() * 2.0**-950,  # a second level of radii near 2^-1026
        np.diag([2.0**1000, 3 * ETA]),
        np.array([[2.0**1000, 3 * 2.0**-100], [3 * 2.0**-100, 3 * ETA]]),
        np.diag([ETA, ETA]),  # unscaled, Rump's shift and the radius eta swamp it
    ):
        assert exact_kind(W.tolist()) == "pd"
        r = check_psd(W, tol=0, method="ball")
        assert r.verdict is Verdict.POSITIVE_DEFINITE


def test_the_ball_rung_takes_a_negative_diagonal_entry_as_its_witness():
    """Forced to the ball rung (the ladder's diagonal rung would see it first): a diagonal
    entry below minus its radius anywhere on the diagonal is a witness at once."""
    pytest.importorskip("flint")
    K = np.array([[2.0, 0.5, 0.0], [0.5, 3.0, 0.0], [0.0, 0.0, -1e-3]])
    r = check_psd(K, tol=0, method="ball")
    assert_witness(K, r)
    assert r.method == "ball"


def _guaranteed_max(w, m, R) -> Fraction:
    """The largest ``w^T T w`` over every symmetric ``T`` with ``|T - m| <= R`` (exact)."""
    f = [Fraction(float(x)) for x in w]
    k = len(f)
    return sum(
        f[i] * f[j] * Fraction(float(m[i, j])) + abs(f[i] * f[j]) * Fraction(float(R[i, j]))
        for i in range(k)
        for j in range(k)
    )


def test_the_float_guide_pivots_on_the_leading_pivots_within_the_ratio():
    """``_pivot_block``'s rule (its docstring): the first pivots of ``dpstrf``, largest
    remaining diagonal first, within ``PIVOT_RATIO = 2^-26`` of the first (inclusive),
    halved until the certificate of the block holds.  On a diagonal ``m`` the pivots are
    the diagonal entries in decreasing order, so the expected set is read off by hand."""
    from kernelcheck._src.psd.schur import PIVOT_RATIO, _pivot_block

    assert PIVOT_RATIO == 2.0**-26
    dg = np.array([2.0**-27, 1.0, 2.0**-26, 0.5, 2.0**-20, 2.0**-40])
    m = np.diag(dg)
    R = np.full(m.shape, 2.0**-80)
    assert _pivot_block(m, R) == [1, 2, 3, 4]  # 1, 0.5, 2^-20 and 2^-26 (the boundary)
    assert _pivot_block(np.diag([1.0, 2.0**-30]), np.full((2, 2), 2.0**-80)) == [0]
    # radii that hide the last pivots: the block of 8 fails, its first half is proven
    m = np.eye(8)
    R = np.full((8, 8), 2.0**-80)
    R[4:, :] = R[:, 4:] = 2.0
    assert _pivot_block(m, R) == [0, 1, 2, 3]
    # nothing resolved: no pivot
    assert _pivot_block(np.eye(2), np.full((2, 2), 2.0)) is None
    # the first pivot's ball reaches 0, another one's does not: that one
    m = np.diag([1.0, 0.5])
    for r11, expected in ((0.3, [1]), (0.5, None), (0.5 * (1 - 2.0**-51), None)):
        # 0.5 - 0.3 > 0; 0.5 - 0.5 (1 + 4u) < 0; 0.5 - r11 (1 + 4u) rounds to 0 (eta decides)
        assert _pivot_block(m, np.array([[2.0, 0.0], [0.0, r11]])) == expected


def test_the_ball_rungs_negative_direction_holds_for_every_matrix_within_the_radii():
    """``_negative_direction``: a ``w`` with ``w^T T w < 0`` for every ``T`` within ``R`` of
    ``m`` (checked exactly on its extreme), or None where the radii allow a PSD ``T``."""
    from kernelcheck._src.psd.schur import _negative_direction

    tiny = np.full((2, 2), 2.0**-80)
    for m in (
        np.array([[1.0, 2.0], [2.0, 1.0]]),
        np.array([[1.0, 0.0], [0.0, -0.5]]),
        np.array([[1.0, 0.0], [0.0, -1e-16]]),  # below the eigenvalue test's margin 8u
    ):
        w = _negative_direction(m, tiny)
        assert w is not None and _guaranteed_max(w, m, tiny) < 0
    # a diagonal entry at minus its radius: T_00 = 0 is allowed, no direction is certain
    m = np.array([[-ETA, 0.0], [0.0, 1.0]])
    R = np.array([[ETA, 0.0], [0.0, ETA]])
    w = _negative_direction(m, R)
    assert w is None or _guaranteed_max(w, m, R) < 0
    assert _negative_direction(np.eye(2), tiny) is None


def test_ball_midpoints_and_radii_as_floats_contain_every_ball():
    """``_mid_rad(B)``: ``|B_ij 2^-e - m_ij| <= R_ij`` for every point of every ball,
    i.e. ``|mid 2^-e - m| + rad 2^-e <= R``, checked in fractions: a ball of midpoint 0
    with a radius, a midpoint that underflows once scaled (``2^-1100`` next to 1), an
    inexact ball (``1/3`` at 128 bits)."""
    fl = pytest.importorskip("flint")
    from kernelcheck._src.psd.schur import _mid_rad

    old = fl.ctx.prec
    fl.ctx.prec = 128
    try:
        z = fl.arb(0, 2.0**-10)
        third = fl.arb(1) / 3
        tiny = fl.arb(2) ** -1100
        B = fl.arb_mat([[fl.arb(1), z, tiny], [z, fl.arb(3), third], [tiny, third, fl.arb(0.75)]])
        m, R, e = _mid_rad(B)
        for i in range(3):
            for j in range(3):
                x = B[i, j]
                mid = Fraction(int(x.mid().man_exp()[0])) * Fraction(2) ** int(x.mid().man_exp()[1])
                rad = Fraction(int(x.rad().man_exp()[0])) * Fraction(2) ** int(x.rad().man_exp()[1])
                scale = Fraction(2) ** -e
                assert abs(mid * scale - Fraction(float(m[i, j]))) + rad * scale <= Fraction(
                    float(R[i, j])
                )
        assert np.array_equal(m, m.T) and np.array_equal(R, R.T)
    finally:
        fl.ctx.prec = old


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


def test_the_exact_rung_keeps_its_size_limit_for_wide_integers():
    """Without ``max_exact_n``, a float Gram whose integer form is wide (random float
    entries: far more than 64 bits) keeps ``EXACT_MAX_N`` (64), not FLINT's small-integer
    limit: at n = 65 the forced exact rung declines and says which limit applied."""
    from kernelcheck._src.psd.exact import EXACT_MAX_N

    rng = np.random.default_rng(3)
    X = rng.standard_normal((EXACT_MAX_N + 1, 2))
    r = check_psd(X @ X.T, tol=0, method="exact")
    assert r.verdict is Verdict.INCONCLUSIVE
    assert f"max_exact_n = {EXACT_MAX_N}" in r.reason


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


def test_mercer_features_of_the_symmetric_part_when_asked():
    """``symmetrize=True`` reaches the input check of ``mercer_features`` too: an input
    asymmetric beyond rounding gives features of ``(K + K^T) / 2``, refused without it."""
    from kernelcheck.errors import InvalidArgument
    from kernelcheck.psd import mercer_features

    K = np.array([[2.0, 1.0], [0.0, 2.0]])
    with pytest.raises(InvalidArgument, match="symmetri"):
        mercer_features(K)
    Phi = mercer_features(K, symmetrize=True).phi
    S = np.array([[2.0, 0.5], [0.5, 2.0]])
    # the eigensolver's documented backward error p(n) u ||S||_F, p(n) = 64 (n + 2)
    assert np.max(np.abs(Phi @ Phi.T - S)) <= 64 * (2 + 2) * U64 * float(np.linalg.norm(S))


@pytest.mark.parametrize("t", [0.0, 0.0125, 0.25])
def test_the_exact_rung_decides_the_exact_symmetric_part(t):
    """``symmetrize=True`` with the exact rung: the integer form is ``2 (S + t I)`` of
    ``S = (K + K^T) / 2``, decided against elimination in fractions (``lambda_min(S)``
    is about -0.0156: ``t = 0.0125`` is just short of it, ``0.25`` well past it)."""
    K = np.array([[1.0, 3.0, 0.0], [-1.0, 1.0, 0.5], [0.0, 0.0, 2.0]])
    S = [[Fraction(K[i, j]) / 2 + Fraction(K[j, i]) / 2 for j in range(3)] for i in range(3)]
    r = check_psd(K, tol=t, method="exact", symmetrize=True)
    assert r.symmetrized and r.method == "exact" and r.certified
    kind = exact_kind(S)
    if kind == "not_psd" and exact_kind(S, shift=Fraction(t)) == "not_psd":
        assert r.verdict is Verdict.NOT_PSD
        v = [Fraction(float(x)) for x in r.witness]
        q = sum(v[i] * S[i][j] * v[j] for i in range(3) for j in range(3))
        assert q < -Fraction(t) * sum(x * x for x in v)
    else:
        assert r.is_psd


def test_the_ball_rung_limit_and_its_inconclusive_reason():
    """n = BALL_MAX_N is decided (the identity, at once); n = BALL_MAX_N + 1 is declined
    before any work; a singular PSD matrix is not decided by balls (the reason it
    gives: tests/psd/test_ladder_edges.py)."""
    pytest.importorskip("flint")
    from kernelcheck._src.psd.ladder import BALL_MAX_N

    assert check_psd(np.eye(BALL_MAX_N), tol=0, method="ball").verdict is (
        Verdict.POSITIVE_DEFINITE
    )
    r = check_psd(np.eye(BALL_MAX_N + 1), tol=0, method="ball")
    assert r.verdict is Verdict.INCONCLUSIVE and str(BALL_MAX_N) in r.reason
    K = np.ones((2, 2))
    assert exact_kind(K.tolist()) == "psd"
    r = check_psd(K, tol=0, method="ball")
    assert r.verdict is Verdict.INCONCLUSIVE and not r.certified
