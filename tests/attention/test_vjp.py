"""The VJP module's blocked causal mask equals the plain triangular mask at every size."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.attention import vjp


@pytest.mark.parametrize(
    "shape",
    [(1, 1), (3, 7), (7, 3), (256, 256), (257, 300), (600, 513), (2, 300, 300)],
)
def test_the_blocked_future_mask_is_the_strict_upper_triangle(shape):
    S = np.random.default_rng(0).standard_normal(shape)
    got = S.copy()
    vjp._mask_future(got, -np.inf)
    keep = np.tril(np.ones(shape[-2:], dtype=bool))
    np.testing.assert_array_equal(got, np.where(keep, S, -np.inf))


def test_a_causal_softmax_vjp_past_one_mask_block_matches_the_unblocked_formula():
    """Both are float64 evaluations of the same VJP: each within the float64 bound of the
    exact gradient, so within twice the bound of each other."""
    rng = np.random.default_rng(1)
    n = vjp._MASK_ROWS + 45
    Q, K, V, G = (rng.standard_normal((n, 3)) for _ in range(4))
    S = Q @ K.T / np.sqrt(3)
    S[np.triu_indices(n, 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = G @ V.T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    got = vjp.softmax_vjp(Q, K, V, G, causal=True)
    tol = vjp.softmax_vjp_error_bound(Q, K, V, G, causal=True)
    plain = (dS @ K / np.sqrt(3), dS.T @ Q / np.sqrt(3), P.T @ G)
    for a, b, t in zip(got, plain, tol, strict=True):
        assert (np.abs(a - b) <= 2 * t).all()
