"""Terms of the normwise bound of the transitions that its holding tests cannot see (C24).

A bound that misses a term still holds on most inputs (it is about a
thousand times the measured error on random ones), so each test builds
inputs on which one documented term of
:mod:`~kernelcheck._src.attention.common.transition_bound` dominates, and
requires the bound to contain it (or to grow by it):

* the transitions' norms: with ``beta |k|^2 = 3`` every transition stretches
  by ``rho = 2`` and the state's bound grows at least twofold a token;
* the recurrence's own roundings: a handed-over state a million times the
  new tokens' writes leaves ``gamma_(D+10) |q| mu sigma_(-1)`` in the bound;
* the chunked form's triangular systems: parallel keys make the chunks'
  products large, and the bound covering chunks of 64 tokens is several
  times the one covering single tokens;
* the storage precision: a 16-bit layer's stored output adds
  ``gamma_ops(storage) |q_t| sigma_t``;
* the decays formed from cumulative log gates: ``expm1(4 gamma_(C+5) L) + 10 u``
  in the accumulation precision;
* gradual underflow: subnormal inputs leave the underflow term.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transition_bands as tbands
from kernelcheck._src.attention.common import transition_bound as tb
from kernelcheck._src.attention.common.transitions import Transitions, dplr_step, run_steps
from kernelcheck._src.core.rounding import RoundingModel, eta, gamma, precision, unit_roundoff
from kernelcheck.attention import (
    State,
    delta_error_bound,
    gated_delta_chunked,
    gated_delta_error_bound,
    gated_delta_recurrent,
)


def _delta(n, D, dv, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return q, k * scale, rng.standard_normal((n, dv)), rng.uniform(0.2, 1.0, n)


def _bounds(q, k, v, beta, model, S0=None, chunk_size=64):
    T = Transitions(q, k, beta[:, None] * v, -beta[:, None] * k)
    S0 = np.zeros((q.shape[-1], v.shape[-1])) if S0 is None else S0
    return tb.transitions_bound(T, S0, model, chunk_size=chunk_size)


def test_the_state_bound_grows_by_the_transitions_norm():
    n, D, dv = 12, 4, 2
    q, k, v, _ = _delta(n, D, dv)
    beta = np.full(n, 3.0)  # |k| = 1: beta |k|^2 = 3, |I - 3 k k^T| = 2
    b64, _ = _bounds(q, k, v, beta, np.dtype(np.float64))
    e = b64.state
    assert np.isfinite(e).all()
    assert (e[1:] >= 2.0 * e[:-1]).all()
    assert np.allclose(b64.growth, 2.0 ** np.arange(1, n + 1), rtol=1e-12)


def test_a_large_handed_over_state_enters_through_the_recurrence_term():
    n, D, dv = 3, 4, 2
    q, k, v, beta = _delta(n, D, dv, seed=1)
    rng = np.random.default_rng(1)
    S0 = 1e6 * rng.standard_normal((D, dv))
    b = delta_error_bound(q, k, v, beta, dtype="float32", initial_state=State(S0))
    sig0 = np.linalg.norm(S0, axis=0)
    mu = 1.0 + beta[0] * np.sum(k[0] ** 2)
    share = gamma(D + 10, np.float32) * np.linalg.norm(q[0]) * mu * sig0
    without = delta_error_bound(q, k, v, beta, dtype="float32")
    assert (without[0] < share / 100).all()  # the state's share dominates
    assert (b[0] >= share).all()


def test_the_chunks_triangular_systems_enter_through_the_chunk_terms():
    n, D, dv = 48, 4, 2
    rng = np.random.default_rng(2)
    q = rng.standard_normal((n, D))
    k = np.ones((n, D)) + 1e-3 * rng.standard_normal((n, D))  # nearly parallel keys
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v, beta = rng.standard_normal((n, dv)), np.full(n, 0.9)
    _, wide = _bounds(q, k, v, beta, np.dtype(np.float32), chunk_size=64)
    _, single = _bounds(q, k, v, beta, np.dtype(np.float32), chunk_size=1)
    assert (wide.out[-1] > 5.0 * single.out[-1]).all()
    assert (wide.state[-1] > 5.0 * single.state[-1]).all()


def test_a_16_bit_layer_pays_its_storage_roundings():
    n, D, dv = 8, 4, 2
    q, k, v, beta = _delta(n, D, dv, seed=3)
    model = RoundingModel(precision("float32"), precision("bfloat16"), 4)
    b64, b16 = _bounds(q, k, v, beta, model, chunk_size=1)
    _, b32 = _bounds(q, k, v, beta, np.dtype(np.float32), chunk_size=1)
    _, _, sig = run_steps(dplr_step, q, k, beta[:, None] * v,
                             (-beta[:, None] * k, k, np.ones((n, 1))), np.zeros((D, dv)),
                             norms=True)  # fmt: skip
    share = gamma(4, precision("bfloat16")) * np.linalg.norm(q, axis=-1)[:, None] * sig
    assert (b32.out < share).all()
    assert (b16.out >= share).all()


def test_decays_from_cumulative_log_gates_carry_their_error():
    n, dv = 40, 2
    logw = np.full((n, 1), np.log(0.05))
    mags = tb._Magnitudes(*(np.ones(n),) * 4, np.ones((n, dv)), np.ones(n), np.ones(n),
                          np.ones(n), np.abs(logw[:, 0]), True, 4)  # fmt: skip
    C = 16
    tm = tb._terms(mags, np.ones((n, dv)), np.zeros(dv), C, np.dtype(np.float32))
    L = np.minimum(np.arange(1, n + 1), C) * abs(np.log(0.05))
    expected = np.expm1(4.0 * gamma(C + 5, np.float32) * L) + 10 * unit_roundoff(np.float32)
    assert (tm.rho_dec[:, 0] >= expected).all()
    # a 16-bit layer accumulating in float32 forms its decays in float32
    model = RoundingModel(precision("float32"), precision("bfloat16"), 4)
    tm16 = tb._terms(mags, np.ones((n, dv)), np.zeros(dv), C, model)
    assert np.allclose(tm16.rho_dec, tm.rho_dec)
    assert (tm16.rho_dec < np.expm1(4.0 * gamma(C + 5, precision("bfloat16")) * L[:, None])).all()
    q, k, v, beta = _delta(n, 4, dv, seed=4)
    g = np.full(n, 0.05)
    low = [x.astype(np.float32) for x in (q, k, v, g, beta)]
    err = np.abs(gated_delta_chunked(*low, chunk_size=C) - gated_delta_recurrent(q, k, v, g, beta))
    assert (err <= gated_delta_error_bound(*low, chunk_size=C)).all()


def test_subnormal_inputs_leave_the_underflow_term():
    n, D, dv = 4, 3, 2
    q = np.full((n, D), 1e-310)
    k = np.full((n, D), 1.0 / np.sqrt(D))
    v, beta = np.ones((n, dv)), np.full(n, 0.5)
    b = delta_error_bound(q, k, v, beta)
    under = 3 * D * (64 + 8) * eta(np.float64)
    assert (b >= under).all()
    assert (b <= 1e-290).all()


def _two_tokens():
    """Two tokens of the delta rule from a handed-over state, and its magnitudes by hand."""
    rng = np.random.default_rng(5)
    D, dv = 3, 2
    q, k = rng.standard_normal((2, 2, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v, beta = rng.standard_normal((2, dv)), np.array([0.7, 0.4])
    S0 = rng.standard_normal((D, dv))
    T = Transitions(q, k, beta[:, None] * v, -beta[:, None] * k)
    return T, S0, beta


def test_the_local_terms_are_the_documented_formulas():
    T, S0, beta = _two_tokens()
    D, dt, C = 3, np.dtype(np.float32), 64
    mags = tb.magnitudes(T)
    _, _, sig = run_steps(dplr_step, T.q, T.k, T.v, (T.read, T.k, np.ones((2, 1))), S0,
                             norms=True)  # fmt: skip
    sig0 = np.linalg.norm(S0, axis=0)
    tm = tb._terms(mags, sig, sig0, C, dt)
    bands = tbands.bands(T, mags, C)
    local = tb.local_terms(mags, bands, tm, dt, C, 0, np.zeros_like(sig))
    g = lambda m: gamma(m, dt)  # noqa: E731
    kn, r = np.linalg.norm(T.k, axis=-1), beta * np.linalg.norm(T.k, axis=-1)
    vv = np.abs(T.v)
    before = np.stack([sig0, sig[0]])
    mu = 1.0 + r * kn
    assert np.allclose(local.recurrence, g(D + 10) * (mu[:, None] * before + kn[:, None] * vv))
    # token 0: no earlier token in its window; token 1: one, lag 1, with its exact entries
    sig_in = np.maximum.accumulate(before, axis=0)
    Zx = vv + r[:, None] * (before + 2.0 * tm.Lam * sig_in)
    Z = 1.25 * Zx
    A = abs(T.read[1] @ T.k[0])
    Abar = np.abs(T.read[1]) @ np.abs(T.k[0])
    Y = (g(3) + g(C)) * Z
    Y[1] += g(C) * A * Z[0] + g(D + 3) * (1 + g(C)) * Abar * Z[0]
    dX = Y + (g(D + 1)) * Z
    dX[1] += bands.Linv[1, 1] * Y[0]
    assert np.allclose(bands.Linv[1, 1], A, rtol=1e-12)  # no transition between lag 1's pair
    assert np.allclose(local.dX, dX, rtol=1e-10)
    xbar = vv + r[:, None] * before
    chunk = g(C + 3) * (sig_in + 1.25 * kn[:, None] * xbar) + kn[:, None] * dX
    assert np.allclose(local.chunk, chunk, rtol=1e-10)


def test_the_bound_composes_the_local_terms_through_the_transitions():
    T, S0, _ = _two_tokens()
    dt, C = np.dtype(np.float32), 64
    b64, b32 = tb.transitions_bound(T, S0, dt, chunk_size=C)
    mags = tb.magnitudes(T)
    tokens = (T.read, T.k, np.ones((2, 1)))
    sig = run_steps(dplr_step, T.q, T.k, T.v, tokens, S0, norms=True)[2]
    tm = tb._terms(mags, sig, np.linalg.norm(S0, axis=0), C, dt)
    bands = tbands.bands(T, mags, C)
    zero = np.zeros_like(sig)
    local = tb.local_terms(mags, bands, tm, dt, C, 0, zero)
    lam = np.maximum(local.recurrence, local.chunk)
    e = np.empty_like(lam)
    e[0] = lam[0]
    e[1] = mags.rho[1] * e[0] + lam[1]
    assert (b32.state >= e).all()
    assert (b32.out >= tb.output_terms(mags, bands, tm, dt, C, 0, e, zero, local)).all()


# ----- the band entries and their sums, as computed for speed ---------------------------


def _one_decay_transitions(n, D, seed, zero_at=()):
    """Unit keys, beta in (0, 2), one decay for every channel (gates near 0 and exactly 0)."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    beta = rng.uniform(0.0, 2.0, (n, 1))
    gates = rng.uniform(0.0, 1.0, (n, 1)) ** 3  # many near 0
    gates[list(zero_at)] = 0.0
    with np.errstate(divide="ignore"):
        log_w = np.log(gates)
    return Transitions(q, k, beta * rng.standard_normal((n, 2)), k, -beta * k, log_w)


