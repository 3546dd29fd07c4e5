"""The parser of every command, and :func:`main`: run one, map what it raises to an exit code.

Every command speaks the one outcome vocabulary of kernelcheck: each verdict
line starts with ``verified``, ``refuted`` or ``inconclusive``, and the exit
code follows the one mapping (0 verified, 1 refuted, 3 inconclusive; 2 bad
usage, 130 interrupted).  Bad usage (an unknown command or option, a missing
or malformed file, a malformed kernel expression) prints one line on
standard error that names the command's help, and never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kernelcheck._src.cli import essay, kernel, psd, scaling, unbiased
from kernelcheck._src.cli.arguments import UsageError
from kernelcheck._src.cli.parser import EPILOG, CommandParser
from kernelcheck._src.cli.process import (
    import_numpy_deferring_ctrl_c,
    reader_gone,
    start_deadline,
)
from kernelcheck._src.core.outcome import EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_USAGE
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = ["COMMANDS", "build_parser", "main"]

#: The modules of the commands, in the order ``--help`` lists them.
COMMAND_MODULES = (essay, psd, kernel, unbiased, scaling)

#: The subcommands, in the order ``--help`` lists them.
COMMANDS = tuple(module.NAME for module in COMMAND_MODULES)


def build_parser() -> CommandParser:
    """The ``kernelcheck`` argument parser (subcommands essay, psd, kernel, unbiased, scaling).

    Returns
    -------
    CommandParser
        The top-level parser; each command's parser is in its ``commands``.
    """
    from kernelcheck._src.core.version import __version__

    parser = CommandParser(
        prog="kernelcheck",
        description="Numerical verification of the mathematics of linear attention.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"kernelcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    parser.commands = dict(sub.choices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Parameters
    ----------
    argv : sequence of str or None, default None
        The arguments after the program name (default None: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 verified, 1 refuted, 2 bad usage, 3 inconclusive (or ``--timeout``
        reached), 130 interrupted.

    Examples
    --------
    >>> main(["--version"])                     # doctest: +SKIP
    kernelcheck 0.1.0
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before a command started (parsing, imports)
        print("kernelcheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = kernel.protect_expression(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if getattr(args, "func", None) is None:
        print(
            f"kernelcheck: error: a command is required: {', '.join(COMMANDS[:-1])} or "
            f"{COMMANDS[-1]} (see 'kernelcheck --help')",
            file=sys.stderr,
        )
        return EXIT_USAGE
    prog = f"kernelcheck {args.command}"
    done = start_deadline(args.timeout, prog, getattr(args, "out", None))
    try:
        return run_command(args, prog)
    finally:
        done.set()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run_command(args: argparse.Namespace, prog: str) -> int:
    """Run the parsed command; what it raises becomes one line on standard error.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments; ``args.func`` is the command's ``run``.
    prog : str
        The command's name for messages (``"kernelcheck psd"``).

    Returns
    -------
    int
        The command's exit code; 2 for bad usage (the line names
        ``<prog> --help``), 3 when the numbers cannot decide or memory ran
        out, 130 when interrupted or when standard output's reader went away.
    """
    # here, not at the top: ``kernelcheck --help`` never needs the report writer
    from kernelcheck._src.core.atomic import InterruptedAfterWrite, ReportNotWritten

    try:
        import_numpy_deferring_ctrl_c()
        return int(args.func(args))
    except (UsageError, InvalidArgument) as exc:
        if isinstance(exc.__cause__, BrokenPipeError):  # the CLI's own progress printer's
            return reader_gone()
        print(f"{prog}: error: {_one_line(str(exc))} (see '{prog} --help')", file=sys.stderr)
        return EXIT_USAGE
    except NumericalFailure as exc:  # e.g. a Gram entry beyond the float64 range
        print(f"{prog}: cannot decide: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_INCONCLUSIVE
    except InterruptedAfterWrite:
        print(
            f"{prog}: interrupted; the report in {args.out} was already complete", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        out = getattr(args, "out", None)
        where = f"; nothing was written to {out}" if out is not None else ""
        print(f"{prog}: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away, e.g. `kernelcheck essay | head`
        return reader_gone()
    except OSError as exc:  # a report that could not be written, a scheduler that went away
        message = _one_line(str(getattr(exc, "strerror", None) or exc))
        if not isinstance(exc, ReportNotWritten) and getattr(exc, "filename", None):
            message = f"{message}: {exc.filename}"
        print(f"{prog}: error: {message or type(exc).__name__}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:  # a size check missed: still one line, never a traceback
        print(f"{prog}: cannot decide: ran out of memory; use smaller inputs", file=sys.stderr)
        return EXIT_INCONCLUSIVE
