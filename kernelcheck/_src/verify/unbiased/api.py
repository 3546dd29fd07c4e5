"""Is a random-feature estimator unbiased, and how noisy is it (claims C13, C17, C18)?

:func:`unbiased` draws ``trials`` feature maps from the user's sampler, and for
every pair (x, y) of ``X`` x ``Y`` estimates ``E[phi(x) . phi(y)]`` with a
confidence interval, tests ``bias = 0`` with a family-wise false-alarm rate
``alpha`` over all pairs (Holm), says which bias it could have detected, and
compares the variance with closed-form theory when the sampler provides it.
The statistics are described in ``docs/statistics.md``.

Beside this module: the results (:mod:`~kernelcheck._src.verify.unbiased.results`),
the statistics (:mod:`~kernelcheck._src.verify.unbiased.stats`), the trial functions of a sampler
(:mod:`~kernelcheck._src.verify.unbiased.trials`), the report files
(:mod:`~kernelcheck._src.verify.unbiased.writer`), the ``kernelcheck
unbiased`` command (:mod:`~kernelcheck._src.verify.unbiased.command`) and the
bias of the attention ratio, C16 (:mod:`~kernelcheck._src.verify.random_features.ratio_bias`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy.special import ndtri

from kernelcheck._src.core.deadline import honours_timeout
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.core.seeds import child_seed
from kernelcheck._src.core.validate import (
    as_int,
    as_points,
    as_probability,
    check_callable,
    describe,
)
from kernelcheck._src.mc.engine import (
    BERRY_ESSEEN_C,
    DEFAULT_SHARD_SIZE,
    Moments,
    root_seed_sequence,
    run_trials,
)
from kernelcheck._src.verify.unbiased.results import (
    PairResult,
    SweepPoint,
    UnbiasedReport,
    format_trials,
)
from kernelcheck._src.verify.unbiased.stats import PairStats, median_finite, pair_statistics
from kernelcheck._src.verify.unbiased.trials import sampler_name, trial_function
from kernelcheck.errors import InvalidArgument

__all__ = [
    "unbiased",
    "UnbiasedReport",
    "PairResult",
    "SweepPoint",
]

#: Default bound on the Berry-Esseen distance of a pair's standardised mean
#: from the normal law; beyond it the pair is "untestable at this N".
DEFAULT_BE_TOLERANCE = 0.02

VERDICTS = ("pass", "exact", "fail", "untestable")

#: Seed paths (:func:`kernelcheck._src.core.seeds.child_seed`) beyond any shard
#: index: the probe trial that checks the sampler, then one per sweep point.
_PROBE_PATH = 2**32
_SWEEP_PATH = 2**32 + 1


# ---------------------------------------------------------------------------
# The verifier
# ---------------------------------------------------------------------------


class _UnbiasedArgs(NamedTuple):
    """The checked arguments of :func:`unbiased`."""

    X: np.ndarray
    Y: np.ndarray
    trials: int
    alpha: float
    power: float
    be_tol: float
    shard_size: int
    root: np.random.SeedSequence
    sweep: tuple | None


def _unbiased_iv(
    sample, target, X, Y, trials, seed, alpha, power, be_tolerance, shard_size, sweep
) -> _UnbiasedArgs:
    from kernelcheck._src.kernels.base import Kernel

    check_callable(sample, "sample")
    if not isinstance(target, Kernel):
        raise InvalidArgument(
            f"`target` must be a kernelcheck kernel (e.g. Exponential(), Gaussian()), "
            f"got {describe(target)}"
        )
    X = as_points(X, "X").astype(np.float64)
    Y = X if Y is None else as_points(Y, "Y", dim=X.shape[1]).astype(np.float64)
    trials = as_int(trials, "trials", minimum=2)
    alpha = as_probability(alpha, "alpha")
    power = as_probability(power, "power")
    be_tolerance = as_probability(be_tolerance, "be_tolerance")
    shard_size = as_int(shard_size, "shard_size", minimum=1)
    pairs = X.shape[0] * Y.shape[0]  # a shard's estimates, its powers, the moments
    check_size(
        (3 * min(shard_size, trials) + 6) * pairs,
        f"the trials of one shard on {X.shape[0]} x {Y.shape[0]} pairs",
    )
    root = root_seed_sequence(seed)
    if sweep is not None:
        if not callable(getattr(sample, "with_num_features", None)):
            raise InvalidArgument(
                "`sweep` needs a sampler with a with_num_features(m) method "
                f"(e.g. PositiveRandomFeatures.sampler(...)), got {describe(sample)}"
            )
        if isinstance(sweep, (str, bytes)) or not hasattr(sweep, "__iter__"):
            raise InvalidArgument(
                f"`sweep` must be a sequence of numbers of features, got {describe(sweep)}"
            )
        sweep = tuple(as_int(m, "sweep", minimum=1) for m in sweep)
        if not sweep:
            raise InvalidArgument("`sweep` must list at least one number of features")
    return _UnbiasedArgs(X, Y, trials, alpha, power, be_tolerance, shard_size, root, sweep)


@honours_timeout
def unbiased(
    sample: Callable,
    target,
    X,
    Y=None,
    *,
    trials: int,
    seed: Any,
    alpha: float = 0.01,
    executor=None,
    power: float = 0.8,
    be_tolerance: float = DEFAULT_BE_TOLERANCE,
    shard_size: int = DEFAULT_SHARD_SIZE,
    sweep=None,
    progress: bool | None = None,
    shards: int | None = None,
    timeout: float | None = None,
) -> UnbiasedReport:
    """Check that a random-feature sampler estimates ``target`` without bias (C13, C17, C18).

    Each trial draws ``phi_t = sample(rng_t)`` and calls it on ``X`` and on ``Y`` apart (as
    a layer does on Q and K); the estimate of pair (i, j) is ``phi_t(x_i) . phi_t(y_j)``.

    Statistics (details and sources in ``docs/statistics.md``):

    * per pair, the mean over N trials with a simultaneous (Bonferroni)
      ``1 - alpha`` interval;
    * a test of ``bias = 0`` per pair: with the closed-form variance
      ``sigma^2`` when the sampler provides it (``sample.theory``, i.i.d.
      maps of :mod:`kernelcheck.features`): ``z = |mean - k| / (sigma / sqrt N)``;
      otherwise with the sample variance.  The pair's rounding tolerance (in the
      features' format) is subtracted from ``|mean - k|``: rounding never fails;
    * Berry-Esseen gate: a pair whose bound ``C rho / (sigma^3 sqrt N)``
      (C = 0.4748, ``rho / sigma^3 <= sqrt(kurtosis)``) exceeds
      ``be_tolerance`` is "untestable at this N, needs about K trials" -- unless
      its variance is known, when Chebyshev's ``p = 1/z^2`` (valid for any law)
      can still find a bias;
    * pairs with zero variance are judged by rounding error ("variance above
      theory" is tested with the known variance and fourth moment);
    * Holm's step-down procedure over all tests keeps the family-wise false-alarm rate at ``alpha``;
    * power: the smallest relative bias detected with probability ``power``,
      ``(z_(1-alpha/2P) + z_power) SE / |k|`` per pair (the headline: the
      median over the testable pairs; :meth:`UnbiasedReport.trials_to_detect`);
    * what to do when the report cannot pass: :meth:`UnbiasedReport.advice`.

    Parameters
    ----------
    sample : callable
        ``sample(rng) -> phi`` with ``phi(X)`` of shape (n, D).  A
        :class:`~kernelcheck.features.RandomFeatureSampler` (e.g.
        ``PositiveRandomFeatures.sampler(d, m)``) is vectorised over trials and
        supplies the closed-form theory.
    target : Kernel
        The kernel the sampler claims to estimate.
    X : array_like, shape (n, d)
        Points; the pairs are all (x_i, y_j).
    Y : array_like, shape (n', d), default None
        Points; None means ``Y = X``.
    trials : int
        Number of trials N >= 2.
    seed : int, SeedSequence or Generator
        Root seed (blocks of ``shard_size`` trials use its spawned children).
    alpha : float, default 0.01
        Family-wise false-alarm rate, in (0, 1).
    executor : concurrent.futures.Executor or None, default None
        Runs the shards (:func:`kernelcheck.stats.run_trials`); same result for any executor.
    power : float, default 0.8
        Power of the detectable-bias statement.
    be_tolerance : float, default 0.02
        Largest accepted Berry-Esseen bound of a pair's normal approximation.
    shard_size : int, default 2048
        Trials per seeded block (part of the meaning of the seed).
    sweep : sequence of int or None, default None
        Also measure the relative RMSE at these numbers of features (needs
        ``sample.with_num_features``; plotted by :func:`~kernelcheck.verify.write_report`).
    progress : bool or None, default None
        A progress bar on stderr; None: only when stderr is a terminal.
    shards : int or None, default None
        Tasks the trial blocks are grouped into on ``executor`` (the result
        does not depend on it); None: one per block.
    timeout : float or None, default None
        Seconds from the start within which all calls of ``sample``, ``phi`` must
        return, else :class:`InvalidArgument` (``docs/reliability.md``); None waits.

    Returns
    -------
    UnbiasedReport

    Raises
    ------
    InvalidArgument
        Bad arguments; a drawn map's wrong shape, NaN or Inf; a call past ``timeout``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Exponential
    >>> from kernelcheck.features import PositiveRandomFeatures
    >>> X = np.array([[0.2, 0.1], [-0.1, 0.3]])
    >>> rep = unbiased(PositiveRandomFeatures.sampler(2, 16), Exponential(), X,
    ...                trials=5000, seed=0)
    >>> rep.passed
    True
    """
    a = _unbiased_iv(
        sample, target, X, Y, trials, seed, alpha, power, be_tolerance, shard_size, sweep
    )
    # the target and its error model before any trial: a target without one fails here
    t = np.asarray(target(a.X, a.Y), dtype=np.float64)
    t_err = np.asarray(target.error_bound(a.X, a.Y), dtype=np.float64)
    fn = trial_function(sample, a.X, a.Y)
    fn(np.random.default_rng(child_seed(a.root, _PROBE_PATH)), 1)  # a broken sampler fails here
    run = functools.partial(
        run_trials, shard_size=a.shard_size, executor=executor, shards=shards, progress=progress
    )
    moments = run(fn, a.trials, seed=a.root, desc="unbiased")
    theory, kind = _theory(sample, a.X, a.Y)
    pairs, tests = _judge(moments, t, t_err, theory, kind, a.alpha, a.power, a.be_tol)
    points = () if a.sweep is None else _sweep(sample, a, t, run)
    return _report(sample, target, seed, a, kind, pairs, tests, points)


def _theory(sample, X: np.ndarray, Y: np.ndarray) -> tuple[dict | None, str]:
    """The sampler's closed-form moments (order 8) and their kind, or ``(None, "none")``."""
    theory_fn = getattr(sample, "theory", None)
    if callable(theory_fn):
        return theory_fn(X, Y, order=8), getattr(sample, "theory_kind", "exact")
    return None, "none"


def _report(sample, target, seed, a: _UnbiasedArgs, kind, pairs, tests, points) -> UnbiasedReport:
    """The report of :func:`unbiased` from the judged pairs and the sweep."""
    counts = {v: sum(p.verdict == v for p in pairs) for v in VERDICTS}
    if counts["fail"]:
        verdict = "fail"
    elif counts["untestable"]:
        verdict = "inconclusive"
    else:
        verdict = "pass"
    testable = [p for p in pairs if p.test in ("z", "t")]
    rel = [p.detectable_relative_bias for p in testable]
    need = [p.trials_needed for p in pairs if p.verdict == "untestable"]
    confirm = [p.trials_to_confirm for p in pairs if p.verdict == "fail"]
    confirm = [c for c in confirm if math.isfinite(c)]
    tol_max = max((p.rounding_tolerance for p in pairs), default=0.0)
    return UnbiasedReport(
        passed=verdict == "pass",
        verdict=verdict,
        sampler=sampler_name(sample),
        target=repr(target),
        trials=a.trials,
        alpha=a.alpha,
        power=a.power,
        be_tolerance=a.be_tol,
        shard_size=a.shard_size,
        seed=repr(seed) if not isinstance(seed, np.random.Generator) else "Generator",
        theory=kind,
        counts=counts,
        detectable_relative_bias=median_finite(rel),
        detectable_relative_bias_max=float(np.nanmax(rel)) if rel else float("nan"),
        detectable_bias=median_finite([p.detectable_bias for p in testable]),
        trials_for_all=float(max(need)) if need else float(a.trials),
        trials_to_confirm=float(min(confirm)) if confirm else float("nan"),
        pairs=tuple(pairs),
        sweep=tuple(points),
        tolerance=Tolerance(
            float(tol_max),
            "2 |target error bound| + gamma_(D+2 ops) (1 + gamma_D), ops = 2 d + 8 (the "
            "2 ops feature roundings in the unit roundoff of the features' own format), "
            "max_t |phi(x)|_2 |phi(y)|_2 (largest over pairs)",
        ),
        notes=tuple(_notes(tests, a.alpha, a.be_tol, kind)),
    )


def _notes(tests: int, alpha: float, be_tol: float, kind: str) -> list[str]:
    """The statements about the statistics used, for the report."""
    notes = [
        f"Tests: {tests} hypotheses (bias = 0 per pair, and variance <= theory where "
        "the closed-form variance is known), Holm step-down at family-wise level "
        f"{alpha:g}.",
        f"Normal approximation trusted when the Berry-Esseen bound {BERRY_ESSEEN_C} "
        f"rho/(sigma^3 sqrt(N)) <= {be_tol:g}, with rho/sigma^3 <= sqrt(kurtosis) "
        f"({'closed-form kurtosis' if kind == 'exact' else 'sample kurtosis'}).",
        "Zero-variance pairs are judged against the rounding tolerance "
        "2 |error bound of the target| + gamma_(D+2 ops) (1 + gamma_D) max_t |phi(x)| |phi(y)| "
        "with ops = 2 d + 8 roundings per feature entry, in the unit roundoff of the format "
        "the features come in (float32 for a float32 sampler; the product in float64).",
    ]
    if kind == "exact":
        notes.append(
            "Closed-form variances (Choromanski et al. 2021, Lemma 2; Likhosherstov et "
            "al. 2022) are used for the z tests; a sample variance below theory is "
            "not a failure."
        )
    elif kind == "bound":
        notes.append(
            "Orthogonal rows: tests use the sample variance; the i.i.d. closed-form "
            "MSE is shown as the upper bound orthogonal features should not exceed "
            "(C18)."
        )
    else:
        notes.append(
            "No closed-form variance: tests use the sample variance, which is "
            "usually too small for skewed (lognormal-type) estimators; the gate on "
            "the sample kurtosis is then optimistic, and how many trials an "
            "untestable pair needs is unknown (never extrapolated from the sample "
            "kurtosis)."
        )
    notes.append(
        "Detectable bias: (z_(1-alpha/(2P)) + z_power) SE per pair; the headline is the "
        "median over the testable pairs. A bias r times smaller needs r^2 times the trials."
    )
    return notes


def _judge(mo: Moments, t, t_err, theory, kind, alpha, power, be_tol):
    """The verdict on every pair, and the number of hypotheses Holm's procedure tested."""
    s = pair_statistics(mo, t, t_err, theory, kind, alpha, power, be_tol)
    nx, ny = t.shape
    pairs = [_pair_result(s, t, (a, b), be_tol) for a in range(nx) for b in range(ny)]
    tests = int(np.isfinite(s.p_mean).sum() + np.isfinite(s.p_var).sum())
    return pairs, tests


def _verdict(s: PairStats, t, k: tuple, be_tol: float) -> tuple[str, str, str]:
    """``(test, verdict, reason)`` of pair ``k``."""
    dev, tol, mean = s.dev, s.tol, s.mean
    if s.rounding[k]:
        if dev[k] <= tol[k]:
            return (
                "rounding",
                "exact",
                f"zero variance; |mean - target| = {dev[k]:.3g} <= rounding tolerance {tol[k]:.3g}",
            )
        return (
            "rounding",
            "fail",
            f"zero variance and |mean - target| = {dev[k]:.3g} > rounding tolerance {tol[k]:.3g}",
        )
    use_th = s.use_th
    test = ("z" if use_th else "t") if s.testable[k] else ("chebyshev" if use_th else "none")
    if s.rej_mean[k]:
        reason = (
            f"bias {mean[k] - t[k]:.3g} ({100 * (mean[k] - t[k]) / t[k]:.3g}% of "
            f"target), p = {s.p_mean[k]:.3g} rejected by Holm"
        )
        return test, "fail", reason
    if s.rej_var[k]:
        reason = (
            f"variance {s.s2[k]:.3g} above the closed-form {s.var_th[k]:.3g} "
            f"(p = {s.p_var[k]:.3g}, rejected by Holm)"
        )
        return test, "fail", reason
    if s.testable[k]:
        return test, "pass", f"no bias detected (p = {s.p_mean[k]:.3g})"
    need = float(s.need[k])
    how_many = (
        "how many trials would make it testable is unknown without closed-form moments"
        if math.isnan(need)
        else f"needs about {format_trials(need)} trials (closed-form kurtosis)"
    )
    reason = f"untestable at N = {s.N}: Berry-Esseen bound {s.be[k]:.3g} > {be_tol:g}; {how_many}"
    return test, "untestable", reason


def _pair_result(s: PairStats, t, k: tuple, be_tol: float) -> PairResult:
    test, verdict, reason = _verdict(s, t, k, be_tol)
    return PairResult(
        i=k[0],
        j=k[1],
        target=float(t[k]),
        mean=float(s.mean[k]),
        std_error=float(s.se[k]),
        ci_low=float(s.mean[k] - s.zc * s.ci_se[k]),
        ci_high=float(s.mean[k] + s.zc * s.ci_se[k]),
        z=float(s.z[k]) if np.isfinite(s.z[k]) else (0.0 if s.excess[k] == 0 else float("inf")),
        p_value=float(s.p_mean[k]),
        test=test,
        verdict=verdict,
        reason=reason,
        berry_esseen=float(s.be[k]),
        trials_needed=float(s.need[k]),
        trials_to_confirm=float(s.confirm[k]) if verdict == "fail" else float("nan"),
        detectable_bias=float(s.det_abs[k]),
        detectable_relative_bias=float(s.det[k]),
        variance=float(s.s2[k]),
        theory_variance=float(s.var_th[k]),
        variance_ratio=float(s.s2[k] / s.var_th[k]) if s.var_th[k] > 0 else float("nan"),
        variance_p=float(s.p_var[k]),
        mse=float(s.mse[k]),
        theory_mse=float(s.mse_th[k]),
        mse_halfwidth=float(s.mse_h[k]),
        rounding_tolerance=float(s.tol[k]),
    )


def _sweep(sample, a: _UnbiasedArgs, t, run: Callable) -> list[SweepPoint]:
    """Relative RMSE at each m of ``a.sweep``; point q is seeded by
    ``child_seed(root, _SWEEP_PATH + q)``."""
    points = []
    z95 = float(ndtri(0.975))
    for q, m in enumerate(a.sweep or ()):
        s = sample.with_num_features(m)
        fn = trial_function(s, a.X, a.Y)
        child = child_seed(a.root, _SWEEP_PATH + q)  # past the shards and the probe
        mo = run(fn, a.trials, seed=child, desc=f"sweep m={m}")
        N = mo.count
        rel = (mo.m2 + N * (mo.mean - t) ** 2) / N / t**2
        var_rel = np.maximum(mo.m4 / N - (mo.m2 / N) ** 2, 0.0) / t**4
        mean_rel = float(rel.mean())
        h = z95 * math.sqrt(float(var_rel.sum()) / N) / rel.size
        th = float("nan")
        if callable(getattr(s, "theoretical_mse", None)):
            th = float(math.sqrt(float((s.theoretical_mse(a.X, a.Y) / t**2).mean())))
        points.append(
            SweepPoint(
                m,
                math.sqrt(mean_rel),
                math.sqrt(max(mean_rel - h, 0.0)),
                math.sqrt(mean_rel + h),
                th,
            )
        )
    return points
