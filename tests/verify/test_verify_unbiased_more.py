"""More tests of verify.unbiased (claims C13, C17, C18), chosen by mutation testing.

The per-pair numbers of a report are recomputed here from the raw trial
estimates, replayed from the documented seeding (block k of ``shard_size``
trials draws from ``shard_seed(root, k)``), with the formulas stated in the
docstrings of :func:`unbiased` and :class:`PairResult` -- two independent
computations of the same statistics.  Holm's procedure is checked against
its textbook definition (every hypothesis whose p-value is below
alpha / (M - rank) for all smaller ranks).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck._src.verify.unbiased import _holm, default_points
from kernelcheck.kernels import Exponential
from kernelcheck.stats import BERRY_ESSEEN_C, root_seed_sequence, shard_seed
from kernelcheck.verify import unbiased

D, M = 2, 4
X = default_points(2, D, seed=0, max_norm=0.4)
Y = default_points(3, D, seed=1, max_norm=0.4)


def _user_sampler(rng):
    W = rng.standard_normal((M, D))
    return lambda A: np.exp(A @ W.T - 0.5 * (A * A).sum(1)[:, None]) / math.sqrt(M)


def _replay_user(seed, trials, shard_size):
    root = root_seed_sequence(seed)
    est, scale = [], []
    k = 0
    done = 0
    while done < trials:
        c = min(shard_size, trials - done)
        rng = np.random.default_rng(shard_seed(root, k))
        for _ in range(c):
            phi = _user_sampler(rng)
            FX, FY = phi(X), phi(Y)
            est.append(FX @ FY.T)
            scale.append(np.outer(np.linalg.norm(FX, axis=1), np.linalg.norm(FY, axis=1)))
        done += c
        k += 1
    return np.array(est), np.array(scale)


def test_user_sampler_pairs_follow_the_documented_formulas():
    N, size, alpha, power, be_tol = 600, 256, 0.05, 0.8, 0.5
    rep = unbiased(
        _user_sampler,
        Exponential(),
        X,
        Y,
        trials=N,
        seed=4,
        shard_size=size,
        alpha=alpha,
        power=power,
        be_tolerance=be_tol,
    )
    E, S = _replay_user(4, N, size)
    t = Exponential()(X, Y)
    terr = Exponential().error_bound(X, Y)
    P = t.size
    zc = float(ndtri(1 - alpha / (2 * P)))
    zp = float(ndtri(power))
    assert rep.theory == "none" and rep.trials == N and len(rep.pairs) == P
    for p in rep.pairs:
        e = E[:, p.i, p.j]
        k = (p.i, p.j)
        mean, var = e.mean(), e.var(ddof=1)
        m2 = ((e - mean) ** 2).sum()
        m4 = ((e - mean) ** 4).sum()
        se = math.sqrt(var / N)
        tol = 2 * terr[k] + gamma(M + 8) * (1 + gamma(M)) * S[:, p.i, p.j].max()
        assert p.target == t[k]
        assert p.mean == pytest.approx(mean, rel=1e-12)
        assert p.variance == pytest.approx(var, rel=1e-9)
        assert p.std_error == pytest.approx(se, rel=1e-9)
        assert p.rounding_tolerance == pytest.approx(tol, rel=1e-9)
        z = max(abs(mean - t[k]) - tol, 0.0) / se
        assert p.z == pytest.approx(z, rel=1e-8, abs=1e-12)
        assert p.ci_low == pytest.approx(mean - zc * se, rel=1e-9)
        assert p.ci_high == pytest.approx(mean + zc * se, rel=1e-9)
        kurt = N * m4 / m2**2
        be = BERRY_ESSEEN_C * math.sqrt(max(kurt, 1.0)) / math.sqrt(N)
        assert p.berry_esseen == pytest.approx(be, rel=1e-8)
        assert p.trials_needed == math.ceil(
            (BERRY_ESSEEN_C * math.sqrt(max(kurt, 1.0)) / be_tol) ** 2
        )
        assert p.detectable_relative_bias == pytest.approx((zc + zp) * se / abs(t[k]), rel=1e-9)
        assert p.mse == pytest.approx(((e - t[k]) ** 2).mean(), rel=1e-9)
        assert p.mse_halfwidth == pytest.approx(
            zc * math.sqrt(max(m4 / N - (m2 / N) ** 2, 0) / N), rel=1e-8
        )
        assert math.isnan(p.theory_variance) and math.isnan(p.theory_mse)
        assert math.isnan(p.variance_ratio) and math.isnan(p.variance_p)
        assert p.mse_agrees() is None
        assert p.test == "t" and p.verdict == "pass"
        assert p.p_value == pytest.approx(2 * ndtr(-z), rel=1e-8)
    det = max(p.detectable_relative_bias for p in rep.pairs)
    assert rep.detectable_relative_bias == det and rep.trials_for_all == N
    assert rep.counts == {"pass": P, "exact": 0, "fail": 0, "untestable": 0}
    assert rep.passed and rep.verdict == "pass"


def _replay_batch(sampler, seed, trials, shard_size):
    root = root_seed_sequence(seed)
    out, k, done = [], 0, 0
    while done < trials:
        c = min(shard_size, trials - done)
        est, _ = sampler.batch_estimates(np.random.default_rng(shard_seed(root, k)), c, X, Y)
        out.append(est)
        done += c
        k += 1
    return np.concatenate(out)


def test_closed_form_pairs_use_the_theoretical_variance():
    s = PositiveRandomFeatures.sampler(D, M)
    N, size, alpha = 3000, 1000, 0.01
    rep = unbiased(s, Exponential(), X, Y, trials=N, seed=2, shard_size=size, alpha=alpha)
    E = _replay_batch(s, 2, N, size)
    th = s.theory(X, Y, order=8)
    mu, c = th["mean"], th["central"]
    var_th = mu**2 * c[2]
    t = Exponential()(X, Y)
    P = t.size
    zc = float(ndtri(1 - alpha / (2 * P)))
    assert rep.theory == "exact"
    for p in rep.pairs:
        k = (p.i, p.j)
        e = E[:, p.i, p.j]
        assert p.mean == pytest.approx(e.mean(), rel=1e-12)
        se = math.sqrt(var_th[k] / N)
        assert p.theory_variance == pytest.approx(var_th[k], rel=1e-12)
        assert p.std_error == pytest.approx(se, rel=1e-12)
        assert p.variance_ratio == pytest.approx(e.var(ddof=1) / var_th[k], rel=1e-9)
        assert p.theory_mse == pytest.approx(var_th[k] + (mu[k] - t[k]) ** 2, rel=1e-12)
        kurt = c[4][k] / c[2][k] ** 2
        assert p.berry_esseen == pytest.approx(
            BERRY_ESSEEN_C * math.sqrt(max(kurt, 1)) / math.sqrt(N)
        )
        assert p.test in ("z", "chebyshev")
        if p.test == "z":
            assert p.ci_high - p.ci_low == pytest.approx(2 * zc * se, rel=1e-9)
        # variance above theory: one-sided z test with Var((X - mu)^2) from the 4th moment
        vy = mu[k] ** 4 * (c[4][k] - c[2][k] ** 2)
        zv = (e.var(ddof=1) - var_th[k]) / math.sqrt(vy / N)
        if not math.isnan(p.variance_p):
            assert p.variance_p == pytest.approx(ndtr(-zv), rel=1e-6, abs=1e-12)
        assert p.mse_agrees() in (True, False)
    assert "Closed-form variances" in " ".join(rep.notes)


def test_a_biased_user_sampler_fails_with_the_bias_in_its_reason():
    def biased(rng):
        phi = _user_sampler(rng)
        return lambda A: 1.05 * phi(A)

    rep = unbiased(biased, Exponential(), X, Y, trials=4000, seed=0)
    assert rep.verdict == "fail" and not rep.passed
    assert rep.counts["fail"] == len(rep.failures()) >= 1
    f = rep.failures()[0]
    assert f.mean > f.target and "rejected by Holm" in f.reason and "bias" in f.reason
    assert "FAIL" in str(rep) and str(f).startswith(f"pair ({f.i}, {f.j}): FAIL")
    md = rep.to_markdown()
    assert "**Verdict: FAIL**" in md and md.count("\n| ") >= len(rep.pairs) + 1
    table = rep.table()
    assert list(table["verdict"]).count("fail") == rep.counts["fail"]


def test_untestable_pairs_are_reported_with_trials_needed():
    Xb = default_points(2, D, seed=0, max_norm=2.0)
    rep = unbiased(_user_sampler, Exponential(), Xb, trials=300, seed=0, be_tolerance=0.01)
    bad = rep.untestable()
    assert rep.verdict == "inconclusive" and bad
    assert rep.trials_for_all == max(p.trials_needed for p in bad) > 300
    assert all(p.test == "none" and math.isnan(p.p_value) for p in bad)
    assert "untestable" in str(rep) and "every pair testable after about" in rep.to_markdown()


@pytest.mark.parametrize("seed", range(20))
def test_holm_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.05, size=rng.integers(1, 12))
    if seed % 3 == 0:
        p[rng.integers(0, p.size)] = np.nan  # no test
    alpha = 0.02
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite], kind="stable")]
    Mf = finite.size
    expect = np.zeros(p.size, dtype=bool)
    for rank, k in enumerate(order):
        if all(p[order[r]] <= alpha / (Mf - r) for r in range(rank + 1)):
            expect[k] = True
    assert np.array_equal(_holm(p, alpha), expect)
