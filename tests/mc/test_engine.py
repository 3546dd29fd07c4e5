"""Unit tests of the Monte Carlo engine (kernelcheck.stats; claims C13, C16, C17, C18).

Each test compares two computations (the engine against a direct NumPy /
SciPy / fraction computation of the same quantity, or the same run on
different executors) or checks a documented contract (argument names in
messages, boundaries of accepted values, no floating-point warnings where the
result is defined as inf or NaN).
"""

from __future__ import annotations

import math
import multiprocessing
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps
from scipy.special import comb, ndtri

from kernelcheck import stats
from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck._src.mc import engine as _stats
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.stats import (
    BERRY_ESSEEN_C,
    Moments,
    berry_esseen_bound,
    central_from_raw_ratios,
    central_moments_of_mean,
    root_seed_sequence,
    run_trials,
    shard_seed,
    trials_needed,
)


def _normal_trials(rng, n):
    """Module-level (picklable) trial function: 3 skewed coordinates."""
    z = rng.standard_normal((n, 3))
    return np.exp(z * np.array([0.1, 0.5, 1.0]))


class _FeatureTrials:
    """Picklable vectorised trials of positive random features."""

    def __init__(self):
        self.sampler = PositiveRandomFeatures.sampler(3, 8)
        self.X = np.full((2, 3), 0.2)

    def __call__(self, rng, n):
        return self.sampler.batch_estimates(rng, n, self.X)


def _trials(rng, n):
    return rng.standard_normal((n, 2))


def _trials_1d(rng, n):
    return rng.exponential(size=n)


def _with_aux(rng, n):
    x = rng.standard_normal(n)
    return x, np.abs(x) + 1.0


# ---------------------------------------------------------------------------
# Moments and their merge
# ---------------------------------------------------------------------------


@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=60), st.data())
def test_merge_equals_moments_of_the_concatenation(values, data):
    """Chan/Pebay merge of any split agrees with the moments of the whole sample."""
    x = np.array(values)
    cut = data.draw(st.integers(1, len(x) - 1))
    merged = Moments.from_samples(x[:cut]).merge(Moments.from_samples(x[cut:]))
    whole = Moments.from_samples(x)
    scale = max(1.0, float(np.max(np.abs(x - x.mean()))))
    n = len(x)
    assert merged.count == whole.count
    assert merged.mean == pytest.approx(whole.mean, abs=1e-12 * scale)
    for k, (a, b) in enumerate(
        [(merged.m2, whole.m2), (merged.m3, whole.m3), (merged.m4, whole.m4)], start=2
    ):
        assert a == pytest.approx(b, abs=1e-9 * n * scale**k)


def test_moments_methods_match_numpy_and_scipy():
    x = np.random.default_rng(0).gamma(2.0, size=(1000, 2))
    m = Moments.from_samples(x)
    assert np.allclose(m.variance(), x.var(axis=0, ddof=1))
    assert np.allclose(m.std_error(), x.std(axis=0, ddof=1) / math.sqrt(1000))
    assert np.allclose(m.skewness(), sps.skew(x, axis=0))
    assert np.allclose(m.kurtosis(), sps.kurtosis(x, axis=0, fisher=False))
    lo, hi = m.confidence_interval(0.05)
    assert np.allclose((hi - lo) / 2, 1.959963984540054 * m.std_error())


def test_constant_trials_have_exact_mean_and_zero_variance():
    m = Moments.from_samples(np.full((5000, 2), 0.1 + 0.2))
    assert np.all(m.mean == 0.1 + 0.2)
    assert np.all(m.m2 == 0.0)


def test_merge_keeps_the_maximum_of_whichever_side_has_one():
    a = Moments.from_samples(np.array([1.0, 2.0]), aux=np.array([5.0, 3.0]))
    b = Moments.from_samples(np.array([4.0, 0.0]), aux=np.array([1.0, 7.0]))
    c = Moments.from_samples(np.array([3.0, 3.0]))
    assert a.maximum == 5.0 and c.maximum is None
    assert a.merge(b).maximum == 7.0 and b.merge(a).maximum == 7.0
    assert a.merge(c).maximum == 5.0 and c.merge(a).maximum == 5.0
    assert c.merge(c).maximum is None


