"""transformers' pure-PyTorch delta-rule paths against the reference (claims C22, C23).

Qwen3-Next's ``torch_chunk_gated_delta_rule`` and ``torch_recurrent_gated_delta_rule``
(Gated DeltaNet) and Kimi-Linear's ``chunk_kimi_delta_attention`` and
``recurrent_kimi_delta_attention`` (Kimi Delta Attention) dispatch to
flash-linear-attention whenever it imports; ``__wrapped__`` reaches their
torch path deliberately.  Each runs in float32 with its in-layer L2
normalisation on and the query scale ``K^-1/2`` it always applies, from a
handed-over state, n = 70 (not a multiple of the chunk of 64): outputs and
final states within the float32 tolerances of the family's model, and so are
their autograd gradients for every input (the gates' with respect to their
logarithms, the layers' convention).
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck.attention import State
from tests.attention.families.thirdparty import (
    f32,
    grads_within,
    run_layer,
    tensor,
    transformers_model,
)

LAYERS = [
    ("qwen3_next", "torch_chunk_gated_delta_rule", "gated_delta"),
    ("qwen3_next", "torch_recurrent_gated_delta_rule", "gated_delta"),
    ("kimi_linear", "chunk_kimi_delta_attention", "kda"),
    ("kimi_linear", "recurrent_kimi_delta_attention", "kda"),
]


@pytest.mark.parametrize("model, function, family", LAYERS, ids=[x[1] for x in LAYERS])
def test_the_torch_path_is_within_the_float32_model(model, function, family):
    fn = getattr(transformers_model(model), function).__wrapped__
    rng = np.random.default_rng(7)
    H, n, D, dv = 2, 70, 8, 4
    q, k = rng.standard_normal((2, 1, H, n, D))
    v = rng.standard_normal((1, H, n, dv))
    gates = rng.uniform(0.8, 1.0, (1, H, n) + ((D,) if family == "kda" else ()))
    beta, S0 = rng.uniform(0.1, 1.0, (1, H, n)), rng.standard_normal((1, H, D, dv))
    q, k, v, gates, beta, S0 = f32(q, k, v, gates, beta, S0)
    kw = {"qk_l2norm": True, "scale": D**-0.5}
    args = (q, k, v, gates, beta)
    run_layer(fn, family, args, kw, S0, use_qk_l2norm_in_kernel=True)
    S0t = tensor(S0)

    def layer(q, k, v, lg, b):
        swapped = [x.transpose(1, 2) for x in (q, k, v, lg)] + [b.transpose(1, 2)]
        o, _ = fn(*swapped, initial_state=S0t, output_final_state=False,
                  use_qk_l2norm_in_kernel=True)  # fmt: skip
        return o.transpose(1, 2)

    G = rng.standard_normal(v.shape)
    grads_within(family, layer, args, {**kw, "initial_state": State(S0), "log_gates": True},
                 G, function)  # fmt: skip


_OPTIONS = {
    "gated_delta": {"decay": lambda rng, s: rng.uniform(0.5, 1.0, s)},
    "kda": {"key_decay": lambda rng, s: rng.uniform(0.5, 1.0, s)},
}


@pytest.mark.parametrize("model, function, family", LAYERS, ids=[x[1] for x in LAYERS])
def test_verify_attention_passes_the_gates_gradient_of_every_path_from_no_state(
    model, function, family
):
    """From no initial state the first gate's exact gradient is 0; a chunked path forms it as a
    reverse cumulative sum of the cumulative log gates' gradients, which cancels only to
    rounding (about 1e-7 in float32).  The gates' tolerance covers that form of the sum, and
    a gradient of the gates lost to the graph (detached) is still refuted."""
    import torch

    fn = getattr(transformers_model(model), function).__wrapped__

    def layer(q, k, v, g, b, detach=False):
        g = g.detach() if detach else g
        return fn(q, k, v, g, b, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=True)[0]  # fmt: skip

    kw = dict(framework="torch", dtype="float32", causal=True, layout="bnhd",
              batch_shape=(1, 2), d=8, beta=lambda rng, s: rng.uniform(0.1, 1.0, s),
              qk_l2norm=True, scale=lambda d: d**-0.5, log_gates=True, grad=True,
              cases=("random", "positive values"), **_OPTIONS[family])  # fmt: skip
    from kernelcheck import verify

    report = verify.attention(layer, **kw)
    assert report.passed, report.details()
    assert any(c.name == "gradient dgates (random)" and c.passed for c in report.checks)
    lost = verify.attention(lambda *a: layer(*a, detach=True), **kw)
    failed = {c.name for c in lost.checks if c.passed is False}
    assert "gradient dgates (random)" in failed and torch.is_grad_enabled()
