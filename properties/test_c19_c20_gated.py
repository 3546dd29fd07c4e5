"""C19, C20: unnormalised and gated linear attention, every form and every hand-over.

* C19: unnormalised linear attention ``y_t = S_t^T phi(q_t)`` has recurrent,
  parallel and chunked forms that agree for every chunk size, and a state
  handed over at any cut point gives the outputs and final state of one pass.
* C20: the gated recurrence ``S_t = g_t S_{t-1} + phi(k_t) v_t^T`` equals
  parallel attention with weights ``phi(q_i).phi(k_j) prod_{l=j+1..i} g_l``
  and its chunked form, normalised or not, for gates anywhere in (0, 1]
  (within 1e-6 of 0 or of 1 included), and reduces to C14/C19 at ``g = 1``.

Comparisons between two forms use the sum of their a-priori bounds (each is
within its bound of the exact value).  The bounds themselves are checked
against exact rational arithmetic on small cases, in float64 and in float32.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.core.rounding import gamma

GATE_REGIMES = ("uniform", "near 0", "near 1", "constant", "one")
#: The forms of linear attention (C19) and of gated linear attention (C20), from the registry.
LINEAR_FORMS = att.get_family("linear").forms
GATED_FORMS = att.get_family("gated").forms


def _run(form, *args, chunk, **kw):
    """The form's causal output, in chunks of ``chunk`` tokens where it has chunks."""
    if "chunk_size" in form.options:
        kw["chunk_size"] = chunk
    return form.call(*args, causal=True, **kw)


@st.composite
def gated_inputs(draw, max_n=24, regimes=GATE_REGIMES, scale=None):
    """Positive features (as positive feature maps give), values, gates of one regime."""
    batch = draw(st.sampled_from([(), (2,)]))
    n = draw(st.integers(1, max_n))
    D = draw(st.integers(1, 4))
    d_v = draw(st.integers(1, 3))
    el = st.floats(0.05, 1.0)  # positive: every normaliser is > 0
    pq = draw(hnp.arrays(np.float64, batch + (n, D), elements=el))
    pk = draw(hnp.arrays(np.float64, batch + (n, D), elements=el))
    V = draw(hnp.arrays(np.float64, batch + (n, d_v), elements=st.floats(-10, 10)))
    if scale is None:  # tiny and huge values: features and values scaled together
        scale = draw(st.sampled_from([1.0, 1e-100, 1e100]))
    pq, pk, V = pq * np.sqrt(scale), pk * np.sqrt(scale), V * scale
    regime = draw(st.sampled_from(regimes))
    u = draw(hnp.arrays(np.float64, batch + (n,), elements=st.floats(0.0, 1.0)))
    gates = {
        "uniform": np.maximum(u, 1e-3),
        "near 0": 1e-7 + 9e-7 * u,
        "near 1": 1.0 - 1e-6 * u,
        "constant": np.full(batch + (n,), 0.9),
        "one": np.ones(batch + (n,)),
    }[regime]
    return pq, pk, V, gates


def _close(a, b, tol):
    return bool((np.abs(a - b) <= tol).all())


def _exact(pq, pk, V, g, normalize):
    """y_i in exact rational arithmetic, one sequence (no batch): the definition of C20."""
    n = pq.shape[0]
    F = np.vectorize(Fraction, otypes=[object])
    q, k, v, gf = F(pq), F(pk), F(V), [Fraction(float(x)) for x in g]
    out = np.empty(V.shape, dtype=object)
    for i in range(n):
        num = [Fraction(0)] * V.shape[1]
        den = Fraction(0)
        decay = Fraction(1)
        for j in range(i, -1, -1):  # decay = prod_{l=j+1..i} g_l, built from j = i down
            w = sum((q[i, a] * k[j, a] for a in range(pq.shape[1])), Fraction(0)) * decay
            num = [num[c] + w * v[j, c] for c in range(V.shape[1])]
            den += w
            decay *= gf[j]
        out[i] = [x / den for x in num] if normalize else num
    return out


@given(gated_inputs(regimes=("one",), scale=1.0), st.integers(1, 30))
def test_c19_unnormalised_forms_agree_for_every_chunk_size(data, chunk):
    """C19: recurrent = parallel causal = chunked (any chunk size), without the normaliser."""
    pq, pk, V, _ = data
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True, normalize=False)
    ref, *others = [_run(form, pq, pk, V, chunk=chunk, normalize=False) for form in LINEAR_FORMS]
    for out in others:
        assert _close(out, ref, tol)


@given(gated_inputs(regimes=("one",)), st.integers(1, 9), st.booleans())
def test_c19_state_handover_at_every_cut_point_gives_one_pass(data, chunk, normalize):
    """C19: prefill (chunked) then decode (recurrent) = one pass at every cut: outputs, state."""
    pq, pk, V, _ = data
    n = pq.shape[-2]
    one, state = att.recurrent(pq, pk, V, normalize=normalize, return_state=True)
    tol = att.linear_error_bound(pq, pk, V, causal=True, normalize=normalize)
    s_tol = 2 * gamma(3 * n + 8) * np.abs(np.swapaxes(pk, -1, -2)) @ np.abs(V)
    for cut in range(1, n):
        a, sa = att.chunked(
            pq[..., :cut, :], pk[..., :cut, :], V[..., :cut, :],
            chunk_size=chunk, normalize=normalize, return_state=True,
        )  # fmt: skip
        b, sb = att.recurrent(
            pq[..., cut:, :], pk[..., cut:, :], V[..., cut:, :],
            normalize=normalize, initial_state=sa, return_state=True,
        )  # fmt: skip
        both = np.concatenate([a, b], axis=-2)
        judged = np.isfinite(tol)  # a normaliser of uncertain sign is not judged (C12)
        assert (np.abs(both - one)[judged] <= 2 * tol[judged]).all(), cut
        assert (np.abs(sb.S - state.S) <= s_tol).all(), cut
        assert (sb.z is None) == (not normalize)


