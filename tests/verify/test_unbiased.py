"""Unit tests of kernelcheck.verify.unbiased (claims C13, C17, C18).

Statistics: each correct sampler is checked at family-wise false-alarm rate
alpha = 0.01 (Holm over the pairs), so a seeded run of a correct sampler fails
with probability <= 0.01 (the seeds are fixed, so CI is deterministic); the
broken samplers below (each a known way to get a random feature map wrong) have
relative biases of 10% or more on these points, while the reports detect 1% or
less (``detectable_relative_bias``, power 0.8), so each is caught with probability
essentially 1.

The per-pair numbers of a report are also recomputed from the raw trial
estimates, replayed from the documented seeding (block k of ``shard_size``
trials draws from ``shard_seed(root, k)``), with the formulas stated in the
docstrings of :func:`unbiased` and :class:`PairResult` -- two independent
computations of the same statistics.  Holm's procedure is checked against
its textbook definition (every hypothesis whose p-value is below
alpha / (M - rank) for all smaller ranks).
"""

from __future__ import annotations

import json
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.features.random import ESTIMATORS, PositiveRandomFeatures
from kernelcheck._src.verify.random_features.ratio_bias import ratio_bias
from kernelcheck._src.verify.unbiased.api import UnbiasedReport
from kernelcheck._src.verify.unbiased.command import run_unbiased_cli
from kernelcheck._src.verify.unbiased.stats import holm
from kernelcheck._src.verify.unbiased.writer import default_points, write_report
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import Exponential, Gaussian, Linear
from kernelcheck.stats import BERRY_ESSEEN_C, root_seed_sequence, shard_seed
from kernelcheck.testing import assert_unbiased
from kernelcheck.verify import unbiased

D, M = 4, 16
X = default_points(4, D, seed=0, max_norm=0.5)
Y = default_points(4, D, seed=1, max_norm=0.5)
TRIALS = 20000  # run_unbiased_cli's default
#: The broken samplers loop in Python once per trial; CI uses fewer trials.
#: At 5000 trials the detectable relative bias is still below 2%, and each
#: sampler is caught at the default 20000 trials in a few seconds as well
#: (``run_unbiased_cli`` settings; see docs/statistics.md).
TRIALS_BROKEN = 5000


def _positive(W, A):
    return np.exp(A @ W.T - 0.5 * (A * A).sum(1)[:, None]) / np.sqrt(W.shape[0])


# ---- broken samplers: each a known way to get a random feature map wrong ----


def no_norm_term(rng):
    W = rng.standard_normal((M, D))
    return lambda A: np.exp(A @ W.T) / np.sqrt(M)


def uniform_w(rng):
    W = rng.random((M, D))
    return lambda A: _positive(W, A)


def one_over_m(rng):
    W = rng.standard_normal((M, D))
    return lambda A: _positive(W, A) / np.sqrt(M)


