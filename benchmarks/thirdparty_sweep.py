"""False alarms of ``verify.attention`` on third-party recurrent layers, over many seeds.

Runs flash-linear-attention's pure-PyTorch references (fla-core, loaded by
path: its package imports Triton) and transformers' torch paths of
Qwen3-Next and Kimi-Linear (``__wrapped__``, past the decorator that would
dispatch to fla) through ``verify.attention`` with the options the test suite
gives them (tests/attention/families/), one run per (layer, dtype, seed):
the default cases, plus ``state=True`` and ``grad=True`` where the layer
hands back its state and is differentiable.  Every layer is correct, so a run
that does not pass is a false alarm.  The figures in docs/verify-comparison.md
come from::

    python3 benchmarks/thirdparty_sweep.py --seeds 20 --json sweep.json

Each line printed is one (layer, dtype) cell: the failing runs out of the
seeds and the time taken; each failure is listed with its seed, the names of
the failing cases and checks, and the first line of the report; then each case
or check that was neither passed nor failed (no tolerance there, or its case
not judged), with the number of runs and the reason (a key dimension the layer
fixes, ``d=1``, is not listed).  A (layer,
dtype) pair the layer does not support is printed as skipped, with the
reason, and never counted as passed.  It is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from kernelcheck import verify

H, D = 2, 8


def fla_naive(relative: str):
    """The module ``fla/ops/<relative>`` of the installed fla-core, loaded by its path."""
    found = importlib.util.find_spec("fla")
    path = Path(next(iter(found.submodule_search_locations)), "ops", relative)
    spec = importlib.util.spec_from_file_location("fla_" + relative.replace("/", "_")[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gates(rng, shape):
    return rng.uniform(0.5, 1.0, size=shape)


def _beta(rng, shape):
    return rng.uniform(0.1, 1.0, size=shape)


def _unit(rng, shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class Rwkv7Factors:
    """RWKV-7's factors as two samplers: ``a = -kappa`` (unit), then ``b = kappa o c``.

    ``verify.attention`` draws ``dplr_a`` then ``dplr_b`` for each case; the
    second reads the ``kappa`` the first drew, so the transition
    ``Diag(w) - (kappa o c) kappa^T`` contracts as RWKV-7's does (factors
    drawn apart expand, and leave no bound in 16 bits).
    """

    def __init__(self):
        self.kappa = None

    def a(self, rng, shape):
        self.kappa = _unit(rng, shape)
        return -self.kappa

    def b(self, rng, shape):
        kappa = self.kappa if self.kappa is not None and self.kappa.shape == shape else None
        kappa = _unit(rng, shape) if kappa is None else kappa
        return kappa * rng.uniform(0.0, 1.0, shape)


def layers(triton_whole_call=False):
    """(name, function and package, layer, options, {dtype: extra options or a skip reason}).

    ``triton_whole_call``: the interpreted Triton rows run the whole default
    call, not their three cases (see :func:`triton_layers`).
    """
    import fla
    import torch
    import transformers

    fla_v, tf_v = f"fla-core {fla.__version__}", f"transformers {transformers.__version__}"

    def l2(x):  # the in-layer L2 normalisation fla's layers apply before these references
        return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)

    casts = {"float64": {"accumulate": "float32"}}  # computes in float32 whatever its input
    gla = fla_naive("gla/naive.py")
    rwkv6 = fla_naive("rwkv6/recurrent_naive.py")
    sgla = fla_naive("simple_gla/naive.py")
    delta = fla_naive("delta_rule/naive.py")
    gdn = fla_naive("gated_delta_rule/naive.py")
    kda = fla_naive("kda/naive.py")
    U = np.random.default_rng(21).normal(size=(H, D)).astype(np.float32).astype(np.float64)

    def gla_layer(q, k, v, gk, initial_state=None):
        return gla.naive_recurrent_gla(q, k, v, gk, initial_state=initial_state,
                                       output_final_state=True)  # fmt: skip

    def rwkv6_layer(q, k, v, w, initial_state=None):
        u = torch.tensor(U).to(q.dtype)
        return rwkv6.naive_recurrent_rwkv6(
            q, k, v, w, u, scale=1.0, initial_state=initial_state, output_final_state=True
        )

    def sgla_layer(q, k, v, g, initial_state=None):
        return sgla.naive_recurrent_simple_gla(q, k, v, g, scale=1.0, initial_state=initial_state,
                                               output_final_state=True)  # fmt: skip

    def delta_layer(q, k, v, beta, initial_state=None):  # layout (B, H, T, D)
        return delta.delta_rule_recurrence(l2(q), l2(k), v, beta, initial_state=initial_state,
                                           output_final_state=True)  # fmt: skip

    def delta_chunk_layer(q, k, v, beta):  # n a multiple of its chunk of 4; no state in or out
        return delta.delta_rule_chunkwise(l2(q), l2(k), v, beta, chunk_size=4)[0]

    def gdn_layer(q, k, v, g, beta, initial_state=None):
        return gdn.naive_recurrent_gated_delta_rule(
            l2(q), l2(k), v, beta, g, scale=q.shape[-1] ** -0.5, initial_state=initial_state,
            output_final_state=True,
        )  # fmt: skip

    def kda_layer(q, k, v, g, beta, initial_state=None):
        return kda.naive_recurrent_kda(
            l2(q), l2(k), v, g, beta, scale=q.shape[-1] ** -0.5, initial_state=initial_state,
            output_final_state=True,
        )  # fmt: skip

    def hf(model, function):
        fn = getattr(importlib.import_module(f"transformers.models.{model}.modeling_{model}"),
                     function).__wrapped__  # fmt: skip

        def layer(q, k, v, g, beta, initial_state=None):
            return fn(q, k, v, g, beta, initial_state=initial_state, output_final_state=True,
                      use_qk_l2norm_in_kernel=True)  # fmt: skip

        return layer

    hgrn = fla_naive("hgrn/naive.py")
    dplr = fla_naive("generalized_delta_rule/dplr/naive.py")

    def hgrn_layer(q, k, v, gv, initial_state=None):
        """HGRN, ``h_t = exp(g_t) h_(t-1) + x_t``: value-gated, one key channel, phi = 1.

        q and k are not read (their features are 1); the heads fold into fla's batch axis.
        """
        lead, (n, dv) = v.shape[:-2], v.shape[-2:]
        h0 = None if initial_state is None else initial_state.reshape(-1, dv)
        o, h = hgrn.naive_recurrent_hgrn(v.reshape(-1, n, dv), gv.reshape(-1, n, dv),
                                         initial_state=h0, output_final_state=True)  # fmt: skip
        return o.reshape(*lead, n, dv), h.reshape(*lead, 1, dv)

    def sgla_chunk_layer(q, k, v, g, initial_state=None):
        return sgla.naive_chunk_simple_gla(q, k, v, g, initial_state=initial_state,
                                           output_final_state=True, chunk_size=16,
                                           scale=1.0)  # fmt: skip

    def gdn_chunk_layer(q, k, v, g, beta, initial_state=None):
        return gdn.naive_chunk_gated_delta_rule(
            l2(q), l2(k), v, g, beta, chunk_size=16, scale=q.shape[-1] ** -0.5,
            initial_state=initial_state, output_final_state=True,
        )  # fmt: skip

    def kda_chunk_layer(q, k, v, g, beta, initial_state=None):
        """naive_chunk_kda asserts T a multiple of its chunk: the largest divisor of T up to 16."""
        n = q.shape[1]
        chunk = max(c for c in range(1, 17) if n % c == 0)
        return kda.naive_chunk_kda(
            l2(q), l2(k), v, g, beta, scale=q.shape[-1] ** -0.5, initial_state=initial_state,
            output_final_state=True, chunk_size=chunk,
        )  # fmt: skip

    def dplr_layer(q, k, v, a, b, gk, initial_state=None):  # RWKV-7's recurrence, (B, H, T, K)
        return dplr.dplr_recurrence(q, k, v, a, b, gk, initial_state=initial_state,
                                    output_final_state=True)  # fmt: skip

    base = {"framework": "torch", "causal": True, "batch_shape": (2, H), "d": D}
    delta_kw = {**base, "beta": _beta, "qk_l2norm": True, "scale": lambda d: d**-0.5}
    gdn_kw = {**delta_kw, "layout": "bnhd", "decay": _gates, "log_gates": True}
    kda_kw = {**delta_kw, "layout": "bnhd", "key_decay": _gates, "log_gates": True}
    sg = {"state": True, "grad": True}
    rwkv7 = Rwkv7Factors()
    no16 = "raises in bfloat16 (its float32 identity, torch.eye(dtype=torch.float), meets bfloat16)"
    return [
        ("fla GLA", f"naive_recurrent_gla, {fla_v}", gla_layer,
         {**base, **sg, "layout": "bnhd", "key_decay": _gates, "log_gates": True,
          "feature_map": (lambda X: X * X.shape[-1] ** -0.5, lambda X: X)}, casts),
        ("fla RWKV-6", f"naive_recurrent_rwkv6, {fla_v}", rwkv6_layer,
         {**base, **sg, "key_decay": _gates, "value_decay": np.ones(D), "bonus": U,
          "log_gates": True}, casts),
        ("fla simple GLA", f"naive_recurrent_simple_gla, {fla_v}", sgla_layer,
         {**base, **sg, "layout": "bnhd", "decay": _gates, "log_gates": True,
          "feature_map": lambda X: X, "normalize": False}, casts),
        ("fla DeltaNet", f"delta_rule_recurrence, {fla_v}", delta_layer,
         {**delta_kw, **sg}, casts),
        ("fla DeltaNet chunkwise", f"delta_rule_chunkwise, {fla_v}", delta_chunk_layer,
         {**delta_kw, "grad": True, "n": 16,
          "cases": ("random", "repeated tokens", "positive values")},
         {"bfloat16": no16}),
        ("fla Gated DeltaNet", f"naive_recurrent_gated_delta_rule, {fla_v}", gdn_layer,
         {**gdn_kw, **sg}, casts),
        ("fla KDA", f"naive_recurrent_kda, {fla_v}", kda_layer, {**kda_kw, **sg}, casts),
        ("Qwen3-Next recurrent", f"torch_recurrent_gated_delta_rule, {tf_v}",
         hf("qwen3_next", "torch_recurrent_gated_delta_rule"), {**gdn_kw, **sg}, casts),
        ("Qwen3-Next chunked", f"torch_chunk_gated_delta_rule, {tf_v}",
         hf("qwen3_next", "torch_chunk_gated_delta_rule"), {**gdn_kw, **sg}, casts),
        ("Kimi-Linear recurrent", f"recurrent_kimi_delta_attention, {tf_v}",
         hf("kimi_linear", "recurrent_kimi_delta_attention"), {**kda_kw, **sg}, casts),
        ("Kimi-Linear chunked", f"chunk_kimi_delta_attention, {tf_v}",
         hf("kimi_linear", "chunk_kimi_delta_attention"), {**kda_kw, **sg}, casts),
        ("fla HGRN", f"naive_recurrent_hgrn, {fla_v}", hgrn_layer,
         {**base, **sg, "value_decay": _gates, "log_gates": True, "normalize": False,
          "feature_map": lambda X: X[..., :1] * 0 + 1, "feature_ops": 0}, casts),
        ("fla simple GLA chunked", f"naive_chunk_simple_gla, {fla_v}", sgla_chunk_layer,
         {**base, **sg, "layout": "bnhd", "decay": _gates, "log_gates": True,
          "feature_map": lambda X: X, "normalize": False}, casts),
        ("fla Gated DeltaNet chunked", f"naive_chunk_gated_delta_rule, {fla_v}",
         gdn_chunk_layer, {**gdn_kw, **sg}, casts),
        ("fla KDA chunked", f"naive_chunk_kda, {fla_v}", kda_chunk_layer, {**kda_kw, **sg}, casts),
        # token by token, its intermediates in float32 and its output rounded once: said so
        ("fla RWKV-7 (DPLR)", f"dplr_recurrence, {fla_v}", dplr_layer,
         {**base, **sg, "dplr_a": rwkv7.a, "dplr_b": rwkv7.b, "key_decay": _gates,
          "log_gates": True, "scale": lambda d: d**-0.5, "layer_chunk": 1, "storage_ops": 1},
         {"float64": "raises in float64 (its alpha is not cast to float32 with the other "
                     "inputs: RuntimeError: expected scalar type Float but found Double)"}),
    ] + transformers_gated_layers(base, sg) + triton_layers(
        base, sg, casts, triton_whole_call
    )  # fmt: skip


def transformers_gated_layers(base, sg):
    """Mamba-2's chunked scan and MiniMax's lightning attention (transformers' torch paths), C20."""
    import torch
    import transformers
    from transformers import MiniMaxConfig
    from transformers.models.mamba2 import modeling_mamba2 as m2
    from transformers.models.minimax.modeling_minimax import (
        MiniMaxCache,
        MiniMaxLightningAttention,
    )

    tf_v = f"transformers {transformers.__version__}"
    scan = m2.mamba2_chunk_scan.__wrapped__  # past the decorator that would load mamba-ssm

    def mamba2_layer(q, k, v, lg, initial_state=None):
        """Queries C, keys B, values ``dt x``, gates ``exp(dt A)`` with ``A = -1``, ``dt = -log g``.

        Mamba-2 scales its values by ``dt`` itself, so the values handed to it
        are ``v / dt``, formed in float32 (the scan's own precision): two
        roundings more per term, counted by ``feature_ops=1``.  Its state is
        value-major, (batch, heads, head_dim, state_size).  A gate of exactly 1
        (``dt = 0``, which Mamba-2's softplus never gives, and which gates
        near 1 round to in 16 bits) is handed as ``dt = 2^-60``: its ``exp``
        rounds to 1 and scaling by a power of two is exact.
        """
        dt = torch.clamp((-lg).float(), min=2.0**-60)
        x = v.float() / dt[..., None]
        A = -torch.ones(q.shape[2], dtype=torch.float32)
        S0 = None if initial_state is None else initial_state.float()
        return scan(x, dt, A, k, q, chunk_size=16, initial_states=S0, return_final_states=True)

    def mamba2_head_gates_layer(q, k, v, initial_state=None):
        """``dt = 1``, ``A`` the log of each head's gate: the values handed as they are.

        The gates are one per head (the declared ``decay``), so every gradient
        of q, k and v runs through the scan alone, with no adapter between.
        """
        dt = torch.ones(q.shape[:3], dtype=torch.float32)
        S0 = None if initial_state is None else initial_state.float()
        return scan(v.float(), dt, torch.tensor(head_logs, dtype=torch.float32), k, q,
                    chunk_size=16, initial_states=S0, return_final_states=True)  # fmt: skip

    step = m2.mamba2_selective_state_update.__wrapped__

    def mamba2_steps_layer(q, k, v, lg, initial_state=None):
        """Mamba-2's decoding step, token after token, from the handed state (value-major).

        The step writes the new state into the tensor it is given (a copy of
        the handed one here); ``dt`` and the values as for the chunked scan.
        """
        b, n, h, _ = q.shape
        dt = torch.clamp((-lg).float(), min=2.0**-60)
        x = v.float() / dt[..., None]
        As = -torch.ones(h, v.shape[-1], q.shape[-1], dtype=torch.float32)
        state = torch.zeros(b, h, v.shape[-1], q.shape[-1], dtype=torch.float32)
        if initial_state is not None:
            state = initial_state.float().clone()
        out = []
        for t in range(n):
            dtt = dt[:, t, :, None].expand(-1, -1, v.shape[-1])
            out.append(step(state, x[:, t], dtt, As, k[:, t].float(), q[:, t].float()))
        return torch.stack(out, dim=1), state

    # exact in bfloat16, so the gates verify rounds to the input precision are the layer's own
    head_gates = np.array([0.75, 0.90625])
    head_logs = np.log(head_gates)

    config = MiniMaxConfig(
        hidden_size=16, num_attention_heads=H, head_dim=D, num_key_value_heads=H,
        num_hidden_layers=2, block_size=16, intermediate_size=16, num_local_experts=2,
        num_experts_per_tok=1, vocab_size=8, layer_types=["linear_attention", "full_attention"],
    )  # fmt: skip
    torch.manual_seed(0)
    block = MiniMaxLightningAttention(config, layer_idx=0)
    # verify.attention rounds a declared decay to the input precision, as a layer holding it
    # in that precision would; the block holds its slopes in float32.  So its slopes are set
    # to -log of decays exact in bfloat16 (its own rates rounded there), and its decay
    # factors rebuilt from them as its __init__ builds them: in every dtype the declared
    # decays are the block's own (to float32's rounding of exp(-slope))
    exact = torch.exp(-block.slope_rate.double()).to(torch.bfloat16).double()
    slope = (-torch.log(exact)).float()
    block.slope_rate.copy_(slope)
    for name, value in zip(("query_decay", "key_decay", "diagonal_decay"),
                           block.decay_factors(slope), strict=True):  # fmt: skip
        getattr(block, name).copy_(value)
    decays = exact.numpy().reshape(H)

    def minimax_layer(q, k, v, initial_state=None):
        """The block as it runs, fed ``q, k, v`` in place of its projections (layout (B, H, T, d)).

        A forward hook replaces the output of its ``act_fn`` (the projected
        q, k, v) by the inputs (in the block's float32), a pre-hook on its
        RMS norm takes the attention's output; with a state handed in, the
        block runs token by token from its cache, as in generation.
        """
        b, _, n, _ = q.shape
        # per token and head [q | k | v], as the block splits its projection
        qkv = torch.cat([x.float().transpose(1, 2) for x in (q, k, v)], dim=-1)
        qkv = qkv.reshape(b, n, 3 * H * D)
        seen = {}
        hooks = [
            block.act_fn.register_forward_hook(lambda m, i, o: qkv),
            block.norm.register_forward_pre_hook(lambda m, a: seen.setdefault("y", a[0])),
        ]
        cache = None
        if initial_state is not None:
            cache = MiniMaxCache()
            cache.set_linear_cache(0, initial_state.float())
        try:
            _, S = block(torch.zeros(b, n, 16), None, None, past_key_values=cache)
        finally:
            for h in hooks:
                h.remove()
        return seen["y"].reshape(b, n, H, D).transpose(1, 2), S

    mamba = {**base, "state": True, "layout": "bnhd", "decay": _gates, "log_gates": True,
             "feature_map": lambda X: X, "feature_ops": 1, "normalize": False,
             "state_layout": "value-major"}  # fmt: skip
    mamba_heads = {**base, **sg, "layout": "bnhd", "decay": head_gates,
                   "feature_map": lambda X: X, "normalize": False,
                   "state_layout": "value-major"}  # fmt: skip
    minimax = {**base, **sg, "decay": decays, "feature_map": lambda X: X,
               "normalize": False}  # fmt: skip
    return [
        ("Mamba-2 chunked scan", f"mamba2_chunk_scan (torch path), {tf_v}", mamba2_layer, mamba,
         {"float64": {"accumulate": "float32"}}),
        ("Mamba-2 scan with head gates",
         f"mamba2_chunk_scan (torch path, dt = 1), {tf_v}", mamba2_head_gates_layer, mamba_heads,
         {"float64": {"accumulate": "float32"}}),
        ("Mamba-2 decoding steps", f"mamba2_selective_state_update (torch path), {tf_v}",
         mamba2_steps_layer, mamba, {"float64": {"accumulate": "float32"}}),
        ("MiniMax lightning", f"MiniMaxLightningAttention (block-wise; cached: by token), {tf_v}",
         minimax_layer, minimax, {"float64": {"accumulate": "float32"}}),
    ]  # fmt: skip


def triton_layers(base, sg, casts, whole_call=False):
    """fla's Triton kernels under ``TRITON_INTERPRET=1`` (set before this process started).

    The kernels' autotuner would time its configurations on a GPU driver the
    interpreter lacks: it keeps the first one (the path Triton takes for a
    single configuration; the interpreter ignores ``num_warps``).  Without
    the interpreter each row is skipped with the command that runs it.
    """
    names = ("Triton GLA", "Triton GLA value-major", "Triton simple GLA",
             "Triton Gated DeltaNet")  # fmt: skip
    if os.environ.get("TRITON_INTERPRET") != "1":
        why = "needs TRITON_INTERPRET=1 in the environment (Triton's interpreter, on a CPU)"
        return [(n, "", None, {}, {dt: why for dt in ("float64", "float32", "bfloat16")})
                for n in names]  # fmt: skip
    import fla
    import triton
    from triton.runtime.autotuner import Autotuner

    prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: prune(self, kwargs)[:1]
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    from fla.ops.gla import fused_recurrent_gla
    from fla.ops.simple_gla import fused_recurrent_simple_gla

    v = f"fla-core {fla.__version__}, triton {triton.__version__} (interpreted)"

    def gla_layer(q, k, v, gk, initial_state=None):
        return fused_recurrent_gla(q, k, v, gk, scale=1.0, initial_state=initial_state,
                                   output_final_state=True)  # fmt: skip

    def gla_vfirst_layer(q, k, v, gk, initial_state=None):
        return fused_recurrent_gla(q, k, v, gk, scale=1.0, initial_state=initial_state,
                                   output_final_state=True, state_v_first=True)  # fmt: skip

    def sgla_layer(q, k, v, g, initial_state=None):
        return fused_recurrent_simple_gla(q, k, v, g, scale=1.0, initial_state=initial_state,
                                          output_final_state=True)  # fmt: skip

    def gdn_layer(q, k, v, g, beta, initial_state=None):  # by keyword: its 5th place is gk
        return fused_recurrent_gated_delta_rule(
            q, k, v, g=g, beta=beta, scale=q.shape[-1] ** -0.5, initial_state=initial_state,
            output_final_state=True, use_qk_l2norm_in_kernel=True,
        )  # fmt: skip

    # the interpreter runs a kernel's program instances in NumPy: the whole default call takes
    # minutes per run, three cases (random, 2 n + 5 tokens, and the systematic-error test's
    # positive values) about twelve seconds; ``--triton-cases all`` runs the whole call
    if not whole_call:
        base = {**base, "cases": ("random", "odd length", "positive values")}
    gla = {**base, **sg, "layout": "bnhd", "key_decay": _gates, "log_gates": True}
    sgla = {**base, **sg, "layout": "bnhd", "decay": _gates, "log_gates": True,
            "feature_map": lambda X: X, "normalize": False}  # fmt: skip
    gdn = {**base, "state": True, "layout": "bnhd", "beta": _beta, "qk_l2norm": True,
           "scale": lambda d: d**-0.5, "decay": _gates, "log_gates": True}  # fmt: skip
    return [
        ("Triton GLA", f"fused_recurrent_gla (gk), {v}", gla_layer, gla, casts),
        ("Triton GLA value-major", f"fused_recurrent_gla (gk, state_v_first), {v}",
         gla_vfirst_layer, {**gla, "state_layout": "value-major"}, casts),
        ("Triton simple GLA", f"fused_recurrent_simple_gla, {v}", sgla_layer, sgla, casts),
        ("Triton Gated DeltaNet", f"fused_recurrent_gated_delta_rule (no backward), {v}",
         gdn_layer, gdn, casts),
    ]  # fmt: skip


def _failure(seed, report) -> dict:
    """The seed, the names of the failing cases and checks, the report's first line."""
    names = [c.name for c in report.failures()]
    return {"seed": seed, "failed": names, "first_line": str(report).splitlines()[0]}


def sweep(chosen, dtypes, seeds, n, out, save=None):
    for name, function, fn, kw, per_dtype in chosen:
        for dt in dtypes:
            extra = per_dtype.get(dt, {})
            cell = {"layer": name, "function": function, "dtype": dt, "seeds": len(seeds),
                    "first_seed": seeds[0] if len(seeds) else None,
                    "state": bool(kw.get("state")), "grad": bool(kw.get("grad"))}  # fmt: skip
            if isinstance(extra, str):
                out.append({**cell, "skipped": extra})
                print(f"{name:24s} {dt:9s}: skipped ({extra})", flush=True)
                continue
            call = {**kw, **extra, "dtype": dt}
            if n is not None and "n" not in kw:
                call["n"] = n
            t0, fails, unjudged = time.perf_counter(), [], {}
            for s in seeds:
                try:
                    report = verify.attention(fn, seed=s, **call)
                except Exception as e:  # an error is not a pass: counted and shown
                    fails.append({"seed": s, "failed": ["raised"],
                                  "first_line": f"{type(e).__name__}: {e}"[:300]})  # fmt: skip
                    continue
                if not report.passed:
                    fails.append(_failure(s, report))
                for c in (*report.cases, *report.checks):  # neither passed nor failed
                    if c.passed is None and not c.note.startswith("the layer's key dimension"):
                        unjudged.setdefault(c.name, [0, c.note.split(";")[0][:160]])[0] += 1
            cell.update(n=call.get("n", 16), false_alarms=len(fails), failures=fails,
                        not_judged={k: {"runs": v[0], "why": v[1]} for k, v in unjudged.items()},
                        seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
            out.append(cell)
            print(f"{name:24s} {dt:9s}: {len(fails)} false alarms in {len(seeds)} seeds "
                  f"({cell['seconds']} s)", flush=True)  # fmt: skip
            for f in fails:
                print(f"    seed {f['seed']}: {f['first_line']} [{', '.join(f['failed'])}]",
                      flush=True)  # fmt: skip
            for name_, (runs, why) in unjudged.items():
                print(f"    not judged in {runs} runs: {name_} ({why})", flush=True)
            if save is not None:
                save(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed .. first-seed + seeds - 1 (to continue an earlier run)",
    )
    p.add_argument("--dtypes", default="float64,float32,bfloat16", help="comma-separated")
    p.add_argument("--layers", default=None, help="comma-separated: run only layers named so")
    p.add_argument("--n", type=int, default=None, help="random case length (default: verify's)")
    p.add_argument("--json", default=None)
    p.add_argument("--triton-cases", choices=("three", "all"), default="three",
                   help="the interpreted Triton rows' cases: random, odd length and positive "
                        "values (three), or the whole default call (all)")  # fmt: skip
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    chosen = layers(triton_whole_call=a.triton_cases == "all")
    if a.layers:
        wanted = a.layers.split(",")
        chosen = [x for x in chosen if x[0] in wanted]
    out: list[dict] = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    save = (lambda cells: _save(a.json, cells)) if a.json else None
    sweep(chosen, a.dtypes.split(","), range(a.first_seed, a.first_seed + a.seeds), a.n, out, save)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if a.json:
        _save(a.json, out)
    return 0


def _save(path, cells):
    """The cells so far (written after every cell, so a run stopped early keeps them)."""
    with open(path, "w") as f:
        json.dump(cells, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
