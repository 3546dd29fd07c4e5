"""flash-linear-attention's Triton kernels of GLA and simple GLA, interpreted on CPU (C20, C21).

``fused_recurrent_gla`` (gates per key channel, ``gk``, or per value channel,
``gv``) and ``fused_recurrent_simple_gla`` (one gate per token and head) run
their kernel ``fused_recurrent_fwd_kernel`` under ``TRITON_INTERPRET=1``,
set before fla builds its kernels, so they run in one child process.  The
kernel's autotuner would time its configurations (``num_warps`` 4 and 8) on
a GPU driver, which the interpreter lacks: the child keeps the first one
(``Autotuner.prune_configs`` cut to one entry, the path Triton takes for a
single configuration); the interpreter ignores ``num_warps``, so the
arithmetic is the kernel's own.

Both take log gates in layout (B, T, H, .), scale the queries by
``K ** -0.5`` (a power of two here: exact), start from a handed-over state
(B, H, K, V) and read ``S_t`` after its update, in float32.  Judged: GLA
against the per-channel gated reference, simple GLA against the scalar gated
one, outputs and final state, within the float32 bound plus the float64
reference's own; GLA once more with ``state_v_first=True`` (the state
value-major, in and out).  Planted: GLA's gates handed one token late, and
its gates handed as ``gv`` (on the value axis, the next keyword); simple
GLA's gates one token late.  Each is caught beyond the bound.

fla's ``chunk_gla`` and ``chunk_simple_gla`` do not run in Triton 3.9's
interpreter (``chunk_fwd_kernel_h`` calls ``.to`` on a loop index, a Python
int there), so only the fused recurrent kernels are run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kernelcheck import attention as A
from tests.attention.families.final_state import state_tolerance

pytest.importorskip("triton")
pytest.importorskip("torch")
if importlib.util.find_spec("fla") is None:
    pytest.skip("fla-core is not installed", allow_module_level=True)

_CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np, torch
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]
    from fla.ops.gla import fused_recurrent_gla
    from fla.ops.simple_gla import fused_recurrent_simple_gla
    q, k, v, lg, h0 = (torch.tensor(np.array(x, dtype=np.float32)) for x in json.load(sys.stdin))
    ls = lg[..., 0].contiguous()

    def late(g):
        return torch.cat([torch.zeros_like(g[:, :1]), g[:, :-1]], dim=1)

    def run(fn, *args, **kw):
        o, ht = fn(q, k, v, *args, initial_state=kw.pop("h0", h0), output_final_state=True, **kw)
        return [o.double().tolist(), ht.double().tolist()]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fla's warning that no GPU is present
        out = {
            "gla": run(fused_recurrent_gla, lg),
            "gla value-major": run(fused_recurrent_gla, lg, state_v_first=True,
                                   h0=h0.transpose(-1, -2).contiguous()),
            "gla late": run(fused_recurrent_gla, late(lg)),
            "gla on values": run(fused_recurrent_gla, gv=lg),
            "simple": run(fused_recurrent_simple_gla, ls),
            "simple late": run(fused_recurrent_simple_gla, late(ls)),
        }
    json.dump(out, sys.stdout)
    """
)

RNG = np.random.default_rng(3021)
B, H, T, K = 1, 2, 24, 16  # values of K channels too: the gates fit on either axis


def _f32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


@pytest.fixture(scope="module")
def interpreted():
    """Inputs (B, H, T, .) and the kernels' results, from one interpreted child process."""
    q, k, V = _f32(RNG.standard_normal((3, B, H, T, K)))
    lg = _f32(np.log(RNG.uniform(0.5, 1.0, (B, H, T, K))))
    h0 = _f32(RNG.standard_normal((B, H, K, K)))
    bthk = [np.swapaxes(x, 1, 2).tolist() for x in (q, k, V, lg)]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD], input=json.dumps(bthk + [h0.tolist()]),
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    if run.returncode != 0:
        pytest.fail(f"the interpreted kernels failed: {run.stderr[-2000:]}")
    got = {
        name: (np.swapaxes(np.array(o), 1, 2), np.array(ht))
        for name, (o, ht) in json.loads(run.stdout).items()
    }
    return (q * K**-0.5, k, V, lg, h0), got


def _judge(got, ref, tol, what):
    err = np.abs(got - ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    assert (err <= tol).all(), f"{what}: {float((err / tol).max()):.3g} x the bound"


def _gla(inputs):
    qs, k, V, lg, h0 = inputs
    a, S0 = np.exp(lg), A.State(h0)
    ref, S = A.channel_gated_recurrent(qs, k, V, a, initial_state=S0, return_state=True)
    bound = A.channel_gated_error_bound
    tol = bound(qs, k, V, a, initial_state=S0, dtype="float32") + bound(
        qs, k, V, a, initial_state=S0
    )
    return ref, S.S, tol, state_tolerance(bound, qs, k, V, a, initial_state=S0, dtype="float32")


def _simple(inputs):
    qs, k, V, lg, h0 = inputs
    g, S0 = np.exp(lg[..., 0]), A.State(h0)
    ref, S = A.gated_recurrent(qs, k, V, g, initial_state=S0, return_state=True)
    bound = A.gated_error_bound
    tol = bound(qs, k, V, g, initial_state=S0, dtype="float32") + bound(
        qs, k, V, g, initial_state=S0
    )
    return ref, S.S, tol, state_tolerance(bound, qs, k, V, g, initial_state=S0, dtype="float32")


def test_fused_recurrent_gla_outputs_and_final_state_within_the_bound(interpreted):
    inputs, got = interpreted
    ref, S, tol, state_tol = _gla(inputs)
    o, ht = got["gla"]
    _judge(o, ref, tol, "fused_recurrent_gla output")
    _judge(ht, S, state_tol, "fused_recurrent_gla final state")
    o, ht = got["gla value-major"]  # the state (B, H, V, K) in and out
    _judge(o, ref, tol, "fused_recurrent_gla output, state_v_first")
    _judge(np.swapaxes(ht, -1, -2), S, state_tol, "fused_recurrent_gla final state, state_v_first")


def test_fused_recurrent_simple_gla_outputs_and_final_state_within_the_bound(interpreted):
    inputs, got = interpreted
    ref, S, tol, state_tol = _simple(inputs)
    o, ht = got["simple"]
    _judge(o, ref, tol, "fused_recurrent_simple_gla output")
    _judge(ht, S, state_tol, "fused_recurrent_simple_gla final state")


@pytest.mark.parametrize(
    "bug, family", [("gla late", _gla), ("gla on values", _gla), ("simple late", _simple)]
)
def test_gates_one_token_late_or_on_the_value_axis_are_caught(interpreted, bug, family):
    inputs, got = interpreted
    ref, S, tol, state_tol = family(inputs)
    o, ht = got[bug]
    assert not (np.abs(o - ref) <= tol).all()
    assert not (np.abs(ht - S) <= state_tol).all()