def unit_norm_orthogonal_rows(rng):
    blocks = [np.linalg.qr(rng.standard_normal((D, D)))[0].T for _ in range(M // D)]
    W = np.vstack(blocks)  # orthogonal blocks, rows of norm 1: chi norms forgotten
    return lambda A: _positive(W, A)


def trig_without_factor(rng):
    W = rng.standard_normal((M, D))
    return lambda A: np.hstack([np.sin(A @ W.T), np.cos(A @ W.T)]) / np.sqrt(M)


def correct_user_sampler(rng):
    W = rng.standard_normal((M, D))
    return lambda A: _positive(W, A)


@pytest.mark.parametrize(
    "broken", [no_norm_term, uniform_w, one_over_m, unit_norm_orthogonal_rows, trig_without_factor]
)
def test_broken_samplers_are_caught(broken):
    rep = unbiased(broken, Exponential(), X, Y, trials=TRIALS_BROKEN, seed=0)
    assert rep.verdict == "fail"
    assert not rep.passed
    assert rep.failures()


def test_assert_unbiased_raises_with_the_failing_pairs():
    with pytest.raises(AssertionError, match="^refuted: the estimate is biased at pair") as info:
        assert_unbiased(one_over_m, Exponential(), X, Y, trials=TRIALS_BROKEN, seed=0)
    assert "pair (0, 0)" in str(info.value)


@pytest.mark.parametrize("orthogonal", [False, True])
def test_correct_samplers_pass(random_feature_map, orthogonal):
    sampler = random_feature_map.sampler(D, M, orthogonal=orthogonal, scale=0.9)
    rep = unbiased(sampler, Exponential(0.9), X, Y, trials=TRIALS, seed=1)
    assert rep.passed, rep.to_markdown()
    assert rep.theory == ("bound" if orthogonal else "exact")
    assert rep.detectable_relative_bias < 0.02


def test_user_sampler_without_theory_passes_with_sample_variance():
    rep = assert_unbiased(correct_user_sampler, Exponential(), X, Y, trials=TRIALS, seed=2)
    assert rep.theory == "none"
    assert {p.test for p in rep.pairs} == {"t"}


def test_random_fourier_features_of_a_gaussian_kernel():
    """Any kernel of the algebra as target: RFF (Rahimi & Recht 2007) for Gaussian(l)."""
    ell = 0.8

    def rff(rng):
        W = rng.standard_normal((32, D)) / ell
        b = rng.uniform(0, 2 * np.pi, 32)
        return lambda A: np.sqrt(2.0 / 32) * np.cos(A @ W.T + b)

    rep = unbiased(rff, Gaussian(ell), X, Y, trials=TRIALS, seed=3)
    assert rep.passed, str(rep)


def test_zero_variance_pairs_are_judged_by_rounding():
    """A deterministic exact map: every pair is 'exact', none divides by zero."""
    rep = unbiased(lambda rng: lambda A: A, Linear(), X, Y, trials=50, seed=0)
    assert rep.passed
    assert rep.counts["exact"] == 16
    assert all(p.test == "rounding" for p in rep.pairs)
    # a deterministic map off by far more than rounding fails
    bad = unbiased(lambda rng: lambda A: 1.001 * A, Linear(), X, Y, trials=50, seed=0)
    assert bad.verdict == "fail"


def test_trig_diagonal_is_exact():
    rep = unbiased(ESTIMATORS["trigonometric"].sampler(D, M), Exponential(), X, trials=5000, seed=0)
    assert rep.passed
    assert [p.verdict for p in rep.pairs if p.i == p.j] == ["exact"] * 4


def test_large_norms_are_untestable_not_passed():
    """|x + y|^2 up to 9: lognormal-type skewness; the verdict says how many trials."""
    Xb = default_points(4, D, seed=0, max_norm=1.5)
    rep = unbiased(PositiveRandomFeatures.sampler(D, M), Exponential(), Xb, trials=5000, seed=0)
    assert rep.verdict == "inconclusive"
    assert not rep.passed
    worst = max(rep.untestable(), key=lambda p: p.trials_needed)
    assert worst.trials_needed > 1e6 and rep.trials_for_all == worst.trials_needed
    assert "needs about" in worst.reason and "closed-form kurtosis" in worst.reason
    assert "untestable" in str(rep) and "testable after about" in str(rep)


def test_same_report_on_any_executor():
    s = PositiveRandomFeatures.sampler(D, 8)
    a = unbiased(s, Exponential(), X, Y, trials=3000, seed=5, shard_size=500)
    with ThreadPoolExecutor(2) as ex:
        b = unbiased(s, Exponential(), X, Y, trials=3000, seed=5, shard_size=500, executor=ex)
    assert a.to_json() == b.to_json()


def test_report_contents_and_files(tmp_path):
    rep = run_unbiased_cli(trials=4000, seed=0, sweep=(4, 16), out=tmp_path)
    assert isinstance(rep, UnbiasedReport)
    names = sorted(os.listdir(tmp_path))
    assert names == ["bias.png", "error_vs_m.png", "mse.png", "report.json", "report.md"]
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["verdict"] == rep.verdict
    assert len(data["pairs"]) == 16
    md = (tmp_path / "report.md").read_text()
    assert "| i | j |" in md and "Relative RMSE" in md
    # the sweep's RMSE follows theory within its interval, here at small norms
    for s in rep.sweep:
        assert (
            s.rmse_low <= s.theory_relative_rmse * 1.01
            and s.theory_relative_rmse <= s.rmse_high * 1.01
        )
    assert (tmp_path / "bias.png").read_bytes()[:4] == b"\x89PNG"


def test_write_report_never_leaves_half_files(tmp_path, monkeypatch):
    rep = run_unbiased_cli(trials=500, seed=0, sweep=None, points=2)
    import kernelcheck._src.verify.unbiased.writer as vu

    def boom(report):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(vu, "render_plots", boom)
    with pytest.raises(RuntimeError):
        write_report(rep, tmp_path / "out")
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []
    write_report(rep, tmp_path / "out2", plots=False)
    assert sorted(os.listdir(tmp_path / "out2")) == ["report.json", "report.md"]


def test_ratio_bias_small_example():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(3, 2)) * 0.5, rng.normal(size=(4, 2)) * 0.5, rng.normal(size=(4, 2))
    r = ratio_bias(
        PositiveRandomFeatures.sampler(2, 4), Q, K, V, num_features=(4, 8, 16), trials=10000, seed=0
    )
    assert r.beta / r.beta_se > 3
    assert "C16" in str(r)
    assert r.to_dict()["num_features"] == [4, 8, 16]


# ---- report numbers against a replay of the seeded trials (the documented formulas) ----

# The replayed runs' points: 2 x 2 and 3 x 2, with 4 features.
D_REPLAY, M_REPLAY = 2, 4


X_REPLAY = default_points(2, D_REPLAY, seed=0, max_norm=0.4)


Y_REPLAY = default_points(3, D_REPLAY, seed=1, max_norm=0.4)


def _user_sampler(rng):
    W = rng.standard_normal((M_REPLAY, D_REPLAY))
    return lambda A: np.exp(A @ W.T - 0.5 * (A * A).sum(1)[:, None]) / math.sqrt(M_REPLAY)


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
            FX, FY = phi(X_REPLAY), phi(Y_REPLAY)
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
        X_REPLAY,
        Y_REPLAY,
        trials=N,
        seed=4,
        shard_size=size,
        alpha=alpha,
        power=power,
        be_tolerance=be_tol,
    )
    E, S = _replay_user(4, N, size)
    t = Exponential()(X_REPLAY, Y_REPLAY)
    terr = Exponential().error_bound(X_REPLAY, Y_REPLAY)
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
        tol = 2 * terr[k] + gamma(M_REPLAY + 8) * (1 + gamma(M_REPLAY)) * S[:, p.i, p.j].max()
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
        # no closed form: the gate's number of trials is unknown, never the sample
        # kurtosis extrapolated
        assert math.isnan(p.trials_needed)
        assert p.detectable_bias == pytest.approx((zc + zp) * se, rel=1e-9)
        assert p.detectable_relative_bias == pytest.approx((zc + zp) * se / abs(t[k]), rel=1e-9)
        assert math.isnan(p.trials_to_confirm)
        assert p.mse == pytest.approx(((e - t[k]) ** 2).mean(), rel=1e-9)
        assert p.mse_halfwidth == pytest.approx(
            zc * math.sqrt(max(m4 / N - (m2 / N) ** 2, 0) / N), rel=1e-8
        )
        assert math.isnan(p.theory_variance) and math.isnan(p.theory_mse)
        assert math.isnan(p.variance_ratio) and math.isnan(p.variance_p)
        assert p.mse_agrees() is None
        assert p.test == "t" and p.verdict == "pass"
        assert p.p_value == pytest.approx(2 * ndtr(-z), rel=1e-8)
    dets = [p.detectable_relative_bias for p in rep.pairs]
    assert rep.detectable_relative_bias == pytest.approx(float(np.median(dets)), rel=1e-12)
    assert rep.detectable_relative_bias_max == max(dets) and rep.trials_for_all == N
    assert rep.detectable_bias == pytest.approx(
        float(np.median([p.detectable_bias for p in rep.pairs])), rel=1e-12
    )
    assert math.isnan(rep.trials_to_confirm) and rep.advice() == ""
    assert rep.counts == {"pass": P, "exact": 0, "fail": 0, "untestable": 0}
    assert rep.passed and rep.verdict == "pass"


