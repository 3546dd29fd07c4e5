"""Bad input to the Monte Carlo engine (kernelcheck.stats) and its Dask runner is refused by name.

Every public function of ``kernelcheck.stats`` gets: bad input (wrong types,
shapes, NaN/Inf, complex/object values, trial functions that raise or return
NaN or wrongly shaped values) -> ``InvalidArgument`` naming the argument;
extreme values -> a correct answer or a clean ``NumericalFailure``, never
inf or NaN moments; read-only input is never written.  One Hypothesis test
per public function checks that contract on drawn inputs.  The arguments of
:mod:`kernelcheck.distributed` are checked without starting a cluster.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention, stats
from kernelcheck import distributed as D
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.stats import (
    Moments,
    berry_esseen_bound,
    central_from_raw_ratios,
    central_moments_of_mean,
    root_seed_sequence,
    run_trials,
    shard_seed,
    trials_needed,
)
from tests.inputs import assert_refused, readonly

Q, K, V = np.random.default_rng(17).normal(size=(3, 5, 3))

IA = InvalidArgument  # the error most rows expect


def _raises(rng, n):
    raise ZeroDivisionError("boom")


STATS_BAD = [
    (lambda: run_trials(_raises, 10, seed=0), "`fn` raised ZeroDivisionError: boom"),
    (
        lambda: run_trials(lambda r, n: np.full((n, 2), np.nan), 10, seed=0),
        "`values` must be finite",
    ),
    (
        lambda: run_trials(lambda r, n: np.ones(n) + 1j, 10, seed=0),
        "the trial function `fn` returned array of shape (10,) and dtype complex128",
    ),
    (
        lambda: run_trials(lambda r, n: np.array([object()] * n), 10, seed=0),
        "the trial function `fn` returned array of shape (10,) and dtype object",
    ),
    (lambda: run_trials(lambda r, n: np.ones(n + 1), 10, seed=0), "with 10 rows"),
    (lambda: run_trials(lambda r, n: (np.ones(n), np.ones(3)), 10, seed=0), "`aux` must have"),
    (lambda: run_trials(lambda r, n: np.ones(n), 1, seed=0), "`trials` must be >= 2"),
    (lambda: run_trials(lambda r, n: np.ones(n), 5, seed="x"), "`seed`"),
    (lambda: run_trials(None, 5, seed=0), "`fn` must be callable"),
    (lambda: root_seed_sequence(True), "`seed`"),
    (lambda: shard_seed("root", 0), "`root`"),
    (lambda: berry_esseen_bound([[1.0], [2.0, 3.0]], 5), "`std_ratio`"),
    (lambda: trials_needed(1.0, math.nan), "`tolerance` must be finite"),
    (lambda: central_moments_of_mean(np.ones(3), 2.0), "`m` must be an integer"),
    (lambda: central_from_raw_ratios(np.array(["a"])), "`log_r`"),
    (lambda: Moments.from_samples(np.ones((0, 3))), "`values` must not be empty"),
    (lambda: Moments.from_samples(np.float64(1.0)), "`values` must have at least 1"),
]


@pytest.mark.parametrize("call, text", STATS_BAD)
def test_stats_bad_input(call, text):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert text in str(info.value)


def test_run_trials_with_huge_values_fails_cleanly_not_with_inf_or_nan_moments():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NumericalFailure, match="float64 range"):
            run_trials(lambda r, n: np.full(n, 1e300) * r.random(n), 10, seed=0)


def test_read_only_inputs_everywhere():
    """Read-only inputs (a write would raise) give the answer of writable copies."""
    vals = readonly(np.random.default_rng(0).normal(size=(20, 2)))
    a, b = Moments.from_samples(vals, aux=vals), Moments.from_samples(vals.copy(), aux=vals.copy())
    for attr in ("mean", "m2", "m3", "m4", "maximum"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr
    calls = [
        (central_from_raw_ratios, ([0.0, 0.0, 0.1],)),
        (central_moments_of_mean, ([1.0, 0.0, 1.0], 3)),
        (berry_esseen_bound, ([1.0, 2.0], 10)),
        (trials_needed, ([1.0, 2.0], 0.1)),
    ]
    for fn, (x, *rest) in calls:
        got, ref = fn(readonly(x), *rest), fn(np.array(x), *rest)
        assert np.array_equal(np.asarray(got), np.asarray(ref)), fn.__name__


# ---------------------------------------------------------------------------
# One Hypothesis test per public function: a correct answer or a clean error
# ---------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(
    vals=hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 6), st.integers(1, 3)),
        elements=st.floats(-1e100, 1e100),
    )
)
def test_moments_answer_or_fail_cleanly(vals):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            mo = Moments.from_samples(vals)
        except NumericalFailure:
            # only when a fourth power of a deviation can leave the range
            assert np.abs(vals - vals.mean(axis=0)).max() > 1e70
            return
    for a in (mo.mean, mo.m2, mo.m3, mo.m4):
        assert np.isfinite(a).all()


@settings(max_examples=15, deadline=None)
@given(k=st.integers(0, 3), seed=st.integers(0, 2**32))
def test_seed_helpers_total(k, seed):
    assert shard_seed(root_seed_sequence(seed), k).spawn_key[-1] == k


@settings(max_examples=20, deadline=None)
@given(r=st.floats(0, 1e300), n=st.integers(1, 10**9), tol=st.floats(1e-9, 1.0))
def test_berry_esseen_and_trials_needed_total(r, n, tol):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert berry_esseen_bound(r, n) >= 0
        assert trials_needed(r, tol) >= 0


@settings(max_examples=20, deadline=None)
@given(
    log_r=hnp.arrays(np.float64, st.integers(1, 7), elements=st.floats(-5, 800)),
    m=st.integers(1, 50),
)
def test_moment_helpers_total(log_r, m):
    c = central_from_raw_ratios(log_r)
    out = central_moments_of_mean(c, m)
    assert out.shape == log_r.shape and out[0] == 1.0


@settings(max_examples=10, deadline=None)
@given(fail=st.sampled_from(["raise", "nan", "shape", "ok"]))
def test_run_trials_with_user_callables(fail):
    def fn(rng, n):
        if fail == "raise":
            raise ValueError("bad")
        if fail == "nan":
            return np.full(n, np.nan)
        if fail == "shape":
            return np.ones(n + 1)
        return rng.random(n)

    if fail == "ok":
        assert 0 < run_trials(fn, 20, seed=1).mean < 1
    else:
        with pytest.raises(InvalidArgument):
            run_trials(fn, 20, seed=1)


def _enter(context):
    """Enter and leave a context manager (``dask_executor`` validates on entry)."""
    with context:
        pass  # pragma: no cover - every row here is refused before a cluster starts


DISTRIBUTED_BAD = [
    ("de-workers", lambda: _enter(D.dask_executor(workers=0)), IA, r"^`workers` must"),
    ("de-workers-neg", lambda: _enter(D.dask_executor(workers=-1)), IA, r"^`workers`"),
    (
        "de-workers-float",
        lambda: _enter(D.dask_executor(workers=1.5)),
        IA,
        r"^`workers` must be an integer, got float 1.5",
    ),
    (
        "de-threads",
        lambda: _enter(D.dask_executor(threads_per_worker=0)),
        IA,
        r"^`threads_per_worker` must be >= 1, got 0",
    ),
    (
        "de-retries",
        lambda: _enter(D.dask_executor(retries=-1)),
        IA,
        r"^`retries` must be >= 0, got -1",
    ),
    ("de-timeout", lambda: _enter(D.dask_executor(timeout=0)), IA, r"^`timeout` must"),
    (
        "de-timeout-nan",
        lambda: _enter(D.dask_executor(timeout=math.nan)),
        IA,
        r"^`timeout` must be finite, got nan",
    ),
    (
        "de-scheduler",
        lambda: _enter(D.dask_executor(scheduler=5)),
        IA,
        r"^`scheduler` must be a scheduler address",
    ),
    (
        "de-scheduler-blank",
        lambda: _enter(D.dask_executor(scheduler=" ")),
        IA,
        r"^`scheduler` must be a scheduler address such as 'tcp://10.0.0.5:8786', got str ' '",
    ),
    (
        "de-both",
        lambda: _enter(D.dask_executor(scheduler="tcp://127.0.0.1:1", workers=2)),
        IA,
        r"^`workers` = 2 starts a local cluster, but `scheduler` = 'tcp://127.0.0.1:1' was given",
    ),
    ("ss-zero", lambda: D.suggested_shards(None, 0), IA, r"^`per_thread` must be >="),
    ("ss-float", lambda: D.suggested_shards(None, 1.5), IA, r"^`per_thread` must be"),
    ("ss-str", lambda: D.suggested_shards(None, "4"), IA, r"^`per_thread` must be an"),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in DISTRIBUTED_BAD], ids=[c[0] for c in DISTRIBUTED_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message read from the start."""
    assert_refused(call, error, message)


