"""``kernelcheck essay``: run every registered claim check and report the verdicts.

The report is a table (claim id, the claim in a few words, verdict, key
number) and, with an output folder, ``report.md``, ``report.json`` and one
PNG plot per claim that provides plot data.  Files are written atomically and
as a set: every byte is rendered in memory first (an interrupt then leaves the
folder untouched), and the short phase that moves the files into place defers
SIGINT until the last file is in place, so the folder never holds a
half-written file nor a mix of two runs' files of the same report.
"""

from __future__ import annotations

import io
import json
import math
import os
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kernelcheck._src.claims.registry import (
    CLAIMS,
    GROUPS,
    LEVELS,
    STATEMENTS,
    ClaimResult,
    ClaimVerdict,
    claim_ids_iv,
    run_claims,
)
from kernelcheck._src.core import report as bundle
from kernelcheck._src.core.files import as_output_folder
from kernelcheck._src.core.outcome import Outcome, exit_code
from kernelcheck._src.core.report import new_figure, png_bytes
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.validate import check_callable, check_choice, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["EssayReport", "run_essay", "write_report", "exit_code_for"]


def exit_code_for(verdicts: Iterable[ClaimVerdict | str]) -> int:
    """The command-line exit code of a set of verdicts (the one ``exit_code`` of the core).

    0 when all are verified, 1 when any is refuted, else 3 when any is
    inconclusive (an empty set is 0).  ``verdicts`` is a list of
    :class:`ClaimVerdict` (the one :class:`~kernelcheck._src.core.results.Outcome`
    vocabulary) or their values; anything else (a bare string, an unknown
    verdict) raises :class:`~kernelcheck.errors.InvalidArgument`.

    Parameters
    ----------
    verdicts : iterable of ClaimVerdict or str
        The verdicts, or their values (``"verified"``, ``"refuted"``, ``"inconclusive"``).

    Examples
    --------
    >>> exit_code_for(["verified", "inconclusive"])
    3
    >>> exit_code_for(["inconclusive", "refuted"])
    1
    """
    return exit_code(verdicts, name="verdicts")


