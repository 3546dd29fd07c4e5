"""``verify.attention(..., device=)``: the layer's inputs on that device, the reference on the CPU.

No accelerator is needed: JAX with ``--xla_force_host_platform_device_count=2``
has two CPU devices, ``CpuDevice(id=0)`` (the default) and ``CpuDevice(id=1)``,
and an array placed on the second one stays there through the layer's
computation, so a test can tell "on the requested device" from "on the
default one" and still compute.  (torch's ``meta`` device computes nothing,
and a torch tensor on ``cpu:0`` reports plain ``cpu``.)  The flag must be set
before JAX starts, so the checks run in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    import numpy as np
    from kernelcheck import verify

    default, second = jax.devices()
    assert default.id == 0 and second.id == 1, jax.devices()
    seen = []

    def layer(Q, K, V):
        for x in (Q, K, V):
            try:
                where = x.devices()
            except jax.errors.ConcretizationTypeError:  # traced by jax.vjp (grad=True)
                continue
            seen.append(where)
            if where != {second}:
                raise RuntimeError(f"input on {where}, not on {second}")
        S = Q @ jnp.swapaxes(K, -1, -2) / jnp.sqrt(Q.shape[-1])
        return jax.nn.softmax(S, axis=-1) @ V

    def off_by_1e3(Q, K, V):  # a relative error of 1e-3, far above float32 rounding
        return layer(Q, K, V) * (1 + 1e-3)

    good = verify.attention(layer, framework="jax", dtype="float32", device=second, grad=True)
    assert good.passed, good.details()
    assert seen and all(s == {second} for s in seen), seen
    bad = verify.attention(off_by_1e3, framework="jax", dtype="float32", device=second)
    assert str(bad.outcome) == "refuted", str(bad)
    on_default = verify.attention(layer, framework="jax", dtype="float32", device="cpu")
    assert str(on_default.outcome) == "refuted" and "not on" in on_default.details()
    print("float32 storage:", "storage float32" in good.precision)
    print("checks:", [c.name for c in good.checks])
    print("ok")
    """
)


def test_inputs_go_to_the_requested_device_and_the_reference_stays_float64_on_the_cpu():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "float32 storage: True" in proc.stdout
    assert "gradient" in proc.stdout and proc.stdout.rstrip().endswith("ok"), proc.stdout
