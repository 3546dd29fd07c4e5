"""The ball rung of ``check_psd``: interval Schur complements (``psd/schur.py``, claim C5).

The rung decides a matrix through midpoint-radius balls of its Schur
complements, level after level, at increasing precisions: Hilbert matrices
through their complements, a witness of an indefinite matrix (a negative
diagonal entry or a negative direction that holds for every matrix within the
radii), a ``tol > 0`` certificate and what it proves, matrices at both ends of
the float range, the containment of every ball in the midpoints and radii it
is handed as floats, and the size limit with its reason.  Every verdict is
checked against exact arithmetic (Sylvester's minors or exact elimination in
fractions, :mod:`tests.psd.sylvester` and :mod:`tests.psd.oracle`).  All
matrices are at most 14 x 14: the file runs in about a second.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import assert_witness, exact_kind, hilbert, reference_kind
from tests.psd.sylvester import pd_psd

ETA = math.ldexp(1.0, -1074)  # the smallest subnormal float64
U64 = 2.0**-53


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


def test_the_ball_rung_limit_and_its_inconclusive_reason():
    """n = BALL_MAX_N is decided (the identity, at once); n = BALL_MAX_N + 1 is declined
    before any work; a singular PSD matrix is not decided by balls (the reason it
    gives: test_a_forced_ball_rung_says_where_it_stopped)."""
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
