"""``verify.attention``'s options for the layouts real layers use: grouped heads, state layouts.

Each option is checked both ways: a correct layer written for it passes, a
layer with the bug the option exists to catch fails; and bad values are
refused by name before any case is drawn.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck.attention import chunked, gated_chunked, softmax
from kernelcheck.errors import InvalidArgument


def _repeat_heads(X, r):
    return np.repeat(X, r, axis=-3)


def gqa_softmax(Q, K, V):
    """Grouped-query softmax attention: value head h reads query/key head h // r."""
    r = V.shape[-3] // Q.shape[-3]
    return softmax(_repeat_heads(Q, r), _repeat_heads(K, r), V, causal=True)


def gqa_softmax_tiled(Q, K, V):
    """The bug: heads tiled (h % H_qk) instead of repeated (h // r)."""
    reps = V.shape[-3] // Q.shape[-3]
    return softmax(np.tile(Q, (1, reps, 1, 1)), np.tile(K, (1, reps, 1, 1)), V, causal=True)


def test_grouped_heads_pass_a_correct_layer_and_catch_heads_tiled():
    kw = dict(causal=True, batch_shape=(2, 4), qk_heads=2, n=12)
    assert verify.attention(gqa_softmax, **kw).passed
    report = verify.attention(gqa_softmax_tiled, **kw)
    assert not report.passed


def test_grouped_heads_hand_the_layer_fewer_query_and_key_heads():
    shapes = []

    def layer(Q, K, V):
        shapes.append((Q.shape, K.shape, V.shape))
        return gqa_softmax(Q, K, V)

    verify.attention(layer, causal=True, batch_shape=(1, 6), qk_heads=3, cases="random", n=5)
    assert shapes[0] == ((1, 3, 5, 8), (1, 3, 5, 8), (1, 6, 5, 8))


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(qk_heads=3, batch_shape=(2, 4)), r"^`qk_heads` must divide the value heads"),
        (dict(qk_heads=2), r"^`qk_heads` must divide the value heads"),
        (dict(qk_heads=0, batch_shape=(2, 4)), r"^`qk_heads` must be >= 1"),
        (dict(state_layout="kv"), r"^`state_layout` must be one of"),
    ],
)
def test_bad_layout_options_are_refused_by_name(options, message):
    with pytest.raises(InvalidArgument, match=message):
        verify.attention(gqa_softmax, causal=True, **options)


def elu1(X):
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _value_major(transpose: bool):
    def layer(Q, K, V, initial_state=None):
        S0 = None if initial_state is None else np.swapaxes(initial_state, -1, -2)
        state = None if S0 is None else type(_STATE)(S0, None)
        out, final = chunked(elu1(Q), elu1(K), V, normalize=False, initial_state=state,
                             return_state=True, chunk_size=4)  # fmt: skip
        S = np.swapaxes(final.S, -1, -2) if transpose else final.S
        return out, S

    return layer


_STATE = chunked(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)), return_state=True)[1]


def test_a_value_major_state_is_read_as_such():
    """Mamba-2 keeps S as (d_v, D): with state_layout="value-major" it passes, else it fails."""
    kw = dict(feature_map=elu1, normalize=False, causal=True, state=True, d=3, d_v=5)
    assert verify.attention(_value_major(True), state_layout="value-major", **kw).passed
    report = verify.attention(_value_major(True), **kw)
    assert not report.passed
    assert any(c.name.startswith("final state") and c.passed is False for c in report.checks)


def test_family_options_with_an_unknown_name_are_refused_with_the_closest_names():
    with pytest.raises(InvalidArgument, match=r"^`decya` is not an option.*did you mean `decay`"):
        verify.attention(gqa_softmax, causal=True, decya=0.9)


def test_a_family_option_that_does_not_apply_names_the_family():
    """``decay`` with a kernel: no family takes both."""
    from kernelcheck.kernels import Polynomial

    with pytest.raises(InvalidArgument, match=r"`kernel` and `decay`"):
        verify.attention(gqa_softmax, causal=True, kernel=Polynomial(2), decay=0.9)


