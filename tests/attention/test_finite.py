"""The fast forms check their result, not their inputs, for NaN and Inf: the proof by exhaustion.

``parallel``, ``chunked``, ``recurrent`` and the gated forms take
their large inputs without scanning them (``as_array(finite=False)``) and
check the result, which every non-finite input entry must reach; only then
are the inputs scanned to name the argument (see
:mod:`kernelcheck._src.attention.common.types`).  These tests put a NaN, a +Inf and
a -Inf at *every* position of *every* input of every form, on two
backgrounds -- positive random entries, and zeros (where ``Inf * 0`` and
``NaN * 0`` are the only way the bad entry can travel) -- with chunk sizes
that leave a remainder and with several groups of chunks, and require the
error that names that argument.  Without the check of the result (or with a
BLAS that skipped zeros) the forms would return NaN or raise a different
error, and these tests fail.

``softmax`` keeps checking its inputs up front (a -Inf in K gives a logit of
-Inf and a weight of exactly 0: it would not reach the result); its test
here pins the same contract.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking
from kernelcheck._src.core.validate import all_finite
from kernelcheck.errors import InvalidArgument, NumericalFailure

N, D, DV = 7, 3, 2
RNG = np.random.default_rng(20260301)
_GATES = RNG.uniform(0.5, 1.0, 16)


def _g(a):
    """Gates in (0, 1), one per token of ``a``."""
    return _GATES[: a.shape[-2]]


def _feature_forms():
    """(label, form on (phi_q, phi_k, V)) for every fast linear form and option."""
    forms = []
    for normalize in (True, False):
        kw = {"normalize": normalize}
        tag = "norm" if normalize else "unnorm"
        forms += [
            (f"parallel-{tag}", lambda a, b, c, kw=kw: att.parallel(a, b, c, **kw)),
            (
                f"parallel-causal-{tag}",
                lambda a, b, c, kw=kw: att.parallel(a, b, c, causal=True, **kw),
            ),
            (f"recurrent-{tag}", lambda a, b, c, kw=kw: att.recurrent(a, b, c, **kw)),
            (f"chunked3-{tag}", lambda a, b, c, kw=kw: att.chunked(a, b, c, chunk_size=3, **kw)),
            (f"chunked1-{tag}", lambda a, b, c, kw=kw: att.chunked(a, b, c, chunk_size=1, **kw)),
            (f"chunked-{tag}", lambda a, b, c, kw=kw: att.chunked(a, b, c, **kw)),
            (
                f"gated_parallel-{tag}",
                lambda a, b, c, kw=kw: att.gated_parallel(a, b, c, _g(a), **kw),
            ),
            (
                f"gated_recurrent-{tag}",
                lambda a, b, c, kw=kw: att.gated_recurrent(a, b, c, _g(a), **kw),
            ),
            (
                f"gated_chunked3-{tag}",
                lambda a, b, c, kw=kw: att.gated_chunked(a, b, c, _g(a), chunk_size=3, **kw),
            ),
        ]
    return forms


FEATURE_FORMS = _feature_forms()
SOFTMAX_FORMS = [
    ("softmax", lambda a, b, c: att.softmax(a, b, c)),
    ("softmax-causal", lambda a, b, c: att.softmax(a, b, c, causal=True)),
]


def _backgrounds(kind: str):
    """Positive random features (finite, positive normalisers) and all-zero inputs."""
    if kind == "zeros":
        return np.zeros((N, D)), np.zeros((N, D)), np.zeros((N, DV))
    g = np.random.default_rng(kind == "random")
    return g.random((N, D)) + 0.1, g.random((N, D)) + 0.1, g.standard_normal((N, DV))


def _assert_every_position_is_named(form, inputs, names):
    for pos, name in enumerate(names):
        for idx in np.ndindex(*inputs[pos].shape):
            for bad in (np.nan, np.inf, -np.inf):
                args = [a.copy() for a in inputs]
                args[pos][idx] = bad
                with pytest.raises(InvalidArgument, match=rf"^`{name}` must be finite"):
                    form(*args)


@pytest.mark.parametrize("background", ["random", "zeros"])
@pytest.mark.parametrize("label, form", FEATURE_FORMS, ids=[f[0] for f in FEATURE_FORMS])
def test_every_non_finite_feature_or_value_is_named(label, form, background):
    _assert_every_position_is_named(form, _backgrounds(background), ("phi_q", "phi_k", "V"))


@pytest.mark.parametrize("background", ["random", "zeros"])
@pytest.mark.parametrize("label, form", SOFTMAX_FORMS, ids=[f[0] for f in SOFTMAX_FORMS])
def test_every_non_finite_softmax_input_is_named(label, form, background):
    _assert_every_position_is_named(form, _backgrounds(background), ("Q", "K", "V"))


@pytest.mark.parametrize("threads", [False, True], ids=["inline", "threads"])
@pytest.mark.parametrize("label, form", FEATURE_FORMS, ids=[f[0] for f in FEATURE_FORMS])
def test_non_finite_inputs_are_named_across_groups_and_batches(label, form, threads, monkeypatch):
    """With one chunk per group and one row per block (tiny cache budget) and a batch
    dimension, a NaN anywhere still reaches the checked rows: in a later group, in
    another batch entry, in the first or the last row; also when the groups run on
    worker threads (each lowering the shared finiteness flag of the rows it takes)."""
    monkeypatch.setattr(blocking, "CACHE_BYTES", 1)
    if threads:
        monkeypatch.setattr(blocking, "_PARALLEL_WORK", 0)
    g = np.random.default_rng(5)
    pq, pk = g.random((2, 2, 11, D)) + 0.1
    V = g.standard_normal((2, 11, DV))
    for pos, name in enumerate(("phi_q", "phi_k", "V")):
        for idx in [(0, 0, 0), (1, 10, 0), (1, 5, 1), (0, 10, 1)]:
            args = [pq.copy(), pk.copy(), V.copy()]
            args[pos][idx] = np.nan
            with pytest.raises(InvalidArgument, match=rf"^`{name}` must be finite"):
                form(*args)


def test_first_bad_argument_is_named_in_argument_order():
    """Several bad inputs: the first in argument order is named, as eager validation did."""
    pq, pk, V = _backgrounds("random")
    pk[2, 1] = np.nan
    V[0, 0] = np.inf
    with pytest.raises(InvalidArgument, match=r"^`phi_k` must be finite"):
        att.chunked(pq, pk, V)
    pq[6, 2] = -np.inf
    with pytest.raises(InvalidArgument, match=r"^`phi_q` must be finite, but 1 entry"):
        att.parallel(pq, pk, V)


def test_overflow_of_finite_inputs_is_still_a_numerical_failure():
    """Finite inputs whose products overflow: the inputs are scanned, found finite, and the
    result is refused as an overflow (never returned, never blamed on an argument)."""
    pq = np.full((N, D), 1e200)
    V = np.ones((N, DV))
    for form in (att.parallel, att.chunked, att.recurrent):
        with pytest.raises(NumericalFailure, match="overflowed"):
            form(pq, pq, V)
    with pytest.raises(NumericalFailure, match="overflowed"):
        att.softmax(np.full((N, D), 1e200), np.full((N, D), 1e200), V)


@pytest.mark.parametrize("causal", [False, True])
def test_a_normaliser_overflowing_under_finite_numerators_is_a_numerical_failure(causal):
    """phi = 1e160 and v = 1e-300: each score is 1e320 (beyond float64), the numerators
    1e20.  A form that divided finite numerators by an infinite normaliser would return
    0 where the answer is 1e-300; every form must refuse the overflow instead."""
    phi = np.full((3, 1), 1e160)
    V = np.full((3, 1), 1e-300)
    calls = [lambda: att.parallel(phi, phi, V, causal=causal)]
    if causal:
        calls += [lambda: att.chunked(phi, phi, V), lambda: att.recurrent(phi, phi, V)]
    for call in calls:
        with pytest.raises(NumericalFailure, match="overflowed"):
            call()


def test_all_finite_falls_back_to_the_entries_when_the_sum_overflows():
    """The one-sum fast path must not refuse finite arrays whose sum overflows."""
    big = np.full(4, 1.5e308)
    assert all_finite(big)  # the sum is inf, every entry is finite
    assert not all_finite(np.r_[big, np.nan])
    assert not all_finite(np.r_[1.0, -np.inf])
    assert all_finite(np.empty((0, 3)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_finite_finds_every_non_finite_entry_and_survives_overflowing_sums(dtype):
    """Bidirectional ``parallel``'s check: column sums by GEMV, entries when a sum is not finite."""
    E = np.random.default_rng(5).standard_normal((2, 4, 6)).astype(dtype)
    assert blocking.columns_finite(E)
    for index in np.ndindex(E.shape):
        for bad in (np.nan, np.inf, -np.inf):
            F = E.copy()
            F[index] = bad
            assert not blocking.columns_finite(F), (index, bad)
    F = E.copy()
    F[1, 0, 3], F[1, 2, 3] = np.inf, -np.inf  # their sum is NaN
    assert not blocking.columns_finite(F)
    big = np.full((3, 5), np.finfo(dtype).max / 2, dtype=dtype)  # every column sum overflows
    assert blocking.columns_finite(big)
    assert blocking.columns_finite(np.empty((4, 0), dtype=dtype))