def test_degenerate_moments_are_nan_without_warnings():
    mo = Moments.from_samples(np.full(5, 2.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(mo.skewness()) and np.isnan(mo.kurtosis())


def test_confidence_interval_default_is_95_percent():
    x = np.random.default_rng(0).standard_normal(50)
    mo = Moments.from_samples(x)
    lo, hi = mo.confidence_interval()
    z = 1.959963984540054  # Phi^-1(0.975), the standard 95% normal quantile
    se = x.std(ddof=1) / math.sqrt(50)
    assert np.isclose(hi - lo, 2 * z * se, rtol=1e-12)
    assert np.isclose((lo + hi) / 2, x.mean(), rtol=1e-12)
    lo2, hi2 = mo.confidence_interval(0.01)
    assert np.isclose(hi2 - lo2, 2 * float(ndtri(0.995)) * se)
    with pytest.raises(InvalidArgument, match="^`alpha` must lie strictly between 0 and 1"):
        mo.confidence_interval(1.0)


def test_from_samples_accepts_integer_values_as_float64():
    mo = Moments.from_samples(np.array([1, 2, 3, 4], dtype=np.int32))
    assert mo.mean.dtype == np.float64 and mo.mean == 2.5 and mo.m2 == 5.0


# ---------------------------------------------------------------------------
# Seeds, shards and executors
# ---------------------------------------------------------------------------


def test_shard_seeds_are_spawned_children():
    root = np.random.SeedSequence(42)
    children = np.random.SeedSequence(42).spawn(5)
    for k in range(5):
        a = np.random.default_rng(shard_seed(root, k)).random(4)
        b = np.random.default_rng(children[k]).random(4)
        assert np.array_equal(a, b)


@pytest.mark.parametrize("fn", [_normal_trials, _FeatureTrials()])
def test_identical_results_on_any_executor(fn):
    """One process, 2 threads, 2 processes: the same bytes for the same seed."""
    ref = run_trials(fn, 5000, seed=7, shard_size=512)
    with ThreadPoolExecutor(2) as ex:
        thr = run_trials(fn, 5000, seed=7, shard_size=512, executor=ex)
    # spawned, not forked: other tests of the run import JAX, whose threads a fork can deadlock
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        proc = run_trials(fn, 5000, seed=7, shard_size=512, executor=ex)
    for other in (thr, proc):
        for name in ("mean", "m2", "m3", "m4"):
            assert getattr(other, name).tobytes() == getattr(ref, name).tobytes()
    assert ref.count == 5000


def test_seed_forms():
    a = run_trials(_normal_trials, 100, seed=3)
    b = run_trials(_normal_trials, 100, seed=np.random.SeedSequence(3))
    assert np.array_equal(a.mean, b.mean)
    c = run_trials(_normal_trials, 100, seed=np.random.default_rng(3))
    d = run_trials(_normal_trials, 100, seed=np.random.default_rng(3))
    assert np.array_equal(c.mean, d.mean)
    assert not np.array_equal(a.mean, run_trials(_normal_trials, 100, seed=4).mean)


def test_generator_seed_takes_two_63_bit_words_of_its_stream():
    # documented rule: a Generator gives up 128 bits (two words in [0, 2**63)) as entropy
    words = np.random.default_rng(7).integers(0, 2**63, size=2)
    got = root_seed_sequence(np.random.default_rng(7))
    assert got.entropy == [int(w) for w in words]


@pytest.mark.parametrize(
    "seed, start",
    [
        (
            None,
            "`seed` must be given (an int, a numpy.random.SeedSequence or a Generator); "
            "kernelcheck never draws from unseeded randomness",
        ),
        (
            -1,
            "`seed` must be a non-negative int, a numpy.random.SeedSequence or a "
            "numpy.random.Generator, got int -1",
        ),
    ],
)
def test_seed_messages_are_exact(seed, start):
    with pytest.raises(InvalidArgument) as info:
        root_seed_sequence(seed)
    assert str(info.value) == start


def test_shard_seed_is_the_spawned_child_with_the_same_pool_size():
    root = np.random.SeedSequence(11, pool_size=8)
    children = np.random.SeedSequence(11, pool_size=8).spawn(3)
    for k in range(3):
        got = shard_seed(root, k)
        assert np.array_equal(got.generate_state(4), children[k].generate_state(4))
        assert got.pool_size == 8


@pytest.mark.parametrize("blocks, shards", [(7, 3), (10, 4), (5, 5), (3, 8), (9, 1), (12, 5)])
def test_shard_bounds_partition_the_blocks_in_order(blocks, shards):
    bounds = _stats._shard_bounds(blocks, shards)
    assert len(bounds) == min(blocks, shards)
    assert bounds[0][0] == 0 and bounds[-1][1] == blocks
    sizes = [b - a for a, b in bounds]
    for (_, b), (a2, _) in zip(bounds, bounds[1:]):
        assert b == a2  # contiguous, in block order
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    assert sizes == sorted(sizes, reverse=True)  # the larger runs first
    assert _stats._shard_bounds(blocks, None) == [(k, k + 1) for k in range(blocks)]


class _CountingExecutor(ThreadPoolExecutor):
    def __init__(self):
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return super().submit(*args, **kwargs)


@pytest.mark.parametrize("shards", [None, 1, 2, 3])
def test_executor_runs_equal_in_process_and_group_blocks_into_shards(shards):
    ref = run_trials(_trials, 1000, seed=3, shard_size=100)
    with _CountingExecutor() as ex:
        got = run_trials(_trials, 1000, seed=3, shard_size=100, executor=ex, shards=shards)
    assert ex.submitted == (10 if shards is None else shards)
    for a in ("mean", "m2", "m3", "m4"):
        assert np.array_equal(getattr(ref, a), getattr(got, a))
    assert got.count == 1000


# ---------------------------------------------------------------------------
# run_trials
# ---------------------------------------------------------------------------


def test_engine_mean_is_unbiased_for_a_known_law():
    """Lognormal coordinates: E exp(s Z) = exp(s^2/2); |z| < 4.5 (false alarm ~2e-5)."""
    m = run_trials(_normal_trials, 40000, seed=1)
    truth = np.exp(np.array([0.1, 0.5, 1.0]) ** 2 / 2)
    z = (m.mean - truth) / m.std_error()
    assert np.all(np.abs(z) < 4.5)


def test_progress_bar_off_when_not_a_terminal(capsys):
    run_trials(_normal_trials, 3000, seed=0, shard_size=100)
    assert capsys.readouterr().err == ""


def test_one_dimensional_trials_and_aux_maximum():
    mo = run_trials(_with_aux, 300, seed=5, shard_size=64)
    x = np.concatenate(
        [
            _with_aux(np.random.default_rng(shard_seed(root_seed_sequence(5), k)), c)[0]
            for k, c in enumerate([64, 64, 64, 64, 44])
        ]
    )
    assert mo.mean.shape == () and np.isclose(mo.mean, x.mean(), rtol=1e-13)
    assert np.isclose(mo.maximum, (np.abs(x) + 1.0).max(), rtol=0)
    one = run_trials(_trials_1d, 2, seed=0, shard_size=1)  # smallest accepted sizes
    assert one.count == 2
    # one-dimensional trials give NumPy scalars, the type of NumPy's own reductions
    part = Moments.from_samples(x)
    for got in (part.mean, part.m2, part.m3, part.m4):
        assert type(got) is type(x.mean())


def test_scalar_trial_value_is_refused_with_its_description():
    with pytest.raises(
        InvalidArgument, match=r"with 5 rows \(one per trial\), got array of shape \(\)"
    ):
        run_trials(lambda rng, n: 1.0, 5, seed=0)


@pytest.mark.parametrize(
    "kwargs, start",
    [
        ({"shards": 0}, "`shards` must be >= 1, got 0"),
        ({"shards": 1.5}, "`shards` must be an integer"),
        (
            {"executor": 3},
            "`executor` must be a concurrent.futures.Executor (an object with submit), got int 3",
        ),
        ({"shard_size": 0}, "`shard_size` must be >= 1, got 0"),
    ],
)
def test_run_trials_argument_messages(kwargs, start):
    with pytest.raises(InvalidArgument) as info:
        run_trials(_trials, 10, seed=0, **kwargs)
    assert str(info.value).startswith(start)


class _Bar:
    made: list = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.updates = []
        self.closed = False
        _Bar.made.append(self)

    def update(self, c):
        self.updates.append(c)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("executor", [False, True])
def test_progress_bar_counts_every_trial(monkeypatch, executor):
    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)
    _Bar.made = []
    if executor:
        with ThreadPoolExecutor(2) as ex:
            run_trials(_trials, 250, seed=0, shard_size=100, progress=True, executor=ex)
    else:
        run_trials(_trials, 250, seed=0, shard_size=100, progress=True)
    (bar,) = _Bar.made
    # documented: a tqdm bar on stderr, drawn only for runs longer than a second
    assert bar.kwargs == {
        "total": 250,
        "desc": "trials",
        "unit": "trial",
        "delay": 1.0,
        "file": sys.stderr,
        "leave": False,
    }
    assert bar.updates == [100, 100, 50] and bar.closed


def test_progress_default_follows_whether_stderr_is_a_terminal(monkeypatch):
    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)

    class Tty:
        def isatty(self):
            return True

        def write(self, s):
            return len(s)

        def flush(self):
            pass

    _Bar.made = []
    run_trials(_trials, 10, seed=0, progress=False)
    monkeypatch.setattr(sys, "stderr", Tty())
    run_trials(_trials, 10, seed=0, progress=False)
    assert _Bar.made == []
    run_trials(_trials, 10, seed=0, desc="mine")
    assert len(_Bar.made) == 1 and _Bar.made[0].kwargs["desc"] == "mine"