def test_a_gated_layer_still_takes_decay_by_name():
    def layer(Q, K, V, g):
        return gated_chunked(elu1(Q), elu1(K), V, g, chunk_size=3)

    def sample(rng, shape):
        return rng.uniform(0.5, 1.0, size=shape)

    assert verify.attention(layer, feature_map=elu1, normalize=False, causal=True,
                            decay=sample).passed  # fmt: skip


def test_progress_is_told_each_step_in_order_and_changes_no_verdict():
    """``progress(done, total, step)``: done counts 1..total, names each step, ends at total."""
    layer = lambda Q, K, V: softmax(Q, K, V, causal=True)  # noqa: E731
    calls = []
    told = verify.attention(layer, causal=True, progress=lambda *a: calls.append(a))
    silent = verify.attention(layer, causal=True)
    assert str(told) == str(silent)
    done = [c[0] for c in calls]
    total = calls[0][1]
    assert done == list(range(1, total + 1)) and all(c[1] == total for c in calls)
    assert all(type(c[0]) is int and type(c[2]) is str for c in calls)
    names = [c[2] for c in calls]
    cases = [f"case '{c.name}'" for c in told.cases]  # the generated cases, then stress cases
    assert names[:-3] == cases[: total - 3]
    assert names[-3:] == ["stress cases", "extra checks", "systematic-error test"]


def test_a_progress_callback_that_raises_stops_the_check_with_its_own_error():
    """The caller's callback is the caller's code: its exception reaches the caller as raised."""

    def stop(done, total, step):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        verify.attention(lambda Q, K, V: softmax(Q, K, V), progress=stop)


def _gated_layer(bug_after: int = -1):
    """Gated attention; ``bug_after`` >= 0: gates below 1e-2 read as 0 from that token on."""

    def layer(Q, K, V, g, cu_seqlens=None):
        if bug_after >= 0:
            g = g.copy()
            g[..., bug_after:] = np.where(g[..., bug_after:] < 1e-2, 0.0, g[..., bug_after:])
        if cu_seqlens is None:
            return gated_chunked(Q, K, V, g, normalize=False, chunk_size=16)
        return np.concatenate([
            gated_chunked(Q[..., a:b, :], K[..., a:b, :], V[..., a:b, :], g[..., a:b],
                          normalize=False, chunk_size=16)
            for a, b in zip(cu_seqlens[:-1], cu_seqlens[1:])
        ], axis=-2)  # fmt: skip

    return layer


def test_stress_cases_run_on_the_first_197_tokens_and_still_catch_their_bug():
    """Beyond ``ACROSS_BLOCKS`` tokens the stress cases keep that many (their cost does not grow
    with n); a bug at gates near 0 from token 150 on is still caught there, and only there."""
    kw = dict(decay=lambda rng, shape: rng.uniform(0.9, 1.0, shape), causal=True,
              normalize=False, feature_map=lambda X: X, n=300, cases=("random",))  # fmt: skip
    good = verify.attention(_gated_layer(), **kw)
    assert good.passed, good.details()
    shapes = {c.name: c.shape[-2] for c in good.cases}
    assert shapes == {"random": 300, "random, gates near 0": 197, "random, gates near 1": 197}
    bad = verify.attention(_gated_layer(bug_after=150), **kw)
    assert {c.name for c in bad.failures()} == {"random, gates near 0"}


def test_packed_stress_cases_keep_every_token():
    kw = dict(decay=lambda rng, shape: rng.uniform(0.9, 1.0, shape), causal=True,
              normalize=False, feature_map=lambda X: X, n=300, cases=("random",),
              offsets=[0, 120, 300])  # fmt: skip
    report = verify.attention(_gated_layer(), **kw)
    assert report.passed, report.details()
    assert {c.shape[-2] for c in report.cases} == {300}