@dataclass(frozen=True, repr=False)
class EssayReport(Result):
    """The verdicts of a run of the claim checks.

    Attributes
    ----------
    results : tuple of ClaimResult
        One per claim run, in claim order.
    level : str
        ``"quick"``, ``"default"`` or ``"thorough"``.
    duration : float
        Wall-clock seconds of the whole run.
    environment : dict
        kernelcheck, Python, NumPy and platform versions and the start time (UTC).

    Examples
    --------
    >>> report = run_essay(["C7"], level="quick")            # doctest: +SKIP
    >>> report.exit_code                                     # doctest: +SKIP
    0
    """

    results: tuple[ClaimResult, ...]
    level: str
    duration: float
    environment: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every claim run was verified."""
        return all(r.passed for r in self.results)

    @property
    def exit_code(self) -> int:
        """0 all verified, 1 some refuted, 3 some inconclusive (see :func:`exit_code_for`)."""
        return exit_code_for(r.verdict for r in self.results)

    @property
    def outcome(self) -> Outcome:
        """Refuted when a claim is refuted, verified when all are, else inconclusive."""
        return {0: Outcome.VERIFIED, 1: Outcome.REFUTED}.get(self.exit_code, Outcome.INCONCLUSIVE)

    def summary(self) -> dict[str, int]:
        """Counts of each verdict and the total."""
        counts = {v.value: 0 for v in ClaimVerdict}
        for r in self.results:
            counts[r.verdict.value] += 1
        counts["total"] = len(self.results)
        return counts

    def __str__(self) -> str:
        s = self.summary()
        return (
            f"{s['verified']} of {s['total']} claims verified, {s['refuted']} refuted, "
            f"{s['inconclusive']} inconclusive ({self.level}, {self.duration:.1f} s)"
        )

    def table(self) -> str:
        """The plain-text table the command prints."""
        buf = io.StringIO()
        printer = _TablePrinter(buf, [r.claim for r in self.results])
        printer.header()
        for r in self.results:
            printer.row(r)
        return buf.getvalue()

    def details_text(self, width: int = 100) -> str:
        """Each claim's statements with their verdict and evidence, wrapped to ``width``.

        Parameters
        ----------
        width : int, default 100
            The line width to wrap to.

        """
        out = []
        for r in self.results:
            out.append(
                f"{r.claim}: {STATEMENTS[r.claim][0]} ({r.verdict.value}, {r.duration:.2f} s)"
            )
            for st in r.details.get("statements") or []:
                text = (
                    f"[{st.get('verdict', '')}] {st.get('statement', '')}: {st.get('evidence', '')}"
                )
                out += textwrap.wrap(
                    text,
                    width,
                    initial_indent="  ",
                    subsequent_indent="    ",
                    break_on_hyphens=False,
                )
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict:
        """JSON-ready report: environment, summary, outcome and one entry per claim.

        ``outcome`` is the whole run's verdict (the one of the exit code), as in
        every other command's JSON.

        Numbers are JSON numbers.  A value that is not finite (an infinite
        bound, a p-value that was not computed) is ``null``, and the list
        ``non_finite`` names each one by its path with what it was
        (``"inf"``, ``"-inf"`` or ``"nan"``), so no reader has to parse
        numbers out of strings.
        """
        claims = []
        for r in self.results:
            title, statement = STATEMENTS[r.claim]
            entry = {
                "id": r.claim,
                "title": title,
                "statement": statement,
                "group": _group(r.claim),
            }
            entry.update(r.to_dict())
            claims.append(entry)
        non_finite: list[dict[str, str]] = []
        return {
            "level": self.level,
            "duration": self.duration,
            "environment": dict(self.environment),
            "summary": self.summary(),
            "outcome": self.outcome.value,
            "exit_code": self.exit_code,
            "claims": _nulls_for_non_finite(claims, "claims", non_finite),
            "non_finite": non_finite,
        }

    def to_markdown(self, plots: dict[str, str] | None = None) -> str:
        """The Markdown report: the table, then one section per claim with its evidence.

        Parameters
        ----------
        plots : dict or None, default None
            ``{claim id: file name}`` of plots to link from each section.
        """
        plots = plots or {}
        env = self.environment
        lines = [
            "# kernelcheck essay report",
            "",
            f"Level `{self.level}`, {self.duration:.1f} s; "
            f"kernelcheck {env.get('kernelcheck', '?')}, "
            f"Python {env.get('python', '?')}, NumPy {env.get('numpy', '?')}, "
            f"{env.get('platform', '?')}; started {env.get('started', '?')}.",
            "",
            f"**{self}**",
            "",
            "| claim | in a few words | verdict | key number |",
            "| --- | --- | --- | --- |",
        ]
        for r in self.results:
            title = STATEMENTS[r.claim][0]
            lines.append(
                f"| {r.claim} | {_md(title)} | {_verdict_md(r.verdict)} | {_md(r.key_number)} |"
            )
        lines.append("")
        for _slug, group_title, ids in GROUPS:
            group_results = [r for r in self.results if r.claim in ids]
            if not group_results:
                continue
            lines += [f"## {group_title}", ""]
            for r in group_results:
                title, statement = STATEMENTS[r.claim]
                lines += [
                    f"### {r.claim}: {title}",
                    "",
                    f"*Claim.* {statement}",
                    "",
                    f"*Verdict.* **{r.verdict.value}**: {r.key_number} ({r.duration:.2f} s).",
                    "",
                ]
                if r.verdict is ClaimVerdict.INCONCLUSIVE:
                    lines += [f"*To decide.* {what_to_do(r)}", ""]
                statements = r.details.get("statements") or []
                if statements:
                    lines += ["| statement | verdict | evidence |", "| --- | --- | --- |"]
                    for st in statements:
                        lines.append(
                            f"| {_md(st.get('statement', ''))} | {st.get('verdict', '')} | "
                            f"{_md(st.get('evidence', ''))} |"
                        )
                    lines.append("")
                rest = {k: v for k, v in r.details.items() if k not in ("statements", "plot")}
                if rest:
                    lines += ["```json", json.dumps(rest, indent=2, sort_keys=True), "```", ""]
                if r.claim in plots:
                    lines += [f"![{r.claim}]({plots[r.claim]})", ""]
        return "\n".join(lines)


#: How :func:`~kernelcheck._src.core.results.to_jsonable` writes a non-finite float.
_NON_FINITE = {"inf", "-inf", "nan"}


def _nulls_for_non_finite(value: Any, path: str, notes: list[dict[str, str]]) -> Any:
    """``value`` with every non-finite number (float or its JSON string) as None, noted."""
    if isinstance(value, dict):
        return {k: _nulls_for_non_finite(v, f"{path}.{k}", notes) for k, v in value.items()}
    if isinstance(value, list):
        return [_nulls_for_non_finite(v, f"{path}[{i}]", notes) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        value = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str) and value in _NON_FINITE:
        notes.append({"path": path, "value": value})
        return None
    return value


def _group(cid: str) -> str:
    for slug, _title, ids in GROUPS:
        if cid in ids:
            return slug
    return ""


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_md(v: ClaimVerdict) -> str:
    return f"**{v.value}**" if v is not ClaimVerdict.VERIFIED else v.value


#: Width of the printed table when ``COLUMNS`` does not say otherwise.
TABLE_WIDTH = 100
_MIN_WIDTH = 60
#: Narrowest key-number column: a title wider than the table leaves room for wraps instead.
_MIN_KEY_WIDTH = 20


def table_width(environ: Mapping[str, str] | None = None) -> int:
    """The table's width: ``COLUMNS`` when set to a number (at least 60), else 100."""
    environ = os.environ if environ is None else environ
    try:
        return max(_MIN_WIDTH, int(environ.get("COLUMNS", "")))
    except ValueError:
        return TABLE_WIDTH


