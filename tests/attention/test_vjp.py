"""The VJP module: its blocked causal mask, and the terms its softmax bound shares."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.attention.common import vjp as common_vjp
from kernelcheck._src.attention.common.bounds import EXP_ULPS
from kernelcheck._src.attention.families.linear import vjp as linear_vjp
from kernelcheck._src.attention.families.softmax import vjp as softmax_vjp
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck.errors import NumericalFailure


@pytest.mark.parametrize(
    "shape",
    [(1, 1), (3, 7), (7, 3), (256, 256), (257, 300), (600, 513), (2, 300, 300)],
)
def test_the_blocked_future_mask_is_the_strict_upper_triangle(shape):
    S = np.random.default_rng(0).standard_normal(shape)
    got = S.copy()
    common_vjp.mask_future_entries(got, -np.inf)
    keep = np.tril(np.ones(shape[-2:], dtype=bool))
    np.testing.assert_array_equal(got, np.where(keep, S, -np.inf))


def test_a_causal_softmax_vjp_past_one_mask_block_matches_the_unblocked_formula():
    """Both are float64 evaluations of the same VJP: each within the float64 bound of the
    exact gradient, so within twice the bound of each other."""
    rng = np.random.default_rng(1)
    n = common_vjp._MASK_ROWS + 45
    Q, K, V, G = (rng.standard_normal((n, 3)) for _ in range(4))
    S = Q @ K.T / np.sqrt(3)
    S[np.triu_indices(n, 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = G @ V.T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    got = softmax_vjp.softmax_vjp(Q, K, V, G, causal=True)
    tol = softmax_vjp.softmax_vjp_error_bound(Q, K, V, G, causal=True)
    plain = (dS @ K / np.sqrt(3), dS.T @ Q / np.sqrt(3), P.T @ G)
    for a, b, t in zip(got, plain, tol, strict=True):
        assert (np.abs(a - b) <= 2 * t).all()


def _softmax_terms(Q, K, V, G, causal, scale):
    """The softmax VJP's float64 quantities over whole n x m arrays, as the formulas read."""
    S = scale * (Q @ np.swapaxes(K, -1, -2))
    if causal:
        S = np.where(np.tril(np.ones(S.shape[-2:], dtype=bool)), S, -np.inf)
    P = np.exp(S - S.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(P * dP, axis=-1, keepdims=True))
    return P, dP, dS


def _docstring_bound(Q, K, V, G, causal, dt):
    """softmax_vjp_error_bound's docstring formula, term by term, with |dS| its own term."""
    n, d, dv = K.shape[-2], Q.shape[-1], V.shape[-1]
    scale = 1 / np.sqrt(d)
    P, dP, dS = _softmax_terms(Q, K, V, G, causal, scale)
    T = lambda X: np.swapaxes(X, -1, -2)  # noqa: E731
    aQ, aK, aG, aV, aS = (np.abs(X) for X in (Q, K, G, V, dS))
    u, g_n = unit_roundoff(dt), gamma(n, dt)
    c = np.sum(P * dP, axis=-1, keepdims=True)
    r = scale * np.sum(aQ * aK.max(axis=-2, keepdims=True), axis=-1, keepdims=True)
    theta = gamma(d + 2, dt) * r + 2.0 * u * r + (EXP_ULPS + 1) * u
    e, g1 = np.expm1(2.0 * theta), gamma(n + 1, dt)
    rho = e + g1 + e * g1
    g = gamma(n + dv + 2, dt)
    EdV = T(P) @ ((rho + g * (1.0 + rho)) * aG)
    EdP = g * (aG @ T(aV))
    Ec = (rho + g * (1.0 + rho)) * np.sum(aG * (P @ aV), axis=-1, keepdims=True)
    EdS = rho * P * np.abs(dP - c) + P * (EdP + Ec) * (1.0 + rho) + u * aS
    EdQ = scale * (g_n * aS @ aK + EdS @ aK) * (1.0 + u)
    EdK = scale * (g_n * T(aS) @ aQ + T(EdS) @ aQ) * (1.0 + u)
    f64 = 1.0 + gamma(n + d + 8)
    under = (3 * n + 8) * eta(dt) * (1.0 + aG.max()) * (1.0 + aV.max())
    return (EdQ * f64 + under, EdK * f64 + under, EdV * f64 + under), (dS, P)


