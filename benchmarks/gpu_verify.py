"""Verify flash-linear-attention's Triton chunk kernels and torch SDPA on a CUDA device.

One prepared run, within ten minutes: ``kernelcheck.verify.attention`` calls
each kernel on the GPU in bfloat16 and in float32 (forward outputs, the final
state and a prefill-then-decode hand-over, and the gradients along a random
cotangent), and judges it against kernelcheck's float64 reference of its
family computed on the CPU:

* ``chunk_simple_gla`` (one gate per token and head: the gated family, C20),
* ``chunk_gla`` (a gate on every key channel: the per-channel family, C21),
* ``chunk_gated_delta_rule`` (Gated DeltaNet, C22-C24, in-kernel L2 norm),
* ``chunk_kda`` (Kimi Delta Attention, C22-C24, in-kernel L2 norm),
* ``torch.nn.functional.scaled_dot_product_attention`` (causal softmax, C1).

Each line of the output is one kernel in one dtype: its verdict and the
report's first line, or why it was not run (a family this kernelcheck does
not have, a kernel this fla does not ship).  Without a CUDA device (or
without torch, fla-core or Triton) the script prints one line saying so and
exits 0: nothing else depends on it.

Usage: ``python3 benchmarks/gpu_verify.py [--n 64] [--dtypes bfloat16,float32]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

BUDGET_S = 600.0  # the whole run: ten minutes


def _why_not() -> str:
    """'' when a CUDA device, torch, fla-core and Triton are all here, else the reason.

    A machine without a GPU driver's device files (NVIDIA's ``/dev/nvidiactl``,
    ROCm's ``/dev/kfd``) is told apart before torch is imported.
    """
    if not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/kfd")):
        return "no GPU driver on this machine: the Triton kernels need a CUDA device"
    try:
        import torch
    except ImportError:
        return "no torch: nothing to run on a GPU"
    if not torch.cuda.is_available():
        return "no CUDA device: the Triton kernels need a GPU (nothing was run)"
    for module in ("triton", "fla"):
        try:
            __import__(module)
        except ImportError:
            return f"no {module}: install fla-core and triton to verify the kernels"
    return ""


def _uniform(low: float, high: float):
    """A sampler ``f(rng, shape)`` of values in ``[low, high)`` (verify.attention's convention)."""

    def draw(rng, shape):
        return rng.uniform(low, high, size=shape)

    return draw


def _scaled(x):
    return x * x.shape[-1] ** -0.5


def _identity(x):
    return x


def _kernels():
    """(name, layer, verify options) of every kernel; a layer returns ``(out, state)``."""
    import torch.nn.functional as F

    def fla(path, name):
        module = __import__(path, fromlist=[name])
        return getattr(module, name)

    def simple_gla(q, k, v, g, initial_state=None):
        fn = fla("fla.ops.simple_gla", "chunk_simple_gla")
        return fn(q, k, v, g=g, initial_state=initial_state, output_final_state=True)

    def gla(q, k, v, gk, initial_state=None):
        fn = fla("fla.ops.gla", "chunk_gla")
        return fn(q, k, v, g=gk, initial_state=initial_state, output_final_state=True)

    def gated_delta(q, k, v, g, beta, initial_state=None):
        fn = fla("fla.ops.gated_delta_rule", "chunk_gated_delta_rule")
        return fn(q, k, v, g=g, beta=beta, initial_state=initial_state,
                  output_final_state=True, use_qk_l2norm_in_kernel=True)  # fmt: skip

    def kda(q, k, v, g, beta, initial_state=None):
        fn = fla("fla.ops.kda", "chunk_kda")
        return fn(q, k, v, g=g, beta=beta, initial_state=initial_state,
                  output_final_state=True, use_qk_l2norm_in_kernel=True)  # fmt: skip

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    gates = {"log_gates": True, "layout": "bnhd", "state": True, "causal": True}
    scale = {"feature_map": (_scaled, _identity), "normalize": False}
    return [
        ("chunk_simple_gla", simple_gla, {**gates, **scale, "decay": _uniform(0.9, 1.0)}),
        ("chunk_gla", gla, {**gates, **scale, "key_decay": _uniform(0.9, 1.0)}),
        ("chunk_gated_delta_rule", gated_delta,
         {**gates, "beta": _uniform(0.1, 1.0), "decay": _uniform(0.9, 1.0),
          "qk_l2norm": True, "scale": _scaled_factor}),
        ("chunk_kda", kda,
         {**gates, "beta": _uniform(0.1, 1.0), "key_decay": _uniform(0.9, 1.0),
          "qk_l2norm": True, "scale": _scaled_factor}),
        ("scaled_dot_product_attention", sdpa, {"causal": True, "layout": "bhnd"}),
    ]  # fmt: skip


def _scaled_factor(d):
    """The queries' scale of fla's kernels: ``d ** -0.5``."""
    return d**-0.5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="tokens per sequence (default 64)")
    parser.add_argument("--dtypes", default="bfloat16,float32", help="comma-separated dtypes")
    args = parser.parse_args(argv)
    reason = _why_not()
    if reason:
        print(f"gpu_verify: skipped: {reason}")
        return 0
    from kernelcheck import verify

    start = time.monotonic()
    for name, layer, options in _kernels():
        for dtype in args.dtypes.split(","):
            left = BUDGET_S - (time.monotonic() - start)
            if left < 30:
                print(f"{name} {dtype}: not run: the ten minutes are spent")
                continue
            try:
                report = verify.attention(
                    layer, framework="torch", device="cuda", dtype=dtype, n=args.n,
                    batch_shape=(2, 4), d=64, d_v=64, grad=True, seed=0,
                    timeout=min(left, 240.0), **options,
                )  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - one kernel's failure is its line
                line = traceback.format_exception_only(type(exc), exc)[-1].strip()
                print(f"{name} {dtype}: not run: {line}")
                continue
            print(f"{name} {dtype}: {report.outcome}: {str(report).splitlines()[0]}")
    print(f"gpu_verify: done in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
