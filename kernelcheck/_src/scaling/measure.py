"""Measuring a function over a grid of sizes: time per call and peak memory.

:func:`measure` runs a function over a grid of sizes (a memory pass, warm-up,
then timed rounds that visit every size once in a fresh random order, and a
robust per-size statistic); the peak memory allocated during one call is
recorded in a separate, untimed pass with :mod:`tracemalloc` (claims C2,
C3, C11).  The result, :class:`Measurement`, fits its exponents with
:func:`~kernelcheck._src.scaling.fit.fit_exponent`, renders as Markdown and
plots through :func:`plot_measurements`.

Rounds.  With ``order="interleaved"`` (the default of :func:`measure`) the
repeats are *rounds*: round r times every size once, in a random order drawn
from ``seed``, and column r of :attr:`Measurement.raw_times` holds it.  A
change of the machine's speed (another process starting, a clock-frequency
step) then slows a whole round, which cancels in that round's slope, instead
of the sizes measured after it; :meth:`Measurement.time_exponent` fits the
median of the per-round slopes (``method="rounds"``).  Every size's inputs
are alive during the rounds: their memory adds up.  ``order="sequential"``
times all repeats of a size before the next.

Memory.  It is measured in a separate, untimed call under
:mod:`tracemalloc` (tracing slows allocation, so no timed call is ever
traced): the peak traced allocation above the baseline (inputs already
allocated) is recorded.  NumPy reports its array buffers to tracemalloc, so
this counts the arrays a call creates, its output included.  The traced
call comes first and serves as the first warm-up call (an extra one when
``warmup`` is 0).
"""

from __future__ import annotations

import contextlib
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

from kernelcheck._src.core.calls import OWN_ERRORS, call_user
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.seeds import as_rng
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_int,
    as_real,
    check_callable,
    check_choice,
    describe,
)
from kernelcheck._src.scaling.fit import STATISTICS, ExponentFit, fit_exponent, reduce_repeats
from kernelcheck._src.scaling.plot import write_plot
from kernelcheck._src.scaling.sizes import as_sizes
from kernelcheck.errors import InvalidArgument

__all__ = ["CLOCKS", "ORDERS", "Measurement", "measure", "plot_measurements"]

#: Clocks :func:`measure` can read: elapsed time, or CPU time of the process.
CLOCKS = ("wall", "cpu")
#: Orders :func:`measure` times the sizes in: rounds over every size, or one size at a time.
ORDERS = ("interleaved", "sequential")
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
        Every timed repeat, seconds per call, shape (k, repeats); with
        ``order == "interleaved"`` column r is round r.
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
    cost_unit : str, default "flop"
        What the cost model counts (``"flop"`` by default; e.g. ``"entry"``
        for a count of output entries).
    clock : str
        ``"wall"`` (elapsed time) or ``"cpu"`` (CPU time of the process).
    order : str
        ``"interleaved"`` (each repeat is a round over every size, in a
        random order) or ``"sequential"`` (all repeats of one size, then the
        next size).
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
    order: str = "interleaved"

    # -- derived quantities -------------------------------------------------

    def default_method(self) -> str:
        """``"rounds"`` for interleaved rounds (two or more), else ``"theil-sen"``."""
        if self.order == "interleaved" and self.repeats >= 2:
            return "rounds"
        return "theil-sen"

    def time_exponent(
        self, *, confidence: float = 0.95, method: str | None = None, seed=0, expected=None
    ) -> ExponentFit:
        """Fit the exponent of time against n (see :func:`fit_exponent`).

        ``method`` defaults to :meth:`default_method`: the median of the
        per-round slopes when the sizes were timed in rounds.

        Parameters
        ----------
        confidence : float, default 0.95
            The confidence level of the interval.
        method : str or None, default None
            ``"theil-sen"``, ``"bootstrap"`` or ``"rounds"``; None chooses.
        seed : int, default 0
            The seed of the bootstrap resampling.
        expected : tuple of float or None, default None
            A range to judge the exponent against.
        """
        if method is None:
            method = self.default_method()
        values = self.raw_times if method in ("bootstrap", "rounds") else self.times
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
        """Fit the exponent of peak memory against n; None if not measured or not positive.

        Parameters
        ----------
        confidence : float, default 0.95
            The confidence level of the interval.
        expected : tuple of float or None, default None
            A range to judge the exponent against.
        """
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
        """Write a log-log plot of time and memory against n (see :func:`plot_measurements`).

        Parameters
        ----------
        path : str or pathlib.Path
            Where the image is written.
        """
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

    Parameters
    ----------
    measurements : sequence of Measurement
        The measurements to draw.
    path : str or pathlib.Path
        Where the image is written.
    title : str or None, default None
        The figure's title.
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
    rng: np.random.Generator | None  # the order of each round (interleaved only)
    progress: Callable[[int], Any] | None


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
    order,
    seed,
    progress,
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
    check_choice(order, "order", ORDERS)
    rng = as_rng(seed) if order == "interleaved" else None
    if progress is not None:
        check_callable(progress, "progress")
    check_size(len(sizes) * repeats, f"the table of {repeats} timed repeats per size")
    return _Measuring(sizes, repeats, warmup, min_time, memory, cost, label, rng, progress)


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


