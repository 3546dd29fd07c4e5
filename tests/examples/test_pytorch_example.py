"""The PyTorch example of the docs (docs/examples/pytorch.md), run as written.

The page's Python blocks are executed in order; their own asserts require
every verifier to pass.  Then broken versions of the components (the
mistakes the verifiers exist to catch) must fail: a layer whose running sums
are shifted by one token, a layer without its normaliser, a backward pass
that scales ``dV``, a chunked layer that hands on a state missing the last
token, and Performer features missing the ``-||x||^2 / 2`` term.  Skipped
where torch is not installed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernelcheck import verify  # noqa: E402
from kernelcheck.kernels import Exponential  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pytorch.md"


@pytest.fixture(scope="module")
def example():
    text = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    namespace: dict = {"__name__": "pytorch_example"}
    exec(compile("\n".join(blocks), str(PAGE), "exec"), namespace)  # the docs' own code
    return namespace


def test_the_example_passes_as_written(example):
    for report in example["reports"].values():
        assert report.passed
        assert any(c.name.startswith("gradient") and c.passed for c in report.checks)
    assert {"final state", "state hand-over"} <= {
        c.name.split(" (")[0] for c in example["state_report"].checks if c.passed
    }
    assert example["performer_report"].passed
    assert example["performer_report"].counts.get("fail", 0) == 0


def _module(forward):
    class Broken(torch.nn.Module):
        phi = staticmethod(
            lambda x: torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))
        )

        def forward(self, q, k, v):
            return forward(self, q, k, v)

    return Broken()


def _report(example, layer, **kw):
    kw = dict(framework="torch", dtype="float32", causal=True, seed=0) | kw
    return verify.attention(layer, feature_map=example["elu_plus_one"], **kw)


def test_a_layer_with_shifted_sums_is_caught(example):
    def shifted(layer, q, k, v):
        fq, fk = layer.phi(q), layer.phi(k)
        S = torch.einsum("...nd,...ne->...nde", fk, v).cumsum(dim=-3)
        z = fk.cumsum(dim=-2)
        S = torch.cat([S[..., :1, :, :], S[..., :-1, :, :]], dim=-3)  # token t sees t-1
        z = torch.cat([z[..., :1, :], z[..., :-1, :]], dim=-2)
        num = torch.einsum("...nd,...nde->...ne", fq, S)
        return num / (fq * z).sum(dim=-1, keepdim=True)

    assert not _report(example, _module(shifted)).passed
    assert not _report(example, _module(shifted), dtype="bfloat16").passed


def test_a_layer_without_normaliser_is_caught(example):
    def unnormalised(layer, q, k, v):
        fq, fk = layer.phi(q), layer.phi(k)
        S = torch.einsum("...nd,...ne->...nde", fk, v).cumsum(dim=-3)
        return torch.einsum("...nd,...nde->...ne", fq, S)

    assert not _report(example, _module(unnormalised)).passed


def test_a_backward_pass_that_scales_dv_is_caught(example):
    layer = example["layer"]

    class ScalesDv(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return layer(q, k, v)

        @staticmethod
        def backward(ctx, G):
            with torch.enable_grad():
                q, k, v = (x.detach().requires_grad_() for x in ctx.saved_tensors)
                dq, dk, dv = torch.autograd.grad(layer(q, k, v), (q, k, v), G)
            return dq, dk, 1.001 * dv

    report = _report(example, ScalesDv.apply, grad=True, cases=("random",))
    assert report.cases[0].passed  # the forward is right ...
    assert any(c.name.startswith("gradient dV") for c in report.failures())  # ... dV is not


def test_a_state_missing_the_last_token_is_caught(example):
    chunked = example["chunked_layer"]

    def forgets_last(Q, K, V, initial_state=None):
        out, (S, z) = chunked(Q, K, V, initial_state)
        fk = example["layer"].phi(K[..., -1, :])
        return out, (S - fk[..., :, None] * V[..., -1, None, :], z - fk)

    report = _report(example, forgets_last, state=True, cases=("random",))
    assert report.cases[0].passed
    assert {"final state", "state hand-over"} <= {c.name.split(" (")[0] for c in report.failures()}


def test_performer_features_without_the_norm_term_are_caught(example):
    def draw_broken(rng, dim=3, num_features=16):
        g = torch.Generator().manual_seed(int(rng.integers(2**62)))
        W = torch.randn(num_features, dim, generator=g, dtype=torch.float64)
        return lambda X: torch.exp(torch.from_numpy(X) @ W.T) / num_features**0.5

    X = example["X"]
    report = verify.unbiased(draw_broken, Exponential(), X, trials=6000, seed=0)
    assert not report.passed
    assert report.counts.get("fail", 0) > 0


def test_torch_tensors_are_accepted_as_inputs(example):
    """kernelcheck's forms read CPU tensors like arrays: the layer's output from a tensor V."""
    from kernelcheck import attention

    phi = example["elu_plus_one"]
    Q = torch.from_numpy(np.random.default_rng(3).normal(size=(5, 2)))
    a = attention.parallel(phi(Q.numpy()), phi(Q.numpy()), Q, causal=True)
    with torch.no_grad():
        b = example["layer"](Q, Q, Q).numpy()
    tol = attention.linear_error_bound(phi(Q.numpy()), phi(Q.numpy()), Q.numpy(), causal=True)
    assert (np.abs(a - b) <= 2 * tol).all()
