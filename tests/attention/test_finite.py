"""Every form names the input that holds a NaN or an Inf, wherever it is (claims C1-C24).

The fast forms take their large inputs without scanning them
(``as_array(finite=False)``) and check the result, which every non-finite input
entry must reach; only then are the inputs scanned to name the argument (see
:mod:`kernelcheck._src.attention.common.types`); ``softmax`` checks its inputs
up front (a -Inf in ``K`` gives a logit of -Inf and a weight of exactly 0: it
would not reach the result).  Either way the contract is the same, and these
tests hold every form of the registry (``attention_form``, each family's
``spec.example_arguments``) to it: a NaN, a +Inf and a -Inf at *every* position
of *every* input array, on two backgrounds -- the family's example inputs, and
zeros (where ``Inf * 0`` and ``NaN * 0`` are the only way the bad entry can
travel) -- under every option that changes the path (both masks, normalised or
not, chunk sizes that leave a remainder, one token a chunk, the default), and
with several groups of chunks on the calling thread and on worker threads;
each must raise the error that names that argument.  Without the check of the
result (or with a BLAS that skipped zeros) a form would return NaN or raise a
different error, and these tests fail.  Finite inputs whose products overflow
are an overflow, never blamed on an argument.
"""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest

from kernelcheck._src.attention.common import blocking
from kernelcheck.attention import FAMILIES, FORMS
from kernelcheck.errors import InvalidArgument, NumericalFailure
from tests.attention.inputs import masks as _masks

N, D, DV = 7, 3, 2


def _variants(form):
    """``(causal, options)`` of every path a form takes: both masks, normalised or not,
    chunks of 3 tokens (a remainder at n = 7), of 1 and the default size."""
    norms = ({"normalize": True}, {"normalize": False}) if "normalize" in form.options else ({},)
    chunks = ({"chunk_size": 3}, {"chunk_size": 1}, {}) if "chunk_size" in form.options else ({},)
    return [(c, {**a, **b}) for c in _masks(form) for a, b in itertools.product(norms, chunks)]


def _names(form) -> list[str]:
    """The names of the form's three input arrays."""
    return list(inspect.signature(form.function).parameters)[:3]


def _inputs(family, background, batch=(), n=N, seed=20260301):
    """The family's example inputs, or zeros in their place (per-token inputs kept)."""
    args = family.spec.example_arguments(np.random.default_rng(seed), n, D, D, DV, batch)
    if background == "zeros":
        args = tuple(np.zeros_like(a) for a in args[:3]) + tuple(args[3:])
    return list(args)


def _assert_every_position_is_named(form, inputs, causal, options):
    for pos, name in enumerate(_names(form)):
        for idx in np.ndindex(*inputs[pos].shape):
            for bad in (np.nan, np.inf, -np.inf):
                args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
                args[pos][idx] = bad
                with pytest.raises(InvalidArgument, match=rf"^`{name}` must be finite"):
                    form.call(*args, causal=causal, **options)


@pytest.mark.parametrize("background", ["examples", "zeros"])
def test_every_non_finite_input_is_named(attention_form, background):
    fam, form = attention_form
    for causal, options in _variants(form):
        _assert_every_position_is_named(form, _inputs(fam, background), causal, options)


@pytest.mark.parametrize("threads", [False, True], ids=["inline", "threads"])
def test_non_finite_inputs_are_named_across_groups_and_batches(
    attention_form, threads, monkeypatch
):
    """With one chunk per group and one row per block (tiny cache budget) and a batch
    dimension, a NaN anywhere still reaches the checked rows: in a later group, in
    another batch entry, in the first or the last row; also when the groups run on
    worker threads (each lowering the shared finiteness flag of the rows it takes)."""
    fam, form = attention_form
    monkeypatch.setattr(blocking, "CACHE_BYTES", 1)
    if threads:
        monkeypatch.setattr(blocking, "_PARALLEL_WORK", 0)
    inputs = _inputs(fam, "examples", batch=(2,), n=11, seed=5)
    for causal, options in _variants(form):
        for pos, name in enumerate(_names(form)):
            for idx in [(0, 0, 0), (1, 10, 0), (1, 5, 1), (0, 10, 1)]:
                args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
                args[pos][idx] = np.nan
                with pytest.raises(InvalidArgument, match=rf"^`{name}` must be finite"):
                    form.call(*args, causal=causal, **options)


