"""The eigenvalue-estimate rung of the PSD ladder, and Nystrom's repr.

``_Ladder.eigh_estimate`` gives an *uncertified* POSITIVE_SEMIDEFINITE when
the eigensolver's estimate clears ``-tol`` by more than its error bound.  In
``check_psd`` it runs only after the certified Cholesky of ``K + tol I``
failed and mpmath (n <= 100) and exact elimination (n <= max_exact_n) were
out of reach.  Rump's shift ``c ~ n^2 u / 2`` (scaled units) then has to
exceed the eigensolver bound ``gamma_(64 (n + 2)) ||K||_F >= 64 n u
tr(K) / sqrt(n)``, which needs n beyond about 16000: the rule is tested here
directly on a ladder whose estimate is set, against its statement in the
docstring ("lambda_min - error >= -tol and tol > 0").
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck import Gaussian
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.psd.ladder import _Ladder
from kernelcheck.psd import Nystrom, Verdict, check_psd


def _ladder(t: float, lam: float, err: float) -> _Ladder:
    lad = _Ladder(np.eye(3), Tolerance(t, "test"), 0, False, 0.0)
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


def test_nystrom_repr_names_kernel_landmarks_and_rank():
    X = np.random.default_rng(0).standard_normal((7, 3))
    ny = Nystrom(Gaussian(1.5), X)
    text = repr(ny)
    assert text.startswith(f"Nystrom({Gaussian(1.5)!r}, ")
    assert f"7 landmarks in R^3, rank {ny.rank})" in text
    assert 1 <= ny.rank <= 7


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
    """The documented condition of ``_scaling`` for graded matrices: every product
    ``K_ij d_i`` and ``K_ij d_i d_j`` of a nonzero entry within ``[2^-969, 2^1022)``.
    The products here are computed in exact binary arithmetic by hand (powers of
    two), so the test states the limits independently of the code's exponent
    bookkeeping."""
    from kernelcheck._src.psd.ladder import _scaling

    K = _graded(off)
    d = _scaling(np.diagonal(K).copy(), K)
    if applied:
        np.testing.assert_array_equal(d, [2.0**-300, 1.0, 2.0**300])
    else:
        np.testing.assert_array_equal(d, np.ones(3))
