"""check_psd at the top of the float64 range (claim C5).

Near the float64 maximum 1.8e308 the certified Cholesky's shift ``c`` can
overflow to inf and ``(K_jj + s) - c`` become a NaN pivot, which OpenBLAS's
``dpotrf`` factors "successfully"; the certificate must then be refused, not
given, and the verdict come from a rung that stays in range.  Every verdict
here is checked against Sylvester's criterion in exact fractions
(:mod:`tests.psd.sylvester`), and the suite turns any RuntimeWarning into a
failure.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from kernelcheck.psd import Verdict, check_psd
from tests.psd.sylvester import pd_psd, rayleigh

BIG = float(np.finfo(np.float64).max)

#: id -> symmetric matrix with entries at or near the float64 maximum
MATRICES = {
    "diagonal-max": np.diag([BIG, BIG]),
    "all-max-2": np.full((2, 2), BIG),
    "all-max-3": np.full((3, 3), BIG),
    "half-coupled": np.array([[BIG, BIG / 2], [BIG / 2, BIG]]),
    "coupled-3": np.array([[BIG, 0.9 * BIG, 0.1], [0.9 * BIG, BIG, 0.0], [0.1, 0.0, BIG]]),
    "anti-rank-one": np.array([[BIG, -BIG], [-BIG, BIG]]),
    "max-and-tiny": np.array([[BIG, 1.0], [1.0, 1e-300]]),
    "indefinite-max": np.array([[BIG, BIG], [BIG, BIG / 2]]),
    "indefinite-off-diagonal": np.array([[1.0, BIG], [BIG, 1.0]]),
    "rank-one-3": 0.99 * BIG * np.ones((3, 3)),
    "below-max-4": np.full((4, 4), 1e308) + 1e307 * np.eye(4),
    "indefinite-below-max-3": np.array([[1e308, 1.5e308, 0], [1.5e308, 1e308, 0], [0, 0, 1e308]]),
}


@pytest.mark.parametrize("name", sorted(MATRICES))
@pytest.mark.parametrize("method", ["auto", "cholesky", "eigh"])
def test_verdicts_near_the_float64_maximum_are_exactly_right(name, method):
    A = MATRICES[name]
    r = check_psd(A, method=method)
    pd, psd = pd_psd(A)
    if r.verdict is Verdict.NOT_PSD:
        assert not psd
        assert r.witness is not None and rayleigh(A, r.witness) < 0
    elif r.verdict is Verdict.POSITIVE_DEFINITE:
        assert pd
    elif r.verdict is Verdict.POSITIVE_SEMIDEFINITE:
        # the claim is lambda_min >= -tol: K + tol I is PSD, exactly
        assert pd_psd(A, shift=Fraction(r.tol.value))[1]
    if r.certified:
        assert np.isfinite(r.lower_bound) or r.verdict is Verdict.NOT_PSD


@pytest.mark.parametrize("name", ["indefinite-max", "indefinite-below-max-3"])
def test_an_indefinite_matrix_near_the_maximum_is_refuted_not_left_open(name):
    """The 2 x 2 minor test works on K scaled into [0.5, 1) by a power of two, so
    K_ij^2 does not overflow and the violated minor gives an exact witness."""
    r = check_psd(MATRICES[name])
    assert r.verdict is Verdict.NOT_PSD


def test_the_certified_cholesky_gives_no_certificate_beyond_the_float_range():
    from kernelcheck._src.psd.cholesky import certified_cholesky

    A = MATRICES["indefinite-max"]
    for shift in (0.0, 2.0**970):
        assert not certified_cholesky(A, shift).ok
    # the same matrix scaled into range is refuted by the same routine
    assert not certified_cholesky(A / 2.0**600, 0.0).ok
    assert certified_cholesky(np.diag([BIG, BIG]) / 2.0**600, 0.0).ok
