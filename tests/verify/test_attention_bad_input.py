"""Bad input to verify.attention is refused by name; a misbehaving layer is a failed verdict.

Each row of the table raises ``InvalidArgument`` whose message opens with the
option or argument in backticks, before any case is run.  A layer that raises
or returns NaN, complex or wrongly shaped outputs is reported as failing, or
refused cleanly, never passed.  The options against bad values (sizes
beyond memory, options of the wrong type) are in
``test_attention_bad_options.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import attention as att
from kernelcheck import verify
from kernelcheck.errors import (
    BadNormalizer,
    InvalidArgument,
    NumericalFailure,
)
from kernelcheck.kernels import (
    Exponential,
    Linear,
)

CLEAN_ATTENTION = (InvalidArgument, NumericalFailure, BadNormalizer)


# ---------------------------------------------------------------------------
# verify.attention
# ---------------------------------------------------------------------------


# Bad-input table: (id, call, error, message regex from the start)
ATTENTION_BAD = [
    # verify.attention
    (
        "verify-fn",
        lambda: verify.attention(3),
        InvalidArgument,
        r"^`fn` must be callable, got int 3",
    ),
    (
        "verify-both",
        lambda: verify.attention(att.softmax, kernel=Linear(), feature_map=abs),
        InvalidArgument,
        r"^pass at most one of `kernel` and `feature_map`, got both",
    ),
    (
        "verify-kernel",
        lambda: verify.attention(att.softmax, kernel="exp"),
        InvalidArgument,
        r"^`kernel` must be callable, got str 'exp'",
    ),
    (
        "verify-feature-map",
        lambda: verify.attention(att.softmax, feature_map=1.0),
        InvalidArgument,
        r"^`feature_map` must be callable, got float 1\.0",
    ),
    (
        "verify-scale-with-kernel",
        lambda: verify.attention(att.softmax, kernel=Exponential(), scale=1.0),
        InvalidArgument,
        r"^`scale` applies to the softmax reference only",
    ),
    (
        "verify-scale",
        lambda: verify.attention(att.softmax, scale=-1.0),
        InvalidArgument,
        r"^`scale` must be > 0, got -1\.0",
    ),
    (
        "verify-causal",
        lambda: verify.attention(att.softmax, causal="no"),
        InvalidArgument,
        r"^`causal` must be True or False, got str 'no'",
    ),
    (
        "verify-seed-none",
        lambda: verify.attention(att.softmax, seed=None),
        InvalidArgument,
        r"^`seed` must be given",
    ),
    (
        "verify-seed-neg",
        lambda: verify.attention(att.softmax, seed=-1),
        InvalidArgument,
        r"^`seed` must be a non-negative int",
    ),
    (
        "verify-n",
        lambda: verify.attention(att.softmax, n=1),
        InvalidArgument,
        r"^`n` must be >= 2, got 1",
    ),
    (
        "verify-d",
        lambda: verify.attention(att.softmax, d=0),
        InvalidArgument,
        r"^`d` must be >= 1, got 0",
    ),
    (
        "verify-d_v",
        lambda: verify.attention(att.softmax, d_v=0),
        InvalidArgument,
        r"^`d_v` must be >= 1, got 0",
    ),
    (
        "verify-batch-list",
        lambda: verify.attention(att.softmax, batch_shape=[2]),
        InvalidArgument,
        r"^`batch_shape` must be a tuple of ints, got list \[2\]",
    ),
    (
        "verify-batch-zero",
        lambda: verify.attention(att.softmax, batch_shape=(0,)),
        InvalidArgument,
        r"^`batch_shape` must be >= 1, got 0",
    ),
    (
        "verify-dtype",
        lambda: verify.attention(att.softmax, dtype=np.int32),
        InvalidArgument,
        r"^`dtype` must be one of float64, float32, float16, bfloat16 \(or their dtype objects\), "
        r"got <class 'numpy.int32'>",
    ),
    (
        "verify-feature-ops",
        lambda: verify.attention(att.softmax, feature_ops=-1),
        InvalidArgument,
        r"^`feature_ops` must be >= 0, got -1",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in ATTENTION_BAD], ids=[c[0] for c in ATTENTION_BAD]
)
def test_bad_input_table(call, error, message):
    with pytest.raises(error, match=message):
        call()


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["nan", "raise", "shape", "complex"]))
def test_verify_attention_with_a_misbehaving_layer_is_a_verdict_or_clean(kind):
    """A layer returning garbage is a failed verdict (not a crash); one that raises is reported."""

    def layer(Qx, Kx, Vx):
        if kind == "nan":
            return np.full(Vx.shape, np.nan)
        if kind == "raise":
            raise RuntimeError("layer exploded")
        if kind == "shape":
            return Vx[..., :1]
        return Vx + 1j

    try:
        report = verify.attention(layer, n=4, d=2)
    except CLEAN_ATTENTION:
        return
    assert not report.passed