def _replay_batch(sampler, seed, trials, shard_size):
    root = root_seed_sequence(seed)
    out, k, done = [], 0, 0
    while done < trials:
        c = min(shard_size, trials - done)
        est, _ = sampler.batch_estimates(
            np.random.default_rng(shard_seed(root, k)), c, X_REPLAY, Y_REPLAY
        )
        out.append(est)
        done += c
        k += 1
    return np.concatenate(out)


def test_closed_form_pairs_use_the_theoretical_variance():
    s = PositiveRandomFeatures.sampler(D_REPLAY, M_REPLAY)
    N, size, alpha = 3000, 1000, 0.01
    rep = unbiased(
        s, Exponential(), X_REPLAY, Y_REPLAY, trials=N, seed=2, shard_size=size, alpha=alpha
    )
    E = _replay_batch(s, 2, N, size)
    th = s.theory(X_REPLAY, Y_REPLAY, order=8)
    mu, c = th["mean"], th["central"]
    var_th = mu**2 * c[2]
    t = Exponential()(X_REPLAY, Y_REPLAY)
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

    rep = unbiased(biased, Exponential(), X_REPLAY, Y_REPLAY, trials=4000, seed=0)
    assert rep.verdict == "fail" and not rep.passed
    assert rep.counts["fail"] == len(rep.failures()) >= 1
    f = rep.failures()[0]
    assert f.mean > f.target and "rejected by Holm" in f.reason and "bias" in f.reason
    assert str(rep).startswith("refuted: ") and str(f).startswith(f"refuted: pair ({f.i}, {f.j})")
    md = rep.to_markdown()
    assert "**Outcome: refuted**" in md and md.count("\n| ") >= len(rep.pairs) + 1
    table = rep.table()
    assert list(table["verdict"]).count("fail") == rep.counts["fail"]


