"""The results of :func:`kernelcheck.verify.unbiased`: per pair, per sweep point, the report.

What a report says beside its verdict: the smallest relative bias it could
detect (the median pair, and the worst one), how many trials a smaller bias
needs (:meth:`UnbiasedReport.trials_to_detect`), and, when it cannot pass,
what to do: an inconclusive report says how many trials would make every
pair testable (from the closed-form kurtosis, or "unknown" without one), a
failing report says that a correct estimator fails at rate ``alpha`` and how
many trials a confirming run with another seed needs (:meth:`UnbiasedReport.advice`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.core.results import Result, ResultMixin
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.core.validate import as_real

__all__ = ["PairResult", "SweepPoint", "UnbiasedReport", "format_trials"]

#: Relative bias of the example in every passing report: an ``eps = 1e-4``
#: added to unit-scale features (as in some Performer implementations) shifts
#: the kernel estimate by about ``2e-4`` relative to a kernel value near 1.
EXAMPLE_SMALL_BIAS = 2e-4


def format_trials(n: float) -> str:
    """A number of trials for a sentence: ``"1691"``, ``"1.41e+05"``, ``"unknown"``."""
    if math.isnan(n):
        return "unknown"
    if not math.isfinite(n):
        return "more than 1e15 (moments beyond float range)"
    return f"{n:.3g}" if n >= 1e6 else f"{int(n)}"


def _g(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.4g}"


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.3g}%"


@dataclass(frozen=True, repr=False)
class PairResult(Result):
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
        Trials for ``berry_esseen <= be_tolerance``, from the closed-form
        kurtosis; NaN ("unknown") without a closed form: the sample kurtosis
        of a heavy-tailed estimator is far too small, so it is never extrapolated.
    trials_to_confirm : float
        For a failing pair: the trials after which a run with another seed
        detects the measured excess (bias beyond rounding, or variance above
        theory) with probability ``power``; NaN otherwise.
    detectable_bias, detectable_relative_bias : float
        Smallest ``|bias|`` and ``|bias| / |target|`` detected with the report's power.
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
    trials_to_confirm: float
    detectable_bias: float
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

    @property
    def passed(self) -> bool:
        """``verdict`` is ``"pass"`` or ``"exact"``."""
        return self.verdict in ("pass", "exact")

    @property
    def outcome(self) -> Outcome:
        """``pass`` and ``exact`` verified, ``fail`` refuted, ``untestable`` inconclusive."""
        if self.verdict == "untestable":
            return Outcome.INCONCLUSIVE
        return Outcome.VERIFIED if self.passed else Outcome.REFUTED

    def _text(self) -> str:
        return (
            f"pair ({self.i}, {self.j}): mean {self.mean:.6g} vs target {self.target:.6g} "
            f"(z = {self.z:.3g}, {self.test} test); {self.reason}"
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


@dataclass(frozen=True, repr=False)
class UnbiasedReport(Result):
    """Report of :func:`~kernelcheck.verify.unbiased` (claims C13, C17, C18).

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
        The median over the testable pairs (z and t tests) of the smallest
        relative bias the run detects with probability ``power``: half of the
        pairs detect a smaller one (NaN if no pair is testable).  The median,
        not the largest, so that one target near zero (where any absolute
        bias is a large relative one) does not make the figure meaningless.
    detectable_relative_bias_max : float
        The largest over the testable pairs (the hardest pair).
    detectable_bias : float
        The median over the testable pairs of the smallest absolute bias detected.
    trials_for_all : float
        Trials after which every pair would be testable (``trials`` when all
        are); NaN ("unknown") when an untestable pair has no closed-form kurtosis.
    trials_to_confirm : float
        For a failing report: the trials a run with another seed needs to
        detect the most visible failure with probability ``power`` (NaN if
        none is computable, e.g. a zero-variance pair: more trials change nothing).
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
    detectable_relative_bias_max: float
    detectable_bias: float
    trials_for_all: float
    trials_to_confirm: float
    pairs: tuple
    sweep: tuple = ()
    tolerance: Tolerance | None = None
    notes: tuple = ()

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

    def trials_to_detect(self, relative_bias: float) -> float:
        """Trials after which a relative bias ``relative_bias`` is detected at the median pair.

        The detectable bias shrinks like ``1 / sqrt(N)``, so a bias ``r`` needs
        ``ceil(N (delta / r)^2)`` trials, ``delta`` = :attr:`detectable_relative_bias`
        (same ``alpha`` and ``power``).  NaN when no pair is testable.

        Parameters
        ----------
        relative_bias : float
            The relative bias r to detect, ``> 0``.

        Examples
        --------
        >>> import numpy as np
        >>> from kernelcheck.kernels import Exponential
        >>> from kernelcheck.features import PositiveRandomFeatures
        >>> from kernelcheck.verify import unbiased
        >>> rep = unbiased(PositiveRandomFeatures.sampler(2, 16), Exponential(),
        ...                np.array([[0.2, 0.1], [-0.1, 0.3]]), trials=4000, seed=0)
        >>> rep.trials_to_detect(rep.detectable_relative_bias / 10) / rep.trials
        100.0
        """
        r = as_real(relative_bias, "relative_bias", positive=True)
        if not math.isfinite(self.detectable_relative_bias):
            return float("nan")
        return float(math.ceil(self.trials * (self.detectable_relative_bias / r) ** 2))

    def advice(self) -> str:
        """What to do next, in one sentence (empty for a pass).

        Inconclusive: the trials after which every pair is testable, or
        "unknown" without closed-form moments.  Fail: a correct estimator
        fails at rate ``alpha`` (one seed in ``1 / alpha``), so confirm with
        another seed and the trials that detect the measured excess with
        probability ``power``.
        """
        if self.verdict == "inconclusive":
            n = len(self.untestable())
            if math.isnan(self.trials_for_all):
                return (
                    f"{n} pair(s) untestable at N = {self.trials}; how many trials would "
                    "decide is unknown without closed-form moments (a heavy tail hides "
                    "from the sample kurtosis): confirm with more trials (e.g. 10x) or "
                    "another seed"
                )
            return (
                f"{n} pair(s) untestable at N = {self.trials}: every pair is testable after "
                f"about {format_trials(self.trials_for_all)} trials (closed-form kurtosis); "
                "confirm with more trials or another seed"
            )
        if self.verdict == "fail":
            text = (
                f"a correct estimator fails at most {self.alpha:g} of seeds: confirm with "
                "another seed"
            )
            if math.isfinite(self.trials_to_confirm):
                text += (
                    f" and about {format_trials(self.trials_to_confirm)} trials (enough to "
                    f"detect the measured deviation with probability {self.power:g}; a "
                    "smaller true one needs more)"
                )
            else:
                text += " (zero-variance pairs: more trials do not change their verdict)"
            return text
        return ""

    def _detectable_text(self) -> str:
        if not math.isfinite(self.detectable_relative_bias):
            return "detectable relative bias n/a (no testable pair)"
        text = (
            f"detectable relative bias {_pct(self.detectable_relative_bias)} (median pair; "
            f"hardest pair {_pct(self.detectable_relative_bias_max)}) at power {self.power:g}"
        )
        k = self.trials_to_detect(EXAMPLE_SMALL_BIAS)
        return text + (
            f"; a bias r times smaller needs r^2 times the trials "
            f"({_pct(EXAMPLE_SMALL_BIAS)}: about {format_trials(k)})"
        )

    def _text(self) -> str:
        c = self.counts
        return (
            f"{len(self.pairs)} pairs ({c.get('pass', 0)} pass, {c.get('exact', 0)} exact, "
            f"{c.get('fail', 0)} fail, {c.get('untestable', 0)} untestable) after "
            f"{self.trials} trials of {self.sampler} vs {self.target}; family-wise false-alarm "
            f"rate {self.alpha:g} (Holm); {self._detectable_text()}"
        )

    def first_failure(self) -> str:
        """The first failing pair in words ("" when none fails).

        Returns
        -------
        str
        """
        failed = self.failures()
        return f"the estimate is biased at {failed[0]._text()}" if failed else ""

    def details(self) -> str:
        """The failing and untestable pairs, one per line (at most 20)."""
        bad = self.failures() + self.untestable()
        lines = [str(p) for p in bad[:20]]
        if len(bad) > 20:
            lines.append(f"... and {len(bad) - 20} more pairs")
        return "\n".join(lines)

    def table(self) -> dict[str, np.ndarray]:
        """Columns of the per-pair table as arrays."""
        names = [f for f in PairResult.__dataclass_fields__]
        return {n: np.array([getattr(p, n) for p in self.pairs]) for n in names}

    def to_markdown(self) -> str:
        """The report as Markdown: summary, what to do, notes, per-pair table, sweep."""
        lines = [
            "# Unbiasedness report",
            "",
            f"**Outcome: {self.outcome}**",
            "",
            f"- sampler: `{self.sampler}`",
            f"- target kernel: `{self.target}`",
            f"- trials: {self.trials} (seed {self.seed}, shards of {self.shard_size})",
            f"- family-wise false-alarm rate: {self.alpha:g} (Holm over all tests)",
            f"- theory: {self.theory}",
            "- pairs: " + ", ".join(f"{k} {v}" for k, v in self.counts.items()),
            f"- {self._detectable_text()}",
        ]
        if self.advice():
            lines.append(f"- **what to do**: {self.advice()}")
        if self.tolerance is not None:
            lines.append(f"- rounding tolerance: {self.tolerance}")
        lines += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        lines += [
            "",
            "## Pairs",
            "",
            "| i | j | target | mean | CI | z | test | verdict | BE bound | "
            "detectable | var / theory | MSE | theory MSE |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in self.pairs:
            verdict = p.verdict
            if p.verdict == "untestable":
                verdict += f" (needs {format_trials(p.trials_needed)} trials)"
            elif p.verdict == "fail" and math.isfinite(p.trials_to_confirm):
                verdict += f" (confirm: {format_trials(p.trials_to_confirm)} trials)"
            lines.append(
                f"| {p.i} | {p.j} | {p.target:.6g} | {p.mean:.6g} | "
                f"[{p.ci_low:.6g}, {p.ci_high:.6g}] | {p.z:.3g} | {p.test} | {verdict} | "
                f"{p.berry_esseen:.3g} | {_pct(p.detectable_relative_bias)} | "
                f"{_g(p.variance_ratio)} | {p.mse:.3g} | {_g(p.theory_mse)} |"
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
