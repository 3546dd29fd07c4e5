"""Measured complexity: time and memory against n, log-log slopes with intervals.

Claims C2 (exact attention costs O(n^2 d) per sequence), C3 (linear attention
costs O(n d), more exactly O(n D d_v)) and C11 (the recurrent state does not grow
with n) are statements about how cost grows with the sequence length n.  This
module measures that growth on real runs and says how sure it is:

* :func:`measure` runs a function over a grid of sizes (warm-up, repeats, a
  robust per-size statistic), then, in a separate pass, records the peak
  memory allocated during one call with :mod:`tracemalloc`;
* :func:`fit_exponent` fits ``value ~ c n^p`` on the log-log scale with a
  robust slope estimator (Theil-Sen) and a confidence interval (Sen's
  Kendall-tau interval, or a bootstrap over the repeats);
* :func:`run_scaling` measures softmax against linear attention with the
  library's attention forms and puts the clock next to each form's cost model.

What an interval means.  The interval accounts for run-to-run noise only.  A
fixed overhead (Python calls, allocation, cache effects at small n) bends the
log-log curve; no interval can turn a bent curve into a power law.  The remedy
used here is to measure where the asymptotic regime holds (large enough n and a
workload per call that dominates the fixed costs) and to show the achieved
throughput against the cost model per size, so that a bend is visible.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import math
import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from kernelcheck._src.attention.registry import cost_model, get_form
from kernelcheck._src.core.outcome import Outcome, exit_code
from kernelcheck._src.core.report import (
    PLOTS_SKIPPED,
    PlotsUnavailable,
    environment,
    new_figure,
    render_plots,
    write_bundle,
)
from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.validate import (
    OWN_ERRORS,
    as_array,
    as_bool,
    as_int,
    as_probability,
    as_real,
    as_rng,
    call_user,
    check_callable,
    check_choice,
    check_size,
    describe,
)
from kernelcheck.errors import InvalidArgument

__all__ = [
    "STATISTICS",
    "FIT_METHODS",
    "CLOCKS",
    "geometric_sizes",
    "measure",
    "fit_exponent",
    "plot_measurements",
    "Measurement",
    "ExponentFit",
    "FormScaling",
    "ScalingReport",
    "run_scaling",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "EXPECTED_EXPONENTS",
    "SCALING_FORMS",
    "DEFAULT_FORMS",
]

#: Per-size statistics of the repeated timings.
STATISTICS = ("median", "min")
#: Methods for the confidence interval of a fitted exponent.
FIT_METHODS = ("theil-sen", "bootstrap")
#: Clocks :func:`measure` can read: elapsed time, or CPU time of the process.
CLOCKS = ("wall", "cpu")
_CLOCK_FUNCTIONS = {"wall": time.perf_counter, "cpu": time.process_time}

_MAX_LOOPS = 1_000_000
#: Largest size n accepted: integers up to 2**53 are exact in float64, where the fits work.
_MAX_SIZE = 2**53
# ---------------------------------------------------------------------------
# Grid of sizes
# ---------------------------------------------------------------------------


def geometric_sizes(start: int, stop: int, *, num: int | None = None) -> tuple[int, ...]:
    """A geometric grid of integer sizes from ``start`` to ``stop``.

    Parameters
    ----------
    start, stop : int
        First and last size, ``1 <= start < stop <= 2**53``.
    num : int, optional
        Number of sizes (``>= 2``, at most ``stop - start + 1``), spaced evenly
        in ``log n`` and rounded to integers (duplicates after rounding are
        dropped).  Default: the
        doubling grid ``start, 2 start, 4 start, ...`` up to ``stop``
        (``stop`` itself is included only when it is on the grid).

    Returns
    -------
    tuple of int
        Strictly increasing sizes.

    Examples
    --------
    >>> geometric_sizes(1024, 16384)
    (1024, 2048, 4096, 8192, 16384)
    >>> geometric_sizes(10, 1000, num=3)
    (10, 100, 1000)
    """
    start = as_int(start, "start", minimum=1, maximum=_MAX_SIZE)
    stop = as_int(stop, "stop", minimum=1, maximum=_MAX_SIZE)
    if stop <= start:
        raise InvalidArgument(f"`stop` must be larger than `start` = {start}, got {stop}")
    if num is None:
        out = []
        n = start
        while n <= stop:
            out.append(n)
            n *= 2
        if len(out) < 2:  # pragma: no cover - stop > start guarantees two for doubling
            out.append(stop)
        return tuple(out)
    num = as_int(num, "num", minimum=2)
    if num > stop - start + 1:
        raise InvalidArgument(
            f"`num` must be at most the {stop - start + 1} integers from `start` = {start} to "
            f"`stop` = {stop}, got {num}"
        )
    grid = np.rint(np.geomspace(start, stop, num)).astype(np.int64)
    return tuple(int(v) for v in np.unique(grid))


def _sizes_iv(sizes: Any, name: str = "sizes", *, minimum_count: int = 2) -> tuple[int, ...]:
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__"):
        raise InvalidArgument(
            f"`{name}` must be a sequence of positive integers, got {describe(sizes)}"
        )
    out = []
    for i, s in enumerate(sizes):
        if isinstance(s, (np.integer,)):
            s = int(s)
        out.append(as_int(s, f"{name}[{i}]", minimum=1, maximum=_MAX_SIZE))
    if len(out) < minimum_count:
        raise InvalidArgument(
            f"`{name}` must hold at least {minimum_count} sizes to fit an exponent, got {len(out)}"
        )
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise InvalidArgument(f"`{name}` must be strictly increasing, got {tuple(out)}")
    return tuple(out)


# ---------------------------------------------------------------------------
# Fitting an exponent
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ExponentFit(ResultMixin):
    """A fitted power law ``value ~ exp(intercept) * n**slope`` with an interval.

    Attributes
    ----------
    slope : float
        The fitted exponent p (Theil-Sen: the median of the pairwise log-log
        slopes).
    low, high : float
        The confidence interval for p at level ``confidence``.
    intercept : float
        Natural-log intercept: ``log value ~ intercept + slope * log n``.
    confidence : float
        Confidence level of ``[low, high]``.
    method : str
        ``"theil-sen"`` (Sen's Kendall-tau interval, as in
        :func:`scipy.stats.theilslopes`) or ``"bootstrap"`` (percentile
        interval over resampled repeats).
    statistic : str
        The per-size statistic the fit used (``"median"``, ``"min"``, or
        ``"value"`` when one value per size was given).
    sizes : numpy.ndarray
        The sizes n, shape (k,).
    values : numpy.ndarray
        The per-size values fitted, shape (k,).
    expected : tuple of float or None
        The range the exponent was expected in, if one was given.
    verdict : str
        ``"pass"`` (the whole interval lies inside ``expected``), ``"fail"``
        (the interval misses ``expected`` entirely), ``"inconclusive"``
        (they overlap) or ``"not judged"`` (no range given).
    passed : bool or None
        ``verdict == "pass"``; None when not judged.
    """

    slope: float
    low: float
    high: float
    intercept: float
    confidence: float
    method: str
    statistic: str
    sizes: np.ndarray
    values: np.ndarray
    expected: tuple[float, float] | None = None
    verdict: str = "not judged"
    passed: bool | None = None

    @property
    def outcome(self) -> Outcome:
        """``pass`` verified, ``fail`` refuted; ``inconclusive`` and ``not judged`` inconclusive."""
        return _OUTCOMES.get(self.verdict, Outcome.INCONCLUSIVE)

    def predict(self, n) -> np.ndarray:
        """The fitted law ``exp(intercept) * n**slope`` at sizes ``n``."""
        n = np.asarray(n, dtype=np.float64)
        return np.exp(self.intercept) * n**self.slope

    def contains(self, p: float) -> bool:
        """Whether the exponent ``p`` lies in the confidence interval."""
        return bool(self.low <= p <= self.high)

    @property
    def half_width(self) -> float:
        """Half the width of the confidence interval."""
        return (self.high - self.low) / 2.0

    def __str__(self) -> str:
        text = (
            f"exponent {self.slope:.3f} [{self.low:.3f}, {self.high:.3f}] "
            f"({self.confidence:.0%} {self.method}, {len(self.sizes)} sizes "
            f"{int(self.sizes[0])}..{int(self.sizes[-1])})"
        )
        if self.expected is not None:
            text += f"; expected [{self.expected[0]:g}, {self.expected[1]:g}]: {self.verdict}"
        return text


def _pairwise_slopes(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Slopes between every pair of columns with distinct x: Y is (..., k)."""
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    return (Y[..., j[keep]] - Y[..., i[keep]]) / dx[keep]


