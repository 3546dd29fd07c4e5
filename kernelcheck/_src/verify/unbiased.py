"""Is a random-feature estimator unbiased, and how noisy is it (claims C13, C16, C17, C18)?

:func:`unbiased` draws ``trials`` feature maps from the user's sampler, and for
every pair (x, y) of ``X`` x ``Y`` estimates ``E[phi(x) . phi(y)]`` with a
confidence interval, tests ``bias = 0`` with a family-wise false-alarm rate
``alpha`` over all pairs (Holm), says which bias it could have detected, and
compares the variance with closed-form theory when the sampler provides it.
:func:`ratio_bias` shows that attention outputs built from unbiased numerator
and denominator estimates are biased, with a bias shrinking like 1/m (C16).
The statistics are described in ``docs/statistics.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from kernelcheck._src.attention.exact import kernelized
from kernelcheck._src.attention.linear import parallel
from kernelcheck._src.core import report as bundle
from kernelcheck._src.core.outcome import Outcome, outcome_of
from kernelcheck._src.core.report import new_figure, png_bytes
from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.rounding import (
    Tolerance,
    default_feature_ops,
    inner_product_factor,
)
from kernelcheck._src.core.validate import (
    as_int,
    as_output_folder,
    as_points,
    as_probability,
    as_real,
    call_user,
    check_callable,
    check_choice,
    describe,
)
from kernelcheck._src.mc.engine import (
    BERRY_ESSEEN_C,
    DEFAULT_SHARD_SIZE,
    Moments,
    berry_esseen_bound,
    child_seed,
    root_seed_sequence,
    run_trials,
    shard_seed,
    trials_needed,
)
from kernelcheck.errors import InvalidArgument

__all__ = [
    "unbiased",
    "UnbiasedReport",
    "PairResult",
    "SweepPoint",
    "write_report",
    "default_points",
    "ratio_bias",
    "RatioBiasResult",
]

#: Default bound on the Berry-Esseen distance of a pair's standardised mean
#: from the normal law; beyond it the pair is "untestable at this N".
DEFAULT_BE_TOLERANCE = 0.02

VERDICTS = ("pass", "exact", "fail", "untestable")

#: Seed paths (:func:`kernelcheck._src.mc.engine.child_seed`) beyond any shard
#: index: the probe trial that checks the sampler, then one per sweep point.
_PROBE_PATH = 2**32
_SWEEP_PATH = 2**32 + 1


# ---------------------------------------------------------------------------
# Trial functions (module-level classes: picklable for process executors)
# ---------------------------------------------------------------------------


def _check_features(F: Any, X: np.ndarray, name: str, D: int | None) -> np.ndarray:
    arr = np.asarray(F)
    if arr.dtype.kind not in "biuf":
        raise InvalidArgument(
            f"`sample` returned a feature map whose output on `{name}` is not a real array "
            f"(got {describe(arr)})"
        )
    if arr.ndim != 2 or arr.shape[0] != X.shape[0] or (D is not None and arr.shape[1] != D):
        want = f"({X.shape[0]}, D)" if D is None else f"({X.shape[0]}, {D})"
        raise InvalidArgument(
            f"`sample` returned a feature map whose output on `{name}` (shape {X.shape}) "
            f"must have shape {want}, got {describe(arr)}"
        )
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise InvalidArgument(
            f"`sample` returned a feature map whose output on `{name}` holds NaN or Inf "
            f"(first at index {bad}: {arr[bad]!r})"
        )
    return arr


def _rounding_scale(D: int, d: int) -> float:
    """``gamma_(D + 2 ops)(1 + gamma_D)``, ``ops = 2 d + 8``: a length-D inner product of
    feature entries computed with the user-map model of
    :func:`~kernelcheck._src.core.rounding.default_feature_ops` (the built-in
    random features fit it)."""
    return inner_product_factor(D, 2 * default_feature_ops(d))


class _SamplerTrials:
    """Trials of a user sampler: one ``sample(rng)`` call per trial, GEMMs batched."""

    def __init__(self, sample: Callable, X: np.ndarray, Y: np.ndarray):
        self.sample, self.X, self.Y = sample, X, Y

    def __call__(self, rng, n):
        FXs, FYs = [], []
        for _ in range(n):
            phi = call_user(self.sample, "`sample`: the call sample(rng)", rng)
            if not callable(phi):
                raise InvalidArgument(
                    f"`sample(rng)` must return a feature map (a callable X -> (n, D)), "
                    f"got {describe(phi)}"
                )
            FX = _check_features(
                call_user(phi, "`sample`: the call phi(X)", self.X), self.X, "X", None
            )
            FY = _check_features(
                call_user(phi, "`sample`: the call phi(Y)", self.Y), self.Y, "Y", FX.shape[1]
            )
            FXs.append(FX)
            FYs.append(FY)
        dims = {F.shape[1] for F in FXs}
        if len(dims) == 1:
            FX, FY = np.stack(FXs), np.stack(FYs)
            est = FX @ np.swapaxes(FY, -1, -2)
            nx = np.sqrt(np.einsum("tij,tij->ti", FX, FX))
            ny = np.sqrt(np.einsum("tij,tij->ti", FY, FY))
            bound = _rounding_scale(FX.shape[2], self.X.shape[1]) * nx[:, :, None] * ny[:, None, :]
        else:
            est = np.stack([a @ b.T for a, b in zip(FXs, FYs, strict=True)])
            bound = np.stack(
                [
                    _rounding_scale(a.shape[1], self.X.shape[1])
                    * np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
                    for a, b in zip(FXs, FYs, strict=True)
                ]
            )
        return est, bound


class _BatchTrials:
    """Trials of a vectorised sampler (``batch_estimates``): no Python loop per trial."""

    def __init__(self, sampler, X: np.ndarray, Y: np.ndarray):
        self.sampler, self.X, self.Y = sampler, X, Y

    def __call__(self, rng, n):
        est, bound = self.sampler.batch_estimates(rng, n, self.X, self.Y)
        D = self.sampler.num_features * getattr(self.sampler._proto, "_per_row", 1)
        if not np.isfinite(est).all():
            raise InvalidArgument("`sample` produced a non-finite kernel estimate (overflow)")
        return est, _rounding_scale(D, self.X.shape[1]) * bound


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PairResult(ResultMixin):
    """The verdict on one pair (x_i, y_j).

    Attributes
    ----------
    i, j : int
        Row of X and row of Y.
    target, mean, std_error : float
        ``k(x_i, y_j)``, the Monte Carlo mean of ``phi(x_i) . phi(y_j)`` and its
        standard error (from the theoretical variance when ``test`` is
        ``"z"`` or ``"chebyshev"``, else from the sample variance).
    ci_low, ci_high : float
        Simultaneous (Bonferroni over all pairs) ``1 - alpha`` interval for the mean.
    z, p_value : float
        ``max(0, |mean - target| - rounding) / std_error`` and its p-value.
    test : str
        ``"z"`` (known variance), ``"t"`` (sample variance), ``"chebyshev"``
        (known variance, skewness too large for the normal law),
        ``"rounding"`` (zero variance) or ``"none"``.
    verdict : str
        ``"pass"``, ``"exact"`` (zero variance, within rounding), ``"fail"``
        or ``"untestable"``.
    reason : str
        Why the verdict is what it is, in words.
    berry_esseen : float
        Bound on the distance of the standardised mean's law from N(0, 1).
    trials_needed : float
        Trials for ``berry_esseen <= be_tolerance``.
    detectable_relative_bias : float
        Smallest ``|bias| / |target|`` detected with the report's power.
    variance, theory_variance, variance_ratio, variance_p : float
        Per-trial sample variance, closed-form variance (NaN if unknown), their
        ratio and the one-sided p-value of "variance above theory".
    mse, theory_mse, mse_halfwidth : float
        Empirical and closed-form MSE and the simultaneous half-width of the
        empirical MSE's interval.
    rounding_tolerance : float
        Bound on the rounding error of one estimate and of the target.
    """

    i: int
    j: int
    target: float
    mean: float
    std_error: float
    ci_low: float
    ci_high: float
    z: float
    p_value: float
    test: str
    verdict: str
    reason: str
    berry_esseen: float
    trials_needed: float
    detectable_relative_bias: float
    variance: float
    theory_variance: float
    variance_ratio: float
    variance_p: float
    mse: float
    theory_mse: float
    mse_halfwidth: float
    rounding_tolerance: float

    def mse_agrees(self) -> bool | None:
        """Whether the empirical MSE's interval contains the theoretical MSE (None if unknown)."""
        if not math.isfinite(self.theory_mse) or not math.isfinite(self.mse_halfwidth):
            return None
        return abs(self.mse - self.theory_mse) <= self.mse_halfwidth

    def __str__(self) -> str:
        return (
            f"pair ({self.i}, {self.j}): {self.verdict.upper()} -- mean {self.mean:.6g} vs "
            f"target {self.target:.6g} (z = {self.z:.3g}, {self.test}); {self.reason}"
        )