# ---------------------------------------------------------------------------
# Moment helpers, Berry-Esseen and the number of trials
# ---------------------------------------------------------------------------


def test_central_moments_of_mean_against_the_gamma_law():
    """Mean of m Exp(1) is Gamma(m, 1/m): central moments from scipy (independent)."""
    mu_exp = np.array([1.0, 0.0, 1.0, 2.0, 9.0])  # central moments of Exp(1)
    for m in (1, 3, 8):
        got = central_moments_of_mean(mu_exp, m)
        g = sps.gamma(m, scale=1.0 / m)
        var = g.var()
        assert got[2] == pytest.approx(var)
        assert got[3] == pytest.approx(g.stats(moments="s") * var**1.5)
        assert got[4] == pytest.approx((g.stats(moments="k") + 3) * var**2)


@pytest.mark.parametrize(
    "central, m, expected",
    [
        # N(0, 1): the mean of m copies is N(0, 1/m), fourth moment 3 / m^2; the sum's
        # fourth moment 3 m^2 = 3 * 2^1060 is beyond float64
        ([1.0, 0.0, 1.0, 0.0, 3.0], 2**530, [1.0, 0.0, 2.0**-530, 0.0, 3 * 2.0**-1060]),
        # variance 2^1000 over more copies than float64 can count
        ([1.0, 0.0, 2.0**1000], 2**1100, [1.0, 0.0, 2.0**-100]),
    ],
)
def test_central_moments_of_the_mean_of_very_many_copies(central, m, expected):
    """``E (mean - mu)^k`` for m a power of two is reached by halving mixes only.

    Each mix of two equal means multiplies by powers of 1/2 and adds terms of
    which at most one is non-zero per order here (odd moments vanish), so every
    step is exact in binary and the result equals the formula exactly.
    """
    got = central_moments_of_mean(np.array(central), m)
    assert got.tolist() == expected


