"""Bad input to the gated VJP (C20), refused by name.

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
GATES = RNG.uniform(0.5, 1.0, 5)

BAD_CALLS: list = [
    ("gated_vjp-gates-zero", lambda: A.gated_vjp(PQ, PK, V, GATES * 0, G), InvalidArgument,
     r"^`gates` must lie in \(0, 1\]"),
    ("gated_vjp-G-nan", lambda: A.gated_vjp(PQ, PK, V, GATES, G * np.nan), InvalidArgument,
     r"^`G` must be finite"),
    ("gated_vjp-normalize", lambda: A.gated_vjp(PQ, PK, V, GATES, G, normalize="no"),
     InvalidArgument, r"^`normalize` must be True or False"),
    ("gated_vjp-state", lambda: A.gated_vjp(PQ, PK, V, GATES, G, initial_state=PQ),
     InvalidArgument, r"^`initial_state` must be a State"),
    ("gated_vjp_error_bound-dtype",
     lambda: A.gated_vjp_error_bound(PQ, PK, V, GATES, G, dtype="int8"), InvalidArgument,
     r"^`dtype` must be float64 or float32"),
]  # fmt: skip


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()
