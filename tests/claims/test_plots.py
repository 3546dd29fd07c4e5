"""Every plot of the essay report, read back from the drawn figure (C2, C3, C12, C15, C16 ...).

Each claim that provides plot data is drawn with the renderer the report
uses, and the figure is read back: every line holds finite numbers, the axes
are labelled, and where the claim has a fitted exponent its plot shows the
fitted line and the theory slope, the theory line having exactly the theory
exponent on the plot's axes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from kernelcheck._src.claims.checks import attention_cost  # noqa: E402
from kernelcheck._src.claims.essay import plot_figure  # noqa: E402
from kernelcheck._src.claims.registry import CLAIMS  # noqa: E402
from kernelcheck.scaling import run_scaling  # noqa: E402


def _lines(fig):
    (ax,) = fig.axes
    return ax, {line.get_label(): np.asarray(line.get_xydata(), dtype=float) for line in ax.lines}


def _slope(xy: np.ndarray) -> float:
    lx, ly = np.log(xy[:, 0]), np.log(xy[:, 1])
    return float((ly[-1] - ly[0]) / (lx[-1] - lx[0]))


def _check_readable(fig):
    ax, lines = _lines(fig)
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert lines, "a plot with no line"
    for label, xy in lines.items():
        assert xy.ndim == 2 and xy.shape[1] == 2 and len(xy) >= 2, label
        assert np.isfinite(xy).all(), label
        if ax.get_yscale() == "log":
            assert (xy[:, 1] > 0).all(), label
    return ax, lines


@pytest.fixture(scope="module")
def quick_plots():
    out = {}
    for cid, claim in CLAIMS.items():
        r = claim.check("quick")
        if isinstance(r.details.get("plot"), dict):
            out[cid] = r.details["plot"]
    return out


def test_every_quick_plot_reads_back_as_finite_labelled_data(quick_plots):
    assert {"C12", "C15"} <= set(quick_plots)
    for cid, spec in quick_plots.items():
        _check_readable(plot_figure(cid, spec))


def test_c15_shows_the_fit_and_the_theory_slope_minus_one_half(quick_plots):
    ax, lines = _check_readable(plot_figure("C15", quick_plots["C15"]))
    assert ax.get_xscale() == ax.get_yscale() == "log"
    theory = next(xy for label, xy in lines.items() if "theory" in label)
    fit = next(xy for label, xy in lines.items() if label.startswith("fit"))
    assert math.isclose(_slope(theory), -0.5, rel_tol=1e-9)
    points = lines["RMS over draws"]
    np.testing.assert_array_equal(fit[:, 0], points[:, 0])
    # the draws the fit is made from are on the plot, unjoined, and their RMS is the curve
    draws = next(xy for label, xy in lines.items() if label.startswith("each of"))
    (line,) = [ln for ln in ax.lines if ln.get_label().startswith("each of")]
    assert line.get_linestyle() in ("None", "none", "")
    ms = points[:, 0]
    rms = [np.sqrt(np.mean(draws[draws[:, 0] == m, 1] ** 2)) for m in ms]
    np.testing.assert_allclose(points[:, 1], rms, rtol=1e-12)


def test_an_axis_of_whole_numbers_has_whole_ticks(quick_plots):
    ax, _ = _check_readable(plot_figure("C12", quick_plots["C12"]))  # x is the order M
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_an_infinite_value_is_left_out_not_drawn_as_a_category():
    spec = {
        "title": "t",
        "xlabel": "M",
        "ylabel": "error",
        "yscale": "log",
        "series": [{"label": "bound", "x": [0, 1, 2], "y": [float("inf"), 0.5, 0.1]}],
    }
    _, lines = _check_readable(plot_figure("C0", spec))
    np.testing.assert_array_equal(lines["bound"], [[1.0, 0.5], [2.0, 0.1]])


@pytest.mark.parametrize("claim", ["C2", "C3"])
def test_the_timing_plots_show_each_fit_and_its_theory_slope(claim):
    sizes = (64, 91, 128, 181, 256)
    report = run_scaling(
        sizes=sizes, forms=("softmax", "parallel"), d=4, num_features=4, repeats=6, memory=False
    )
    _rows, _measured, spec = attention_cost._measured_rows(report, claim)
    ax, lines = _check_readable(plot_figure(claim, spec))
    assert ax.get_xscale() == ax.get_yscale() == "log"
    form = next(f for f in report.forms if f.claim == claim)
    p = 2.0 if claim == "C2" else 1.0
    theory = lines[f"{form.name}: theory n^{p:g}"]
    assert math.isclose(_slope(theory), p, rel_tol=1e-9)
    fit = next(xy for label, xy in lines.items() if label.startswith(f"{form.name}: fit"))
    assert math.isclose(_slope(fit), form.time_fit.slope, rel_tol=1e-9)
    np.testing.assert_allclose(lines[form.name][:, 1], form.measurement.times)


@pytest.mark.parametrize("claim", ["C2", "C3"])
def test_the_legend_covers_no_data(claim):
    """The timing plots carry up to nine labelled series: their legend stands below the
    axes (and below the x label), never over the data."""
    sizes = (64, 91, 128, 181, 256)
    report = run_scaling(
        sizes=sizes, forms=("softmax", "parallel"), d=4, num_features=4, repeats=2, memory=False
    )
    _rows, _measured, spec = attention_cost._measured_rows(report, claim)
    fig = plot_figure(claim, spec)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert legend is not None and len(legend.get_texts()) == len(spec["series"])
    box = legend.get_window_extent(renderer)
    assert not box.overlaps(ax.get_window_extent(renderer))
    assert not box.overlaps(ax.xaxis.label.get_window_extent(renderer))