class _TablePrinter:
    """Prints the table row by row as results arrive, within ``width`` columns.

    The title column is as wide as the longest title of the claims run, or
    narrower where the table would leave the key number less than
    :data:`_MIN_KEY_WIDTH` columns; the title and the key number then wrap
    onto continuation lines under their own columns, so nothing is cut.  An
    inconclusive row is followed by what decides it.
    """

    def __init__(self, stream: TextIO, claim_ids: list[str], width: int | None = None):
        self.stream = stream
        self.width = table_width() if width is None else width
        self.w_id = max([5] + [len(c) for c in claim_ids])
        longest = max([14] + [len(STATEMENTS[c][0]) for c in claim_ids])
        self.w_verdict = max(len(v.value) for v in ClaimVerdict)
        fixed = self.w_id + self.w_verdict + 6  # the id, the verdict and three gaps of two
        self.w_title = max(10, min(longest, self.width - fixed - _MIN_KEY_WIDTH))
        self.w_key = max(_MIN_KEY_WIDTH, self.width - fixed - self.w_title)

    def header(self) -> None:
        self._line("claim", ["in a few words"], "verdict", ["key number"])
        self._line("-" * self.w_id, ["-" * self.w_title], "-" * self.w_verdict, ["-" * 10])

    def row(self, r: ClaimResult) -> None:
        title = textwrap.wrap(STATEMENTS[r.claim][0], self.w_title, break_on_hyphens=False)
        key = textwrap.wrap(r.key_number, self.w_key, break_on_hyphens=False) or [""]
        self._line(r.claim, title, r.verdict.value, key)
        if r.verdict is ClaimVerdict.INCONCLUSIVE:
            hint = textwrap.wrap(
                "to decide: " + what_to_do(r), self.width - self.w_id - 2, break_on_hyphens=False
            )
            for line in hint:
                self.stream.write(" " * (self.w_id + 2) + line + "\n")
        self.stream.flush()

    def _line(self, a: str, title: list[str], c: str, key: list[str]) -> None:
        """One row: the id, the title's lines, the verdict, the key number's lines."""
        rows = max(len(title), len(key))
        title = title + [""] * (rows - len(title))
        key = key + [""] * (rows - len(key))
        for i in range(rows):
            first, verdict = (a, c) if i == 0 else ("", "")
            head = f"{first:<{self.w_id}}  {title[i]:<{self.w_title}}  "
            line = f"{head}{verdict:<{self.w_verdict}}  {key[i]}"
            self.stream.write(line.rstrip() + "\n")
        self.stream.flush()