#: Blocks of the VJP passes, (entries, fewest rows): the defaults (one block at these
#: sizes), 8 or 9 rows a block (the last one partial), one row a block.
BLOCKS = [(1 << 18, 64), (1120, 1), (1, 1)]


def _set_blocks(monkeypatch, blocks):
    monkeypatch.setattr(common_vjp, "_VJP_BLOCK_ELEMENTS", blocks[0])
    monkeypatch.setattr(common_vjp, "_VJP_MIN_ROWS", blocks[1])


def test_a_block_has_2_18_entries_over_the_batch_and_at_least_64_rows():
    rows = common_vjp.vjp_block_rows
    assert rows((), 2048, 2048, 6, "softmax") == 128
    assert rows((), 8192, 8192, 6, "softmax") == 64
    assert rows((32,), 512, 512, 6, "softmax") == 64  # not 16: BLAS speed
    assert rows((2, 3), 40, 50, 3, "linear") == 40  # n itself when smaller


@pytest.mark.parametrize("blocks", BLOCKS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocked_softmax_bound_is_the_docstring_formula(monkeypatch, causal, blocks):
    """The pass keeps ``P |dP - c|`` once and uses it for ``|dS|`` too (the two are equal
    entry for entry: P >= 0, and a rounded product's magnitude is that of the product
    of the magnitudes), merges the per-row factors of the three ``E_dS`` terms into
    one matrix, and sums over rows block by block, skipping the keys a causal block
    does not see.  None of this changes the bound: against the formula term by term
    over whole arrays it agrees within the rounding of its own evaluation, which its
    factor ``1 + gamma_(n + d + 8)`` covers, twice (two evaluations)."""
    _set_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(4)
    n, d = 70, 5
    Q, K, V, G = (rng.standard_normal((2, n, d)) for _ in range(4))
    for dt in (np.dtype(np.float32), np.dtype(np.float64)):
        want, _ = _docstring_bound(Q, K, V, G, causal, dt)
        got = softmax_vjp.softmax_vjp_error_bound(Q, K, V, G, causal=causal, dtype=dt)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=2 * gamma(n + d + 8))


