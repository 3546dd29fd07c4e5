"""Packed sequences (``offsets=``, flash-linear-attention's ``cu_seqlens``): no state leaks.

The layer gets the tokens of several sequences in one call with their
offsets as ``cu_seqlens``; the reference runs each sequence on its own.  A
layer that resets its state at every offset passes (output, final states
stacked one per sequence, gradients); one that lets the state of one
sequence run into the next fails; bad offsets are refused by name before any
case is drawn.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck.attention import State, chunked
from kernelcheck.errors import InvalidArgument

OFFSETS = [0, 5, 23, 40]


def elu1(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def packed_layer(leak: bool = False):
    """Unnormalised linear attention over packed sequences; ``leak`` carries the state across."""

    def layer(Q, K, V, cu_seqlens, initial_state=None):
        outs, states, state = [], [], None
        for i, (a, b) in enumerate(zip(cu_seqlens[:-1], cu_seqlens[1:], strict=True)):
            if not leak:
                state = None if initial_state is None else State(initial_state[i], None)
            out, state = chunked(elu1(Q[..., a:b, :]), elu1(K[..., a:b, :]), V[..., a:b, :],
                                 normalize=False, initial_state=state, return_state=True,
                                 chunk_size=8)  # fmt: skip
            outs.append(out)
            states.append(state.S)
        return np.concatenate(outs, axis=-2), np.stack(states)

    return layer


def _draw_offsets(rng, n):
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(2, n - 1), replace=False)) if n > 2 else []
    return np.concatenate([[0], cuts, [n]]).astype(int)


KW = dict(feature_map=elu1, normalize=False, causal=True, state=True)


@pytest.mark.parametrize("offsets", [OFFSETS, _draw_offsets], ids=["fixed", "drawn"])
def test_packed_sequences_pass_a_layer_that_resets_at_each_offset(offsets):
    report = verify.attention(packed_layer(), offsets=offsets, **KW)
    assert report.passed, report.details()
    assert any(c.name.startswith("final state") and c.passed for c in report.checks)


@pytest.mark.parametrize("offsets", [OFFSETS, _draw_offsets], ids=["fixed", "drawn"])
def test_a_state_leaking_across_sequences_fails(offsets):
    report = verify.attention(packed_layer(leak=True), offsets=offsets, **KW)
    assert not report.passed and "random" in {c.name for c in report.failures()}


def test_fixed_offsets_set_the_cases_length():
    report = verify.attention(packed_layer(), offsets=OFFSETS, **KW)
    judged = [c for c in report.cases if c.passed is not None]
    assert judged and all(c.shape[-2] == OFFSETS[-1] for c in judged)
    assert any("offsets give every case n = 40" in c.note for c in report.cases)


@pytest.mark.parametrize(
    "offsets, message",
    [
        ([1, 5, 10], r"^`offsets` must start at 0"),
        ([0, 5, 5, 10], r"^`offsets` must start at 0 and increase strictly"),
        ([0.0, 2.5, 4.0], r"^`offsets` must be a 1-D sequence of at least two integers"),
        ([0], r"^`offsets` must be a 1-D sequence"),
    ],
)
def test_bad_offsets_are_refused_by_name(offsets, message):
    with pytest.raises(InvalidArgument, match=message):
        verify.attention(packed_layer(), offsets=offsets, **KW)