@contextlib.contextmanager
def _calling(n: int):
    """Turn an exception of the user's ``fn`` at size ``n`` into InvalidArgument naming it.

    The function is timed in a loop, so it is not wrapped call by call
    (:func:`call_user` would copy its arguments inside the timed region).
    """
    try:
        yield
    except OWN_ERRORS:
        raise
    except Exception as exc:
        raise InvalidArgument(f"`fn` at n = {n} raised {type(exc).__name__}: {exc}") from exc


class _Warm(NamedTuple):
    """What the untimed calls at one size leave: the loop count and the peak memory."""

    loops: int  # calls per timed repeat
    peak: int | None  # peak bytes of the traced call, None without the memory pass


def _warm_up(fn, args: tuple, n: int, iv: _Measuring, perf: Callable[[], float]) -> _Warm:
    """The memory pass and the warm-up at one size n; the last call sets the loop count.

    The traced call (when ``iv.memory``) is untimed and counts as the first
    warm-up call; the last warm-up call sets the loop count so that a repeat
    lasts at least ``iv.min_time``.
    """
    peak = None
    last = None
    plain_warmup = iv.warmup
    with _calling(n):
        if iv.memory:
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
    return _Warm(number, peak)


def _timed(fn, args: tuple, number: int, perf) -> float:
    """Seconds per call of one repeat: ``number`` calls in a row."""
    t0 = perf()
    for _ in range(number):
        fn(*args)
    return (perf() - t0) / number


