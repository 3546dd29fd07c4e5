"""Invariants of every attention family and form of the registry (claims C1, C10-C14, C19-C24).

Every test here runs over :data:`kernelcheck.attention.FAMILIES` (the
``attention_family`` and ``attention_form`` arguments of ``tests/conftest.py``):
a family added to the registry is checked by every invariant without a line
changed here.  The same holds for the inputs every form takes
(``test_family_inputs.py``: bad arrays refused by name, accepted kinds,
extreme values) and for the finiteness of its result (``test_finite.py``).
What is peculiar to one family lives in
``tests/attention/families/test_<family>.py``, what several families share
(blocking, decays, the recurrence engine, bound terms) in
``tests/attention/common/``.

* the record is consistent (its reference form is its first, its state form
  one of its forms taking a state, its per-token inputs named by its forms);
* every form is within its a-priori bound of the family's definition
  evaluated in high precision (mpmath), batched or not, in float64 and
  float32, with each mask it computes;
* the forms of a family agree within the sum of their bounds; the bound of a
  batch is the bounds of its members;
* a state handed over at any cut (inside a chunk too) gives the outputs and
  the final state of one pass;
* no form or bound writes into its inputs;
* bad input is refused with an ``InvalidArgument`` naming the argument;
* the recurrent state does not grow with n (C11).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.core.rounding import precision
from kernelcheck.attention import FORMS, cost_model
from kernelcheck.errors import InvalidArgument
from tests.attention.inputs import form_options as _options
from tests.attention.inputs import masks as _masks

FAMILIES_DIR = (
    Path(__file__).resolve().parents[2] / "kernelcheck" / "_src" / "attention" / "families"
)


def _arguments(family, rng, n, batch=(), dtype=np.float64, d=3, D=4, d_v=2) -> tuple:
    args = family.spec.example_arguments(rng, n, d, D, d_v, batch)
    return tuple(a.astype(dtype) if isinstance(a, np.ndarray) else a for a in args)


def _tokens(family, form, args, a: int, b: int) -> tuple:
    """Tokens ``a:b`` of the form's positional arguments (inputs and per-token inputs)."""
    by_name = {ti.name: ti for ti in family.token_inputs}
    head = tuple(x[..., a:b, :] for x in args[:3])
    rest = tuple(
        by_name[name].take(x, a, b) if name in by_name else x
        for name, x in zip(form.requires, args[3:], strict=True)
    )
    return head + rest


# ----- the records --------------------------------------------------------------


def test_every_form_belongs_to_one_family_with_a_folder_of_its_own(attention_family):
    fam = attention_family
    assert (FAMILIES_DIR / fam.name / "__init__.py").is_file()
    assert fam.forms and fam.reference is fam.forms[0]
    for form in fam.forms:
        assert FORMS[form.name] is form
        assert form.function.__module__.startswith(
            f"kernelcheck._src.attention.families.{fam.name}."
        )
    assert fam.claims and all(c.startswith("C") for c in fam.claims)
    assert set(fam.spec.__module__.split(".")) >= {"families", fam.name}


def test_the_state_form_is_a_form_of_the_family_that_takes_and_returns_a_state(attention_family):
    fam = attention_family
    if not fam.spec.has_state:
        assert fam.state_form is None
        return
    assert fam.state_form in fam.forms
    assert {"initial_state", "return_state"} <= set(fam.state_form.options)


def test_the_per_token_inputs_are_the_forms_required_arrays(attention_family):
    """Every per-token input is named by the forms that take it, and drawn by its sampler."""
    fam = attention_family
    names = {ti.name for ti in fam.token_inputs}
    for form in fam.forms:
        assert set(form.requires) - names <= {"kernel"}, form.name
    rng = np.random.default_rng(0)
    for ti in fam.token_inputs:
        assert ti.sample is not None
        values = ti.sample(rng, ti.shape((2,), 5, {"d": 3, "D": 4, "d_v": 2}))
        assert np.array_equal(ti.validate(values, values.shape, ti.option), values)


# ----- the bound against high precision ----------------------------------------------


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_form_is_within_its_bound_of_the_exact_output(attention_form, batch, dtype):
    """``|form - exact| <= bound`` entrywise, the exact output in mpmath (50 digits).

    Inputs in float32 are exact binary numbers too: the form computes in
    float32 and its bound uses float32's unit roundoff.
    """
    fam, form = attention_form
    rng = np.random.default_rng([len(batch), np.dtype(dtype).itemsize])
    args = _arguments(fam, rng, 9, batch, dtype)
    for causal in _masks(form):
        kw = _options(form, chunk_size=4)
        bound_kw = {k: v for k, v in kw.items() if k != "chunk_size"}
        out = np.asarray(form.call(*args, causal=causal, **kw))
        exact = fam.spec.exact_output(args, bound_kw, causal)
        bound = form.bound(*args, causal=causal, **bound_kw)
        assert out.dtype == dtype
        assert np.all(np.abs(out - exact) <= bound), (form.name, causal)


