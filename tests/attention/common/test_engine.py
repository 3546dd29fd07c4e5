"""The recurrence engine (``attention/common/engine.py``): init, step and the token loop (C11, C14).

Checked through the linear recurrence (``linear_recurrence()``, an ``init`` /
``step`` pair over the state ``(S, z)``): a step is pure and equals the
recurrent form's token bit for bit (float64 and float32); it broadcasts over a
batch and refuses arguments whose batches do not broadcast, naming each; the
state holds ``D (d_v + 1)`` numbers whatever n, carries the batch shape, and
reads as the running sums; the result is float64 when any argument is;
``on_bad_normalizer="report"`` reports; bad arguments of ``init`` and ``step``
are refused by name, and any finite input gives an answer or a clean error.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings

from kernelcheck import attention as att
from kernelcheck.errors import InvalidArgument
from tests.attention.inputs import PK, PQ, S0, V, answer_or_clean_error, extreme_arrays
from tests.inputs import readonly

#: The linear recurrence's init / step pair (claims C11, C14).
LINEAR = att.linear_recurrence()
RNG = np.random.default_rng(7)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# Recurrence and state
# ---------------------------------------------------------------------------


def test_step_is_pure_and_matches_recurrent():
    rng = _rng(13)
    pq, pk = rng.random((2, 7, 3))
    V = rng.normal(size=(7, 2))
    state = LINEAR.init(3, 2)
    before = (state.S.copy(), state.z.copy())
    ys = []
    s = state
    for t in range(7):
        s, y = LINEAR.step(s, pq[t], pk[t], V[t])
        ys.append(y)
    assert np.array_equal(state.S, before[0]) and np.array_equal(state.z, before[1])
    out, final = att.recurrent(pq, pk, V, return_state=True)
    assert np.array_equal(np.array(ys), out)  # the same operations in the same order
    assert np.array_equal(final.S, s.S) and np.array_equal(final.z, s.z)
    # and the state is the running sums (C11): S = phi_k^T V, z = sum phi_k
    assert (
        np.abs(final.S - pk.T @ V).max() <= 2 * 7 * np.finfo(float).eps * (pk.T @ np.abs(V)).max()
    )


def test_step_broadcasts_over_batch():
    rng = _rng(14)
    pq, pk = rng.random((2, 4, 5, 3))
    V = rng.normal(size=(4, 5, 2))
    s = LINEAR.init(3, 2)  # no batch shape: broadcasts
    ys = []
    for t in range(5):
        s, y = LINEAR.step(s, pq[:, t], pk[:, t], V[:, t])
        ys.append(y)
    assert s.S.shape == (4, 3, 2)
    ref = att.recurrent(pq, pk, V)
    assert np.array_equal(np.stack(ys, axis=1), ref)


def test_state_size_does_not_depend_on_n():
    """C11, deterministic: the final state has D (d_v + 1) numbers for every n."""
    rng = _rng(15)
    sizes = set()
    for n in (1, 5, 40):
        pq, pk = rng.random((2, n, 6))
        _, state = att.recurrent(pq, pk, rng.normal(size=(n, 3)), return_state=True)
        sizes.add((state.S.shape, state.z.shape, state.size, state.nbytes))
    assert sizes == {((6, 3), (6,), 6 * 4, 6 * 4 * 8)}


def test_state_size_and_bytes():
    s = LINEAR.init(5, 3, batch_shape=(2, 4))
    assert s.S.shape == (2, 4, 5, 3) and s.z.shape == (2, 4, 5)
    assert s.size == 2 * 4 * 5 * (3 + 1)
    assert s.nbytes == 8 * s.size
    s32 = LINEAR.init(5, 3, dtype=np.float32)
    assert s32.S.dtype == s32.z.dtype == np.float32
    assert s32.nbytes == 4 * s32.size


def test_step_report_and_recurrent_state():
    s = LINEAR.init(2, 1)
    s, y = LINEAR.step(s, [1.0, 0.0], [1.0, 0.0], [3.0], on_bad_normalizer="report")
    assert y.ok and np.array_equal(y.out, [3.0]) and np.array_equal(y.normalizer, 1.0)
    s, y = LINEAR.step(s, [0.0, 1.0], [1.0, 0.0], [5.0], on_bad_normalizer="report")
    assert not y.ok  # phi(q) . z = 0
    pq = np.abs(RNG.normal(size=(6, 3)))
    pk = np.abs(RNG.normal(size=(6, 3)))
    V = RNG.normal(size=(6, 2))
    out, state = att.recurrent(pq, pk, V, return_state=True)
    assert np.allclose(state.S, pk.T @ V) and np.allclose(state.z, pk.sum(axis=0))
    assert state.size == LINEAR.init(3, 2).size
    assert np.array_equal(out, att.recurrent(pq, pk, V))
    rep = att.recurrent(pq, pk, V, on_bad_normalizer="report")
    assert rep.ok and np.array_equal(rep.out, out)


def test_recurrent_state_carries_the_batch_shape():
    pq = RNG.random((3, 2, 5, 4)) + 0.1
    pk = RNG.random((3, 2, 5, 4)) + 0.1
    V = RNG.normal(size=(3, 2, 5, 2))
    out, state = att.recurrent(pq, pk, V, return_state=True)
    assert state.S.shape == (3, 2, 4, 2) and state.z.shape == (3, 2, 4)
    assert np.allclose(state.S, np.swapaxes(pk, -1, -2) @ V)
    assert out.dtype == np.float64
    out32 = att.recurrent(*(x.astype(np.float32) for x in (pq, pk, V)))
    assert out32.dtype == np.float32
    # one step with a batched state: same as the first token of the sequence
    s, y = LINEAR.step(
        LINEAR.init(4, 2, batch_shape=(3, 2)),
        pq[..., 0, :],
        pk[..., 0, :],
        V[..., 0, :],
    )
    assert np.allclose(y, out[..., 0, :])
    assert s.S.shape == (3, 2, 4, 2)


_D, _DV = 4, 2


_GOOD = {
    "S": np.zeros((3, _D, _DV)),
    "z": np.zeros((3, _D)),
    "phi_q": np.ones((3, _D)),
    "phi_k": np.ones((3, _D)),
    "v": np.ones((3, _DV)),
}


@pytest.mark.parametrize("odd", ["S", "z", "phi_q", "phi_k", "v"])
def test_step_batch_mismatch_in_any_one_argument_is_refused(odd):
    args = dict(_GOOD)
    bad = args[odd]
    args[odd] = np.concatenate([bad, bad[:1]])[None].repeat(2, axis=0)  # batch (2, 4)
    state = att.State(args["S"], args["z"])
    shapes = (
        args["S"].shape[:-2],
        args["phi_q"].shape[:-1],
        args["phi_k"].shape[:-1],
        args["v"].shape[:-1],
    )
    message = (
        r"^the leading \(batch/head\) dimensions of `state`, `phi_q`, `phi_k` and `v` do not "
        r"broadcast: " + re.escape(", ".join(str(s) for s in shapes)) + "$"
    )
    with pytest.raises(InvalidArgument, match=message):
        LINEAR.step(state, args["phi_q"], args["phi_k"], args["v"])


@pytest.mark.parametrize("wide", ["S", "z", "phi_q", "phi_k", "v", None])
def test_step_result_dtype_is_float64_if_any_argument_is(wide):
    args = {k: v.astype(np.float32) for k, v in _GOOD.items()}
    if wide is not None:
        args[wide] = args[wide].astype(np.float64)
    new, y = LINEAR.step(att.State(args["S"], args["z"]), args["phi_q"], args["phi_k"], args["v"])
    expected = np.float32 if wide is None else np.float64
    assert y.dtype == new.S.dtype == new.z.dtype == expected


def test_recurrent_float32_equals_float32_steps_bitwise():
    pq = (RNG.random((9, 3)) + 0.1).astype(np.float32)
    pk = (RNG.random((9, 3)) + 0.1).astype(np.float32)
    V = RNG.normal(size=(9, 2)).astype(np.float32)
    state = LINEAR.init(3, 2, dtype=np.float32)
    ys = []
    for t in range(9):
        state, y = LINEAR.step(state, pq[t], pk[t], V[t])
        ys.append(y)
    out, final = att.recurrent(pq, pk, V, return_state=True)
    assert out.dtype == np.float32 and final.S.dtype == np.float32
    assert np.array_equal(out, np.array(ys))
    assert np.array_equal(final.S, state.S) and np.array_equal(final.z, state.z)


# ---------------------------------------------------------------------------
# Bad input to init and step; what they never write into
# ---------------------------------------------------------------------------


#: init and step of a recurrence (id, call, error, message regex from the start)
RECURRENCE_BAD = [
    (
        "init-D-zero",
        lambda: LINEAR.init(0, 2),
        InvalidArgument,
        r"^`D` must be >= 1, got 0",
    ),
    (
        "init-D-float",
        lambda: LINEAR.init(2.5, 2),
        InvalidArgument,
        r"^`D` must be an integer",
    ),
    (
        "init-dv-zero",
        lambda: LINEAR.init(2, 0),
        InvalidArgument,
        r"^`d_v` must be >= 1, got 0",
    ),
    (
        "init-dv-str",
        lambda: LINEAR.init(2, "2"),
        InvalidArgument,
        r"^`d_v` must be an integer",
    ),
    (
        "init-batch-list",
        lambda: LINEAR.init(2, 2, batch_shape=[3]),
        InvalidArgument,
        r"^`batch_shape` must be a tuple of ints, got list \[3\]",
    ),
    (
        "init-batch-zero",
        lambda: LINEAR.init(2, 2, batch_shape=(0,)),
        InvalidArgument,
        r"^`batch_shape` must be >= 1, got 0",
    ),
    (
        "init-batch-float",
        lambda: LINEAR.init(2, 2, batch_shape=(2.0,)),
        InvalidArgument,
        r"^`batch_shape` must be an integer",
    ),
    (
        "init-dtype-f16",
        lambda: LINEAR.init(2, 2, dtype=np.float16),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got float16",
    ),
    (
        "init-dtype-int",
        lambda: LINEAR.init(2, 2, dtype=int),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got int64",
    ),
    (
        "init-dtype-junk",
        lambda: LINEAR.init(2, 2, dtype="junk"),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got 'junk'",
    ),
    (
        "step-state-tuple",
        lambda: LINEAR.step((1, 2), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state` must be a State from init\(\), got tuple \(1, 2\)",
    ),
    (
        "step-state-S-1d",
        lambda: LINEAR.step(att.State(np.zeros(4), np.zeros(4)), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.S` must have at least 2 dimensions",
    ),
    (
        "step-state-S-nan",
        lambda: LINEAR.step(att.State(np.full((4, 2), np.nan), np.zeros(4)), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.S` must be finite",
    ),
    (
        "step-state-z-0d",
        lambda: LINEAR.step(att.State(np.zeros((4, 2)), 0.0), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.z` must have at least 1 dimensions",
    ),
    (
        "step-state-z-D",
        lambda: LINEAR.step(att.State(np.zeros((4, 2)), np.zeros(3)), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.z` must have last dimension D = 4, got array of shape \(3,\)",
    ),
    (
        "step-phi_q-D",
        lambda: LINEAR.step(S0, PQ[0, :3], PK[0], V[0]),
        InvalidArgument,
        r"^`phi_q` must have last dimension D = 4 \(from the state\), got array of shape \(3,\)",
    ),
    (
        "step-phi_k-D",
        lambda: LINEAR.step(S0, PQ[0], PK[0, :3], V[0]),
        InvalidArgument,
        r"^`phi_k` must have last dimension D = 4 \(from the state\), got array of shape \(3,\)",
    ),
    (
        "step-v-dv",
        lambda: LINEAR.step(S0, PQ[0], PK[0], V[0, :1]),
        InvalidArgument,
        r"^`v` must have last dimension d_v = 2 \(from the state\), got array of shape \(1,\)",
    ),
    (
        "step-phi_q-0d",
        lambda: LINEAR.step(S0, 1.0, PK[0], V[0]),
        InvalidArgument,
        r"^`phi_q` must have at least 1 dimensions",
    ),
    (
        "step-phi_k-0d",
        lambda: LINEAR.step(S0, PQ[0], 1.0, V[0]),
        InvalidArgument,
        r"^`phi_k` must have at least 1 dimensions",
    ),
    (
        "step-v-0d",
        lambda: LINEAR.step(S0, PQ[0], PK[0], 1.0),
        InvalidArgument,
        r"^`v` must have at least 1 dimensions",
    ),
    (
        "step-v-nan",
        lambda: LINEAR.step(S0, PQ[0], PK[0], [np.nan, 1.0]),
        InvalidArgument,
        r"^`v` must be finite",
    ),
    (
        "step-broadcast",
        lambda: LINEAR.step(LINEAR.init(4, 2, batch_shape=(3,)), PQ[:2], PK[:2], V[:2]),
        InvalidArgument,
        r"^the leading \(batch/head\) dimensions of `state`, `phi_q`, `phi_k` and `v` do not "
        r"broadcast: \(3,\), \(2,\), \(2,\), \(2,\)",
    ),
    (
        "step-action",
        lambda: LINEAR.step(S0, PQ[0], PK[0], V[0], on_bad_normalizer="skip"),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 'skip'",
    ),
    (
        "step NaN",
        lambda: LINEAR.step(LINEAR.init(2, 1), [np.nan, 1.0], [1.0, 1.0], [1.0]),
        InvalidArgument,
        r"^`phi_q` must be finite",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in RECURRENCE_BAD], ids=[c[0] for c in RECURRENCE_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message matched from the start."""
    with pytest.raises(error, match=message):
        call()


def test_step_and_init_do_not_write_into_the_state_or_inputs():
    state = LINEAR.init(4, 2)
    for arr in (state.S, state.z):
        arr.setflags(write=False)
    q, k, v = readonly(PQ[0]), readonly(PK[0]), readonly(V[0])
    new, y = LINEAR.step(state, q, k, v)
    assert not state.S.any() and not state.z.any()
    assert np.array_equal(new.S, np.outer(PK[0], V[0]))
    assert np.array_equal(new.z, PK[0])
    assert np.allclose(y, V[0])  # one token: the output is its own value


@settings(max_examples=40, deadline=None)
@given(extreme_arrays(positive=True))
def test_step_answers_or_fails_cleanly(t):
    a, b, c = t
    state = LINEAR.init(a.shape[1], c.shape[1])
    answer_or_clean_error(lambda x, y, z: LINEAR.step(state, x, y, z)[1], a[0], b[0], c[0])
