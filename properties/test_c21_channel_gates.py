"""C21: per-channel gates, the recurrences GLA, HGRN-2 and RWKV-6 ship.

``S_t = Diag(a_t) S_(t-1) Diag(b_t) + phi(k_t) v_t^T`` with ``a_t`` in
[0, 1]^D (and ``b_t`` in [0, 1]^d_v), read as ``S_t^T phi(q_t)`` or, with
RWKV-6's bonus ``u``, as ``S_(t-1)^T phi(q_t) + ((phi(q_t) o u) . phi(k_t)) v_t``:

* the recurrent, parallel (per-channel differences of cumulative log gates)
  and chunked forms agree, for gates anywhere in [0, 1] (exactly 0 and 1,
  within 1e-6 of either, uniform) and every chunk size;
* with ``a_t = g_t 1`` it is the gated recurrence of C20;
* a gate of exactly 0 on every channel resets the state: the outputs from
  that token on are those of a fresh start there;
* a state handed over at any cut, inside a chunk too, gives the outputs and
  the final state of one pass;
* every form is within its a-priori bound of the recurrence evaluated in
  50-digit arithmetic, in float64 and in float32.

Comparisons between two forms use the sum of their bounds (each is within
its bound of the exact value).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.families.channel_gated.reference import ChannelGatedSpec

REGIMES = ("uniform", "near 0", "near 1", "zeros", "one")


def _gates(draw, shape, regime):
    u = draw(hnp.arrays(np.float64, shape, elements=st.floats(0.0, 1.0)))
    if regime == "zeros":
        return np.where(u < 0.25, 0.0, u)
    return {
        "uniform": u,
        "near 0": 1e-7 * u,
        "near 1": 1.0 - 1e-6 * u,
        "one": np.ones(shape),
    }[regime]


@st.composite
def channel_inputs(draw, max_n=20, regimes=REGIMES):
    """Features of both signs, values, key gates of one regime, maybe value gates and a bonus."""
    batch = draw(st.sampled_from([(), (2,)]))
    n, D, dv = draw(st.integers(1, max_n)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    el = st.floats(-2.0, 2.0)
    q = draw(hnp.arrays(np.float64, batch + (n, D), elements=el))
    k = draw(hnp.arrays(np.float64, batch + (n, D), elements=el))
    V = draw(hnp.arrays(np.float64, batch + (n, dv), elements=st.floats(-10, 10)))
    a = _gates(draw, batch + (n, D), draw(st.sampled_from(regimes)))
    b = None
    if draw(st.booleans()):
        b = _gates(draw, batch + (n, dv), draw(st.sampled_from(regimes)))
    u = draw(hnp.arrays(np.float64, batch + (D,), elements=el)) if draw(st.booleans()) else None
    return q, k, V, a, b, u


#: The forms of the per-channel gated family (C21), from the registry.
CHANNEL_FORMS = att.get_family("channel_gated").forms


def _run(form, args, chunk):
    """The form's output on ``args``, in chunks of ``chunk`` tokens where it has chunks."""
    kw = {"chunk_size": chunk} if "chunk_size" in form.options else {}
    return form.call(*args, causal=True, **kw)


@given(channel_inputs(), st.integers(1, 25))
def test_c21_channel_gated_forms_agree(args, chunk):
    """C21: recurrent = parallel = chunked (any chunk size), every gate regime, bonus or not."""
    tol = att.channel_gated_error_bound(*args)
    ref = att.channel_gated_recurrent(*args)
    for out in (_run(form, args, chunk) for form in CHANNEL_FORMS):
        assert (np.abs(out - ref) <= 2 * tol).all()


