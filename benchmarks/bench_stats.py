"""Benchmarks of the Monte Carlo engine and the random feature maps, each next to its floor.

Groups (``benchmark.group``), each measured in the same run:

* ``mc-engine``: :func:`kernelcheck.stats.run_trials` over positive random
  features (d = 16, m = 64, 16 x 16 pairs, T trials, one shard) against the
  GEMM floor for the same work: the three batched products per trial
  (``X W^T``, ``Y W^T``, ``F_X F_Y^T``) on pre-drawn projections, with no
  random draws, no exp and no moments; and the same with the normal draws
  (``draw+gemm-floor``), which the engine cannot avoid; and the draws,
  the products and the feature maps' exponentials (``draw+gemm+exp``, for
  information: without AVX-512 NumPy's float64 ``exp`` is not vectorised, and
  those exponentials cost as much as the products).
  ``extra_info["trials_per_s"]``.
* ``features-<kind>``: a random feature map on X of shape (4096, 64), m = 256,
  against the bare floor ``exp(X @ W.T)`` (one GEMM and one exp).

Under ``--benchmark-disable`` the inputs are small and each benchmark checks
its result against an independent computation, so the file is a correctness
test.  Reproduce: ``python3 -m pytest benchmarks/bench_stats.py --benchmark-only``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.features.random import (
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
)
from kernelcheck.stats import root_seed_sequence, run_trials, shard_seed

D_ENGINE, M_ENGINE, N_PAIRS = 16, 64, 16


class _Trials:
    def __init__(self, n):
        self.sampler = PositiveRandomFeatures.sampler(D_ENGINE, M_ENGINE)
        rng = np.random.default_rng(0)
        self.X = 0.3 * rng.standard_normal((n, D_ENGINE)) / np.sqrt(D_ENGINE)
        self.Y = 0.3 * rng.standard_normal((n, D_ENGINE)) / np.sqrt(D_ENGINE)

    def __call__(self, rng, n):
        return self.sampler.batch_estimates(rng, n, self.X, self.Y)


@pytest.mark.benchmark
@pytest.mark.parametrize("kind", ["engine", "gemm-floor", "draw+gemm-floor", "draw+gemm+exp"])
def test_mc_engine(benchmark, size_for, kind):
    T = size_for(20000, 200)
    trials = _Trials(N_PAIRS)
    benchmark.group = "mc-engine"
    if kind == "engine":
        result = benchmark(lambda: run_trials(trials, T, seed=1, shard_size=T))
        # one shard: the engine's mean is the mean of the same batch computed directly
        est, _ = trials(np.random.default_rng(shard_seed(root_seed_sequence(1), 0)), T)
        ref = est.mean(axis=0)
        assert result.count == T
        assert np.allclose(result.mean, ref, rtol=1e-12)
    elif kind == "draw+gemm+exp":
        # the floor with the feature maps' exponentials, the work the engine cannot
        # avoid (for information: the floor leaves the exps out)
        hx = 0.5 * (trials.X * trials.X).sum(axis=1)[:, None]
        hy = 0.5 * (trials.Y * trials.Y).sum(axis=1)[:, None]

        def exp_floor(rng):
            WT = np.swapaxes(rng.standard_normal((T, M_ENGINE, D_ENGINE)), 1, 2)
            FX = np.exp(trials.X @ WT - hx)
            FY = np.exp(trials.Y @ WT - hy)
            return (FX @ np.swapaxes(FY, 1, 2)) / M_ENGINE

        rng = np.random.default_rng(0)
        G = benchmark(lambda: exp_floor(rng))
        # independent: the first trial's estimate written out from the same draw
        W0 = np.random.default_rng(3).standard_normal((T, M_ENGINE, D_ENGINE))[0]
        first = exp_floor(np.random.default_rng(3))[0]
        ref = np.exp(trials.X @ W0.T - hx) @ np.exp(trials.Y @ W0.T - hy).T / M_ENGINE
        assert G.shape == (T, N_PAIRS, N_PAIRS)
        # error model (first order in u), the two evaluations' summation orders aside:
        # an exponent x.w - |x|^2/2 is off by at most gamma_{d+1} (|x|.|w| + |x|^2/2),
        # so its exp relatively by that plus u; the m positive products and their sum
        # (and the division by m = 64, exact) add gamma_{m+2}; both sides err so
        u = 2.0**-53

        def gamma(k):
            return k * u / (1 - k * u)

        ax = (np.abs(trials.X) @ np.abs(W0.T) + hx).max()
        ay = (np.abs(trials.Y) @ np.abs(W0.T) + hy).max()
        rel = gamma(D_ENGINE + 1) * (ax + ay) + 2 * u + gamma(M_ENGINE + 2)
        assert (np.abs(first - ref) <= 2 * rel * ref).all()
    else:
        rng = np.random.default_rng(0)
        W = rng.standard_normal((T, M_ENGINE, D_ENGINE))
        WT = np.swapaxes(W, 1, 2)
        draw = kind.startswith("draw")

        def floor():
            WTd = np.swapaxes(rng.standard_normal((T, M_ENGINE, D_ENGINE)), 1, 2) if draw else WT
            FX = trials.X @ WTd
            FY = trials.Y @ WTd
            return FX @ np.swapaxes(FY, 1, 2)

        G = benchmark(floor)
        assert G.shape == (T, N_PAIRS, N_PAIRS)
        if not draw:
            assert np.allclose(G[0], (trials.X @ W[0].T) @ (trials.Y @ W[0].T).T)
    benchmark.extra_info["trials"] = T
    stats = benchmark.stats
    if stats is not None:
        benchmark.extra_info["trials_per_s"] = T / stats.stats.mean


@pytest.mark.benchmark
@pytest.mark.parametrize(
    "cls", [PositiveRandomFeatures, TrigonometricRandomFeatures, OptimalPositiveRandomFeatures]
)
@pytest.mark.parametrize("kind", ["map", "exp-gemm-floor"])
def test_feature_maps(benchmark, size_for, cls, kind):
    n = size_for(4096, 64)
    d, m = 64, 256
    X = np.random.default_rng(1).standard_normal((n, d)) / np.sqrt(d)
    phi = (
        cls(d, m, seed=0) if cls is not OptimalPositiveRandomFeatures else cls(d, m, seed=0, A=0.0)
    )
    W = np.asarray(phi.projection)
    benchmark.group = f"features-{cls.__name__}"
    if kind == "map":
        F = benchmark(phi, X)
        if cls is TrigonometricRandomFeatures:
            P = X @ W.T
            ref = np.exp(0.5 * (X * X).sum(1))[:, None] * np.hstack([np.sin(P), np.cos(P)])
        else:  # A = 0: the FAVOR+ formula, written out
            ref = np.exp(X @ W.T - 0.5 * (X * X).sum(1)[:, None])
        assert np.allclose(F, ref / np.sqrt(m), rtol=1e-12)
    else:
        E = benchmark(lambda: np.exp(X @ W.T))
        assert E.shape == (n, m)


# ----- verify.unbiased at the CLI's defaults ------------------------------------------


@pytest.mark.benchmark(group="verify-unbiased")
@pytest.mark.parametrize("what", ["unbiased", "unbiased with the CLI sweep", "engine floor"])
def test_unbiased(benchmark, size_for, what):
    """``verify.unbiased`` as ``kernelcheck unbiased`` runs it (positive features, d = 4,
    m = 16, the CLI's 4 + 4 default points, 20,000 trials; target under 1 s) without and
    with the CLI's default feature-count sweep, next to the engine alone on the same
    trial function (the floor: the trials' draws, products and moments)."""
    from kernelcheck._src.features.random import ESTIMATORS
    from kernelcheck._src.verify.unbiased.trials import trial_function
    from kernelcheck._src.verify.unbiased.writer import default_points
    from kernelcheck.kernels import Exponential
    from kernelcheck.verify import unbiased

    trials = size_for(20000, 2000)
    sampler = ESTIMATORS["positive"].sampler(4, 16)
    X = default_points(4, 4, seed=0)
    Y = default_points(4, 4, seed=1)
    if what == "engine floor":
        fn = trial_function(sampler, X, Y)
        result = benchmark.pedantic(run_trials, (fn, trials), {"seed": 0}, rounds=5)
        assert result.count == trials
        return
    sweep = (4, 8, 16, 32, 64) if "sweep" in what else None
    kw = {"trials": trials, "seed": 0, "sweep": sweep}
    report = benchmark.pedantic(unbiased, (sampler, Exponential(1.0), X, Y), kw, rounds=5)
    assert report.verdict in ("pass", "inconclusive")
