"""What ``verify.attention`` costs beyond the layer it checks (n = 4096, d = d_v = 64).

Group ``verify-attention``, measured in the same run:

* ``floor``: the float64 GEMMs of the reference's forward and backward pass,
  alone: ``S = Q K^T``, ``P V``, ``P^T G``, ``G V^T``, ``dS K``, ``dS^T Q``
  (six ``n^2 d`` products; for the linear layer, the three of its causal
  quadratic form ``A = phi_q phi_k^T``, ``A V``, ``A^T G``).
* ``layer fwd+bwd``: the user's own torch layer, forward and backward, once.
* ``verify``: ``verify.attention`` on the ``random`` case with ``grad=True``
  (softmax, torch ``scaled_dot_product_attention``, float32) or
  ``state=True`` (a chunked linear layer with a state), or both (a Gated
  DeltaNet layer in torch, token by token, with in-layer L2 normalisation:
  forward, state hand-over and the gradients of q, k, v, the gates and beta),
  causality check off so that the layer is called a fixed number of times.
  The Gated DeltaNet floor is kernelcheck's float64 reference itself:
  ``gated_delta_chunked`` and ``gated_delta_vjp`` once each.

Every verify call is at ``d = d_v = 64``, the floor's size.  The verifier's
own overhead is ``verify - (layer's time)``: the time of the layer's calls is
measured inside the run (every call of ``fn`` is timed, and every
``torch.autograd.grad`` call, which only ever differentiates the layer's
graph, see :class:`Timed`) and subtracted;
``extra_info`` records both and the overhead.
Target (docs/performance.md): overhead at most 3x the floor.

Under ``--benchmark-disable`` (n = 256, one run) each benchmark checks that
the verifier passes the correct layer.

Reproduce: ``python3 -m pytest benchmarks/bench_verify_attention.py --benchmark-only``.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck import verify

torch = pytest.importorskip("torch")
F = torch.nn.functional

from torch_layers import chunked_state, elu1_np  # noqa: E402

D = 64


def _rounds(benchmark) -> dict:
    if benchmark.disabled:
        return {"rounds": 1, "iterations": 1}
    return {"rounds": 5, "iterations": 1, "warmup_rounds": 1}


class Timed:
    """``fn`` with the wall time of its calls summed in ``spent``, and of its backward passes.

    Inside :meth:`measuring`, ``torch.autograd.grad`` is timed whole and
    summed in ``backward``: ``verify.attention`` calls it once per gradient
    check, on the graph of the layer's call alone (its own reference is
    NumPy), so the whole call is the layer's backward pass, the engine's
    walk of the layer's graph included.  The graph's release when the call's
    output is dropped stays in the verifier's overhead.
    """

    def __init__(self, fn):
        self.fn, self.spent, self.calls, self.backward = fn, 0.0, 0, 0.0

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.spent += time.perf_counter() - t0
            self.calls += 1

    @contextlib.contextmanager
    def measuring(self):
        grad = torch.autograd.grad

        def timed_grad(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return grad(*args, **kwargs)
            finally:
                self.backward += time.perf_counter() - t0

        torch.autograd.grad = timed_grad
        try:
            yield self
        finally:
            torch.autograd.grad = grad


def sdpa(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True)


def _inputs(n):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((n, D)) for _ in range(4))


def softmax_floor(Q, K, V, G):
    S = Q @ K.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    out = P @ V
    dV, dP = P.T @ G, G @ V.T
    return out, dV, dP @ K, dP.T @ Q


def linear_floor(Q, K, V, G):
    A = np.tril(elu1_np(Q) @ elu1_np(K).T)
    return A @ V, A.T @ G


def _gates_beta(n):
    rng = np.random.default_rng(1)
    return rng.uniform(0.9, 1.0, n), rng.uniform(0.1, 1.0, n)


def gated_delta_floor(Q, K, V, G):
    """The float64 reference's forward and backward pass, once each."""
    g, beta = _gates_beta(Q.shape[0])
    kw = {"qk_l2norm": True, "scale": D**-0.5}
    return att.gated_delta_chunked(Q, K, V, g, beta, **kw), att.gated_delta_vjp(
        Q, K, V, g, beta, G, **kw
    )


