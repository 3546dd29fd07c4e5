"""transformers' MiniMax lightning attention as scalar-gated linear attention (claim C20).

``MiniMaxLightningAttention`` projects the hidden states to queries, keys and
values (``silu`` of one linear map), runs block-wise decayed linear attention
(within a block the weights ``q_i . k_j exp(-s (i - j))``, across blocks the
state ``K^T V`` decayed by ``exp(-s b)`` per block of ``b`` tokens), then an
RMS norm, an output gate and a projection.  The slope ``s`` is one per head
(its buffer ``slope_rate``, float32): the gate of every token is
``exp(-s)``, unnormalised.  Given a cache holding a state, the block runs
token by token instead: ``S_t = exp(-s) S_(t-1) + k_t v_t^T``, read after
the update.

The module is built from the smallest config (4 heads of 8, blocks of 8
tokens, 20 tokens: a partial last block) and called as it is; hooks only
read the queries, keys and values (the output of ``act_fn``) and the
attention's output (the input of ``norm``), so the reference is computed
from exactly what the block received.  Its state ``(B, H, d, d)`` is
key-major, returned with the output.  Judged in float32 against the gated
forms within the float32 bound plus the float64 reference's own, block-wise
from a zero state and token by token from a handed-over one; planted: the
intra-block decay dropped (the decay mask reduced to the causal mask), caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as A
from tests.attention.families.final_state import state_tolerance

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers import MiniMaxConfig  # noqa: E402
from transformers.models.minimax.modeling_minimax import (  # noqa: E402
    MiniMaxCache,
    MiniMaxLightningAttention,
)

H, DH, BLOCK, T = 4, 8, 8, 20


def _block():
    config = MiniMaxConfig(
        hidden_size=16, num_attention_heads=H, head_dim=DH, num_key_value_heads=H,
        num_hidden_layers=2, block_size=BLOCK, intermediate_size=16, num_local_experts=2,
        num_experts_per_tok=1, vocab_size=8, layer_types=["linear_attention", "full_attention"],
    )  # fmt: skip
    torch.manual_seed(0)
    return MiniMaxLightningAttention(config, layer_idx=0)


def _run(block, x, state=None):
    """The block on ``x`` (from ``state``): its q, k, v, attention output (B, H, T, .), state."""
    seen = {}
    hooks = [
        block.act_fn.register_forward_hook(lambda m, i, o: seen.setdefault("qkv", o)),
        block.norm.register_forward_pre_hook(lambda m, a: seen.setdefault("y", a[0])),
    ]
    cache = None
    if state is not None:
        cache = MiniMaxCache()
        cache.set_linear_cache(0, torch.tensor(state, dtype=torch.float32))
    try:
        with torch.no_grad():
            _, S = block(torch.tensor(x, dtype=torch.float32), None, None, past_key_values=cache)
    finally:
        for h in hooks:
            h.remove()
    qkv = seen["qkv"].double().numpy().reshape(1, T, H, 3 * DH)
    q, k, v = (np.swapaxes(qkv[..., i * DH : (i + 1) * DH], 1, 2) for i in range(3))
    y = np.swapaxes(seen["y"].double().numpy().reshape(1, T, H, DH), 1, 2)
    return q, k, v, y, S.double().numpy()


def _judge(block, q, k, v, S0=None):
    """The gated reference with gates ``exp(-s)`` per head, its bounds on outputs and state."""
    s = block.slope_rate.double().numpy().reshape(H, 1)  # the float32 slopes, exactly
    g = np.broadcast_to(np.exp(-s), (1, H, T))
    kw = {} if S0 is None else {"initial_state": A.State(S0)}
    ref, S = A.gated_chunked(q, k, v, g, chunk_size=BLOCK, return_state=True, **kw)
    bound = A.gated_error_bound
    tol = bound(q, k, v, g, dtype="float32", **kw) + bound(q, k, v, g, **kw)
    return ref, S.S, tol, state_tolerance(bound, q, k, v, g, dtype="float32", **kw)


def _within(got, ref, tol):
    return bool((np.abs(got - ref) <= tol).all())


def test_block_wise_lightning_attention_is_gated_attention_within_the_bound():
    block = _block()
    x = np.random.default_rng(11).standard_normal((1, T, 16))
    q, k, v, y, S = _run(block, x)
    ref, S_ref, tol, state_tol = _judge(block, q, k, v)
    assert _within(y, ref, tol), float((np.abs(y - ref) / tol).max())
    assert _within(S, S_ref, state_tol), float((np.abs(S - S_ref) / state_tol).max())


def test_token_by_token_from_a_cached_state_within_the_bound():
    block = _block()
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, T, 16))
    S0 = np.asarray(rng.standard_normal((1, H, DH, DH)), dtype=np.float32).astype(np.float64)
    q, k, v, y, S = _run(block, x, state=S0)
    ref, S_ref, tol, state_tol = _judge(block, q, k, v, S0)
    assert _within(y, ref, tol), float((np.abs(y - ref) / tol).max())
    assert _within(S, S_ref, state_tol), float((np.abs(S - S_ref) / state_tol).max())


def test_the_intra_block_decay_dropped_is_caught():
    block = _block()
    block.diagonal_decay = (block.diagonal_decay > 0).to(torch.float32)  # the causal mask alone
    x = np.random.default_rng(11).standard_normal((1, T, 16))
    q, k, v, y, S = _run(block, x)
    ref, _, tol, _ = _judge(block, q, k, v)
    assert not _within(y, ref, tol)
