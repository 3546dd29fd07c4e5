"""Bad input to the delta rule and its kin is refused by name, before any work (C22-C24).

One row per way of being wrong, for every public callable of the four
families (forms, bounds, backward passes, recurrences): a NaN, a step or a
gate outside its interval, a shape that does not broadcast, a bad option, a
bad cotangent.  The registry-driven checks of every form are in
:mod:`tests.attention.families.test_transitions`.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernelcheck.attention as A
from kernelcheck.attention import State
from kernelcheck.errors import InvalidArgument

N, D, DV = 5, 4, 2
_rng = np.random.default_rng(0)
Q, K = _rng.standard_normal((2, N, D))
K /= np.linalg.norm(K, axis=-1, keepdims=True)
V = _rng.standard_normal((N, DV))
BETA, GATE, KEY_GATES = np.full(N, 0.5), np.full(N, 0.9), np.full((N, D), 0.9)
READ, WRITE = -K, 0.5 * K
COT = np.ones((N, DV))
NAN_Q = Q.copy()
NAN_Q[1, 2] = np.nan
ONE_NAN = np.r_[0.5, np.nan, 0.5, 0.5, 0.5]
STEP = r"must be a step >= 0, one per token and head, but"
SCALAR_GATE = r"^`gates` must be a gate in \(0, 1\], but"
CHANNEL_GATES = r"^`gates` must be gates in \[0, 1\], one per key channel, but"

BAD_DELTA = [
    ("delta_recurrent-nan-q", lambda: A.delta_recurrent(NAN_Q, K, V, BETA),
     r"^`q` must be finite, but 1 entry is NaN or Inf"),
    ("delta_recurrent-l2norm-str", lambda: A.delta_recurrent(Q, K, V, BETA, qk_l2norm="yes"),
     r"^`qk_l2norm` must be True or False, got str 'yes'"),
    ("delta_recurrent-scale-negative", lambda: A.delta_recurrent(Q, K, V, BETA, scale=-1.0),
     r"^`scale` must be > 0, got -1.0"),
    ("delta_recurrent-state-shape",
     lambda: A.delta_recurrent(Q, K, V, BETA, initial_state=State(np.zeros((3, DV)))),
     r"^`initial_state.S` must have shape \(\.\.\., D, d_v\) = \(\.\.\., 4, 2\)"),
    ("delta_chunked-beta-negative", lambda: A.delta_chunked(Q, K, V, -BETA), "^`beta` " + STEP),
    ("delta_chunked-chunk-zero", lambda: A.delta_chunked(Q, K, V, BETA, chunk_size=0),
     r"^`chunk_size` must be >= 1, got 0"),
    ("delta_parallel-beta-shape", lambda: A.delta_parallel(Q, K, V, np.ones(4)),
     r"^`beta` must broadcast to \(5,\), got array of shape \(4,\)"),
    ("delta_error_bound-bidirectional", lambda: A.delta_error_bound(Q, K, V, BETA, causal=False),
     r"^`causal` must be True: a recurrence orders the tokens"),
    ("delta_error_bound-dtype", lambda: A.delta_error_bound(Q, K, V, BETA, dtype="int8"),
     r"^`dtype` must be float64 or float32, got int8"),
    ("delta_vjp-cotangent-shape", lambda: A.delta_vjp(Q, K, V, BETA, np.ones((N, DV + 1))),
     r"^`G` must have the output's shape \(5, 2\), got array of shape \(5, 3\)"),
    ("delta_recurrence-init-D", lambda: A.delta_recurrence().init(0, DV),
     r"^`D` must be >= 1, got 0"),
    ("delta_recurrence-step-beta",
     lambda: A.delta_recurrence().step(A.delta_recurrence().init(D, DV), Q[0], K[0], V[0], -1.0),
     "^`beta` " + STEP),
]  # fmt: skip

BAD_GATED_DELTA = [
    ("gated_delta_recurrent-gate-above-one",
     lambda: A.gated_delta_recurrent(Q, K, V, GATE + 1.0, BETA), SCALAR_GATE),
    ("gated_delta_chunked-gate-zero",
     lambda: A.gated_delta_chunked(Q, K, V, np.r_[0.5, 0.0, 0.5, 0.5, 0.5], BETA),
     SCALAR_GATE + r" 1 value\(s\) are not \(first at index \(1,\): 0.0\)"),
    ("gated_delta_parallel-beta-nan", lambda: A.gated_delta_parallel(Q, K, V, GATE, ONE_NAN),
     r"^`beta` must be finite, but 1 entry is NaN or Inf"),
    ("gated_delta_error_bound-gate-str",
     lambda: A.gated_delta_error_bound(Q, K, V, "0.9", BETA),
     r"^`gates` must be a numeric array, got str '0.9'"),
    ("gated_delta_vjp-cotangent-nan",
     lambda: A.gated_delta_vjp(Q, K, V, GATE, BETA, np.full((N, DV), np.nan)),
     r"^`G` must be finite, but 10 entries are NaN or Inf"),
    ("gated_delta_recurrence-step-gate",
     lambda: A.gated_delta_recurrence().step(A.gated_delta_recurrence().init(D, DV), Q[0], K[0],
                                             V[0], 1.5, 0.5),
     SCALAR_GATE),
]  # fmt: skip

BAD_KDA = [
    ("kda_recurrent-gates-shape", lambda: A.kda_recurrent(Q, K, V, np.full((N, D + 1), 0.9), BETA),
     r"^`gates` must broadcast to \(5, 4\), got array of shape \(5, 5\)"),
    ("kda_chunked-gate-negative", lambda: A.kda_chunked(Q, K, V, -KEY_GATES, BETA),
     CHANNEL_GATES),
    ("kda_error_bound-beta-negative", lambda: A.kda_error_bound(Q, K, V, KEY_GATES, -BETA),
     "^`beta` " + STEP),
    ("kda_vjp-q-width", lambda: A.kda_vjp(Q[:, :3], K, V, KEY_GATES, BETA, COT),
     r"^`q` and `k` must have the same last dimension D"),
    ("kda_recurrence-step-gate",
     lambda: A.kda_recurrence().step(A.kda_recurrence().init(D, DV), Q[0], K[0], V[0],
                                     KEY_GATES[0] + 1.0, 0.5),
     CHANNEL_GATES),
]  # fmt: skip

BAD_DPLR = [
    ("dplr_recurrent-a-nan",
     lambda: A.dplr_recurrent(Q, K, V, np.where(np.arange(D) == 1, np.nan, READ), WRITE,
                              KEY_GATES),
     r"^`a` must be finite, but 5 entries are NaN or Inf"),
    ("dplr_chunked-b-shape", lambda: A.dplr_chunked(Q, K, V, READ, WRITE[:, :3], KEY_GATES),
     r"^`b` must broadcast to \(5, 4\), got array of shape \(5, 3\)"),
    ("dplr_error_bound-gate-above-one",
     lambda: A.dplr_error_bound(Q, K, V, READ, WRITE, KEY_GATES + 1.0), CHANNEL_GATES),
    ("dplr_vjp-cotangent-str", lambda: A.dplr_vjp(Q, K, V, READ, WRITE, KEY_GATES, "G"),
     r"^`G` must be a numeric array, got str 'G'"),
    ("dplr_recurrence-step-gate",
     lambda: A.dplr_recurrence().step(A.dplr_recurrence().init(D, DV), Q[0], K[0], V[0], READ[0],
                                      WRITE[0], -KEY_GATES[0]),
     CHANNEL_GATES),
    ("dplr_recurrence-init-d_v", lambda: A.dplr_recurrence().init(D, "x"),
     r"^`d_v` must be an integer, got str 'x'"),
]  # fmt: skip

BAD_CALLS = BAD_DELTA + BAD_GATED_DELTA + BAD_KDA + BAD_DPLR


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_table(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_no_row_mutates_the_arrays_it_was_handed():
    arrays = (Q, K, V, BETA, GATE, KEY_GATES, READ, WRITE, COT, NAN_Q)
    copies = [a.copy() for a in arrays]
    for _, call, _ in BAD_CALLS:
        with pytest.raises(InvalidArgument):
            call()
    for a, c in zip(arrays, copies, strict=True):
        assert np.array_equal(a, c, equal_nan=True)
