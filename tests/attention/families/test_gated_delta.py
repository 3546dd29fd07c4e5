"""Gated DeltaNet's forms against the implementations people run (claims C22, C23).

Third-party code (see :mod:`tests.attention.families.thirdparty`), each in
its own layout and computing in float32, within the float32 model of
:func:`~kernelcheck.attention.gated_delta_error_bound` plus the float64
reference's own share, outputs and final states:

* flash-linear-attention's ``naive_recurrent_gated_delta_rule`` and
  ``naive_chunk_gated_delta_rule`` (layout (B, T, H, K), log gates, with an
  initial state, n not a multiple of the chunk); transformers' layers are in
  :mod:`tests.attention.families.test_transformers_layers`.

Peculiar to the family: with every gate 1 it is the delta rule; the error
read from the decayed state is what the shipped layers compute, and the
pre-decay variant is a different recurrence.
"""

from __future__ import annotations

import numpy as np

from kernelcheck.attention import (
    State,
    delta_chunked,
    gated_delta_chunked,
    gated_delta_recurrent,
)
from tests.attention.families import thirdparty as tp


def _inputs(n=37, H=2, D=8, dv=4, seed=0, unit=True):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 1, H, n, D))
    if unit:
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, H, n, dv))
    g, beta = rng.uniform(0.8, 1.0, (1, H, n)), rng.uniform(0.1, 1.0, (1, H, n))
    S0 = rng.standard_normal((1, H, D, dv))
    return tp.f32(q, k, v, g, beta, S0)


def test_gates_of_one_are_the_delta_rule():
    q, k, v, g, beta, _ = _inputs(n=21)
    got = gated_delta_chunked(q, k, v, np.ones_like(g), beta, chunk_size=8)
    assert np.array_equal(got, gated_delta_chunked(q, k, v, 1.0, beta, chunk_size=8))
    ref = delta_chunked(q, k, v, beta, chunk_size=8)
    assert np.abs(got - ref).max() <= 1e-13 * np.abs(ref).max()


def test_fla_naive_recurrent_and_chunked_gated_delta_rule():
    fla = tp.fla_naive("gated_delta_rule/naive.py")
    q, k, v, g, beta, S0 = _inputs()
    scale = q.shape[-1] ** -0.5
    args = (q, k, v, g, beta)
    kw = {"scale": scale, "initial_state": State(S0)}
    ref, S = gated_delta_recurrent(*args, return_state=True, **kw)
    tol, state_tol = tp.tolerances("gated_delta", args, kw)
    T = {"q": tp.tensor(q, "bnhd"), "k": tp.tensor(k, "bnhd"), "v": tp.tensor(v, "bnhd")}
    lg, b = (
        tp.tensor(np.log(g)[..., None], "bnhd")[..., 0],
        tp.tensor(beta[..., None], "bnhd")[..., 0],
    )
    o, Sr = fla.naive_recurrent_gated_delta_rule(
        T["q"], T["k"], T["v"], b, lg, scale=scale, initial_state=tp.tensor(S0),
        output_final_state=True,
    )  # fmt: skip
    tp.within(tp.array(o, "bnhd"), ref, tol, "fla naive recurrent output")
    tp.within(tp.array(Sr), S.S, state_tol, "fla naive recurrent final state")
    o, Sc = fla.naive_chunk_gated_delta_rule(
        T["q"], T["k"], T["v"], lg, b, chunk_size=16, scale=scale, initial_state=tp.tensor(S0),
        output_final_state=True,
    )  # fmt: skip
    tp.within(tp.array(o, "bnhd"), ref, tol, "fla naive chunk output")
    tp.within(tp.array(Sc), S.S, state_tol, "fla naive chunk final state")


def test_fla_naive_recurrent_gradients_within_the_float32_model():
    fla = tp.fla_naive("gated_delta_rule/naive.py")
    q, k, v, g, beta, S0 = _inputs(n=24)
    G = np.random.default_rng(9).standard_normal(v.shape)
    scale = q.shape[-1] ** -0.5
    S0t = tp.tensor(S0)

    def layer(q, k, v, lg, b):
        swap = [x.transpose(1, 2) for x in (q, k, v)]
        o, _ = fla.naive_recurrent_gated_delta_rule(
            *swap, b.transpose(1, 2), lg.transpose(1, 2), scale=scale, initial_state=S0t
        )
        return o.transpose(1, 2)

    kw = {"scale": scale, "initial_state": State(S0), "log_gates": True}
    tp.grads_within("gated_delta", layer, (q, k, v, g, beta), kw, G, "fla naive recurrent")
