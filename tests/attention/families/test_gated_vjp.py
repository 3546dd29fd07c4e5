"""The gated family's reference backward pass (claim C20): gated_vjp, its bound, GatedSpec's.

* the gradients by the reverse recurrence equal central differences of the
  forward forms (features, values, ``d log g``; normalised or not; with a
  handed-over state);
* a float32 backward pass (flash-linear-attention's ``naive_recurrent_simple_gla``
  differentiated by PyTorch) lies within the float32 bound plus the float64
  reference's own, every gradient, while the same gradients with a 1e-3
  relative error planted are outside it;
* the bound is the documented formula: above ``rho_i`` times the magnitudes
  where the decays' error dominates, within twice the formula;
* ``verify.attention(grad=True)`` with ``decay=`` now judges ``dV`` (before,
  it skipped every gradient): a backward pass that doubles ``dV`` fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as A
from kernelcheck._src.attention.common.bounds import gated_decay_error
from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.families.gated.vjp import gated_vjp_with_bounds
from kernelcheck._src.attention.registry import get_family
from kernelcheck._src.core.rounding import gamma
from tests.attention.families.differences import central
from tests.fla_naive import load

RNG = np.random.default_rng(2020)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_gated_vjp_equals_central_differences(normalize, with_state):
    n, D, dv = 7, 3, 2
    q, k = RNG.uniform(0.2, 1.0, (2, n, D))
    V, G = RNG.normal(size=(2, n, dv))
    g = RNG.uniform(0.3, 1.0, n)
    S0 = None
    if with_state:
        S0 = A.State(RNG.uniform(0, 1, (D, dv)), RNG.uniform(0, 1, D) if normalize else None)

    def loss(qq, kk, VV, gg):
        return (A.gated_recurrent(qq, kk, VV, gg, normalize=normalize, initial_state=S0) * G).sum()

    got = A.gated_vjp(q, k, V, g, G, normalize=normalize, initial_state=S0)
    assert np.allclose(got.dphi_q, central(lambda X: loss(X, k, V, g), q), atol=1e-7)
    assert np.allclose(got.dphi_k, central(lambda X: loss(q, X, V, g), k), atol=1e-7)
    assert np.allclose(got.dV, central(lambda X: loss(q, k, X, g), V), atol=1e-7)
    dlog = central(lambda X: loss(q, k, V, np.exp(X)), np.log(g))
    assert np.allclose(got.dlog_gates, dlog, atol=1e-7)


def _fla_grads(q, k, V, logg, G, plant=0.0):
    """fla's naive_recurrent_simple_gla (float32 inside) differentiated by torch, (B, H, T, .)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    fla = load("simple_gla")
    ts = [torch.tensor(np.swapaxes(x, 1, 2), requires_grad=True) for x in (q, k, V)]
    tg = torch.tensor(np.swapaxes(logg, 1, 2), requires_grad=True)
    out, _ = fla.naive_recurrent_simple_gla(*ts, tg, scale=1.0)
    out.backward(torch.tensor(np.swapaxes(G, 1, 2)).to(out.dtype))
    grads = [np.swapaxes(t.grad.double().numpy(), 1, 2) for t in (*ts, tg)]
    return [x * (1.0 + plant) for x in grads]


def test_a_float32_backward_lies_within_the_bound_and_a_planted_error_does_not():
    """fla's reference differentiated in float32 (inputs float32-exact): every gradient within
    the float32 bound plus the float64 reference's; 1e-3 more, each falls outside."""
    B, H, n, D, dv = 1, 2, 24, 4, 3
    f32 = np.float32
    q, k = RNG.uniform(-1, 1, (2, B, H, n, D)).astype(f32).astype(float)
    V = RNG.normal(size=(B, H, n, dv)).astype(f32).astype(float)
    logg = np.log(RNG.uniform(0.7, 1.0, (B, H, n))).astype(f32).astype(float)
    G = RNG.normal(size=(B, H, n, dv)).astype(f32).astype(float)
    ref, (b32, b64) = gated_vjp_with_bounds(
        q, k, V, np.exp(logg), G, models=(("float32", 0), (None, 0))
    )
    names = ("dphi_q", "dphi_k", "dV", "dlog_gates")
    for plant, inside in ((0.0, True), (1e-3, False)):
        got = _fla_grads(q, k, V, logg, G, plant)
        for name, x in zip(names, got, strict=True):
            r, tol = getattr(ref, name), getattr(b32, name) + getattr(b64, name)
            assert bool((np.abs(x - r) <= tol).all()) is inside, (name, plant)