def _l2(x):
    """In-layer L2 normalisation as the shipped layers and ``qk_l2norm=True`` define it."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def gated_delta(q, k, v, g, beta, initial_state=None):
    """Gated DeltaNet token by token: L2-normalised q and k, S_t = g_t (I - b k k^T) S + b k v^T."""
    q, k = _l2(q) * q.shape[-1] ** -0.5, _l2(k)
    S = q.new_zeros((q.shape[-1], v.shape[-1])) if initial_state is None else initial_state
    out = []
    for t in range(q.shape[-2]):
        S = S * g[t]
        S = S + beta[t] * k[t, :, None] * (v[t] - k[t] @ S)[None, :]
        out.append(q[t] @ S)
    return torch.stack(out), S


def layer_fwd_bwd(fn, n, extra=()):
    Q, K, V, G = (torch.from_numpy(x).float().requires_grad_() for x in _inputs(n))
    more = [torch.from_numpy(x).float().requires_grad_() for x in extra]
    out = fn(Q, K, V, *more)
    out = out[0] if isinstance(out, tuple) else out
    torch.autograd.grad(out, (Q, K, V, *more), G.detach())


def _uniform(low, high):
    return lambda rng, shape: rng.uniform(low, high, shape)


CASES = {
    "softmax grad": (sdpa, softmax_floor, {"grad": True}),
    "linear state": (
        chunked_state,
        linear_floor,
        {"feature_map": elu1_np, "state": True},
    ),  # fmt: skip
    "gated delta grad state": (
        gated_delta,
        gated_delta_floor,
        {
            "grad": True,
            "state": True,
            "decay": _uniform(0.9, 1.0),
            "beta": _uniform(0.1, 1.0),
            "qk_l2norm": True,
            "scale": lambda d: d**-0.5,
        },
    ),  # fmt: skip
}


@pytest.mark.benchmark(group="verify-attention")
@pytest.mark.parametrize("what", ["floor", "layer fwd+bwd", "verify"])
@pytest.mark.parametrize("name", list(CASES))
def test_verify_attention_overhead(benchmark, size_for, name, what):
    benchmark.group = f"verify-attention ({name})"  # each case next to its own floor
    n = size_for(4096, 256)
    fn, floor, kw = CASES[name]
    if what == "floor":
        benchmark.pedantic(floor, args=_inputs(n), **_rounds(benchmark))
        return
    if what == "layer fwd+bwd":
        extra = _gates_beta(n) if name.startswith("gated delta") else ()
        benchmark.pedantic(layer_fwd_bwd, args=(fn, n, extra), **_rounds(benchmark))
        return
    runs = []

    def run():
        timed = Timed(fn)
        t0 = time.perf_counter()
        with timed.measuring():
            report = verify.attention(timed, framework="torch", dtype="float32", causal=True,
                                      n=n, d=D, cases=("random",), check_causality=False,
                                      **kw)  # fmt: skip
        spent = timed.spent + timed.backward
        runs.append((time.perf_counter() - t0, spent, timed.calls, timed.backward, report))

    def overhead() -> dict:
        total, spent, calls, backward, report = min(runs, key=lambda r: r[0] - r[1])
        assert report.passed, report.details()
        return {"seconds_in_fn": spent, "of_which_backward": backward, "fn_calls": calls,
                "overhead_excluding_fn": total - spent}  # fmt: skip

    benchmark.pedantic(run, **_rounds(benchmark))
    benchmark.extra_info.update(overhead())
    if hasattr(benchmark, "derived"):  # benchmarks/report.py: recomputed after its rounds
        benchmark.derived(overhead)
