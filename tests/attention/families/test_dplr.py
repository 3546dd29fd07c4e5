"""The diagonal-plus-rank-one transition, RWKV-7, and flash-linear-attention's references (C23).

* C23's one transition for all: the delta rule, Gated DeltaNet and Kimi Delta
  Attention are the DPLR recurrence with ``b = -beta k``, ``a = alpha o k``
  (or ``k``) and the value ``beta v``;
* the transition's spectral norm bound (the 2 x 2 reduction) is at least
  LAPACK's largest singular value of ``Diag(w) + b a^T`` and equal to it when
  the decay is one number for every channel;
* flash-linear-attention's ``dplr_recurrence`` and ``dplr_chunkwise``
  (layout (B, H, T, K), ``S_t = S_t Diag(exp(gk)) + ...`` value-major as it
  writes, float32 inside, the queries scaled by ``K^-1/2``) with RWKV-7's
  factors, within the float32 bound.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common.transition_bound import transition_norms
from kernelcheck._src.attention.common.transitions import Transitions
from kernelcheck._src.attention.families.dplr.reference import rwkv7_factors
from kernelcheck.attention import (
    State,
    dplr_chunked,
    dplr_recurrent,
    gated_delta_recurrent,
    kda_recurrent,
)
from tests.attention.families import thirdparty as tp


def test_the_delta_families_are_special_cases():
    rng = np.random.default_rng(0)
    n, D, dv = 15, 4, 3
    q, k = rng.standard_normal((2, n, D))
    v = rng.standard_normal((n, dv))
    beta, g = rng.uniform(0, 1, (n, 1)), rng.uniform(0.5, 1, (n, D))
    ones = np.ones((n, D))
    as_kda = dplr_chunked(q, k, beta * v, g * k, -beta * k, g, chunk_size=4)
    assert np.allclose(as_kda, kda_recurrent(q, k, v, g, beta[:, 0]), rtol=1e-12, atol=1e-12)
    alpha = g[:, :1]
    as_gated = dplr_recurrent(q, k, beta * v, alpha * k, -beta * k, alpha * ones)
    ref = gated_delta_recurrent(q, k, v, alpha[:, 0], beta[:, 0])
    assert np.allclose(as_gated, ref, rtol=1e-12, atol=1e-12)


def test_the_transition_norm_bounds_the_singular_value():
    rng = np.random.default_rng(1)
    D, m = 5, 60
    a, b = rwkv7_factors(rng, (m, D))
    b = b * rng.uniform(0.5, 3.0, (m, 1))  # some expand
    w = rng.uniform(0.2, 1.0, (m, D))
    for scalar in (False, True):
        ww = np.repeat(w[:, :1], D, axis=1) if scalar else w
        T = Transitions(a, a, np.zeros((m, 1)), a, b, np.log(ww))
        rho, _ = transition_norms(T)
        lapack = np.array([np.linalg.norm(np.diag(x) + np.outer(y, z), 2)
                           for x, y, z in zip(ww, b, a)])  # fmt: skip
        assert (rho >= lapack * (1 - 1e-13)).all()
        if scalar:
            assert np.allclose(rho, lapack, rtol=1e-10)
        else:
            triangle = ww.max(-1) + np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
            assert (rho <= triangle).all()


def test_fla_naive_dplr_recurrence_and_chunkwise_with_rwkv7_factors():
    fla = tp.fla_naive("generalized_delta_rule/dplr/naive.py")
    rng = np.random.default_rng(2)
    H, n, D, dv = 2, 32, 8, 4
    q, k = rng.standard_normal((2, 1, H, n, D))
    v = rng.standard_normal((1, H, n, dv))
    a, b = rwkv7_factors(rng, (1, H, n, D))
    w = np.exp(-np.exp(rng.uniform(-4, -0.5, (1, H, n, D))))  # RWKV-7's decays
    S0 = rng.standard_normal((1, H, D, dv))
    q, k, v, a, b, w, S0 = tp.f32(q, k, v, a, b, w, S0)
    args, kw = (q, k, v, a, b, w), {"scale": D**-0.5, "initial_state": State(S0)}
    ref, S = dplr_recurrent(*args, return_state=True, **kw)
    tol, state_tol = tp.tolerances("dplr", args, kw)
    T = [tp.tensor(x) for x in (q, k, v, a, b, np.log(w))]
    o, Sr = fla.dplr_recurrence(*T, initial_state=tp.tensor(S0))
    tp.within(tp.array(o), ref, tol, "fla dplr_recurrence output")
    tp.within(tp.array(Sr), S.S, state_tol, "fla dplr_recurrence final state")
    o, Sc = fla.dplr_chunkwise(*T, initial_state=tp.tensor(S0), chunk_size=16)
    tp.within(tp.array(o), ref, tol, "fla dplr_chunkwise output")
    tp.within(tp.array(Sc), S.S, state_tol, "fla dplr_chunkwise final state")


def test_fla_naive_dplr_recurrence_gradients_within_the_float32_model():
    fla = tp.fla_naive("generalized_delta_rule/dplr/naive.py")
    rng = np.random.default_rng(3)
    H, n, D, dv = 2, 20, 8, 4
    q, k = rng.standard_normal((2, 1, H, n, D))
    v = rng.standard_normal((1, H, n, dv))
    a, b = rwkv7_factors(rng, (1, H, n, D))
    w = np.exp(-np.exp(rng.uniform(-4, -0.5, (1, H, n, D))))
    q, k, v, a, b, w = tp.f32(q, k, v, a, b, w)
    G = rng.standard_normal(v.shape)

    def layer(q, k, v, a, b, lw):
        return fla.dplr_recurrence(q, k, v, a, b, lw)[0]

    kw = {"scale": D**-0.5, "log_gates": True}
    tp.grads_within("dplr", layer, (q, k, v, a, b, w), kw, G, "dplr_recurrence")


def test_kimi_delta_attentions_transitions_are_bounded_by_their_largest_decay():
    """``Diag(alpha) (I - beta k k^T)`` with unit keys and beta in [0, 2] has norm at most
    ``max alpha``: the bound factors the decay out (the 2 x 2 reduction of the whole
    transition exceeds 1 on about 40% of these tokens, up to 1.23), and stays above
    LAPACK's norm on both sides of the factorisation."""
    rng = np.random.default_rng(4)
    n, D = 400, 8
    k = rng.standard_normal((n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    beta, alpha = rng.uniform(0.0, 2.0, (n, 1)), rng.uniform(0.5, 1.0, (n, D))
    both_sides = [
        Transitions(k, k, k[:, :2], -beta * (alpha * k), None, np.log(alpha)),  # KDA's own
        Transitions(k, k, k[:, :2], k, -beta * alpha * k, np.log(alpha)),  # decay on the left
    ]
    for T in both_sides:
        rho, _ = transition_norms(T)
        p = T.k if T.write is None else T.write
        lapack = np.array([np.linalg.norm(np.diag(w) + np.outer(x, y), 2)
                           for w, x, y in zip(alpha, p, T.read)])  # fmt: skip
        assert (rho >= lapack * (1 - 1e-13)).all()
        assert (rho <= alpha.max(axis=-1) * (1 + 1e-12)).all()
