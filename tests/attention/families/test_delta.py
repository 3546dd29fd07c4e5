"""The delta rule's forms, its transition, and flash-linear-attention's references (claim C22).

* C22's statement: one step of gradient descent on ``1/2 |S^T k - v|^2``; with
  ``|k_t| = 1`` and ``beta_t = 1`` the state returns ``v_t`` exactly at ``k_t``;
  the transition's spectral norm is ``max(1, |1 - beta |k|^2|)`` (the model's
  ``rho``, against LAPACK's singular values), non-expansive while
  ``0 <= beta |k|^2 <= 2``;
* flash-linear-attention's ``delta_rule_recurrence`` (float32 inside) and
  ``delta_rule_chunkwise`` (the input's precision: float64 here), layout
  (B, H, T, K), queries scaled by ``K^-1/2`` inside, within the bounds of
  their precision.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common.transition_bound import transition_norms
from kernelcheck._src.attention.common.transitions import Transitions
from kernelcheck.attention import (
    delta_chunked,
    delta_error_bound,
    delta_parallel,
    delta_recurrence,
    delta_recurrent,
)
from tests.attention.families import thirdparty as tp


def test_the_step_is_gradient_descent_on_the_squared_error():
    rng = np.random.default_rng(0)
    D, dv = 5, 3
    S, k, v = rng.standard_normal((D, dv)), rng.standard_normal(D), rng.standard_normal(dv)
    beta = 0.3
    grad = np.outer(k, S.T @ k - v)  # d/dS of 1/2 |S^T k - v|^2
    state, _ = delta_recurrence().step(delta_recurrence().init(D, dv)._replace(S=S), k, k, v, beta)
    assert np.allclose(state.S, S - beta * grad, rtol=1e-14, atol=1e-14)


def test_unit_keys_and_beta_one_return_the_value_exactly():
    rng = np.random.default_rng(1)
    n, D, dv = 12, 4, 3
    q = np.zeros((n, D))
    k = np.eye(D)[rng.integers(0, D, n)]  # unit keys, exactly
    v = rng.integers(-8, 8, (n, dv)).astype(float)
    q[:] = k  # read each token's value back at its own key
    for f in (delta_recurrent, delta_parallel, lambda *a: delta_chunked(*a, chunk_size=5)):
        assert np.array_equal(f(q, k, v, np.ones(n)), v)


def test_the_transition_norm_is_exact():
    rng = np.random.default_rng(2)
    D = 6
    k = rng.standard_normal((40, D))
    beta = rng.uniform(0, 3, 40) / np.sum(k * k, axis=-1) * rng.uniform(0, 2, 40)
    T = Transitions(k, k, np.zeros((40, 1)), -beta[:, None] * k)
    rho, wmax = transition_norms(T)
    exact = np.maximum(1.0, np.abs(1.0 - beta * np.sum(k * k, axis=-1)))
    lapack = [np.linalg.norm(np.eye(D) - b * np.outer(x, x), 2) for b, x in zip(beta, k)]
    assert np.allclose(rho, exact, rtol=1e-12) and (rho >= exact).all()
    assert np.allclose(lapack, exact, rtol=1e-12)
    assert (wmax >= 1.0).all()


def _layer_inputs(n, seed, H=2, D=8, dv=4):
    """Unit keys and steps in (0.1, 1) for two heads, as float32 numbers, layout (1, H, n, .)."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 1, H, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v, beta = rng.standard_normal((1, H, n, dv)), rng.uniform(0.1, 1.0, (1, H, n))
    return tp.f32(q, k, v, beta) + (rng,)


def test_fla_naive_delta_rule_recurrence_and_chunkwise():
    fla = tp.fla_naive("delta_rule/naive.py")
    q, k, v, beta, _ = _layer_inputs(48, 3)
    scale = q.shape[-1] ** -0.5
    args, kw = (q, k, v, beta), {"scale": scale}
    ref, S = delta_recurrent(*args, return_state=True, **kw)
    tol, state_tol = tp.tolerances("delta", args, kw)
    o, Sr = fla.delta_rule_recurrence(*(tp.tensor(x) for x in args))
    tp.within(tp.array(o), ref, tol, "fla delta_rule_recurrence output")
    tp.within(tp.array(Sr), S.S, state_tol, "fla delta_rule_recurrence final state")
    torch = __import__("torch")
    o, Sc = fla.delta_rule_chunkwise(*(torch.tensor(x) for x in args), chunk_size=16)
    assert o.dtype == torch.float64  # the chunkwise reference keeps the inputs' precision
    tol64 = delta_error_bound(*args, **kw)
    tp.within(o.numpy(), ref, tol64, "fla delta_rule_chunkwise output (float64)")


def test_fla_naive_recurrence_gradients_within_the_float32_model():
    fla = tp.fla_naive("delta_rule/naive.py")
    q, k, v, beta, rng = _layer_inputs(24, 4)
    D, G = q.shape[-1], rng.standard_normal(v.shape)

    def layer(*ts):
        return fla.delta_rule_recurrence(*ts)[0]

    tp.grads_within("delta", layer, (q, k, v, beta), {"scale": D**-0.5}, G, "delta_rule_recurrence")
