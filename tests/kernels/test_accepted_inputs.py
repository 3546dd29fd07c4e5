"""What the kernels and exact feature maps accept, and that they never write into it.

Read-only, non-contiguous, list, integer, bool and float16 inputs give exactly
the float64 answer; float32 stays float32 and one float64 argument makes the
result float64 (claims C4-C9).  Every example kernel and exact feature map of
``tests/catalog.py`` is checked.
"""

from __future__ import annotations

import numpy as np

from kernelcheck import verify
from kernelcheck.kernels import (
    kernel_from_function,
)
from tests.inputs import readonly

X = np.random.default_rng(3).normal(size=(4, 2))


# ---------------------------------------------------------------------------
# Accepted dtypes, layouts and read-only inputs
# ---------------------------------------------------------------------------


def test_readonly_noncontiguous_lists_ints_and_float16_give_the_float64_answer(builtin_kernel):
    k = builtin_kernel
    Y = X[:3] * 0.5
    expected = k(X, Y)
    assert expected.dtype == np.float64
    assert np.array_equal(k(readonly(X), readonly(Y)), expected)
    wide = np.repeat(X, 3, axis=1)[:, ::3]
    assert not wide.flags.c_contiguous
    assert np.array_equal(k(wide, Y), expected)
    assert np.array_equal(k(X.tolist(), Y.tolist()), expected)
    ints = np.array([[1, 0], [0, -1], [2, 1]])
    assert np.array_equal(k(ints), k(ints.astype(float)))
    assert k(ints).dtype == np.float64
    halves = X.astype(np.float16)
    assert np.array_equal(k(halves), k(halves.astype(np.float64)))
    assert np.array_equal(k(X.astype(bool)), k(X.astype(bool).astype(float)))
    # error bounds and high precision accept the same inputs
    assert np.array_equal(k.error_bound(readonly(X), readonly(Y)), k.error_bound(X, Y))
    assert k.gram_mp(readonly(X[:2]), dps=20).rows == 2


def test_float32_stays_float32_and_mixed_promotes(builtin_kernel):
    k = builtin_kernel
    X32 = X.astype(np.float32)
    assert k(X32).dtype == np.float32
    assert k.error_bound(X32).dtype == np.float32
    assert k(X32, X).dtype == np.float64
    assert k(X, X32).dtype == np.float64
    assert k.error_bound(X, X32).dtype == np.float64


def test_feature_maps_accept_readonly_and_noncontiguous_inputs(exact_feature_map):
    k, form = exact_feature_map
    phi = k.features(form)
    expected = phi(X)
    assert np.array_equal(phi(readonly(X)), expected)
    assert np.array_equal(phi(np.repeat(X, 2, axis=1)[:, ::2]), expected)
    assert phi(X.astype(np.float32)).dtype == np.float32
    assert expected.shape == (4, phi.output_dim(2)) == (4, k.feature_dim(2, form))
    report = verify.feature_map(phi, readonly(X), readonly(X[:2]))
    assert report.passed


def test_function_kernels_receive_rows_not_views_they_could_corrupt():
    """A user function that writes into its arguments cannot change the caller's X."""
    Xr = readonly(X)

    def f(x, y):
        return float(x @ y)

    def fv(a, b):
        return (a * b).sum(-1)

    assert np.allclose(kernel_from_function(f)(Xr), X @ X.T)
    assert np.allclose(kernel_from_function(fv, vectorized=True)(Xr), X @ X.T)
    assert np.array_equal(Xr, X)