@pytest.mark.parametrize("blocks", BLOCKS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocked_softmax_vjp_is_the_formula(monkeypatch, causal, blocks):
    """Both are float64 evaluations of the same VJP, each within the float64 bound of the
    exact gradient, so within twice the bound of each other; and the bounds of two
    precisions from one pass are those of separate calls."""
    _set_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(5)
    n, d = 40, 3
    Q, K, V, G = (rng.standard_normal((3, n, d)) for _ in range(4))
    _, (dS, P) = _docstring_bound(Q, K, V, G, causal, np.dtype(np.float64))
    scale = 1 / np.sqrt(d)
    plain = (scale * dS @ K, scale * np.swapaxes(dS, -1, -2) @ Q, np.swapaxes(P, -1, -2) @ G)
    got, (b32, b64) = softmax_vjp.softmax_vjp_with_bounds(
        Q, K, V, G, causal=causal, dtypes=("float32", "float64")
    )
    for a, b, t in zip(got, plain, b64, strict=True):
        assert (np.abs(a - b) <= 2 * t).all()
    for dt, both in (("float32", b32), ("float64", b64)):
        alone = softmax_vjp.softmax_vjp_error_bound(Q, K, V, G, causal=causal, dtype=dt)
        for a, b in zip(both, alone, strict=True):
            np.testing.assert_array_equal(a, b)


def _float32_vjp(Q, K, V, G, causal):
    """A float32 backward pass, step by step as a layer computes it."""
    Q, K, V, G = (X.astype(np.float32) for X in (Q, K, V, G))
    S = (Q @ K.T) * np.float32(1 / np.sqrt(Q.shape[-1]))
    if causal:
        S[np.triu_indices(S.shape[0], 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = G @ V.T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    s = np.float32(1 / np.sqrt(Q.shape[-1]))
    return (dS @ K) * s, (dS.T @ Q) * s, P.T @ G


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("spread", [1.0, 6.0])
def test_the_softmax_vjp_bound_covers_a_float32_backward_pass(causal, spread):
    """The bound in float32 holds for a float32 backward pass, against the gradient in
    extended precision (``np.longdouble``, 64-bit significand on x86: its own error is
    about 2^-11 of float64's and 2^-40 of float32's, far inside the margin), and the
    float64 bound holds for the float64 reference; ``spread`` scales the queries so the
    logits reach +-20 and the weights are peaked."""
    rng = np.random.default_rng(7)
    n, d = 96, 8
    Q = spread * rng.standard_normal((n, d))
    K, V, G = (rng.standard_normal((n, d)) for _ in range(3))
    L = [X.astype(np.longdouble) for X in (Q, K, V, G)]
    S = (L[0] @ L[1].T) / np.sqrt(np.longdouble(d))
    if causal:
        S[np.triu_indices(n, 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = L[3] @ L[2].T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    s = 1 / np.sqrt(np.longdouble(d))
    exact = ((dS @ L[1]) * s, (dS.T @ L[0]) * s, P.T @ L[3])
    f64, (b32, b64) = softmax_vjp.softmax_vjp_with_bounds(
        Q, K, V, G, causal=causal, dtypes=("float32", "float64")
    )
    for got, bound in ((_float32_vjp(Q, K, V, G, causal), b32), (f64, b64)):
        for a, x, t in zip(got, exact, bound, strict=True):
            assert (np.abs(a.astype(np.longdouble) - x) <= t).all()


def test_the_softmax_vjp_keeps_a_few_blocks_not_n_by_n_arrays():
    """Peak allocation of softmax_vjp_with_bounds at n = 2048, d = 16: at most its six
    blocks of ``_VJP_BLOCK_ELEMENTS`` entries (weights, ``dP - c``, ``dS``,
    ``P (|G| |V|^T)`` and two of scratch), the absolute values of the four inputs and
    the six results (n x d each), and 1 MiB for NumPy's temporaries of one block's
    rows; a single n x n float64 array is 32 MiB."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, d = 2048, 16
    Q, K, V, G = (rng.standard_normal((n, d)) for _ in range(4))
    tracemalloc.start()
    try:
        softmax_vjp.softmax_vjp_with_bounds(Q, K, V, G, causal=True, dtypes=("float32",))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    allowed = 8 * (6 * common_vjp._VJP_BLOCK_ELEMENTS + 10 * n * d) + (1 << 20)
    assert peak <= allowed, (peak, allowed)


def _linear_docstring(pq, pk, V, G, causal, normalize, dt, extra):
    """linear_vjp and linear_vjp_error_bound's docstring formulas over whole n x m arrays."""
    n, D, dv = pk.shape[-2], pq.shape[-1], V.shape[-1]
    T = lambda X: np.swapaxes(X, -1, -2)  # noqa: E731
    keep = np.tril(np.ones((pq.shape[-2], n), dtype=bool)) if causal else True
    W = np.where(keep, pq @ T(pk), 0.0)
    g = gamma(n + dv + D + 2 + extra, dt)
    gw = gamma(D + extra, dt)
    if normalize:
        den = W.sum(axis=-1, keepdims=True)
        a = (W @ V) / den
        dW = np.where(keep, (G @ T(V) - np.sum(G * a, axis=-1, keepdims=True)) / den, 0.0)
        dV = T(W) @ (G / den)
        rho_a = gamma(2 * n + 2 * D + 4 + extra, dt)
        rho_a = 2.0 * rho_a / (1.0 - rho_a)
        mag = (np.abs(G) @ T(np.abs(V)) + np.abs(np.sum(G * a, axis=-1, keepdims=True))) / den
        EdW = ((1 + g) * (1 + 2 * rho_a) - 1) * np.where(keep, mag, 0.0)
        EdV = ((1 + g) * (1 + gw) * (1 + rho_a) - 1) * (T(np.abs(W)) @ (np.abs(G) / den))
    else:
        dW = np.where(keep, G @ T(V), 0.0)
        dV = T(W) @ G
        EdW = g * np.where(keep, np.abs(G) @ T(np.abs(V)), 0.0)
        EdV = ((1 + g) * (1 + gw) - 1) * (T(np.abs(W)) @ np.abs(G))
    Edq = g * np.abs(dW) @ np.abs(pk) + EdW @ np.abs(pk)
    Edk = g * T(np.abs(dW)) @ np.abs(pq) + T(EdW) @ np.abs(pq)
    f64 = 1.0 + gamma(3 * n + D + 8)
    top = max(np.abs(X).max() for X in (pq, pk, V, G))
    under = (3 * n + 8) * eta(dt) * (1.0 + top) ** 3
    bound = (Edq * f64 + under, Edk * f64 + under, EdV * f64 + under)
    return (dW @ pk, T(dW) @ pq, dV), bound


@pytest.mark.parametrize("blocks", BLOCKS)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocked_linear_vjp_and_bound_are_the_docstring_formulas(
    monkeypatch, causal, normalize, blocks
):
    """The linear pass forms its weights a block of query rows at a time and skips the
    keys a causal block does not see: its VJP is within twice the float64 bound of the
    formula's over whole arrays (two float64 evaluations of one gradient), and its bound
    in two models within twice its own evaluation factor ``1 + gamma_(3n + D + 8)``."""
    _set_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(8)
    n, D = 60, 4
    pq, pk = (0.1 + rng.random((2, n, D)) for _ in range(2))
    V, G = (rng.standard_normal((2, n, 3)) for _ in range(2))
    models = (("float32", 2), ("float64", 0))
    got, bounds = linear_vjp.linear_vjp_with_bounds(
        pq, pk, V, G, causal=causal, normalize=normalize, models=models
    )
    for (dt, extra), b in zip(models, bounds, strict=True):
        plain, want = _linear_docstring(pq, pk, V, G, causal, normalize, np.dtype(dt), extra)
        for x, y in zip(b, want, strict=True):
            np.testing.assert_allclose(x, y, rtol=2 * gamma(3 * n + D + 8))
    for x, y, t in zip(got, plain, bounds[1], strict=True):
        assert (np.abs(x - y) <= 2 * t).all()
    alone = linear_vjp.linear_vjp(pq, pk, V, G, causal=causal, normalize=normalize)
    for x, y in zip(alone, got, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("blocks", BLOCKS)
def test_a_bad_normaliser_in_any_block_refuses_the_linear_vjp(monkeypatch, blocks):
    """Row 40's features are zero, so its normaliser is 0: whichever block holds it, the
    VJP is refused, never returned with a division by zero in it."""
    _set_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(9)
    pq, pk = 0.1 + rng.random((60, 4)), 0.1 + rng.random((60, 4))
    pq[40] = 0.0
    V, G = rng.standard_normal((2, 60, 3))
    with pytest.raises(NumericalFailure, match="normaliser is <= 0"):
        linear_vjp.linear_vjp(pq, pk, V, G, causal=True)


def test_the_linear_vjp_keeps_a_few_blocks_not_n_by_n_arrays():
    """Peak allocation of linear_vjp_with_bounds at n = 2048, D = 16, d_v = 16: at most
    its three blocks of ``_VJP_BLOCK_ELEMENTS`` entries (``W``, ``dW``, ``mag``), the
    absolute values of the four inputs and eleven n x D results, and 1 MiB for NumPy's
    temporaries of one block's rows; a single n x n float64 array is 32 MiB."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, D = 2048, 16
    pq, pk = (0.1 + rng.random((n, D)) for _ in range(2))
    V, G = (rng.standard_normal((n, D)) for _ in range(2))
    tracemalloc.start()
    try:
        linear_vjp.linear_vjp_with_bounds(pq, pk, V, G, causal=True, models=(("float32", 2),))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    allowed = 8 * (3 * common_vjp._VJP_BLOCK_ELEMENTS + 15 * n * D) + (1 << 20)
    assert peak <= allowed, (peak, allowed)