def test_first_bad_argument_is_named_in_argument_order(attention_form):
    """Several bad inputs: the first in argument order is named, as eager validation did."""
    fam, form = attention_form
    first, second, third = _names(form)
    args = _inputs(fam, "examples")
    args[1][2, 1] = np.nan
    args[2][0, 0] = np.inf
    for causal in _masks(form):
        with pytest.raises(InvalidArgument, match=rf"^`{second}` must be finite"):
            form.call(*args, causal=causal)
    args[0][6, 2] = -np.inf
    for causal in _masks(form):
        with pytest.raises(InvalidArgument, match=rf"^`{first}` must be finite, but 1 entry"):
            form.call(*args, causal=causal)


def test_overflow_of_finite_inputs_is_still_a_numerical_failure(attention_form):
    """Finite inputs whose products overflow: the inputs are scanned, found finite, and the
    result is refused as an overflow (never returned, never blamed on an argument)."""
    fam, form = attention_form
    args = _inputs(fam, "examples")
    args[0] = np.full((N, D), 1e200)
    args[1] = np.full((N, D), 1e200)
    args[2] = np.ones((N, DV))
    for causal in _masks(form):
        with pytest.raises(NumericalFailure, match="overflow"):
            form.call(*args, causal=causal)


def test_a_state_that_overflows_after_the_last_output_is_a_numerical_failure(
    attention_state_form,
):
    """One token, q = 1e-200 and k = v = 1e200 (unnormalised where the form allows it): the
    output q.k v = 1e200 is finite, the state k v^T = 1e400 is not.  Handed back, that state
    is refused as an overflow; the output alone is still returned."""
    fam, form = attention_state_form
    args = _inputs(fam, "examples", n=1)
    args[0] = np.full((1, D), 1e-200)
    args[1] = np.full((1, D), 1e200)
    args[2] = np.full((1, DV), 1e200)
    kw = {"normalize": False} if "normalize" in form.options else {}
    try:
        out = form.call(*args, causal=True, **kw)
    except NumericalFailure:
        return  # the form already overflows on the output itself: refused, never returned
    try:
        _, state = form.call(*args, causal=True, return_state=True, **kw)
    except NumericalFailure as exc:
        assert "overflow" in str(exc) and np.isfinite(out).all()
        return
    assert np.isfinite(state.S).all() and (state.z is None or np.isfinite(state.z).all())


#: The normalised forms on feature matrices, whose scores are products of features.
NORMALISED_FEATURE_FORMS = [
    pytest.param(f, id=f.name)
    for f in FORMS.values()
    if f.inputs == "features" and "normalize" in f.options
]


@pytest.mark.parametrize("form", NORMALISED_FEATURE_FORMS)
def test_a_normaliser_overflowing_under_finite_numerators_is_a_numerical_failure(form):
    """phi = 1e160 and v = 1e-300: each score is 1e320 (beyond float64), the numerators
    1e20.  A form that divided finite numerators by an infinite normaliser would return
    0 where the answer is 1e-300; every form must refuse the overflow instead."""
    family = next(fam for fam in FAMILIES if form in fam.forms)
    rest = family.spec.example_arguments(np.random.default_rng(0), 3, 1, 1, 1)[3:]
    phi = np.full((3, 1), 1e160)
    V = np.full((3, 1), 1e-300)
    for causal in _masks(form):
        with pytest.raises(NumericalFailure, match="overflowed"):
            form.call(phi, phi, V, *rest, causal=causal, normalize=True)