def what_to_do(r: ClaimResult) -> str:
    """What would decide an inconclusive claim: its undecided statements, and a stronger run."""
    open_rows = [
        st
        for st in r.details.get("statements") or []
        if st.get("verdict") in ("inconclusive", "not run")
    ]
    said = "; ".join(f"{st['statement']}: {st['evidence']}" for st in open_rows[:2])
    advice = (
        f"rerun `kernelcheck essay --claims {r.claim} --thorough` (more trials and sizes); a "
        "timing claim may also need a quieter machine"
    )
    return f"{said}. {advice}" if said else advice


def run_essay(
    claim_ids: Iterable[str] | None = None,
    level: str = "default",
    *,
    stream: TextIO | None = None,
    on_result: Callable[[ClaimResult], Any] | None = None,
    executor: Any = None,
) -> EssayReport:
    """Run the claim checks and return the report.

    Parameters
    ----------
    claim_ids : iterable of str or None, default None
        Claims to run (default: every registered claim, C1..C24).
    level : {"quick", "default", "thorough"}, default "default"
        ``quick`` runs in under 30 s, ``default`` in under 3 minutes on 2 cores.
    stream : text stream or None, default None
        When given, the table is printed to it row by row as checks finish.
    on_result : callable or None, default None
        Called with each :class:`ClaimResult` as it is known.
    executor : concurrent.futures.Executor or None, default None
        Where the Monte Carlo and search checks run (see
        :func:`kernelcheck.claims.run_claims`); the report is the same.

    Returns
    -------
    EssayReport

    Examples
    --------
    >>> report = run_essay(["C7"], level="quick")   # doctest: +SKIP
    >>> print(report)                              # doctest: +SKIP
    1 of 1 claims verified, 0 refuted, 0 inconclusive (quick, 0.0 s)
    """
    check_choice(level, "level", LEVELS)
    ids = claim_ids_iv(claim_ids) or list(CLAIMS)
    if stream is not None and not callable(getattr(stream, "write", None)):
        raise InvalidArgument(
            f"`stream` must be a text stream (with write), got {describe(stream)}"
        )
    if on_result is not None:
        check_callable(on_result, "on_result")
    env = bundle.environment()
    printer = _TablePrinter(stream, ids) if stream else None

    def progress(result: ClaimResult) -> None:
        if printer is not None:
            printer.row(result)
        if on_result is not None:
            on_result(result)

    if printer is not None:
        printer.header()
    start = time.perf_counter()
    with _one_blas_thread():
        results = run_claims(ids, level, on_result=progress, executor=executor)
    env["blas_threads"] = 1
    return EssayReport(
        results=tuple(results),
        level=level,
        duration=time.perf_counter() - start,
        environment=env,
    )


