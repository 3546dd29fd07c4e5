"""Unit tests of kernelcheck.scaling: measure, fit_exponent, reports, bad input.

No test here asserts a wall-clock time: timings are only checked for their
structure (shapes, the statistic applied to the repeats), and the fitted
exponents are checked on synthetic values whose exponent is known.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from kernelcheck.errors import InvalidArgument
from kernelcheck.scaling import (
    ExponentFit,
    Measurement,
    fit_exponent,
    geometric_sizes,
    measure,
    plot_measurements,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------
# geometric_sizes
# ---------------------------------------------------------------------------


def test_geometric_sizes_doubling_and_num():
    sizes = geometric_sizes(3, 50)
    assert sizes == tuple(3 * 2**k for k in range(5))
    sizes = geometric_sizes(100, 100_000, num=4)
    ratios = np.diff(np.log(sizes))
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-2)
    assert sizes[0] == 100 and sizes[-1] == 100_000


@pytest.mark.parametrize(
    "args, kwargs",
    [((0, 10), {}), ((10, 10), {}), ((10, 5), {}), ((1.5, 10), {}), ((1, 10), {"num": 1})],
)
def test_geometric_sizes_bad_input(args, kwargs):
    with pytest.raises(InvalidArgument):
        geometric_sizes(*args, **kwargs)


# ---------------------------------------------------------------------------
# fit_exponent on values whose exponent is known
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("p", [-0.5, 0.0, 1.0, 1.5, 2.0, 3.0])
def test_fit_exponent_exact_power_law(p):
    n = np.array(geometric_sizes(16, 4096))
    fit = fit_exponent(n, 1e-6 * n**p)
    assert math.isclose(fit.slope, p, abs_tol=1e-12)
    assert math.isclose(fit.low, p, abs_tol=1e-12) and math.isclose(fit.high, p, abs_tol=1e-12)
    np.testing.assert_allclose(fit.predict(n), 1e-6 * n**p, rtol=1e-10)
    assert fit.verdict == "not judged" and fit.passed is None


def test_fit_exponent_verdicts():
    n = np.array([100, 200, 400, 800, 1600])
    noise = np.array([1.0, 1.05, 0.97, 1.03, 1.0])
    vals = n**2.0 * noise
    fit = fit_exponent(n, vals)
    assert fit.low < 2.0 < fit.high
    assert fit_exponent(n, vals, expected=(fit.low - 0.1, fit.high + 0.1)).verdict == "pass"
    failing = fit_exponent(n, vals, expected=(fit.high + 0.1, fit.high + 0.2))
    assert failing.verdict == "fail" and failing.passed is False
    middle = (fit.low + fit.high) / 2
    partial = fit_exponent(n, vals, expected=(middle, fit.high + 1))
    assert partial.verdict == "inconclusive" and partial.passed is False
    assert "expected" in str(partial) and "inconclusive" in str(partial)


def test_fit_exponent_uses_the_stated_statistic():
    n = np.array([10, 20, 40, 80])
    rng = np.random.default_rng(5)
    vals = n[:, None] ** 1.0 * np.exp(rng.normal(0, 0.1, (4, 7)))
    by_median = fit_exponent(n, vals, statistic="median")
    by_min = fit_exponent(n, vals, statistic="min")
    np.testing.assert_array_equal(by_median.values, np.median(vals, axis=1))
    np.testing.assert_array_equal(by_min.values, vals.min(axis=1))
    # The same numbers fitted as one value per size give the same slope.
    assert by_min.slope == fit_exponent(n, vals.min(axis=1)).slope
    assert by_median.statistic == "median" and by_min.statistic == "min"


def test_fit_exponent_bootstrap_is_seeded_and_brackets_the_slope():
    n = np.array([64, 128, 256, 512, 1024])
    rng = np.random.default_rng(1)
    vals = 1e-7 * n[:, None] ** 1.3 * np.exp(rng.normal(0, 0.05, (5, 6)))
    a = fit_exponent(n, vals, method="bootstrap", seed=3)
    b = fit_exponent(n, vals, method="bootstrap", seed=np.random.default_rng(3))
    c = fit_exponent(n, vals, method="bootstrap", seed=4)
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low <= a.slope <= a.high
    assert a.slope == fit_exponent(n, vals).slope  # the point estimate does not depend on the CI


def test_fit_exponent_result_serialises():
    n = np.array([10, 20, 40])
    fit = fit_exponent(n, n**1.0, expected=(0.9, 1.1))
    d = json.loads(fit.to_json())
    assert d["verdict"] == "pass" and d["sizes"] == [10, 20, 40]
    assert isinstance(fit, ExponentFit) and fit.contains(1.0) and not fit.contains(1.2)


@pytest.mark.parametrize(
    "sizes, values, kwargs",
    [
        ([10, 20], [1.0, 2.0], {}),  # fewer than 3 sizes
        ([10, 10, 20], [1.0, 1.0, 2.0], {}),  # not strictly increasing
        ([10, 5, 20], [1.0, 1.0, 2.0], {}),
        ([10, 20, 40.0], [1.0, 2.0, 3.0], {}),  # float size
        ([0, 20, 40], [1.0, 2.0, 3.0], {}),
        ("abc", [1.0, 2.0, 3.0], {}),
        ([10, 20, 40], [1.0, 2.0], {}),  # length mismatch
        ([10, 20, 40], [1.0, 0.0, 3.0], {}),  # log of zero
        ([10, 20, 40], [1.0, -2.0, 3.0], {}),
        ([10, 20, 40], [1.0, np.nan, 3.0], {}),
        ([10, 20, 40], [1.0, np.inf, 3.0], {}),
        ([10, 20, 40], np.ones((3, 2, 2)), {}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"confidence": 1.0}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"confidence": 0}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"method": "ols"}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"statistic": "mean"}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"method": "bootstrap"}),  # needs repeats
        ([10, 20, 40], np.ones((3, 1)), {"method": "bootstrap"}),
        ([10, 20, 40], np.ones((3, 4)), {"method": "bootstrap", "seed": None}),
        ([10, 20, 40], np.ones((3, 4)), {"method": "bootstrap", "n_resamples": 5}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"expected": (2.0, 1.0)}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"expected": 2.0}),
        ([10, 20, 40], [1.0, 2.0, 3.0], {"expected": (1.0, np.nan)}),
    ],
)
def test_fit_exponent_bad_input(sizes, values, kwargs):
    with pytest.raises(InvalidArgument) as info:
        fit_exponent(sizes, values, **kwargs)
    assert "`" in str(info.value)  # the message names the argument


# ---------------------------------------------------------------------------
# measure
# ---------------------------------------------------------------------------


class _Counter:
    """A function that counts its calls per size and allocates 8 n^2 bytes."""

    def __init__(self):
        self.calls: dict[int, int] = {}
        self.inputs: dict[int, int] = {}

    def make_input(self, n):
        self.inputs[n] = self.inputs.get(n, 0) + 1
        return (n, 3)

    def __call__(self, n, extra):
        assert extra == 3  # the tuple from make_input is unpacked
        self.calls[n] = self.calls.get(n, 0) + 1
        return np.ones((n, n))


def test_measure_calls_warmup_loops_repeats_and_memory_pass():
    f = _Counter()
    sizes = (16, 32, 64)
    m = measure(f, sizes, make_input=f.make_input, repeats=4, warmup=2, min_time=0.001)
    assert isinstance(m, Measurement)
    assert m.sizes == sizes and m.raw_times.shape == (3, 4) and len(m.loops) == 3
    for n, loops in zip(sizes, m.loops, strict=True):
        assert loops >= 1
        assert f.inputs[n] == 1
        # the traced call (the first warm-up), one more warm-up, the timed calls
        assert f.calls[n] == 1 + 1 + 4 * loops
    np.testing.assert_array_equal(m.times, np.median(m.raw_times, axis=1))
    assert (m.raw_times > 0).all()


def test_measure_interleaves_the_sizes_in_a_fresh_random_order_each_round():
    calls = []
    sizes = (1, 2, 3, 4, 5)
    kw = dict(make_input=lambda n: (n,), warmup=0, memory=False, min_time=0, repeats=8)
    measure(calls.append, sizes, seed=3, **kw)
    rounds = [tuple(calls[i : i + 5]) for i in range(0, 40, 5)]
    assert all(sorted(r) == list(sizes) for r in rounds)  # every round times every size once
    assert len(set(rounds)) > 1  # in orders that change from round to round
    again = []
    measure(again.append, sizes, seed=3, **kw)
    assert again == calls  # the order is seeded
    seq = []
    m = measure(seq.append, sizes, order="sequential", **kw)
    assert seq == [n for n in sizes for _ in range(8)] and m.order == "sequential"
    assert m.default_method() == "theil-sen"


def test_measure_reports_each_timed_repeat_to_progress():
    seen = []
    sizes = (8, 16, 32)
    measure(
        len, sizes, make_input=lambda n: ([0] * n,), repeats=3, memory=False, progress=seen.append
    )
    assert sorted(seen) == sorted(list(sizes) * 3)


def test_measure_min_statistic_and_single_argument():
    seen = []
    m = measure(
        lambda x: seen.append(type(x)),
        [1, 2, 3],
        make_input=lambda n: [n] * n,
        repeats=3,
        warmup=0,
        statistic="min",
        memory=False,
    )
    np.testing.assert_array_equal(m.times, m.raw_times.min(axis=1))
    assert seen and all(t is list for t in seen)  # a non-tuple input is one argument
    assert m.loops == (1, 1, 1)  # no warm-up call to calibrate from
    assert m.peak_memory is None and m.memory_exponent() is None


def test_measure_peak_memory_counts_the_arrays_a_call_allocates():
    f = _Counter()
    sizes = (100, 200, 400, 800)
    m = measure(f, sizes, make_input=f.make_input, repeats=1, warmup=0)
    n = np.array(sizes)
    out_bytes = 8 * n**2  # the (n, n) float64 output
    assert (m.peak_memory >= out_bytes).all()
    # Beyond the array buffer, only the array object and tracemalloc's own
    # bookkeeping are traced: a few KiB at most.
    assert (m.peak_memory - out_bytes <= 16 * 1024).all()
    mem = m.memory_exponent()
    assert abs(mem.slope - 2.0) < 0.01


def test_measure_cost_model_callable_or_array():
    sizes = (10, 20, 40)
    flops = [7.0 * n**2 for n in sizes]
    a = measure(
        lambda n: None,
        sizes,
        make_input=lambda n: (n,),
        repeats=1,
        memory=False,
        cost=lambda n: 7.0 * n**2,
        label="noop",
    )
    b = measure(
        lambda n: None, sizes, make_input=lambda n: (n,), repeats=1, memory=False, cost=flops
    )
    np.testing.assert_array_equal(a.model_flops, flops)
    np.testing.assert_array_equal(b.model_flops, flops)
    np.testing.assert_allclose(a.throughput(), a.model_flops / a.times)
    assert abs(a.model_exponent().slope - 2.0) < 1e-12
    assert a.label == "noop" and b.label == "<lambda>"


def test_measure_cpu_clock_counts_work_not_waiting():
    import time

    # Sleeping uses no CPU: the cpu clock sees (almost) nothing, the wall clock the sleep.
    kw = dict(make_input=lambda n: (n * 1e-3,), repeats=1, warmup=0, memory=False)
    wall = measure(time.sleep, [2, 4, 8], clock="wall", **kw)
    cpu = measure(time.sleep, [2, 4, 8], clock="cpu", **kw)
    assert wall.clock == "wall" and cpu.clock == "cpu"
    assert (cpu.times < wall.times).all()


def test_measurement_reports():
    f = _Counter()
    m = measure(
        f,
        (8, 16, 32),
        make_input=f.make_input,
        repeats=2,
        cost=lambda n: float(n * n),
        label="ones",
    )
    d = json.loads(m.to_json())
    assert d["sizes"] == [8, 16, 32] and len(d["raw_times"]) == 3
    md = m.to_markdown()
    for n in (8, 16, 32):
        assert f"| {n} |" in md
    assert "Gflop/s" in md and "peak memory" in md and "exponent" in md
    assert str(m).startswith("ones: time exponent")


def _bad_measure_calls():
    ok = {"make_input": lambda n: (n,)}
    return [
        ((None, [1, 2]), ok),
        ((len, [1]), ok),
        ((len, [2, 1]), ok),
        ((len, [1, -2]), ok),
        ((len, [1, 2]), {"make_input": 3}),
        ((len, [1, 2]), {**ok, "repeats": 0}),
        ((len, [1, 2]), {**ok, "repeats": 2.0}),
        ((len, [1, 2]), {**ok, "warmup": -1}),
        ((len, [1, 2]), {**ok, "statistic": "mean"}),
        ((len, [1, 2]), {**ok, "min_time": -1.0}),
        ((len, [1, 2]), {**ok, "cost": [1.0]}),
        ((len, [1, 2]), {**ok, "cost": [1.0, -1.0]}),
        ((len, [1, 2]), {**ok, "cost": [1.0, np.nan]}),
        ((len, [1, 2]), {**ok, "cost": lambda n: 0.0}),
        ((len, [1, 2]), {**ok, "label": 5}),
        ((len, [1, 2]), {**ok, "clock": "monotonic"}),
        ((len, [1, 2]), {**ok, "cost_unit": ""}),
        ((len, [1, 2]), {**ok, "order": "random"}),
        ((len, [1, 2]), {**ok, "seed": None}),
        ((len, [1, 2]), {**ok, "progress": 3}),
    ]


@pytest.mark.parametrize("args, kwargs", _bad_measure_calls())
def test_measure_bad_input(args, kwargs):
    with pytest.raises(InvalidArgument) as info:
        measure(*args, **kwargs)
    assert "`" in str(info.value)


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------


def test_plot_writes_png_atomically(tmp_path):
    pytest.importorskip("matplotlib")
    f = _Counter()
    m = measure(f, (8, 16, 32), make_input=f.make_input, repeats=2, cost=lambda n: float(n**2))
    path = m.plot(tmp_path / "m.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
    plot_measurements([m, m], tmp_path / "two.png", title="twice")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.png", "two.png"]  # no temp files


def test_plot_without_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    f = _Counter()
    m = measure(f, (8, 16, 32), make_input=f.make_input, repeats=1)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'kernelcheck-attention\[plots\]'"):
        m.plot(tmp_path / "m.png")
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------
# run_scaling (tiny sizes: structure only, no verdict asserted)
# ---------------------------------------------------------------------------


def test_run_scaling_report_and_files(tmp_path):
    from kernelcheck.attention import cost_model
    from kernelcheck.scaling import ScalingReport, run_scaling

    lines = []
    report = run_scaling(
        sizes=(32, 64, 128),
        num_features=8,
        chunk_size=16,
        repeats=2,
        forms=("softmax", "chunked"),
        out=tmp_path / "run",
        progress=lines.append,
    )
    assert isinstance(report, ScalingReport)
    assert [f.form for f in report.forms] == ["softmax", "chunked"]
    assert len(lines) == 2 and lines[0].startswith("softmax, bidirectional (C2)")
    for f in report.forms:
        assert f.measurement.sizes == (32, 64, 128)
        assert f.measurement.order == "interleaved" and f.time_fit.method == "rounds"
        # three sizes spanning a factor 4: no verdict, whatever the clock says
        assert f.verdict == "not judged" and f.accepted is None and not f.passed
        assert f.outcome.value == "inconclusive"
        assert "3 sizes" in f.reason and "at least 5" in f.reason
        flops = [cost_model(f.form, n, 64, 8, 64, 16, causal=f.causal).flops for n in (32, 64, 128)]
        np.testing.assert_array_equal(f.measurement.model_flops, flops)
        thr = f.measurement.throughput()
        assert f.cost_spread == pytest.approx(thr.max() / thr.min())
    chunked = report.forms[1]
    assert len(set(chunked.state_size)) == 1  # C11: the state does not grow with n
    assert report.outcome.value == "inconclusive" and not report.passed
    files = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert files == ["scaling.json", "scaling.md", "scaling.png"]
    saved = json.loads((tmp_path / "run" / "scaling.json").read_text())
    assert saved["sizes"] == {"quadratic": [32, 64, 128], "linear": [32, 64, 128]}
    assert len(saved["forms"]) == 2
    assert saved["environment"]["blas_threads"] == 1
    assert saved["environment"]["clock"] == "cpu"
    md = (tmp_path / "run" / "scaling.md").read_text()
    assert "| softmax, bidirectional | C2 | 32..128 |" in md and "scaling.png" in md
    assert "not judged" in md and "3 sizes; a timing verdict needs at least 5" in md
    assert str(report).startswith("scaling inconclusive: ")


def test_run_scaling_judges_against_the_accepted_range_of_its_sizes():
    from kernelcheck.scaling import accepted_range, run_scaling

    sizes = (64, 91, 128, 181, 256, 362, 512)  # a factor 8: 1 +- 1/3
    report = run_scaling(sizes=sizes, num_features=4, d=4, repeats=6, forms=("parallel",))
    f = report.forms[0]
    rng = accepted_range(1.0, sizes)
    assert f.accepted == pytest.approx((1 - 1 / 3, 1 + 1 / 3)) and f.accepted == rng.pair()
    assert f.time_fit.expected == f.accepted and f.verdict == f.time_fit.verdict
    assert f.verdict in ("pass", "fail", "inconclusive") and f.reason == ""
    assert f.time_fit.coverage == pytest.approx(1 - 2 * 0.5**6)
    # the per-size table shows the minimum of the rounds; the fit uses every round
    np.testing.assert_array_equal(f.measurement.times, f.measurement.raw_times.min(axis=1))
    assert f.measurement.raw_times.shape == (len(sizes), 6)


def test_run_scaling_sizes_by_kind_and_the_defaults():
    from kernelcheck.scaling import DEFAULT_SIZES, QUICK_SIZES, accepted_range

    for table in (DEFAULT_SIZES, QUICK_SIZES):
        for kind, p in (("quadratic", 2.0), ("linear", 1.0)):
            r = accepted_range(p, table[kind])
            assert r.judged and r.high - r.low <= 2 / 3 + 1e-12
    # a linear form is timed over a wider range than an exact one, so its range is narrower
    assert (
        DEFAULT_SIZES["linear"][-1] / DEFAULT_SIZES["linear"][0]
        > DEFAULT_SIZES["quadratic"][-1] / DEFAULT_SIZES["quadratic"][0]
    )


def test_run_scaling_asks_before_a_long_run_and_draws_nothing_first(monkeypatch):
    from kernelcheck._src.scaling import forms
    from kernelcheck.scaling import run_scaling

    drawn = []
    real = forms.Inputs._exact

    def spy(self):
        drawn.append(self.largest["quadratic"])
        return real(self)

    monkeypatch.setattr(forms.Inputs, "_exact", spy)
    sizes = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
    with pytest.raises(InvalidArgument, match=r"would take about .* pass yes=True"):
        run_scaling(sizes=sizes, forms=("softmax",), repeats=6)
    assert drawn == [1024]  # only the pilot's inputs, at the smallest size


def test_run_scaling_threads_none_and_memory_holds_the_output():
    from kernelcheck.scaling import run_scaling

    report = run_scaling(
        sizes=(16, 32, 64), num_features=4, repeats=1, forms=("parallel",), threads=None, seed=7
    )
    m = report.forms[0].measurement
    # The traced call allocates at least its (n, d_v) float64 output.
    assert (m.peak_memory >= 8 * np.array(m.sizes) * report.d_v).all()
    assert report.environment["blas_threads"] is None
    assert report.environment["clock"] == "wall"  # CPU time would add up spinning BLAS threads
    assert m.clock == "wall"
    assert any("library default" in note for note in report.notes)


def test_run_scaling_without_matplotlib_writes_the_report_and_says_why_no_plot(
    tmp_path, monkeypatch
):
    """Without matplotlib the report is written whole, with a note instead of the plot."""
    from kernelcheck.scaling import run_scaling

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "run"
    report = run_scaling(
        sizes=(16, 32, 64), num_features=4, repeats=1, forms=("parallel",), out=out
    )
    assert report.plot_path is None
    assert any("pip install 'kernelcheck-attention[plots]'" in note for note in report.notes)
    assert sorted(p.name for p in out.iterdir()) == ["scaling.json", "scaling.md"]
    assert "scaling.png" not in (out / "scaling.md").read_text()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sizes": (16, 32)},
        {"sizes": (32, 16, 64)},
        {"sizes": {"quadratic": (16, 32, 64)}},
        {"sizes": {"linear": (16, 32, 64), "cubic": (1, 2, 3)}},
        {"yes": 1},
        {"bar": "yes"},
        {"d": 0},
        {"num_features": 0},
        {"chunk_size": 0},
        {"repeats": 0},
        {"statistic": "mean"},
        {"confidence": 2.0},
        {"seed": None},
        {"forms": ("softmax", "quadratic")},
        {"forms": ()},
        {"forms": "softmax"},
        {"threads": 0},
        {"out": 5},
        {"clock": "monotonic"},
    ],
)
def test_run_scaling_bad_input(kwargs):
    from kernelcheck.scaling import run_scaling

    with pytest.raises(InvalidArgument):
        run_scaling(**{"sizes": (16, 32, 64), "forms": ("parallel",), **kwargs})


def test_run_scaling_out_must_be_a_folder(tmp_path):
    from kernelcheck.scaling import run_scaling

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InvalidArgument, match=r"^`out` must be a folder, but .* is a file"):
        run_scaling(sizes=(16, 32, 64), forms=("parallel",), out=f)


def test_the_scaling_plot_reads_back_with_fits_and_theory_slopes():
    pytest.importorskip("matplotlib")
    from kernelcheck._src.scaling.plot import figure
    from kernelcheck.scaling import run_scaling

    sizes = (64, 91, 128, 181, 256)
    report = run_scaling(sizes=sizes, forms=("softmax", "parallel"), d=4, num_features=4, repeats=6)
    fig = figure([f.measurement for f in report.forms], "t", theory=[2.0, 1.0])
    time_ax = fig.axes[0]
    assert time_ax.get_xlabel() and time_ax.get_ylabel()
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)
    lines = {ln.get_label(): np.asarray(ln.get_xydata(), dtype=float) for ln in time_ax.lines}
    for ax in fig.axes:
        for ln in ax.lines:
            assert np.isfinite(np.asarray(ln.get_xydata(), dtype=float)).all()
    for f, p in zip(report.forms, (2.0, 1.0), strict=True):
        theory = lines[f"{f.name}: theory n^{p:g}"]
        lx, ly = np.log(theory[:, 0]), np.log(theory[:, 1])
        assert (ly[-1] - ly[0]) / (lx[-1] - lx[0]) == pytest.approx(p, rel=1e-9)
        fitted = next(xy for label, xy in lines.items() if label.startswith(f"{f.name}: p="))
        lx, ly = np.log(fitted[:, 0]), np.log(fitted[:, 1])
        assert (ly[-1] - ly[0]) / (lx[-1] - lx[0]) == pytest.approx(f.time_fit.slope, rel=1e-9)
