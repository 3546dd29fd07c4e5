"""Kimi Delta Attention's forms against the implementations people run (claims C22, C23).

Third-party code (see :mod:`tests.attention.families.thirdparty`), computing
in float32, within the float32 model of
:func:`~kernelcheck.attention.kda_error_bound` and the float64 reference's
share, outputs and final states:

* flash-linear-attention's ``naive_recurrent_kda`` and ``naive_chunk_kda``
  (layout (B, T, H, K), log gates on every key channel, an initial state);
  transformers' layers are in :mod:`tests.attention.families.test_transformers_layers`.

Peculiar to the family: a gate of exactly 0 resets its channel, in every
form and in chunks that factor their decays and chunks that cannot; gates
near 0 in float32 (a chunk decaying by e^-800) stay finite and within the
float32 model at every token.
"""

from __future__ import annotations

import numpy as np

from kernelcheck.attention import (
    State,
    gated_delta_recurrent,
    kda_chunked,
    kda_error_bound,
    kda_recurrent,
)
from tests.attention.families import thirdparty as tp


def _inputs(n=37, H=2, D=8, dv=4, seed=0, unit=True, low=0.8):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 1, H, n, D))
    if unit:
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, H, n, dv))
    g, beta = rng.uniform(low, 1.0, (1, H, n, D)), rng.uniform(0.1, 1.0, (1, H, n))
    return tp.f32(q, k, v, g, beta, rng.standard_normal((1, H, D, dv)))


def test_gates_near_zero_in_float32_stay_finite_and_within_the_bound():
    g = np.random.default_rng(3).uniform(0.9e-5, 1.1e-5, (1, 2, 70, 8))
    q, k, v, g, beta = (x.astype(np.float32) for x in (*_inputs(n=70)[:3], g, _inputs(n=70)[4]))
    ref = kda_recurrent(*(x.astype(np.float64) for x in (q, k, v, g, beta)))
    for C in (8, 64):  # chunks decaying by about e^-92 (beyond float32) and by far more
        got = kda_chunked(q, k, v, g, beta, chunk_size=C)
        bound = kda_error_bound(q, k, v, g, beta, dtype=np.float32, chunk_size=C)
        assert np.isfinite(bound).all()
        tp.within(got, ref, bound, f"float32 KDA with gates near 0, chunks of {C}")


def test_a_gate_of_zero_resets_its_channel_in_every_form():
    q, k, v, g, beta, _ = _inputs(n=40, low=0.5)
    g[..., 9, 2] = 0.0  # channel 2 forgets everything before token 9
    g[..., 20:24, :] = 1e-60  # a chunk decaying beyond what a factored product can hold
    ref = kda_recurrent(q, k, v, g, beta)
    for C in (1, 4, 8, 64):
        got = kda_chunked(q, k, v, g, beta, chunk_size=C)
        assert np.abs(got - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())
    before = kda_recurrent(q[..., :9, :], k[..., :9, :], v[..., :9, :], g[..., :9, :],
                           beta[..., :9], return_state=True)[1]  # fmt: skip
    S = before.S.copy()
    S[..., 2, :] = 0.0  # the reset, by hand
    after = kda_recurrent(q[..., 9:, :], k[..., 9:, :], v[..., 9:, :], g[..., 9:, :],
                          beta[..., 9:], initial_state=State(S))  # fmt: skip
    assert np.abs(after - ref[..., 9:, :]).max() <= 1e-12 * max(1.0, np.abs(ref).max())


def test_one_gate_on_every_channel_is_gated_deltanet():
    q, k, v, g, beta, _ = _inputs(n=17)
    same = np.repeat(g[..., :1], g.shape[-1], axis=-1)
    got = kda_chunked(q, k, v, same, beta, chunk_size=8)
    ref = gated_delta_recurrent(q, k, v, same[..., 0], beta)
    assert np.abs(got - ref).max() <= 1e-13 * np.abs(ref).max()


def test_fla_naive_recurrent_and_chunked_kda():
    fla = tp.fla_naive("kda/naive.py")
    q, k, v, g, beta, S0 = _inputs(n=32)
    scale = q.shape[-1] ** -0.5
    args, kw = (q, k, v, g, beta), {"scale": scale, "initial_state": State(S0)}
    ref, S = kda_recurrent(*args, return_state=True, **kw)
    tol, state_tol = tp.tolerances("kda", args, kw)
    T = [tp.tensor(x, "bnhd") for x in (q, k, v, np.log(g))]
    b = tp.tensor(beta[..., None], "bnhd")[..., 0]
    o, Sr = fla.naive_recurrent_kda(*T, b, scale=scale, initial_state=tp.tensor(S0),
                                    output_final_state=True)  # fmt: skip
    tp.within(tp.array(o, "bnhd"), ref, tol, "fla naive recurrent KDA output")
    tp.within(tp.array(Sr), S.S, state_tol, "fla naive recurrent KDA final state")
    o, Sc = fla.naive_chunk_kda(*T, b, scale=scale, initial_state=tp.tensor(S0),
                                output_final_state=True, chunk_size=16)  # fmt: skip
    tp.within(tp.array(o, "bnhd"), ref, tol, "fla naive chunk KDA output")
    tp.within(tp.array(Sc), S.S, state_tol, "fla naive chunk KDA final state")


def test_fla_naive_recurrent_gradients_within_the_float32_model():
    fla = tp.fla_naive("kda/naive.py")
    q, k, v, g, beta, S0 = _inputs(n=24)
    G = np.random.default_rng(9).standard_normal(v.shape)
    scale = q.shape[-1] ** -0.5
    S0t = tp.tensor(S0)

    def layer(q, k, v, lg, b):
        swap = [x.transpose(1, 2) for x in (q, k, v, lg)]
        o, _ = fla.naive_recurrent_kda(*swap, b.transpose(1, 2), scale=scale, initial_state=S0t)
        return o.transpose(1, 2)

    kw = {"scale": scale, "initial_state": State(S0), "log_gates": True}
    tp.grads_within("kda", layer, (q, k, v, g, beta), kw, G, "fla naive recurrent KDA")