@contextlib.contextmanager
def _gc_paused():
    """The garbage collector paused for a stretch of timed calls (a round, or one size)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Timings(NamedTuple):
    """What :func:`measure` records over all sizes."""

    raw: np.ndarray  # seconds per call of every timed repeat, shape (sizes, repeats)
    loops: tuple[int, ...]  # calls per timed repeat at each size
    peaks: np.ndarray | None  # peak bytes at each size, None without the memory pass


def _inputs(make_input, n: int) -> tuple:
    args = call_user(make_input, "`make_input`", n)
    return args if isinstance(args, tuple) else (args,)


def _step(iv: _Measuring, n: int) -> None:
    if iv.progress is not None:
        call_user(iv.progress, "`progress`", n)


def _time_sizes(fn, make_input, iv: _Measuring, perf: Callable[[], float]) -> _Timings:
    """Make the inputs (untimed), warm up, and time every size ``iv.repeats`` times.

    Sequential: all repeats of a size, then the next size (one size's inputs
    alive at a time).  Interleaved: every size's inputs are made first and
    kept; each round then times every size once, in an order drawn from
    ``iv.rng``, so a change of the machine's speed during the run spreads
    over all sizes instead of bending the curve.
    """
    k = len(iv.sizes)
    raw = np.empty((k, iv.repeats))
    warm: list[_Warm] = []
    if iv.rng is None:
        for i, n in enumerate(iv.sizes):
            args = _inputs(make_input, n)
            warm.append(_warm_up(fn, args, n, iv, perf))
            with _gc_paused(), _calling(n):
                for r in range(iv.repeats):
                    raw[i, r] = _timed(fn, args, warm[-1].loops, perf)
                    _step(iv, n)
            del args
    else:
        inputs = [_inputs(make_input, n) for n in iv.sizes]
        warm = [_warm_up(fn, a, n, iv, perf) for a, n in zip(inputs, iv.sizes, strict=True)]
        for r in range(iv.repeats):
            with _gc_paused():
                for i in iv.rng.permutation(k):
                    with _calling(iv.sizes[i]):
                        raw[i, r] = _timed(fn, inputs[i], warm[i].loops, perf)
                    _step(iv, iv.sizes[i])
        del inputs
    if not (raw > 0).all():  # pragma: no cover - perf_counter has sub-microsecond resolution
        raise InvalidArgument(
            "a timed call took no measurable time; raise `min_time` so that repeats are timed "
            "over several calls"
        )
    peaks = np.array([w.peak for w in warm], dtype=np.int64) if iv.memory else None
    return _Timings(raw, tuple(w.loops for w in warm), peaks)


def measure(
    fn: Callable,
    sizes: Sequence[int],
    *,
    make_input: Callable[[int], Any],
    repeats: int = 6,
    warmup: int = 1,
    statistic: str = "median",
    min_time: float = 0.01,
    memory: bool = True,
    clock: str = "wall",
    cost=None,
    cost_unit: str = "flop",
    label: str | None = None,
    order: str = "interleaved",
    seed=0,
    progress: Callable[[int], Any] | None = None,
) -> Measurement:
    """Time ``fn`` at each size and record its peak memory (claims C2, C3).

    For each n in ``sizes``: ``args = make_input(n)`` (untimed; a tuple is
    unpacked into positional arguments, anything else is passed as the single
    argument) and ``warmup`` untimed calls.  Then ``repeats`` timed repeats
    per size with the garbage collector paused.  A repeat runs ``fn``
    ``loops`` times in a row, ``loops`` chosen from the last warm-up call so
    that a repeat lasts at least ``min_time`` seconds (1 when ``warmup`` is
    0); its time is divided by ``loops``.  The per-size time is the
    ``statistic`` (median or min) of the repeats.

    ``order="interleaved"`` (the default) makes the repeats *rounds* over
    every size in a random order; memory comes from one untimed traced call
    (both explained in the module docstring).

    Parameters
    ----------
    fn : callable
        The function to time.
    sizes : sequence of int
        Strictly increasing sizes, at least 2 (e.g. :func:`geometric_sizes`).
    make_input : callable
        ``make_input(n)`` returns the arguments for size n.
    repeats : int, default 6
        Timed repeats (rounds) per size (>= 1; default 6, the fewest whose
        per-round interval reaches 95%).
    warmup : int, default 1
        Untimed calls before timing (>= 0).
    statistic : {"median", "min"}, default "median"
        Per-size statistic of the repeats (the minimum estimates the undisturbed cost).
    min_time : float, default 0.01
        Minimum duration of one repeat in seconds (>= 0).
    memory : bool, default True
        Whether to run the tracemalloc pass.
    clock : {"wall", "cpu"}, default "wall"
        ``"wall"``: elapsed time (:func:`time.perf_counter`).  ``"cpu"``: CPU
        time of the process (:func:`time.process_time`), which does not
        count waiting for a CPU; it adds up BLAS threads, so use it with one.
    cost : callable or array_like or None, default None
        The cost model: ``cost(n)`` or one operation count per size.
    cost_unit : str, default "flop"
        What ``cost`` counts, for the tables and plots (default ``"flop"``).
    label : str or None, default None
        Name of the measurement (default: ``fn.__name__``).
    order : {"interleaved", "sequential"}, default "interleaved"
        How the repeats are laid out (see above).
    seed : int, SeedSequence or Generator, default 0
        Seed of the order of the sizes in each round (interleaved only).
    progress : callable or None, default None
        Called with the size n after each timed repeat at n (to advance a progress bar).

    Returns
    -------
    Measurement

    Raises
    ------
    InvalidArgument
        For bad arguments, and when ``fn``, ``make_input`` or ``cost`` raises (naming
        it, the size and the exception; kernelcheck's own errors pass through).

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
        order,
        seed,
        progress,
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
        order=order,
    )