HELPERS_BAD = {
    "Moments.merge": (lambda: stats.Moments.from_samples(np.ones((3, 2))).merge(5), "`other`"),
    "Moments.variance-ddof": (
        lambda: stats.Moments.from_samples(np.ones((3, 2))).variance(ddof=5),
        r"`ddof` must be less than the number of trials \(3\)",
    ),
    "Moments.variance-ddof-negative": (
        lambda: stats.Moments.from_samples(np.ones((3, 2))).variance(ddof=-1),
        r"^`ddof` must be >= 0",
    ),
    "berry_esseen-negative": (lambda: stats.berry_esseen_bound(-1.0, 10), "`std_ratio`"),
    "softmax-scale-string": (
        lambda: attention.softmax(Q, K, V, scale="2"),
        "^`scale` must be a real",
    ),
    "run_trials-progress-string": (
        lambda: stats.run_trials(lambda r, c: r.normal(size=(c, 1)), 4, seed=0, progress="yes"),
        "^`progress` must be True or False",
    ),
    "trials_needed-negative": (lambda: stats.trials_needed(-2.0, 0.1), "`std_ratio`"),
    "berry_esseen-nan": (lambda: stats.berry_esseen_bound(np.nan, 10), "^`std_ratio` must be >= 0"),
    "berry_esseen-minus-inf": (lambda: stats.berry_esseen_bound(-np.inf, 10), "^`std_ratio`"),
    "berry_esseen-nan-entry": (
        lambda: stats.berry_esseen_bound(np.array([1.0, np.nan]), 10),
        r"^`std_ratio` must be >= 0 .* got nan",
    ),
    "berry_esseen-n-zero": (lambda: stats.berry_esseen_bound(1.0, 0), "^`n` must be >= 1"),
    "berry_esseen-n-float": (lambda: stats.berry_esseen_bound(1.0, 2.5), "^`n`"),
    "trials_needed-nan": (lambda: stats.trials_needed(np.nan, 0.1), "^`std_ratio` must be >= 0"),
    "trials_needed-tolerance-nan": (lambda: stats.trials_needed(1.0, np.nan), "^`tolerance`"),
    "trials_needed-tolerance-inf": (lambda: stats.trials_needed(1.0, np.inf), "^`tolerance`"),
    "trials_needed-tolerance-negative": (lambda: stats.trials_needed(1.0, -0.1), "^`tolerance`"),
    "Moments-count-zero": (lambda: _moments(count=0), "^`count` must be >= 1"),
    "Moments-count-bool": (lambda: _moments(count=True), "^`count`"),
    "Moments-mean-nan": (
        lambda: _moments(mean=np.array([np.nan])),
        r"^`mean` must be a finite real array, got array of shape \(1,\)",
    ),
    "Moments-m4-inf": (lambda: _moments(m4=np.array([np.inf])), "^`m4` must be a finite"),
    "Moments-m2-negative": (
        lambda: _moments(m2=np.array([-1.0])),
        r"^`m2` is a sum of even powers and must be >= 0, got array of shape \(1,\)",
    ),
    "Moments-m4-negative": (lambda: _moments(m4=np.array([-1.0])), "^`m4` is a sum of even"),
    "Moments-m3-complex": (lambda: _moments(m3=np.array([1j])), "^`m3` must be a finite real"),
    "Moments-shapes": (
        lambda: _moments(m2=np.ones(2)),
        r"^`m2` must have the shape \(1,\) of `mean`, got array of shape \(2,\)",
    ),
    "Moments-aux-nan": (
        lambda: stats.Moments.from_samples(np.ones((3, 1)), aux=np.full((3, 1), np.nan)),
        r"^`aux` must be finite",
    ),
    "Moments-aux-shape": (
        lambda: stats.Moments.from_samples(np.ones((3, 1)), aux=np.ones((3, 2))),
        r"^`aux` must have the shape \(3, 1\) of `values`, got array of shape \(3, 2\)",
    ),
    "Moments-maximum-nan": (lambda: _moments(maximum=np.array([np.nan])), "^`maximum`"),
    "Moments-confidence-alpha": (
        lambda: stats.Moments.from_samples(np.ones(3)).confidence_interval(1.5),
        "^`alpha` must lie strictly between 0 and 1",
    ),
    "Moments-std_error-one-trial": (
        lambda: stats.Moments.from_samples(np.ones(1)).std_error(),
        r"^`ddof` must be less than the number of trials \(1\)",
    ),
}