_OUTCOMES = {"pass": Outcome.VERIFIED, "fail": Outcome.REFUTED}


def _judge(low: float, high: float, expected) -> tuple[str, bool | None]:
    if expected is None:
        return "not judged", None
    lo, hi = expected
    if lo <= low and high <= hi:
        return "pass", True
    if high < lo or low > hi:
        return "fail", False
    return "inconclusive", False


def _expected_iv(expected: Any) -> tuple[float, float] | None:
    if expected is None:
        return None
    if not hasattr(expected, "__len__") or len(expected) != 2:
        raise InvalidArgument(
            f"`expected` must be a pair (low, high) of exponents, got {describe(expected)}"
        )
    lo = as_real(expected[0], "expected[0]")
    hi = as_real(expected[1], "expected[1]")
    if not lo <= hi:
        raise InvalidArgument(f"`expected` must have low <= high, got ({lo}, {hi})")
    return (lo, hi)


def _reduce(values: np.ndarray, statistic: str, axis: int = -1) -> np.ndarray:
    return np.median(values, axis=axis) if statistic == "median" else np.min(values, axis=axis)


def _fit_exponent_iv(sizes, values, confidence, method, statistic, n_resamples, seed, expected):
    sizes = _sizes_iv(sizes, "sizes", minimum_count=3)
    values = as_array(values, "values", dtype=np.float64)
    if values.ndim not in (1, 2) or values.shape[0] != len(sizes):
        raise InvalidArgument(
            f"`values` must have shape ({len(sizes)},) or ({len(sizes)}, repeats) to match "
            f"`sizes`, got {describe(values)}"
        )
    if not (values > 0).all():
        bad = np.argwhere(~(values > 0))[0]
        raise InvalidArgument(
            f"`values` must be positive to take logarithms, got {values[tuple(bad)]!r} at "
            f"index {tuple(int(b) for b in bad)}"
        )
    confidence = as_probability(confidence, "confidence")
    check_choice(method, "method", FIT_METHODS)
    check_choice(statistic, "statistic", STATISTICS)
    n_resamples = as_int(n_resamples, "n_resamples", minimum=100)
    if method == "bootstrap":
        if values.ndim != 2 or values.shape[1] < 2:
            raise InvalidArgument(
                "`method` = 'bootstrap' resamples the repeats at each size, so `values` must "
                f"have shape ({len(sizes)}, repeats) with repeats >= 2, got {describe(values)}"
            )
        rng = as_rng(seed)
        check_size(n_resamples * values.size, f"the {n_resamples} bootstrap resamples")
    else:
        rng = None
    return sizes, values, confidence, n_resamples, rng, _expected_iv(expected)