@given(gated_inputs(), st.integers(1, 30), st.booleans())
def test_c20_gated_recurrent_parallel_and_chunked_agree(data, chunk, normalize):
    """C20: the three gated forms agree, for every gate regime and chunk size."""
    pq, pk, V, g = data
    tol = att.gated_error_bound(pq, pk, V, g, normalize=normalize)
    judged = np.isfinite(tol)
    ref, *others = [
        _run(form, pq, pk, V, g, chunk=chunk, normalize=normalize, on_bad_normalizer="report")
        for form in GATED_FORMS
    ]
    ref = getattr(ref, "out", ref)
    for out in others:
        out = getattr(out, "out", out)
        with np.errstate(invalid="ignore"):
            diff = np.abs(out - ref)
        assert (diff[judged] <= 2 * tol[judged]).all()


@given(gated_inputs(max_n=7, scale=1.0), st.integers(1, 8), st.booleans(), st.booleans())
def test_c20_bound_holds_against_exact_arithmetic(data, chunk, normalize, single):
    """C20: every gated form is within gated_error_bound of the exact rational value,
    in float64 and in float32 (the float32 inputs are the exact inputs of the float32 run)."""
    pq, pk, V, g = data
    pq, pk, V, g = pq.reshape(-1, *pq.shape[-2:])[0], pk.reshape(-1, *pk.shape[-2:])[0], \
        V.reshape(-1, *V.shape[-2:])[0], g.reshape(-1, g.shape[-1])[0]  # fmt: skip
    if single:
        pq, pk, V, g = (x.astype(np.float32) for x in (pq, pk, V, g))
        g = np.minimum(g, np.float32(1.0))
    exact = _exact(pq.astype(np.float64), pk.astype(np.float64), V.astype(np.float64),
                   g.astype(np.float64), normalize)  # fmt: skip
    tol = att.gated_error_bound(pq, pk, V, g, normalize=normalize)
    for out in (_run(form, pq, pk, V, g, chunk=chunk, normalize=normalize) for form in GATED_FORMS):
        err = np.array(
            [[abs(Fraction(float(out[i, c])) - exact[i, c]) for c in range(V.shape[1])]
             for i in range(V.shape[0])], dtype=float,
        )  # fmt: skip
        assert (err <= tol).all()


@given(gated_inputs(regimes=("one",)), st.integers(1, 12), st.booleans())
def test_c20_reduces_to_c14_c19_at_gate_one(data, chunk, normalize):
    """C20 with g = 1 is plain linear attention: C14 normalised, C19 not."""
    pq, pk, V, g = data
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True, normalize=normalize)
    judged = np.isfinite(tol)
    plain = att.chunked(
        pq, pk, V, chunk_size=chunk, normalize=normalize, on_bad_normalizer="report"
    )
    gated = att.gated_chunked(
        pq, pk, V, g, chunk_size=chunk, normalize=normalize, on_bad_normalizer="report"
    )
    plain, gated = getattr(plain, "out", plain), getattr(gated, "out", gated)
    with np.errstate(invalid="ignore"):
        assert (np.abs(plain - gated)[judged] <= tol[judged]).all()


@given(gated_inputs(max_n=12), st.integers(1, 6))
def test_c20_gated_state_handover_at_every_cut_point(data, chunk):
    """C20: a decayed state handed over (chunked prefill, recurrent decode) gives one pass."""
    pq, pk, V, g = data
    n = pq.shape[-2]
    one, state = att.gated_recurrent(pq, pk, V, g, return_state=True)
    tol = att.gated_error_bound(pq, pk, V, g)
    s_tol = 2 * gamma(3 * n + 8) * np.abs(np.swapaxes(pk, -1, -2)) @ np.abs(V)
    for cut in range(1, n):
        a, sa = att.gated_chunked(
            pq[..., :cut, :], pk[..., :cut, :], V[..., :cut, :], g[..., :cut],
            chunk_size=chunk, return_state=True,
        )  # fmt: skip
        b, sb = att.gated_recurrent(
            pq[..., cut:, :], pk[..., cut:, :], V[..., cut:, :], g[..., cut:],
            initial_state=sa, return_state=True,
        )  # fmt: skip
        assert (np.abs(np.concatenate([a, b], axis=-2) - one) <= 2 * tol).all(), cut
        assert (np.abs(sb.S - state.S) <= s_tol).all(), cut


def test_c20_long_sequence_of_small_gates_stays_finite_and_exact_to_rounding():
    """C20: 4096 gates of 0.01 multiply to 1e-8192 (far below the float range); the log-space
    forms never form that product and agree with the recurrence within the bound."""
    rng = np.random.default_rng(20)
    n = 4096
    pq, pk = rng.random((2, n, 4))
    V = rng.standard_normal((n, 3))
    g = np.full(n, 0.01)
    tol = att.gated_error_bound(pq, pk, V, g)
    rec = att.gated_recurrent(pq, pk, V, g)
    for out in (_run(form, pq, pk, V, g, chunk=64) for form in GATED_FORMS):
        assert np.isfinite(out).all()
        assert (np.abs(out - rec) <= 2 * tol).all()
