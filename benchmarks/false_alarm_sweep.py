"""False alarms and power of ``verify.attention`` on real PyTorch and JAX layers.

Runs correct layers over many seeds, sizes and dtypes and counts the runs
that fail (false alarms: there must be none), then runs the late-position
relative-error bugs at n = 4096 and counts the runs that pass (misses).  The
figures in docs/verify-comparison.md come from this script::

    python3 benchmarks/false_alarm_sweep.py --framework torch --seeds 20
    python3 benchmarks/false_alarm_sweep.py --framework jax --seeds 20
    JAX_ENABLE_X64=1 python3 benchmarks/false_alarm_sweep.py --framework jax --dtypes float64
    python3 benchmarks/false_alarm_sweep.py --power --seeds 20
    python3 benchmarks/false_alarm_sweep.py --framework torch --sizes 4096 \
        --layers "sdpa causal" --error-model probabilistic

Each line printed is one (layer, dtype, n) cell: the number of failing runs
out of the seeds, and the time taken.  ``--json FILE`` also writes the cells.
It is a measurement, not a test (several minutes at the full grid); the test
suite runs the same layers on a few seeds in tests/verify/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from kernelcheck import verify


def elu1_np(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def torch_layers():
    import torch
    import torch.nn.functional as F
    from torch_layers import chunked_state as chunked_linear
    from torch_layers import elu1

    def sdpa(causal):
        return lambda Q, K, V: F.scaled_dot_product_attention(Q, K, V, is_causal=causal)

    def cumsum_linear(Q, K, V):
        # a 16-bit layer keeps its running sums in float32 (the default accumulate=)
        acc = torch.float32 if Q.element_size() < 4 else Q.dtype
        fq, fk, V32 = elu1(Q).to(acc), elu1(K).to(acc), V.to(acc)
        S = torch.einsum("...nd,...ne->...nde", fk, V32).cumsum(dim=-3)
        num = torch.einsum("...nd,...nde->...ne", fq, S)
        return (num / (fq * fk.cumsum(dim=-2)).sum(dim=-1, keepdim=True)).to(Q.dtype)

    def mha(d):
        m = torch.nn.MultiheadAttention(d, 1, bias=False, batch_first=True)
        with torch.no_grad():
            m.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
            m.out_proj.weight.copy_(torch.eye(d))

        def fn(Q, K, V):
            with torch.no_grad():
                return m.to(Q.dtype)(Q, K, V, need_weights=False)[0]

        return fn

    return [
        ("sdpa", sdpa(False), {}),
        ("sdpa causal", sdpa(True), {"causal": True}),
        ("cumsum linear", cumsum_linear, {"causal": True, "feature_map": elu1_np}),
        ("chunked linear + state", chunked_linear,
         {"causal": True, "feature_map": elu1_np, "state": True}),
        ("MultiheadAttention (d = 8)", mha(8), {"d": 8, "batch_shape": (1,)}),
    ]  # fmt: skip


def jax_layers():
    import jax
    import jax.numpy as jnp

    def phi(x):
        return jnp.where(x > 0, x + 1.0, jnp.exp(jnp.minimum(x, 0.0)))

    @jax.jit
    def sdpa_causal(Q, K, V):  # layout (batch, n, heads, d)
        return jax.nn.dot_product_attention(Q, K, V, is_causal=True)

    @jax.jit
    def cumsum_linear(Q, K, V):
        # a 16-bit layer keeps its running sums in float32 (the default accumulate=)
        acc = jnp.float32 if Q.dtype.itemsize < 4 else Q.dtype
        fq, fk, V32 = phi(Q).astype(acc), phi(K).astype(acc), V.astype(acc)
        S = jnp.cumsum(fk[..., :, None] * V32[..., None, :], axis=-3)
        num = jnp.einsum("...nd,...nde->...ne", fq, S)
        return (num / (fq * jnp.cumsum(fk, -2)).sum(-1, keepdims=True)).astype(Q.dtype)

    @jax.jit
    def recurrent_linear(Q, K, V, initial_state=None):
        # a 16-bit layer carries its state in float32 (as flash-linear-attention does);
        # a 16-bit state would be an accumulation in 16 bits, beyond the default model
        acc = jnp.float32 if Q.dtype.itemsize < 4 else Q.dtype
        fq, fk = phi(Q), phi(K)
        if initial_state is None:
            initial_state = (jnp.zeros((fk.shape[-1], V.shape[-1]), acc),
                             jnp.zeros(fk.shape[-1], acc))  # fmt: skip
        initial_state = tuple(x.astype(acc) for x in initial_state)

        def step(carry, x):
            S, z = carry
            q, k, v = (y.astype(acc) for y in x)
            S, z = S + jnp.outer(k, v), z + k
            return (S, z), ((q @ S) / (q @ z)).astype(Q.dtype)

        state, out = jax.lax.scan(step, initial_state, (fq, fk, V))
        return out, state

    return [
        # XLA's CPU dot_general has no float16 product with float32 accumulation, and
        # jax.nn.dot_product_attention accumulates float64 inputs in float32: declared
        ("jax dot_product_attention causal", sdpa_causal,
         {"causal": True, "d": 8, "layout": "bnhd", "batch_shape": (1, 2),
          "only_dtypes": ("float64", "float32", "bfloat16"),
          "per_dtype": {"float64": {"accumulate": "float32"}}}),
        ("jax cumsum linear", cumsum_linear, {"causal": True, "feature_map": elu1_np}),
        ("jax scan recurrence + state", recurrent_linear,
         {"causal": True, "feature_map": elu1_np, "state": True}),
    ]  # fmt: skip


def sweep(
    framework,
    layers,
    dtypes,
    sizes,
    seeds,
    out,
    error_model="worst-case",
    progress=False,
    save=None,
):
    for name, fn, kw in layers:
        only, per_dtype = kw.get("only_dtypes", dtypes), kw.get("per_dtype", {})
        base = {k: v for k, v in kw.items() if k not in ("only_dtypes", "per_dtype")}
        for dt in (d for d in dtypes if d in only):
            kw = {**base, **per_dtype.get(dt, {})}
            for n in sizes:
                t0 = time.perf_counter()
                fails, example = 0, None
                for s in seeds:
                    t1 = time.perf_counter()
                    report = verify.attention(
                        fn, framework=framework, dtype=dt, n=max(n, 2), seed=s,
                        cases=None if n > 1 else ("n=1",), error_model=error_model, **kw,
                    )  # fmt: skip
                    if not report.passed:
                        fails, example = fails + 1, report
                    if progress:  # one line per seed: a run stopped early still counts
                        verdict = "pass" if report.passed else "FAIL"
                        print(f"    {name} {dt} n={n} seed {s}: {verdict} "
                              f"({time.perf_counter() - t1:.1f} s)", flush=True)  # fmt: skip
                took = round(time.perf_counter() - t0, 1)
                cell = dict(layer=name, framework=framework, dtype=dt, n=n, seeds=len(seeds),
                            false_alarms=fails, seconds=took, error_model=error_model)  # fmt: skip
                out.append(cell)
                print(f"{name:34s} {dt:9s} n={n:5d}: {fails} false alarms in {len(seeds)} seeds "
                      f"({cell['seconds']} s)", flush=True)  # fmt: skip
                if example is not None:
                    print("    " + example.details().replace("\n", "\n    ")[:3000], flush=True)
                if save is not None:
                    save(out)


def power(seeds, out, n=4096):
    """Late-position relative errors (1e-4 in float32, 3e-2 in bfloat16) at n = 4096."""
    import torch
    import torch.nn.functional as F

    def layer(rel):
        def fn(Q, K, V):
            o = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
            s = torch.ones(o.shape[-2], 1, dtype=o.dtype)
            s[o.shape[-2] // 2 :] = 1 + rel
            return o * s

        return fn

    for dt, rel in (("float32", 1e-4), ("bfloat16", 3e-2)):
        for model in ("worst-case", "probabilistic"):
            for bug in (0.0, rel):
                t0 = time.perf_counter()
                passed = sum(
                    verify.attention(layer(bug), framework="torch", dtype=dt, causal=True, n=n,
                                     seed=s, cases=("positive values",), check_causality=False,
                                     error_model=model).passed
                    for s in seeds
                )  # fmt: skip
                what = "correct" if bug == 0 else f"relative error {bug:g} from n/2"
                cell = dict(layer=what, dtype=dt, n=n, error_model=model, seeds=len(seeds),
                            passed=passed, seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
                out.append(cell)
                print(f"{what:34s} {dt:9s} {model:13s} n={n}: passed {passed} of {len(seeds)} "
                      f"({cell['seconds']} s)", flush=True)  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=("torch", "jax"), default="torch")
    p.add_argument("--dtypes", default=None, help="comma-separated (default: all CPU dtypes)")
    p.add_argument("--sizes", default="1,7,64,1024,4096")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--layers", default=None, help="comma-separated: run only layers named so")
    p.add_argument("--error-model", default="worst-case", choices=("worst-case", "probabilistic"))
    p.add_argument("--progress", action="store_true", help="print a line per seed")
    p.add_argument("--power", action="store_true", help="run the n = 4096 bug detection instead")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    seeds = range(a.seeds)
    out: list[dict] = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if a.power:
        power(seeds, out)
    else:
        default = {"torch": "float64,float32,float16,bfloat16", "jax": "float32,float16,bfloat16"}
        dtypes = (a.dtypes or default[a.framework]).split(",")
        layers = torch_layers() if a.framework == "torch" else jax_layers()
        if a.layers:
            wanted = a.layers.split(",")
            layers = [x for x in layers if x[0] in wanted]
        sizes = [int(x) for x in a.sizes.split(",")]
        save = (lambda cells: _save(a.json, cells)) if a.json else None
        sweep(a.framework, layers, dtypes, sizes, seeds, out, a.error_model, a.progress, save)
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