def fit_exponent(
    sizes: Sequence[int],
    values,
    *,
    confidence: float = 0.95,
    method: str = "theil-sen",
    statistic: str = "median",
    n_resamples: int = 2000,
    seed=0,
    expected: tuple[float, float] | None = None,
) -> ExponentFit:
    r"""Fit ``value ~ c n^p`` on the log-log scale and give an interval for p.

    The exponent p of a cost ``T(n) = c n^p`` is the slope of
    ``log T = log c + p log n``.  The slope is estimated robustly by
    Theil-Sen: the median over pairs of sizes ``i < j`` of
    ``(log T_j - log T_i) / (log n_j - log n_i)``.  One outlying size moves it
    little, unlike a least-squares fit (claims C2, C3).

    Parameters
    ----------
    sizes : sequence of int
        At least 3 strictly increasing sizes n.
    values : array_like, shape (k,) or (k, repeats)
        Positive measured values (seconds, bytes, operations).  With several
        repeats per size, the per-size ``statistic`` is fitted.
    confidence : float
        Confidence level of the interval (default 0.95).
    method : {"theil-sen", "bootstrap"}
        ``"theil-sen"``: Sen's interval from the distribution of Kendall's
        tau (:func:`scipy.stats.theilslopes`), valid for independent errors.
        ``"bootstrap"``: the repeats at each size are resampled with
        replacement ``n_resamples`` times, the per-size statistic and the
        Theil-Sen slope recomputed, and the percentile interval taken
        (needs ``repeats >= 2``; the bootstrap of a minimum is known to be
        rough, prefer ``"median"`` with it).
    statistic : {"median", "min"}
        Per-size statistic of the repeats (ignored for 1-d ``values``).
    n_resamples : int
        Bootstrap resamples (>= 100).
    seed : int, SeedSequence or Generator
        Seed of the bootstrap (unused by ``"theil-sen"``).
    expected : (float, float), optional
        A range for the exponent.  The verdict is ``"pass"`` when the whole
        interval lies inside it, ``"fail"`` when the interval misses it, and
        ``"inconclusive"`` otherwise.

    Returns
    -------
    ExponentFit

    Notes
    -----
    The interval reflects run-to-run noise only, not model error: a fixed
    overhead at small n bends the curve and biases the slope whatever the
    interval says.  Choose sizes where the asymptotic term dominates.

    Examples
    --------
    >>> import numpy as np
    >>> n = np.array([1024, 2048, 4096, 8192])
    >>> fit = fit_exponent(n, 3e-9 * n**2.0, expected=(1.8, 2.2))
    >>> round(fit.slope, 6), fit.verdict
    (2.0, 'pass')
    """
    sizes, values, confidence, n_resamples, rng, expected = _fit_exponent_iv(
        sizes, values, confidence, method, statistic, n_resamples, seed, expected
    )
    x = np.log(np.asarray(sizes, dtype=np.float64))
    if values.ndim == 2:
        per_size = _reduce(values, statistic, axis=1)
        used_statistic = statistic
    else:
        per_size = values
        used_statistic = "value"
    y = np.log(per_size)
    res = stats.theilslopes(y, x, alpha=confidence)
    slope, intercept = float(res.slope), float(res.intercept)
    if method == "theil-sen":
        low, high = float(res.low_slope), float(res.high_slope)
    else:
        k, r = values.shape
        logs = np.log(values)
        idx = rng.integers(0, r, size=(n_resamples, k, r))
        draws = np.take_along_axis(np.broadcast_to(logs, (n_resamples, k, r)), idx, axis=2)
        # log is monotone, so the median / min of the logs is the log of the statistic.
        boot_y = _reduce(draws, statistic, axis=2)
        boot = np.median(_pairwise_slopes(x, boot_y), axis=1)
        a = (1.0 - confidence) / 2.0
        low, high = (float(v) for v in np.quantile(boot, [a, 1.0 - a]))
    low, high = min(low, slope), max(high, slope)
    verdict, passed = _judge(low, high, expected)
    return ExponentFit(
        slope=slope,
        low=low,
        high=high,
        intercept=intercept,
        confidence=confidence,
        method=method,
        statistic=used_statistic,
        sizes=np.asarray(sizes, dtype=np.int64),
        values=per_size,
        expected=expected,
        verdict=verdict,
        passed=passed,
    )


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


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