def test_untestable_pairs_are_reported_with_trials_needed():
    Xb = default_points(2, D_REPLAY, seed=0, max_norm=2.0)
    rep = unbiased(_user_sampler, Exponential(), Xb, trials=300, seed=0, be_tolerance=0.01)
    bad = rep.untestable()
    assert rep.verdict == "inconclusive" and bad
    # a user sampler has no closed-form kurtosis: how many trials would decide is unknown
    assert math.isnan(rep.trials_for_all) and all(math.isnan(p.trials_needed) for p in bad)
    assert all(p.test == "none" and math.isnan(p.p_value) for p in bad)
    assert all("unknown without closed-form moments" in p.reason for p in bad)
    text = str(rep)
    assert "untestable" in text and "confirm with more trials" in text and "another seed" in text
    assert "what to do" in rep.to_markdown()


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
    assert np.array_equal(holm(p, alpha), expect)


# ---- bad input -------------------------------------------------------------

GOOD = PositiveRandomFeatures.sampler(D, 4)


def wrong_rows(rng):
    return lambda A: np.ones((A.shape[0] + 1, 3))


def wrong_dims(rng):
    state = {"calls": 0}

    def phi(A):
        state["calls"] += 1
        return np.ones((A.shape[0], 3 + state["calls"] % 2))

    return phi


def nan_map(rng):
    return lambda A: np.full((A.shape[0], 3), np.nan)


def inf_map(rng):
    return lambda A: np.full((A.shape[0], 3), np.inf)


BAD = [
    (dict(trials=1), "`trials`"),
    (dict(alpha=0.0), "`alpha`"),
    (dict(alpha=1.0), "`alpha`"),
    (dict(alpha=1.5), "`alpha`"),
    (dict(seed=None), "`seed`"),
    (dict(sample="no"), "`sample`"),
    (dict(sample=lambda rng: 3), "feature map"),
    (dict(sample=wrong_rows), "must have shape"),
    (dict(sample=wrong_dims), "must have shape"),
    (dict(sample=nan_map), "NaN or Inf"),
    (dict(sample=inf_map), "NaN or Inf"),
    (dict(target=np.exp), "`target`"),
    (dict(X=np.ones((2, 3))), "`X`|d"),
    (dict(Y=np.ones((2, 3))), "`Y`"),
    (dict(X=[[np.nan] * D]), "`X`"),
    (dict(power=1.0), "`power`"),
    (dict(sweep=(4,), sample=correct_user_sampler), "`sweep`"),
]


@pytest.mark.parametrize("change, text", BAD)
def test_bad_input(change, text):
    args = dict(sample=GOOD, target=Exponential(), X=X, Y=Y, trials=100, seed=0, alpha=0.01)
    args.update(change)
    sample, target, Xa, Ya = args.pop("sample"), args.pop("target"), args.pop("X"), args.pop("Y")
    with pytest.raises(InvalidArgument, match=text):
        unbiased(sample, target, Xa, Ya, **args)


def test_ratio_bias_bad_input():
    Q = np.ones((2, D))
    with pytest.raises(InvalidArgument, match="`sampler`"):
        ratio_bias(correct_user_sampler, Q, Q, Q, seed=0)
    with pytest.raises(InvalidArgument, match="`V`"):
        ratio_bias(GOOD, Q, Q, np.ones((3, 2)), seed=0)
    with pytest.raises(InvalidArgument, match="`num_features`"):
        ratio_bias(GOOD, Q, Q, Q, num_features=(4, 8), seed=0)
    with pytest.raises(InvalidArgument, match="`report`"):
        write_report({}, "x")
