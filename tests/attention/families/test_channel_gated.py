"""What is peculiar to the per-channel gated family (claim C21): gates, resets, bonus, bound, VJP.

* the three forms agree for every option (key gates, value gates, the bonus,
  a handed-over state), through both of the chunked form's ways (scaled
  products, pairwise decays after a gate of 0 or beyond the range);
* ``a_t = g_t 1`` is the gated family of C20; no gates is C19;
* a gate of exactly 0 resets its channel, with no NaN;
* the bound holds against 50-digit arithmetic, contains each documented term
  where it dominates and stays within twice its formula;
* the recurrent cost per token does not depend on n;
* the VJP equals central differences of the forms.

flash-linear-attention's references (GLA, HGRN, HGRN-2 through GLA, RWKV-6,
simple GLA) are compared in ``test_channel_gated_fla.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as A
from kernelcheck._src.attention.common.bounds import log_decay_error
from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.families.channel_gated import forms as F
from kernelcheck._src.attention.families.channel_gated.reference import ChannelGatedSpec
from kernelcheck._src.attention.registry import get_family
from kernelcheck._src.core.rounding import eta, gamma
from tests.attention.families.differences import central

RNG = np.random.default_rng(21)


def _case(n=13, D=3, dv=2, *, key=True, value=False, bonus=False, zeros=False, strong=False,
          state=False, seed=0, batch=()):  # fmt: skip
    g = np.random.default_rng(seed)
    q, k = g.normal(size=(2, *batch, n, D))
    V = g.normal(size=(*batch, n, dv))
    a = g.uniform(0.3, 1.0, (*batch, n, D)) if key else None
    b = g.uniform(0.3, 1.0, (*batch, n, dv)) if value else None
    if strong and a is not None:
        a = a**2000  # chunk log sums far beyond the scaled products' range
    if zeros:
        if a is not None:
            a[..., n // 3, 0] = 0.0
            a[..., 2 * n // 3, :] = 0.0
        if b is not None:
            b[..., n // 2, -1] = 0.0
    u = g.normal(size=(*batch, D)) if bonus else None
    S0 = A.State(g.normal(size=(*batch, D, dv))) if state else None
    return (q, k, V, a, b, u), S0


OPTIONS = [
    dict(key=True),
    dict(key=True, zeros=True),
    dict(key=True, strong=True),
    dict(key=False, value=True),
    dict(key=True, value=True, zeros=True),
    dict(key=True, bonus=True),
    dict(key=True, value=True, bonus=True, zeros=True, state=True),
    dict(key=True, strong=True, bonus=True, state=True),
    dict(key=False, value=False, bonus=True),
]


def _state_tolerance(args, S0):
    """The bound's model on the final state: ``((1 + gamma_k)(1 + rho_a)(1 + rho_b) - 1) M_S``.

    ``M_S`` the final state of the recurrence on ``|k|``, ``|v|``, ``|S0|`` (decays in [0, 1]),
    ``rho`` at the last token (the largest), ``k = 3 n + D + 10``.
    """
    q, k, V, a, b, _ = args
    n, D = q.shape[-2], q.shape[-1]
    st = None if S0 is None else A.State(np.abs(S0.S))
    _, M = A.channel_gated_recurrent(
        0 * q, np.abs(k), np.abs(V), a, b, initial_state=st, return_state=True
    )
    steps = gamma(4 * n)
    rho = [
        0.0
        if g is None
        else float(log_decay_error(-np.log(g[g > 0]).sum(), n + 8, np.dtype(float), 10.0, steps))
        for g in (a, b)
    ]
    rel = (1 + gamma(3 * n + D + 10)) * (1 + rho[0]) * (1 + rho[1]) - 1
    return rel * M.S * (1 + 2 * rel)  # M.S: float64 sums of non-negative terms, within rel


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(k for k, v in o.items() if v))
@pytest.mark.parametrize("C", [1, 3, 7, 64])
def test_the_forms_agree_for_every_option_and_chunk_size(opts, C):
    """C21: recurrent = chunked (any chunk size, any option) = parallel, within twice the bound."""
    args, S0 = _case(**opts)
    tol = A.channel_gated_error_bound(*args, initial_state=S0)
    rec, s_rec = A.channel_gated_recurrent(*args, initial_state=S0, return_state=True)
    chk, s_chk = A.channel_gated_chunked(*args, chunk_size=C, initial_state=S0, return_state=True)
    assert (np.abs(chk - rec) <= 2 * tol).all()
    assert (np.abs(s_chk.S - s_rec.S) <= 2 * _state_tolerance(args, S0)).all()
    if S0 is None:
        assert (np.abs(A.channel_gated_parallel(*args) - rec) <= 2 * tol).all()


def test_both_ways_of_the_chunked_form_run_and_agree(monkeypatch):
    """The scaled products and the pairwise decays give the same chunk, within twice the bound."""
    args, _ = _case(n=20, D=3, dv=2, value=True, bonus=True)
    seen = []
    real = F._scaled

    def spy(dec):
        seen.append(real(dec))
        return seen[-1]

    monkeypatch.setattr(F, "_scaled", spy)
    fast = A.channel_gated_chunked(*args, chunk_size=5)
    monkeypatch.setattr(F, "_scaled", lambda dec: False)
    pairwise = A.channel_gated_chunked(*args, chunk_size=5)
    assert seen and all(seen)
    assert (np.abs(fast - pairwise) <= 2 * A.channel_gated_error_bound(*args)).all()


def test_per_channel_gates_equal_to_one_gate_are_the_gated_family():
    """C21 -> C20: a_t = g_t 1 (every key channel) gives gated attention, every form."""
    (q, k, V, _, _, _), _ = _case(n=17, D=4, dv=3)
    g = RNG.uniform(0.2, 1.0, 17)
    a = np.repeat(g[:, None], 4, axis=1)
    tol = A.channel_gated_error_bound(q, k, V, a) + A.gated_error_bound(q, k, V, g)
    ref = A.gated_recurrent(q, k, V, g)
    for out in (
        A.channel_gated_recurrent(q, k, V, a),
        A.channel_gated_parallel(q, k, V, a),
        A.channel_gated_chunked(q, k, V, a, chunk_size=5),
    ):
        assert (np.abs(out - ref) <= tol).all()


def test_no_gates_and_no_bonus_is_unnormalised_linear_attention():
    """C21 -> C19: without gates every form is plain unnormalised linear attention."""
    (q, k, V, _, _, _), _ = _case(n=11, key=False)
    ref = A.recurrent(q, k, V, normalize=False)
    tol = A.channel_gated_error_bound(q, k, V) + A.linear_error_bound(
        q, k, V, causal=True, normalize=False
    )
    for out in (A.channel_gated_chunked(q, k, V, chunk_size=4), A.channel_gated_parallel(q, k, V)):
        assert (np.abs(out - ref) <= tol).all()


@pytest.mark.parametrize("form", ["recurrent", "parallel", "chunked"])
def test_a_zero_gate_resets_its_channel_without_nan(form):
    """A key gate of 0 at token z in channel c forgets channel c's past: from z on, the same
    outputs as keys with channel c zeroed before z and a gate of 1 there."""
    (q, k, V, a, _, _), _ = _case(n=15, D=3, dv=2)
    z, c = 6, 1
    a0 = a.copy()
    a0[z, c] = 0.0
    k1, a1 = k.copy(), a.copy()
    k1[:z, c] = 0.0
    a1[z, c] = 1.0
    fn = getattr(A, f"channel_gated_{form}")
    out0, out1 = fn(q, k, V, a0), fn(q, k1, V, a1)
    assert np.isfinite(out0).all()
    tol = A.channel_gated_error_bound(q, k, V, a0) + A.channel_gated_error_bound(q, k1, V, a1)
    assert (np.abs(out0 - out1)[z:] <= tol[z:]).all()
    assert not (np.abs(out0 - out1)[:z] <= tol[:z]).all()  # before z they differ


@pytest.mark.parametrize("bonus", [False, True])
def test_a_state_handed_over_at_any_cut_gives_one_pass(bonus):
    """Prefill (chunked, C = 4) then the rest (recurrent), at every cut, inside chunks too."""
    args, _ = _case(n=14, D=3, dv=2, value=True, bonus=bonus)
    one, s_one = A.channel_gated_recurrent(*args, return_state=True)
    tol = A.channel_gated_error_bound(*args)
    state_tol = _state_tolerance(args, None)
    for cut in range(1, 14):
        head = [None if x is None else x[:cut] for x in args[:5]] + [args[5]]
        tail = [None if x is None else x[cut:] for x in args[:5]] + [args[5]]
        a, sa = A.channel_gated_chunked(*head, chunk_size=4, return_state=True)
        b, sb = A.channel_gated_recurrent(*tail, initial_state=sa, return_state=True)
        both = np.concatenate([a, b], axis=0)
        assert (np.abs(both - one) <= 2 * tol).all(), cut
        assert (np.abs(sb.S - s_one.S) <= 2 * state_tol).all(), cut


def test_batched_inputs_and_broadcast_gates():
    """A batch of (2, 3) heads, gates of one head broadcast, one bonus per head."""
    args, S0 = _case(n=9, D=3, dv=2, value=True, bonus=True, state=True, batch=(2, 3))
    q, k, V, a, b, u = args
    a = a[:1]  # one batch entry's gates for both
    ref = A.channel_gated_recurrent(q, k, V, a, b, u, initial_state=S0)
    for i in range(2):
        for h in range(3):
            one = A.channel_gated_recurrent(
                q[i, h], k[i, h], V[i, h], a[0, h], b[i, h], u[i, h],
                initial_state=A.State(S0.S[i, h]),
            )  # fmt: skip
            assert np.allclose(ref[i, h], one, rtol=0, atol=1e-14)


def test_the_recurrence_step_is_the_recurrent_form():
    args, _ = _case(n=8, D=3, dv=2, value=True, bonus=True)
    q, k, V, a, b, u = args
    rec = A.channel_gated_recurrence(bonus=u)
    state, ys = rec.init(3, 2), []
    for t in range(8):
        state, y = rec.step(state, q[t], k[t], V[t], a[t], b[t])
        ys.append(y)
    out, final = A.channel_gated_recurrent(*args, return_state=True)
    assert np.array_equal(np.stack(ys), out) or np.allclose(np.stack(ys), out, rtol=1e-15)
    assert np.allclose(state.S, final.S, rtol=1e-15, atol=0)


# ----- the bound ------------------------------------------------------------------


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(k for k, v in o.items() if v))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_form_is_within_its_bound_of_the_exact_output(opts, dtype):
    """C21: against the recurrence in 50-digit arithmetic (inputs taken as exact binary numbers)."""
    args, S0 = _case(n=9, D=3, dv=2, seed=3, **opts)
    args = tuple(None if x is None else x.astype(dtype) for x in args)
    if S0 is not None:
        S0 = A.State(S0.S.astype(dtype))
    kw = {} if S0 is None else {"initial_state": S0}
    exact = ChannelGatedSpec.exact_output(args, kw, True)
    tol = A.channel_gated_error_bound(*args, **kw)
    outs = [
        A.channel_gated_recurrent(*args, **kw),
        *(A.channel_gated_chunked(*args, chunk_size=C, **kw) for C in (1, 2, 4, 16)),
    ]
    if S0 is None:
        outs.append(A.channel_gated_parallel(*args))
    for out in outs:
        assert out.dtype == np.dtype(dtype)
        assert (np.abs(out.astype(float) - exact) <= tol).all()


def _independent_magnitude(q, k, V, a, b, u, S0=None):
    """The sums of absolute values by the recurrent form (the bound forms them chunked)."""
    st = None if S0 is None else A.State(np.abs(S0))
    au = None if u is None else np.abs(u)
    return A.channel_gated_recurrent(np.abs(q), np.abs(k), np.abs(V), a, b, au, initial_state=st)


def test_the_bound_is_its_formula_within_a_factor_two():
    """bound >= ((1 + gamma_k)(1 + rho_a)(1 + rho_b) - 1) M and <= twice it (plus underflow):
    a bound loosened ten times, or missing a term, fails."""
    args, S0 = _case(n=12, D=3, dv=2, value=True, bonus=True, state=True, seed=5)
    q, k, V, a, b, u = args
    n, D = 12, 3
    b_ = A.channel_gated_error_bound(*args, initial_state=S0)
    M = _independent_magnitude(*args, S0.S)
    La = -np.cumsum(np.log(a), axis=0).max(axis=1, keepdims=True)
    Lb = -np.cumsum(np.log(b), axis=0)
    steps = np.array([gamma(4 * (i + 1)) for i in range(n)])[:, None]
    ra = log_decay_error(La, n + 8, np.dtype(float), 10.0, steps)
    rb = log_decay_error(Lb, n + 8, np.dtype(float), 10.0, steps)
    formula = ((1 + gamma(3 * n + D + 10)) * (1 + ra) * (1 + rb) - 1) * M
    assert (b_ >= formula).all()
    assert (b_ <= 2 * formula).all()


def test_the_decay_term_dominates_where_decays_are_strong():
    """Gates of 1e-200: |L_i| ~ 460 i, rho >> gamma_k; the bound holds rho_a M (dropping the
    decays' error, it would not)."""
    n, D, dv = 5, 2, 2
    q, k = RNG.uniform(0.5, 1, (2, n, D))
    V = RNG.uniform(0.5, 1, (n, dv))
    a = np.full((n, D), 1e-200)
    b_ = A.channel_gated_error_bound(q, k, V, a)
    M = _independent_magnitude(q, k, V, a, None, None)
    La = -np.cumsum(np.log(a), axis=0).max(axis=1, keepdims=True)
    ra = np.expm1(2 * gamma(n + 8) * La)
    assert (ra[1:] > 100 * gamma(3 * n + D + 10)).all()
    assert (b_ >= ra * M).all()


def test_the_initial_state_and_the_bonus_enter_the_bound():
    """A state a million times the increments and a large bonus: the bound holds gamma_k times
    their decayed share (|q| |S0| decayed; |q o u| . |k| |v|)."""
    n, D, dv = 6, 2, 2
    q, k = RNG.uniform(0.5, 1, (2, n, D))
    V = RNG.uniform(0.5, 1, (n, dv))
    a = RNG.uniform(0.5, 1, (n, D))
    S0 = A.State(1e6 * RNG.uniform(0.5, 1, (D, dv)))
    u = np.full(D, 1e6)
    g = gamma(3 * n + D + 10)
    state_share = g * A.channel_gated_recurrent(q, 0 * k, 0 * V, a, initial_state=S0)
    assert (A.channel_gated_error_bound(q, k, V, a) < state_share).all()
    assert (A.channel_gated_error_bound(q, k, V, a, initial_state=S0) >= state_share).all()
    bonus_share = g * np.sum(q * u * k, axis=-1)[:, None] * V
    assert (A.channel_gated_error_bound(q, k, V, a) < bonus_share).all()
    assert (A.channel_gated_error_bound(q, k, V, a, None, u) >= bonus_share).all()


def test_the_underflow_term_has_every_factor():
    n, D, dv = 4, 2, 2
    q = np.full((n, D), 1e-310)
    k = np.full((n, D), 1e6)
    V = np.ones((n, dv))
    a = np.full((n, D), 0.5)
    b_ = A.channel_gated_error_bound(q, k, V, a)
    under = 3 * (4 * n * D) * eta(np.float64) * (1 + 1e-310) * (1 + 1e6) * 2
    assert (b_ >= under).all()


def test_a_float32_computation_inside_and_a_planted_error_outside():
    """The float32 forms lie within the float32 bound of the exact output; the same output with
    a relative error of 1e-3 at one late position lies outside."""
    args, _ = _case(n=40, D=4, dv=3, value=True, bonus=True, seed=9)
    args32 = tuple(x.astype(np.float32) for x in args)
    exact = ChannelGatedSpec.exact_output(args32, {}, True)
    tol = A.channel_gated_error_bound(*args32)
    out = A.channel_gated_chunked(*args32, chunk_size=8).astype(float)
    assert (np.abs(out - exact) <= tol).all()
    bad = out.copy()
    bad[30:] *= 1 + 1e-3
    assert not (np.abs(bad - exact) <= tol).all()


# ----- cost and state --------------------------------------------------------------


def test_the_recurrent_cost_per_token_does_not_depend_on_n():
    """C3, C11, C21: the recurrent form's flops per token and its state are the same at every n."""
    costs = [A.cost_model("channel_gated_recurrent", n, 8, 64, 64) for n in (1, 100, 10**6)]
    assert len({c.flops_per_token() for c in costs}) == 1
    assert len({c.state_size for c in costs}) == 1 and costs[0].state_size == 64 * 64
    chunked = [A.cost_model("channel_gated_chunked", n, 8, 64, 64, 64) for n in (64, 6400)]
    assert chunked[0].flops_per_token() == chunked[1].flops_per_token()


# ----- the VJP ---------------------------------------------------------------------


@pytest.mark.parametrize("bonus", [False, True])
def test_the_vjp_equals_central_differences(bonus):
    """Every gradient: features, values, d log of both gates, the bonus (with a state)."""
    args, S0 = _case(n=6, D=3, dv=2, value=True, bonus=bonus, state=True, seed=11)
    G = RNG.normal(size=(6, 2))

    def loss(i, X):
        full = list(args)
        full[i] = X
        return (A.channel_gated_recurrent(*full, initial_state=S0) * G).sum()

    got = A.channel_gated_vjp(*args, G, initial_state=S0)
    for i, grad in enumerate(got[:3]):
        assert np.allclose(grad, central(lambda X, i=i: loss(i, X), args[i]), atol=1e-7)
    for i in (3, 4):
        num = central(lambda X, i=i: loss(i, np.exp(X)), np.log(args[i]))
        assert np.allclose(got[i], num, atol=1e-7)
    if bonus:
        assert np.allclose(got.dbonus, central(lambda X: loss(5, X), args[5]), atol=1e-7)
    else:
        assert got.dbonus is None


def test_the_vjp_at_a_zero_gate_is_finite_and_its_log_gradient_is_zero():
    args, _ = _case(n=8, D=2, dv=2, zeros=True)
    G = RNG.normal(size=(8, 2))
    got = A.channel_gated_vjp(*args, G)
    b = A.channel_gated_vjp_error_bound(*args, G)
    assert all(np.isfinite(x).all() for x in got if x is not None)
    zero = args[3] == 0
    assert (np.abs(got.dlog_key_gates[zero]) <= b.dlog_key_gates[zero]).all()


def test_the_spec_gives_dq_dk_dv_and_the_gradients_of_the_inputs_given():
    spec = get_family("channel_gated").spec(SpecOptions(causal=True))
    assert spec.identity_maps() and not spec.normalize
    assert spec.gradients == ("dQ", "dK", "dV")
    n, d, dv = 7, 3, 2
    Q, K = RNG.normal(size=(2, n, d))
    V, G = RNG.normal(size=(2, n, dv))
    extras = {"key_gates": RNG.uniform(0.5, 1, (n, d)), "bonus": RNG.normal(size=d)}
    args, kw = spec.arguments(Q, K, V, extras)
    assert args[4] is None
    names = [e[:2] for e in spec.vjp(args, kw, Q, K, V, G, np.dtype("float32"))]
    assert names == [("dQ", 0), ("dK", 1), ("dV", 2), ("dlog key_gates", 3), ("d bonus", 5)]


# ----- the diagnosis's bug shapes ----------------------------------------------------


@pytest.mark.parametrize(
    "bug, label",
    [
        ("late", "the previous token's gates"),
        ("after", "one decay factor too many"),
        ("axis", "gates on the wrong axis"),
        ("no bonus", "the bonus dropped"),
        ("read after", "the state read after the update"),
    ],
)
def test_the_diagnosis_names_each_bug_shape(bug, label):
    """A layer with one of the bugs of the family's docstring is named by the diagnosis."""
    from kernelcheck._src.verify.attention.diagnosis import diagnose

    n, D = 24, 3
    q, k = RNG.normal(size=(2, n, D))
    V = RNG.normal(size=(n, D))  # d_v = D: the wrong axis is expressible
    a = RNG.uniform(0.2, 0.9, (n, D))
    u = RNG.normal(size=D) if bug in ("no bonus", "read after") else None
    late = np.concatenate([np.ones((1, D)), a[:-1]])
    got = {
        "late": lambda: A.channel_gated_chunked(q, k, V, late, None, u),
        "after": lambda: A.channel_gated_chunked(q, k * a, V, a, None, u),
        "axis": lambda: A.channel_gated_chunked(q, k, V, None, a, u),
        "no bonus": lambda: A.channel_gated_chunked(q, k, V, a, None, 0 * u),
        "read after": lambda: A.channel_gated_chunked(q, k, V, a),
    }[bug]()
    spec = ChannelGatedSpec(SpecOptions(causal=True))
    args, kw = (q, k, V, a, None, u), {}
    tol = A.channel_gated_error_bound(*args, dtype="float32")
    ref = A.channel_gated_recurrent(*args)
    assert label in diagnose(spec, args, kw, got, tol, reference=ref)


def test_the_state_bug_shapes_are_the_final_states_of_those_bugs():
    """A partial last chunk padded with the last token's gates (no key, no value) decays the
    final state as the shape says; a cached state ignored is a fresh start."""
    n, D, dv, C = 21, 3, 2, 16
    (q, k, V, a, b, _), _ = _case(n=n, D=D, dv=dv, value=True)
    spec = ChannelGatedSpec(SpecOptions(causal=True))
    shapes = spec.state_bug_shapes((q, k, V, a, b, None), {})
    pad = -n % C
    qp, kp, Vp = (np.concatenate([x, np.zeros((pad, x.shape[1]))]) for x in (q, k, V))
    ap = np.concatenate([a, np.repeat(a[-1:], pad, axis=0)])
    bp = np.concatenate([b, np.repeat(b[-1:], pad, axis=0)])
    _, padded = A.channel_gated_chunked(qp, kp, Vp, ap, bp, chunk_size=C, return_state=True)
    shape = shapes["a partial last chunk decayed as a full one of 16 tokens"]
    assert (np.abs(shape - padded.S) <= _state_tolerance((qp, kp, Vp, ap, bp, None), None)).all()
    state = A.State(RNG.normal(size=(D, dv)))
    outs = spec.handover_bug_shapes((q, k, V, a, b, None), {}, state)
    fresh = outs["the cached state ignored (the continuation starts from a zero state)"]
    assert np.array_equal(fresh, A.channel_gated_chunked(q, k, V, a, b))