def test_the_berry_esseen_bound_at_more_trials_than_float64_counts():
    """``C / sqrt(n)`` at n = 2^1100 is ``C 2^-550``.

    Computed as ``exp(ln(n) / 2)``: the rounding of ``x = ln(n) / 2 = 381.2``
    becomes a relative error of at most ``|x| u`` in the exponential, plus
    one rounding of the exponential and one of the product: ``(|x| + 2) u``.
    """
    got = float(berry_esseen_bound(1.0, 2**1100))
    u = 2.0**-53
    assert got == pytest.approx(BERRY_ESSEEN_C * 2.0**-550, rel=(550 * math.log(2) + 2) * u)


def test_central_from_raw_ratios_lognormal():
    """Z = exp(sG - s^2/2): r_j = exp(j(j-1)s^2/2); scipy's lognorm gives the moments."""
    s = 0.3
    log_r = np.array([j * (j - 1) * s * s / 2 for j in range(5)])
    c = central_from_raw_ratios(log_r)
    ln = sps.lognorm(s, scale=math.exp(-s * s / 2))
    var = ln.var()
    assert c[2] == pytest.approx(var, rel=1e-12)
    assert c[3] == pytest.approx(ln.stats(moments="s") * var**1.5, rel=1e-10)
    assert c[4] == pytest.approx((ln.stats(moments="k") + 3) * var**2, rel=1e-10)


