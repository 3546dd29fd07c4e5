"""``strategies.attention_inputs`` draws its values through Hypothesis, so failures shrink.

A layer with a planted chunk-state bug (the state is not carried from one
chunk to the next) fails ``verify.attention`` on almost every input; the
minimal failing example Hypothesis finds must be small in its shape (one
token past the first chunk) *and* in its values (a few significant digits
per entry), which a strategy that draws a seed and generates the values from
it cannot give.  The distributions keep their intent: row norms within
``max_norm``, values in their ranges.
"""

from __future__ import annotations

import numpy as np
from hypothesis import find, given, settings

from kernelcheck import verify
from kernelcheck.strategies import attention_inputs

CHUNK = 2
SETTINGS = settings(derandomize=True, database=None, max_examples=300, deadline=None)


def elu1(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def chunked_without_carry(Q, K, V):
    """Causal linear attention in chunks of 2 whose state restarts at every chunk (the bug)."""
    fq, fk = elu1(Q), elu1(K)
    out = np.empty(V.shape)
    for start in range(0, Q.shape[-2], CHUNK):
        s = slice(start, start + CHUNK)
        w = np.tril(fq[..., s, :] @ np.swapaxes(fk[..., s, :], -1, -2))
        out[..., s, :] = (w @ V[..., s, :]) / w.sum(-1, keepdims=True)
    return out


def _fails(x) -> bool:
    report = verify.attention(
        chunked_without_carry, inputs=(x.Q, x.K, x.V), feature_map=elu1, causal=True
    )
    return str(report.outcome) == "refuted"


def _readable(a: np.ndarray) -> bool:
    """Every entry has at most two significant digits (0, 1, -0.5, 0.25, ...)."""
    return all(float(f"{v:.2g}") == v for v in np.asarray(a).ravel())


def test_a_planted_chunk_state_bug_shrinks_to_small_readable_values():
    strategy = attention_inputs(d=2, batch_shapes=((),), causal=True, dtypes=("float64",))
    x = find(strategy, _fails, settings=SETTINGS)
    assert x.Q.shape == (CHUNK + 1, 2), x  # one token past the first chunk
    for name in ("Q", "K", "V"):
        assert _readable(getattr(x, name)), f"{name} did not shrink to readable values: {x}"


def test_the_failing_example_is_reported_with_its_values():
    """What a user's @given test prints: the shrunk arrays, with few digits."""
    strategy = attention_inputs(d=2, batch_shapes=((),), causal=True, dtypes=("float64",))

    @SETTINGS
    @given(strategy)
    def test_layer(x):
        assert not _fails(x)

    try:
        test_layer()
    except AssertionError as exc:
        notes = "\n".join(getattr(exc, "__notes__", []))
    else:
        raise AssertionError("the planted bug was not found")
    example = notes.split("Explanation:")[0]
    assert "Falsifying example" in example and "array(" in example, notes
    assert len(example) < 400, example


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(attention_inputs(max_norm=1.5))
def test_rows_stay_within_max_norm_and_values_in_range(x):
    for A in (x.Q, x.K):
        assert (np.linalg.norm(A, axis=-1) <= 1.5).all()
    assert (np.abs(x.V) <= 2.0).all() and x.Q.shape[:-1] == x.V.shape[:-1]


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(attention_inputs(positive_values=True))
def test_positive_values_lie_in_their_range(x):
    assert ((x.V >= 0.5) & (x.V <= 1.5)).all()
