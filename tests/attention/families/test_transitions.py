"""What the four families of transitions share, checked on each (claims C22, C23, C24).

The delta rule, Gated DeltaNet, Kimi Delta Attention and the
diagonal-plus-rank-one transition run on one engine; each invariant here
runs over the four registry records:

* every form (recurrent, chunked at chunk sizes that do and do not divide
  n, parallel) in float64 and float32 is within its a-priori bound of the
  family's defining recurrence evaluated in 50-digit arithmetic, with a
  handed-over state and with the in-layer L2 normalisation;
* a state handed over at a cut inside a chunk gives one pass's outputs and state;
* the ``init`` / ``step`` pair is the recurrent form token by token;
* inputs are never written to; bad inputs are refused by name before any work;
* every reported bug shape of the family lies beyond the float32 tolerance
  (so ``verify.attention`` would catch it);
* expanding transitions give an infinite bound, which the specification
  turns into a case that is not judged;
* a final state that overflows is refused even where every output is finite;
  the in-layer L2 normalisation of a row whose squared norm overflows is
  that row's direction, not zero.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.common.transition_spec import NOT_JUDGED
from kernelcheck._src.attention.common.transitions import l2_normalized
from kernelcheck._src.attention.registry import FAMILIES
from kernelcheck.attention import State
from kernelcheck.errors import InvalidArgument, NumericalFailure

NAMES = ("delta", "gated_delta", "kda", "dplr")
RECURRENCES = {
    "delta": "delta_recurrence",
    "gated_delta": "gated_delta_recurrence",
    "kda": "kda_recurrence",
    "dplr": "dplr_recurrence",
}


def _family(name):
    return FAMILIES[name]


def _forms(name):
    return {f.name.split("_")[-1]: f for f in _family(name).forms}


def _arguments(name, rng, n, D=4, dv=3, batch=(2,)):
    return _family(name).spec.example_arguments(rng, n, 0, D, dv, batch)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_form_is_within_its_bound_of_the_exact_recurrence(name, dtype):
    rng = np.random.default_rng(22)
    n, D, dv = 11, 4, 3
    args = _arguments(name, rng, n, D, dv)
    S0 = State(rng.standard_normal((2, D, dv)), None)
    kw = {"qk_l2norm": True, "scale": 0.5, "initial_state": S0}
    exact = _family(name).spec.exact_output(args, kw)
    low = tuple(np.asarray(a, dtype=dtype) for a in args)
    low_kw = {**kw, "initial_state": State(S0.S.astype(dtype), None)}
    exact_low = _family(name).spec.exact_output(low, low_kw)  # the rounded inputs' own
    forms = _forms(name)
    bound = forms["chunked"].bound(*low, causal=True, **low_kw)
    for kind, form in forms.items():
        sizes = (1, 3, 4, 16) if kind == "chunked" else (None,)
        for C in sizes:
            extra = {} if C is None else {"chunk_size": C}
            options = {k: v for k, v in low_kw.items() if k in form.options}
            got = form.call(*low, causal=True, **options, **extra)
            if "initial_state" not in form.options:  # the parallel form: no hand-over
                continue
            assert got.dtype == dtype
            err = np.abs(got - exact_low)
            assert (err <= bound).all(), (kind, C, float((err / bound).max()))
    if dtype == np.float64:
        assert np.abs(exact - exact_low).max() == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_the_parallel_form_is_within_its_bound(name):
    forms = _forms(name)
    if "parallel" not in forms:
        pytest.skip(f"{name} has no quadratic form: its decays are per channel")
    rng = np.random.default_rng(23)
    args = _arguments(name, rng, 12)
    kw = {"qk_l2norm": True}
    exact = _family(name).spec.exact_output(args, kw)
    got = forms["parallel"].call(*args, causal=True, **kw)
    assert (np.abs(got - exact) <= forms["parallel"].bound(*args, causal=True, **kw)).all()


@pytest.mark.parametrize("name", NAMES)
def test_a_state_handed_over_inside_a_chunk_gives_one_pass(name):
    rng = np.random.default_rng(24)
    n, cut = 13, 5
    args = _arguments(name, rng, n)
    spec = _family(name).spec(SpecOptions(causal=True))
    forms = _forms(name)
    whole, S = forms["chunked"].call(*args, causal=True, chunk_size=4, return_state=True)
    bound = forms["chunked"].bound(*args, causal=True)
    for kind in ("chunked", "recurrent"):
        f = forms[kind]
        size = {"chunk_size": 4} if kind == "chunked" else {}
        first, mid = f.call(*spec.take_arguments(args, 0, cut), causal=True, return_state=True,
                            **size)  # fmt: skip
        rest, end = f.call(*spec.take_arguments(args, cut, n), causal=True, initial_state=mid,
                           return_state=True, **size)  # fmt: skip
        joined = np.concatenate([first, rest], axis=-2)
        assert (np.abs(joined - whole) <= 2 * bound).all()
        state_bound = spec.state_bound(args, np.float64, n)
        assert (np.abs(end.S - S.S) <= state_bound).all()


@pytest.mark.parametrize("name", NAMES)
def test_the_step_is_the_recurrent_form_token_by_token(name):
    import kernelcheck.attention as A

    rng = np.random.default_rng(25)
    n, D, dv = 6, 4, 3
    args = _arguments(name, rng, n, D, dv, ())
    rec = getattr(A, RECURRENCES[name])()
    state = rec.init(D, dv)
    ys = []
    for t in range(n):
        state, y = rec.step(state, *(a[t] for a in args))
        ys.append(y)
    expected, S = _forms(name)["recurrent"].call(*args, causal=True, return_state=True)
    assert np.array_equal(np.stack(ys), expected)
    assert np.array_equal(state.S, S.S)


@pytest.mark.parametrize("name", NAMES)
def test_inputs_are_never_written_to(name):
    rng = np.random.default_rng(26)
    args = _arguments(name, rng, 9)
    copies = [a.copy() for a in args]
    S0 = State(rng.standard_normal((2, 4, 3)), None)
    S0_copy = S0.S.copy()
    for form in _family(name).forms:
        options = {"initial_state": S0} if "initial_state" in form.options else {}
        form.call(*args, causal=True, qk_l2norm=True, **options)
        form.bound(*args, causal=True, qk_l2norm=True, **options)
    for a, c in zip(args, copies, strict=True):
        assert np.array_equal(a, c)
    assert np.array_equal(S0.S, S0_copy)


def _bad(name, args):
    """(positional arguments, the argument named, the message) of bad calls."""
    q, k, v = args[:3]
    tokens = list(args[3:])
    nan_q = q.copy()
    nan_q[0, 1, 2] = np.nan
    rows = [((nan_q, k, v, *tokens), "q", "finite")]
    family = _family(name)
    for i, ti in enumerate(family.token_inputs):
        wrong_shape = tokens.copy()
        wrong_shape[i] = np.ones(tokens[i].shape[:-1] + (tokens[i].shape[-1] + 1,))
        rows.append(((q, k, v, *wrong_shape), None, "broadcast"))
        if ti.option in ("beta", "decay", "key_decay"):
            negative = tokens.copy()
            negative[i] = -tokens[i]
            rows.append(((q, k, v, *negative), None, "must be"))
        if ti.option in ("decay", "key_decay"):
            above = tokens.copy()
            above[i] = tokens[i] + 1.0
            rows.append(((q, k, v, *above), None, r"\[0, 1\]|\(0, 1\]"))
    return rows


@pytest.mark.parametrize("name", NAMES)
def test_bad_inputs_are_refused_by_name(name):
    rng = np.random.default_rng(27)
    args = _arguments(name, rng, 5)
    forms = _family(name).forms
    names = ("q", "k", "v") + _family(name).spec.tokens
    for bad_args, named, message in _bad(name, args):
        for form in forms:
            for call in (form.call, form.bound):
                with pytest.raises(InvalidArgument, match=message) as info:
                    call(*bad_args, causal=True)
                text = str(info.value)
                assert named is None or f"`{named}`" in text
                assert any(f"`{a}`" in text or f"`{t}`" in text for a in names
                           for t in ("gates", "key_decay", "dplr_a", "dplr_b", a))  # fmt: skip
    with pytest.raises(InvalidArgument, match="causal"):
        forms[0].bound(*args, causal=False)


@pytest.mark.parametrize("name", NAMES)
def test_every_bug_shape_lies_beyond_the_float32_tolerance(name):
    rng = np.random.default_rng(28)
    n = 16
    args = _arguments(name, rng, n, 8, 4)
    options = SpecOptions(causal=True, scale=0.5, flags={"qk_l2norm": True})
    spec = _family(name).spec(options)
    ref_args, kw = spec.arguments(args[0], args[1], args[2], dict(zip(spec.tokens, args[3:])))
    form = _family(name).reference
    ref = form.call(*ref_args, causal=True, **kw)
    tol = form.bound(*ref_args, causal=True, dtype=np.float32, **kw)
    tol = tol + form.bound(*ref_args, causal=True, **kw)
    shapes = spec.bug_shapes(ref_args, kw, None, False)
    assert len(shapes) >= 3
    for label, out in shapes.items():
        beyond = np.abs(out - ref) / tol
        assert beyond.max() > 1.0, f"{label}: within the float32 tolerance"


@pytest.mark.parametrize("name", NAMES)
def test_expanding_transitions_leave_the_case_not_judged(name):
    rng = np.random.default_rng(29)
    n, D = 24, 4
    args = list(_arguments(name, rng, n, D, 3, ()))
    args[1] = args[1] * 3.0  # unit keys made |k|^2 = 9: beta |k|^2 up to 9
    if name == "dplr":
        args[4] = -4.0 * args[3]  # b = 4 kappa: the rank-one part expands by up to 3
    else:
        args[-1] = np.full(n, 0.9)
    form = _family(name).reference
    b64 = form.bound(*args, causal=True)
    b16 = form.bound(*args, causal=True, dtype="float32")
    assert np.isinf(b16).any()
    assert np.isfinite(b64[:4]).all()
    spec = _family(name).spec(SpecOptions(causal=True))
    assert spec.judged(tuple(args), {}, b16) == NOT_JUDGED
    assert spec.judged(tuple(args), {}, b64[:4]) == ""


@pytest.mark.parametrize("name", NAMES)
def test_a_final_state_that_overflows_is_a_numerical_failure(name):
    """One token, ``q = 1e-200``, ``k = v = 1e200``: the chunked output
    ``(q . k) beta v`` is finite, the state ``k (beta v)^T`` is not.  Returning
    that state would hand an ``inf`` to the next call as if it were a number."""
    args = list(_arguments(name, np.random.default_rng(31), 1, 1, 1, ()))
    args[:3] = [np.array([[1e-200]]), np.array([[1e200]]), np.array([[1e200]])]
    form = _forms(name)["chunked"]
    assert np.isfinite(form.call(*args, causal=True)).all()
    with pytest.raises(NumericalFailure, match="state is not finite"):
        form.call(*args, causal=True, return_state=True)


def test_the_l2_normalisation_of_a_row_beyond_the_float_range_is_its_direction():
    """``|x|^2 = 2e400`` overflows: ``x / sqrt(|x|^2 + eps)`` would be 0; the row
    scaled by a power of two first gives ``x / |x|``, within ``D + 2`` roundings."""
    X = np.array([[1e200, -1e200, 3.0], [3.0, 4.0, 0.0]])
    got = l2_normalized(X)
    want = np.array([[2**-0.5, -(2**-0.5), 3.0 / (2**0.5 * 1e200)], [0.6, 0.8, 0.0]])
    assert np.abs(got[0] - want[0]).max() <= 5 * np.finfo(np.float64).eps
    # a row within the range keeps the shipped formula with its eps
    assert np.array_equal(got[1], X[1] / np.sqrt(25.0 + 1e-6))


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_gradient_is_the_exact_derivative(name):
    """Every input's gradient against a 50-digit central difference of the exact recurrence."""
    import kernelcheck.attention as A

    rng = np.random.default_rng(30)
    n, D, dv = 6, 3, 2
    args = _arguments(name, rng, n, D, dv, ())
    kw = {"qk_l2norm": True, "scale": 0.5}
    G = rng.standard_normal((n, dv))
    grads, (bound,) = getattr(A, f"{name}_vjp")(*args, G, models=((None, 0),), **kw)
    spec = _family(name).spec
    names = ["q", "k", "v"] + [lim.name for lim in spec.limits]
    h = 1e-6  # the perturbed inputs are float64 numbers: their rounding is 1e-10 of the step
    for i, label in enumerate(names):
        E = rng.standard_normal(np.shape(args[i])) * (0.01 if label == "gates" else 1.0)
        up, down = list(args), list(args)
        up[i], down[i] = args[i] + h * E, args[i] - h * E
        derivative = (np.sum(spec.exact_output(tuple(up), kw) * G)
                      - np.sum(spec.exact_output(tuple(down), kw) * G)) / (2 * h)  # fmt: skip
        slack = np.sum(np.abs(E) * bound[label]) + 1e-8 * (1.0 + abs(derivative))
        assert abs(np.sum(grads[label] * E) - derivative) <= slack, label