def _one_blas_thread():
    """BLAS limited to one thread while the checks run (threadpoolctl).

    The essay's matrices are small: a second BLAS thread buys little on a
    quiet machine and, on a busy one, its spin-waiting threads are
    descheduled and slow every product down several-fold.  The timing
    checks (C2, C3) need one thread anyway, to read CPU time.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


# ---------------------------------------------------------------------------
# Output folder


def render_plots(report: EssayReport) -> dict[str, bytes]:
    """PNG bytes of each claim's plot (``details["plot"]``), keyed by file name.

    Raises :class:`~kernelcheck._src.core.report.PlotsUnavailable` when
    matplotlib is not installed (:func:`write_report` then writes the report
    without plots and says so).  Plot data format: ``{"title", "xlabel",
    "ylabel", "xscale", "yscale", "series": [{"label", "x", "y"}, ...]}``; a
    series with ``"style": "dashed"`` draws a reference line (a theory
    slope), ``"line"`` a fitted line, ``"points"`` unjoined small markers (the
    samples a fit is made from), any other points joined by lines.
    Points that are not finite numbers (or not positive on a log axis) are
    left out, so a bound that is infinite at one order never turns the axis
    into categories.
    """
    specs: list[tuple[str, dict]] = [
        (r.claim, r.details["plot"])
        for r in report.results
        if isinstance(r.details.get("plot"), dict)
    ]
    return {f"{cid}.png": png_bytes(plot_figure(cid, spec)) for cid, spec in specs}


def plot_figure(cid: str, spec: dict) -> Any:
    """The matplotlib figure of claim ``cid``'s plot data ``spec`` (see :func:`render_plots`)."""
    fig = new_figure((5.5, 3.8))
    ax = fig.add_subplot()
    for series in spec.get("series", []):
        style = series.get("style")
        x, y = _finite_points(series["x"], series["y"])
        if style == "points":
            ax.plot(x, y, linestyle="none", marker=".", ms=4, alpha=0.45, label=series.get("label"))
            continue
        ls = "--" if style == "dashed" else "-"
        marker = "" if style in ("dashed", "line") else "o"
        ax.plot(x, y, ls, marker=marker, ms=4, label=series.get("label"))
    ax.set_xscale(spec.get("xscale", "linear"))
    if spec.get("xscale", "linear") == "linear" and _integral_x(spec):  # an order M, a count
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale(spec.get("yscale", "linear"))
    ax.set_xlabel(spec.get("xlabel", ""))
    ax.set_ylabel(spec.get("ylabel", ""))
    ax.set_title(f"{cid}: {spec.get('title', '')}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    labelled = [s for s in spec.get("series", []) if s.get("label")]
    if labelled:
        # below the axes, where it covers no data however many series there are (C2 has 9)
        ax.legend(
            fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=2 if len(labelled) > 3 else 1,
            frameon=False,
        )
    fig.tight_layout()
    return fig


def _integral_x(spec: dict) -> bool:
    """Whether every x of every series is a whole number (the axis then has whole ticks)."""
    xs = [x for series in spec.get("series", []) for x in series["x"]]
    return bool(xs) and all(isinstance(x, (int, float)) and float(x).is_integer() for x in xs)


def _finite_points(x, y) -> tuple[list[float], list[float]]:
    """The points of a series whose coordinates are both finite numbers."""
    xs, ys = [], []
    for a, b in zip(x, y, strict=True):
        try:
            fa, fb = float(a), float(b)
        except (TypeError, ValueError):
            continue
        if math.isfinite(fa) and math.isfinite(fb):
            xs.append(fa)
            ys.append(fb)
    return xs, ys


def write_report(report: EssayReport, out_dir: str | Path) -> list[Path]:
    """Write ``report.md``, ``report.json`` and the plots into ``out_dir``.

    Every file is rendered in memory first and the set is written by
    :func:`kernelcheck._src.core.report.write_bundle`: all new files or (on
    an error or an interrupt before the renames) none of them.  Without
    matplotlib the report has no plots and ``report.md`` says so.

    Parameters
    ----------
    report : EssayReport
        The run to write.
    out_dir : str or pathlib.Path
        The folder (created if missing).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    if not isinstance(report, EssayReport):
        raise InvalidArgument(f"`report` must be an EssayReport, got {describe(report)}")
    as_output_folder(out_dir, "out_dir")
    plots, note = bundle.render_plots(lambda: render_plots(report))
    plot_names = {name[: -len(".png")]: name for name in plots}
    markdown = report.to_markdown(plot_names)
    if note:
        markdown += f"\n{note}\n"
    files: dict[str, bytes | str] = dict(plots)
    files["report.json"] = bundle.json_text(report)
    files["report.md"] = markdown + "\n"
    return bundle.write_bundle(out_dir, files, name="out_dir")
