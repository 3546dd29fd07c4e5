"""Reliability of the attention forms under bad input and extreme values.

The contract (docs/reliability.md): every public function of
:mod:`kernelcheck.attention` either returns a correct answer or raises a
clean error -- ``InvalidArgument`` whose message opens with the argument in
backticks, ``NumericalFailure`` or ``BadNormalizer`` -- never a bare NumPy
traceback and never a result computed from NaN.  No function writes into the
caller's arrays (checked with read-only inputs).  The same contract for
``verify.attention`` is in ``tests/verify/test_reliability.py``.

The messages are matched case-sensitively from their start, so that the
argument named in backticks is the one the caller passed.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as A
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential, Linear, kernel_from_function

#: The linear recurrence's init / step pair (claims C11, C14).
LINEAR = A.linear_recurrence()

CLEAN = (InvalidArgument, NumericalFailure, BadNormalizer)
RNG = np.random.default_rng(20240611)
Q = RNG.normal(size=(5, 3))
K = RNG.normal(size=(5, 3))
V = RNG.normal(size=(5, 2))
PQ = np.abs(RNG.normal(size=(5, 4))) + 0.1  # positive features: normalisers > 0
PK = np.abs(RNG.normal(size=(5, 4))) + 0.1
S0 = LINEAR.init(4, 2)


def _readonly(a):
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _gram_of(value):
    """A user 'kernel' returning ``value`` as its Gram block for every request."""
    return lambda X, Y: value(X.shape[0], Y.shape[0])


# ---------------------------------------------------------------------------
# Bad-input table: (id, call, error, message regex from the start)
# ---------------------------------------------------------------------------


TRIPLE_FORMS = {
    "softmax": (lambda a, b, c, **kw: A.softmax(a, b, c, **kw), ("Q", "K", "V"), "d", Q, K),
    "kernelized": (
        lambda a, b, c, **kw: A.kernelized(a, b, c, Exponential(0.5), **kw),
        ("Q", "K", "V"),
        "d",
        Q,
        K,
    ),
    "parallel": (A.parallel, ("phi_q", "phi_k", "V"), "D", PQ, PK),
    "recurrent": (A.recurrent, ("phi_q", "phi_k", "V"), "D", PQ, PK),
    "chunked": (A.chunked, ("phi_q", "phi_k", "V"), "D", PQ, PK),
    "linear_error_bound": (A.linear_error_bound, ("phi_q", "phi_k", "V"), "D", PQ, PK),
    "softmax_error_bound": (A.softmax_error_bound, ("Q", "K", "V"), "d", Q, K),
    "kernelized_error_bound": (
        lambda a, b, c, **kw: A.kernelized_error_bound(a, b, c, Exponential(0.5), **kw),
        ("Q", "K", "V"),
        "d",
        Q,
        K,
    ),
}


#: The forms of TRIPLE_FORMS that are causal whatever the call says.
CAUSAL_ONLY = ("recurrent", "chunked")


def _triple_cases():
    cases = []
    for form, (fn, names, what, A0, B0) in TRIPLE_FORMS.items():
        qn, kn, vn = names
        good = (A0, B0, V)
        for pos, name in enumerate(names):
            last = what if pos < 2 else "d_v"

            def with_arg(value, pos=pos, fn=fn, good=good):
                args = list(good)
                args[pos] = value
                return lambda: fn(*args)

            cases += [
                (
                    f"{form}-{name}-1d",
                    with_arg(np.ones(3)),
                    InvalidArgument,
                    rf"^`{name}` must have shape \(\.\.\., n, {last}\) with at least 2 dimensions, "
                    r"got array of shape \(3,\)",
                ),
                (
                    f"{form}-{name}-nan",
                    with_arg(np.full_like(good[pos], np.nan)),
                    InvalidArgument,
                    rf"^`{name}` must be finite",
                ),
                (
                    f"{form}-{name}-inf",
                    with_arg(np.full_like(good[pos], -np.inf)),
                    InvalidArgument,
                    rf"^`{name}` must be finite",
                ),
                (
                    f"{form}-{name}-empty",
                    with_arg(np.ones((0, good[pos].shape[1]))),
                    InvalidArgument,
                    rf"^`{name}` must not be empty",
                ),
                (
                    f"{form}-{name}-complex",
                    with_arg(good[pos] + 1j),
                    InvalidArgument,
                    rf"^`{name}` must be real",
                ),
                (
                    f"{form}-{name}-object",
                    with_arg(good[pos].astype(object)),
                    InvalidArgument,
                    rf"^`{name}` must be a real numeric array",
                ),
                (
                    f"{form}-{name}-str",
                    with_arg("abc"),
                    InvalidArgument,
                    rf"^`{name}` must be a numeric array, got str",
                ),
                (
                    f"{form}-{name}-longdouble",
                    with_arg(good[pos].astype(np.longdouble)),
                    InvalidArgument,
                    rf"^`{name}` has extended precision dtype",
                ),
            ]
        causal = form in CAUSAL_ONLY
        if causal:  # queries, keys and values of one length
            n_msg = (
                rf"^`{qn}`, `{kn}` and `{vn}` must have the same number of tokens n \(axis -2\) "
                r"for causal attention, got 5, 4 and 5"
            )
            nv_msg = n_msg.replace("5, 4 and 5", "5, 5 and 3")
        else:  # cross-attention: any number of queries, keys and values of one length
            n_msg = (
                rf"^`{kn}` and `{vn}` must have the same number of tokens \(axis -2\), "
                r"got 4 and 5"
            )
            nv_msg = n_msg.replace("got 4 and 5", "got 5 and 3")
        cases += [
            (
                f"{form}-n-mismatch",
                lambda fn=fn, A0=A0, B0=B0: fn(A0, B0[:4], V),
                InvalidArgument,
                n_msg,
            ),
            (
                f"{form}-nv-mismatch",
                lambda fn=fn, A0=A0, B0=B0: fn(A0, B0, V[:3]),
                InvalidArgument,
                nv_msg,
            ),
            (
                f"{form}-last-mismatch",
                lambda fn=fn, A0=A0, B0=B0: fn(A0, B0[:, :2], V),
                InvalidArgument,
                rf"^`{qn}` and `{kn}` must have the same last dimension {what}, got array of "
                r"shape \(5, \d\)",
            ),
            (
                f"{form}-batch-mismatch",
                lambda fn=fn, A0=A0, B0=B0: fn(A0[None], B0, V),
                InvalidArgument,
                rf"^the leading \(batch/head\) dimensions of `{qn}`, `{kn}` and `{vn}` must agree, "
                r"got \(1,\), \(\) and \(\)",
            ),
            (
                f"{form}-causal-int",
                lambda fn=fn, A0=A0, B0=B0, form=form: (
                    fn(A0, B0, V, causal=1)
                    if form not in ("recurrent", "chunked")
                    else fn(A0, B0, V, on_bad_normalizer=1)
                ),
                InvalidArgument,
                r"^`causal` must be True or False, got int 1"
                if form not in ("recurrent", "chunked")
                else r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 1",
            ),
        ]
    return cases


BAD_CALLS = _triple_cases() + [
    # softmax / softmax_error_bound: scale
    (
        "softmax-scale-str",
        lambda: A.softmax(Q, K, V, scale="a"),
        InvalidArgument,
        r"^`scale` must be a real number, got str 'a'",
    ),
    (
        "softmax-scale-bool",
        lambda: A.softmax(Q, K, V, scale=True),
        InvalidArgument,
        r"^`scale` must be a real number, got bool True",
    ),
    (
        "softmax-scale-nan",
        lambda: A.softmax(Q, K, V, scale=float("nan")),
        InvalidArgument,
        r"^`scale` must be finite, got nan",
    ),
    (
        "softmax-scale-neg",
        lambda: A.softmax(Q, K, V, scale=-1.0),
        InvalidArgument,
        r"^`scale` must be > 0, got -1\.0",
    ),
    (
        "softmax-scale-zero",
        lambda: A.softmax(Q, K, V, scale=0),
        InvalidArgument,
        r"^`scale` must be > 0, got 0",
    ),
    (
        "softmax-scale-array",
        lambda: A.softmax(Q, K, V, scale=np.ones(2)),
        InvalidArgument,
        r"^`scale` must be a real number, got array of shape \(2,\)",
    ),
    (
        "seb-scale-inf",
        lambda: A.softmax_error_bound(Q, K, V, scale=float("inf")),
        InvalidArgument,
        r"^`scale` must be finite, got inf",
    ),
    # kernelized: user kernels that misbehave
    (
        "kernelized-kernel-not-callable",
        lambda: A.kernelized(Q, K, V, 3),
        InvalidArgument,
        r"^`kernel` must be callable, got int 3",
    ),
    (
        "kernelized-kernel-raises",
        lambda: A.kernelized(Q, K, V, lambda X, Y: 1 / 0),
        InvalidArgument,
        r"^`kernel` raised ZeroDivisionError: division by zero",
    ),
    (
        "kernelized-kernel-shape",
        lambda: A.kernelized(Q, K, V, lambda X, Y: np.ones(3)),
        InvalidArgument,
        r"^`kernel` returned a Gram block of shape \(3,\) for inputs of shapes \(5, 3\) and "
        r"\(5, 3\); expected \(5, 5\)",
    ),
    (
        "kernelized-kernel-none",
        lambda: A.kernelized(Q, K, V, lambda X, Y: None),
        InvalidArgument,
        r"^`kernel` returned a Gram block of shape \(\)",
    ),
    (
        "kernelized-kernel-nan",
        lambda: A.kernelized(Q, K, V, _gram_of(lambda n, m: np.full((n, m), np.nan))),
        InvalidArgument,
        r"^`kernel` returned a non-finite value .*nan.* at entry \(0, 0\)",
    ),
    (
        "kernelized-kernel-inf-causal",
        lambda: A.kernelized(
            Q, K, V, _gram_of(lambda n, m: np.where(np.eye(n, m) > 0, np.inf, 1)), causal=True
        ),
        InvalidArgument,
        r"^`kernel` returned a non-finite value .*inf.* at entry \(0, 0\)",
    ),
    (
        "kernelized-kernel-complex",
        lambda: A.kernelized(Q, K, V, _gram_of(lambda n, m: np.ones((n, m)) + 1j)),
        InvalidArgument,
        r"^`kernel` returned array of shape \(5, 5\) and dtype complex128; expected real",
    ),
    (
        "kernelized-kernel-strings",
        lambda: A.kernelized(Q, K, V, _gram_of(lambda n, m: np.full((n, m), "a"))),
        InvalidArgument,
        r"^`kernel` returned array of shape \(5, 5\) and dtype <U1; expected real numbers",
    ),
    (
        "kernelized-action",
        lambda: A.kernelized(Q, K, V, Linear(), on_bad_normalizer="eps"),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 'eps'",
    ),
    (
        "kernelized-function-kernel-raises",
        lambda: A.kernelized(Q, K, V, kernel_from_function(lambda x, y: 1 / 0)),
        InvalidArgument,
        r"^`f` \(<lambda>\) raised ZeroDivisionError",
    ),
    # parallel: actions
    (
        "parallel-action",
        lambda: A.parallel(PQ, PK, V, on_bad_normalizer="ignore"),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 'ignore'",
    ),
    (
        "chunked-action",
        lambda: A.chunked(PQ, PK, V, on_bad_normalizer=None),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got None",
    ),
    (
        "recurrent-return-state",
        lambda: A.recurrent(PQ, PK, V, return_state="yes"),
        InvalidArgument,
        r"^`return_state` must be True or False, got str 'yes'",
    ),
    (
        "chunked-size-zero",
        lambda: A.chunked(PQ, PK, V, chunk_size=0),
        InvalidArgument,
        r"^`chunk_size` must be >= 1, got 0",
    ),
    (
        "chunked-size-float",
        lambda: A.chunked(PQ, PK, V, chunk_size=2.0),
        InvalidArgument,
        r"^`chunk_size` must be an integer \(got the float 2\.0",
    ),
    (
        "chunked-size-bool",
        lambda: A.chunked(PQ, PK, V, chunk_size=True),
        InvalidArgument,
        r"^`chunk_size` must be an integer",
    ),
    # init
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
    # step
    (
        "step-state-tuple",
        lambda: LINEAR.step((1, 2), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state` must be a State from init\(\), got tuple \(1, 2\)",
    ),
    (
        "step-state-S-1d",
        lambda: LINEAR.step(A.State(np.zeros(4), np.zeros(4)), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.S` must have at least 2 dimensions",
    ),
    (
        "step-state-S-nan",
        lambda: LINEAR.step(A.State(np.full((4, 2), np.nan), np.zeros(4)), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.S` must be finite",
    ),
    (
        "step-state-z-0d",
        lambda: LINEAR.step(A.State(np.zeros((4, 2)), 0.0), PQ[0], PK[0], V[0]),
        InvalidArgument,
        r"^`state\.z` must have at least 1 dimensions",
    ),
    (
        "step-state-z-D",
        lambda: LINEAR.step(A.State(np.zeros((4, 2)), np.zeros(3)), PQ[0], PK[0], V[0]),
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
    # error bounds: dtype, extra_ops, kernel
    (
        "leb-dtype-f16",
        lambda: A.linear_error_bound(PQ, PK, V, dtype=np.float16),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got float16",
    ),
    (
        "leb-dtype-junk",
        lambda: A.linear_error_bound(PQ, PK, V, dtype="junk"),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got 'junk'",
    ),
    (
        "leb-extra-neg",
        lambda: A.linear_error_bound(PQ, PK, V, extra_ops=-1),
        InvalidArgument,
        r"^`extra_ops` must be >= 0, got -1",
    ),
    (
        "seb-extra-float",
        lambda: A.softmax_error_bound(Q, K, V, extra_ops=1.5),
        InvalidArgument,
        r"^`extra_ops` must be an integer",
    ),
    (
        "seb-dtype-int",
        lambda: A.softmax_error_bound(Q, K, V, dtype=np.int32),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got int32",
    ),
    (
        "keb-extra-neg",
        lambda: A.kernelized_error_bound(Q, K, V, Exponential(), extra_ops=-2),
        InvalidArgument,
        r"^`extra_ops` must be >= 0, got -2",
    ),
    (
        "keb-dtype-f16",
        lambda: A.kernelized_error_bound(Q, K, V, Exponential(), dtype="float16"),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got float16",
    ),
    (
        "keb-no-error-bound",
        lambda: A.kernelized_error_bound(Q, K, V, lambda X, Y: X @ Y.T),
        InvalidArgument,
        r"^`kernel` must provide error_bound\(X, Y\) for an error model, got function",
    ),
    (
        "keb-function-kernel",
        lambda: A.kernelized_error_bound(Q, K, V, kernel_from_function(lambda x, y: 1.0)),
        InvalidArgument,
        r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error model",
    ),
    (
        "keb-not-callable",
        lambda: A.kernelized_error_bound(Q, K, V, "exp"),
        InvalidArgument,
        r"^`kernel` must be callable, got str 'exp'",
    ),
    # cost_model
    (
        "cost-form",
        lambda: A.cost_model("flash", 4, 2, 2, 2),
        InvalidArgument,
        # every registered form, in the registry's order
        r"^`form` must be one of 'softmax', 'kernelized', 'parallel', 'recurrent', 'chunked', "
        r"'gated_parallel', 'gated_recurrent', 'gated_chunked'"
        + "".join(f", '{name}'" for name in list(A.FORMS)[8:])
        + r"; got 'flash'",
    ),
    (
        "cost-n",
        lambda: A.cost_model("softmax", 0, 2, 2, 2),
        InvalidArgument,
        r"^`n` must be >= 1, got 0",
    ),
    (
        "cost-d",
        lambda: A.cost_model("softmax", 4, 0, 2, 2),
        InvalidArgument,
        r"^`d` must be >= 1, got 0",
    ),
    (
        "cost-D",
        lambda: A.cost_model("parallel", 4, 2, 0, 2),
        InvalidArgument,
        r"^`D` must be >= 1, got 0",
    ),
    (
        "cost-d_v",
        lambda: A.cost_model("parallel", 4, 2, 2, 0),
        InvalidArgument,
        r"^`d_v` must be >= 1, got 0",
    ),
    (
        "cost-chunk",
        lambda: A.cost_model("chunked", 4, 2, 2, 2, 0),
        InvalidArgument,
        r"^`chunk_size` must be >= 1, got 0",
    ),
    (
        "cost-causal-int",
        lambda: A.cost_model("softmax", 4, 2, 2, 2, causal=0),
        InvalidArgument,
        r"^`causal` must be True or False, got int 0",
    ),
    (
        "cost-recurrent-bidirectional",
        lambda: A.cost_model("recurrent", 4, 2, 2, 2, causal=False),
        InvalidArgument,
        r"^`causal` must be True for form 'recurrent' \(it is causal only\)",
    ),
    (
        "cost-chunked-bidirectional",
        lambda: A.cost_model("chunked", 4, 2, 2, 2, causal=False),
        InvalidArgument,
        r"^`causal` must be True for form 'chunked' \(it is causal only\)",
    ),
]


#: The gated family (C20) and the registry: gates, states and names refused up front.
G = np.full(5, 0.9)
REC = A.gated_recurrence()
BAD_GATED_FORMS = {  # the gated forms the rows below call
    "gated_parallel": A.gated_parallel,
    "gated_recurrent": A.gated_recurrent,
    "gated_chunked": A.gated_chunked,
    "gated_error_bound": A.gated_error_bound,
}
for _name, _fn in BAD_GATED_FORMS.items():
    BAD_CALLS += [
        (
            f"{_name}-gate-zero",
            lambda fn=_fn: fn(PQ, PK, V, np.r_[0.5, 0.0, 0.5, 0.5, 0.5]),
            InvalidArgument,
            r"^`gates` must lie in \(0, 1\], but 1 do not \(first at index \(1,\): 0.0\)",
        ),
        (
            f"{_name}-gate-above-one",
            lambda fn=_fn: fn(PQ, PK, V, 1.5),
            InvalidArgument,
            r"^`gates` must lie in \(0, 1\], but 1 do not \(first at index \(\): 1.5\)",
        ),
        (
            f"{_name}-gate-nan",
            lambda fn=_fn: fn(PQ, PK, V, np.r_[0.5, np.nan, 0.5, 0.5, 0.5]),
            InvalidArgument,
            r"^`gates` must be finite, but 1 entry is NaN or Inf",
        ),
        (
            f"{_name}-gate-shape",
            lambda fn=_fn: fn(PQ, PK, V, np.full(4, 0.5)),
            InvalidArgument,
            r"^`gates` must broadcast to \(5,\) \(batch \+ \(n,\)",
        ),
        (
            f"{_name}-gate-str",
            lambda fn=_fn: fn(PQ, PK, V, "0.5"),
            InvalidArgument,
            r"^`gates` must be a numeric array, got str",
        ),
    ]
for _name in ("gated_recurrent", "gated_chunked"):
    BAD_CALLS += [
        (
            f"{_name}-state-shape",
            lambda fn=BAD_GATED_FORMS[_name]: fn(PQ, PK, V, G, initial_state=LINEAR.init(3, 2)),
            InvalidArgument,
            r"^`initial_state.S` must have shape \(\.\.\., D, d_v\) = \(\.\.\., 4, 2\)",
        ),
        (
            f"{_name}-state-type",
            lambda fn=BAD_GATED_FORMS[_name]: fn(PQ, PK, V, G, initial_state=np.zeros((4, 2))),
            InvalidArgument,
            r"^`initial_state` must be a State \(S, z\)",
        ),
        (
            f"{_name}-state-no-z",
            lambda fn=BAD_GATED_FORMS[_name]: fn(
                PQ,
                PK,
                V,
                G,
                normalize=True,
                initial_state=A.linear_recurrence(normalize=False).init(4, 2),
            ),
            InvalidArgument,
            r"^`initial_state.z` is None, but the normalised form needs",
        ),
        (
            f"{_name}-normalize-int",
            lambda fn=BAD_GATED_FORMS[_name]: fn(PQ, PK, V, G, normalize=1),
            InvalidArgument,
            r"^`normalize` must be True or False, got int 1",
        ),
    ]
BAD_CALLS += [
    (
        "gated_error_bound-bidirectional",
        lambda: A.gated_error_bound(PQ, PK, V, G, causal=False),
        InvalidArgument,
        r"^`causal` must be True: a decay or gate orders the tokens",
    ),
    (
        "gated_chunked-chunk-zero",
        lambda: A.gated_chunked(PQ, PK, V, G, chunk_size=0),
        InvalidArgument,
        r"^`chunk_size` must be >= 1, got 0",
    ),
    (
        "gated_recurrence-normalize",
        lambda: A.gated_recurrence(normalize="no"),
        InvalidArgument,
        r"^`normalize` must be True or False, got str 'no'",
    ),
    (
        "gated_recurrence-init-dtype",
        lambda: REC.init(4, 2, dtype=np.int32),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got int32",
    ),
    (
        "gated_recurrence-step-gate",
        lambda: REC.step(REC.init(4, 2), PQ[0], PK[0], V[0], 2.0),
        InvalidArgument,
        r"^`g` must lie in \(0, 1\]",
    ),
    (
        "gated_recurrence-step-state",
        lambda: REC.step("state", PQ[0], PK[0], V[0], 0.5),
        InvalidArgument,
        r"^`state` must be a State from init\(\), got str",
    ),
    (
        "gated_recurrence-step-normalised-needs-z",
        lambda: A.gated_recurrence(normalize=True).step(REC.init(4, 2), PQ[0], PK[0], V[0], 0.5),
        InvalidArgument,
        r"^`state.z` is None, but this recurrence is normalised",
    ),
    (
        "recurrent-state-bidirectional-parallel",
        lambda: A.linear_error_bound(PQ, PK, V, initial_state=S0),
        InvalidArgument,
        r"^`initial_state` applies to causal attention",
    ),
    (
        "chunked-state-z-shape",
        lambda: A.chunked(PQ, PK, V, initial_state=A.State(S0.S, np.zeros(3))),
        InvalidArgument,
        r"^`initial_state.z` must have last dimension D = 4, got array of shape \(3,\)",
    ),
    (
        "get_form-unknown",
        lambda: A.get_form("flash"),
        InvalidArgument,
        r"^`form` must be one of 'softmax', 'kernelized'",
    ),
    (
        "get_form-type",
        lambda: A.get_form(["softmax"]),
        InvalidArgument,
        r"^`form` must be one of",
    ),
    (
        "get_family-unknown",
        lambda: A.get_family("flash"),
        InvalidArgument,
        r"^`family` must be one of 'softmax', 'kernelized', 'linear', 'gated'",
    ),
    (
        "get_family-type",
        lambda: A.get_family(3),
        InvalidArgument,
        r"^`family` must be one of",
    ),
]


#: The reference backward passes: the cotangent's shape and the usual input checks.
_G = np.ones((5, 2))
BAD_CALLS += [
    ("softmax_vjp-G-shape", lambda: A.softmax_vjp(Q, K, V, np.ones((4, 2))), InvalidArgument,
     r"^`G` must have the output's shape \(5, 2\), got array of shape \(4, 2\)"),
    ("softmax_vjp-G-nan", lambda: A.softmax_vjp(Q, K, V, _G * np.nan), InvalidArgument,
     r"^`G` must be finite"),
    ("softmax_vjp-Q", lambda: A.softmax_vjp(Q[:, :2], K, V, _G), InvalidArgument,
     r"^`Q` and `K` must have the same last dimension"),
    ("softmax_vjp_error_bound-dtype", lambda: A.softmax_vjp_error_bound(Q, K, V, _G, dtype="int8"),
     InvalidArgument, r"^`dtype` must be float64 or float32"),
    ("linear_vjp-G-shape", lambda: A.linear_vjp(PQ, PK, V, np.ones((5, 3))), InvalidArgument,
     r"^`G` must have the output's shape \(5, 2\)"),
    ("linear_vjp-normalize", lambda: A.linear_vjp(PQ, PK, V, _G, normalize="yes"),
     InvalidArgument, r"^`normalize` must be True or False"),
    ("linear_vjp_error_bound-G", lambda: A.linear_vjp_error_bound(PQ, PK, V, "G"),
     InvalidArgument, r"^`G` must be a numeric array, got str"),
]  # fmt: skip


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------
# Accepted dtypes, layouts and read-only inputs: same answer as plain float64
# ---------------------------------------------------------------------------


LINEAR_FORMS = {
    "parallel": lambda a, b, c: A.parallel(a, b, c),
    "parallel-causal": lambda a, b, c: A.parallel(a, b, c, causal=True),
    "recurrent": lambda a, b, c: A.recurrent(a, b, c),
    "chunked": lambda a, b, c: A.chunked(a, b, c, chunk_size=2),
    "linear_error_bound": lambda a, b, c: A.linear_error_bound(a, b, c, causal=True),
}


EXACT_FORMS = {
    "softmax": lambda a, b, c: A.softmax(a, b, c),
    "softmax-causal": lambda a, b, c: A.softmax(a, b, c, causal=True),
    "kernelized": lambda a, b, c: A.kernelized(a, b, c, Exponential(0.5)),
    "softmax_error_bound": lambda a, b, c: A.softmax_error_bound(a, b, c, causal=True),
    "kernelized_error_bound": lambda a, b, c: A.kernelized_error_bound(a, b, c, Exponential()),
}


ALL_FORMS = [(k, f, PQ, PK) for k, f in LINEAR_FORMS.items()] + [
    (k, f, Q, K) for k, f in EXACT_FORMS.items()
]


@pytest.mark.parametrize("name, fn, A0, B0", ALL_FORMS, ids=[f[0] for f in ALL_FORMS])
def test_readonly_noncontiguous_and_lists_give_the_float64_answer(name, fn, A0, B0):
    expected = fn(A0, B0, V)
    # read-only inputs: a write into them would raise
    assert np.array_equal(fn(_readonly(A0), _readonly(B0), _readonly(V)), expected)
    # non-contiguous views holding the same numbers: BLAS may take another
    # summation order, so the two results agree within twice the a-priori bound
    wide = [np.repeat(x, 2, axis=1)[:, ::2] for x in (A0, B0, V)]
    assert not wide[0].flags.c_contiguous
    if name.endswith("error_bound"):
        assert np.array_equal(fn(*wide), expected)
    else:
        bound = (
            A.linear_error_bound(A0, B0, V, causal=name != "parallel")
            if name in LINEAR_FORMS
            else A.softmax_error_bound(A0, B0, V, causal=name.endswith("causal"))
            if name.startswith("softmax")
            else A.kernelized_error_bound(A0, B0, V, Exponential(0.5))
        )
        assert np.all(np.abs(fn(*wide) - expected) <= 2 * bound)
    # nested lists
    assert np.array_equal(fn(A0.tolist(), B0.tolist(), V.tolist()), expected)
    # the caller's arrays are unchanged
    assert np.array_equal(A0, _readonly(A0))


@pytest.mark.parametrize("name, fn, A0, B0", ALL_FORMS, ids=[f[0] for f in ALL_FORMS])
def test_integer_float16_and_bool_inputs_are_promoted_to_float64(name, fn, A0, B0):
    ints = [np.round(4 * x).astype(np.int64) for x in (A0, B0, V)]
    out = fn(*ints)
    assert out.dtype == np.float64
    assert np.array_equal(out, fn(*[x.astype(np.float64) for x in ints]))
    halves = [x.astype(np.float16) for x in (A0, B0, V)]
    out16 = fn(*halves)
    assert out16.dtype == np.float64
    assert np.array_equal(out16, fn(*[x.astype(np.float64) for x in halves]))


@pytest.mark.parametrize("name, fn, A0, B0", ALL_FORMS, ids=[f[0] for f in ALL_FORMS])
def test_float32_inputs_stay_float32(name, fn, A0, B0):
    out = fn(*(x.astype(np.float32) for x in (A0, B0, V)))
    if name.endswith("error_bound"):
        assert out.dtype == np.float64  # bounds are always float64 numbers
    else:
        assert out.dtype == np.float32


def test_step_and_init_do_not_write_into_the_state_or_inputs():
    state = LINEAR.init(4, 2)
    for arr in (state.S, state.z):
        arr.setflags(write=False)
    q, k, v = _readonly(PQ[0]), _readonly(PK[0]), _readonly(V[0])
    new, y = LINEAR.step(state, q, k, v)
    assert not state.S.any() and not state.z.any()
    assert np.array_equal(new.S, np.outer(PK[0], V[0]))
    assert np.array_equal(new.z, PK[0])
    assert np.allclose(y, V[0])  # one token: the output is its own value


@pytest.mark.parametrize("wide", [0, 1, 2])
@pytest.mark.parametrize("name", ["softmax", "parallel", "chunked"])
def test_one_float64_argument_makes_the_result_float64(name, wide):
    fn, _, _, A0, B0 = TRIPLE_FORMS[name]
    args = [x.astype(np.float32) for x in (A0, B0, V)]
    assert fn(*args).dtype == np.float32
    args[wide] = args[wide].astype(np.float64)
    assert fn(*args).dtype == np.float64


@pytest.mark.parametrize("name", ["softmax", "parallel"])
def test_batch_and_last_dimension_messages_describe_every_argument(name):
    fn, (qn, kn, vn), what, A0, B0 = TRIPLE_FORMS[name]
    Bb = np.broadcast_to(B0, (2, 3) + B0.shape)
    Vb = np.broadcast_to(V, (2, 3) + V.shape)
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            f"the leading (batch/head) dimensions of `{qn}`, `{kn}` and `{vn}` must agree, got "
            "(1,), (2, 3) and (2, 3)"
        ),
    ):
        fn(A0[None], Bb, Vb)
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            f"`{qn}` and `{kn}` must have the same last dimension {what}, got array of shape "
            f"{A0.shape} and dtype float64 and array of shape {B0[:, :2].shape} and dtype float64"
        ),
    ):
        fn(A0, B0[:, :2], V)


# ---------------------------------------------------------------------------
# Extreme values: a correct answer or a clean error
# ---------------------------------------------------------------------------


def test_softmax_is_exact_where_exp_of_the_logits_overflows():
    """Logits of +-1e6: the stable form returns the hard-max answer (reference: one-hot weights)."""
    Qb = np.array([[1000.0], [-1000.0], [500.0]])
    Vb = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = A.softmax(Qb, Qb, Vb, scale=1.0)
    # row i attends (almost) only to the key with the largest q_i k_j
    assert np.array_equal(out, Vb[[0, 1, 0]])


def test_softmax_logit_overflow_and_value_overflow_are_clean_errors():
    big = np.full((2, 2), 1e200)
    with pytest.raises(NumericalFailure, match=r"^`softmax` logits overflowed"):
        A.softmax(big, big, np.ones((2, 1)))
    with pytest.raises(NumericalFailure, match=r"^`softmax` attention overflowed: a weighted sum"):
        A.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))


@pytest.mark.parametrize("form", ["parallel", "recurrent", "chunked"])
def test_linear_forms_overflow_is_a_clean_error(form):
    big = np.full((3, 2), 1e200)
    with pytest.raises(NumericalFailure, match=rf"^`{form}` attention overflowed"):
        getattr(A, form)(big, big, np.ones((3, 1)))


@pytest.mark.parametrize("form", ["parallel", "recurrent", "chunked"])
def test_underflowing_features_give_bad_normalizers_not_nan(form):
    tiny = np.full((3, 2), 1e-200)  # phi(q) . phi(k) = 2e-400 underflows to 0
    with pytest.raises(BadNormalizer) as info:
        getattr(A, form)(tiny, tiny, np.ones((3, 1)))
    assert info.value.positions.shape == (3, 1)
    assert np.array_equal(info.value.values, np.zeros(3))
    report = getattr(A, form)(tiny, tiny, np.ones((3, 1)), on_bad_normalizer="report")
    assert not report.ok
    assert report.bad_positions.shape == (3, 1)


def test_tiny_but_representable_features_are_exact():
    """Features of 1e-150: products 1e-300 stay normal, the outputs are exact averages."""
    tiny = np.full((4, 1), 1e-150)
    Vt = np.arange(4.0)[:, None]
    expected = np.cumsum(Vt, axis=0) / np.arange(1, 5)[:, None]  # causal mean of 0..i
    for out in (
        A.parallel(tiny, tiny, Vt, causal=True),
        A.recurrent(tiny, tiny, Vt),
        A.chunked(tiny, tiny, Vt, chunk_size=3),
    ):
        assert np.allclose(out, expected, rtol=1e-14, atol=0)


def test_n1_and_d1_inputs():
    one = np.array([[0.7]])
    v = np.array([[3.0, -1.0]])
    # a single token attends to itself: output equals its value
    for out in (
        A.softmax(one, one, v),
        A.softmax(one, one, v, causal=True),
        A.kernelized(one, one, v, Exponential()),
        A.parallel(one, one, v),
        A.recurrent(one, one, v),
        A.chunked(one, one, v),
    ):
        assert np.array_equal(out, v)


def test_nearly_duplicate_tokens_get_equal_weights():
    """Keys differing in the last bit: softmax weights within rounding of 1/n."""
    k = np.array([[1.0], [np.nextafter(1.0, 2.0)], [np.nextafter(1.0, 0.0)]])
    v = np.array([[0.0], [3.0], [6.0]])
    out = A.softmax(k, k, v)
    bound = A.softmax_error_bound(k, k, v)
    # exact weights are within 3 ulp of 1/3 each: the output is within that of 3
    assert np.all(np.abs(out - 3.0) <= bound + 6.0 * 3 * np.finfo(float).eps)


def test_error_bounds_are_finite_or_inf_never_nan():
    big = np.full((2, 2), 1e200)
    for bound in (
        A.linear_error_bound(big, big, np.ones((2, 1))),
        A.softmax_error_bound(big, big, np.ones((2, 1))),
        A.linear_error_bound(np.zeros((2, 2)), np.zeros((2, 2)), np.ones((2, 1))),
    ):
        assert not np.isnan(bound).any()
        assert (bound >= 0).all()


def test_kernelized_overflowing_kernel_is_a_clean_error():
    with pytest.raises(NumericalFailure, match=r"^Exponential\(\) overflows float64"):
        A.kernelized(np.full((2, 2), 30.0), np.full((2, 2), 30.0), np.ones((2, 1)), Exponential())


# ---------------------------------------------------------------------------
# Hypothesis: arbitrary (including extreme) finite inputs give an answer or a clean error
# ---------------------------------------------------------------------------


EXTREME = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1e-300, -1e-300, 5e-324, 1e-160, 1e154, -1e154, 700.0, -750.0]),
)


@st.composite
def triples(draw, positive=False):
    n = draw(st.integers(1, 4))
    d = draw(st.integers(1, 3))
    dv = draw(st.integers(1, 2))
    elems = EXTREME.map(abs) if positive else EXTREME
    a = draw(hnp.arrays(np.float64, (n, d), elements=elems))
    b = draw(hnp.arrays(np.float64, (n, d), elements=elems))
    c = draw(hnp.arrays(np.float64, (n, dv), elements=EXTREME))
    return a, b, c


def _answer_or_clean_error(fn, *args, **kwargs):
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    copies = [np.array(a, copy=True) for a in arrays]
    for a in arrays:
        a.setflags(write=False)
    try:
        out = fn(*args, **kwargs)
    except CLEAN:
        out = None
    for a, c in zip(arrays, copies):
        assert np.array_equal(a, c)
    if out is not None:
        arr = out.out if isinstance(out, A.AttentionOutput) else out
        if isinstance(out, A.AttentionOutput):
            assert out.ok  # "report" only without bad normalisers here
        assert np.isfinite(arr).all(), "an answer with NaN or Inf in it"
    return out


@settings(max_examples=40, deadline=None)
@given(triples(), st.booleans())
def test_softmax_answers_or_fails_cleanly(t, causal):
    out = _answer_or_clean_error(A.softmax, *t, causal=causal)
    if out is not None:
        # a convex combination of values: within the range of V (up to rounding)
        V_ = t[2]
        lo, hi = V_.min(axis=0), V_.max(axis=0)
        slack = A.softmax_error_bound(*t, causal=causal).max(axis=0)
        assert np.all(out >= lo - slack) and np.all(out <= hi + slack)


@settings(max_examples=40, deadline=None)
@given(triples(), st.booleans())
def test_kernelized_answers_or_fails_cleanly(t, causal):
    _answer_or_clean_error(A.kernelized, *t, Exponential(0.5), causal=causal)


@settings(max_examples=40, deadline=None)
@given(triples(positive=True), st.sampled_from(["parallel", "recurrent", "chunked"]))
def test_linear_forms_answer_or_fail_cleanly(t, form):
    _answer_or_clean_error(getattr(A, form), *t)


@settings(max_examples=40, deadline=None)
@given(triples(positive=True))
def test_step_answers_or_fails_cleanly(t):
    a, b, c = t
    state = LINEAR.init(a.shape[1], c.shape[1])
    _answer_or_clean_error(lambda x, y, z: LINEAR.step(state, x, y, z)[1], a[0], b[0], c[0])


@settings(max_examples=40, deadline=None)
@given(triples(positive=True), st.booleans())
def test_linear_error_bound_is_never_nan(t, causal):
    try:
        E = A.linear_error_bound(*t, causal=causal)
    except CLEAN:
        return
    assert not np.isnan(E).any() and (E >= 0).all()


@settings(max_examples=40, deadline=None)
@given(triples(), st.booleans())
def test_softmax_error_bound_is_never_nan(t, causal):
    try:
        E = A.softmax_error_bound(*t, causal=causal)
    except CLEAN:
        return
    assert not np.isnan(E).any() and (E >= 0).all()


@settings(max_examples=40, deadline=None)
@given(triples(), st.booleans())
def test_kernelized_error_bound_is_never_nan(t, causal):
    try:
        E = A.kernelized_error_bound(*t, Exponential(0.5), causal=causal)
    except CLEAN:
        return
    assert not np.isnan(E).any() and (E >= 0).all()


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["softmax", "kernelized", "parallel", "recurrent", "chunked"]),
    st.integers(1, 10**6),
    st.integers(1, 512),
    st.integers(1, 4096),
    st.integers(1, 512),
    st.integers(1, 10**6),
)
def test_cost_model_answers_for_any_valid_sizes(form, n, d, D, dv, C):
    cost = A.cost_model(form, n, d, D, dv, C)
    assert cost.flops > 0 and cost.state_size > 0
    assert isinstance(cost.flops, int)
