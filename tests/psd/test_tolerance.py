"""The tolerances and error bounds of the PSD verdicts (kernelcheck._src.psd.tolerance, claim C5).

The default tolerance of an input is in the units of the format it was given
in; the eigenvalue error covers gradual underflow; ``resolve_tolerance``, the
one home of a tolerance, refuses by name what is no tolerance and says where a
number came from.  Every bound is checked against the formula its function
documents, every refusal against its argument.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck.errors import InvalidArgument
from kernelcheck.psd import check_psd

ETA = math.ldexp(1.0, -1074)  # the smallest subnormal float64

U32 = 2.0**-24


def test_frobenius_of_an_empty_matrix_is_zero():
    from kernelcheck._src.psd.tolerance import frobenius

    assert frobenius(np.zeros((0, 0))) == 0.0
    assert frobenius(np.zeros((0, 3))) == 0.0


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


@pytest.mark.parametrize("tol", [-1e-3, -math.inf, math.nan])
def test_resolve_tolerance_refuses_what_is_no_tolerance_by_name(tol):
    """The tolerance home checks its own argument (check_psd checks it earlier too, but
    resolve_tolerance is the one home of the rule): not a number >= 0, refused, naming tol."""
    from kernelcheck._src.psd.tolerance import resolve_tolerance

    with pytest.raises(InvalidArgument, match="`tol`"):
        resolve_tolerance(tol, np.eye(2))


def test_resolve_tolerance_says_where_a_number_came_from():
    """tol = 0 is the exact question; any other number is the caller's."""
    from kernelcheck._src.psd.tolerance import resolve_tolerance

    assert resolve_tolerance(0.0, np.eye(2)).source == "exact question (tol = 0)"
    assert resolve_tolerance(1e-9, np.eye(2)).source == "given by the caller"
    assert resolve_tolerance(1e-9, np.eye(2)).value == 1e-9
