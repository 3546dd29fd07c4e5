"""The C2/C3 experiment: how softmax and linear attention scale with n (claims C2, C3, C11).

:func:`run_scaling` measures the attention forms of :data:`SCALING_FORMS`
(each one of the attention registry's forms) over a grid of sequence lengths
with :func:`~kernelcheck._src.scaling.measure.measure`, fits the exponent of
time with :func:`~kernelcheck._src.scaling.fit.fit_exponent`, puts the clock
next to each form's cost model and, with ``out``, writes the report through
:func:`~kernelcheck._src.core.report.write_bundle`.  The run limits the BLAS
threads and notes the machine's load before and after.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kernelcheck._src.attention.registry import cost_model, get_form
from kernelcheck._src.core.outcome import Outcome, exit_code
from kernelcheck._src.core.report import environment, render_plots, write_bundle
from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_probability,
    as_rng,
    call_user,
    check_callable,
    check_choice,
    check_size,
    describe,
)
from kernelcheck._src.scaling.fit import STATISTICS, ExponentFit, verdict_outcome
from kernelcheck._src.scaling.measure import CLOCKS, Measurement, measure, plot_measurements
from kernelcheck._src.scaling.plot import render
from kernelcheck._src.scaling.sizes import as_sizes, geometric_sizes
from kernelcheck.errors import InvalidArgument

__all__ = [
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "EXPECTED_EXPONENTS",
    "SCALING_FORMS",
    "DEFAULT_FORMS",
    "FormScaling",
    "ScalingReport",
    "run_scaling",
]

#: n = 1024 .. 16384, nine sizes a factor sqrt(2) apart (the range of claims C2/C3).
#: Nine sizes give 36 pairwise slopes, so one size off the power law (data that
#: fits in cache at the smallest n) moves neither the Theil-Sen slope nor Sen's
#: interval much; with five sizes the interval spans nearly every pairwise slope.
DEFAULT_SIZES = geometric_sizes(1024, 16384, num=9)
#: A short run for a smoke check (the exponents are less reliable this small).
QUICK_SIZES = geometric_sizes(512, 4096, num=7)
#: Ranges an exponent of time must lie in (claims C2 and C3).
EXPECTED_EXPONENTS = {"quadratic": (1.8, 2.2), "linear": (0.85, 1.15)}


@dataclass(frozen=True, eq=False)
class FormScaling(ResultMixin):
    """One attention form's measurement, fits and verdict inside a :class:`ScalingReport`.

    Attributes
    ----------
    name : str
        Display name, e.g. ``"softmax, causal"``.
    form : str
        The attention form (``"softmax"``, ``"parallel"``, ``"chunked"``, ...).
    causal : bool
        Whether the form is causal.
    claim : str
        ``"C2"`` (quadratic) or ``"C3"`` (linear).
    measurement : Measurement
        Times, memory and model flops per size.
    time_fit : ExponentFit
        Exponent of time, judged against ``expected``.
    memory_fit : ExponentFit or None
        Exponent of peak memory (not judged).
    model_exponent : float or None
        Exponent of the cost model's flops over the same sizes.
    state_size : tuple of int or None
        The cost model's state size at each size (claim C11 for the
        recurrent and chunked forms).
    verdict : str
        The time fit's verdict.
    passed : bool
    """

    name: str
    form: str
    causal: bool
    claim: str
    measurement: Measurement
    time_fit: ExponentFit
    memory_fit: ExponentFit | None
    model_exponent: float | None
    state_size: tuple[int, ...] | None
    verdict: str
    passed: bool

    @property
    def outcome(self) -> Outcome:
        """The time fit's verdict as an outcome (see :attr:`ExponentFit.outcome`)."""
        return verdict_outcome(self.verdict)

    def __str__(self) -> str:
        return f"{self.name} ({self.claim}): time {self.time_fit}"


