"""The files of an unbiasedness report: plots, ``report.md``, ``report.json`` (C13, C17, C18).

:func:`write_report` renders an :class:`~kernelcheck._src.verify.unbiased.api.UnbiasedReport`
in memory (the plots through the one matplotlib guard of
:mod:`kernelcheck._src.core.report`) and writes the set with
:func:`kernelcheck._src.core.report.write_bundle`; :func:`default_points` gives
the point sets of the ``kernelcheck unbiased`` command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kernelcheck._src.core import report as bundle
from kernelcheck._src.core.files import as_output_folder
from kernelcheck._src.core.report import new_figure, png_bytes, size_ticks
from kernelcheck._src.core.seeds import as_rng
from kernelcheck._src.core.validate import as_int, as_real, describe
from kernelcheck._src.verify.unbiased.results import UnbiasedReport
from kernelcheck.errors import InvalidArgument

__all__ = ["render_plots", "write_report", "default_points"]


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
        size_ticks(ax, m)
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

    Parameters
    ----------
    report : UnbiasedReport
        The report to write.
    out_dir : str or pathlib.Path
        The folder (created if missing).
    plots : bool, default True
        Draw the plots (they need matplotlib).
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

    Norm of row i: ``max_norm (i + 1) / n``.  Used by
    :func:`~kernelcheck._src.verify.unbiased.command.run_unbiased_cli`.

    Parameters
    ----------
    n : int
        The number of points.
    dim : int
        The dimension.
    seed : int, SeedSequence or Generator
        The seed of the directions.
    max_norm : float, default 0.5
        The norm of the last row.

    Examples
    --------
    >>> import numpy as np
    >>> P = default_points(4, 3, seed=0)
    >>> np.round(np.linalg.norm(P, axis=1), 12).tolist()
    [0.125, 0.25, 0.375, 0.5]
    """
    n = as_int(n, "n", minimum=1)
    dim = as_int(dim, "dim", minimum=1)
    max_norm = as_real(max_norm, "max_norm", positive=True)
    G = as_rng(seed).standard_normal((n, dim))
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    return G * (max_norm * np.arange(1, n + 1) / n)[:, None]
