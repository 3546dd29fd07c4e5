"""What is peculiar to gated linear attention (claim C20): gates, decayed states, the recurrence.

The invariants every family shares (bounds against high precision, forms
agreeing, state hand-over, inputs never written, bad arrays refused) are in
``tests/attention/test_families.py`` and ``test_family_inputs.py``; the decay
masks of the chunked form in ``tests/attention/common/test_decays.py``; the
claims' property tests in ``properties/test_c19_c20_gated.py``.  Here: every
form of the family and its bound refuse gates outside (0, 1], NaN, misshapen
or non-numeric gates by name; the forms carrying a state refuse a state of
the wrong shape, kind or normalisation; the bound refuses the bidirectional
mask (a decay orders the tokens); the recurrence's own arguments; the
reference VJP's.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck.errors import InvalidArgument
from tests.attention.inputs import G_OUT, GATES, PK, PQ, V

GATED = att.get_family("gated")
#: The family's forms and its distinct error bounds, by name: the functions a user calls.
CALLS = {f.name: f.function for f in GATED.forms} | {
    b.__name__: b for b in dict.fromkeys(f.error_bound for f in GATED.forms)
}
#: The forms taking a state handed over from an earlier call.
STATE_FORMS = {f.name: f.function for f in GATED.forms if "initial_state" in f.options}
REC = att.gated_recurrence()
LINEAR = att.linear_recurrence()


def _gate_rows(name, fn):
    return [
        (
            f"{name}-gate-zero",
            lambda: fn(PQ, PK, V, np.r_[0.5, 0.0, 0.5, 0.5, 0.5]),
            InvalidArgument,
            r"^`gates` must lie in \(0, 1\], but 1 do not \(first at index \(1,\): 0.0\)",
        ),
        (
            f"{name}-gate-above-one",
            lambda: fn(PQ, PK, V, 1.5),
            InvalidArgument,
            r"^`gates` must lie in \(0, 1\], but 1 do not \(first at index \(\): 1.5\)",
        ),
        (
            f"{name}-gate-nan",
            lambda: fn(PQ, PK, V, np.r_[0.5, np.nan, 0.5, 0.5, 0.5]),
            InvalidArgument,
            r"^`gates` must be finite, but 1 entry is NaN or Inf",
        ),
        (
            f"{name}-gate-shape",
            lambda: fn(PQ, PK, V, np.full(4, 0.5)),
            InvalidArgument,
            r"^`gates` must broadcast to \(5,\) \(batch \+ \(n,\)",
        ),
        (
            f"{name}-gate-str",
            lambda: fn(PQ, PK, V, "0.5"),
            InvalidArgument,
            r"^`gates` must be a numeric array, got str",
        ),
    ]


def _state_rows(name, fn):
    return [
        (
            f"{name}-state-shape",
            lambda: fn(PQ, PK, V, GATES, initial_state=LINEAR.init(3, 2)),
            InvalidArgument,
            r"^`initial_state.S` must have shape \(\.\.\., D, d_v\) = \(\.\.\., 4, 2\)",
        ),
        (
            f"{name}-state-type",
            lambda: fn(PQ, PK, V, GATES, initial_state=np.zeros((4, 2))),
            InvalidArgument,
            r"^`initial_state` must be a State \(S, z\)",
        ),
        (
            f"{name}-state-no-z",
            lambda: fn(
                PQ,
                PK,
                V,
                GATES,
                normalize=True,
                initial_state=att.linear_recurrence(normalize=False).init(4, 2),
            ),
            InvalidArgument,
            r"^`initial_state.z` is None, but the normalised form needs",
        ),
        (
            f"{name}-normalize-int",
            lambda: fn(PQ, PK, V, GATES, normalize=1),
            InvalidArgument,
            r"^`normalize` must be True or False, got int 1",
        ),
    ]


#: (id, call, error, message regex from the start)
GATED_BAD = (
    [row for name, fn in CALLS.items() for row in _gate_rows(name, fn)]
    + [row for name, fn in STATE_FORMS.items() for row in _state_rows(name, fn)]
    + [
        (
            "gated_error_bound-bidirectional",
            lambda: att.gated_error_bound(PQ, PK, V, GATES, causal=False),
            InvalidArgument,
            r"^`causal` must be True: a decay or gate orders the tokens",
        ),
        (
            "gated_chunked-chunk-zero",
            lambda: att.gated_chunked(PQ, PK, V, GATES, chunk_size=0),
            InvalidArgument,
            r"^`chunk_size` must be >= 1, got 0",
        ),
        (
            "gated_recurrence-normalize",
            lambda: att.gated_recurrence(normalize="no"),
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
            lambda: att.gated_recurrence(normalize=True).step(
                REC.init(4, 2), PQ[0], PK[0], V[0], 0.5
            ),
            InvalidArgument,
            r"^`state.z` is None, but this recurrence is normalised",
        ),
    ]
    # the family's reference VJP
    + [
        (
            "gated_vjp-gates-zero",
            lambda: att.gated_vjp(PQ, PK, V, GATES * 0, G_OUT),
            InvalidArgument,
            r"^`gates` must lie in \(0, 1\]",
        ),
        (
            "gated_vjp-G-nan",
            lambda: att.gated_vjp(PQ, PK, V, GATES, G_OUT * np.nan),
            InvalidArgument,
            r"^`G` must be finite",
        ),
        (
            "gated_vjp-normalize",
            lambda: att.gated_vjp(PQ, PK, V, GATES, G_OUT, normalize="no"),
            InvalidArgument,
            r"^`normalize` must be True or False",
        ),
        (
            "gated_vjp-state",
            lambda: att.gated_vjp(PQ, PK, V, GATES, G_OUT, initial_state=PQ),
            InvalidArgument,
            r"^`initial_state` must be a State",
        ),
        (
            "gated_vjp_error_bound-dtype",
            lambda: att.gated_vjp_error_bound(PQ, PK, V, GATES, G_OUT, dtype="int8"),
            InvalidArgument,
            r"^`dtype` must be float64 or float32",
        ),
    ]  # fmt: skip
)


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in GATED_BAD], ids=[c[0] for c in GATED_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message matched from the start."""
    with pytest.raises(error, match=message):
        call()
