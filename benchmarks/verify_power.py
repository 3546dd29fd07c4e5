"""The smallest relative error each checker catches, and its false alarms on correct layers.

Three checkers judge the same PyTorch layers of :mod:`zoo`:

* kernelcheck: ``verify.attention`` on its ``random`` and ``positive
  values`` cases (the default case with the most power against relative
  errors) with its default checks (worst-case bounds, systematic-error
  test, gradients with ``grad=True``); causality is left out (it cannot see
  a relative error);
* flash-linear-attention's ratio test (``fla.utils.assert_close``'s rule):
  pass when the largest absolute error is at most ``1e-6`` or
  ``RMS(got - ref) / RMS(ref) <= 0.005``, the ratio its tests use;
* ``torch.testing.assert_close(got, ref)`` at its default tolerances for the
  layer's dtype.

The peers judge the layer's output (or gradient along a random cotangent)
on one draw of the ``positive values`` law against the float64 reference
(kernelcheck's float64 forms and VJPs), cast to the layer's dtype for
``torch.testing``.  A bug is a relative error ``r`` on the rows from n/2 on
of one output (O, dQ, dK or dV), made inside the layer in float32 before its
result is rounded to the layer's dtype (:func:`zoo.flash` and
:func:`zoo.chunked_linear` take it as ``bug=``; the linear layer's dQ and
dK come out of autograd already in the layer's dtype, and take it there);
every checker judges the same layer, TF32 ones included; the smallest ``r`` a
checker catches is found by bisection in ``log r`` (to a factor 1.25) and
counts only where the checker passes the correct layer on the same draw.

``--false-alarms`` runs the correct layers of the zoo over seeds instead and
counts the runs each checker fails (``--dtypes tf32``: the zoo's TF32
layers, which round their operands to nearest: kernelcheck is called with
``dtype="tf32-nearest"``, see :data:`TF32_DECLARED`).  The float64
references of the kernelcheck calls are cached across the bisection (the
same seed draws the same inputs): results are the same as without the
cache.

    python3 benchmarks/verify_power.py --power --dtypes bfloat16 --sizes 64,1024
    python3 benchmarks/verify_power.py --false-alarms --seeds 20 --sizes 64
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zoo  # noqa: E402

from kernelcheck import attention as att  # noqa: E402
from kernelcheck import verify  # noqa: E402

#: kernelcheck's cases in the power search: ``positive values`` (the most power against a
#: relative error, and the law of the systematic-error test) and ``random`` (the gradient
#: checks run from it).
CASES = ("random", "positive values")
FLA_RATIO = 0.005
FLA_ATOL = 1e-6
OUTPUTS = {"softmax": ("O", "dQ", "dK", "dV"), "linear": ("O", "dQ", "dK", "dV")}
#: The gradients verify.attention has a reference for, by family (the linear family's dQ and
#: dK through the feature map's Jacobian, which it takes from torch).
KERNELCHECK_GRADIENTS = {"softmax": ("dQ", "dK", "dV"), "linear": ("dQ", "dK", "dV")}


# ----- the float64 references of the peers -----------------------------------


def _positive_values(seed: int, n: int, d: int = 8):
    """One draw of verify.attention's ``positive values`` law, and a Gaussian cotangent."""
    rng = np.random.default_rng(seed)
    small = 0.5 / math.sqrt(d)
    Q, K = small * rng.standard_normal((2, n, d))
    V = 0.5 + rng.random((n, d))
    return Q, K, V, rng.standard_normal((n, d))


def reference(family: str, Q, K, V, G):
    """The float64 output and gradients ``{O, dQ, dK, dV}`` of the family's formula."""
    if family == "softmax":
        dQ, dK, dV = att.softmax_vjp(Q, K, V, G, causal=True)
        return {"O": att.softmax(Q, K, V, causal=True), "dQ": dQ, "dK": dK, "dV": dV}
    pq, pk = zoo.elu1_np(Q), zoo.elu1_np(K)
    dpq, dpk, dV = att.linear_vjp(pq, pk, V, G, causal=True)
    slope = lambda X: np.where(X > 0, 1.0, np.exp(np.minimum(X, 0.0)))  # noqa: E731
    return {
        "O": att.parallel(pq, pk, V, causal=True),
        "dQ": dpq * slope(Q),
        "dK": dpk * slope(K),
        "dV": dV,
    }


