"""The a-priori error bounds of the attention forms (claims C1, C10, C12, C14).

Each bound is checked against the formula its docstring states (evaluated
here independently), against the exact output (mpmath at 50 digits on the
float inputs taken as exact binary numbers), and in its documented defaults,
batching and underflow term; float32 runs stay within the float32 bound of
the float64 reference.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import Exponential, Polynomial


def _rng(seed=0):
    return np.random.default_rng(seed)


RNG = np.random.default_rng(7)
U = unit_roundoff(np.float64)
ETA = float(np.finfo(np.float64).smallest_subnormal)


def _mp_linear(pq, pk, V, causal):
    """The exact output (to 50 digits) of linear attention on float inputs."""
    n, dv = V.shape
    out = np.empty((n, dv))
    with mpmath.workdps(50):
        for i in range(n):
            js = range(i + 1) if causal else range(n)
            w = [
                mpmath.fsum(
                    mpmath.mpf(float(a)) * mpmath.mpf(float(b))
                    for a, b in zip(pq[i], pk[j], strict=True)
                )
                for j in js
            ]
            den = mpmath.fsum(w)
            for m in range(dv):
                num = mpmath.fsum(
                    wj * mpmath.mpf(float(V[j, m])) for wj, j in zip(w, js, strict=True)
                )
                out[i, m] = float(num / den)
    return out


def _mp_softmax(Q, K, V, causal, scale):
    """Exact softmax attention (50 digits) with the exact scale, inputs as exact binaries."""
    n, dv = V.shape
    out = np.empty((n, dv))
    with mpmath.workdps(50):
        sc = mpmath.mpf(1) / mpmath.sqrt(Q.shape[1]) if scale is None else mpmath.mpf(scale)
        for i in range(n):
            js = range(i + 1) if causal else range(n)
            s = [
                sc
                * mpmath.fsum(
                    mpmath.mpf(float(a)) * mpmath.mpf(float(b))
                    for a, b in zip(Q[i], K[j], strict=True)
                )
                for j in js
            ]
            m = max(s)
            w = [mpmath.exp(x - m) for x in s]
            den = mpmath.fsum(w)
            for c in range(dv):
                out[i, c] = float(
                    mpmath.fsum(
                        wj * mpmath.mpf(float(V[j, c])) for wj, j in zip(w, js, strict=True)
                    )
                    / den
                )
    return out


# ---------------------------------------------------------------------------
# The bounds hold against the exact output
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("logit", [1.0, 300.0, 3000.0])
def test_softmax_within_error_bound_of_exact(causal, logit):
    """The a-priori bound holds against mpmath, also where naive exp overflows."""
    rng = _rng(2)
    n, d = 6, 3
    Q = rng.normal(size=(n, d))
    K = rng.normal(size=(n, d))
    Q *= math.sqrt(logit) / np.linalg.norm(Q, axis=1, keepdims=True)
    K *= math.sqrt(logit) / np.linalg.norm(K, axis=1, keepdims=True)
    V = rng.normal(size=(n, 2))
    out = att.softmax(Q, K, V, causal=causal, scale=1.0)
    exact = _mp_softmax(Q, K, V, causal, 1.0)
    bound = att.softmax_error_bound(Q, K, V, causal=causal, scale=1.0)
    assert np.isfinite(out).all()
    assert (np.abs(out - exact) <= bound).all()


@pytest.mark.parametrize("causal", [False, True])
def test_linear_error_bound_holds_against_exact(causal):
    """Each linear form is within linear_error_bound of the mpmath value."""
    rng = _rng(12)
    pq = rng.random((9, 4)) * np.array([1.0, 1e3, 1e-3, 1.0])
    pk = rng.random((9, 4))
    V = rng.normal(size=(9, 3)) + 100.0  # offset: cancellation in nothing, large |V|
    exact = _mp_linear(pq, pk, V, causal)
    bound = att.linear_error_bound(pq, pk, V, causal=causal)
    outs = [att.parallel(pq, pk, V, causal=causal)]
    if causal:
        outs += [att.recurrent(pq, pk, V), att.chunked(pq, pk, V, chunk_size=4)]
    for out in outs:
        assert (np.abs(out - exact) <= bound).all()
    # The bound is a rounding bound, not a blanket: within a modest multiple of
    # gamma_k times the output's size (k = 2 n + 2 D + 4).
    k = 2 * 9 + 2 * 4 + 4
    assert bound.max() <= 100 * k * np.finfo(float).eps * np.abs(V).max()


def test_error_bound_is_inf_where_normaliser_sign_uncertain():
    pq = np.array([[1.0, 1.0]])
    pk = np.array([[1.0, -1.0]])  # phi_q . phi_k = 0 exactly
    bound = att.linear_error_bound(pq, pk, np.ones((1, 1)))
    assert np.isinf(bound).all()


def test_bounds_cover_float32_runs():
    """A float32 run is within the float32 bound of the float64 reference (C14)."""
    pq = RNG.random((2, 12, 4)) + 0.1
    pk = RNG.random((2, 12, 4)) + 0.1
    V = RNG.normal(size=(2, 12, 3))
    ref = att.parallel(pq, pk, V, causal=True)
    f32 = [x.astype(np.float32) for x in (pq, pk, V)]
    bound = att.linear_error_bound(pq, pk, V, causal=True, dtype=np.float32, extra_ops=2)
    for out in (
        att.parallel(*f32, causal=True),
        att.recurrent(*f32),
        att.chunked(*f32, chunk_size=5),
    ):
        assert out.dtype == np.float32
        assert np.all(np.abs(out - ref) <= bound)
    Q, K = RNG.normal(size=(2, 12, 4))
    sref = att.softmax(Q, K, V[0])
    s32 = att.softmax(Q.astype(np.float32), K.astype(np.float32), V[0].astype(np.float32))
    sb = att.softmax_error_bound(Q, K, V[0], dtype=np.float32, extra_ops=2)
    assert np.all(np.abs(s32 - sref) <= sb)


# ---------------------------------------------------------------------------
# The formulas of the docstrings, evaluated independently
# ---------------------------------------------------------------------------


def _quotient(absH, E, den, roundings=1):
    """Docstring of _quotient_bound: (E_num + R E_den) / lo1 + r u R (1 + u), float64."""
    E_num, E_den = E[..., :-1], E[..., -1:]
    den = den[..., None]
    lo1, lo2 = den - E_den, den - 2 * E_den
    R = (absH[..., :-1] + E_num) / lo2
    err = (E_num + R * E_den) / lo1 + roundings * U * R * (1 + U)
    return np.where(lo2 > 0, err, np.inf)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra", [0, 3])
def test_linear_error_bound_is_the_docstring_formula(causal, extra):
    n, D, dv = 7, 3, 2
    pq = RNG.random((n, D)) + 0.1
    pk = RNG.random((n, D)) + 0.1
    V = RNG.normal(size=(n, dv))
    W = np.hstack([V, np.ones((n, 1))])
    kappa = pq @ pk.T
    if causal:
        kappa = np.tril(kappa)
    absH = kappa @ np.abs(W)  # kappa >= 0 here
    H = kappa @ W
    k = 2 * n + 2 * D + 4
    g64 = gamma(k)
    E = gamma(k + extra) * (1 + g64) * absH
    under = 3 * n * D * ETA * (1 + pq.max()) * (1 + pk.max()) * (1 + np.abs(W).max())
    expected = _quotient(absH * (1 + g64), E + under, H[:, -1])
    got = att.linear_error_bound(pq, pk, V, causal=causal, extra_ops=extra)
    assert np.allclose(got, expected, rtol=1e3 * U, atol=0)
    # float32 adds the float64 model of the reference normaliser
    got32 = att.linear_error_bound(pq, pk, V, causal=causal, extra_ops=extra, dtype=np.float32)
    u32 = unit_roundoff(np.float32)
    E32 = gamma(k + extra, np.float32) * (1 + g64) * absH + g64 * (1 + g64) * absH
    under32 = (
        3
        * n
        * D
        * float(np.finfo(np.float32).smallest_subnormal)
        * (1 + pq.max())
        * (1 + pk.max())
        * (1 + np.abs(W).max())
    )
    E32 = E32 + under32
    E_num, E_den = E32[:, :-1], E32[:, -1:]
    den = H[:, -1:]
    R = (absH[:, :-1] * (1 + g64) + E_num) / (den - 2 * E_den)
    expected32 = (E_num + R * E_den) / (den - E_den) + u32 * R * (1 + u32)
    assert np.allclose(got32, expected32, rtol=1e3 * U, atol=0)


def test_linear_error_bound_is_inf_where_the_sign_is_uncertain():
    pq = np.array([[1.0], [-1.0], [1.0]])
    V = np.ones((3, 1))
    E = att.linear_error_bound(pq, pq, V, causal=True)
    # normalisers 1, 0 (exactly: 1 - 1), 1: the middle one's sign is uncertain
    assert np.isfinite(E[0]).all() and np.isinf(E[1]).all() and np.isfinite(E[2]).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra, dtype", [(0, None), (2, np.float32)])
def test_softmax_error_bound_is_the_docstring_formula(causal, extra, dtype):
    """The bound is the smaller of the coarse (max |v|) and the fine (output-scaled) formula."""
    n, d, dv = 6, 3, 2
    Q, K = RNG.normal(size=(2, n, d))
    V = RNG.normal(size=(n, dv))
    scale = 0.7
    u = unit_roundoff(dtype or np.float64)
    eta = float(np.finfo(dtype or np.float64).smallest_subnormal)
    got = att.softmax_error_bound(Q, K, V, causal=causal, scale=scale, dtype=dtype, extra_ops=extra)
    kw = dict(causal=causal, scale=scale, dtype=dtype, extra_ops=extra)
    loose = att.softmax_error_bound(Q, K, V, tight=False, **kw)
    for i in range(n):
        J = list(range(i + 1) if causal else range(n))
        kmax = np.abs(K[J]).max(axis=0)
        vmax = np.abs(V[J]).max(axis=0)
        r = scale * np.abs(Q[i]) @ kmax * (1 + gamma(d + 2))
        theta = gamma(d + 2 + extra, dtype or np.float64) * r + 2 * u * r + 5 * u
        gn = gamma(n + extra, dtype or np.float64)
        factor = math.expm1(2 * theta) * (1 + u) + 2 * gn / (1 - gn) + u
        coarse = (factor * vmax + (3 * n + 2) * eta * (1 + vmax)) * (1 + gamma(6))
        # the fine formula, from the weights directly
        r64 = scale * np.abs(Q[i]) @ kmax * (1 + gamma(d + 2))
        theta64 = gamma(d + 2) * r64 + 2 * U * r64 + 5 * U
        gn64 = gamma(n)
        margin = (
            (math.expm1(2 * theta64) * (1 + U) + 2 * gn64 / (1 - gn64) + U) * vmax
            + (3 * n + 2) * 2.0**-1074 * (1 + vmax)
        ) * (1 + gamma(6))
        s_ = scale * K[J] @ Q[i]
        w = np.exp(s_ - s_.max())
        a = w @ V[J] / w.sum()
        A = w @ np.abs(V[J]) / w.sum()
        dev = np.maximum(V[J].max(axis=0) - a, a - V[J].min(axis=0)) + margin
        X = math.exp(2 * theta) * math.expm1(2 * theta) * dev
        Y = gn / (1 - gn) * (math.exp(2 * theta) * (A + margin) + np.abs(a) + margin + X)
        Z = u * (np.abs(a) + margin + X + Y)
        fine = (X + Y + Z + (3 * n + 2) * eta * (1 + np.abs(V).max())) * (1 + gamma(8))
        assert np.allclose(got[i], np.minimum(coarse, fine), rtol=1e3 * U, atol=0)
        assert np.allclose(loose[i], coarse, rtol=1e3 * U, atol=0)  # tight=False: coarse alone
    default = att.softmax_error_bound(Q, K, V, causal=causal)
    explicit = att.softmax_error_bound(Q, K, V, causal=causal, scale=1 / math.sqrt(d))
    assert np.array_equal(default, explicit)


@pytest.mark.parametrize("causal", [False, True])
def test_kernelized_error_bound_is_the_docstring_formula(causal):
    n, d, dv = 5, 2, 2
    Q, K = RNG.normal(size=(2, n, d))
    V = RNG.normal(size=(n, dv))
    k = Polynomial(2, c=1.0)
    G = k(Q, K)
    EG = k.error_bound(Q, K)
    if causal:
        G, EG = np.tril(G), np.tril(EG)
    W = np.hstack([V, np.ones((n, 1))])
    absH = np.abs(G) @ np.abs(W)
    EGW = EG @ np.abs(W)
    g64 = gamma(n + 2)
    E = (EGW + gamma(n + 1) * absH) * (1 + g64) + n * ETA * (1 + np.abs(W).max())
    expected = _quotient(absH * (1 + g64) + EGW * (1 + g64), E, (G @ W)[:, -1], roundings=1)
    got = att.kernelized_error_bound(Q, K, V, k, causal=causal)
    assert np.allclose(got, expected, rtol=1e3 * U, atol=0)
    # the bound holds: kernelized against an exact evaluation of the Gram block
    exact = np.array(k.gram_mp(Q, K, dps=40).tolist(), dtype=float)
    if causal:
        exact = np.tril(exact)
    ref = (exact @ V) / exact.sum(axis=1, keepdims=True)
    assert np.all(np.abs(att.kernelized(Q, K, V, k, causal=causal) - ref) <= got)


def test_kernelized_error_bound_lower_precision_and_extra_ops_grow_it():
    Q, K = RNG.normal(size=(2, 5, 2))
    V = RNG.normal(size=(5, 1))
    k = Exponential(0.5)
    base = att.kernelized_error_bound(Q, K, V, k)
    assert np.all(att.kernelized_error_bound(Q, K, V, k, extra_ops=4) > base)
    b32 = att.kernelized_error_bound(Q, K, V, k, dtype=np.float32)
    ratio = unit_roundoff(np.float32) / U
    assert np.all(b32 > 0.5 * ratio * base)


# ---------------------------------------------------------------------------
# Defaults, batches, the underflow term
# ---------------------------------------------------------------------------


def _batched_inputs():
    Q, K = RNG.normal(size=(2, 3, 2, 6, 4))
    V = RNG.normal(size=(3, 2, 6, 2))
    return Q, K, np.abs(Q) + 0.1, np.abs(K) + 0.1, V


def test_error_bounds_defaults_are_the_documented_ones():
    Q, K, pq, pk, V = (x[0, 0] for x in _batched_inputs())
    k = Exponential(0.5)
    assert np.array_equal(
        att.softmax_error_bound(Q, K, V),
        att.softmax_error_bound(Q, K, V, causal=False, scale=0.5, dtype=np.float64, extra_ops=0),
    )
    assert np.array_equal(
        att.linear_error_bound(pq, pk, V),
        att.linear_error_bound(pq, pk, V, causal=False, dtype=np.float64, extra_ops=0),
    )
    assert np.array_equal(
        att.kernelized_error_bound(Q, K, V, k),
        att.kernelized_error_bound(Q, K, V, k, causal=False, dtype=np.float64, extra_ops=0),
    )


@pytest.mark.parametrize("causal", [False, True])
def test_error_bounds_of_a_batch_are_the_bounds_of_its_members(causal):
    Q, K, pq, pk, V = _batched_inputs()
    k = Exponential(0.5)
    soft = att.softmax_error_bound(Q, K, V, causal=causal)
    lin = att.linear_error_bound(pq, pk, V, causal=causal)
    ker = att.kernelized_error_bound(Q, K, V, k, causal=causal)
    assert soft.shape == lin.shape == ker.shape == V.shape
    for b in np.ndindex(3, 2):
        assert np.array_equal(soft[b], att.softmax_error_bound(Q[b], K[b], V[b], causal=causal))
        assert np.allclose(
            lin[b], att.linear_error_bound(pq[b], pk[b], V[b], causal=causal), rtol=8 * U, atol=0
        )
        assert np.allclose(
            ker[b],
            att.kernelized_error_bound(Q[b], K[b], V[b], k, causal=causal),
            rtol=8 * U,
            atol=0,
        )


def test_softmax_error_bound_with_zero_values_is_the_underflow_term():
    """V = 0: the output is exactly 0; only the gradual-underflow term remains."""
    Q, K = RNG.normal(size=(2, 5, 3))
    for dtype in (np.float64, np.float32):
        eta = float(np.finfo(dtype).smallest_subnormal)
        E = att.softmax_error_bound(Q, K, np.zeros((5, 2)), dtype=dtype)
        assert np.all(E == (3 * 5 + 2) * eta * (1 + gamma(6)))
        # 1 + vmax: with |V| = 1 the term doubles next to the weight term
        V1 = np.ones((5, 1))
        E1 = att.softmax_error_bound(Q, K, V1, dtype=dtype)
        assert np.all(E1 > 2 * (3 * 5 + 2) * eta)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


_Q = np.ones((4, 3))
_V = np.ones((4, 2))
_NAN = np.where(np.eye(4, 3) > 0, np.nan, 1.0)
_INF = np.where(np.eye(4, 3) > 0, np.inf, 1.0)


BAD_CALLS = [
    ("bound dtype", lambda: att.linear_error_bound(_Q, _Q, _V, dtype=np.float16), "`dtype`"),
    ("bound extra_ops", lambda: att.softmax_error_bound(_Q, _Q, _V, extra_ops=-1), "`extra_ops`"),
    (
        "bound kernel",
        lambda: att.kernelized_error_bound(_Q, _Q, _V, lambda X, Y: X @ Y.T),
        "error_bound",
    ),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises(call, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()
