"""The C2/C3 experiment: how softmax and linear attention scale with n (claims C2, C3, C11).

:func:`run_scaling` measures the attention forms of :data:`SCALING_FORMS`
(each one of the attention registry's forms) with
:func:`~kernelcheck._src.scaling.measure.measure`: one BLAS thread, CPU
time, every size timed once per round in a random order.  Each form's time
exponent is the median of the per-round slopes with an order-statistic
interval (:mod:`~kernelcheck._src.scaling.slopes`), judged against the
accepted range of the timing error model
(:func:`~kernelcheck._src.scaling.judge.accepted_range`); the clock is put
next to each form's cost model, and with ``out`` the report is written
through :func:`~kernelcheck._src.core.report.write_bundle`.  Before the
run, a pilot call of each form at its smallest size estimates the time
(scaled by the cost model) and :func:`~kernelcheck._src.core.progress.check_budget`
asks for ``yes`` to a long or large run.

How it is measured: one BLAS thread and the CPU time of the process, so
that waiting for a CPU on a busy machine is not counted; ``repeats`` rounds,
each timing every size once in a fresh random order, so that a slowdown
during the run hits all sizes alike; the exponent is the median of the
per-round Theil-Sen slopes, with a distribution-free order-statistic
interval (coverage measured by simulation in ``tests/scaling/test_slopes.py``).

How it is judged: time per modelled operation may change by a factor
:data:`~kernelcheck._src.scaling.judge.COST_SPREAD` = 2 across the sizes
(caches, BLAS shapes, fixed costs per call), so the exponent must lie in
``p +- log 2 / log(n_hi / n_lo)`` (p = 2 or 1): ``pass`` when the whole
interval lies inside, ``fail`` when it misses it, ``inconclusive``
otherwise.  Fewer than 5 sizes, sizes spanning less than a factor 8, or
fewer rounds than the interval needs are **not judged** (inconclusive),
never refuted.  Every form's time is shown next to its cost model
(``cost_model`` of :mod:`kernelcheck.attention`) and the spread of time per
operation that was actually measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.registry import cost_model, get_form
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.files import as_output_folder
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.progress import check_budget, progress_bar
from kernelcheck._src.core.report import environment, render_plots, write_bundle
from kernelcheck._src.core.seeds import as_seed_sequence, child_seed
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_probability,
    check_callable,
    check_choice,
    describe,
)
from kernelcheck._src.scaling.fit import STATISTICS
from kernelcheck._src.scaling.forms import (
    DEFAULT_FORMS,
    DEFAULT_SIZES,
    EXPECTED_EXPONENTS,
    KINDS,
    QUICK_SIZES,
    SCALING_FORMS,
    Inputs,
    ScalingForm,
)
from kernelcheck._src.scaling.judge import COST_SPREAD, accepted_range
from kernelcheck._src.scaling.measure import CLOCKS, measure
from kernelcheck._src.scaling.plot import render
from kernelcheck._src.scaling.results import TITLE, FormScaling, ScalingReport, cost_spread
from kernelcheck._src.scaling.sizes import as_sizes
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

#: Shortest timed repeat (seconds): a repeat of a cheap size loops over several calls, so a
#: preemption on a busy machine (caches refilled after it) is averaged over them.
_MIN_TIME = 0.01
#: Child paths below the run's root seed: the inputs, and the order of the
#: rounds (one more level: the form's index in ``SCALING_FORMS``).
_INPUTS_PATH, _ORDER_PATH = 0, 1


class _ScalingArgs(NamedTuple):
    """The checked arguments of :func:`run_scaling` (``num_features`` is ``D``)."""

    sizes: dict[str, tuple[int, ...]]
    d: int
    D: int
    chunk_size: int
    repeats: int
    statistic: str
    confidence: float
    inputs_seed: np.random.SeedSequence  # the root seed's child at _INPUTS_PATH
    order_seed: np.random.SeedSequence  # at _ORDER_PATH: form k's rounds' order is its child k
    out: Path | None
    quick: bool
    forms: tuple[str, ...]
    threads: int | None
    clock: str
    memory: bool  # the traced call per size (the memory exponents)
    progress: Callable[[str], None] | None
    bar: bool | None
    yes: bool

    @property
    def warmup(self) -> int:
        """Untimed calls per size: the traced one (with memory) and the one that sets the loops."""
        return 2 if self.memory else 1


def _sizes_iv(sizes: Any, quick: bool, kinds: set[str]) -> dict[str, tuple[int, ...]]:
    """The sizes of each kind: the defaults, one list for every form, or a dict by kind."""
    if sizes is None:
        table = QUICK_SIZES if quick else DEFAULT_SIZES
        return {k: table[k] for k in KINDS if k in kinds}
    if isinstance(sizes, Mapping):
        unknown = set(sizes) - set(KINDS)
        if unknown:
            raise InvalidArgument(
                f"`sizes` keys must be {' and '.join(repr(k) for k in KINDS)}, got "
                f"{sorted(map(str, unknown))}"
            )
        missing = kinds - set(sizes)
        if missing:
            raise InvalidArgument(f"`sizes` has no sizes for the {sorted(missing)} forms asked for")
        return {
            k: as_sizes(sizes[k], f"sizes[{k!r}]", minimum_count=3) for k in KINDS if k in kinds
        }
    checked = as_sizes(sizes, minimum_count=3)
    return {k: checked for k in KINDS if k in kinds}


def _run_scaling_iv(
    *,
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
    memory,
    progress,
    bar,
    yes,
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
    quick = as_bool(quick, "quick")
    sizes = _sizes_iv(sizes, quick, {SCALING_FORMS[f].kind for f in forms})
    d = as_int(d, "d", minimum=1)
    if num_features is None:
        num_features = 64 if quick else 128
    num_features = as_int(num_features, "num_features", minimum=1)
    chunk_size = as_int(chunk_size, "chunk_size", minimum=1)
    if repeats is None:
        repeats = 9
    repeats = as_int(repeats, "repeats", minimum=1)
    check_choice(statistic, "statistic", STATISTICS)
    confidence = as_probability(confidence, "confidence")
    root = as_seed_sequence(seed)
    if progress is not None:
        check_callable(progress, "progress")
    largest = max(max(s) for s in sizes.values())
    check_size(largest * max(3 * d, 2 * num_features), f"the inputs at n = {largest}")
    if out is not None:
        out = as_output_folder(out, "out")
    return _ScalingArgs(
        sizes=sizes,
        d=d,
        D=num_features,
        chunk_size=chunk_size,
        repeats=repeats,
        statistic=statistic,
        confidence=confidence,
        inputs_seed=child_seed(root, _INPUTS_PATH),
        order_seed=child_seed(root, _ORDER_PATH),
        out=out,
        quick=quick,
        forms=forms,
        threads=threads,
        clock=clock,
        memory=as_bool(memory, "memory"),
        progress=progress,
        bar=None if bar is None else as_bool(bar, "bar"),
        yes=as_bool(yes, "yes"),
    )


def run_scaling(
    *,
    sizes: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    d: int = 64,
    num_features: int | None = None,
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
    memory: bool = True,
    progress: Callable[[str], None] | None = None,
    bar: bool | None = False,
    yes: bool = False,
) -> ScalingReport:
    """Measure how softmax and linear attention scale with n (claims C2, C3, C11).

    Times each form of ``forms`` over its sizes (sequence length n, head and
    value dimension d, feature dimension D for the linear forms) and fits
    the exponent of time:

    * softmax attention, bidirectional and causal: the operation count
      grows as n^2 (C2); timed over n = 1024 .. 8192 by default;
    * linear attention in the bidirectional parallel form and the causal
      chunked and gated chunked forms: n^1 (C3, C20); timed over the wider
      n = 512 .. 32768.

    How it is measured and judged is in the module docstring: rounds over
    every size in a random order, one BLAS thread, CPU time; the median of
    the per-round slopes against ``p +- log 2 / log(n_hi / n_lo)``; too few
    sizes or rounds are **not judged** (inconclusive), never refuted.

    Parameters
    ----------
    sizes : sequence of int, or dict or None, default None
        One list of sizes for every form, or ``{"quadratic": [...],
        "linear": [...]}`` by kind.  Default :data:`DEFAULT_SIZES`
        (``quick``: :data:`QUICK_SIZES`, n = 512 .. 4096 and 512 .. 16384).
    d : int, default 64
        Head and value dimension (default 64).
    num_features : int or None, default None
        Feature dimension D of the linear forms (positive random features of
        exp(q.k / sqrt d)); default 128 (``quick``: 64).
    chunk_size : int, default 64
        Chunk length of the causal chunked forms (default 64, the form's own).
    repeats : int or None, default None
        Timed rounds (default 9: the interval drops the lowest and highest
        round slope and covers 96.1%; 6 is the fewest for 95%).
    statistic : {"min", "median"}, default "min"
        Per-size statistic of the rounds shown in the tables and plots (the
        fit uses every round).
    confidence : float, default 0.95
        Confidence level of the exponent intervals.
    seed : int, SeedSequence or Generator, default 0
        Seed of the inputs, the random features and the order of the rounds.
    out : path or None, default None
        Directory to write ``scaling.png``, ``scaling.md`` and ``scaling.json`` into.
    quick : bool, default False
        The shorter run above (the one the essay's C2/C3 check makes).
    forms : sequence of str, default DEFAULT_FORMS
        Keys of :data:`SCALING_FORMS` to measure (default
        :data:`DEFAULT_FORMS`: ``"softmax"``, ``"softmax-causal"``,
        ``"parallel"``, ``"chunked"``, ``"gated-chunked"``; also
        ``"parallel-causal"`` and ``"recurrent"``, the token-by-token
        reference loop).
    threads : int or None, default 1
        Threads the BLAS may use during the run (default 1, set with
        ``threadpoolctl``); None leaves the BLAS default.
    clock : {"cpu", "wall"} or None, default None
        What is timed (see :func:`measure`).  Default: ``"cpu"`` when
        ``threads == 1``, else ``"wall"`` (CPU time would add up the BLAS
        threads and their spinning).
    memory : bool, default True
        Record each form's peak memory in one untimed traced call per size
        (default True; without it each size gets one warm-up call, not two).
    progress : callable or None, default None
        Called with a line of text as each form finishes.
    bar : bool or None, default False
        A progress bar with an ETA on standard error: False (default) never,
        True always, None when standard error is a terminal.
    yes : bool, default False
        Run even when the estimate is longer than 5 minutes or larger than
        2 GiB (a run beyond a day or 80% of the memory is refused anyway).

    Returns
    -------
    ScalingReport

    Raises
    ------
    InvalidArgument
        For bad arguments, and for a run whose estimate needs ``yes``.

    Examples
    --------
    >>> report = run_scaling(quick=True)  # doctest: +SKIP
    >>> print(report.summary_table())     # doctest: +SKIP
    """
    iv = _run_scaling_iv(**locals())  # every argument, checked before any work
    t_start = time.perf_counter()
    inputs = Inputs(iv.d, iv.D, iv.inputs_seed, {k: max(s) for k, s in iv.sizes.items()})
    limiter, thread_note = _thread_limit(iv.threads)
    with limiter:
        plan = _plan(iv, inputs)
        check_budget(
            seconds=plan.seconds,
            nbytes=plan.nbytes,
            yes=iv.yes,
            what="this scaling run",
            flag="yes=True (--yes on the command line)",
            how="from one call of each form at its smallest size, scaled by its cost model",
        )
        run = _measure_forms(iv, inputs, plan)
    report = _report(iv, run, thread_note, t_start)
    return report if iv.out is None else _write_report(report, iv.out)


# ---------------------------------------------------------------------------
# The estimate


class _Plan(NamedTuple):
    """The estimate of a run: seconds per timed repeat of each form at each size."""

    step_seconds: dict[str, dict[int, float]]
    seconds: float
    nbytes: int


def _form_call(key: str, iv: _ScalingArgs) -> tuple[ScalingForm, Any, Callable]:
    """The preset, registry entry and callable of form ``key``."""
    spec = SCALING_FORMS[key]
    entry = get_form(spec.form)
    kwargs = {"chunk_size": iv.chunk_size} if "chunk_size" in entry.options else {}

    def fn(a, b, V, *required):
        return entry.call(a, b, V, *required, causal=spec.causal, **kwargs)

    return spec, entry, fn


def _flops(spec: ScalingForm, n: int, iv: _ScalingArgs) -> float:
    return float(
        cost_model(spec.form, n, iv.d, iv.D, iv.d, iv.chunk_size, causal=spec.causal).flops
    )


def _plan(iv: _ScalingArgs, inputs: Inputs) -> _Plan:
    """Time one call of each form at its smallest size and scale it by the cost model.

    The pilot runs on inputs drawn at that size only (nothing large is drawn
    before the estimate is accepted).  A repeat lasts at least the shortest
    repeat :data:`_MIN_TIME`; each size also gets ``iv.warmup`` untimed calls.
    """
    pilot = Inputs(iv.d, iv.D, iv.inputs_seed, {k: min(s) for k, s in iv.sizes.items()})
    steps: dict[str, dict[int, float]] = {}
    total = 0.0
    for key in iv.forms:
        spec, entry, fn = _form_call(key, iv)
        sizes = iv.sizes[spec.kind]
        args = pilot.for_form(entry)(sizes[0])
        t0 = time.process_time() if iv.clock == "cpu" else time.perf_counter()
        fn(*args)
        t1 = time.process_time() if iv.clock == "cpu" else time.perf_counter()
        per_flop = max(t1 - t0, 1e-6) / _flops(spec, sizes[0], iv)
        steps[key] = {n: max(per_flop * _flops(spec, n, iv), _MIN_TIME) for n in sizes}
        call = {n: per_flop * _flops(spec, n, iv) for n in sizes}
        total += sum(iv.repeats * steps[key][n] + iv.warmup * call[n] for n in sizes)
    out_bytes = 2 * 8 * iv.d * max(max(s) for s in iv.sizes.values())
    nbytes = inputs.nbytes(SCALING_FORMS[k].kind for k in iv.forms) + out_bytes
    return _Plan(steps, total, nbytes)


# ---------------------------------------------------------------------------
# The run


class _Run(NamedTuple):
    """The measured forms and the conditions of the run."""

    forms: tuple[FormScaling, ...]
    load_before: float | None
    load_after: float | None


def _measure_forms(iv: _ScalingArgs, inputs: Inputs, plan: _Plan) -> _Run:
    """Measure each form of ``iv.forms``, reporting lines and advancing the bar."""
    load_before = _one_minute_load()
    entries = []
    with progress_bar(plan.seconds, "scaling", enabled=iv.bar, unit="s") as pbar:
        for key in iv.forms:
            steps = plan.step_seconds[key]
            pbar.set_description(f"scaling: {SCALING_FORMS[key].label}")
            entries.append(_measure_form(key, iv, inputs, lambda n, s=steps: pbar.update(s[n])))
            if iv.progress is not None:
                call_user(iv.progress, "`progress`", str(entries[-1]))
    return _Run(tuple(entries), load_before, _one_minute_load())


def _measure_form(key: str, iv: _ScalingArgs, inputs: Inputs, step) -> FormScaling:
    """Measure one form of :data:`SCALING_FORMS`, fit its exponents and judge the time."""
    spec, entry, fn = _form_call(key, iv)
    sizes = iv.sizes[spec.kind]

    def model(n):
        return cost_model(spec.form, n, iv.d, iv.D, iv.d, iv.chunk_size, causal=spec.causal)

    m = measure(
        fn,
        sizes,
        make_input=inputs.for_form(entry),
        repeats=iv.repeats,
        warmup=iv.warmup,
        memory=iv.memory,
        statistic=iv.statistic,
        min_time=_MIN_TIME,
        cost=lambda n: float(model(n).flops),
        label=spec.label,
        clock=iv.clock,
        seed=child_seed(iv.order_seed, list(SCALING_FORMS).index(key)),
        progress=step,
    )
    accepted = accepted_range(spec.exponent, sizes)
    tfit = m.time_exponent(confidence=iv.confidence, expected=accepted.pair())
    verdict = tfit.verdict if accepted.judged else "not judged"
    mexp = m.model_exponent()
    return FormScaling(
        name=spec.label,
        form=spec.form,
        causal=spec.causal,
        claim=spec.claim,
        kind=spec.kind,
        measurement=m,
        time_fit=tfit,
        accepted=accepted.pair(),
        accepted_reason=accepted.reason,
        cost_spread=cost_spread(m),
        memory_fit=m.memory_exponent(confidence=iv.confidence),
        model_exponent=None if mexp is None else mexp.slope,
        state_size=tuple(int(model(n).state_size) for n in sizes),
        verdict=verdict,
        passed=verdict == "pass",
    )


def _notes(iv: _ScalingArgs, run: _Run, thread_note: str) -> tuple[str, ...]:
    """What the report says about its method, its clock, its threads and a busy machine."""
    notes: tuple[str, ...] = (
        f"Each of {iv.repeats} rounds times every size once, in a random order; a form's time "
        "exponent is the median of the per-round Theil-Sen slopes of log time on log n, with "
        "the order-statistic interval of that median (distribution-free).",
        f"Accepted range: p +- log {COST_SPREAD:g} / log(n_hi / n_lo), p = 2 for exact and 1 for "
        f"linear attention: time per modelled operation may change by a factor {COST_SPREAD:g} "
        "across the sizes (caches, BLAS shapes, fixed costs per call); 'time/op spread' is the "
        "change measured. A form passes when its whole interval lies in the range; timing "
        "corroborates the operation count, which is the proof.",
        f"The linear forms use D = {iv.D} positive random features (computed before timing; "
        "the cost model does not count them).",
        f"Clock: {'CPU time of the process' if iv.clock == 'cpu' else 'elapsed (wall) time'}; "
        f"per-size statistic in the tables: {iv.statistic} of the rounds. {thread_note}",
    )
    busy = _busy_note(run.load_before, run.load_after, iv.clock)
    return notes + (busy,) if busy else notes


def _report(iv: _ScalingArgs, run: _Run, thread_note: str, t_start: float) -> ScalingReport:
    """The report of a run that started at ``time.perf_counter() == t_start`` (no plot yet)."""
    return ScalingReport(
        forms=run.forms,
        sizes=dict(iv.sizes),
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
        notes=_notes(iv, run, thread_note),
    )


def _write_report(report: ScalingReport, out: Path) -> ScalingReport:
    """Write ``scaling.png`` (when matplotlib is there), ``scaling.json`` and ``scaling.md``.

    Returns the report with its plot path, and the note saying why there is
    no plot when matplotlib is missing.
    """
    pngs, note = render_plots(
        lambda: {
            "scaling.png": render(
                [f.measurement for f in report.forms], TITLE, theory=_theory(report)
            )
        }
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


def _theory(report: ScalingReport) -> list[float]:
    """The exponent of each form's operation count, for the plot's reference lines."""
    return [EXPECTED_EXPONENTS[f.kind] for f in report.forms]


def _thread_limit(threads):
    """A context limiting BLAS threads (threadpoolctl), and a sentence saying what was done."""
    if threads is None:
        return contextlib.nullcontext(), "BLAS threads: library default."
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
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
                "CPU time does not count the waits for a CPU and the random order spreads a "
                "slowdown over all sizes, but the other processes still share the caches and "
                "memory bandwidth."
            )
        return text + (
            "Elapsed time counts the waits for a CPU, so the timings and the exponents are "
            "disturbed; rerun on an idle machine or with clock='cpu'."
        )
    return None
