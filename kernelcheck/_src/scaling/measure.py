"""Measuring a function over a grid of sizes: time per call and peak memory.

:func:`measure` runs a function over a grid of sizes (warm-up, repeats, a
robust per-size statistic), then, in a separate pass, records the peak
memory allocated during one call with :mod:`tracemalloc` (claims C2, C3,
C11).  The result, :class:`Measurement`, fits its exponents with
:func:`~kernelcheck._src.scaling.fit.fit_exponent`, renders as Markdown and
plots through :func:`plot_measurements`.
"""

from __future__ import annotations

import gc
import math
import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.validate import (
    OWN_ERRORS,
    as_array,
    as_bool,
    as_int,
    as_real,
    call_user,
    check_callable,
    check_choice,
    check_size,
    describe,
)
from kernelcheck._src.scaling.fit import STATISTICS, ExponentFit, fit_exponent, reduce_repeats
from kernelcheck._src.scaling.plot import write_plot
from kernelcheck._src.scaling.sizes import as_sizes
from kernelcheck.errors import InvalidArgument

__all__ = ["CLOCKS", "Measurement", "measure", "plot_measurements"]

#: Clocks :func:`measure` can read: elapsed time, or CPU time of the process.
CLOCKS = ("wall", "cpu")
_CLOCK_FUNCTIONS = {"wall": time.perf_counter, "cpu": time.process_time}

_MAX_LOOPS = 1_000_000


def _plural(unit: str) -> str:
    return unit[:-1] + "ies" if unit.endswith("y") else unit + "s"


def _fmt_seconds(t: float) -> str:
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


