"""The JAX example of the docs (docs/examples/jax.md), run as written.

The page's Python blocks are executed in order; their own asserts require
both layers to pass, in float32 and bfloat16, forward and backward.  Then
broken versions must fail: a causal layer with the mask off, a custom
backward rule that forgets the causal mask in ``dV``, a recurrence that
updates the state after reading it (each token misses itself), and a layer
that hands on a state scaled by a wrong factor.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from kernelcheck import verify  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "jax.md"


@pytest.fixture(scope="module")
def example():
    text = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    namespace: dict = {"__name__": "jax_example"}
    exec(compile("\n".join(blocks), str(PAGE), "exec"), namespace)  # the docs' own code
    return namespace


def test_the_example_passes_as_written(example):
    for report in example["sdpa_reports"].values():
        assert report.passed
        assert {"gradient dQ (random)", "gradient dK (random)", "gradient dV (random)"} <= {
            c.name for c in report.checks if c.passed
        }
    report = example["linear_report"]
    assert report.passed
    assert any(c.name.startswith("gradient dV") and c.passed for c in report.checks)
    assert {"final state", "state hand-over"} <= {
        c.name.split(" (")[0] for c in example["state_report"].checks if c.passed
    }


def test_a_layer_without_its_mask_is_caught():
    @jax.jit
    def bidirectional(Q, K, V):
        return jax.nn.dot_product_attention(Q, K, V, is_causal=False)

    report = verify.attention(bidirectional, framework="jax", causal=True, d=8, layout="bnhd",
                              batch_shape=(1, 2), cases=("random",))  # fmt: skip
    assert not report.passed


def test_a_backward_rule_without_the_causal_mask_is_caught(example):
    phi, recurrence = example["phi"], example["recurrence"]

    @jax.custom_vjp
    def layer(Q, K, V):
        return recurrence(Q, K, V)

    def bwd(res, G):
        Q, K, V = res
        A = phi(Q) @ phi(K).T  # the mask is missing
        dQ, dK, _ = jax.vjp(recurrence, Q, K, V)[1](G)
        return dQ, dK, (A / A.sum(-1, keepdims=True)).T @ G

    layer.defvjp(lambda Q, K, V: (recurrence(Q, K, V), (Q, K, V)), bwd)
    report = verify.attention(layer, framework="jax", causal=True, feature_map=example["phi_np"],
                              grad=True, cases=("random",))  # fmt: skip
    assert report.cases[0].passed  # the forward is right ...
    assert any(c.name.startswith("gradient dV") for c in report.failures())  # ... dV is not


def test_a_state_updated_after_it_is_read_is_caught(example):
    phi = example["phi"]

    @jax.jit
    def late(Q, K, V):
        fq, fk = phi(Q), phi(K)

        def step(carry, x):
            S, z = carry
            q, k, v = x
            y = (q @ S) / (q @ z + (q @ k))  # reads S before adding token t's own term
            return (S + jnp.outer(k, v), z + k), y

        init = (jnp.zeros((fk.shape[-1], V.shape[-1])), jnp.zeros(fk.shape[-1]))
        return jax.lax.scan(step, init, (fq, fk, V))[1]

    report = verify.attention(late, framework="jax", causal=True, feature_map=example["phi_np"],
                              cases=("random",))  # fmt: skip
    assert not report.passed


def test_a_handed_over_state_scaled_wrongly_is_caught(example):
    stateful = example["stateful"]

    def halves_z(Q, K, V, initial_state=None):
        out, (S, z) = stateful(Q, K, V, initial_state)
        return out, (S, 0.5 * z)

    report = verify.attention(halves_z, framework="jax", causal=True, feature_map=example["phi_np"],
                              state=True, cases=("random",))  # fmt: skip
    assert report.cases[0].passed
    assert {"final state", "state hand-over"} <= {c.name.split(" (")[0] for c in report.failures()}