def _exact_bands(T, C):
    """``A``, ``Abar``, ``Aq`` entry by entry in extended precision (the definitions)."""
    ld = np.longdouble
    r, q, p = (np.asarray(x, dtype=ld) for x in (T.read, T.q, T.write))
    w = np.exp(np.asarray(T.log_w, dtype=ld))
    n = r.shape[0]
    A, Abar, Aq = (np.zeros((n, C), dtype=ld) for _ in range(3))
    for t in range(n):
        for lag in range(min(C, t + 1)):
            j = t - lag
            between = np.prod(w[j + 1 : t, 0]) if lag else ld(1)
            if lag:
                A[t, lag] = abs(r[t] @ p[j]) * between
                Abar[t, lag] = np.abs(r[t]) @ np.abs(p[j]) * between
            Aq[t, lag] = np.abs(q[t]) @ np.abs(p[j]) * (between * w[t, 0] if lag else 1)
    return A, Abar, Aq


def test_one_decays_block_products_are_upward_and_agree_with_the_token_by_token_decays():
    """One decay for every channel takes the block products; they bound the exact entries.

    The token-by-token path (the decay written out on every channel) is the
    general one; both are compared with extended precision, gates near 0 and
    exactly 0 (nothing crosses them) included, over a length that is not a
    multiple of the chunk.
    """
    C, n, D = 8, 29, 4
    T = _one_decay_transitions(n, D, seed=3, zero_at=(5, 17))
    mags = tb.magnitudes(T)
    fast = tbands.bands(T, mags, C)
    wide = T._replace(log_w=np.repeat(T.log_w, D, axis=-1))
    general = tbands.bands(wide, tb.magnitudes(wide), C)
    exact = _exact_bands(T, C)
    for name, ex in zip(("A", "Abar", "Aq"), exact, strict=True):
        got, ref = getattr(fast, name), getattr(general, name)
        assert (got >= ex).all() and (ref >= ex).all(), name
        if name == "A":  # each adds its own rounding slack (of the decays too): a sliver of Abar
            assert (np.abs(got - ref) <= 1e-10 * fast.Abar).all()
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0, err_msg=name)
    # nothing crosses a gate of 0 (token 5's, token 17's): Aq decays over (j, t], A over (j, t)
    assert fast.Aq[5, 1] == fast.Aq[6, 2] == fast.Aq[17, 1] == fast.Aq[18, 2] == 0.0
    assert fast.A[6, 2] == fast.A[18, 2] == 0.0 and fast.A[6, 1] > 0.0
    np.testing.assert_allclose(fast.Linv, general.Linv, rtol=1e-12, atol=0)


