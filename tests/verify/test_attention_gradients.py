"""Every gradient ``verify.attention(grad=True)`` is asked for is judged, or the report says not.

dQ and dK of a layer on feature maps go through the map's Jacobian, taken
from torch or jax when the map is written in their operations, or by the
complex step when it is a NumPy formula that carries complex numbers; a map
neither can differentiate leaves dQ and dK "not checked", and the report
then neither passes nor says PASS.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.verify.attention.jacobian import feature_jacobians

torch = pytest.importorskip("torch")


def elu1(X):
    """elu + 1 in NumPy operations that carry complex numbers (the complex step applies)."""
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def elu1_cast(X):
    """The same map, but cast to float64 first: the complex step cannot see through it."""
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def elu1_torch(X):
    return torch.where(X > 0, X + 1.0, torch.exp(torch.clamp(X, max=0.0)))


def linear_layer(dk_factor: float = 1.0):
    """Causal normalised linear attention with elu + 1; ``dk_factor`` scales dK."""

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, k):
            return k.clone()

        @staticmethod
        def backward(ctx, g):
            return dk_factor * g

    def layer(Q, K, V):
        pq, pk = elu1_torch(Q), elu1_torch(Scaled.apply(K))
        w = torch.tril(pq @ pk.transpose(-1, -2))
        return (w @ V) / w.sum(-1, keepdim=True)

    return layer


@pytest.mark.parametrize("feature_map", [elu1, elu1_torch], ids=["numpy", "torch"])
def test_dq_and_dk_are_judged_through_the_feature_map(feature_map):
    kw = dict(framework="torch", dtype="float32", causal=True, grad=True,
              cases=("random", "positive values"))  # fmt: skip
    report = verify.attention(linear_layer(), feature_map=feature_map, **kw)
    assert report.passed, report.details()
    names = {c.name.split(" (")[0] for c in report.checks if c.passed}
    assert {"gradient dQ", "gradient dK", "gradient dV"} <= names
    bad = verify.attention(linear_layer(2.0), feature_map=feature_map, **kw)
    assert not bad.passed and "gradient dK (random)" in {c.name for c in bad.failures()}


def test_a_feature_map_no_one_can_differentiate_leaves_dq_dk_not_checked():
    report = verify.attention(linear_layer(2.0), framework="torch", dtype="float32", causal=True,
                              grad=True, feature_map=elu1_cast, cases=("random",))  # fmt: skip
    assert report.passed is False and report.outcome is Outcome.INCONCLUSIVE
    assert not report.failures()
    assert "not checked: gradient dQ, dK (random)" in str(report)
    assert not str(report).startswith("PASS")


def test_the_complex_step_refuses_a_map_that_is_not_analytic():
    X = np.random.default_rng(0).standard_normal((6, 3))
    assert feature_jacobians(lambda x: np.abs(x) + 1.0, X) is None
    J = feature_jacobians(elu1, X)
    expected = np.where(X > 0, 1.0, np.exp(np.minimum(X, 0.0)))
    assert np.allclose(np.diagonal(J, axis1=-2, axis2=-1), expected, rtol=4e-16, atol=0)
    assert np.count_nonzero(J - np.diagonal(J, axis1=-2, axis2=-1)[..., None] * np.eye(3)) == 0


def test_the_gradient_check_leaves_the_users_module_as_it_was():
    """Gradients are taken with respect to the inputs only: no ``.grad`` lands on parameters."""

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(1.0))

        def forward(self, Q, K, V):
            w = torch.softmax(self.scale * Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5, dim=-1)
            return w @ V

    module = Layer()
    report = verify.attention(module, framework="torch", grad=True, cases=("random",))
    assert report.passed, report.details()
    assert module.scale.grad is None and module.training
