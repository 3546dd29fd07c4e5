"""Inputs to every form of every attention family: refused by name, accepted, extreme (C1-C24).

Every test here runs over :data:`kernelcheck.attention.FAMILIES` (the
``attention_form`` argument of ``tests/conftest.py``, or tables built from the
registry at import): a family added to the registry is checked without a line
changed here.  The inputs are each family's ``spec.example_arguments``.

* bad input: each of the three input arrays of every form, and of every
  distinct error bound, in turn 1-d, NaN, Inf, empty, complex, object, a
  string, extended precision; too few keys or values; a last dimension or
  batch dimensions that do not match; a causal flag (or, for a causal-only
  form, an action) that is not one: ``InvalidArgument`` whose message opens
  with the argument in backticks, matched case-sensitively from its start, so
  that the argument named is the one passed;
* the registry's look-ups refuse unknown names, listing the registered ones;
* accepted inputs: read-only arrays (never written), non-contiguous views
  (within twice the a-priori bound) and nested lists give the float64 answer;
  integer and float16 inputs become float64; float32 stays float32 (a bound is
  a float64 number); one float64 array makes the result float64; the messages
  of mismatched batches and last dimensions describe every argument;
* a single token attends to itself: the output is its value, within the bound;
* extreme values: Hypothesis feeds finite values from 5e-324 to 1e300 to every
  form and bound; each gives a finite answer with its inputs unchanged, or a
  clean error; a bound is never NaN and never negative, also where products
  of features overflow and meet values of 0 (``inf * 0``).

What is peculiar to one family (its options, its kernel, its gates, its
state) is in ``tests/attention/families/test_<family>.py``; the finiteness of
the result at every position in ``test_finite.py``.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import attention as att
from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck.attention import FAMILIES, FORMS
from kernelcheck.errors import InvalidArgument
from tests.attention.inputs import CLEAN, answer_or_clean_error, extreme_arrays
from tests.attention.inputs import form_options as _options
from tests.attention.inputs import masks as _masks
from tests.inputs import readonly

#: Sizes of the bad-input rows' inputs: five tokens, d = 3, D = 4, d_v = 2.
N, d, D, d_v = 5, 3, 4, 2


def _example(family, n=N, dd=d, DD=D, dv=d_v, seed=20240611):
    return family.spec.example_arguments(np.random.default_rng(seed), n, dd, DD, dv)


def _callables():
    """``(id, function, form)`` of every form, then of every distinct error bound.

    A bound shared by several forms (one per family, usually) is one entry,
    named after its function, with the first form using it.
    """
    out = []
    for family in FAMILIES:
        out += [(form.name, form.function, form) for form in family.forms]
        bounds = dict.fromkeys(f.error_bound for f in family.forms)
        out += [
            (b.__name__, b, next(f for f in family.forms if f.error_bound is b)) for b in bounds
        ]
    return out


def _family_of(form):
    return next(fam for fam in FAMILIES if form in fam.forms)


# ----- bad input -----------------------------------------------------------------------


def _array_rows(name, fn, form):
    """The rows of one function: each input array bad in each way, then the mismatches."""
    params = inspect.signature(fn).parameters
    qn, kn, vn = list(params)[:3]
    what = "d" if form.inputs == "queries" else "D"
    good = _example(_family_of(form))
    A0, B0, V = good[:3]
    # a function without a causal flag is causal only; one with it is called without
    causal = params["causal"].default if "causal" in params else True

    def call(*head, **kw):
        return lambda: fn(*head, *good[3:], **kw)

    rows = []
    for pos, arg in enumerate((qn, kn, vn)):
        last = what if pos < 2 else "d_v"

        def bad(value, pos=pos):
            head = list(good[:3])
            head[pos] = value
            return call(*head)

        x = good[pos]
        rows += [
            (
                f"{name}-{arg}-1d",
                bad(np.ones(3)),
                rf"^`{arg}` must have shape \(\.\.\., n, {last}\) with at least 2 dimensions, "
                r"got array of shape \(3,\)",
            ),
            (f"{name}-{arg}-nan", bad(np.full_like(x, np.nan)), rf"^`{arg}` must be finite"),
            (f"{name}-{arg}-inf", bad(np.full_like(x, -np.inf)), rf"^`{arg}` must be finite"),
            (
                f"{name}-{arg}-empty",
                bad(np.ones((0, x.shape[1]))),
                rf"^`{arg}` must not be empty",
            ),
            (f"{name}-{arg}-complex", bad(x + 1j), rf"^`{arg}` must be real"),
            (
                f"{name}-{arg}-object",
                bad(x.astype(object)),
                rf"^`{arg}` must be a real numeric array",
            ),
            (f"{name}-{arg}-str", bad("abc"), rf"^`{arg}` must be a numeric array, got str"),
            (
                f"{name}-{arg}-longdouble",
                bad(x.astype(np.longdouble)),
                rf"^`{arg}` has extended precision dtype",
            ),
        ]
    if causal:  # queries, keys and values of one length
        n_msg = (
            rf"^`{qn}`, `{kn}` and `{vn}` must have the same number of tokens n \(axis -2\) "
            rf"for causal attention, got {N}, {N - 1} and {N}"
        )
        nv_msg = n_msg.replace(f"{N}, {N - 1} and {N}", f"{N}, {N} and {N - 2}")
    else:  # cross-attention: any number of queries, keys and values of one length
        n_msg = (
            rf"^`{kn}` and `{vn}` must have the same number of tokens \(axis -2\), "
            rf"got {N - 1} and {N}"
        )
        nv_msg = n_msg.replace(f"got {N - 1} and {N}", f"got {N} and {N - 2}")
    # a flag that is not True or False: the mask, else the action, else the normaliser
    flags = ("causal", "on_bad_normalizer", "normalize", "qk_l2norm")
    flag_name = next((p for p in flags if p in params), None)
    flag = (
        ({flag_name: 1}, rf"^`{flag_name}` must be True or False, got int 1")
        if flag_name != "on_bad_normalizer"
        else ({flag_name: 1}, r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 1")
    )
    rows += [
        (f"{name}-n-mismatch", call(A0, B0[:-1], V), n_msg),
        (f"{name}-nv-mismatch", call(A0, B0, V[:-2]), nv_msg),
        (
            f"{name}-last-mismatch",
            call(A0, B0[:, :2], V),
            rf"^`{qn}` and `{kn}` must have the same last dimension {what}, got array of "
            rf"shape \({N}, \d\)",
        ),
        (
            f"{name}-batch-mismatch",
            call(A0[None], B0, V),
            rf"^the leading \(batch/head\) dimensions of `{qn}`, `{kn}` and `{vn}` must agree, "
            r"got \(1,\), \(\) and \(\)",
        ),
    ]
    if flag_name is not None:  # a form taking **options checks them in the form it calls
        rows.append((f"{name}-causal-int", call(A0, B0, V, **flag[0]), flag[1]))
    return rows


#: (id, call, message regex from the start): every form's and every bound's input arrays.
ARRAYS_BAD = [row for name, fn, form in _callables() for row in _array_rows(name, fn, form)]


@pytest.mark.parametrize(
    "call, message", [c[1:] for c in ARRAYS_BAD], ids=[c[0] for c in ARRAYS_BAD]
)
def test_bad_input_table(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def _one_of(names) -> str:
    return re.escape(", ".join(repr(n) for n in names))


#: The registry's look-ups: (id, call, error, message regex from the start).
REGISTRY_BAD = [
    (
        "get_form-unknown",
        lambda: att.get_form("flash"),
        InvalidArgument,
        rf"^`form` must be one of {_one_of(FORMS)}; got 'flash'",
    ),
    (
        "get_form-type",
        lambda: att.get_form(["softmax"]),
        InvalidArgument,
        r"^`form` must be one of",
    ),
    (
        "get_family-unknown",
        lambda: att.get_family("no-such-family"),
        InvalidArgument,
        rf"^`family` must be one of {_one_of(FAMILIES.names)}; got 'no-such-family'",
    ),
    ("get_family-type", lambda: att.get_family(3), InvalidArgument, r"^`family` must be one of"),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in REGISTRY_BAD], ids=[c[0] for c in REGISTRY_BAD]
)
def test_the_registry_refuses_unknown_names(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_bad_input_table_covers_every_form_and_bound():
    """The table is read from the registry: every form and every bound has its rows."""
    ids = {row[0] for row in ARRAYS_BAD}
    for family in FAMILIES:
        for form in family.forms:
            for name in (form.name, form.error_bound.__name__):
                assert f"{name}-n-mismatch" in ids and f"{name}-causal-int" in ids, name


# ----- accepted inputs -----------------------------------------------------------------


def _runs(form, args):
    """``(label, fn, bound or None)`` for the form and its bound, under each mask it computes."""
    out = []
    for causal in _masks(form):
        kw = _options(form, chunk_size=2)
        bkw = {k: v for k, v in kw.items() if k != "chunk_size"}
        out.append(
            (
                f"{form.name}-causal={causal}",
                lambda *a, c=causal, kw=kw: form.call(*a, causal=c, **kw),
                form.bound(*args, causal=causal, **bkw),
            )
        )
        out.append(
            (
                f"{form.error_bound.__name__}-causal={causal}",
                lambda *a, c=causal, kw=bkw: form.bound(*a, causal=c, **kw),
                None,
            )
        )
    return out


def test_readonly_noncontiguous_and_lists_give_the_float64_answer(attention_form):
    fam, form = attention_form
    args = _example(fam)
    rest = args[3:]
    for label, fn, bound in _runs(form, args):
        expected = fn(*args)
        # read-only inputs: a write into them would raise
        ro = [readonly(a) if isinstance(a, np.ndarray) else a for a in args]
        assert np.array_equal(fn(*ro), expected), label
        # non-contiguous views holding the same numbers: BLAS may take another
        # summation order, so the two results agree within twice the a-priori bound
        wide = [np.repeat(x, 2, axis=1)[:, ::2] for x in args[:3]]
        assert not wide[0].flags.c_contiguous
        got = fn(*wide, *rest)
        if bound is None:  # a bound is a sum of non-negative terms: the same numbers
            assert np.array_equal(got, expected), label
        else:
            assert np.all(np.abs(got - expected) <= 2 * bound), label
        # nested lists
        lists = [a.tolist() if isinstance(a, np.ndarray) else a for a in args]
        assert np.array_equal(fn(*lists), expected), label
        # the caller's arrays are unchanged
        assert all(
            np.array_equal(a, r) for a, r in zip(args, ro, strict=True) if isinstance(a, np.ndarray)
        )


def test_integer_float16_and_bool_inputs_are_promoted_to_float64(attention_form):
    fam, form = attention_form
    args = _example(fam)
    rest = args[3:]
    ints = [np.round(4 * x).astype(np.int64) for x in args[:3]]
    halves = [x.astype(np.float16) for x in args[:3]]
    for label, fn, _ in _runs(form, args):
        out = fn(*ints, *rest)
        assert out.dtype == np.float64, label
        assert np.array_equal(out, fn(*[x.astype(np.float64) for x in ints], *rest)), label
        out16 = fn(*halves, *rest)
        assert out16.dtype == np.float64, label
        assert np.array_equal(out16, fn(*[x.astype(np.float64) for x in halves], *rest)), label


def test_float32_inputs_stay_float32(attention_form):
    fam, form = attention_form
    args = _example(fam)
    single = [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args]
    for label, fn, bound in _runs(form, args):
        # a form computes in float32; a bound is always a float64 number
        assert fn(*single).dtype == (np.float64 if bound is None else np.float32), label


@pytest.mark.parametrize("wide", [0, 1, 2])
def test_one_float64_argument_makes_the_result_float64(attention_form, wide):
    fam, form = attention_form
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in _example(fam)]
    kw = _options(form)
    causal = _masks(form)[-1]
    assert form.call(*args, causal=causal, **kw).dtype == np.float32
    args[wide] = args[wide].astype(np.float64)
    assert form.call(*args, causal=causal, **kw).dtype == np.float64


def test_batch_and_last_dimension_messages_describe_every_argument(attention_form):
    fam, form = attention_form
    qn, kn, vn = list(inspect.signature(form.function).parameters)[:3]
    what = "d" if form.inputs == "queries" else "D"
    A0, B0, V, *rest = _example(fam)
    Bb = np.broadcast_to(B0, (2, 3) + B0.shape)
    Vb = np.broadcast_to(V, (2, 3) + V.shape)
    causal = _masks(form)[-1]
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            f"the leading (batch/head) dimensions of `{qn}`, `{kn}` and `{vn}` must agree, got "
            "(1,), (2, 3) and (2, 3)"
        ),
    ):
        form.call(A0[None], Bb, Vb, *rest, causal=causal)
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            f"`{qn}` and `{kn}` must have the same last dimension {what}, got array of shape "
            f"{A0.shape} and dtype float64 and array of shape {B0[:, :2].shape} and dtype float64"
        ),
    ):
        form.call(A0, B0[:, :2], V, *rest, causal=causal)


def test_a_single_token_attends_to_itself(attention_form):
    """n = 1 and d = D = 1: the output is the family's definition on one token (for a
    normalised form, the token's own value), within the form's bound (a form whose
    weights are exact gives its value exactly: its family's file says which)."""
    fam, form = attention_form
    one = np.array([[0.7]])
    v = np.array([[3.0, -1.0]])
    args = (one, one, v) + tuple(_example(fam, n=1, dd=1, DD=1)[3:])
    for causal in _masks(form):
        kw = _options(form)
        out = form.call(*args, causal=causal, **kw)
        bound = form.bound(*args, causal=causal, **kw)
        exact = fam.spec.exact_output(args, kw, causal)
        assert out.shape == v.shape and np.all(np.abs(out - exact) <= bound), causal
        if fam.spec(SpecOptions(causal=causal, normalize=kw.get("normalize", True))).normalize:
            assert np.array_equal(exact, v)  # a normalised token attends to itself


# ----- extreme values ------------------------------------------------------------------


def _draw_extreme(fam, form, data):
    """Extreme input arrays (features non-negative), the family's per-token inputs, a mask."""
    a, b, c = data.draw(extreme_arrays(positive=form.inputs == "features"))
    n, dd, dv = a.shape[0], a.shape[1], c.shape[1]
    rest = fam.spec.example_arguments(np.random.default_rng(0), n, dd, dd, dv)[3:]
    return a, b, c, rest, data.draw(st.sampled_from(_masks(form)))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_form_answers_or_fails_cleanly(attention_form, data):
    """Finite inputs from 5e-324 to 1e300 (features non-negative): a finite answer with the
    inputs unchanged, or InvalidArgument, NumericalFailure or BadNormalizer."""
    fam, form = attention_form
    a, b, c, rest, causal = _draw_extreme(fam, form, data)
    answer_or_clean_error(form.call, a, b, c, *rest, causal=causal, **_options(form))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_bound_is_never_nan(attention_form, data):
    """A bound on finite inputs is a number >= 0 or inf (no bound), or a clean error."""
    fam, form = attention_form
    a, b, c, rest, causal = _draw_extreme(fam, form, data)
    for x in (a, b, c):
        x.setflags(write=False)
    try:
        bound = form.bound(a, b, c, *rest, causal=causal)
    except CLEAN:
        return
    assert not np.isnan(bound).any() and (bound >= 0).all()


def test_a_bound_whose_products_overflow_onto_zero_values_is_not_nan(attention_form):
    """``|a| |b| = 1e400`` overflows and ``V = 0``: each exact term is 0, each computed
    one ``inf * 0``.  A bound there is a number >= 0 or inf (no bound), or a clean error."""
    fam, form = attention_form
    a = np.full((3, 2), 1e200)
    V = np.zeros((3, 1))
    rest = fam.spec.example_arguments(np.random.default_rng(0), 3, 2, 2, 1)[3:]
    norms = ({"normalize": False}, {"normalize": True}) if "normalize" in form.options else ({},)
    for causal in _masks(form):
        for kw in norms:
            try:
                bound = form.bound(a, a, V, *rest, causal=causal, **kw)
            except CLEAN:
                continue
            assert not np.isnan(bound).any() and (bound >= 0).all(), (causal, kw)
