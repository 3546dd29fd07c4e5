"""What the PSD functions accept, and that they never write into it (claims C5, C6).

float16, float32, integer and bool matrices and non-contiguous views give the
verdict of the same numbers in float64; read-only inputs of every PSD
function, its Nystrom map and its pytest twin are never written.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import Gaussian
from kernelcheck.psd import Nystrom, check_psd, mercer_features
from kernelcheck.testing import assert_psd
from kernelcheck.verify import kernel as verify_kernel
from tests.inputs import readonly

X = readonly(np.random.default_rng(0).normal(size=(4, 2)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int64, np.int8, np.bool_])
def test_other_dtypes_and_non_contiguous(dtype):
    K = np.array([[2, 1], [1, 2]]).astype(dtype)
    ref = check_psd(K.astype(np.float64))
    r = check_psd(K)
    assert r.verdict is ref.verdict
    big = np.asfortranarray(np.kron(np.eye(2), [[2.0, 1.0], [1.0, 2.0]]))
    sub = big[::2, ::2]
    assert check_psd(sub).verdict is check_psd(np.ascontiguousarray(sub)).verdict


# ---------------------------------------------------------------------------
# read-only inputs
# ---------------------------------------------------------------------------


def test_read_only_inputs_are_never_written():
    K = readonly([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    A = readonly([[2.0, 1.0], [3.0, 2.0]])
    check_psd(K), check_psd(K, tol=0, method="exact"), check_psd(K, method="mpmath")
    check_psd(K, method="eigh"), check_psd(A, symmetrize=True)
    check_psd(readonly([[1.0, 2.0], [2.0, 1.0]]))
    F = mercer_features(K)
    Xr = readonly(X)
    phi = Nystrom(Gaussian(), Xr)
    phi(Xr), phi.approximate_kernel(Xr, Xr)
    F2 = mercer_features(Gaussian()(Xr))
    F2.extend(Gaussian(), Xr)
    verify_kernel(Gaussian(), Xr)
    assert_psd(K)
    assert F.phi.flags.writeable is False and phi.landmarks.flags.writeable is False
    assert np.array_equal(Xr, X)