def test_band_blocks_hold_every_lag_and_the_lag_sums_are_upward():
    rng = np.random.default_rng(4)
    n, C, m = 37, 8, 3
    band, X = rng.random((2, n, C)), rng.random((2, n, m))
    band[:, np.arange(C)[None, :] > np.arange(n)[:, None]] = 0.0  # lags before token 0
    np.testing.assert_array_equal(tbands.block_lags(tbands.lag_blocks(band, True), n), band)
    for own in (False, True):
        exact = np.zeros((2, n, m), dtype=np.longdouble)
        for t in range(n):
            for lag in range(0 if own else 1, min(C, t + 1)):
                exact[:, t] += band[:, t, lag, None].astype(np.longdouble) * X[:, t - lag]
        got = tbands.lag_sum(band, X, own=own)
        assert (got >= exact).all()
        np.testing.assert_allclose(got, exact.astype(np.float64), rtol=1e-13)


def test_an_infinite_entry_reaches_only_the_sums_whose_lags_reach_it():
    """A token whose bound is already ``inf`` leaves the earlier tokens of its block finite."""
    rng = np.random.default_rng(5)
    n, C = 40, 8
    band, X = rng.random((n, C)), rng.random((n, 2))
    X[20, 1] = np.inf
    out = tbands.lag_sum(band, X, own=False)
    assert np.isfinite(out[:21]).all() and np.isfinite(out[:, 0]).all()
    assert np.isinf(out[21:28, 1]).all() and np.isfinite(out[28:, 1]).all()


