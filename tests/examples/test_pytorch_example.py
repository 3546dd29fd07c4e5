"""The PyTorch example of the docs (docs/examples/pytorch.md), run as written.

The page's Python blocks are executed in order; their own asserts require
both verifiers to pass.  Then broken versions of the two components (the
mistakes the verifiers exist to catch) must fail: a layer whose running sums
are shifted by one token, a layer without its normaliser, and Performer
features missing the ``-||x||^2 / 2`` term.  Skipped where torch is not
installed.
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
    assert len(blocks) == 2
    namespace: dict = {"__name__": "pytorch_example"}
    exec(compile("\n".join(blocks), str(PAGE), "exec"), namespace)  # the docs' own code
    return namespace


def test_the_example_passes_as_written(example):
    assert example["layer_report"].passed
    assert example["performer_report"].passed
    assert example["performer_report"].counts.get("fail", 0) == 0


def _layer_fn(example, forward):
    layer = example["layer"]

    def run(Q, K, V):
        with torch.no_grad():
            return forward(layer, torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V))

    return run


def test_a_layer_with_shifted_sums_is_caught(example):
    def shifted(layer, q, k, v):
        fq, fk = layer.phi(q), layer.phi(k)
        S = torch.einsum("...nd,...ne->...nde", fk, v).cumsum(dim=-3)
        z = fk.cumsum(dim=-2)
        S = torch.cat([S[..., :1, :, :], S[..., :-1, :, :]], dim=-3)  # token t sees t-1
        z = torch.cat([z[..., :1, :], z[..., :-1, :]], dim=-2)
        num = torch.einsum("...nd,...nde->...ne", fq, S)
        return num / (fq * z).sum(dim=-1, keepdim=True)

    report = verify.attention(
        _layer_fn(example, shifted), feature_map=example["elu_plus_one"], causal=True, seed=0
    )
    assert not report.passed


def test_a_layer_without_normaliser_is_caught(example):
    def unnormalised(layer, q, k, v):
        fq, fk = layer.phi(q), layer.phi(k)
        S = torch.einsum("...nd,...ne->...nde", fk, v).cumsum(dim=-3)
        return torch.einsum("...nd,...nde->...ne", fq, S)

    report = verify.attention(
        _layer_fn(example, unnormalised), feature_map=example["elu_plus_one"], causal=True, seed=0
    )
    assert not report.passed


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
    """The verifiers read CPU tensors like arrays: the same layer report from tensors."""
    phi = example["elu_plus_one"]
    Q = torch.from_numpy(np.random.default_rng(3).normal(size=(5, 2)))
    from kernelcheck import attention

    a = attention.parallel(phi(Q.numpy()), phi(Q.numpy()), Q, causal=True)
    b = example["run_layer"](Q.numpy(), Q.numpy(), Q.numpy()).numpy()
    tol = attention.linear_error_bound(phi(Q.numpy()), phi(Q.numpy()), Q.numpy(), causal=True)
    assert (np.abs(a - b) <= 2 * tol).all()