@dataclass(frozen=True, eq=False)
class ScalingReport(ResultMixin):
    """Measured exponents of softmax and linear attention (claims C2, C3, C11).

    Attributes
    ----------
    forms : tuple of FormScaling
    sizes : tuple of int
    d, D, d_v, chunk_size : int
        Head dimension, feature dimension, value dimension, chunk size.
    feature_map : str
        The feature map of the linear forms.
    repeats : int
    statistic : str
    confidence : float
    quick : bool
    environment : dict
        Python, NumPy, machine and CPU count of the run.
    seconds : float
        Wall time of the whole run.
    plot_path : str or None
        Where the plot was written, if anywhere.
    passed : bool
        Every form's verdict is ``"pass"``.
    """

    forms: tuple[FormScaling, ...]
    sizes: tuple[int, ...]
    d: int
    D: int
    d_v: int
    chunk_size: int
    feature_map: str
    repeats: int
    statistic: str
    confidence: float
    quick: bool
    environment: dict
    seconds: float
    plot_path: str | None
    passed: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def outcome(self) -> Outcome:
        """Refuted when a form's fit fails, verified when all pass, else inconclusive."""
        return {0: Outcome.VERIFIED, 1: Outcome.REFUTED}.get(
            exit_code(self.forms, name="forms"), Outcome.INCONCLUSIVE
        )

    def __str__(self) -> str:
        head = "PASS" if self.passed else "NOT PASSED"
        parts = "; ".join(f"{f.name} p={f.time_fit.slope:.2f} {f.verdict}" for f in self.forms)
        return f"scaling {head}: {parts}"

    def summary_table(self) -> str:
        """The one-row-per-form Markdown table of exponents and verdicts."""
        conf = f"{self.confidence:.0%}"
        lines = [
            f"| form | claim | time exponent [{conf} CI] | expected | verdict "
            "| memory exponent | cost-model exponent | model GFLOP/s (min..max) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for f in self.forms:
            t = f.time_fit
            mem = "-" if f.memory_fit is None else f"{f.memory_fit.slope:.2f}"
            model = "-" if f.model_exponent is None else f"{f.model_exponent:.2f}"
            thr = f.measurement.throughput()
            gf = "-" if thr is None else f"{thr.min() / 1e9:.3g}..{thr.max() / 1e9:.3g}"
            exp_range = "-" if t.expected is None else f"[{t.expected[0]:g}, {t.expected[1]:g}]"
            lines.append(
                f"| {f.name} | {f.claim} | {t.slope:.3f} [{t.low:.3f}, {t.high:.3f}] | "
                f"{exp_range} | {t.verdict} | {mem} | {model} | {gf} |"
            )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """Summary table, settings, then one per-size table per form."""
        env = self.environment
        out = [
            "## Scaling: softmax against linear attention (C2, C3, C11)",
            "",
            f"n = {', '.join(str(n) for n in self.sizes)}; d = {self.d}, d_v = {self.d_v}, "
            f"D = {self.D} ({self.feature_map}), chunk size {self.chunk_size}; "
            f"{self.repeats} repeats, {self.statistic} per size; "
            f"{env.get('cpu_count')} CPUs, NumPy {env.get('numpy')}, Python {env.get('python')}; "
            f"run took {self.seconds:.1f} s.",
            "",
            self.summary_table(),
        ]
        for note in self.notes:
            out.append(f"- {note}")
        if self.notes:
            out.append("")
        for f in self.forms:
            out.append(f.measurement.to_markdown())
            if f.state_size is not None:
                sizes = ", ".join(str(s) for s in f.state_size)
                out.append(f"- state size per n (cost model): {sizes}\n")
        if self.plot_path:
            out.append(f"![scaling plot]({Path(self.plot_path).name})\n")
        return "\n".join(out)

    def plot(self, path) -> Path:
        """Write the log-log plot of every form (time, memory, model throughput)."""
        return plot_measurements([f.measurement for f in self.forms], path, title=_TITLE)


#: Title of the plot of a :class:`ScalingReport`.
_TITLE = "softmax against linear attention"


#: What :func:`run_scaling` measures: key -> (label, registered form, causal, claim).
_PRESETS = (
    ("softmax", "softmax, bidirectional", "softmax", False, "C2"),
    ("softmax-causal", "softmax, causal", "softmax", True, "C2"),
    ("parallel", "linear parallel, bidirectional", "parallel", False, "C3"),
    ("chunked", "linear chunked, causal", "chunked", True, "C3"),
    ("parallel-causal", "linear parallel (prefix sums), causal", "parallel", True, "C3"),
    ("recurrent", "linear recurrent, causal", "recurrent", True, "C3"),
    ("gated-chunked", "gated linear chunked, causal", "gated_chunked", True, "C20"),
)


def _scaling_forms() -> dict[str, tuple[str, str, bool, str, tuple[float, float]]]:
    # The expected exponent follows from the form: exact forms (queries and
    # keys) are quadratic in n, the ones on feature matrices linear.
    out = {}
    for key, label, name, causal, claim in _PRESETS:
        kind = "quadratic" if get_form(name).inputs == "queries" else "linear"
        out[key] = (label, name, causal, claim, EXPECTED_EXPONENTS[kind])
    return out


#: The forms :func:`run_scaling` can measure: key -> (label, form, causal, claim, expected),
#: each form one of :data:`kernelcheck.attention.FORMS`.
SCALING_FORMS = _scaling_forms()
#: The forms measured by default: softmax both ways, linear parallel and chunked, and
#: the gated chunked form (C20: linear in n as C3).
DEFAULT_FORMS = ("softmax", "softmax-causal", "parallel", "chunked", "gated-chunked")


class _ScalingArgs(NamedTuple):
    """The checked arguments of :func:`run_scaling` (``num_features`` is ``D``)."""

    sizes: tuple[int, ...]
    d: int
    D: int
    chunk_size: int
    repeats: int
    statistic: str
    confidence: float
    rng: np.random.Generator
    out: Path | None
    quick: bool
    forms: tuple[str, ...]
    threads: int | None
    clock: str


def _run_scaling_iv(
    sizes,
    d,
    num_features,
    chunk_size,
    repeats,
    statistic,
    confidence,
    seed,
    out,
    quick,
    forms,
    threads,
    clock,
    progress,
) -> _ScalingArgs:
    if threads is not None:
        threads = as_int(threads, "threads", minimum=1)
    if clock is None:
        clock = "cpu" if threads == 1 else "wall"
    check_choice(clock, "clock", CLOCKS)
    if isinstance(forms, str) or not hasattr(forms, "__iter__"):
        raise InvalidArgument(f"`forms` must be a sequence of form names, got {describe(forms)}")
    forms = tuple(forms)
    if not forms:
        raise InvalidArgument("`forms` must name at least one form")
    for f in forms:
        check_choice(f, "forms", tuple(SCALING_FORMS))
    if sizes is None:
        sizes = QUICK_SIZES if quick else DEFAULT_SIZES
    sizes = as_sizes(sizes, minimum_count=3)
    d = as_int(d, "d", minimum=1)
    num_features = as_int(num_features, "num_features", minimum=1)
    chunk_size = as_int(chunk_size, "chunk_size", minimum=1)
    if repeats is None:
        repeats = 3
    repeats = as_int(repeats, "repeats", minimum=1)
    check_choice(statistic, "statistic", STATISTICS)
    confidence = as_probability(confidence, "confidence")
    rng = as_rng(seed)
    quick = as_bool(quick, "quick")
    if progress is not None:
        check_callable(progress, "progress")
    # the inputs Q, K, V (3 n d) and the feature matrices (n D) of the largest size
    check_size(max(sizes) * max(3 * d, 2 * num_features), f"the inputs at n = {max(sizes)}")
    if out is not None:
        if not isinstance(out, (str, os.PathLike)):
            raise InvalidArgument(f"`out` must be a directory path, got {describe(out)}")
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise InvalidArgument(f"`out` must be a directory, but {str(out)!r} is a file")
    return _ScalingArgs(
        sizes=sizes,
        d=d,
        D=num_features,
        chunk_size=chunk_size,
        repeats=repeats,
        statistic=statistic,
        confidence=confidence,
        rng=rng,
        out=out,
        quick=quick,
        forms=forms,
        threads=threads,
        clock=clock,
    )


def run_scaling(
    *,
    sizes: Sequence[int] | None = None,
    d: int = 64,
    num_features: int = 2048,
    chunk_size: int = 64,
    repeats: int | None = None,
    statistic: str = "min",
    confidence: float = 0.95,
    seed=0,
    out=None,
    quick: bool = False,
    forms: Sequence[str] = DEFAULT_FORMS,
    threads: int | None = 1,
    clock: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ScalingReport:
    """Measure how softmax and linear attention scale with n (claims C2, C3, C11).

    Runs, over a doubling grid of sequence lengths n with head dimension d
    (d_v = d) and a fixed feature dimension D:

    * softmax attention, bidirectional and causal: expected time exponent in
      [1.8, 2.2] (C2, O(n^2 d));
    * linear attention in the bidirectional parallel form and the causal
      chunked form: expected exponent in [0.85, 1.15] (C3, O(n D d_v)).

    Every form's time is shown next to its cost model (``cost_model`` of
    :mod:`kernelcheck.attention`): model flops per size, and the achieved
    model GFLOP/s, which stays flat where the time follows the model.

    Parameters
    ----------
    sizes : sequence of int, optional
        Default :data:`DEFAULT_SIZES`, n = 1024 .. 16384 in nine steps of
        sqrt(2) (``quick``: :data:`QUICK_SIZES`, 512 .. 4096 in seven).
    d : int
        Head and value dimension (default 64).
    num_features : int
        Feature dimension D of the linear forms (positive random features of
        exp(q.k / sqrt d)).  Default 2048, so that the feature matrices
        (n x D float64, 16 MiB each at n = 1024) exceed the caches from the
        smallest n on: with D = 256 they fit in cache up to n ~ 2048, the
        matrix products run about 35% faster there, and the log-log line
        bends although the work per token is constant (docs/performance.md
        shows both runs).
    chunk_size : int
        Chunk length of the causal chunked form (default 64, the form's own
        default).
    repeats : int, optional
        Timed repeats per size (default 3), after two warm-up calls: the
        traced one and a plain one that sets the loop count.
    statistic : {"min", "median"}
        Per-size statistic of the repeats.  Default ``"min"``: interference
        from other processes only ever adds time, so the minimum estimates
        the undisturbed cost of a call.
    confidence : float
        Confidence level of the exponent intervals.
    seed : int, SeedSequence or Generator
        Seed of the inputs and of the random features.
    threads : int or None
        Threads the BLAS may use during the run (default 1), set with
        ``threadpoolctl`` when it is installed (it comes with scikit-learn);
        None leaves the BLAS default.  One thread keeps the measured slope a
        property of the algorithm: a multi-threaded BLAS adds a
        synchronisation cost per matrix product (large for the chunked
        form's many small products) that varies with the machine's load.
    clock : {"cpu", "wall"}, optional
        What is timed (see :func:`measure`).  Default: ``"cpu"`` (CPU time of
        the process, which waiting for a busy CPU does not inflate) when
        ``threads == 1``, else ``"wall"``.
    out : path, optional
        Directory to write ``scaling.png``, ``scaling.md`` and
        ``scaling.json`` into.
    quick : bool
        A shorter run (n = 512 .. 4096) for a smoke check; at these sizes
        the data of the smallest runs fits in the caches, so its exponents
        are less reliable.
    forms : sequence of str
        Keys of :data:`SCALING_FORMS` to measure (default
        :data:`DEFAULT_FORMS`: ``"softmax"``, ``"softmax-causal"``,
        ``"parallel"``, ``"chunked"``, ``"gated-chunked"``; also
        ``"parallel-causal"`` and ``"recurrent"``, the token-by-token
        reference loop).
    progress : callable, optional
        Called with a line of text as each form finishes.

    Returns
    -------
    ScalingReport

    Examples
    --------
    >>> report = run_scaling(quick=True)  # doctest: +SKIP
    >>> print(report.summary_table())     # doctest: +SKIP
    """
    iv = _run_scaling_iv(
        sizes,
        d,
        num_features,
        chunk_size,
        repeats,
        statistic,
        confidence,
        seed,
        out,
        quick,
        forms,
        threads,
        clock,
        progress,
    )
    t_start = time.perf_counter()
    run = _measure_forms(iv, _Inputs(iv.d, iv.D, iv.rng), progress)
    report = _report(iv, run, t_start)
    return report if iv.out is None else _write_report(report, iv.out)


class _Inputs:
    """The inputs at each size n, the same bytes for the same seed and n.

    Gaussian ``Q, K, V`` of shape (n, d); their positive random features for
    the linear forms; per-token gates in (0.9, 1) for the gated forms, as in
    a gated layer.  Two seeds are drawn from ``rng``: the feature map's and
    the inputs' (combined with n, so every size has its own stream).
    """

    def __init__(self, d: int, D: int, rng: np.random.Generator):
        seeds = rng.integers(0, 2**63 - 1, size=2)
        self.d = d
        self.phi = _feature_map(d, D, int(seeds[0]))
        self.seed = int(seeds[1])

    def exact(self, n: int) -> tuple:
        g = np.random.default_rng([self.seed, n])
        return tuple(g.standard_normal((3, n, self.d)))

    def linear(self, n: int) -> tuple:
        Q, K, V = self.exact(n)
        return self.phi(Q), self.phi(K), V

    def gated(self, n: int) -> tuple:
        g = np.random.default_rng([self.seed, n, 20]).uniform(0.9, 1.0, size=n)
        return (*self.linear(n), g)

    def for_form(self, entry) -> Callable[[int], tuple]:
        """The inputs a registered form takes: queries and keys, features, or features and gates."""
        if entry.inputs == "queries":
            return self.exact
        return self.gated if "gates" in entry.requires else self.linear


class _Run(NamedTuple):
    """The measured forms and the conditions of the run."""

    forms: tuple[FormScaling, ...]
    load_before: float | None
    load_after: float | None
    thread_note: str


def _measure_forms(iv: _ScalingArgs, inputs: _Inputs, progress) -> _Run:
    """Measure each form of ``iv.forms`` with the BLAS threads limited, reporting progress."""
    load_before = _one_minute_load()
    limiter, thread_note = _thread_limit(iv.threads)
    entries = []
    with limiter:
        for key in iv.forms:
            entries.append(_measure_form(key, iv, inputs))
            if progress is not None:
                call_user(progress, "`progress`", str(entries[-1]))
    return _Run(tuple(entries), load_before, _one_minute_load(), thread_note)


def _notes(iv: _ScalingArgs, run: _Run) -> tuple[str, ...]:
    """What the report says about its method, its clock, its threads and a busy machine."""
    notes: tuple[str, ...] = (
        "Time exponents are Theil-Sen slopes of log time against log n with Sen's "
        f"{iv.confidence:.0%} interval; a form passes when the whole interval lies in the "
        "expected range.",
        f"The linear forms use D = {iv.D} positive random features (computed before timing; the "
        "cost model does not count them): their n x D matrices exceed the caches from the "
        "smallest n on, so every size runs in the same memory regime.",
        f"Clock: {'CPU time of the process' if iv.clock == 'cpu' else 'elapsed (wall) time'}; "
        f"per-size statistic: {iv.statistic} of {iv.repeats} repeats. {run.thread_note}",
    )
    busy = _busy_note(run.load_before, run.load_after, iv.clock)
    return notes + (busy,) if busy else notes


def _report(iv: _ScalingArgs, run: _Run, t_start: float) -> ScalingReport:
    """The report of a run that started at ``time.perf_counter() == t_start`` (no plot yet)."""
    notes = _notes(iv, run)
    return ScalingReport(
        forms=run.forms,
        sizes=iv.sizes,
        d=iv.d,
        D=iv.D,
        d_v=iv.d,
        chunk_size=iv.chunk_size,
        feature_map=f"positive random features, D = {iv.D}",
        repeats=iv.repeats,
        statistic=iv.statistic,
        confidence=iv.confidence,
        quick=iv.quick,
        environment=environment(
            load_average=[run.load_before, run.load_after],
            blas_threads=iv.threads,
            clock=iv.clock,
        ),
        seconds=time.perf_counter() - t_start,
        plot_path=None,
        passed=all(e.passed for e in run.forms),
        notes=notes,
    )


def _write_report(report: ScalingReport, out: Path) -> ScalingReport:
    """Write ``scaling.png`` (when matplotlib is there), ``scaling.json`` and ``scaling.md``.

    Returns the report with its plot path, and the note saying why there is
    no plot when matplotlib is missing.
    """
    pngs, note = render_plots(
        lambda: {"scaling.png": render([f.measurement for f in report.forms], _TITLE)}
    )
    plot_path = str(out / "scaling.png") if pngs else None
    report = dataclasses.replace(
        report, plot_path=plot_path, notes=report.notes + ((note,) if note else ())
    )
    files: dict[str, bytes | str] = dict(pngs)
    files["scaling.json"] = report.to_json(indent=2)
    files["scaling.md"] = report.to_markdown()
    write_bundle(out, files, name="out")
    return report


def _measure_form(key: str, iv: _ScalingArgs, inputs: _Inputs) -> FormScaling:
    """Measure one form of :data:`SCALING_FORMS` and fit its exponents."""
    name, form, causal, claim, expected = SCALING_FORMS[key]
    entry = get_form(form)
    kwargs = {"chunk_size": iv.chunk_size} if "chunk_size" in entry.options else {}

    def fn(a, b, V, *required):
        return entry.call(a, b, V, *required, causal=causal, **kwargs)

    def model(n):
        return cost_model(form, n, iv.d, iv.D, iv.d, iv.chunk_size, causal=causal)

    m = measure(
        fn,
        iv.sizes,
        make_input=inputs.for_form(entry),
        repeats=iv.repeats,
        warmup=2,
        statistic=iv.statistic,
        cost=lambda n: float(model(n).flops),
        label=name,
        clock=iv.clock,
    )
    tfit = m.time_exponent(confidence=iv.confidence, expected=expected)
    mfit = m.memory_exponent(confidence=iv.confidence)
    mexp = m.model_exponent()
    return FormScaling(
        name=name,
        form=form,
        causal=causal,
        claim=claim,
        measurement=m,
        time_fit=tfit,
        memory_fit=mfit,
        model_exponent=None if mexp is None else mexp.slope,
        state_size=tuple(int(model(n).state_size) for n in iv.sizes),
        verdict=tfit.verdict,
        passed=bool(tfit.passed),
    )


def _thread_limit(threads):
    """A context limiting BLAS threads (threadpoolctl), and a sentence saying what was done."""
    import contextlib

    if threads is None:
        return contextlib.nullcontext(), "BLAS threads: library default."
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext(), (
            f"BLAS threads not limited to {threads}: threadpoolctl is not installed."
        )
    return threadpool_limits(limits=threads), f"BLAS limited to {threads} thread(s)."


def _one_minute_load() -> float | None:
    """The 1-minute load average now, as the one environment record has it (None without)."""
    load = environment()["load_average"]
    return None if load is None else load[0]


def _busy_note(before, after, clock: str = "wall") -> str | None:
    cpus = os.cpu_count() or 1
    loads = [x for x in (before, after) if x is not None]
    if loads and max(loads) > 0.5 * cpus + 1.0:
        text = (
            f"The machine was busy during the run (1-minute load average "
            f"{', '.join(f'{x:.1f}' for x in loads)} on {cpus} CPUs). "
        )
        if clock == "cpu":
            return text + (
                "CPU time does not count the waits for a CPU, but the other processes still "
                "share the caches and memory bandwidth; rerun on an idle machine to confirm."
            )
        return text + (
            "Elapsed time counts the waits for a CPU, so the timings and the exponents are "
            "disturbed; rerun on an idle machine or with clock='cpu'."
        )
    return None


def _feature_map(d: int, D: int, seed: int):
    """Positive random features of exp(q.k / sqrt d), the softmax kernel (C13)."""
    from kernelcheck._src.features.random import PositiveRandomFeatures

    return PositiveRandomFeatures(d, D, seed=seed, scale=1.0 / math.sqrt(d))