@given(channel_inputs(regimes=("uniform", "near 1")), st.integers(1, 12))
def test_c21_reduces_to_c20_when_every_key_channel_has_the_token_gate(args, chunk):
    """C21 with a_t = g_t 1 (no value gates, no bonus) is the gated recurrence of C20."""
    q, k, V, a, _, _ = args
    g = a[..., 0]
    g = np.where(g > 0, g, 1.0)  # C20's gates lie in (0, 1]
    ones = np.repeat(g[..., None], q.shape[-1], axis=-1)
    tol = att.channel_gated_error_bound(q, k, V, ones) + att.gated_error_bound(q, k, V, g)
    out = att.channel_gated_chunked(q, k, V, ones, chunk_size=chunk)
    assert (np.abs(out - att.gated_chunked(q, k, V, g, chunk_size=chunk)) <= tol).all()


@given(channel_inputs(max_n=16), st.data())
def test_c21_zero_gates_reset_the_state(args, data):
    """C21: key gates of 0 on every channel at token z (value gates 1 there): the outputs from z
    on are those of a fresh start at z, and no NaN anywhere."""
    q, k, V, a, b, u = args
    n = q.shape[-2]
    z = data.draw(st.integers(0, n - 1))
    a = a.copy()
    a[..., z, :] = 0.0
    if b is not None:
        b = b.copy()
        b[..., z, :] = 1.0
    out = att.channel_gated_chunked(q, k, V, a, b, u, chunk_size=data.draw(st.integers(1, 8)))
    assert np.isfinite(out).all()
    tail = [None if x is None else x[..., z:, :] for x in (q, k, V, a, b)]
    fresh = att.channel_gated_recurrent(*tail, u)
    tol = att.channel_gated_error_bound(q, k, V, a, b, u)[..., z:, :]
    tol = tol + att.channel_gated_error_bound(*tail, u)
    if u is None or z == 0:
        assert (np.abs(out[..., z:, :] - fresh) <= tol).all()
    else:  # the bonus reads S_(t-1): token z still sees the state before it, then it is reset
        assert (np.abs(out[..., z + 1 :, :] - fresh[..., 1:, :]) <= tol[..., 1:, :]).all()


@settings(max_examples=25)
@given(channel_inputs(max_n=14), st.integers(1, 6))
def test_c21_state_handover_at_any_cut_including_inside_a_chunk(args, chunk):
    """C21: prefill (chunked) then the rest (chunked again), at every cut: one pass's outputs and
    final state (each state within the state bound of the exact one: twice it apart)."""
    n = args[0].shape[-2]
    one, s_one = att.channel_gated_chunked(*args, chunk_size=chunk, return_state=True)
    tol = att.channel_gated_error_bound(*args)
    spec = ChannelGatedSpec(SpecOptions(causal=True))
    s_tol = spec.state_bound(args, np.dtype(np.float64), n)  # float64's bound, twice
    for cut in range(1, n):
        head = [None if x is None else x[..., :cut, :] for x in args[:5]] + [args[5]]
        tail = [None if x is None else x[..., cut:, :] for x in args[:5]] + [args[5]]
        a, sa = att.channel_gated_chunked(*head, chunk_size=chunk, return_state=True)
        b, sb = att.channel_gated_chunked(
            *tail, chunk_size=chunk, initial_state=sa, return_state=True
        )
        assert (np.abs(np.concatenate([a, b], axis=-2) - one) <= 2 * tol).all(), cut
        assert (np.abs(sb.S - s_one.S) <= s_tol).all(), cut


@given(channel_inputs(max_n=7), st.integers(1, 8), st.booleans())
def test_c21_bound_holds_against_high_precision(args, chunk, single):
    """C21: every form within channel_gated_error_bound of the 50-digit recurrence, float64 and
    float32 (the float32 inputs are the exact inputs of the float32 run)."""
    if single:
        args = tuple(None if x is None else x.astype(np.float32) for x in args)
    exact = ChannelGatedSpec.exact_output(args, {}, True)
    tol = att.channel_gated_error_bound(*args)
    for out in (_run(form, args, chunk) for form in CHANNEL_FORMS):
        assert (np.abs(out.astype(np.float64) - exact) <= tol).all()
