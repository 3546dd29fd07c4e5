"""``check_psd`` judges a matrix at the rounding level of the format it was given in (C5).

Validation widens float16 to float64 (and a PyTorch bfloat16 tensor to float32)
exactly; the default tolerance and the asymmetry limit must still use the unit
roundoff of the given format, since that is the rounding its entries carry.  The
verdict keeps its meaning: the entries are exact data, the tolerance asks whether
they are within that rounding of a PSD matrix.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import check_psd
from kernelcheck._src.psd.result import Verdict
from kernelcheck._src.psd.tolerance import default_tolerance
from kernelcheck.errors import InvalidArgument


def float16_gram(seed: int = 0, n: int = 12) -> np.ndarray:
    """The linear-kernel Gram of n points in R^2 (rank 2, PSD) rounded to float16:
    rounding leaves it exactly indefinite, by about u_16 ||K||."""
    X = np.random.default_rng(seed).normal(size=(n, 2))
    return (X @ X.T).astype(np.float16)


def exact_lambda_min(K: np.ndarray) -> float:
    return float(np.linalg.eigvalsh(K.astype(np.float64))[0])


@pytest.mark.parametrize("seed", range(5))
def test_a_rounded_float16_gram_of_a_psd_kernel_is_psd_within_float16_rounding(seed):
    K = float16_gram(seed)
    assert exact_lambda_min(K) < -1e-5  # far below anything float64 rounding explains
    r = check_psd(K)
    assert r.is_psd, str(r)
    assert r.tol.value == default_tolerance(K.astype(np.float64), dtype="float16").value
    assert "u = 0.000488 (float16)" in r.tol.source
    # the exact question about the given entries still has its exact answer
    assert check_psd(K, tol=0).verdict is Verdict.NOT_PSD


@pytest.mark.parametrize("depth, verdict", [(1.5, Verdict.NOT_PSD), (0.4, None)])
def test_a_float16_matrix_negative_beyond_the_float16_tolerance_is_refuted(depth, verdict):
    """A float16 matrix whose exact lambda_min is 1.5 times the tolerance below zero is
    NOT_PSD with an exact witness; at 0.4 times it is within rounding."""
    K0 = float16_gram(7).astype(np.float64)
    tol = default_tolerance(K0, dtype="float16").value
    shift = exact_lambda_min(K0) + depth * tol
    K = (K0 - shift * np.eye(K0.shape[0])).astype(np.float16)
    lam = exact_lambda_min(K)
    assert abs(lam + depth * tol) < 0.05 * tol  # the float16 shift kept the depth
    r = check_psd(K)
    if verdict is Verdict.NOT_PSD:
        assert r.verdict is Verdict.NOT_PSD and r.witness_value < -r.tol.value
    else:
        assert r.is_psd


def test_float32_keeps_its_own_unit_roundoff():
    K = float16_gram(3).astype(np.float32)
    r = check_psd(K)
    assert r.tol.value == default_tolerance(K.astype(np.float64), dtype="float32").value
    assert "(float32)" in r.tol.source


def test_a_bfloat16_tensor_is_judged_in_bfloat16():
    torch = pytest.importorskip("torch")
    K = torch.tensor(float16_gram(1).astype(np.float64)).to(torch.bfloat16)
    r = check_psd(K)
    K64 = K.float().numpy().astype(np.float64)
    assert r.tol.value == default_tolerance(K64, dtype="bfloat16").value
    assert r.is_psd


def test_the_asymmetry_limit_is_in_the_given_format():
    """An asymmetry of 50 float16 ulps of max |K| (a Gram summed in two orders in
    float16) is rounding level for a float16 matrix; the same numbers given in float64
    are refused."""
    K = float16_gram(2).astype(np.float64)
    top = np.abs(K).max()
    K[0, 1] += 50 * 2.0**-11 * top
    K16 = K.astype(np.float16)
    assert not np.array_equal(K16, K16.T)
    r = check_psd(K16)
    assert r.symmetrized and "rounding level" in r.reason
    with pytest.raises(InvalidArgument, match="`K` must be symmetric"):
        check_psd(K16.astype(np.float64))


def test_a_float16_matrix_too_large_for_the_model_names_tol():
    K = np.eye(1022, dtype=np.float16)
    with pytest.raises(InvalidArgument, match=r"^`K` came in float16 with n = 1022.*`tol=`"):
        check_psd(K)
    assert check_psd(K, tol=1e-3).is_psd  # a tolerance of the caller's own is used as given
    assert check_psd(np.eye(1021, dtype=np.float16)).is_psd
