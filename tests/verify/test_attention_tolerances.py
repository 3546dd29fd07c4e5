"""Tolerances of ``verify.attention`` that bound what a layer can do, not more (claims C10, C19).

* A declared stabiliser ``eps`` makes the reference the stabilised output
  ``num / (den + eps)`` and its gradient: a correct layer passes forward and
  backward; a layer off by a factor the old allowance ``|a| eps / den`` would
  have swallowed (where eps exceeds the normaliser) fails.
* The gradient's bound counts a weight's rounding as ``|phi_q| . |phi_k|``,
  not ``|phi_q . phi_k|``: with mixed-sign features a correct layer passes,
  and a dV off by 1% still fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify

torch = pytest.importorskip("torch")

EPS = 1e-6


def small_elu1(X):
    """Positive features of size about 1e-5: normalisers 100 to 1000 times below EPS."""
    return 1e-5 * np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def small_elu1_torch(X):
    return 1e-5 * torch.where(X > 0, X + 1.0, torch.exp(torch.clamp(X, max=0.0)))


def stabilised_layer(factor: float = 1.0):
    """Causal normalised linear attention with ``eps`` in the normaliser, scaled by ``factor``."""

    def layer(Q, K, V):
        pq, pk = small_elu1_torch(Q), small_elu1_torch(K)
        w = torch.tril(pq @ pk.transpose(-1, -2))
        return factor * (w @ V) / (w.sum(-1, keepdim=True) + EPS)

    return layer


def test_a_declared_stabiliser_is_the_reference_forward_and_backward():
    kw = dict(framework="torch", dtype="float64", feature_map=small_elu1, causal=True,
              stabilizer=EPS, grad=True)  # fmt: skip
    report = verify.attention(stabilised_layer(), **kw)
    assert report.passed, report.details()
    assert any(c.name.startswith("gradient dV") and c.passed for c in report.checks)


def test_a_layer_off_by_a_factor_where_eps_exceeds_the_normaliser_fails():
    """-20 times the stabilised output: inside ``|a| eps / den`` (eps / den ~ 1e2), not rounding."""
    # the cases whose normalisers are all far below eps (longer sequences or larger
    # features make some normalisers comparable to it)
    kw = dict(framework="torch", dtype="float64", feature_map=small_elu1, causal=True,
              stabilizer=EPS, cases=("random", "tiny norms", "positive values"))  # fmt: skip
    assert verify.attention(stabilised_layer(), **kw).passed
    report = verify.attention(stabilised_layer(-20.0), **kw)
    assert not report.passed and not any(c.passed for c in report.cases)


def identity(X):
    return X


def cumulative_layer(dv_factor: float = 1.0):
    """Unnormalised causal linear attention by prefix sums of k v^T (mixed-sign features).

    ``dv_factor`` scales dV in the backward pass (a custom autograd function).
    """

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.clone()

        @staticmethod
        def backward(ctx, g):
            return dv_factor * g

    def layer(Q, K, V):
        V = Scaled.apply(V)
        S = torch.cumsum(K[..., :, :, None] * V[..., :, None, :], dim=-3)
        return (Q[..., :, None, :] @ S)[..., 0, :]

    return layer


def _nearly_orthogonal(n=64, delta=1e-3, seed=0):
    """Queries near (1, 1), keys near (1, -1): every ``q . k`` is about ``delta``, ``|q| |k|`` 2.

    The weights cancel in their dot products, so a layer's rounding of them
    is about ``u |q| . |k|``, far above ``u |q . k|``.
    """
    rng = np.random.default_rng(seed)
    Q = 1.0 + delta * rng.standard_normal((n, 2))
    K = np.array([1.0, -1.0]) + delta * rng.standard_normal((n, 2))
    return Q, K, rng.standard_normal((n, 3))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mixed_sign_features_a_correct_layer_passes_its_gradient_check(dtype):
    kw = dict(framework="torch", dtype=dtype, feature_map=identity, normalize=False,
              causal=True, grad=True, inputs=_nearly_orthogonal())  # fmt: skip
    report = verify.attention(cumulative_layer(), **kw)
    assert report.passed, report.details()
    assert verify.attention(cumulative_layer(1.01), **kw).passed is False


def elu1_torch(X):
    return torch.where(X > 0, X + 1.0, torch.exp(torch.clamp(X, max=0.0)))


def gla_style_layer(late_factor: float = 1.0):
    """Gated linear attention in bfloat16 with float32 arithmetic: decays from log-gate sums.

    ``late_factor`` scales the outputs from ``n / 2`` on (a systematic error
    the storage format's roundings must not be allowed to hide).
    """

    def layer(Q, K, V, g):
        q, k, v, lg = (x.float() for x in (Q, K, V, torch.log(g.float())))
        pq, pk = elu1_torch(q), elu1_torch(k)
        L = torch.cumsum(lg, dim=-1)
        n = q.shape[-2]
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        decay = torch.exp(torch.where(keep, L[..., :, None] - L[..., None, :], -torch.inf))
        out = ((pq @ pk.transpose(-1, -2)) * decay) @ v
        out[..., n // 2 :, :] *= late_factor
        return out.to(torch.bfloat16)

    return layer


def elu1_np(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _gla_gates(rng, shape):
    return rng.uniform(0.8, 1.0, size=shape)


def test_gated_decays_are_bounded_in_the_accumulation_precision_not_the_storage_format():
    """bf16 storage, float32 accumulation, n = 256: a 20% error from n/2 on is caught.

    The log sums of the gates run in float32; multiplying them by bfloat16's
    storage roundings (the old model) allowed about 25% at |L| ~ 25.
    """
    kw = dict(framework="torch", dtype="bfloat16", feature_map=elu1_np, normalize=False,
              causal=True, decay=_gla_gates, n=256,
              cases=("random", "positive values"))  # fmt: skip
    assert verify.attention(gla_style_layer(), **kw).passed
    assert not verify.attention(gla_style_layer(1.2), **kw).passed
