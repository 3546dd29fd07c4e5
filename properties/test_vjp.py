"""The reference backward passes (C1, C10, C14, C19): exact derivatives, honest bounds.

* ``softmax_vjp`` and ``linear_vjp`` are the derivatives of their forms:
  each directional derivative ``<dX, E>`` agrees with a central finite
  difference of ``<G, form(X + h E)>`` computed in 50-digit arithmetic
  (mpmath; step ``h = 1e-20``, so the difference's own error, ``O(h^2)``
  relative, is far below float64's), within the float64 error bound of the
  VJP: ``sum |E| * bound``, plus 1e-25 absolute for the difference.
* The bounds hold for real float32 backward passes: PyTorch's autograd
  through ``scaled_dot_product_attention`` and through linear attention, in
  float32, on the float32-rounded inputs, is within the float32 bound plus
  the float64 one of the float64 reference.
* ``*_vjp_with_bounds`` (one pass for several precisions, as the verifier
  uses it) equals the separate calls up to float64 rounding of the bound
  (relative ``1e-13``).

Every example is drawn by Hypothesis under the ``kernelcheck-*`` profiles;
a bound that is too small for some input fails here with that input.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.attention.common.vjp import float64_share
from kernelcheck._src.attention.families.linear.vjp import linear_vjp_with_bounds
from kernelcheck._src.attention.families.softmax.vjp import softmax_vjp_with_bounds
from kernelcheck._src.core.rounding import RoundingModel, precision

DPS = 50
H = mpmath.mpf("1e-20")


@st.composite
def softmax_inputs(draw, max_n=5, max_d=3):
    n = draw(st.integers(1, max_n))
    m = n if draw(st.booleans()) else draw(st.integers(1, max_n))
    causal = m == n and draw(st.booleans())
    d, dv = draw(st.integers(1, max_d)), draw(st.integers(1, 3))
    el = st.floats(-3, 3, allow_subnormal=False)
    Q = draw(hnp.arrays(np.float64, (n, d), elements=el))
    K = draw(hnp.arrays(np.float64, (m, d), elements=el))
    V = draw(hnp.arrays(np.float64, (m, dv), elements=el))
    G = draw(hnp.arrays(np.float64, (n, dv), elements=el))
    return Q, K, V, G, causal


@st.composite
def linear_inputs(draw, max_n=5, max_D=3):
    n = draw(st.integers(1, max_n))
    D, dv = draw(st.integers(1, max_D)), draw(st.integers(1, 3))
    pos = st.floats(0.05, 2.0)  # positive features: every normaliser > 0
    el = st.floats(-3, 3, allow_subnormal=False)
    pq = draw(hnp.arrays(np.float64, (n, D), elements=pos))
    pk = draw(hnp.arrays(np.float64, (n, D), elements=pos))
    V = draw(hnp.arrays(np.float64, (n, dv), elements=el))
    G = draw(hnp.arrays(np.float64, (n, dv), elements=el))
    return pq, pk, V, G, draw(st.booleans()), draw(st.booleans())


def mp_matrix(X):
    return [[mpmath.mpf(float(x)) for x in row] for row in np.atleast_2d(X)]


def mp_softmax_objective(Q, K, V, G, causal, scale):
    total = mpmath.mpf(0)
    for i, q in enumerate(Q):
        js = range(i + 1) if causal else range(len(K))
        s = [scale * mpmath.fsum(a * b for a, b in zip(q, K[j], strict=True)) for j in js]
        top = max(s)
        w = [mpmath.exp(x - top) for x in s]
        z = mpmath.fsum(w)
        for c in range(len(V[0])):
            total += G[i][c] * mpmath.fsum(w[t] * V[j][c] for t, j in enumerate(js)) / z
    return total


def mp_linear_objective(pq, pk, V, G, causal, normalize):
    total = mpmath.mpf(0)
    for i, q in enumerate(pq):
        js = range(i + 1) if causal else range(len(pk))
        w = [mpmath.fsum(a * b for a, b in zip(q, pk[j], strict=True)) for j in js]
        den = mpmath.fsum(w) if normalize else mpmath.mpf(1)
        for c in range(len(V[0])):
            total += G[i][c] * mpmath.fsum(w[t] * V[j][c] for t, j in enumerate(js)) / den
    return total


def fd_check(objective, args, which, grad, bound, E):
    """``<grad, E>`` against the 50-digit central difference along ``E`` of argument ``which``."""
    with mpmath.workdps(DPS):
        mp = [mp_matrix(a) for a in args]
        Em = mp_matrix(E)

        def shifted(sign):
            X = [[x + sign * H * e for x, e in zip(r, re, strict=True)]
                 for r, re in zip(mp[which], Em, strict=True)]  # fmt: skip
            return objective(*[X if k == which else mp[k] for k in range(len(mp))])

        fd = (shifted(1) - shifted(-1)) / (2 * H)
        got = mpmath.fsum(mpmath.mpf(float(g)) * e for g, e in zip(grad.ravel(), E.ravel()))
        allowed = float(np.sum(np.abs(E) * bound)) + 1e-25
        assert abs(got - fd) <= allowed, (which, float(got), float(fd), allowed)


@given(softmax_inputs(), st.integers(0, 2**32 - 1))
def test_softmax_vjp_is_the_derivative(x, seed):
    Q, K, V, G, causal = x
    scale = 1.0 / np.sqrt(Q.shape[-1])
    vjp = att.softmax_vjp(Q, K, V, G, causal=causal)
    bound = att.softmax_vjp_error_bound(Q, K, V, G, causal=causal)
    rng = np.random.default_rng(seed)
    for which, (grad, b) in enumerate(zip(vjp, bound, strict=True)):
        E = rng.standard_normal(grad.shape)
        fd_check(lambda q, k, v: mp_softmax_objective(q, k, v, mp_matrix(G), causal,
                                                      mpmath.mpf(scale)),
                 (Q, K, V), which, grad, b, E)  # fmt: skip


@given(linear_inputs(), st.integers(0, 2**32 - 1))
def test_linear_vjp_is_the_derivative(x, seed):
    pq, pk, V, G, causal, normalize = x
    vjp = att.linear_vjp(pq, pk, V, G, causal=causal, normalize=normalize)
    bound = att.linear_vjp_error_bound(pq, pk, V, G, causal=causal, normalize=normalize)
    rng = np.random.default_rng(seed)
    for which, (grad, b) in enumerate(zip(vjp, bound, strict=True)):
        E = rng.standard_normal(grad.shape)
        fd_check(lambda a, k, v: mp_linear_objective(a, k, v, mp_matrix(G), causal, normalize),
                 (pq, pk, V), which, grad, b, E)  # fmt: skip


def _round32(*xs):
    return tuple(np.asarray(x, dtype=np.float32).astype(np.float64) for x in xs)


@given(softmax_inputs(max_n=24, max_d=8))
def test_a_float32_autograd_backward_is_within_the_softmax_bound(x):
    torch = pytest.importorskip("torch")
    Q, K, V, G = _round32(*x[:4])
    causal = x[4]
    ts = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in (Q, K, V)]
    out = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal)
    got = torch.autograd.grad(out, ts, torch.tensor(G, dtype=torch.float32))
    ref, (b32, b64) = softmax_vjp_with_bounds(Q, K, V, G, causal=causal,
                                              dtypes=("float32", None))  # fmt: skip
    for name, g, r, t32, t64 in zip("QKV", got, ref, b32, b64, strict=True):
        err = np.abs(g.double().numpy() - r)
        assert (err <= t32 + t64).all(), (name, float((err / (t32 + t64)).max()))


@given(linear_inputs(max_n=24, max_D=8))
def test_a_float32_autograd_backward_is_within_the_linear_bound(x):
    torch = pytest.importorskip("torch")
    pq, pk, V, G = _round32(*x[:4])
    causal, normalize = x[4], x[5]
    ts = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in (pq, pk, V)]
    W = ts[0] @ ts[1].T
    if causal:
        W = W.tril()
    out = W @ ts[2]
    if normalize:
        out = out / W.sum(-1, keepdim=True)
    got = torch.autograd.grad(out, ts, torch.tensor(G, dtype=torch.float32))
    ref, (b32, b64) = linear_vjp_with_bounds(pq, pk, V, G, causal=causal, normalize=normalize,
                                             models=(("float32", 0), (None, 0)))  # fmt: skip
    for name, g, r, t32, t64 in zip(("phi_q", "phi_k", "V"), got, ref, b32, b64, strict=True):
        err = np.abs(g.double().numpy() - r)
        assert (err <= t32 + t64).all(), (name, float((err / (t32 + t64)).max()))


@given(softmax_inputs(max_n=12, max_d=4), linear_inputs(max_n=12, max_D=4))
def test_the_shared_pass_equals_the_separate_calls(s, lin):
    Q, K, V, G, causal = s
    ref, bounds = softmax_vjp_with_bounds(Q, K, V, G, causal=causal, dtypes=("float32", None))
    sep = att.softmax_vjp(Q, K, V, G, causal=causal)
    assert all(np.allclose(a, b, rtol=1e-13, atol=0) for a, b in zip(ref, sep, strict=True))
    for dt, got in zip(("float32", None), bounds, strict=True):
        sep = att.softmax_vjp_error_bound(Q, K, V, G, causal=causal, dtype=dt)
        assert all(np.allclose(a, b, rtol=1e-13, atol=0) for a, b in zip(got, sep, strict=True))
    pq, pk, V, G, causal, norm = lin
    models = (("float32", 7), (None, 0))
    ref, bounds = linear_vjp_with_bounds(pq, pk, V, G, causal=causal, normalize=norm,
                                         models=models)  # fmt: skip
    sep = att.linear_vjp(pq, pk, V, G, causal=causal, normalize=norm)
    assert all(np.allclose(a, b, rtol=1e-13, atol=0) for a, b in zip(ref, sep, strict=True))
    for (dt, extra), got in zip(models, bounds, strict=True):
        one = att.linear_vjp_error_bound(pq, pk, V, G, causal=causal, normalize=norm, dtype=dt,
                                         extra_ops=extra)  # fmt: skip
        assert all(np.allclose(a, b, rtol=1e-13, atol=0) for a, b in zip(got, one, strict=True))


MODELS = (
    "float32",
    "float64",
    RoundingModel(precision("float32"), precision("bfloat16"), 3, None, None),
    RoundingModel(precision("float32"), precision("float32"), 0, 2.5, 1e-6),
)


@given(softmax_inputs(max_n=16, max_d=6), st.sampled_from(MODELS))
def test_one_bound_plus_float64_covers_the_two_bounds(x, model):
    """``(1 + c) B(dt) >= B(dt) + B(float64)`` entrywise: the verifier's one-bound shortcut."""
    Q, K, V, G, causal = x
    _, (b, b64) = softmax_vjp_with_bounds(Q, K, V, G, causal=causal, dtypes=(model, None))
    _, (both,) = softmax_vjp_with_bounds(Q, K, V, G, causal=causal, dtypes=(model,),
                                         plus_float64=True)  # fmt: skip
    for one, a, a64 in zip(both, b, b64, strict=True):
        assert (one >= a + a64).all(), float(((a + a64) / one).max())


def test_float64_share_refuses_a_model_finer_than_float64():
    with pytest.raises(ValueError, match="finer than float64"):
        float64_share(RoundingModel(precision("float64"), precision("float64"), 0, 0.01, 1e-9),
                      (10, 1000))  # fmt: skip