def test_the_state_norms_are_the_reference_loops():
    """The in-place loop of the error model's magnitudes gives the reference recurrence's norms.

    Both forms of the write (along the keys, and apart), a decay per token,
    per channel and none, gates of exactly 0, batched heads and a length
    that is not a multiple of the block of kept states.
    """
    rng = np.random.default_rng(6)
    for i, (write, width) in enumerate([(False, None), (True, 1), (False, 3), (True, 3)]):
        n, D, dv = 70, 3, 2
        q, k, r, p = rng.standard_normal((4, 2, n, D))
        v = rng.standard_normal((2, n, dv))
        gates = None if width is None else rng.uniform(0.0, 1.0, (2, n, width))
        if gates is not None:
            gates[:, 9] = 0.0
        with np.errstate(divide="ignore"):
            log_w = None if gates is None else np.log(gates)
        T = Transitions(q, k, v, r, p if write else None, log_w)
        S0 = rng.standard_normal((D, dv))
        w = np.ones((2, n, 1)) if gates is None else gates
        ref = run_steps(dplr_step, q, k, v, (r, p if write else k, w), S0, norms=True)[2]
        np.testing.assert_allclose(tbands.state_norms(T, S0).norms, ref, rtol=1e-12, err_msg=str(i))


def _token_loop(a, b):
    e, prev = np.empty_like(b), np.zeros(b.shape[:-2] + b.shape[-1:], dtype=b.dtype)
    for t in range(b.shape[-2]):
        prev = a[..., t, None] * prev + b[..., t, :]
        e[..., t, :] = prev
    return e


