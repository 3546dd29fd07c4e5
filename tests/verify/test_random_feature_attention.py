"""verify.random_feature_attention: statistics measured by simulation, verdicts on real layers.

The false-alarm rate, the power statement and "a bias r times smaller needs
r^2 times the redraws" are measured on synthetic runs drawn from the model the
test assumes (normal means, bias ``beta/m + gamma/m^2`` plus a constant), so
thousands of runs are cheap; the verdicts on layers (a correct one, one with
the features of another kernel, a causal one) run the whole verifier.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtri

from kernelcheck import testing as T
from kernelcheck import verify
from kernelcheck._src.verify.random_features.attention_stats import (
    asymptotic_bias,
    intercept_weights,
)
from kernelcheck.errors import Inconclusive, NumericalFailure
from kernelcheck.kernels import Exponential

#: Queries, keys and values of a few tokens (their ratio is not exact)
_RB = np.random.default_rng(16)
RB_Q, RB_K, RB_V = _RB.normal(size=(3, 2)), _RB.normal(size=(5, 2)), _RB.normal(size=(5, 2))

MS = (16, 32, 64, 128)
P = 6


def _synthetic(rng, N, c=None, ms=MS):
    """Per m the mean, sample variance and projection of N normal redraws of a C16-law bias."""
    A = np.linspace(-0.5, 0.5, P)
    beta, gamma = np.linspace(0.5, 1.5, P), np.linspace(-2.0, 2.0, P)
    sd = np.linspace(0.5, 1.0, P)
    u = np.ones(P) / np.sqrt(P)
    c = np.zeros(P) if c is None else c
    means, variances, proj, proj_se = [], [], [], []
    for m in ms:
        s = sd / np.sqrt(m)
        mean = A + c + beta / m + gamma / m**2 + rng.standard_normal(P) * s / np.sqrt(N)
        var = s**2 * rng.chisquare(N - 1, P) / (N - 1)
        means.append(mean)
        variances.append(var)
        proj.append(float((mean - A) @ u))
        proj_se.append(float(np.sqrt((u**2 * var).sum() / N)))
    return np.array(means), np.array(variances), A, proj, proj_se


def _judge(rng, N, alpha, c=None, ms=MS):
    means, variances, A, proj, proj_se = _synthetic(rng, N, c, ms)
    tol = np.zeros_like(means)
    return asymptotic_bias(ms, means, variances, N, A, tol, proj, proj_se, alpha, 0.8)


def _true_se(N, ms=MS):
    L = intercept_weights(ms)
    sd = np.linspace(0.5, 1.0, P)
    return np.sqrt((L[:, None] ** 2 * (sd[None, :] ** 2 / np.array(ms)[:, None])).sum(0) / N)


@pytest.mark.parametrize("ms", [MS, (8, 16, 32, 64, 128)])
def test_false_alarm_rate_is_alpha(ms):
    """A C16-law bias (no constant) is rejected at rate about alpha (Holm over P + 1 tests)."""
    rng = np.random.default_rng(20)
    alpha, runs = 0.05, 2000
    rate = np.mean([not _judge(rng, 500, alpha, ms=ms).passed for _ in range(runs)])
    slack = 3 * np.sqrt(alpha * (1 - alpha) / runs)
    # Holm over P + 1 nearly independent tests is close to alpha, never far above it
    assert alpha - 0.02 - slack <= rate <= alpha + slack, rate


def test_stated_power_is_measured():
    """An entry whose constant bias is the stated detectable one is found with probability 0.8."""
    rng = np.random.default_rng(21)
    alpha, N, runs = 0.01, 500, 2000
    stated = _judge(rng, N, alpha)
    c = np.zeros(P)
    # the stated figure from the sample variances of one run, and from the true ones
    c[2] = stated.detectable[2]
    assert c[2] == pytest.approx((stated.critical + ndtri(0.8)) * _true_se(N)[2], rel=0.15)
    found = np.mean([_judge(rng, N, alpha, c).rejected[2] for _ in range(runs)])
    assert 0.8 - 0.05 <= found <= 0.8 + 0.05, found


def test_a_bias_r_times_smaller_needs_r_squared_the_redraws():
    """At the redraws trials_to_detect states for a quarter of the bias, the power is again 0.8."""
    rng = np.random.default_rng(22)
    alpha, N = 0.01, 400
    det = float((_judge(rng, N, alpha).critical + ndtri(0.8)) * _true_se(N)[1])
    N4 = 16 * N  # (4)^2: the closed form of trials_to_detect, checked by simulation here
    c = np.zeros(P)
    c[1] = det / 4
    found = np.mean([_judge(rng, N4, alpha, c).rejected[1] for _ in range(1500)])
    assert 0.8 - 0.06 <= found <= 0.8 + 0.06, found


def test_a_rounding_tolerance_keeps_a_rounding_sized_constant_from_failing():
    rng = np.random.default_rng(23)
    means, variances, A, proj, proj_se = _synthetic(rng, 400, c=np.full(P, 1e-3))
    tol = np.full_like(means, 1e-3)  # |L| . tol >= 1e-3 since sum L = 1
    j = asymptotic_bias(MS, means, variances, 400, A, tol, proj, proj_se, 0.01, 0.8)
    assert not j.rejected.any()
    j0 = asymptotic_bias(MS, means, variances, 400, A, 0 * tol, proj, proj_se, 0.01, 0.8)
    assert j0.intercept == pytest.approx(j.intercept)


# -- layers -----------------------------------------------------------------------------


def positive_layer(scale=1.0, causal=False):
    """Positive random features of exp(scale q . k), vectorised over the draw."""

    def layer(Q, K, V, m, rng):
        W = rng.standard_normal((m, Q.shape[1])) * np.sqrt(scale)
        fq = np.exp(Q @ W.T - scale * (Q * Q).sum(1, keepdims=True) / 2)
        fk = np.exp(K @ W.T - scale * (K * K).sum(1, keepdims=True) / 2)
        if not causal:
            return (fq @ (fk.T @ V)) / (fq @ fk.sum(0))[:, None]
        w = np.tril(fq @ fk.T)
        return (w @ V) / w.sum(1, keepdims=True)

    return layer


def _inputs(seed=0, scale=0.4, n=(3, 5)):
    rng = np.random.default_rng(seed)
    Q, K = scale * rng.normal(size=(n[0], 2)), scale * rng.normal(size=(n[1], 2))
    return Q, K, rng.normal(size=(n[1], 2))


def test_end_to_end_false_alarm_rate_of_a_correct_layer():
    """20 seeds at alpha = 0.2: a correct layer fails about 4 times (P(X >= 10) < 0.003)."""
    Q, K, V = _inputs()
    fails = [
        not verify.random_feature_attention(
            positive_layer(), Q, K, V, num_features=(8, 16, 32), trials=150, seed=s, alpha=0.2
        ).passed
        for s in range(20)
    ]
    assert sum(fails) <= 9, sum(fails)


def test_the_features_of_another_kernel_are_refuted_and_the_report_says_what_to_do():
    Q, K, V = _inputs()
    r = verify.random_feature_attention(positive_layer(0.5), Q, K, V, trials=400, seed=1)
    assert r.verdict == "fail" and r.outcome.value == "refuted"
    assert r.rejected.any()
    assert "confirm with more trials or another seed" in str(r)
    assert r.trials_to_confirm >= 400
    with pytest.raises(AssertionError, match=r"(?s)^refuted: output \(\d, \d\) is biased.*exact"):
        T.assert_random_feature_attention(positive_layer(0.5), Q, K, V, trials=400, seed=1)


def test_a_correct_layer_passes_with_the_c16_bias_and_a_stated_power():
    Q, K, V = _inputs()
    r = T.assert_random_feature_attention(positive_layer(), Q, K, V, trials=400, seed=2)
    assert r.passed and r.outcome.value == "verified"
    assert r.gof_p > 0.01  # the bias along the pilot's direction fits beta/m + gamma/m^2
    assert r.detectable_bias > 0 and 0 < r.detectable_relative < 1
    assert r.trials_to_detect(r.detectable_bias / 2) == pytest.approx(4 * 400, rel=0.01)
    again = verify.random_feature_attention(positive_layer(), Q, K, V, trials=400, seed=2)
    assert np.array_equal(again.asymptotic_bias, r.asymptotic_bias)


def test_causal_layers_are_judged_against_causal_attention():
    Q, K, V = _inputs(n=(4, 4))
    r = verify.random_feature_attention(
        positive_layer(causal=True), Q, K, V, causal=True, trials=300, seed=3
    )
    assert r.passed, r
    wrong = verify.random_feature_attention(
        positive_layer(causal=False), Q, K, V, causal=True, trials=300, seed=3
    )
    assert not wrong.passed


def test_before_the_one_over_m_regime_a_rejection_is_inconclusive():
    """Large inputs: relative variance above the smallest m, the rejection is not a verdict."""
    Q, K, V = _inputs(scale=1.5)
    r = T.assert_random_feature_attention(
        positive_layer(0.5),
        Q,
        K,
        V,
        kernel=Exponential(),
        trials=200,
        seed=4,
        allow_inconclusive=True,
    )
    assert r.relative_variance > min(r.num_features)
    assert r.verdict == "inconclusive" and r.outcome.value == "inconclusive"
    assert "use m well above it" in str(r)
    with pytest.raises(Inconclusive, match="^inconclusive: .*use m well above it"):
        T.assert_random_feature_attention(positive_layer(0.5), Q, K, V, trials=200, seed=4)


def test_a_deterministic_wrong_layer_is_refuted_even_before_the_one_over_m_regime():
    """A layer that ignores its random draws and returns 1.01 x softmax has no spread to
    blame on the 1/m expansion: the miss is exact, so the verdict is refuted (not
    inconclusive), and the headline names an entry of infinite z."""
    from kernelcheck.attention import softmax

    Q, K, V = _inputs(scale=1.5)

    def deterministic(Q, K, V, m, rng):
        return 1.01 * softmax(Q, K, V, scale=1.0)

    r = verify.random_feature_attention(
        deterministic, Q, K, V, kernel=Exponential(), trials=20, seed=4
    )
    assert r.relative_variance > min(r.num_features)  # the regime that alone was inconclusive
    assert not r.passed and r.verdict == "fail" and r.outcome.value == "refuted"
    assert np.isinf(r.z).any()
    assert "z = inf" in str(r) and "an exact difference" in str(r)


def test_the_example_of_docs_statistics_runs_and_passes():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "statistics.md").read_text("utf-8")
    section = text.split("## A random-feature attention layer over redraws")[1].split("\n## ")[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict = {}
    exec(compile(block, "docs/statistics.md", "exec"), namespace)
    assert namespace["report"].passed


def test_outputs_that_do_not_vary_are_judged_by_rounding():
    """One key: every redraw returns V's row up to rounding; a row shifted by 1e-9 is refuted."""
    Q, K, V = _inputs(n=(3, 1))
    r = verify.random_feature_attention(positive_layer(), Q, K, V, trials=20, seed=0)
    assert r.passed and np.isnan(r.gof_p), r  # rounding noise has no 1/m law to fit
    assert np.all(r.asymptotic_bias_se < 1e-15)
    assert r.detectable_bias < 1e-12

    def shifted(Q, K, V, m, rng):
        return positive_layer()(Q, K, V, m, rng) + 1e-9

    bad = verify.random_feature_attention(shifted, Q, K, V, trials=20, seed=0)
    assert bad.verdict == "fail" and (bad.z > 1e3).all()


#: random-feature attention whose outputs reach the top of the float range: a
#: NumericalFailure saying so, no RuntimeWarning, no report holding inf or NaN
BIG_LAYERS = {
    "constant-1e308": lambda q, k, v, m, rng: np.full((q.shape[0], v.shape[1]), 1e308),
    "noisy-1e307": lambda q, k, v, m, rng: 1e307 * (1 + 0.1 * rng.standard_normal((3, 2))),
}


@pytest.mark.parametrize("name", sorted(BIG_LAYERS))
def test_random_feature_attention_near_the_float_maximum_is_a_numerical_failure(name):
    with pytest.raises(NumericalFailure, match="float64 range"):
        verify.random_feature_attention(
            BIG_LAYERS[name], RB_Q, RB_K, RB_V, trials=20, seed=0, num_features=(2, 4, 8)
        )