@dataclass(frozen=True)
class SweepPoint(ResultMixin):
    """Relative root-MSE at one number of features m (root mean over pairs of MSE / k^2).

    ``rmse_low``/``rmse_high`` is a ~95% interval from the per-pair MSE intervals.
    """

    num_features: int
    relative_rmse: float
    rmse_low: float
    rmse_high: float
    theory_relative_rmse: float


@dataclass(frozen=True)
class UnbiasedReport(ResultMixin):
    """Report of :func:`unbiased` (claims C13, C17, C18).

    Attributes
    ----------
    passed : bool
        True when no pair fails and every pair is testable (or exact).
    verdict : str
        ``"pass"``, ``"fail"`` or ``"inconclusive"`` (no failure, but some pairs
        untestable at this number of trials).
    sampler, target : str
        What was checked.
    trials, alpha, power, be_tolerance, shard_size : number
        Settings; ``alpha`` is the family-wise false-alarm rate over all tests.
    seed : str
        The seed, as given.
    theory : str
        ``"exact"`` (closed-form variance used in the tests), ``"bound"``
        (i.i.d. MSE, an upper bound for orthogonal rows, only compared) or ``"none"``.
    counts : dict
        Number of pairs per verdict.
    detectable_relative_bias : float
        Largest over the testable pairs of the smallest relative bias the run
        detects with probability ``power`` (NaN if no pair is testable).
    trials_for_all : float
        Trials after which every pair would be testable (inf if unknown).
    pairs : tuple of PairResult
        The per-pair table.
    sweep : tuple of SweepPoint
        Relative RMSE against m (empty unless a sweep was asked for).
    tolerance : Tolerance
        The largest rounding tolerance used for a zero-variance pair.
    notes : tuple of str
        Statements about the statistics used.
    """

    passed: bool
    verdict: str
    sampler: str
    target: str
    trials: int
    alpha: float
    power: float
    be_tolerance: float
    shard_size: int
    seed: str
    theory: str
    counts: dict
    detectable_relative_bias: float
    trials_for_all: float
    pairs: tuple
    sweep: tuple = ()
    tolerance: Tolerance | None = None
    notes: tuple = ()

    def __str__(self) -> str:
        c = self.counts
        det = (
            "n/a"
            if not math.isfinite(self.detectable_relative_bias)
            else f"{100 * self.detectable_relative_bias:.3g}%"
        )
        text = (
            f"unbiased: {self.verdict.upper()} -- {len(self.pairs)} pairs "
            f"({c.get('pass', 0)} pass, {c.get('exact', 0)} exact, {c.get('fail', 0)} fail, "
            f"{c.get('untestable', 0)} untestable) after {self.trials} trials of "
            f"{self.sampler} vs {self.target}; family-wise false-alarm rate {self.alpha:g} "
            f"(Holm); detectable relative bias {det} at power {self.power:g}"
        )
        if c.get("untestable", 0):
            text += f"; all pairs testable after about {_fmt_trials(self.trials_for_all)} trials"
        return text

    @property
    def outcome(self) -> Outcome:
        """``pass`` verified, ``fail`` refuted, ``inconclusive`` inconclusive."""
        return {"pass": Outcome.VERIFIED, "fail": Outcome.REFUTED}.get(
            self.verdict, Outcome.INCONCLUSIVE
        )

    def failures(self) -> list[PairResult]:
        """The failing pairs."""
        return [p for p in self.pairs if p.verdict == "fail"]

    def untestable(self) -> list[PairResult]:
        """The pairs whose estimate is too skewed for a verdict at this number of trials."""
        return [p for p in self.pairs if p.verdict == "untestable"]

    def table(self) -> dict[str, np.ndarray]:
        """Columns of the per-pair table as arrays."""
        names = [f for f in PairResult.__dataclass_fields__]
        return {n: np.array([getattr(p, n) for p in self.pairs]) for n in names}

    def to_markdown(self) -> str:
        """The report as Markdown: summary, notes, per-pair table, sweep."""
        lines = [
            "# Unbiasedness report",
            "",
            f"**Verdict: {self.verdict.upper()}**",
            "",
            f"- sampler: `{self.sampler}`",
            f"- target kernel: `{self.target}`",
            f"- trials: {self.trials} (seed {self.seed}, shards of {self.shard_size})",
            f"- family-wise false-alarm rate: {self.alpha:g} (Holm over all tests)",
            f"- theory: {self.theory}",
            "- pairs: " + ", ".join(f"{k} {v}" for k, v in self.counts.items()),
            f"- smallest detectable relative bias (power {self.power:g}): "
            + (
                "n/a"
                if not math.isfinite(self.detectable_relative_bias)
                else f"{100 * self.detectable_relative_bias:.3g}%"
            ),
        ]
        if self.counts.get("untestable", 0):
            lines.append(
                f"- every pair testable after about {_fmt_trials(self.trials_for_all)} trials"
            )
        if self.tolerance is not None:
            lines.append(f"- rounding tolerance: {self.tolerance}")
        lines += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        lines += [
            "",
            "## Pairs",
            "",
            "| i | j | target | mean | CI | z | test | verdict | BE bound | "
            "var / theory | MSE | theory MSE |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in self.pairs:
            verdict = p.verdict
            if p.verdict == "untestable":
                verdict += f" (needs ~{_fmt_trials(p.trials_needed)} trials)"
            lines.append(
                f"| {p.i} | {p.j} | {p.target:.6g} | {p.mean:.6g} | "
                f"[{p.ci_low:.6g}, {p.ci_high:.6g}] | {p.z:.3g} | {p.test} | {verdict} | "
                f"{p.berry_esseen:.3g} | {_g(p.variance_ratio)} | {p.mse:.3g} | "
                f"{_g(p.theory_mse)} |"
            )
        if self.sweep:
            lines += [
                "",
                "## Relative RMSE against the number of features",
                "",
                "| m | relative RMSE | interval | theory |",
                "|---|---|---|---|",
            ]
            for s in self.sweep:
                lines.append(
                    f"| {s.num_features} | {s.relative_rmse:.4g} | "
                    f"[{s.rmse_low:.4g}, {s.rmse_high:.4g}] | "
                    f"{_g(s.theory_relative_rmse)} |"
                )
        return "\n".join(lines) + "\n"


def _name(obj) -> str:
    """A stable name for a sampler (no memory addresses)."""
    if (
        isinstance(obj, type)
        or callable(getattr(obj, "__code__", None))
        or hasattr(obj, "__qualname__")
    ):
        return getattr(obj, "__qualname__", type(obj).__name__)
    text = repr(obj)
    return type(obj).__name__ if " at 0x" in text else text


def _g(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.4g}"


def _fmt_trials(n: float) -> str:
    if not math.isfinite(n):
        return "more than 1e15 (moments beyond float range)"
    return f"{n:.3g}" if n >= 1e6 else f"{int(n)}"


# ---------------------------------------------------------------------------
# The verifier
# ---------------------------------------------------------------------------


def _holm(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down rejections at family-wise level ``alpha`` (NaN = no test)."""
    p = np.asarray(p, dtype=float)
    reject = np.zeros(p.shape, dtype=bool)
    idx = np.flatnonzero(np.isfinite(p))
    M = idx.size
    order = idx[np.argsort(p[idx], kind="stable")]
    for rank, k in enumerate(order):
        if p[k] <= alpha / (M - rank):
            reject[k] = True
        else:
            break
    return reject


def _unbiased_iv(sample, target, X, Y, trials, seed, alpha, power, be_tolerance, shard_size, sweep):
    from kernelcheck._src.kernels.algebra import Kernel

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
    return X, Y, trials, alpha, power, be_tolerance, shard_size, root, sweep


def _trial_function(sample, X, Y):
    if callable(getattr(sample, "batch_estimates", None)) and hasattr(sample, "_proto"):
        return _BatchTrials(sample, X, Y)
    return _SamplerTrials(sample, X, Y)


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
) -> UnbiasedReport:
    """Check that a random-feature sampler estimates ``target`` without bias (C13, C17, C18).

    For each trial t, ``phi_t = sample(rng_t)`` is drawn and evaluated on ``X``
    and on ``Y`` in separate calls (as a layer evaluates phi(Q) and phi(K));
    the estimate of pair (i, j) is ``phi_t(x_i) . phi_t(y_j)``.

    Statistics (details and sources in ``docs/statistics.md``):

    * per pair, the mean over N trials with a simultaneous (Bonferroni)
      ``1 - alpha`` interval;
    * a test of ``bias = 0`` per pair: with the closed-form variance
      ``sigma^2`` when the sampler provides it (``sample.theory``, i.i.d.
      maps of :mod:`kernelcheck.features`): ``z = |mean - k| / (sigma / sqrt N)``;
      otherwise with the sample variance.  The rounding tolerance of the pair
      is subtracted from ``|mean - k|`` first, so rounding never fails a pair;
    * Berry-Esseen gate: a pair whose bound ``C rho / (sigma^3 sqrt N)``
      (C = 0.4748, ``rho / sigma^3 <= sqrt(kurtosis)``) exceeds
      ``be_tolerance`` is "untestable at this N, needs about K trials" -- unless
      its variance is known, when Chebyshev's ``p = 1/z^2`` (valid for any law)
      can still find a bias;
    * pairs with zero variance are judged by rounding error;
    * the one-sided test "variance above theory" (known variance and fourth
      moment; a variance below theory is not a failure: lognormal-type sample
      variances are mostly too small);
    * Holm's step-down procedure over all these tests keeps the family-wise
      false-alarm rate at ``alpha``;
    * power: the smallest relative bias detected with probability ``power``,
      ``(z_(1-alpha/2P) + z_power) SE / |k|``.

    Parameters
    ----------
    sample : callable
        ``sample(rng) -> phi`` with ``phi(X)`` of shape (n, D).  A
        :class:`~kernelcheck.features.RandomFeatureSampler` (e.g.
        ``PositiveRandomFeatures.sampler(d, m)``) is vectorised over trials and
        supplies the closed-form theory.
    target : Kernel
        The kernel the sampler claims to estimate.
    X, Y : array_like, shape (n, d), (n', d)
        The pairs are all (x_i, y_j); ``Y=None`` means ``Y = X``.
    trials : int
        Number of trials N >= 2.
    seed : int, SeedSequence or Generator
        Root seed (blocks of ``shard_size`` trials use its spawned children).
    alpha : float
        Family-wise false-alarm rate, in (0, 1).
    executor : concurrent.futures.Executor, optional
        Runs the shards (see :func:`kernelcheck.stats.run_trials`); the result
        is identical for any executor.
    power : float
        Power at which the detectable bias is reported.
    be_tolerance : float
        Largest accepted Berry-Esseen bound.
    shard_size : int
        Trials per seeded block (part of the meaning of the seed).
    sweep : sequence of int, optional
        Also measure the relative RMSE at these numbers of features (needs
        ``sample.with_num_features``); plotted against m by :func:`write_report`.
    progress : bool, optional
        Progress bar (default: when stderr is a terminal).
    shards : int, optional
        Number of tasks the blocks are grouped into on ``executor`` (see
        :func:`kernelcheck.stats.run_trials`); the report does not depend on it.

    Returns
    -------
    UnbiasedReport

    Raises
    ------
    InvalidArgument
        For bad arguments, and when a drawn map returns a wrong shape, NaN or Inf.

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
    X, Y, trials, alpha, power, be_tol, shard_size, root, sweep = _unbiased_iv(
        sample, target, X, Y, trials, seed, alpha, power, be_tolerance, shard_size, sweep
    )
    fn = _trial_function(sample, X, Y)
    # one trial up front: a broken sampler fails here with a clear message
    fn(np.random.default_rng(child_seed(root, _PROBE_PATH)), 1)
    moments = run_trials(
        fn,
        trials,
        seed=root,
        shard_size=shard_size,
        executor=executor,
        shards=shards,
        progress=progress,
        desc="unbiased",
    )
    t = np.asarray(target(X, Y), dtype=np.float64)
    t_err = np.asarray(target.error_bound(X, Y), dtype=np.float64)
    theory = None
    kind = "none"
    theory_fn = getattr(sample, "theory", None)
    if callable(theory_fn):
        theory = theory_fn(X, Y, order=8)
        kind = getattr(sample, "theory_kind", "exact")
    pairs, extra = _judge(moments, t, t_err, theory, kind, alpha, power, be_tol)
    sweep_points = ()
    if sweep is not None:
        sweep_points = _sweep(
            sample, X, Y, t, sweep, trials, root, shard_size, executor, progress, alpha, shards
        )
    counts = {v: sum(p.verdict == v for p in pairs) for v in VERDICTS}
    if counts["fail"]:
        verdict = "fail"
    elif counts["untestable"]:
        verdict = "inconclusive"
    else:
        verdict = "pass"
    testable = [p.detectable_relative_bias for p in pairs if p.test in ("z", "t")]
    det = max(testable) if testable else float("nan")
    need = [p.trials_needed for p in pairs if p.verdict == "untestable"]
    notes = [
        f"Tests: {extra['tests']} hypotheses (bias = 0 per pair, and variance <= theory where "
        "the closed-form variance is known), Holm step-down at family-wise level "
        f"{alpha:g}.",
        f"Normal approximation trusted when the Berry-Esseen bound {BERRY_ESSEEN_C} "
        f"rho/(sigma^3 sqrt(N)) <= {be_tol:g}, with rho/sigma^3 <= sqrt(kurtosis) "
        f"({'closed-form kurtosis' if kind == 'exact' else 'sample kurtosis'}).",
        "Zero-variance pairs are judged against the rounding tolerance "
        "2 |error bound of the target| + gamma_(D+2 ops) (1 + gamma_D) max_t |phi(x)| |phi(y)| "
        "with ops = 2 d + 8 roundings per feature entry.",
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
            "the sample kurtosis is then optimistic."
        )
    tol_max = max((p.rounding_tolerance for p in pairs), default=0.0)
    return UnbiasedReport(
        passed=verdict == "pass",
        verdict=verdict,
        sampler=_name(sample),
        target=repr(target),
        trials=trials,
        alpha=alpha,
        power=power,
        be_tolerance=be_tol,
        shard_size=shard_size,
        seed=repr(seed) if not isinstance(seed, np.random.Generator) else "Generator",
        theory=kind,
        counts=counts,
        detectable_relative_bias=float(det),
        trials_for_all=float(max(need)) if need else float(trials),
        pairs=tuple(pairs),
        sweep=tuple(sweep_points),
        tolerance=Tolerance(
            float(tol_max),
            "2 |target error bound| + gamma_(D+2 ops) (1 + gamma_D), ops = 2 d + 8, "
            "max_t |phi(x)|_2 |phi(y)|_2 (largest over pairs)",
        ),
        notes=tuple(notes),
    )


def _judge(mo: Moments, t, t_err, theory, kind, alpha, power, be_tol):
    N = mo.count
    nx, ny = t.shape
    P = nx * ny
    mean = mo.mean
    s2 = mo.variance()
    tol = 2.0 * t_err + (mo.maximum if mo.maximum is not None else 0.0)
    dev = np.abs(mean - t)
    excess = np.maximum(dev - tol, 0.0)
    zc = float(ndtri(1.0 - alpha / (2.0 * P)))
    zpow = float(ndtri(power))
    nan = np.full(t.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if theory is not None:
            mu = np.asarray(theory["mean"], dtype=float)
            c = np.asarray(theory["central"], dtype=float)
            var_th = mu**2 * c[2]
            kurt_th = c[4] / c[2] ** 2
            var_y_th = mu**4 * (c[4] - c[2] ** 2)  # Var((X - mu)^2)
            ky = (c[8] - 4 * c[6] * c[2] + 6 * c[4] * c[2] ** 2 - 3 * c[2] ** 4) / (
                c[4] - c[2] ** 2
            ) ** 2
        else:
            var_th = kurt_th = var_y_th = ky = nan
        use_th = kind == "exact"
        sigma = np.sqrt(var_th) if use_th else np.sqrt(s2)
        kurt = kurt_th if use_th else mo.kurtosis()
        ratio = np.sqrt(np.maximum(kurt, 1.0))
        be = berry_esseen_bound(ratio, N)
        be = np.where(np.isfinite(be), be, np.inf)
        need = trials_needed(ratio, be_tol)
        se = sigma / math.sqrt(N)
        z = excess / se
        rounding = (np.sqrt(s2) <= tol) & (~use_th | ~(np.sqrt(var_th) > tol))
        testable = (be <= be_tol) & ~rounding & (se > 0)
        p_norm = 2.0 * ndtr(-z)
        p_cheb = np.minimum(1.0, 1.0 / z**2)
        p_mean = np.where(testable, p_norm, np.where(use_th & ~rounding, p_cheb, np.nan))
        # variance above theory (one-sided), known fourth moment, gated on Var((X-mu)^2)
        be_v = berry_esseen_bound(np.sqrt(np.maximum(ky, 1.0)), N)
        var_testable = use_th & ~rounding & np.isfinite(be_v) & (be_v <= be_tol) & (var_y_th > 0)
        z_v = (s2 - var_th) / np.sqrt(var_y_th / N)
        p_var = np.where(var_testable, ndtr(-z_v), np.nan)
        rej = _holm(np.concatenate([p_mean.ravel(), p_var.ravel()]), alpha)
        rej_mean = rej[:P].reshape(t.shape)
        rej_var = rej[P:].reshape(t.shape)
        # MSE and its simultaneous interval
        mse = (mo.m2 + N * (mean - t) ** 2) / N
        if theory is not None:
            mse_th = var_th + (mu - t) ** 2
            var_y = var_y_th if use_th else mo.m4 / N - (mo.m2 / N) ** 2
        else:
            mse_th = nan
            var_y = mo.m4 / N - (mo.m2 / N) ** 2
        mse_h = zc * np.sqrt(np.maximum(var_y, 0.0) / N)
        det = (zc + zpow) * se / np.abs(t)
        ci_se = np.where(rounding, 0.0, se)
    pairs = []
    for a in range(nx):
        for b in range(ny):
            k = (a, b)
            if rounding[k]:
                test = "rounding"
                if dev[k] <= tol[k]:
                    verdict, reason = (
                        "exact",
                        (
                            f"zero variance; |mean - target| = {dev[k]:.3g} "
                            f"<= rounding tolerance {tol[k]:.3g}"
                        ),
                    )
                else:
                    verdict, reason = (
                        "fail",
                        (
                            f"zero variance and |mean - target| = {dev[k]:.3g}"
                            f" > rounding tolerance {tol[k]:.3g}"
                        ),
                    )
            else:
                test = (
                    ("z" if use_th else "t") if testable[k] else ("chebyshev" if use_th else "none")
                )
                if rej_mean[k]:
                    verdict = "fail"
                    reason = (
                        f"bias {mean[k] - t[k]:.3g} ({100 * (mean[k] - t[k]) / t[k]:.3g}% of "
                        f"target), p = {p_mean[k]:.3g} rejected by Holm"
                    )
                elif rej_var[k]:
                    verdict = "fail"
                    reason = (
                        f"variance {s2[k]:.3g} above the closed-form {var_th[k]:.3g} "
                        f"(p = {p_var[k]:.3g}, rejected by Holm)"
                    )
                elif testable[k]:
                    verdict, reason = "pass", f"no bias detected (p = {p_mean[k]:.3g})"
                else:
                    verdict = "untestable"
                    reason = (
                        f"untestable at N = {N}: Berry-Esseen bound {be[k]:.3g} > "
                        f"{be_tol:g}; needs about {_fmt_trials(float(need[k]))} trials"
                    )
            pairs.append(
                PairResult(
                    i=a,
                    j=b,
                    target=float(t[k]),
                    mean=float(mean[k]),
                    std_error=float(se[k]),
                    ci_low=float(mean[k] - zc * ci_se[k]),
                    ci_high=float(mean[k] + zc * ci_se[k]),
                    z=float(z[k])
                    if np.isfinite(z[k])
                    else (0.0 if excess[k] == 0 else float("inf")),
                    p_value=float(p_mean[k]),
                    test=test,
                    verdict=verdict,
                    reason=reason,
                    berry_esseen=float(be[k]),
                    trials_needed=float(need[k]),
                    detectable_relative_bias=float(det[k]),
                    variance=float(s2[k]),
                    theory_variance=float(var_th[k]),
                    variance_ratio=float(s2[k] / var_th[k]) if var_th[k] > 0 else float("nan"),
                    variance_p=float(p_var[k]),
                    mse=float(mse[k]),
                    theory_mse=float(mse_th[k]),
                    mse_halfwidth=float(mse_h[k]),
                    rounding_tolerance=float(tol[k]),
                )
            )
    tests = int(np.isfinite(p_mean).sum() + np.isfinite(p_var).sum())
    return pairs, {"tests": tests}


def _sweep(sample, X, Y, t, ms, trials, root, shard_size, executor, progress, alpha, shards=None):
    points = []
    z95 = float(ndtri(0.975))
    for q, m in enumerate(ms):
        s = sample.with_num_features(m)
        fn = _trial_function(s, X, Y)
        child = child_seed(root, _SWEEP_PATH + q)  # past the shards and the probe
        mo = run_trials(
            fn,
            trials,
            seed=child,
            shard_size=shard_size,
            executor=executor,
            shards=shards,
            progress=progress,
            desc=f"sweep m={m}",
        )
        N = mo.count
        rel = (mo.m2 + N * (mo.mean - t) ** 2) / N / t**2
        var_rel = np.maximum(mo.m4 / N - (mo.m2 / N) ** 2, 0.0) / t**4
        mean_rel = float(rel.mean())
        h = z95 * math.sqrt(float(var_rel.sum()) / N) / rel.size
        th = float("nan")
        if callable(getattr(s, "theoretical_mse", None)):
            th = float(math.sqrt(float((s.theoretical_mse(X, Y) / t**2).mean())))
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


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


def render_plots(report: UnbiasedReport) -> dict[str, bytes]:
    """PNG plots of a report, by file name (nothing is written).

    Raises :class:`~kernelcheck._src.core.report.PlotsUnavailable` without matplotlib.
    """
    out = {}
    if report.sweep:
        fig = new_figure((5, 4))
        ax = fig.add_subplot()
        m = np.array([s.num_features for s in report.sweep], dtype=float)
        r = np.array([s.relative_rmse for s in report.sweep])
        lo = np.array([s.rmse_low for s in report.sweep])
        hi = np.array([s.rmse_high for s in report.sweep])
        ax.errorbar(m, r, yerr=[r - lo, hi - r], fmt="o-", label="measured", capsize=3)
        th = np.array([s.theory_relative_rmse for s in report.sweep])
        if np.isfinite(th).all():
            ax.plot(m, th, "s--", label="closed form")
        ax.plot(m, r[0] * np.sqrt(m[0] / m), ":", color="gray", label="1/sqrt(m) reference")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of features m")
        ax.set_ylabel("relative RMSE")
        ax.set_title("Error against number of features")
        ax.legend()
        out["error_vs_m.png"] = png_bytes(fig)
    th = np.array([p.theory_mse for p in report.pairs])
    mse = np.array([p.mse for p in report.pairs])
    h = np.array([p.mse_halfwidth for p in report.pairs])
    ok = np.isfinite(th) & (th > 0) & (mse > 0)
    if ok.any():
        fig = new_figure((5, 4))
        ax = fig.add_subplot()
        lo = np.minimum(h[ok], mse[ok] * 0.999)
        ax.errorbar(th[ok], mse[ok], yerr=[lo, h[ok]], fmt="o", capsize=2, label="pairs")
        lim = [min(th[ok].min(), mse[ok].min()), max(th[ok].max(), mse[ok].max())]
        ax.plot(lim, lim, "k--", label="empirical = theoretical")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("theoretical MSE" + (" (i.i.d. bound)" if report.theory == "bound" else ""))
        ax.set_ylabel("empirical MSE")
        ax.set_title("Empirical against theoretical MSE")
        ax.legend()
        out["mse.png"] = png_bytes(fig)
    fig = new_figure((5, 4))
    ax = fig.add_subplot()
    tv = np.array([p.target for p in report.pairs])
    rel = np.array([(p.mean - p.target) / p.target for p in report.pairs])
    err = np.array([(p.ci_high - p.mean) / abs(p.target) for p in report.pairs])
    colors = {
        "pass": "tab:blue",
        "exact": "tab:green",
        "fail": "tab:red",
        "untestable": "tab:orange",
    }
    for v, col in colors.items():
        sel = np.array([p.verdict == v for p in report.pairs])
        if sel.any():
            ax.errorbar(tv[sel], rel[sel], yerr=err[sel], fmt="o", color=col, capsize=2, label=v)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xlabel("target kernel value")
    ax.set_ylabel("relative bias (simultaneous CI)")
    ax.set_title("Relative bias per pair")
    ax.legend()
    out["bias.png"] = png_bytes(fig)
    return out


def write_report(report: UnbiasedReport, out_dir, *, plots: bool = True) -> list[Path]:
    """Write ``report.json``, ``report.md`` and the plots into ``out_dir``.

    Everything is rendered in memory first and the set is written by
    :func:`kernelcheck._src.core.report.write_bundle` (all new files or none;
    SIGINT and SIGTERM held while they are moved into place, then raised as
    ``InterruptedAfterWrite``).  Without matplotlib (or with ``plots=False``)
    there are no plots, and ``report.md`` says why.  Returns the written paths.
    """
    if not isinstance(report, UnbiasedReport):
        raise InvalidArgument(f"`report` must be an UnbiasedReport, got {describe(report)}")
    as_output_folder(out_dir, "out_dir")
    pngs, note = bundle.render_plots(lambda: render_plots(report)) if plots else ({}, None)
    markdown = report.to_markdown()
    if note:
        markdown += f"\n{note}\n"
    files: dict[str, bytes | str] = dict(pngs)
    files["report.json"] = report.to_json(indent=2) + "\n"
    files["report.md"] = markdown
    return bundle.write_bundle(out_dir, files, name="out_dir")


def default_points(n: int, dim: int, *, seed: Any, max_norm: float = 0.5) -> np.ndarray:
    """``n`` points in R^dim with uniform directions and norms spread over (0, max_norm].

    Norm of row i: ``max_norm (i + 1) / n``.  Used by :func:`run_unbiased_cli`.

    Examples
    --------
    >>> P = default_points(4, 3, seed=0)
    >>> np.round(np.linalg.norm(P, axis=1), 12).tolist()
    [0.125, 0.25, 0.375, 0.5]
    """
    from kernelcheck._src.core.validate import as_rng

    n = as_int(n, "n", minimum=1)
    dim = as_int(dim, "dim", minimum=1)
    max_norm = as_real(max_norm, "max_norm", positive=True)
    G = as_rng(seed).standard_normal((n, dim))
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    return G * (max_norm * np.arange(1, n + 1) / n)[:, None]


def run_unbiased_cli(
    *,
    estimator: str = "positive",
    dim: int = 4,
    num_features: int = 16,
    orthogonal: bool = False,
    scale: float = 1.0,
    points: int = 4,
    max_norm: float = 0.5,
    trials: int = 20000,
    seed: int = 0,
    alpha: float = 0.01,
    out=None,
    executor=None,
    sweep=(4, 8, 16, 32, 64),
    plots: bool = True,
    progress: bool | None = None,
    shards: int | None = None,
) -> UnbiasedReport:
    """The ``kernelcheck unbiased`` command as a function with defaults.

    Builds the sampler ``ESTIMATORS[estimator].sampler(dim, num_features,
    orthogonal=..., scale=...)``, two point sets ``X`` and ``Y`` from
    :func:`default_points` (seeds ``seed`` and ``seed + 1``), runs
    :func:`unbiased` against ``Exponential(scale)`` and, if ``out`` is given,
    writes the report with :func:`write_report`.  ``executor`` and ``shards``
    are passed to :func:`unbiased` (they never change the report).

    Examples
    --------
    >>> rep = run_unbiased_cli(trials=2000, sweep=None, points=2)
    >>> rep.verdict in ("pass", "inconclusive")
    True
    """
    from kernelcheck._src.features.random import ESTIMATORS
    from kernelcheck._src.kernels.algebra import Exponential

    check_choice(estimator, "estimator", tuple(ESTIMATORS))
    sampler = ESTIMATORS[estimator].sampler(dim, num_features, orthogonal=orthogonal, scale=scale)
    seed = as_int(seed, "seed", minimum=0)
    X = default_points(points, dim, seed=seed, max_norm=max_norm)
    Y = default_points(points, dim, seed=seed + 1, max_norm=max_norm)
    report = unbiased(
        sampler,
        Exponential(scale),
        X,
        Y,
        trials=trials,
        seed=seed,
        alpha=alpha,
        executor=executor,
        sweep=sweep,
        progress=progress,
        shards=shards,
    )
    if out is not None:
        write_report(report, out, plots=plots)
    return report


def assert_unbiased(sample, target, X, Y=None, **kwargs) -> UnbiasedReport:
    """pytest twin of :func:`unbiased`: raise ``AssertionError`` unless the report passes.

    The message is the one-line verdict followed by the failing or untestable pairs.
    """
    report = unbiased(sample, target, X, Y, **kwargs)
    if not report.passed:
        bad = report.failures() + report.untestable()
        lines = [str(report)] + [str(p) for p in bad[:20]]
        if len(bad) > 20:
            lines.append(f"... and {len(bad) - 20} more pairs")
        raise AssertionError("\n".join(lines))
    return report


# ---------------------------------------------------------------------------
# C16: the ratio of unbiased estimates is biased
# ---------------------------------------------------------------------------


class _AttentionTrials:
    """Random-feature attention outputs of many trials (batched).

    Returns (n, nq * dv + 1): the flattened outputs and, last, their
    projection on the fixed unit vector ``direction``.
    """

    def __init__(self, sampler, Q, K, V, direction):
        self.sampler, self.Q, self.K, self.V = sampler, Q, K, V
        self.direction = direction

    def __call__(self, rng, n):
        proto = self.sampler._proto
        Qs = proto._prepare(self.Q, "Q")
        Ks = proto._prepare(self.K, "K")
        outs = []
        for c, ((FQ, _lq), (FK, lk)) in self.sampler.batch_features(rng, n, [Qs, Ks]):
            # per-query factors cancel; key factors only up to their common maximum
            wk = np.exp(lk - lk.max(axis=-1, keepdims=True))
            FKw = FK * wk[..., None]
            V = np.broadcast_to(self.V, (c,) + self.V.shape)
            flat = parallel(FQ, FKw, V).reshape(c, -1)  # (c, nq * dv), trials batched
            outs.append(np.concatenate([flat, (flat @ self.direction)[:, None]], axis=1))
        return np.concatenate(outs)


@dataclass(frozen=True)
class RatioBiasResult(ResultMixin):
    """Report of :func:`ratio_bias` (claim C16).

    Attributes
    ----------
    passed : bool
        The claim holds: ``beta`` (the 1/m coefficient) is nonzero at level
        ``alpha`` and the model ``beta/m + gamma/m^2`` fits (goodness-of-fit
        p-value above ``alpha``).
    num_features : tuple of int
        The m values.
    bias_norm, bias_norm_se : tuple of float
        ``sqrt(max(|mean - A|^2 - sum var / N, 0))`` per m (the noise-corrected
        Frobenius norm of the output's bias) and its delta-method standard error.
    projected_bias, projected_se : tuple of float
        ``<mean - A, u>`` per m and its standard error (u: unit bias direction
        from an independent pilot run at a quarter of the smallest m).
    beta, beta_se, gamma, gamma_se : float
        Weighted least-squares fit ``<b(m), u> = beta / m + gamma / m^2``
        (``+ delta / m^3`` with five or more values of m).
    gof_p : float
        Chi-square goodness-of-fit p-value of that fit (``len(m) - terms`` dof).
    slope : float
        Log-log slope of ``|<b(m), u>|`` between the two largest m (tends to -1).
    relative_variance : float
        Largest relative variance ``Var / k^2`` of a one-feature kernel
        estimate over the (q, k) pairs (closed form, NaN if unknown): the
        1/m law is asymptotic and shows once m is well above this number.
    trials, alpha : number
        Settings.
    sampler : str
        The sampler (its m replaced by each entry of ``num_features``).
    """

    passed: bool
    num_features: tuple
    bias_norm: tuple
    bias_norm_se: tuple
    projected_bias: tuple
    projected_se: tuple
    beta: float
    beta_se: float
    gamma: float
    gamma_se: float
    gof_p: float
    slope: float
    relative_variance: float
    trials: int
    alpha: float
    sampler: str

    @property
    def outcome(self) -> Outcome:
        """Verified when the 1/m bias is found and its model fits, else refuted."""
        return outcome_of(self.passed)

    def __str__(self) -> str:
        return (
            f"ratio bias (C16): {'PASS' if self.passed else 'FAIL'} -- attention output "
            f"bias |b| = {self.bias_norm[0]:.3g} at m = {self.num_features[0]}; "
            f"b(m) = beta/m + gamma/m^2 with beta = {self.beta:.3g} +- {self.beta_se:.2g} "
            f"(z = {self.beta / self.beta_se:.3g}), fit p = {self.gof_p:.3g}; "
            f"log-log slope at the largest m {self.slope:.3f} (tends to -1)"
        )


def ratio_bias(
    sampler,
    Q,
    K,
    V,
    *,
    num_features=(8, 16, 32, 64, 128),
    trials: int = 20000,
    seed: Any,
    alpha: float = 0.01,
    executor=None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    progress: bool | None = None,
    shards: int | None = None,
) -> RatioBiasResult:
    """Show that random-feature attention is biased, with bias ~ 1/m (claim C16).

    The output ``a_i = phi(q_i)^T S / phi(q_i)^T z`` (``S = sum_j phi(k_j) v_j^T``,
    ``z = sum_j phi(k_j)``) is a ratio of two unbiased estimates; expanding
    ``1 / D`` around ``E D`` gives
    ``E[N/D] - E N / E D = (E N Var D / E D - Cov(N, D)) / (E D)^2 + O(m^-2)``,
    and for means of m i.i.d. terms every central moment of order k is
    ``O(m^-ceil(k/2))``: the bias is ``beta / m + gamma / m^2 + O(m^-3)``.

    A pilot run (its own seed, twice the trials, at a quarter of the
    smallest m) gives the unit bias direction u; for each m the engine
    estimates ``E[a]`` and ``E<a, u>`` over ``trials`` trials, so
    ``<b(m), u>`` is an unbiased, nearly normal estimate.  A weighted
    least-squares fit of ``beta / m + gamma / m^2`` (plus ``delta / m^3``
    with five or more values of m) decides the claim: ``beta != 0``
    (two-sided z test at ``alpha``) and the fit's chi-square goodness of fit
    (p > ``alpha``).

    The expansion is asymptotic: its coefficients grow with the relative
    variance of one feature, ``exp(|q' + k'|^2) - 1`` for positive features,
    so the 1/m law shows once m is well above it (``relative_variance`` in
    the result); for larger norms the fit sees the pre-asymptotic regime and
    fails.  The positive maps are the ones this applies to: with
    trigonometric features the denominator takes both signs and the ratio
    has no finite mean.

    Parameters
    ----------
    sampler : RandomFeatureSampler
        E.g. ``PositiveRandomFeatures.sampler(d, m)`` (its m is replaced by
        each entry of ``num_features``).
    Q, K : array_like, shape (nq, d), (nk, d)
    V : array_like, shape (nk, dv)
    num_features : sequence of int
        At least three values of m.
    trials, seed, alpha, executor, shard_size, progress, shards
        As in :func:`unbiased`.

    Returns
    -------
    RatioBiasResult

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.features import PositiveRandomFeatures
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 2)), rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    >>> r = ratio_bias(PositiveRandomFeatures.sampler(2, 4), Q, K, V, num_features=(4, 8, 16),
    ...                trials=20000, seed=1)
    >>> r.beta / r.beta_se > 3
    True
    """
    from scipy.stats import chi2

    if not (
        callable(getattr(sampler, "with_num_features", None))
        and callable(getattr(sampler, "batch_features", None))
    ):
        raise InvalidArgument(
            "`sampler` must be a RandomFeatureSampler (e.g. PositiveRandomFeatures.sampler(d, m)),"
            f" got {describe(sampler)}"
        )
    Q = as_points(Q, "Q", dim=sampler.dim).astype(np.float64)
    K = as_points(K, "K", dim=sampler.dim).astype(np.float64)
    V = as_points(V, "V").astype(np.float64)
    if V.shape[0] != K.shape[0]:
        raise InvalidArgument(
            f"`V` must have one row per row of `K` ({K.shape[0]}), got {describe(V)}"
        )
    if isinstance(num_features, (str, bytes)) or not hasattr(num_features, "__iter__"):
        raise InvalidArgument(
            f"`num_features` must be a sequence of at least three m, got {describe(num_features)}"
        )
    ms = tuple(as_int(m, "num_features", minimum=1) for m in num_features)
    if len(ms) < 3 or len(set(ms)) != len(ms):
        raise InvalidArgument(f"`num_features` must list at least three distinct m, got {ms}")
    trials = as_int(trials, "trials", minimum=2)
    alpha = as_probability(alpha, "alpha")
    root = root_seed_sequence(seed)
    A = kernelized(Q, K, V, sampler.kernel).ravel()  # exact attention with the target kernel
    P = A.size

    def run(m, q, u, n=trials):
        fn = _AttentionTrials(sampler.with_num_features(m), Q, K, V, u)
        return run_trials(
            fn,
            n,
            seed=shard_seed(root, q),
            shard_size=shard_size,
            executor=executor,
            shards=shards,
            progress=progress,
            desc=f"attention m={m}",
        )

    # the pilot runs at m / 4, where the bias (~1/m) stands out of the noise
    # (~1/sqrt(m)) twice as well, with twice the trials
    pilot = run(max(1, min(ms) // 4), len(ms), np.zeros(P), 2 * trials)
    b0 = pilot.mean[:P] - A
    nb0 = float(np.linalg.norm(b0))
    u = b0 / nb0 if nb0 > 0 else np.full(P, 1.0 / math.sqrt(P))
    norms, norm_se, proj, proj_se = [], [], [], []
    for q, m in enumerate(ms):
        mo = run(m, q, u)
        b = mo.mean[:P] - A
        var = mo.variance()[:P] / mo.count
        B = float((b * b).sum() - var.sum())
        se_B = math.sqrt(float(4.0 * (b * b * var).sum() + 2.0 * (var * var).sum()))
        root_B = math.sqrt(max(B, 0.0))
        norms.append(root_B)
        norm_se.append(se_B / (2.0 * root_B) if root_B > 0 else float("inf"))
        proj.append(float(mo.mean[P] - A @ u))
        proj_se.append(float(mo.std_error()[P]))
    if not all(se > 0 and math.isfinite(se) for se in proj_se):
        raise InvalidArgument(
            "the attention outputs do not vary between trials (one key, or `V` constant "
            "over the keys): the ratio is then exact, so there is no bias to fit (C16)"
        )
    m_arr = np.array(ms, dtype=float)
    y = np.array(proj)
    w = 1.0 / np.array(proj_se) ** 2
    powers = (1, 2, 3) if len(ms) >= 5 else (1, 2)
    Xd = np.stack([m_arr ** -float(k) for k in powers], axis=1)
    XtW = Xd.T * w
    cov = np.linalg.inv(XtW @ Xd)
    coef = cov @ (XtW @ y)
    resid = y - Xd @ coef
    chi = float((w * resid**2).sum())
    gof_p = float(chi2.sf(chi, len(ms) - len(powers)))
    beta, gamma_ = float(coef[0]), float(coef[1])
    beta_se, gamma_se = float(math.sqrt(cov[0, 0])), float(math.sqrt(cov[1, 1]))
    order = np.argsort(m_arr)
    i1, i2 = order[-2], order[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = float(np.log(abs(y[i2]) / abs(y[i1])) / np.log(m_arr[i2] / m_arr[i1]))
    zc = float(ndtri(1.0 - alpha / 2.0))
    passed = bool(abs(beta) > zc * beta_se and gof_p > alpha)
    rel_var = float("nan")
    if callable(getattr(sampler, "theory", None)):
        one = sampler.with_num_features(1).theory(Q, K, order=2)["central"][2]
        rel_var = float(np.max(one))
    return RatioBiasResult(
        passed=passed,
        num_features=ms,
        bias_norm=tuple(norms),
        bias_norm_se=tuple(norm_se),
        projected_bias=tuple(proj),
        projected_se=tuple(proj_se),
        beta=beta,
        beta_se=beta_se,
        gamma=gamma_,
        gamma_se=gamma_se,
        gof_p=gof_p,
        slope=slope,
        relative_variance=rel_var,
        trials=trials,
        alpha=alpha,
        sampler=_name(sampler),
    )