def layer_outputs(fn, dtype: str, Q, K, V, G) -> dict:
    """The torch layer's output and gradients along ``G``, as float64 arrays."""
    import torch

    t = getattr(torch, dtype if dtype != "tf32" else "float32")
    xs = [torch.tensor(X).to(t).requires_grad_(True) for X in (Q, K, V)]
    out = fn(*xs)
    out.backward(torch.tensor(G).to(out.dtype))
    res = {"O": out.detach().double().numpy()}
    res.update({k: x.grad.double().numpy() for k, x in zip(("dQ", "dK", "dV"), xs, strict=True)})
    return res


def fla_passes(got, ref) -> bool:
    """fla.utils.assert_close's rule: max error <= 1e-6, or RMS ratio <= 0.005."""
    diff = got - ref
    if np.abs(diff).max() <= FLA_ATOL:
        return True
    return float(np.sqrt((diff**2).mean()) / (np.sqrt((ref**2).mean()) + 1e-8)) < FLA_RATIO


def torch_passes(got, ref, dtype: str) -> bool:
    """torch.testing.assert_close at its defaults for the layer's dtype (float32 for TF32)."""
    import torch

    t = getattr(torch, dtype if dtype != "tf32" else "float32")
    try:
        torch.testing.assert_close(torch.tensor(got).to(t), torch.tensor(ref).to(t))
    except AssertionError:
        return False
    return True


# ----- kernelcheck's call, with its float64 references cached -------------------------


def _key(*parts) -> str:
    h = hashlib.sha1()
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(str(p.shape).encode())
            h.update(np.ascontiguousarray(p).tobytes())
        elif isinstance(p, (tuple, list)):
            h.update(_key(*p).encode())
        elif isinstance(p, dict):
            h.update(_key(*sorted(p.items(), key=lambda kv: kv[0])).encode())
        else:
            h.update(repr(p).encode())
    return h.hexdigest()


def cache_references():
    """Memoise the float64 reference outputs, tolerances and VJPs (keyed by their inputs)."""
    from kernelcheck._src.attention.families.linear.reference import LinearSpec
    from kernelcheck._src.attention.families.softmax.reference import SoftmaxSpec
    from kernelcheck._src.verify.attention.reference import Reference

    def memo(cls, name):
        original, store = getattr(cls, name), {}

        @functools.wraps(original)
        def cached(self, *args, **kwargs):
            key = _key(type(self).__name__, args, kwargs)
            if key not in store:
                if len(store) > 4000:
                    store.clear()
                store[key] = original(self, *args, **kwargs)
            return store[key]

        setattr(cls, name, cached)

    memo(Reference, "output")
    memo(Reference, "tolerance")
    for spec in (SoftmaxSpec, LinearSpec):
        memo(spec, "vjp")


#: What kernelcheck is told of the zoo's TF32 layers: their products round the operands
#: to nearest (:func:`zoo.to_tf32`), ``dtype="tf32-nearest"``; plain ``"tf32"`` allows
#: truncation too and leaves the precision to the worst-case bounds alone.
TF32_DECLARED = "tf32-nearest"


def declared(dtype: str) -> str:
    """The ``dtype=`` kernelcheck is called with for a zoo layer of ``dtype``."""
    return TF32_DECLARED if dtype == "tf32" else dtype


def kernelcheck_passes(fn, family: str, dtype: str, n: int, grad: bool, seed: int = 0) -> bool:
    """verify.attention's verdict on the positive-values case (and the systematic-error test)."""
    kw = {"feature_map": zoo.elu1_any} if family == "linear" else {}
    report = verify.attention(
        fn, framework="torch", dtype=declared(dtype), causal=True, n=n, seed=seed, cases=CASES,
        check_causality=False, grad=grad, **kw,
    )  # fmt: skip
    return report.passed


# ----- smallest relative error caught ----------------------------------------------


def buggy(family: str, output: str, r: float, tf32: bool = False):
    """The zoo layer of ``family`` with a relative error ``r`` on ``output`` from n/2 on.

    ``tf32``: its matrix products round their float32 operands to TF32.
    """

    def bug(name, x):
        if name != output or r == 0:
            return x
        half = x.shape[-2] // 2
        scale = np.ones(x.shape[-2])
        scale[half:] += r
        import torch

        return x * torch.tensor(scale, dtype=x.dtype)[:, None]

    if family == "softmax":
        return zoo.flash(bug=bug, tf32=tf32)
    return functools.partial(zoo.chunked_linear, bug=bug, tf32=tf32)


