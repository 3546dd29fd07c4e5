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
the failing cases and checks, and the first line of the report.  A (layer,
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


def dplr_a(rng, shape):
    """RWKV-7's read factor ``-kappa`` (a unit vector)."""
    return -_unit(rng, shape)


def dplr_b(rng, shape):
    """RWKV-7's write factor ``kappa o c``, ``c`` in (0, 1) (drawn apart from the read's)."""
    return _unit(rng, shape) * rng.uniform(0.0, 1.0, shape)


def layers():
    """(name, function and package, layer, options, {dtype: extra options or a skip reason})."""
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
        return kda.naive_chunk_kda(
            l2(q), l2(k), v, g, beta, scale=q.shape[-1] ** -0.5, initial_state=initial_state,
            output_final_state=True, chunk_size=16,
        )  # fmt: skip

    def dplr_layer(q, k, v, a, b, gk, initial_state=None):  # RWKV-7's recurrence, (B, H, T, K)
        return dplr.dplr_recurrence(q, k, v, a, b, gk, initial_state=initial_state,
                                    output_final_state=True)  # fmt: skip

    base = {"framework": "torch", "causal": True, "batch_shape": (2, H), "d": D}
    delta_kw = {**base, "beta": _beta, "qk_l2norm": True, "scale": lambda d: d**-0.5}
    gdn_kw = {**delta_kw, "layout": "bnhd", "decay": _gates, "log_gates": True}
    kda_kw = {**delta_kw, "layout": "bnhd", "key_decay": _gates, "log_gates": True}
    sg = {"state": True, "grad": True}
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
          "feature_map": lambda X: np.ones(X.shape[:-1] + (1,)), "feature_ops": 0}, casts),
        ("fla simple GLA chunked", f"naive_chunk_simple_gla, {fla_v}", sgla_chunk_layer,
         {**base, **sg, "layout": "bnhd", "decay": _gates, "log_gates": True,
          "feature_map": lambda X: X, "normalize": False}, casts),
        ("fla Gated DeltaNet chunked", f"naive_chunk_gated_delta_rule, {fla_v}",
         gdn_chunk_layer, {**gdn_kw, **sg}, casts),
        ("fla KDA chunked", f"naive_chunk_kda, {fla_v}", kda_chunk_layer, {**kda_kw, **sg}, casts),
        ("fla RWKV-7 (DPLR)", f"dplr_recurrence, {fla_v}", dplr_layer,
         {**base, **sg, "dplr_a": dplr_a, "dplr_b": dplr_b, "key_decay": _gates,
          "log_gates": True, "scale": lambda d: d**-0.5}, casts),
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
                    "state": bool(kw.get("state")), "grad": bool(kw.get("grad"))}  # fmt: skip
            if isinstance(extra, str):
                out.append({**cell, "skipped": extra})
                print(f"{name:24s} {dt:9s}: skipped ({extra})", flush=True)
                continue
            call = {**kw, **extra, "dtype": dt}
            if n is not None and "n" not in kw:
                call["n"] = n
            t0, fails = time.perf_counter(), []
            for s in seeds:
                try:
                    report = verify.attention(fn, seed=s, **call)
                except Exception as e:  # an error is not a pass: counted and shown
                    fails.append({"seed": s, "failed": ["raised"],
                                  "first_line": f"{type(e).__name__}: {e}"[:300]})  # fmt: skip
                    continue
                if not report.passed:
                    fails.append(_failure(s, report))
            cell.update(n=call.get("n", 16), false_alarms=len(fails), failures=fails,
                        seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
            out.append(cell)
            print(f"{name:24s} {dt:9s}: {len(fails)} false alarms in {len(seeds)} seeds "
                  f"({cell['seconds']} s)", flush=True)  # fmt: skip
            for f in fails:
                print(f"    seed {f['seed']}: {f['first_line']} [{', '.join(f['failed'])}]",
                      flush=True)  # fmt: skip
            if save is not None:
                save(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--dtypes", default="float64,float32,bfloat16", help="comma-separated")
    p.add_argument("--layers", default=None, help="comma-separated: run only layers named so")
    p.add_argument("--n", type=int, default=None, help="random case length (default: verify's)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    chosen = layers()
    if a.layers:
        wanted = a.layers.split(",")
        chosen = [x for x in chosen if x[0] in wanted]
    out: list[dict] = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    save = (lambda cells: _save(a.json, cells)) if a.json else None
    sweep(chosen, a.dtypes.split(","), range(a.seeds), a.n, out, save)
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