def test_the_blocked_scan_is_upward_and_is_the_token_loop():
    """The error propagation runs by blocks; it bounds the exact recurrence from above.

    Non-negative coefficients of every size (0, near 0, near 1, growing),
    lengths around the block, batched: against the token loop in extended
    precision (exact to 1e-19 here) the scan is never below, and within its
    stated ``gamma_(4n+4)``.
    """
    rng = np.random.default_rng(7)
    for n in (1, 63, 64, 65, 200):
        a = rng.choice([0.0, 1e-3, 0.5, 0.999, 1.0, 1.02], size=(2, n)) * rng.uniform(0.9, 1, n)
        b = rng.uniform(0.0, 1.0, (2, n, 3)) * (rng.random((2, n, 1)) < 0.8)
        exact = _token_loop(a.astype(np.longdouble), b.astype(np.longdouble))
        got = tbands.upward_scan(a, b)
        assert (got >= exact).all(), n
        assert (got <= exact * (1 + 2 * gamma(4 * n + 4)) + 1e-300).all(), n
    # the reverse recurrence of the adjoints is the same scan on reversed tokens
    from kernelcheck._src.attention.common import transition_vjp as tv

    rho, lam = rng.uniform(0, 1.5, (1, 70)), rng.uniform(0, 1, (1, 70, 2))
    want = _token_loop(np.append(rho[:, 1:], 0.0)[None, ::-1], lam[:, ::-1])[:, ::-1]
    assert (tv._reverse(rho, lam) >= want).all()
    np.testing.assert_allclose(tv._reverse(rho, lam), want, rtol=1e-12)


def test_the_reverse_pass_starts_its_blocks_from_the_error_models_forward_states():
    """The checkpoints the gradients reuse are the states the reverse pass's own loop computes.

    With the default block the reverse pass reads the error model's forward
    states (one float64 loop per input in a verification); with another
    block it runs its own.  Both give the same gradients, and the
    checkpoints are the token loop's states at every block's start.
    """
    from kernelcheck._src.attention.common import transition_vjp as tv
    from kernelcheck._src.core.memo import memo_scope

    rng = np.random.default_rng(8)
    n, D, dv = 150, 4, 3
    q, k = rng.standard_normal((2, 2, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    beta, gates = rng.uniform(0.1, 1.0, (2, 2, n, 1))
    T = Transitions(q, k, beta * rng.standard_normal((2, n, dv)), -(gates * beta) * k, None,
                    np.log(gates))  # fmt: skip
    S0, G = rng.standard_normal((D, dv)), rng.standard_normal((2, n, dv))
    kept = tb.forward_states(T, S0).checkpoints
    S = np.broadcast_to(S0, (2, D, dv))
    for b in range(kept.shape[-3] - 1):
        np.testing.assert_allclose(kept[:, b], S, rtol=1e-12, atol=1e-12)
        blk = slice(b * tbands.STATE_BLOCK, min(n, (b + 1) * tbands.STATE_BLOCK))
        S = run_steps(dplr_step, q[:, blk], k[:, blk], T.v[:, blk],
                      (T.read[:, blk], k[:, blk], gates[:, blk]), S)[1]  # fmt: skip
    np.testing.assert_allclose(kept[:, -1], S, rtol=1e-12, atol=1e-12)
    with memo_scope():
        shared, _ = tv.transition_vjp(T, S0, G)
    own, _ = tv.transition_vjp(T, S0, G, C=48)
    for a, b_ in zip(shared, own, strict=True):
        np.testing.assert_allclose(a, b_, rtol=1e-10, atol=1e-12)


def test_transitions_whose_heads_broadcast_are_bounded_as_their_broadcast_copies():
    """Gates with more heads than the queries and keys: every band and scan broadcasts."""
    rng = np.random.default_rng(9)
    n, D, dv = 70, 3, 2
    q, k = rng.standard_normal((2, 1, n, D))
    v = rng.standard_normal((1, n, dv))
    g, b = rng.uniform(0.5, 1.0, (2, 2, n, 1))
    S0 = rng.standard_normal((D, dv))
    for log_w in (np.log(g), np.log(np.repeat(g, D, axis=-1))):
        T = Transitions(q, k, b * v, -(g * b) * k, None, log_w)
        full = Transitions(*(np.broadcast_to(x, (2,) + x.shape[1:]).copy() for x in T[:4]),
                           None, log_w)  # fmt: skip
        got = tb.transitions_bound(T, S0, np.dtype(np.float32), chunk_size=16)[1]
        want = tb.transitions_bound(full, S0, np.dtype(np.float32), chunk_size=16)[1]
        np.testing.assert_allclose(got.out, want.out, rtol=1e-12)
        np.testing.assert_allclose(got.state, want.state, rtol=1e-12)