def _measure_iv(fn, sizes, make_input, repeats, warmup, statistic, min_time, cost, label):
    check_callable(fn, "fn")
    sizes = _sizes_iv(sizes)
    check_callable(make_input, "make_input")
    repeats = as_int(repeats, "repeats", minimum=1)
    warmup = as_int(warmup, "warmup", minimum=0)
    check_choice(statistic, "statistic", STATISTICS)
    min_time = as_real(min_time, "min_time", nonnegative=True)
    if cost is not None:
        if callable(cost):
            flops = [call_user(cost, "`cost`", n) for n in sizes]
        else:
            flops = cost
        flops = as_array(flops, "cost", ndim=1, dtype=np.float64)
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
    return sizes, repeats, warmup, min_time, cost, label


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
    sizes, repeats, warmup, min_time, cost, label = _measure_iv(
        fn, sizes, make_input, repeats, warmup, statistic, min_time, cost, label
    )
    check_choice(clock, "clock", CLOCKS)
    memory = as_bool(memory, "memory")
    if not isinstance(cost_unit, str) or not cost_unit:
        raise InvalidArgument(f"`cost_unit` must be a non-empty string, got {describe(cost_unit)}")
    check_size(len(sizes) * repeats, f"the table of {repeats} timed repeats per size")
    raw = np.empty((len(sizes), repeats))
    loops = []
    peaks = np.empty(len(sizes), dtype=np.int64) if memory else None
    perf = _CLOCK_FUNCTIONS[clock]
    for i, n in enumerate(sizes):
        args = call_user(make_input, "`make_input`", n)
        if not isinstance(args, tuple):
            args = (args,)
        try:
            last = None
            plain_warmup = warmup
            if memory:
                # The traced call is untimed; it is the first warm-up call.
                t0 = perf()
                peaks[i] = _peak_bytes(fn, args)  # type: ignore[index]
                if warmup:
                    last = perf() - t0
                    plain_warmup = warmup - 1
            for _ in range(plain_warmup):
                t0 = perf()
                fn(*args)
                last = perf() - t0
            if last is None or min_time == 0:
                number = 1
            else:
                number = int(min(_MAX_LOOPS, max(1, math.ceil(min_time / max(last, 1e-9)))))
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                for r in range(repeats):
                    t0 = perf()
                    for _ in range(number):
                        fn(*args)
                    raw[i, r] = (perf() - t0) / number
            finally:
                if gc_was_enabled:
                    gc.enable()
        except OWN_ERRORS:
            raise
        except Exception as exc:  # the user's function, timed in a loop: not wrapped per call
            raise InvalidArgument(f"`fn` at n = {n} raised {type(exc).__name__}: {exc}") from exc
        loops.append(number)
        del args
    if not (raw > 0).all():  # pragma: no cover - perf_counter has sub-microsecond resolution
        raise InvalidArgument(
            "a timed call took no measurable time; raise `min_time` so that repeats are timed "
            "over several calls"
        )
    return Measurement(
        label=label,
        sizes=tuple(sizes),
        times=_reduce(raw, statistic, axis=1),
        raw_times=raw,
        statistic=statistic,
        repeats=repeats,
        warmup=warmup,
        loops=tuple(loops),
        peak_memory=peaks,
        model_flops=cost,
        cost_unit=cost_unit,
        clock=clock,
    )


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------


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