def _fmt_bytes(b: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


@dataclass(frozen=True, eq=False)
class Measurement(ResultMixin):
    """Times (and peak memory) of one function over a grid of sizes.

    Attributes
    ----------
    label : str
        What was measured.
    sizes : tuple of int
        The sizes n, strictly increasing.
    times : numpy.ndarray
        Per-size ``statistic`` of the repeated times, seconds per call, shape (k,).
    raw_times : numpy.ndarray
        Every timed repeat, seconds per call, shape (k, repeats).
    statistic : str
        ``"median"`` or ``"min"``.
    repeats, warmup : int
        Timed repeats and untimed warm-up calls per size.
    loops : tuple of int
        Calls per timed repeat at each size (calibrated so that one repeat
        lasts at least ``min_time``); a repeat's time is divided by it.
    peak_memory : numpy.ndarray or None
        Peak bytes allocated during one call (inputs excluded, output
        included), measured with :mod:`tracemalloc` in a separate untimed
        pass; None when memory was not measured.
    model_flops : numpy.ndarray or None
        The cost model's operation count at each size, if one was given.
    cost_unit : str
        What the cost model counts (``"flop"`` by default; e.g. ``"entry"``
        for a count of output entries).
    clock : str
        ``"wall"`` (elapsed time) or ``"cpu"`` (CPU time of the process).
    """

    label: str
    sizes: tuple[int, ...]
    times: np.ndarray
    raw_times: np.ndarray
    statistic: str
    repeats: int
    warmup: int
    loops: tuple[int, ...]
    peak_memory: np.ndarray | None = None
    model_flops: np.ndarray | None = None
    cost_unit: str = "flop"
    clock: str = "wall"

    # -- derived quantities -------------------------------------------------

    def time_exponent(
        self, *, confidence: float = 0.95, method: str = "theil-sen", seed=0, expected=None
    ) -> ExponentFit:
        """Fit the exponent of time against n (see :func:`fit_exponent`)."""
        values = self.raw_times if method == "bootstrap" else self.times
        return fit_exponent(
            self.sizes,
            values,
            confidence=confidence,
            method=method,
            statistic=self.statistic,
            seed=seed,
            expected=expected,
        )

    def memory_exponent(self, *, confidence: float = 0.95, expected=None) -> ExponentFit | None:
        """Fit the exponent of peak memory against n; None if not measured or not positive."""
        if self.peak_memory is None or not (self.peak_memory > 0).all():
            return None
        return fit_exponent(
            self.sizes,
            self.peak_memory.astype(np.float64),
            confidence=confidence,
            expected=expected,
        )

    def model_exponent(self) -> ExponentFit | None:
        """Fit the exponent of the cost model over the same sizes; None without a model."""
        if self.model_flops is None:
            return None
        return fit_exponent(self.sizes, self.model_flops)

    def throughput(self) -> np.ndarray | None:
        """Model operations per second at each size (model flops / time)."""
        if self.model_flops is None:
            return None
        return self.model_flops / self.times

    def __str__(self) -> str:
        fit = self.time_exponent()
        return f"{self.label}: time {fit}"

    # -- rendering ----------------------------------------------------------

    def to_markdown(self) -> str:
        """A Markdown table: one row per size, then the fitted exponents."""
        head = ["n", f"{self.clock} time ({self.statistic})", "spread (min..max)", "loops"]
        if self.peak_memory is not None:
            head.append("peak memory")
        if self.model_flops is not None:
            head += [f"model {_plural(self.cost_unit)}", f"G{self.cost_unit}/s (model / time)"]
        lines = [f"**{self.label}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        thr = self.throughput()
        flops = self.model_flops
        for i, n in enumerate(self.sizes):
            row = [
                str(n),
                _fmt_seconds(self.times[i]),
                f"{_fmt_seconds(self.raw_times[i].min())}..{_fmt_seconds(self.raw_times[i].max())}",
                str(self.loops[i]),
            ]
            if self.peak_memory is not None:
                row.append(_fmt_bytes(self.peak_memory[i]))
            if flops is not None and thr is not None:
                row += [f"{flops[i]:.3g}", f"{thr[i] / 1e9:.3g}"]
            lines.append("| " + " | ".join(row) + " |")
        lines += ["", f"- time: {self.time_exponent()}"]
        mem = self.memory_exponent()
        if mem is not None:
            lines.append(f"- peak memory: {mem}")
        model = self.model_exponent()
        if model is not None:
            lines.append(f"- cost model ({_plural(self.cost_unit)}): exponent {model.slope:.3f}")
        return "\n".join(lines) + "\n"

    def plot(self, path) -> Path:
        """Write a log-log plot of time and memory against n (see :func:`plot_measurements`)."""
        return plot_measurements([self], path, title=self.label)


def _plot_iv(measurements: Any, path: Any, title: Any) -> list[Measurement]:
    if isinstance(measurements, Measurement):
        raise InvalidArgument(
            "`measurements` must be a sequence of Measurement objects; pass one as [m], "
            "or call m.plot(path)"
        )
    if isinstance(measurements, (str, bytes)) or not hasattr(measurements, "__iter__"):
        raise InvalidArgument(
            "`measurements` must be a sequence of Measurement objects, got "
            f"{describe(measurements)}"
        )
    out = list(measurements)
    if not out:
        raise InvalidArgument("`measurements` must hold at least one Measurement, got none")
    for i, m in enumerate(out):
        if not isinstance(m, Measurement):
            raise InvalidArgument(f"`measurements[{i}]` must be a Measurement, got {describe(m)}")
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgument(f"`path` must be a file path, got {describe(path)}")
    if title is not None and not isinstance(title, str):
        raise InvalidArgument(f"`title` must be a string, got {describe(title)}")
    return out


def plot_measurements(
    measurements: Sequence[Measurement], path, *, title: str | None = None
) -> Path:
    """Log-log plot of time, peak memory and model throughput against n.

    One panel per quantity (time; peak memory when measured; model GFLOP/s
    when a cost model was given), each measurement with its points and its
    fitted power law drawn dashed, the slope in the legend.  The PNG (or any
    format matplotlib infers from the suffix) is written atomically.
    """
    return write_plot(_plot_iv(measurements, path, title), path, title)


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


class _Measuring(NamedTuple):
    """The checked arguments of :func:`measure` (those it does not pass on unchanged)."""

    sizes: tuple[int, ...]
    repeats: int
    warmup: int
    min_time: float
    memory: bool
    cost: np.ndarray | None
    label: str


def _measure_iv(
    fn,
    sizes,
    make_input,
    repeats,
    warmup,
    statistic,
    min_time,
    memory,
    clock,
    cost,
    cost_unit,
    label,
) -> _Measuring:
    check_callable(fn, "fn")
    sizes = as_sizes(sizes)
    check_callable(make_input, "make_input")
    repeats = as_int(repeats, "repeats", minimum=1)
    warmup = as_int(warmup, "warmup", minimum=0)
    check_choice(statistic, "statistic", STATISTICS)
    min_time = as_real(min_time, "min_time", nonnegative=True)
    if cost is not None:
        counts = [call_user(cost, "`cost`", n) for n in sizes] if callable(cost) else cost
        flops = as_array(counts, "cost", ndim=1, dtype=np.float64)
        if flops.shape != (len(sizes),) or not (flops > 0).all():
            raise InvalidArgument(
                f"`cost` must give one positive operation count per size ({len(sizes)}), "
                f"got {describe(flops)}"
            )
        cost = flops
    if label is None:
        label = getattr(fn, "__name__", type(fn).__name__)
    elif not isinstance(label, str):
        raise InvalidArgument(f"`label` must be a string, got {describe(label)}")
    check_choice(clock, "clock", CLOCKS)
    memory = as_bool(memory, "memory")
    if not isinstance(cost_unit, str) or not cost_unit:
        raise InvalidArgument(f"`cost_unit` must be a non-empty string, got {describe(cost_unit)}")
    check_size(len(sizes) * repeats, f"the table of {repeats} timed repeats per size")
    return _Measuring(sizes, repeats, warmup, min_time, memory, cost, label)


def _peak_bytes(fn, args) -> int:
    """Peak traced allocation during one call of ``fn(*args)``, inputs excluded."""
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn(*args)
        peak = tracemalloc.get_traced_memory()[1]
        del out
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return max(int(peak - base), 0)


class _SizeRun(NamedTuple):
    """What :func:`measure` records at one size."""

    times: np.ndarray  # seconds per call of each timed repeat, shape (repeats,)
    loops: int  # calls per timed repeat
    peak: int | None  # peak bytes of the traced call, None without the memory pass


def _run_size(fn, args: tuple, n: int, iv: _Measuring, perf: Callable[[], float]) -> _SizeRun:
    """The memory pass, the warm-up, the loop count and the timed repeats at one size n.

    The traced call (when ``iv.memory``) is untimed and counts as the first
    warm-up call; the last warm-up call sets the loop count so that a repeat
    lasts at least ``iv.min_time``.
    """
    try:
        peak = None
        last = None
        plain_warmup = iv.warmup
        if iv.memory:
            # The traced call is untimed; it is the first warm-up call.
            t0 = perf()
            peak = _peak_bytes(fn, args)
            if iv.warmup:
                last = perf() - t0
                plain_warmup = iv.warmup - 1
        for _ in range(plain_warmup):
            t0 = perf()
            fn(*args)
            last = perf() - t0
        if last is None or iv.min_time == 0:
            number = 1
        else:
            number = int(min(_MAX_LOOPS, max(1, math.ceil(iv.min_time / max(last, 1e-9)))))
        times = _timed_repeats(fn, args, iv.repeats, number, perf)
    except OWN_ERRORS:
        raise
    except Exception as exc:  # the user's function, timed in a loop: not wrapped per call
        raise InvalidArgument(f"`fn` at n = {n} raised {type(exc).__name__}: {exc}") from exc
    return _SizeRun(times, number, peak)


def _timed_repeats(fn, args: tuple, repeats: int, number: int, perf) -> np.ndarray:
    """Seconds per call of ``repeats`` runs of ``number`` calls each, garbage collector paused."""
    times = np.empty(repeats)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(repeats):
            t0 = perf()
            for _ in range(number):
                fn(*args)
            times[r] = (perf() - t0) / number
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


class _Timings(NamedTuple):
    """What :func:`measure` records over all sizes."""

    raw: np.ndarray  # seconds per call of every timed repeat, shape (sizes, repeats)
    loops: tuple[int, ...]  # calls per timed repeat at each size
    peaks: np.ndarray | None  # peak bytes at each size, None without the memory pass


def _time_sizes(fn, make_input, iv: _Measuring, perf: Callable[[], float]) -> _Timings:
    """Make the inputs of each size (untimed) and run :func:`_run_size` on them."""
    runs = []
    for n in iv.sizes:
        args = call_user(make_input, "`make_input`", n)
        if not isinstance(args, tuple):
            args = (args,)
        runs.append(_run_size(fn, args, n, iv, perf))
        del args
    raw = np.array([run.times for run in runs], dtype=np.float64)
    if not (raw > 0).all():  # pragma: no cover - perf_counter has sub-microsecond resolution
        raise InvalidArgument(
            "a timed call took no measurable time; raise `min_time` so that repeats are timed "
            "over several calls"
        )
    peaks = np.array([run.peak for run in runs], dtype=np.int64) if iv.memory else None
    return _Timings(raw, tuple(run.loops for run in runs), peaks)


def measure(
    fn: Callable,
    sizes: Sequence[int],
    *,
    make_input: Callable[[int], Any],
    repeats: int = 5,
    warmup: int = 1,
    statistic: str = "median",
    min_time: float = 0.01,
    memory: bool = True,
    clock: str = "wall",
    cost=None,
    cost_unit: str = "flop",
    label: str | None = None,
) -> Measurement:
    """Time ``fn`` at each size and record its peak memory (claims C2, C3).

    For each n in ``sizes``: ``args = make_input(n)`` (untimed; a tuple is
    unpacked into positional arguments, anything else is passed as the single
    argument), ``warmup`` untimed calls, then ``repeats`` timed repeats with
    the garbage collector paused.  A repeat runs ``fn`` ``loops`` times in a
    row, ``loops`` chosen from the last warm-up call so that a repeat lasts at
    least ``min_time`` seconds (1 when ``warmup`` is 0); its time is divided
    by ``loops``.  The per-size time is the ``statistic`` (median or min) of
    the repeats.

    Memory is measured in a separate, untimed call under :mod:`tracemalloc`
    (tracing slows allocation, so no timed call is ever traced): the peak
    traced allocation above the baseline (inputs already allocated) is
    recorded.  NumPy reports its array buffers to tracemalloc, so this
    counts the arrays a call creates, its output included.  The traced call
    comes first and serves as the first warm-up call (an extra one when
    ``warmup`` is 0).

    Parameters
    ----------
    fn : callable
        The function to time.
    sizes : sequence of int
        Strictly increasing sizes, at least 2 (a geometric grid,
        :func:`geometric_sizes`, spreads them evenly on the log scale).
    make_input : callable
        ``make_input(n)`` returns the arguments for size n.
    repeats : int
        Timed repeats per size (>= 1).
    warmup : int
        Untimed calls before timing (>= 0).
    statistic : {"median", "min"}
        Per-size statistic of the repeats.  The median resists occasional
        slow repeats; the minimum estimates the undisturbed cost.
    min_time : float
        Minimum duration of one repeat in seconds (>= 0).
    memory : bool
        Whether to run the tracemalloc pass.
    clock : {"wall", "cpu"}
        ``"wall"``: elapsed time (:func:`time.perf_counter`).  ``"cpu"``: CPU
        time of the process (:func:`time.process_time`, all its threads):
        time spent waiting for a CPU while other processes run is not
        counted, so a busy machine disturbs it far less.  With a
        multi-threaded BLAS the CPU time adds up the threads (and their
        spin-waiting), so use it with one BLAS thread.
    cost : callable or array_like, optional
        The cost model: ``cost(n)`` or one operation count per size.
    cost_unit : str
        What ``cost`` counts, for the tables and plots (default ``"flop"``).
    label : str, optional
        Name of the measurement (default: ``fn.__name__``).

    Returns
    -------
    Measurement

    Raises
    ------
    InvalidArgument
        For bad arguments, and when ``fn``, ``make_input`` or ``cost`` raises
        (the message names it, the size and the original exception;
        kernelcheck's own errors pass through unchanged).

    Examples
    --------
    >>> import numpy as np
    >>> m = measure(np.sort, [1000, 2000, 4000], repeats=3,
    ...             make_input=lambda n: np.arange(n, dtype=float)[::-1].copy())
    >>> m.sizes, m.raw_times.shape
    ((1000, 2000, 4000), (3, 3))
    """
    iv = _measure_iv(
        fn,
        sizes,
        make_input,
        repeats,
        warmup,
        statistic,
        min_time,
        memory,
        clock,
        cost,
        cost_unit,
        label,
    )
    timings = _time_sizes(fn, make_input, iv, _CLOCK_FUNCTIONS[clock])
    return Measurement(
        label=iv.label,
        sizes=iv.sizes,
        times=reduce_repeats(timings.raw, statistic, axis=1),
        raw_times=timings.raw,
        statistic=statistic,
        repeats=iv.repeats,
        warmup=iv.warmup,
        loops=timings.loops,
        peak_memory=timings.peaks,
        model_flops=iv.cost,
        cost_unit=cost_unit,
        clock=clock,
    )
