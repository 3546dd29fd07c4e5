"""The VJP module: its blocked causal mask, and the terms its softmax bound shares."""

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


@pytest.mark.parametrize("causal", [False, True])
def test_the_softmax_bound_s_two_dS_terms_are_one_array(causal):
    """The bound keeps ``P |dP - c|`` once and uses it for ``|dS|`` too: the two are
    equal entry for entry (P >= 0; a rounded product's magnitude is that of the product
    of the magnitudes), so sharing it changes no bound.  Then the bound, evaluated with
    both as separate arrays the way the formula reads, agrees within the rounding of its
    own evaluation, which its factor 1 + gamma_(n + d + 8) covers, twice (two evaluations)."""
    rng = np.random.default_rng(4)
    n, d = 70, 5
    Q, K, V, G = (rng.standard_normal((n, d)) for _ in range(4))
    parts = vjp._SoftmaxBounds(Q, K, V, G, causal, 1 / np.sqrt(d))
    assert np.array_equal(parts.A1, np.abs(parts.dS))
    # the formula with |dS| as its own term: E_dS |K| + gamma_n |dS| |K|, rows of dQ
    b = parts.bound(np.dtype(np.float32))
    u, g_n = vjp.unit_roundoff(np.float32), vjp.gamma(n, np.float32)
    aS, aK, P = np.abs(parts.dS), parts.aK, parts.P
    absK = aK.max(axis=-2, keepdims=True)
    r = parts.scale * np.sum(parts.aQ * absK, axis=-1, keepdims=True)
    theta = vjp.gamma(d + 2, np.float32) * r + 2.0 * u * r + (vjp._EXP_ULPS + 1) * u
    e, g1 = np.expm1(2.0 * theta), vjp.gamma(n + 1, np.float32)
    rho = e + g1 + e * g1
    g = vjp.gamma(n + d + 2, np.float32)
    Ec = (rho + g * (1.0 + rho)) * parts.GPV
    EdS = rho * parts.A1 + (1.0 + rho) * (g * parts.B1 + Ec * P) + u * aS
    EdQ = parts.scale * (g_n * aS @ aK + EdS @ aK) * (1.0 + u)
    f64 = 1.0 + vjp.gamma(n + d + 8)
    under = (3 * n + 8) * vjp.eta(np.float32) * (1.0 + parts.top[0]) * (1.0 + parts.top[1])
    aQ = parts.aQ
    EdSQ = (
        parts.A1.T @ (rho * aQ) + parts.B1.T @ ((g * (1.0 + rho)) * aQ)
        + P.T @ ((1.0 + rho) * Ec * aQ) + u * aS.T @ aQ
    )  # fmt: skip
    EdK = parts.scale * (g_n * aS.T @ aQ + EdSQ) * (1.0 + u)
    np.testing.assert_allclose(b.dA, EdQ * f64 + under, rtol=2 * vjp.gamma(n + d + 8))
    np.testing.assert_allclose(b.dB, EdK * f64 + under, rtol=2 * vjp.gamma(n + d + 8))