def _plot_path_iv(path: Any) -> Path:
    try:
        import matplotlib  # noqa: F401 - honours a None sentinel in sys.modules
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as exc:
        raise PlotsUnavailable(PLOTS_SKIPPED) from exc

    path = Path(path)
    if path.is_dir():
        raise InvalidArgument(f"`path` must be a file, but {str(path)!r} is a folder")
    fmt = path.suffix.lstrip(".").lower() or "png"
    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        raise InvalidArgument(
            f"`path` must end in a suffix matplotlib can write ({', '.join(sorted(supported))}), "
            f"got {path.suffix!r}"
        )
    return path


def plot_measurements(
    measurements: Sequence[Measurement], path, *, title: str | None = None
) -> Path:
    """Log-log plot of time, peak memory and model throughput against n.

    One panel per quantity (time; peak memory when measured; model GFLOP/s
    when a cost model was given), each measurement with its points and its
    fitted power law drawn dashed, the slope in the legend.  The PNG (or any
    format matplotlib infers from the suffix) is written atomically.
    """
    measurements = _plot_iv(measurements, path, title)
    path = _plot_path_iv(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    data = _render(measurements, title, fmt)
    write_bundle(path.parent, {path.name: data}, name="path")
    return path


def _render(measurements: list[Measurement], title: str | None, fmt: str = "png") -> bytes:
    """The plot of :func:`plot_measurements` as bytes in format ``fmt``."""
    from matplotlib.ticker import NullLocator

    has_mem = any(m.peak_memory is not None and (m.peak_memory > 0).all() for m in measurements)
    has_model = any(m.model_flops is not None for m in measurements)
    panels = 1 + has_mem + has_model
    fig = new_figure((5.2 * panels, 4.2))
    axes = fig.subplots(1, panels, squeeze=False)
    axes = axes[0]
    colors = [f"C{i}" for i in range(10)]
    for j, m in enumerate(measurements):
        c = colors[j % len(colors)]
        n = np.asarray(m.sizes, dtype=float)
        ax = axes[0]
        ax.loglog(np.repeat(n, m.repeats), m.raw_times.ravel(), ".", color=c, alpha=0.3)
        fit = m.time_exponent()
        ax.loglog(n, m.times, "o", color=c)
        ax.loglog(
            n,
            fit.predict(n),
            "--",
            color=c,
            label=f"{m.label}: p={fit.slope:.2f} [{fit.low:.2f}, {fit.high:.2f}]",
        )
        k = 1
        if has_mem:
            mem = m.memory_exponent()
            if mem is not None:
                axes[k].loglog(n, m.peak_memory, "o", color=c)
                axes[k].loglog(
                    n, mem.predict(n), "--", color=c, label=f"{m.label}: p={mem.slope:.2f}"
                )
            k += 1
        thr = m.throughput()
        if has_model and thr is not None:
            axes[k].semilogx(n, thr / 1e9, "o-", color=c, label=m.label)
    axes[0].set_xlabel("n")
    first = measurements[0]
    axes[0].set_ylabel(f"{first.clock} time per call, s ({first.statistic} of repeats)")
    axes[0].set_title("time")
    k = 1
    if has_mem:
        axes[k].set_xlabel("n")
        axes[k].set_ylabel("peak allocation, bytes (tracemalloc)")
        axes[k].set_title("peak memory")
        k += 1
    if has_model:
        axes[k].set_xlabel("n")
        units = sorted({m.cost_unit for m in measurements if m.model_flops is not None})
        axes[k].set_ylabel(f"cost-model G{'/'.join(units)} per measured second")
        axes[k].set_title("clock against cost model (flat = as modelled)")
        axes[k].set_ylim(bottom=0)
    ticks = sorted({n for m in measurements for n in m.sizes})
    for ax in axes:
        if len(ticks) <= 12:
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(n) for n in ticks], rotation=30, fontsize=8)
            ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    return buf.getvalue()


