"""Unit tests of the Monte Carlo engine (kernelcheck.stats)."""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck.errors import InvalidArgument
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


def test_shard_seeds_are_spawned_children():
    root = np.random.SeedSequence(42)
    children = np.random.SeedSequence(42).spawn(5)
    for k in range(5):
        a = np.random.default_rng(shard_seed(root, k)).random(4)
        b = np.random.default_rng(children[k]).random(4)
        assert np.array_equal(a, b)


@pytest.mark.parametrize("fn", [_normal_trials, _FeatureTrials()])
def test_identical_results_on_any_executor(fn):
    """One process, 2 threads, 2 processes: the same bytes for the same seed (issue 9)."""
    ref = run_trials(fn, 5000, seed=7, shard_size=512)
    with ThreadPoolExecutor(2) as ex:
        thr = run_trials(fn, 5000, seed=7, shard_size=512, executor=ex)
    with ProcessPoolExecutor(2) as ex:
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


def test_engine_mean_is_unbiased_for_a_known_law():
    """Lognormal coordinates: E exp(s Z) = exp(s^2/2); |z| < 4.5 (false alarm ~2e-5)."""
    m = run_trials(_normal_trials, 40000, seed=1)
    truth = np.exp(np.array([0.1, 0.5, 1.0]) ** 2 / 2)
    z = (m.mean - truth) / m.std_error()
    assert np.all(np.abs(z) < 4.5)


def test_progress_bar_off_when_not_a_terminal(capsys):
    run_trials(_normal_trials, 3000, seed=0, shard_size=100)
    assert capsys.readouterr().err == ""


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
