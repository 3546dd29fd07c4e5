"""``check_psd``'s input checks and the exact symmetric part (``psd/inputs.py``, claim C5).

Each test relates the checked input to an exact computation or to the
documented contract: a negative ``tol`` is refused as such before ``K`` is
looked at; the refusal of a non-symmetric ``K`` that spans the whole float64
range names ``K`` and says what to do; the rounding-level asymmetry limit is
relative to ``max |K|``; the bound ``lo_norm`` of the symmetric part's
rounding error contains the exact Frobenius norm, computed in fractions, and
is tight to the factor the docstring states; a symmetrised input keeps the
caller's ``max_exact_n``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.core.rounding import unit_roundoff
from kernelcheck._src.psd.inputs import ASYMMETRY_ULPS, symmetric_part
from kernelcheck.errors import InvalidArgument
from kernelcheck.psd import check_psd

U = unit_roundoff(np.float64)


def test_a_negative_tol_is_refused_before_k_is_looked_at():
    """An asymmetric K would be refused for its asymmetry; the negative tol comes first."""
    K = np.array([[1.0, 2.0], [0.0, 1.0]])
    with pytest.raises(InvalidArgument, match="tol") as info:
        check_psd(K, tol=-1e-3)
    assert "symmetric" not in str(info.value)
    with pytest.raises(InvalidArgument, match="symmetric"):
        check_psd(K, tol=1e-3)  # the same K with a valid tol: refused for K


def test_the_whole_range_refusal_names_k_and_says_what_to_do():
    """Entries near overflow (the sum K + K^T needs the 1/4 scaling) and a bit below 4 times
    the smallest subnormal (lost by that scaling): no exact symmetric part, so a refusal."""
    K = np.array([[1e308, 5e-324], [0.0, 1.0]])  # asymmetric at rounding level
    with pytest.raises(InvalidArgument) as info:
        check_psd(K)
    message = str(info.value)
    assert message.startswith("`K` is not symmetric and spans the whole float64 range")
    assert "near overflow and bits below 4 times the smallest subnormal" in message
    assert message.endswith("its symmetric part cannot be formed exactly; scale K first")


def test_subnormal_bits_need_no_scaling_below_the_overflow_threshold():
    """max |K| = 1e4 is far below 2^1021: the sum cannot overflow, no scaling, no refusal,
    and the verdict is that of the exact symmetric part (PSD: a dominant diagonal)."""
    K = np.array([[1e4, 5e-324], [0.0, 1.0]])
    result = check_psd(K)
    assert result.is_psd and result.symmetrized


def test_the_rounding_level_is_relative_to_the_largest_entry():
    """An asymmetry just inside ASYMMETRY_ULPS u max|K| is decided (with a note), just
    outside it is refused: at max|K| = 2^20 both sides differ from an absolute limit."""
    scale = 2.0**20
    limit = ASYMMETRY_ULPS * U * scale
    base = scale * np.array([[2.0, 1.0], [1.0, 2.0]])
    inside = base.copy()
    inside[0, 1] += 0.5 * limit
    result = check_psd(inside)
    assert result.symmetrized and result.asymmetry <= limit
    outside = base.copy()
    outside[0, 1] += 4.0 * limit
    with pytest.raises(InvalidArgument, match="symmetrize=True"):
        check_psd(outside)


def _exact_error_norm2(A: np.ndarray, H: np.ndarray, sigma: float) -> Fraction:
    """||sigma (A + A^T) / 2 - H||_F^2 in fractions."""
    total = Fraction(0)
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            exact = Fraction(sigma) * (Fraction(A[i, j]) + Fraction(A[j, i])) / 2
            total += (exact - Fraction(H[i, j])) ** 2
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_symmetric_parts_error_bound_contains_the_exact_error_and_is_tight(seed):
    """``lo_norm`` >= the exact ||L||_F (the docstring's contract) and <= it times
    ``(1 + 2 (n + 2) u)`` and one ulp up: the error terms are TwoSum's exact ones."""
    rng = np.random.default_rng(seed)
    n = 6
    A = rng.normal(size=(n, n)) * 3.0 ** rng.integers(-5, 5, size=(n, n))
    part = symmetric_part(A)
    exact2 = _exact_error_norm2(A, part.H, part.sigma)
    assert exact2 > 0  # the sums are not all representable: L is not zero
    assert Fraction(part.lo_norm) ** 2 >= exact2
    top = math.sqrt(float(exact2)) * (1.0 + 2.0 * (n + 2) * U) * (1.0 + 4.0 * U)
    assert part.lo_norm <= top


def test_a_symmetrised_input_keeps_the_callers_max_exact_n():
    """``max_exact_n`` holds for a rounding-level asymmetric K as for a symmetric one."""
    K = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    K2 = K.copy()
    K2[0, 1] = np.nextafter(1.0, 2.0)
    for matrix in (K, K2):
        result = check_psd(matrix, method="exact", max_exact_n=2)
        assert result.outcome.value == "inconclusive"
        assert "exceeds max_exact_n = 2" in result.reason