# ---------------------------------------------------------------------------
# Softmax against linear attention
# ---------------------------------------------------------------------------

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
        return _OUTCOMES.get(self.verdict, Outcome.INCONCLUSIVE)

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
):
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
    sizes = _sizes_iv(sizes, minimum_count=3)
    d = as_int(d, "d", minimum=1)
    num_features = as_int(num_features, "num_features", minimum=1)
    chunk_size = as_int(chunk_size, "chunk_size", minimum=1)
    if repeats is None:
        repeats = 3
    repeats = as_int(repeats, "repeats", minimum=1)
    check_choice(statistic, "statistic", STATISTICS)
    confidence = as_probability(confidence, "confidence")
    rng = as_rng(seed)
    as_bool(quick, "quick")
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
    return sizes, d, num_features, chunk_size, repeats, confidence, rng, out, forms, threads, clock


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
    sizes, d, D, chunk_size, repeats, confidence, rng, out, forms, threads, clock = _run_scaling_iv(
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
    seeds = rng.integers(0, 2**63 - 1, size=2)
    phi = _feature_map(d, D, int(seeds[0]))

    def make_exact(n):
        g = np.random.default_rng([int(seeds[1]), n])
        return tuple(g.standard_normal((3, n, d)))

    def make_linear(n):
        Q, K, V = make_exact(n)
        return phi(Q), phi(K), V

    def make_gated(n):  # per-token gates in (0.9, 1), as in a gated layer
        g = np.random.default_rng([int(seeds[1]), n, 20]).uniform(0.9, 1.0, size=n)
        return (*make_linear(n), g)

    load_before = _load_average()
    limiter, thread_note = _thread_limit(threads)
    entries = []
    with limiter:
        for key in forms:
            entries.append(
                _measure_form(
                    key,
                    sizes,
                    d,
                    D,
                    chunk_size,
                    repeats,
                    statistic,
                    confidence,
                    make_exact,
                    make_linear,
                    clock,
                    make_gated,
                )
            )
            if progress is not None:
                call_user(progress, "`progress`", str(entries[-1]))
    load_after = _load_average()
    notes: tuple[str, ...] = (
        "Time exponents are Theil-Sen slopes of log time against log n with Sen's "
        f"{confidence:.0%} interval; a form passes when the whole interval lies in the "
        "expected range.",
        f"The linear forms use D = {D} positive random features (computed before timing; the "
        "cost model does not count them): their n x D matrices exceed the caches from the "
        "smallest n on, so every size runs in the same memory regime.",
        f"Clock: {'CPU time of the process' if clock == 'cpu' else 'elapsed (wall) time'}; "
        f"per-size statistic: {statistic} of {repeats} repeats. {thread_note}",
    )
    busy = _busy_note(load_before, load_after, clock)
    if busy:
        notes = notes + (busy,)
    plot_path = None
    report = ScalingReport(
        forms=tuple(entries),
        sizes=tuple(sizes),
        d=d,
        D=D,
        d_v=d,
        chunk_size=chunk_size,
        feature_map=f"positive random features, D = {D}",
        repeats=repeats,
        statistic=statistic,
        confidence=confidence,
        quick=bool(quick),
        environment=environment(
            load_average=[load_before, load_after],
            blas_threads=threads,
            clock=clock,
        ),
        seconds=time.perf_counter() - t_start,
        plot_path=None,
        passed=all(e.passed for e in entries),
        notes=notes,
    )
    if out is not None:
        pngs, note = render_plots(
            lambda: {"scaling.png": _render([f.measurement for f in entries], _TITLE)}
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


def _measure_form(
    key,
    sizes,
    d,
    D,
    chunk_size,
    repeats,
    statistic,
    confidence,
    make_exact,
    make_linear,
    clock,
    make_gated=None,
) -> FormScaling:
    name, form, causal, claim, expected = SCALING_FORMS[key]
    entry = get_form(form)
    kwargs = {"chunk_size": chunk_size} if "chunk_size" in entry.options else {}

    def fn(a, b, V, *required):
        return entry.call(a, b, V, *required, causal=causal, **kwargs)

    def model(n):
        return cost_model(form, n, d, D, d, chunk_size, causal=causal)

    m = measure(
        fn,
        sizes,
        make_input=make_exact
        if entry.inputs == "queries"
        else (make_gated if "gates" in entry.requires else make_linear),
        repeats=repeats,
        warmup=2,
        statistic=statistic,
        cost=lambda n: float(model(n).flops),
        label=name,
        clock=clock,
    )
    tfit = m.time_exponent(confidence=confidence, expected=expected)
    mfit = m.memory_exponent(confidence=confidence)
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
        state_size=tuple(int(model(n).state_size) for n in sizes),
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


def _load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - not on every platform
        return None


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