def smallest_caught(caught, lo=1e-8, hi=1.0, factor=1.25):
    """The smallest ``r`` on a log scale with ``caught(r)`` (bisection; monotone assumed).

    Returns ``(r, note)``: ``r`` is NaN when ``hi`` is not caught, ``lo`` when ``lo`` is.
    """
    if not caught(hi):
        return math.nan, f"> {hi:g}"
    if caught(lo):
        return lo, f"<= {lo:g}"
    while hi / lo > factor:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if caught(mid) else (mid, hi)
    return hi, ""


def power_cell(family: str, output: str, dtype: str, n: int) -> dict:
    """The smallest relative error from n/2 on caught by each checker, for one output."""
    Q, K, V, G = _positive_values(0, n)
    ref = reference(family, Q, K, V, G)[output]
    tf32 = dtype == "tf32"
    correct = layer_outputs(buggy(family, output, 0.0, tf32), dtype, Q, K, V, G)[output]
    cell = {"family": family, "output": output, "dtype": dtype, "n": n}
    peers = {
        "fla ratio": lambda g: fla_passes(g, ref),
        "torch assert_close": lambda g: torch_passes(g, ref, dtype),
    }
    for name, passes in peers.items():
        if not passes(correct):
            cell[name] = "false alarm"
            continue

        def caught(r, passes=passes):
            layer = buggy(family, output, r, tf32)
            return not passes(layer_outputs(layer, dtype, Q, K, V, G)[output])

        r, note = smallest_caught(caught)
        cell[name] = note or r
    if output != "O" and output not in KERNELCHECK_GRADIENTS[family]:
        cell["kernelcheck"] = "not judged"
    else:
        grad = output != "O"
        if not kernelcheck_passes(buggy(family, output, 0.0, tf32), family, dtype, n, grad):
            cell["kernelcheck"] = "false alarm"
        else:
            r, note = smallest_caught(
                lambda r: (
                    not kernelcheck_passes(buggy(family, output, r, tf32), family, dtype, n, grad)
                )
            )
            cell["kernelcheck"] = note or r
    return cell


# ----- false alarms ------------------------------------------------------------------


def false_alarm_cell(name, fn, kw, framework, dtype, n, seeds, full=False) -> dict:
    """Runs failed by each checker on a correct layer over seeds.

    kernelcheck runs as in the power search, or (``full``) with every default
    case and check (the systematic-error test then runs at the ``across
    blocks`` length, 197 tokens, when ``n`` is shorter).
    """
    family = "linear" if "feature_map" in kw else "softmax"
    grads = KERNELCHECK_GRADIENTS[family]
    keys = ("O", *grads)
    cell = {"layer": name, "dtype": dtype, "n": n, "seeds": len(seeds), "kernelcheck": 0,
            "fla ratio": dict.fromkeys(keys, 0), "torch assert_close": dict.fromkeys(keys, 0),
            "examples": []}  # fmt: skip
    for s in seeds:
        narrow = {} if full else {"cases": CASES, "check_causality": False}
        report = verify.attention(
            fn,
            framework=framework,
            dtype=declared(dtype),
            n=n,
            seed=s,
            grad=True,
            **{**kw, **narrow},
        )
        if not report.passed:
            cell["kernelcheck"] += 1
            cell["examples"].append(f"seed {s}: {report}"[:600])
        if framework != "torch":
            continue
        Q, K, V, G = _positive_values(s, n)
        ref = reference(family, Q, K, V, G)
        got = layer_outputs(fn, dtype, Q, K, V, G)
        for k in keys:
            cell["fla ratio"][k] += not fla_passes(got[k], ref[k])
            cell["torch assert_close"][k] += not torch_passes(got[k], ref[k], dtype)
    if framework != "torch":
        cell["fla ratio"] = cell["torch assert_close"] = None
    return cell


