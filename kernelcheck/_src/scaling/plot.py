"""Log-log plots of measurements: time, peak memory and model throughput against n.

:func:`render` draws measurements (objects with the attributes of
:class:`~kernelcheck._src.scaling.measure.Measurement`) on a figure from
:func:`~kernelcheck._src.core.report.new_figure`, the one matplotlib guard;
:func:`write_plot` checks the file path and writes the plot through
:func:`~kernelcheck._src.core.report.write_bundle`.  This module reads the
measurements by their attributes and does not import their class, whose
``plot`` method calls it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernelcheck._src.core.report import new_figure, size_ticks, write_bundle
from kernelcheck.errors import InvalidArgument

__all__ = ["render", "write_plot"]


def _plot_path_iv(path: Any) -> tuple[Path, str]:
    """The plot's path and format (its suffix, default png); PlotsUnavailable without matplotlib."""
    supported = new_figure().canvas.get_supported_filetypes()
    path = Path(path)
    if path.is_dir():
        raise InvalidArgument(f"`path` must be a file, but {str(path)!r} is a folder")
    fmt = path.suffix.lstrip(".").lower() or "png"
    if fmt not in supported:
        raise InvalidArgument(
            f"`path` must end in a suffix matplotlib can write ({', '.join(sorted(supported))}), "
            f"got {path.suffix!r}"
        )
    return path, fmt


def write_plot(
    measurements: Sequence[Any], path: Any, title: str | None, theory: Sequence[float] | None = None
) -> Path:
    """Render checked ``measurements`` and write the plot to ``path`` atomically.

    The format is the one the suffix names (png without one).

    Raises
    ------
    PlotsUnavailable
        When matplotlib is not installed (before any check of ``path``).
    InvalidArgument
        When ``path`` is a folder or its suffix is no format matplotlib writes.
    """
    path, fmt = _plot_path_iv(path)
    data = render(measurements, title, fmt, theory=theory)
    write_bundle(path.parent, {path.name: data}, name="path")
    return path


def render(
    measurements: Sequence[Any],
    title: str | None,
    fmt: str = "png",
    *,
    theory: Sequence[float | None] | None = None,
) -> bytes:
    """The plot of :func:`~kernelcheck._src.scaling.measure.plot_measurements` as bytes.

    ``theory`` gives, per measurement, the exponent of its operation count;
    each is drawn as a dotted reference line ``n^p`` through the middle of
    the measurement's fitted line, so a slope off the theory shows.
    """
    fig = figure(measurements, title, theory=theory)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    return buf.getvalue()


def figure(
    measurements: Sequence[Any],
    title: str | None,
    *,
    theory: Sequence[float | None] | None = None,
) -> Any:
    """The matplotlib figure :func:`render` draws (time, memory, cost-model panels)."""
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
        p = None if theory is None else theory[j]
        if p is not None:
            mid = float(np.sqrt(n[0] * n[-1]))
            ref = fit.predict(mid)[()] * (n / mid) ** p
            ax.loglog(n, ref, ":", color=c, alpha=0.8, label=f"{m.label}: theory n^{p:g}")
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
        size_ticks(ax, ticks)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
