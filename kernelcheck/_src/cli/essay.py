"""``kernelcheck essay``: check every claim C1..C24 and print the table of verdicts.

The table is printed row by row as the checks finish, above a progress bar
with an estimate of the time left (on a terminal, unless ``--quiet``); the
report files (``--out``) and the table come from
:mod:`kernelcheck._src.claims.essay`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO, cast

from kernelcheck._src.cli.options import (
    add_dask_options,
    add_quiet_option,
    add_timeout_option,
    check_out,
    check_scheduler,
    executor,
)
from kernelcheck._src.cli.output import print_json
from kernelcheck._src.cli.parser import EPILOG

__all__ = ["NAME", "add_parser", "run"]

#: The command's name.
NAME = "essay"


def add_parser(sub: Any) -> None:
    """Add ``essay`` and its options to the commands ``sub`` (``add_subparsers()``).

    Parameters
    ----------
    sub : argparse subparsers action
        What ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        NAME,
        help="check every claim C1..C24 of the essay and print the table",
        description="Run every registered claim check (C1..C24) on built-in defaults and "
        "print a table: claim, the claim in a few words, verdict, key number.",
        epilog=EPILOG,
    )
    level = p.add_mutually_exclusive_group()
    level.add_argument("--quick", action="store_true", help="small inputs, a few seconds")
    level.add_argument("--thorough", action="store_true", help="larger inputs, more trials")
    p.add_argument("--out", metavar="DIR", help="write report.md, report.json and the plots to DIR")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--claims", metavar="IDS", help="only these claims, e.g. C1,C5")
    p.add_argument(
        "--verbose", action="store_true", help="print each claim's statements and evidence"
    )
    add_quiet_option(p)
    add_dask_options(p)
    add_timeout_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``kernelcheck essay`` with the parsed ``args``; return the exit code.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    int
        0 every claim verified, 1 one refuted, else 3 one inconclusive.
    """
    level = "quick" if args.quick else ("thorough" if args.thorough else "default")
    claim_ids = None
    if args.claims:
        claim_ids = [c.strip() for c in args.claims.split(",") if c.strip()]
        from kernelcheck._src.claims.registry import get_claim

        for cid in claim_ids:
            get_claim(cid)  # bad ids are usage errors, before any work
    check_out(args)
    check_scheduler(args)
    return run_essay_command(
        level=level,
        out=args.out,
        as_json=args.json,
        claim_ids=claim_ids,
        executor_context=executor(args),
        verbose=args.verbose,
        bar=False if args.quiet else None,
    )


class _BarStream:
    """A text stream that writes its lines above a progress bar (or straight through)."""

    def __init__(self, stream: TextIO, pbar: Any):
        self.stream, self.pbar, self._buf = stream, pbar, ""

    def write(self, text: str) -> int:
        if not self.pbar.drawn:
            return self.stream.write(text)
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.pbar.write(line, file=self.stream)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def run_essay_command(
    *,
    level: str,
    out: str | None,
    as_json: bool,
    claim_ids: list[str] | None,
    executor_context: Any,
    stdout: TextIO | None = None,
    verbose: bool = False,
    bar: bool | None = None,
) -> int:
    """Run the claims, print the table (or the JSON envelope), write ``out``; return the exit code.

    Ctrl-C (KeyboardInterrupt, or InterruptedAfterWrite once the files are in
    place) is reported by :func:`~kernelcheck._src.cli.main.main`, as for the
    other commands.

    Parameters
    ----------
    level : {"quick", "default", "thorough"}
        The size of the checks' inputs.
    out : str or None
        The report folder, or None for no files.
    as_json : bool
        Print the JSON envelope instead of the table.
    claim_ids : list of str or None
        The claims to run (None: every claim).
    executor_context : context manager
        Yields the executor of the Monte Carlo and search checks, or None
        (in-process); the report is the same.
    stdout : text stream, optional
        Where to print (default None: standard output).
    verbose : bool
        Print each claim's statements and evidence after the table (default False).
    bar : bool or None
        The progress bar: always, never, or on a terminal (default None).

    Returns
    -------
    int
        The exit code of the run's outcome.
    """
    from kernelcheck._src.claims.essay import run_essay, table_width, write_report
    from kernelcheck._src.claims.registry import CLAIMS, claim_ids_iv
    from kernelcheck._src.core import report as bundle
    from kernelcheck._src.core.progress import progress_bar

    stdout = stdout or sys.stdout
    ids = claim_ids_iv(claim_ids) or list(CLAIMS)
    with (
        executor_context as pool,
        progress_bar(len(ids), f"essay ({level})", enabled=bar, unit="claim") as pbar,
    ):
        stream = None if as_json else cast(TextIO, _BarStream(stdout, pbar))
        report = run_essay(
            ids, level, stream=stream, executor=pool, on_result=lambda _r: pbar.update(1)
        )
    if verbose and not as_json:
        stdout.write("\n" + report.details_text(table_width()))
    written = write_report(report, out) if out is not None else []
    if as_json:
        print_json(NAME, report.outcome, report.to_dict(), stdout)
    else:
        if out is not None:
            print(f"\n{bundle.written_summary(written, out)}", file=stdout)
        print(f"\n{report}", file=stdout)
    return report.exit_code