def test_berry_esseen_and_trials_needed_are_inverse():
    r = np.array([1.0, 3.0, 50.0])
    n = trials_needed(r, 0.01)
    for ri, ni in zip(r, n, strict=True):
        assert berry_esseen_bound(ri, int(ni)) <= 0.01
        assert berry_esseen_bound(ri, int(ni) - 1) > 0.01
    assert np.isinf(trials_needed(np.inf, 0.01))


def _central_about_one(values, probs, k):
    """E[(Y - 1)^k] for a discrete Y, exactly in fractions."""
    return float(sum(Fraction(p) * (Fraction(v) - 1) ** k for v, p in zip(values, probs)))


def test_central_from_raw_ratios_is_the_binomial_expansion_even_off_normalisation():
    # Y on {1/2, 2} with probabilities 1/4, 3/4: E[Y] = 13/8 != 1, so log r_1 != 0 and
    # every term of the expansion sum_j C(k,j) (-1)^(k-j) r_j = E[(Y-1)^k] matters
    values, probs = (0.5, 2.0), (0.25, 0.75)
    K = 6
    raw = [sum(p * v**j for v, p in zip(values, probs)) for j in range(K + 1)]
    out = central_from_raw_ratios(np.log(raw))
    assert out[0] == 1.0 and out[1] == 0.0
    for k in range(2, K + 1):
        assert np.isclose(out[k], _central_about_one(values, probs, k), rtol=1e-12)
    assert central_from_raw_ratios(np.zeros(1)).tolist() == [1.0]
    assert central_from_raw_ratios(np.zeros(2)).tolist() == [1.0, 0.0]


def test_central_from_raw_ratios_overflow_is_inf_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = central_from_raw_ratios(np.array([0.0, 0.0, 800.0, 1000.0, 1200.0]))
        mu = np.array([1.0, 0.0, 1.0, 0.0, 3.0, 0.0, 15.0])
        big = central_moments_of_mean(mu * 1e300, 3)
    assert out[2] == np.inf
    assert not np.isfinite(big[4])


def test_central_moments_of_mean_entrywise_over_extra_axes():
    # exponential(1): central moments 1, 0, 1, 2, 9; Gamma(m, 1/m) is the mean of m copies
    mu = np.array([1.0, 0.0, 1.0, 2.0, 9.0])
    stacked = np.stack([mu * s**k for k, s in enumerate([1.0] * 5)])  # same law
    grid = np.broadcast_to(mu[:, None, None], (5, 3, 4)).copy()
    grid[:, 1, 2] = mu * np.array([1.0, 1.0, 4.0, 8.0, 16.0])  # scaled by 2
    for m in (1, 2, 3, 7):
        one = central_moments_of_mean(mu, m)
        # Gamma(shape m, scale 1/m) central moments: 1/m, 2/m^2, 3/m^2 + 6/m^3
        ref = [1.0, 0.0, 1 / m, 2 / m**2, 3 / m**2 + 6 / m**3]
        assert np.allclose(one, ref, rtol=1e-12, atol=0)
        many = central_moments_of_mean(grid, m)
        assert many.shape == (5, 3, 4)
        assert np.allclose(many[:, 0, 0], one, rtol=1e-12, atol=0)
        assert np.allclose(many[:, 1, 2], one * np.array([1, 1, 4, 8, 16]), rtol=1e-12, atol=0)
    del stacked


def test_central_moments_of_mean_uses_exact_binomials():
    # order 8 sums terms with C(8, 4) = 70; exact integers match the fraction reference
    mu = np.array([1.0, 0.0, 1.0, 0.0, 3.0, 0.0, 15.0, 0.0, 105.0])  # N(0, 1)
    got = central_moments_of_mean(mu, 5)
    ref = [1.0, 0.0, 1 / 5, 0.0, 3 / 25, 0.0, 15 / 125, 0.0, 105 / 625]  # N(0, 1/5)
    assert np.allclose(got, ref, rtol=1e-13, atol=1e-15)
    assert comb(8, 4, exact=True) == 70