def test_the_bound_is_its_formula_where_the_decays_error_dominates():
    """Strong decays (|L| large): every bound at least rho times the magnitude, at most twice
    the formula (a dropped decay term, or one ten times too large, fails)."""
    n, D, dv = 6, 2, 2
    q, k = RNG.uniform(0.5, 1.0, (2, n, D))
    V = RNG.uniform(0.5, 1.0, (n, dv))
    G = RNG.uniform(0.5, 1.0, (n, dv))
    g = np.full(n, 1e-120)  # |L_i| = 276 (i + 1): rho >> gamma_k
    b = A.gated_vjp_error_bound(q, k, V, g, G)
    ref = A.gated_vjp(q, k, V, g, G)  # all inputs positive: |dV| is its own magnitude
    L = -np.cumsum(np.log(g))[:, None]
    rho = float(gated_decay_error(L, n, np.dtype(np.float64)).max())
    kb = 3 * n + D + dv + 10
    formula = ((1 + gamma(kb)) * (1 + rho) - 1) * np.abs(ref.dV)
    assert rho > 100 * gamma(kb)
    assert (b.dV >= rho * np.abs(ref.dV)).all()
    assert (b.dV <= 2 * formula + 1e-300).all()


def _spec(feature_map):
    return get_family("gated").spec(
        SpecOptions(causal=True, normalize=False, phi_q=feature_map, phi_k=feature_map)
    )


def test_the_gated_spec_gives_the_feature_gradients_and_dg():
    """dQ, dK with respect to the features (verify carries them through the map's Jacobian),
    dV, and the gates' d log g at index 3 (the family's first per-token input)."""
    n, d, dv = 9, 3, 2
    Q, K = RNG.normal(size=(2, n, d))
    V, G = RNG.normal(size=(2, n, dv))
    extras = {"gates": RNG.uniform(0.5, 1.0, n)}
    square = _spec(lambda X: X**2)
    assert square.gradients == ("dQ", "dK", "dV") and square.feature_gradients
    args, kw = square.arguments(Q, K, V, extras)
    entries = {e[0]: e for e in square.vjp(args, kw, Q, K, V, G, np.dtype("float32"))}
    assert [entries[x][1] for x in ("dQ", "dK", "dV", "dg")] == [0, 1, 2, 3]
    ref = A.gated_vjp(Q**2, K**2, V, extras["gates"], G)
    assert np.array_equal(entries["dQ"][2], ref.dphi_q)
    assert np.array_equal(entries["dg"][2], ref.dlog_gates) and (entries["dg"][3] > 0).all()


class _DoubleGrad:
    """An identity whose backward pass doubles the gradient (a bug in a custom backward)."""

    @staticmethod
    def apply(x):
        torch = pytest.importorskip("torch")

        class Double(torch.autograd.Function):
            @staticmethod
            def forward(ctx, y):
                return y.view_as(y)

            @staticmethod
            def backward(ctx, grad):
                return 2 * grad

        return Double.apply(x)


@pytest.mark.parametrize("bug", [None, "dV", "dg"])
def test_verify_attention_judges_the_gated_gradients_and_catches_a_doubled_one(bug):
    """grad=True with decay=: dQ, dK (through the map), dV and dg are judged against gated_vjp
    (every gradient was skipped before); a backward pass doubling dV, or the gates' gradient,
    fails on that gradient alone."""
    pytest.importorskip("torch")
    from kernelcheck import verify

    fla = load("simple_gla")

    def layer(q, k, v, g):
        if bug == "dV":
            v = _DoubleGrad.apply(v)
        if bug == "dg":
            g = _DoubleGrad.apply(g)
        return fla.naive_recurrent_simple_gla(q, k, v, g, scale=1.0)

    report = verify.attention(
        layer, framework="torch", dtype="float32", causal=True, layout="bnhd",
        batch_shape=(1, 2), feature_map=lambda X: X, normalize=False, log_gates=True,
        grad=True, decay=lambda rng, shape: rng.uniform(0.8, 1.0, size=shape), cases=("random",),
    )  # fmt: skip
    judged = {c.name.split(" (")[0]: c.passed for c in report.checks if c.name.startswith("grad")}
    assert set(judged) >= {"gradient dQ", "gradient dK", "gradient dV", "gradient dg"}
    if bug is None:
        assert report.passed, report.details()
    else:
        assert not report.passed
        assert [name for name, ok in judged.items() if not ok] == [f"gradient {bug}"]