def test_the_forms_of_a_family_agree_within_their_bounds(attention_family):
    fam = attention_family
    rng = np.random.default_rng(5)
    args = _arguments(fam, rng, 23, (2,), d=4, D=6, d_v=3)
    for causal in (False, True):
        forms = [f for f in fam.forms if causal in _masks(f)]
        outs = [
            (np.asarray(f.call(*args, causal=causal, **_options(f, chunk_size=5))),
             f.bound(*args, causal=causal, **_options(f)))
            for f in forms
        ]  # fmt: skip
        for (a, ba), (b, bb) in zip(outs, outs[1:], strict=False):
            assert np.all(np.abs(a - b) <= ba + bb), (fam.name, causal)


def test_the_bound_of_a_batch_is_the_bounds_of_its_members(attention_form):
    """A batch of sequences is its sequences: each member's bound, within 8 u (the
    batched products may sum in another order)."""
    fam, form = attention_form
    args = _arguments(fam, np.random.default_rng(6), 6, (3, 2), d=4, D=4)
    for causal in _masks(form):
        whole = form.bound(*args, causal=causal, **_options(form))
        assert whole.shape == args[2].shape
        for b in np.ndindex(3, 2):
            member = tuple(a[b] if isinstance(a, np.ndarray) else a for a in args)
            alone = form.bound(*member, causal=causal, **_options(form))
            assert np.allclose(whole[b], alone, rtol=8 * 2.0**-53, atol=0), (b, causal)


# ----- state hand-over ----------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 7, 10, 12])
def test_a_state_handed_over_at_any_cut_gives_the_outputs_of_one_pass(attention_state_form, cut):
    """Prefill ``0:cut`` then the rest: the outputs and final state of one pass.

    The hand-over is the same computation with a chunk boundary at the cut
    (chunk size 5: cuts at 7 and 12 fall inside a chunk), whose roundings the
    form's bound for the whole sequence counts: split and one pass are each
    within it of the exact output.  The states agree within twice the
    family's state bound.
    """
    fam, form = attention_state_form
    rng = np.random.default_rng(cut)
    args = _arguments(fam, rng, 13, (2,))
    kw = _options(form, chunk_size=5)
    whole, state = form.call(*args, causal=True, return_state=True, **kw)
    first, handed = form.call(
        *_tokens(fam, form, args, 0, cut), causal=True, return_state=True, **kw
    )
    rest, final = form.call(
        *_tokens(fam, form, args, cut, 13),
        causal=True,
        initial_state=handed,
        return_state=True,
        **kw,
    )
    bound = form.bound(*args, causal=True, **_options(form))
    split = np.concatenate([first, rest], axis=-2)
    assert np.all(np.abs(split - whole) <= 2 * bound)
    spec = fam.spec(SpecOptions(causal=True, normalize=kw.get("normalize", False)))
    room = 2 * spec.state_bound(args, precision("float64"), 13)
    got = final.S if final.z is None else np.concatenate([final.S, final.z[..., None]], -1)
    ref = state.S if state.z is None else np.concatenate([state.S, state.z[..., None]], -1)
    assert np.all(np.abs(got - ref) <= room)


def test_the_recurrent_state_does_not_grow_with_n(attention_state_form):
    """C11: a form carrying a state holds as many numbers after 10 tokens as after 10^6."""
    fam, form = attention_state_form
    sizes = {cost_model(form.name, n, 3, 4, 2).state_size for n in (10, 1000, 10**6)}
    assert len(sizes) == 1
    _, state = form.call(*_arguments(fam, np.random.default_rng(1), 5), causal=True,
                         return_state=True, **_options(form))  # fmt: skip
    assert state.size == sizes.pop()


# ----- inputs and bad input -------------------------------------------------------------


def test_no_form_or_bound_writes_into_its_inputs(attention_form):
    fam, form = attention_form
    args = _arguments(fam, np.random.default_rng(2), 11, (2,))
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    for causal in _masks(form):
        form.call(*args, causal=causal, **_options(form, chunk_size=3))
        form.bound(*args, causal=causal, **_options(form))
    for a, c in zip(args, copies, strict=True):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, c)


def _array_parameters(form) -> list[str]:
    """The names of the form's positional array parameters, in order."""
    params = list(inspect.signature(form.function).parameters)
    return params[: 3 + sum(1 for r in form.requires if r != "kernel")]


@pytest.mark.parametrize("bad", ["nan", "inf", "short", "flat"])
def test_bad_input_is_refused_naming_the_argument(attention_form, bad):
    """NaN, Inf, a wrong length or a missing dimension in any array: InvalidArgument naming it."""
    fam, form = attention_form
    args = list(_arguments(fam, np.random.default_rng(3), 6))
    for i, name in enumerate(_array_parameters(form)):
        broken = list(args)
        x = np.array(args[i], dtype=np.float64)
        if bad == "nan":
            x.flat[x.size // 2] = np.nan
        elif bad == "inf":
            x.flat[0] = np.inf
        elif bad == "short":
            x = x[..., :-1, :] if i < 3 else np.take(x, range(x.shape[-1] - 1), axis=-1)
        else:
            x = x.reshape(-1)[:1].reshape(()) if i < 3 else x.reshape(-1)[:0]
        broken[i] = x
        with pytest.raises(InvalidArgument) as err:
            for causal in _masks(form):
                form.call(*broken, causal=causal, **_options(form))
        assert f"`{name}" in str(err.value) or (bad == "short" and "length" in str(err.value)), (
            name,
            str(err.value),
        )
