"""``verify.attention(error_model="probabilistic")`` on data that is not a random draw.

A correct float32 cumulative-sum layer (linear attention, C14) on a constant sequence
of n = 4096 tokens errs by 0.50 n u: coherent rounding errors that the probabilistic
model, built for independent ones, does not cover.  The caller's own inputs and the
"repeated tokens" case are judged with the worst case (their note says why); the
random cases keep the probabilistic model and its power.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.core.rounding import STRUCTURED_DATA

N = 4096
#: A key feature and a value whose float32 running sums err in opposite directions by
#: about n u / 4 each (found by a search over float32 numbers in [1, 2)).
KEY, VALUE_TIMES_KEY = np.float32(1.0147700309753418), np.float32(1.9191899299621582)


def identity(X):
    return np.asarray(X)


def cumsum_layer(scale=1.0, phi=identity):
    """Causal linear attention with the feature map ``phi``, by float32 prefix sums."""

    def layer(Q, K, V):
        Q, K = (phi(np.asarray(X, np.float32)) for X in (Q, K))
        V = np.asarray(V, np.float32)
        S = np.cumsum(K[..., :, :, None] * V[..., :, None, :], axis=-3, dtype=np.float32)
        z = np.cumsum(K, axis=-2, dtype=np.float32)
        num = np.einsum("...nd,...nde->...ne", Q, S)
        den = np.einsum("...nd,...nd->...n", Q, z)
        return (num / den[..., None] * np.float32(scale)).astype(np.float32)

    return layer


def constant_sequence():
    v = np.float32(VALUE_TIMES_KEY / KEY)
    assert KEY * v == VALUE_TIMES_KEY  # the products the layer sums are the searched ones
    return np.ones((N, 1)), np.full((N, 1), float(KEY)), np.full((N, 1), float(v))


OPTIONS = dict(feature_map=identity, causal=True, dtype="float32", error_model="probabilistic")


def test_a_correct_prefix_sum_layer_passes_on_a_constant_sequence():
    Q, K, V = constant_sequence()
    out = cumsum_layer()(Q, K, V).astype(np.float64)
    rel = np.abs(out - V) / V
    assert rel.max() > 0.45 * N * 2.0**-24  # the coherent error the model must allow
    report = verify.attention(cumsum_layer(), inputs=(Q, K, V), **OPTIONS)
    assert report.passed, str(report)
    (case,) = report.cases
    assert STRUCTURED_DATA in case.note


def test_a_scale_error_just_beyond_the_worst_case_tolerance_is_caught_there():
    Q, K, V = constant_sequence()
    (case,) = verify.attention(cumsum_layer(), inputs=(Q, K, V), **OPTIONS).cases
    # the correct layer's error is under a fifth of the tolerance everywhere, so a scale
    # error of 1.5 times the smallest relative tolerance is beyond it at that entry
    assert case.ratio < 0.2
    bad = verify.attention(cumsum_layer(1.0 + 1.5 * case.detectable), inputs=(Q, K, V), **OPTIONS)
    assert not bad.passed


@pytest.mark.parametrize("seed", range(3))
def test_random_cases_keep_the_probabilistic_model_and_repeated_tokens_do_not(seed):
    kw = dict(OPTIONS, feature_map=np.exp, n=1024, d=4, d_v=4, seed=seed, check_causality=False)
    cases = ("random", "repeated tokens", "positive values")
    layer = cumsum_layer(phi=np.exp)
    prob = verify.attention(layer, cases=cases, **kw)
    worst = verify.attention(layer, cases=cases, **dict(kw, error_model="worst-case"))
    assert prob.passed and worst.passed
    by_name = {c.name: c for c in prob.cases}
    worst_by_name = {c.name: c for c in worst.cases}
    assert by_name["repeated tokens"].detectable == worst_by_name["repeated tokens"].detectable
    assert STRUCTURED_DATA in by_name["repeated tokens"].note
    for name in ("random", "positive values"):
        assert by_name[name].detectable < worst_by_name[name].detectable / 3
        assert STRUCTURED_DATA not in by_name[name].note