def test_berry_esseen_and_trials_needed_accept_integers_and_arrays():
    assert berry_esseen_bound(2, 4) == pytest.approx(0.4748)
    assert np.asarray(berry_esseen_bound([1, 2], 100)).dtype == np.float64
    assert trials_needed(np.array([1, 2]), 0.5).tolist() == [1.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(trials_needed(1e200, 1e-3))


@pytest.mark.parametrize(
    "call, start",
    [
        (lambda: central_moments_of_mean(np.ones(3), 0), "`m` must be >= 1, got 0"),
        (lambda: central_moments_of_mean("abc", 2), "`central` must be a real array"),
        (lambda: central_moments_of_mean(np.array([]), 2), "`central` must be a non-empty"),
        (lambda: central_from_raw_ratios(np.array([])), "`log_r` must be a non-empty"),
        (lambda: central_from_raw_ratios(np.float64(0.0)), "`log_r` must be a non-empty"),
        (lambda: central_from_raw_ratios(np.ones(3) + 1j), "`log_r` must be a non-empty real"),
        (lambda: berry_esseen_bound(1.0, 0), "`n` must be >= 1, got 0"),
        (lambda: berry_esseen_bound("a", 10), "`std_ratio` must be a real array"),
        (lambda: trials_needed(1.0, 0.0), "`tolerance` must be > 0, got 0.0"),
        (lambda: trials_needed(1.0, -0.1), "`tolerance` must be > 0"),
        (lambda: shard_seed(3, 1), "`root` must be a numpy.random.SeedSequence"),
        (lambda: shard_seed(np.random.SeedSequence(0), -1), "`k` must be >= 0, got -1"),
        (lambda: Moments.from_samples(np.array([])), "`values` must not be empty"),
        (lambda: Moments.from_samples("abc"), "`values` must be a numeric array"),
        (lambda: Moments.from_samples(np.array([1.0, np.nan])), "`values` must be finite"),
        (
            lambda: Moments.from_samples(np.ones(3), aux=np.ones(2)),
            "`aux` must have the shape (3,)",
        ),
    ],
)
def test_helper_argument_messages(call, start):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert str(info.value).startswith(start)


# ---------------------------------------------------------------------------
# Overflow
# ---------------------------------------------------------------------------


_OVERFLOW = (
    r"^the central moments of {} exceed the float64 range \(the fourth needs "
    r"\|x - mean\|\^4 summed over the trials to stay below 1\.8e308\); scale the "
    r"estimator down, e\.g\. estimate k\(x, y\) / c for a known c$"
)


@pytest.mark.parametrize("scale", [1e80, 1e160, 1e300])
def test_moments_that_overflow_raise_numerical_failure(scale):
    """Deviations ~``scale``: ``sum d^4`` (~N scale^4) leaves the range for scale >= 1e80."""
    x = scale * np.random.default_rng(0).standard_normal((64, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning leaks before the error
        with pytest.raises(NumericalFailure, match=_OVERFLOW.format("`values`")):
            Moments.from_samples(x)


def test_run_trials_with_an_overflowing_estimator_raises():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NumericalFailure, match="float64 range"):
            run_trials(lambda rng, n: 1e200 * rng.standard_normal((n, 3)), 300, seed=0)


def test_merge_that_overflows_raises():
    """Two finite halves whose means differ by 1e160: the merged ``m4`` ~ delta^4 N overflows."""
    a = Moments.from_samples(np.zeros((4, 1)))
    b = Moments.from_samples(np.full((4, 1), 1e160))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NumericalFailure, match=_OVERFLOW.format("the merged trials")):
            a.merge(b)


def test_skewness_and_kurtosis_of_large_but_finite_moments():
    """Deviations ~1e70: ``M2^2`` and ``M2^1.5`` overflow, the ratios must not.

    Compared with the same statistics of the unscaled data (skewness and
    kurtosis are scale invariant).  Error model: each central sum carries up to
    ``N`` roundings per term plus the powers (relative ``gamma_(N+4) <= 4 N u``
    here); skewness combines two sums, a square root and three quotients,
    kurtosis two sums and two quotients, so the relative difference is below
    ``8 * 4 N u`` (both sides computed with the same model).
    """
    x = np.random.default_rng(1).standard_normal(2000) ** 2  # skewed, kurtosis ~ 15
    big = Moments.from_samples(1e70 * x)
    ref = Moments.from_samples(x)
    tol = 4 * len(x) * 2.0**-53 * 8
    assert np.isfinite(big.skewness()) and np.isfinite(big.kurtosis())
    np.testing.assert_allclose(big.skewness(), ref.skewness(), rtol=tol)
    np.testing.assert_allclose(big.kurtosis(), ref.kurtosis(), rtol=tol)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


BAD = [
    (lambda: run_trials(_normal_trials, 1, seed=0), "`trials`"),
    (lambda: run_trials(_normal_trials, 10, seed=None), "`seed`"),
    (lambda: run_trials(_normal_trials, 10, seed=-1), "`seed`"),
    (lambda: run_trials(_normal_trials, 10, seed=0, shard_size=0), "`shard_size`"),
    (lambda: run_trials(_normal_trials, 10, seed=0, executor=object()), "`executor`"),
    (lambda: run_trials("f", 10, seed=0), "`fn`"),
    (lambda: run_trials(lambda rng, n: np.zeros(3), 10, seed=0), "rows"),
    (lambda: root_seed_sequence(1.5), "`seed`"),
]


@pytest.mark.parametrize("call, text", BAD)
def test_bad_input(call, text):
    with pytest.raises(InvalidArgument, match=text):
        call()


def test_from_samples_holds_two_block_sized_buffers():
    """The shortcut of ``Moments.from_samples``: the deviations and their powers live in
    two reused buffers of one block of trials (``tracemalloc``, deterministic), however
    many trials there are, and the moments over several blocks (the last one ragged) are
    still the direct two-pass formulas."""
    import tracemalloc

    x = np.random.default_rng(8).standard_normal((4000, 64)) * 3.0 + 1.0
    block = _stats._BLOCK_ELEMENTS
    assert x.size > 3 * block and x.shape[0] % (block // 64)  # four blocks, the last ragged
    Moments.from_samples(x[:10])  # warm
    tracemalloc.start()
    try:
        mo = Moments.from_samples(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the two block buffers, and NumPy's 64 KiB ufunc buffer and small arrays
    assert peak <= 2 * 8 * block + 128 * 1024, peak / x.nbytes
    d = x - x.mean(axis=0)
    assert np.allclose(mo.mean, x.mean(axis=0), rtol=1e-13, atol=1e-13)
    for got, k in ((mo.m2, 2), (mo.m3, 3), (mo.m4, 4)):
        assert np.allclose(got, (d**k).sum(axis=0), rtol=1e-10, atol=1e-9 * (np.abs(d) ** k).sum(0))


@given(
    st.integers(2, 40),
    st.integers(1, 5),
    st.data(),
    st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_a_non_finite_value_anywhere_reaches_the_checked_mean(n, cols, data, bad):
    """The shortcut of ``Moments.from_samples``: it checks the finiteness of the mean, not
    of every entry, because a NaN or Inf in any trial (the first, which is the shift,
    included) and any column makes that column's mean non-finite; the error then names
    `values` and the entry."""
    x = np.random.default_rng(n).standard_normal((n, cols))
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, cols - 1))
    x[i, j] = bad
    with np.errstate(all="ignore"):
        mean, *_ = _stats._central_sums(x)
    assert not np.isfinite(mean[j])
    where = rf"`values` must be finite.*first at index \({i}, {j}\)"
    with pytest.raises(InvalidArgument, match=where):
        Moments.from_samples(x)


def test_moments_are_float64_whatever_the_samples_dtype():
    """float32 (and integer) trials are read as float64 first: the same moments, bit for bit."""
    x32 = np.random.default_rng(5).normal(size=(101, 3)).astype(np.float32) * 1e3 + 1e4
    a, b = stats.Moments.from_samples(x32), stats.Moments.from_samples(x32.astype(np.float64))
    for attr in ("mean", "m2", "m3", "m4"):
        assert getattr(a, attr).dtype == np.float64
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr
    aux = stats.Moments.from_samples(x32, aux=x32).maximum
    assert aux.dtype == np.float64 and np.array_equal(aux, x32.astype(np.float64).max(axis=0))
