"""Bad input to the per-channel gated family (C21), refused by name; inputs never written.

Every row calls a public function with one bad argument and expects an
``InvalidArgument`` whose message opens with that argument in backticks
(matched from its start), raised before any work; the forms never write
into the caller's arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as A
from kernelcheck.errors import InvalidArgument

RNG = np.random.default_rng(21)
PQ, PK = RNG.uniform(0.1, 1.0, (2, 5, 4))
V, G = RNG.normal(size=(2, 5, 2))
KG = RNG.uniform(0.5, 1.0, (5, 4))
VG = RNG.uniform(0.5, 1.0, (5, 2))
U = RNG.normal(size=4)
GATES = RNG.uniform(0.5, 1.0, 5)
REC = A.channel_gated_recurrence()
STATE = REC.init(4, 2)

FAMILY = A.get_family("channel_gated")
#: The family's forms and its distinct error bounds, by name: the functions a user calls.
FORMS = {f.name: f.function for f in FAMILY.forms} | {
    b.__name__: b for b in dict.fromkeys(f.error_bound for f in FAMILY.forms)
}
#: The forms taking a state handed over from an earlier call.
STATE_FORMS = [f.name for f in FAMILY.forms if "initial_state" in f.options]

BAD_CALLS: list = []
for _name, _fn in FORMS.items():
    BAD_CALLS += [
        (f"{_name}-key-above-one", lambda fn=_fn: fn(PQ, PK, V, KG + 1.0), InvalidArgument,
         r"^`key_gates` must lie in \[0, 1\], but 20 do not \(first at index \(0, 0\)"),
        (f"{_name}-key-negative", lambda fn=_fn: fn(PQ, PK, V, -KG), InvalidArgument,
         r"^`key_gates` must lie in \[0, 1\]"),
        (f"{_name}-key-nan", lambda fn=_fn: fn(PQ, PK, V, np.where(KG > 0.9, np.nan, KG)),
         InvalidArgument, r"^`key_gates` must be finite"),
        (f"{_name}-key-width", lambda fn=_fn: fn(PQ, PK, V, KG[:, :3]), InvalidArgument,
         r"^`key_gates` must have a last axis of 4 \(one gate per channel; shape \(5, 4\)\)"),
        (f"{_name}-key-tokens", lambda fn=_fn: fn(PQ, PK, V, KG[:4]), InvalidArgument,
         r"^`key_gates` must broadcast to \(5, 4\) \(batch \+ \(n, width\)"),
        (f"{_name}-key-bool", lambda fn=_fn: fn(PQ, PK, V, KG > 0.7), InvalidArgument,
         r"^`key_gates` must be numbers in \[0, 1\], got booleans"),
        (f"{_name}-value-shape", lambda fn=_fn: fn(PQ, PK, V, KG, VG[:, :1].T), InvalidArgument,
         r"^`value_gates` must have a last axis of 2"),
        (f"{_name}-value-str", lambda fn=_fn: fn(PQ, PK, V, None, "0.5"), InvalidArgument,
         r"^`value_gates` must be a numeric array, got str"),
        (f"{_name}-bonus-per-token", lambda fn=_fn: fn(PQ, PK, V, KG, None, PQ), InvalidArgument,
         r"^`bonus` must broadcast to \(4,\) \(batch \+ \(D,\): one vector per head"),
        (f"{_name}-bonus-inf", lambda fn=_fn: fn(PQ, PK, V, KG, None, U * np.inf), InvalidArgument,
         r"^`bonus` must be finite"),
        (f"{_name}-normalize", lambda fn=_fn: fn(PQ, PK, V, KG, normalize=True), InvalidArgument,
         r"^`normalize=True` is not offered by the per-channel gated forms"),
        (f"{_name}-V-nan", lambda fn=_fn: fn(PQ, PK, V * np.nan, KG), InvalidArgument,
         r"^`V` must be finite"),
        (f"{_name}-phi_k-shape", lambda fn=_fn: fn(PQ, PK[:, :3], V, KG), InvalidArgument,
         r"^`phi_q` and `phi_k` must have the same last dimension D"),
    ]  # fmt: skip
for _name in STATE_FORMS:
    BAD_CALLS += [
        (f"{_name}-state-shape",
         lambda fn=FORMS[_name]: fn(PQ, PK, V, KG, initial_state=REC.init(3, 2)),
         InvalidArgument, r"^`initial_state.S` must have shape \(\.\.\., D, d_v\) = \(\.\.\., 4"),
        (f"{_name}-state-type", lambda fn=FORMS[_name]: fn(PQ, PK, V, KG, initial_state=PQ),
         InvalidArgument, r"^`initial_state` must be a State"),
        (f"{_name}-return-state", lambda fn=FORMS[_name]: fn(PQ, PK, V, KG, return_state=2),
         InvalidArgument, r"^`return_state` must be True or False"),
    ]  # fmt: skip
BAD_CALLS += [
    ("channel_gated_recurrent-normalize-int",
     lambda: A.channel_gated_recurrent(PQ, PK, V, KG, normalize=1), InvalidArgument,
     r"^`normalize` must be True or False, got int 1"),
    ("channel_gated_parallel-bonus-matrix",
     lambda: A.channel_gated_parallel(PQ, PK, V, KG, None, np.ones((3, 4))), InvalidArgument,
     r"^`bonus` must broadcast to \(4,\)"),
    ("channel_gated_chunked-chunk-zero",
     lambda: A.channel_gated_chunked(PQ, PK, V, KG, chunk_size=0), InvalidArgument,
     r"^`chunk_size` must be >= 1, got 0"),
    ("channel_gated_error_bound-bidirectional",
     lambda: A.channel_gated_error_bound(PQ, PK, V, KG, causal=False), InvalidArgument,
     r"^`causal` must be True: per-channel gates order the tokens"),
    ("channel_gated_error_bound-dtype",
     lambda: A.channel_gated_error_bound(PQ, PK, V, KG, dtype="int8"), InvalidArgument,
     r"^`dtype` must be float64 or float32"),
    ("channel_gated_recurrence-bonus-str", lambda: A.channel_gated_recurrence(bonus="u"),
     InvalidArgument, r"^`bonus` must be a numeric array, got str"),
    ("channel_gated_recurrence-step-gate",
     lambda: REC.step(STATE, PQ[0], PK[0], V[0], KG[0] + 1.0), InvalidArgument,
     r"^`key_gate` must lie in \[0, 1\]"),
    ("channel_gated_recurrence-step-value-gate",
     lambda: REC.step(STATE, PQ[0], PK[0], V[0], KG[0], VG[0, :1].repeat(3)), InvalidArgument,
     r"^`value_gate` must have a last axis of 2"),
    ("channel_gated_recurrence-step-state",
     lambda: REC.step(KG, PQ[0], PK[0], V[0]), InvalidArgument,
     r"^`state` must be a State from init\(\)"),
    ("channel_gated_recurrence-init-dtype", lambda: REC.init(4, 2, dtype=np.int32),
     InvalidArgument, r"^`dtype` must be float64 or float32, got int32"),
    ("channel_gated_vjp-G-shape",
     lambda: A.channel_gated_vjp(PQ, PK, V, KG, None, None, G[:, :1]), InvalidArgument,
     r"^`G` must have the output's shape \(5, 2\)"),
    ("channel_gated_vjp-key-gates",
     lambda: A.channel_gated_vjp(PQ, PK, V, KG * 2, None, None, G), InvalidArgument,
     r"^`key_gates` must lie in \[0, 1\]"),
    ("channel_gated_vjp_error_bound-dtype",
     lambda: A.channel_gated_vjp_error_bound(PQ, PK, V, KG, None, U, G, dtype="int8"),
     InvalidArgument, r"^`dtype` must be float64 or float32"),
]  # fmt: skip


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _readonly(*arrays):
    out = []
    for a in arrays:
        a = np.array(a)
        a.setflags(write=False)
        out.append(a)
    return out


@pytest.mark.parametrize("name", STATE_FORMS)
def test_forms_never_write_into_their_inputs_or_the_state(name):
    """Read-only inputs and a read-only handed state go through; the copies come back equal."""
    args = _readonly(PQ, PK, V, KG, VG, U)
    S = _readonly(RNG.normal(size=(4, 2)))[0]
    before = [a.copy() for a in (*args, S)]
    FORMS[name](*args, initial_state=A.State(S), return_state=True)
    A.channel_gated_vjp(*args, G, initial_state=A.State(S))
    for a, b in zip((*args, S), before, strict=True):
        assert np.array_equal(a, b)


def test_the_step_never_writes_into_the_state():
    state = A.State(_readonly(RNG.normal(size=(4, 2)))[0])
    before = state.S.copy()
    REC.step(state, PQ[0], PK[0], V[0], KG[0], VG[0])
    assert np.array_equal(state.S, before)
