"""Reliability of ``strategies.attention_inputs``: bad bounds refused when built, naming them."""

from __future__ import annotations

import pytest

from kernelcheck import strategies as kst
from kernelcheck.errors import InvalidArgument

BAD_CALLS = [
    ("ai-n-bounds", lambda: kst.attention_inputs(min_n=5, max_n=2), r"^min_n=5 is larger than"),
    ("ai-min-n", lambda: kst.attention_inputs(min_n=0), r"^`min_n` must be >= 1, got 0"),
    ("ai-d", lambda: kst.attention_inputs(d=0), r"^`d` must be >= 1, got 0"),
    ("ai-max-d", lambda: kst.attention_inputs(max_d=1.5), r"^`max_d` must be an integer"),
    ("ai-dtype", lambda: kst.attention_inputs(dtypes=("float8",)), r"^`dtypes` must be one of"),
    ("ai-no-dtype", lambda: kst.attention_inputs(dtypes=()), r"^`dtypes` must hold at least one"),
    ("ai-batch", lambda: kst.attention_inputs(batch_shapes=((0,),)), r"^`batch_shapes` must be >="),
    ("ai-no-batch", lambda: kst.attention_inputs(batch_shapes=()), r"^`batch_shapes` must hold"),
    ("ai-norm", lambda: kst.attention_inputs(max_norm=0), r"^`max_norm` must be > 0, got 0"),
]  # fmt: skip


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_table(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()