def _moments(**changes):
    """A hand-built Moments of one entry (3 trials of 0, 1, 2) with ``changes``."""
    fields = {"count": 3, "mean": np.ones(1), "m2": 2.0 * np.ones(1), "m3": np.zeros(1)}
    fields.update(m4=2.0 * np.ones(1), maximum=None)
    fields.update(changes)
    return stats.Moments(**fields)


def test_a_hand_built_moments_that_is_valid_gives_the_sample_statistics():
    x = np.array([[0.0], [1.0], [2.0]])
    made, measured = _moments(), stats.Moments.from_samples(x)
    for attr in ("mean", "m2", "m3", "m4"):
        np.testing.assert_allclose(getattr(made, attr), getattr(measured, attr), atol=1e-15)
    np.testing.assert_allclose(made.variance(), x.var(axis=0, ddof=1))


@pytest.mark.parametrize("ratio", [np.inf, np.array([1.0, np.inf])])
def test_an_unknown_std_ratio_gives_the_true_uninformative_answer_inf(ratio):
    """``inf`` is the documented "no finite bound known": the bound and the trials are inf."""
    bound = np.asarray(stats.berry_esseen_bound(ratio, 10))
    need = np.asarray(stats.trials_needed(ratio, 0.1))
    unknown = np.isinf(np.asarray(ratio))
    assert np.isinf(bound[unknown]).all() and np.isfinite(bound[~unknown]).all()
    assert np.isinf(need[unknown]).all() and np.isfinite(need[~unknown]).all()
    assert (np.asarray(stats.berry_esseen_bound(ratio, 10)) >= 0).all()


@pytest.mark.parametrize("name", sorted(HELPERS_BAD))
def test_helpers_refuse_what_would_give_garbage_or_a_silent_cast(name):
    call, message = HELPERS_BAD[name]
    with pytest.raises(InvalidArgument, match=message):
        call()