def _layers(names, compile_too):
    out = [(n, f, k, "torch") for n, f, k in zoo.torch_layers(compile_too)]
    out += [(n, f, k, "torch") for n, f, k in zoo.tf32_layers()]
    try:
        out += [(n, f, k, "jax") for n, f, k in zoo.jax_layers()]
    except ImportError:
        pass
    return [x for x in out if not names or x[0] in names]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--power", action="store_true")
    p.add_argument("--false-alarms", action="store_true")
    p.add_argument("--dtypes", default="float32,float16,bfloat16")
    p.add_argument("--sizes", default="64,1024,4096")
    p.add_argument("--families", default="softmax,linear")
    p.add_argument("--outputs", default="O,dQ,dK,dV")
    p.add_argument("--layers", default="", help="comma-separated zoo names (false alarms)")
    p.add_argument("--compile", action="store_true", help="add the torch.compile layers")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--full", action="store_true", help="false alarms of the full default call")
    p.add_argument("--json", default=None)
    p.add_argument("--table", nargs="*", default=None, help="print the tables of these JSON files")
    a = p.parse_args(argv)
    if a.table is not None:
        print(tables([c for path in a.table for c in json.load(open(path))]))
        return 0
    cache_references()
    try:  # one thread: on a shared machine torch's thread pool waits far longer than it works
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    cells: list[dict] = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    dtypes, sizes = a.dtypes.split(","), [int(x) for x in a.sizes.split(",")]
    if a.power:
        for fam in a.families.split(","):
            for out in a.outputs.split(","):
                for dt in dtypes:
                    for n in sizes:
                        t0 = time.perf_counter()
                        cell = power_cell(fam, out, dt, n)
                        cell["seconds"] = round(time.perf_counter() - t0, 1)
                        cells.append(cell)
                        print(json.dumps(cell), flush=True)
                        _save(a.json, cells)
    if a.false_alarms:
        names = [x for x in a.layers.split(",") if x]
        for name, fn, kw, fw in _layers(names, a.compile):
            for dt in dtypes:
                if fw == "jax" and dt == "float16" and name == "jax sdpa":
                    continue  # XLA's CPU backend has no float16 dot with float32 accumulation
                if (dt == "tf32") != name.endswith(" tf32"):
                    continue  # TF32 is judged on the layers that round their operands to it
                for n in sizes:
                    t0 = time.perf_counter()
                    cell = false_alarm_cell(name, fn, kw, fw, dt, n, range(a.seeds), a.full)
                    cell["full"] = a.full
                    cell["seconds"] = round(time.perf_counter() - t0, 1)
                    cells.append(cell)
                    print(json.dumps(cell), flush=True)
                    _save(a.json, cells)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return 0


def _fmt(v) -> str:
    if isinstance(v, float):
        return "> 1" if math.isnan(v) else f"{v:.2g}"
    return str(v)


def behind(cell: dict) -> bool:
    """Whether kernelcheck catches less than a peer in a power cell (a larger ``r``).

    A peer that fails the correct layer ("false alarm") catches nothing; ``NaN`` (even
    ``r = 1`` passes) is larger than any ``r``.
    """
    kc = cell.get("kernelcheck")
    if not isinstance(kc, float):
        return False
    kc = math.inf if math.isnan(kc) else kc
    peers = [cell.get(k) for k in ("fla ratio", "torch assert_close")]
    return any(isinstance(v, float) and not math.isnan(v) and v < kc for v in peers)


def tables(cells: list[dict]) -> str:
    """The Markdown tables of the page from the measured cells (power, then false alarms).

    A kernelcheck entry is bold where it catches less than a peer (:func:`behind`).
    """
    checkers = ("kernelcheck", "fla ratio", "torch assert_close")
    lines = []
    power = [c for c in cells if "output" in c]
    if power:
        sizes = sorted({c["n"] for c in power})
        head = " | ".join(f"{k}, n = {n}" for n in sizes for k in ("kc", "fla", "torch"))
        lines += [f"| layer | output | dtype | {head} |", "|---" * (3 + 3 * len(sizes)) + "|"]
        by = {(c["family"], c["output"], c["dtype"], c["n"]): c for c in power}
        for fam, out, dt in dict.fromkeys((c["family"], c["output"], c["dtype"]) for c in power):
            row = [by.get((fam, out, dt, n), {}) for n in sizes]
            vals = " | ".join(
                f"**{_fmt(r[k])}**" if k == "kernelcheck" and behind(r) else _fmt(r.get(k, ""))
                for r in row
                for k in checkers
            )
            lines.append(f"| {fam} | {out} | {dt} | {vals} |")
        lines.append(
            f"\nkernelcheck catches less than a peer in {sum(map(behind, power))} of "
            f"{len(power)} cells."
        )
    alarms = [c for c in cells if "layer" in c]
    if alarms:
        head = "| layer | dtype | n | seeds | kernelcheck | fla ratio | torch assert_close |"
        lines += ["", head, "|---" * 7 + "|"]
        for c in alarms:

            def peer(v):
                if v is None:
                    return "-"
                failing = {k: x for k, x in v.items() if x}
                return ", ".join(f"{k} {x}" for k, x in failing.items()) if failing else "0"

            lines.append(
                f"| {c['layer']} | {c['dtype']} | {c['n']} | {c['seeds']} | {c['kernelcheck']} | "
                f"{peer(c['fla ratio'])} | {peer(c['torch assert_close'])} |"
            )
    return "\n".join(lines)


def _save(path, cells):
    if path:
        with open(path, "w") as f:
            json.dump(cells, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
