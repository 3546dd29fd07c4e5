"""flash-linear-attention's Triton kernel ``fused_recurrent_gated_delta_rule``, interpreted on CPU.

With ``TRITON_INTERPRET=1`` Triton runs a kernel's program instances in
NumPy, so the kernel itself (not a reference beside it) is checked here
against Gated DeltaNet's reference within the float32 model: outputs and
final state, from a handed-over state, with its in-layer L2 normalisation.
The interpreter must be chosen before fla's kernels are first built, so the
kernel runs in a child process (one per session, about ten seconds).

Its positional order is ``(q, k, v, g, gk, gv, beta, ...)``: called as
``(q, k, v, g, beta)`` like the other gated delta rules, ``beta`` lands in
``gk`` (gates on the key channels) and no step is taken.  That call is a
bug a verifier must catch, and it lies far beyond the tolerance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.attention.families import thirdparty as tp

pytest.importorskip("triton")

_CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np, torch
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fn
    q, k, v, g, beta, S0 = (torch.tensor(np.array(x, dtype=np.float32))
                            for x in json.load(sys.stdin))
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the interpreter's masked lanes overflow harmlessly
        o, S = fn(q, k, v, g=g, beta=beta, initial_state=S0, output_final_state=True,
                  use_qk_l2norm_in_kernel=True, scale=q.shape[-1] ** -0.5)
        out["keywords"] = [o.double().tolist(), S.double().tolist()]
        o, S = fn(q, k, v, g, beta, initial_state=S0, output_final_state=True,
                  use_qk_l2norm_in_kernel=True, scale=q.shape[-1] ** -0.5)
        out["positional"] = [o.double().tolist(), S.double().tolist()]
    json.dump(out, sys.stdout)
    """
)


def test_fused_recurrent_gated_delta_rule_under_the_interpreter():
    rng = np.random.default_rng(11)
    H, n, D, dv = 2, 20, 16, 8
    q, k = rng.standard_normal((2, 1, H, n, D))
    v = rng.standard_normal((1, H, n, dv))
    g, beta = rng.uniform(0.8, 1.0, (1, H, n)), rng.uniform(0.1, 1.0, (1, H, n))
    q, k, v, g, beta, S0 = tp.f32(q, k, v, g, beta, rng.standard_normal((1, H, D, dv)))
    bnhd = [np.swapaxes(x, 1, 2).tolist() for x in (q, k, v, np.log(g)[..., None], beta[..., None])]
    bnhd[3] = np.array(bnhd[3])[..., 0].tolist()
    bnhd[4] = np.array(bnhd[4])[..., 0].tolist()
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD], input=json.dumps(bnhd + [S0.tolist()]),
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    if run.returncode != 0:
        pytest.fail(f"the interpreted kernel failed: {run.stderr[-2000:]}")
    got = json.loads(run.stdout)
    from kernelcheck.attention import State, gated_delta_recurrent

    kw = {"qk_l2norm": True, "scale": D**-0.5, "initial_state": State(S0)}
    args = (q, k, v, g, beta)
    ref, S = gated_delta_recurrent(*args, return_state=True, **kw)
    tol, state_tol = tp.tolerances("gated_delta", args, kw)
    o, Sf = (np.array(x) for x in got["keywords"])
    tp.within(np.swapaxes(o, 1, 2), ref, tol, "fused_recurrent_gated_delta_rule output")
    tp.within(Sf, S.S, state_tol, "fused_recurrent_gated_delta_rule final state")
    o_bad = np.swapaxes(np.array(got["positional"][0]), 1, 2)
    assert (np.abs(o_bad - ref) > tol).any()  # beta read as gk: caught
