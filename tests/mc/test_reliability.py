"""Reliability tables for the Monte Carlo engine (kernelcheck.stats).

Every public function of ``kernelcheck.stats`` gets: bad input (wrong types,
shapes, NaN/Inf, complex/object values, trial functions that raise or return
NaN or wrongly shaped values) -> ``InvalidArgument`` naming the argument;
extreme values -> a correct answer or a clean ``NumericalFailure``, never
inf or NaN moments; read-only input is never written.  One Hypothesis test
per public function checks that contract on drawn inputs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

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


def _readonly(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


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
    vals = _readonly(np.random.default_rng(0).normal(size=(20, 2)))
    Moments.from_samples(vals, aux=vals)
    central_from_raw_ratios(_readonly([0.0, 0.0, 0.1]))
    central_moments_of_mean(_readonly([1.0, 0.0, 1.0]), 3)
    berry_esseen_bound(_readonly([1.0, 2.0]), 10)
    trials_needed(_readonly([1.0, 2.0]), 0.1)


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
