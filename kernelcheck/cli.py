"""The ``kernelcheck`` command line.

Subcommands (``docs/cli.md`` lists every option; a test keeps the two equal)::

    kernelcheck essay [--quick | --thorough] [--out DIR] [--json] [--claims IDS] ...
    kernelcheck psd FILE [--key NAME] [--tol T] [--method M] [--symmetrize] [--json]
    kernelcheck kernel EXPR --dim d [--points FILE] [--seed S] [--budget B] [--symmetrize] ...
    kernelcheck unbiased [--features KIND] [--dim d] [--num-features m] [--trials N] ...
    kernelcheck scaling [--quick] [--sizes N1,N2,...] [--repeats R] [--out DIR] ...

Every command speaks the one outcome vocabulary of kernelcheck: each verdict
line starts with ``verified``, ``refuted`` or ``inconclusive``, and the exit
code follows the one mapping (0 verified, 1 refuted, 3 inconclusive; 2 bad
usage, 130 interrupted).  An option means the same in every command that has
it (``--points`` is always a file of points, ``--out`` a report folder,
``--seed`` the root seed).  Bad usage (an unknown subcommand or option, a
missing or malformed file, a malformed kernel expression) prints one line on
standard error and never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import sys
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from kernelcheck._src.core.atomic import InterruptedAfterWrite, ReportNotWritten
from kernelcheck._src.core.outcome import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_REFUTED,
    EXIT_USAGE,
    EXIT_VERIFIED,
    Outcome,
    exit_code,
)
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "main",
    "COMMANDS",
    "UNBIASED_FEATURES",
    "UsageError",
    "build_parser",
    "load_matrix",
    "EXIT_VERIFIED",
    "EXIT_REFUTED",
    "EXIT_USAGE",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
]

#: The subcommands, in the order ``--help`` lists them.
COMMANDS = ("essay", "psd", "kernel", "unbiased", "scaling")


class UsageError(Exception):
    """Bad usage found after argument parsing (a missing or malformed file, a bad option value).

    The command line prints its message as one line on standard error and
    exits with code 2.
    """


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# ---------------------------------------------------------------------------
# Matrix files


_MATRIX_SUFFIXES = (".npy", ".npz", ".csv", ".txt")


def load_matrix(path: str | Path, key: str | None = None):
    """Read a matrix from ``.npy``, ``.npz`` (array ``key``), ``.csv`` or ``.txt``.

    ``.csv`` is comma separated, ``.txt`` whitespace separated; lines starting
    with ``#`` are comments.  Pickled objects are refused.  Before anything
    is read, the file must be a regular file (a FIFO, a device such as
    ``/dev/zero`` or a folder is refused at once) and the array must fit in
    memory: the shape in a ``.npy`` header (or in each ``.npz`` member's, so
    a small compressed file that unpacks to gigabytes is refused before it
    is unpacked), the most numbers a text file of its size can hold, checked
    with :func:`kernelcheck._src.core.validate.check_size`.  A text file with
    NUL bytes (a binary or sparse file) is refused.

    Parameters
    ----------
    path : str or Path
        The file.
    key : str, optional
        The array's name inside an ``.npz`` file (needed when it holds more
        than one array).

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    UsageError
        With a one-line message, for a missing, unreadable, special, oversized
        or malformed file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "k.csv")
    >>> np.savetxt(f, np.eye(2), delimiter=",")
    >>> load_matrix(f).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    import numpy as np

    from kernelcheck._src.core.validate import as_input_file

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _MATRIX_SUFFIXES:
        raise UsageError(
            f"cannot read {str(path)!r}: the file name must end in one of "
            f"{', '.join(_MATRIX_SUFFIXES)}"
        )
    try:
        as_input_file(path, "FILE")
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    if key is not None and suffix != ".npz":
        raise UsageError(f"--key applies to .npz files only, not to {str(path)!r}")
    try:
        if suffix == ".npy":
            with open(path, "rb") as fh:
                _check_npy_header(fh, str(path), path.stat().st_size)
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            return _load_npz(path, key)
        _check_text_file(path)
        delimiter = "," if suffix == ".csv" else None
        with open(path, encoding="utf-8") as fh:
            data = np.loadtxt(fh, delimiter=delimiter, dtype=np.float64, ndmin=2, comments="#")
        return data
    except UsageError:
        raise
    except InvalidArgument as exc:  # a size refusal
        raise UsageError(str(exc)) from None
    except (ValueError, OSError, EOFError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(f"cannot read a matrix from {str(path)!r}: {reason}") from None


def _check_npy_header(fh, what: str, available: int | None) -> None:
    """Refuse an ``.npy`` stream whose header promises an array too large to hold.

    ``available``: the bytes the stream holds (None inside a compressed
    archive, whose members are sized by their header alone).
    """
    from numpy.lib import format as npy

    from kernelcheck._src.core.validate import check_size

    version = npy.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = npy.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = npy.read_array_header_2_0(fh)
    else:
        raise UsageError(f"cannot read {what}: .npy format version {version} is not supported")
    count = 1
    for n in shape:
        count *= int(n)
    itemsize = max(int(dtype.itemsize), 8)  # the matrix is read as float64
    check_size(count, f"the {shape} array in {what}", itemsize=itemsize)
    if available is not None and dtype.kind != "O":
        need = fh.tell() + count * int(dtype.itemsize)
        if need > available:
            raise UsageError(
                f"cannot read a matrix from {what}: its header promises {need} bytes, the "
                f"file holds {available} (truncated?)"
            )


def _load_npz(path: Path, key: str | None):
    import numpy as np

    with zipfile.ZipFile(path) as zf:
        names = [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
        if not names:
            raise UsageError(f"{str(path)!r} holds no array")
        if key is None:
            if len(names) > 1:
                raise UsageError(
                    f"{str(path)!r} holds {len(names)} arrays ({', '.join(names)}); "
                    "choose one with --key NAME"
                )
            key = names[0]
        if key not in names:
            raise UsageError(f"{str(path)!r} has no array {key!r} (it has: {', '.join(names)})")
        with zf.open(f"{key}.npy") as fh:
            _check_npy_header(fh, f"{str(path)!r} (array {key!r})", None)
    with np.load(path, allow_pickle=False) as archive:
        return archive[key]


def _check_text_file(path: Path) -> None:
    """A text matrix file: no NUL byte in its first 64 KiB, and its numbers fit in memory."""
    from kernelcheck._src.core.validate import check_size

    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if b"\0" in head:
        raise UsageError(
            f"cannot read a matrix from {str(path)!r}: it holds NUL bytes, so it is not a "
            "text file (a binary or sparse file?)"
        )
    # every number takes at least two characters ("0,", "0\n")
    check_size((size + 1) // 2, f"reading {str(path)!r} ({size} bytes of text)")


# ---------------------------------------------------------------------------
# Subcommands


def _print_json(obj: Any, stream: TextIO) -> None:
    from kernelcheck._src.core.results import to_jsonable

    stream.write(json.dumps(to_jsonable(obj), indent=2) + "\n")


#: Verdict words some results' ``__str__`` start with, which the command line replaces by
#: the one vocabulary (``verified`` / ``refuted`` / ``inconclusive``).
_LEGACY_HEAD = re.compile(
    r"^(?:(?:unbiased|scaling|ratio bias \(C16\)):?\s+)?"
    r"(?:NOT PASSED|PASSED|FAILED|PASS|FAIL|verified|refuted|inconclusive)\b\s*(?:--|:)?\s*",
    re.IGNORECASE,
)

#: How ``kernelcheck psd`` words each PSD verdict after its outcome.
_PSD_WORDS = {
    "POSITIVE_DEFINITE": "positive definite",
    "POSITIVE_SEMIDEFINITE": "positive semi-definite",
    "NOT_PSD": "not positive semi-definite",
    "INCONCLUSIVE": "undecided",
}


def _verdict_line(result: Any, detail: str | None = None) -> str:
    """The line a command prints for one result: ``"<outcome>: <detail>"``.

    ``<outcome>`` is ``result.outcome`` (verified, refuted or inconclusive),
    the word whose exit code the command returns.  ``detail`` defaults to
    ``str(result)`` without a verdict word of its own at the front (PASSED,
    FAILED, ...), so one line never carries two vocabularies.

    Examples
    --------
    >>> from kernelcheck.claims import ClaimVerdict
    >>> class R:
    ...     outcome = ClaimVerdict.INCONCLUSIVE
    ...     def __str__(self): return "FAILED: too few trials"
    >>> _verdict_line(R())
    'inconclusive: too few trials'
    """
    text = str(result) if detail is None else detail
    return f"{result.outcome}: {_LEGACY_HEAD.sub('', text, count=1)}"


def _check_out(args: argparse.Namespace) -> None:
    """``--out DIR``: a folder that can be written into, checked before any work."""
    if args.out is not None:
        from kernelcheck._src.core.validate import as_output_folder

        as_output_folder(args.out, "--out")


def _cmd_essay(args: argparse.Namespace) -> int:
    from kernelcheck._src.claims.essay import main_essay

    level = "quick" if args.quick else ("thorough" if args.thorough else "default")
    claim_ids = None
    if args.claims:
        claim_ids = [c.strip() for c in args.claims.split(",") if c.strip()]
        from kernelcheck._src.claims.registry import get_claim

        for cid in claim_ids:
            get_claim(cid)  # bad ids are usage errors, before any work
    _check_out(args)
    _check_scheduler(args)
    return main_essay(
        level=level,
        out=args.out,
        as_json=args.json,
        claim_ids=claim_ids,
        workers=args.workers,
        scheduler=args.scheduler,
        verbose=args.verbose,
        bar=False if args.quiet else None,
    )


@contextlib.contextmanager
def _option_named(flag: str):
    """An error that tells a caller to pass ``symmetrize=True`` names the CLI flag instead."""
    from kernelcheck.errors import InvalidArgument

    try:
        yield
    except InvalidArgument as exc:
        text = str(exc)
        if "symmetrize=True" not in text:
            raise
        raise InvalidArgument(text.replace("symmetrize=True", flag)) from None


def _cmd_psd(args: argparse.Namespace) -> int:
    from kernelcheck._src.core.validate import check_choice
    from kernelcheck._src.psd.ladder import METHODS

    check_choice(args.method, "--method", METHODS)
    K = load_matrix(args.file, args.key)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise UsageError(f"{args.file!r} holds an array of shape {K.shape}, not a square matrix")
    from kernelcheck.psd import check_psd

    kwargs: dict[str, Any] = {"method": args.method}
    if args.tol is not None:
        kwargs["tol"] = args.tol
    if args.symmetrize:
        kwargs["symmetrize"] = True
    with _option_named("--symmetrize"):
        result = check_psd(K, **kwargs)
    if args.json:
        payload = {"file": str(args.file), **result.to_dict()}
        _print_json(payload, sys.stdout)
    else:
        text = str(result)
        name = result.verdict.name
        if text.startswith(name):
            text = _PSD_WORDS.get(name, name.lower()) + text[len(name) :]
        print(_verdict_line(result, f"{args.file} is {text}"))
    return result.outcome.exit_code


def _cmd_kernel(args: argparse.Namespace) -> int:
    import numpy as np

    from kernelcheck import verify
    from kernelcheck._src.core.validate import as_points
    from kernelcheck._src.kernels.expr import parse_kernel

    args.expr = args.expr.strip()  # main() protects an expression like "-linear" by a blank
    kernel = parse_kernel(args.expr)
    X = None
    if args.points is not None:
        X = as_points(load_matrix(args.points), "points", dim=args.dim)
    kwargs: dict[str, Any] = {"dim": args.dim, "seed": args.seed}
    if args.budget is not None:
        kwargs["budget"] = args.budget
    if args.symmetrize:
        kwargs["symmetrize"] = True
    with _option_named("--symmetrize"):
        report = verify.kernel(kernel, X, **kwargs)
    reports: list[Any] = [report]
    out: dict[str, Any] = {
        "expression": args.expr,
        "kernel": repr(kernel),
        "dim": args.dim,
        "kernel_report": report.to_dict(),
    }
    lines = [_verdict_line(report)]
    if kernel.has_finite_features:
        points = X
        if points is None:
            points = np.random.default_rng(args.seed).standard_normal((16, args.dim))
        fm = verify.feature_map(kernel.features(args.form), points)
        out["feature_map_report"] = fm.to_dict()
        out["feature_dim"] = kernel.feature_dim(args.dim, args.form)
        lines.append(_verdict_line(fm, f"features ({args.form}, D = {out['feature_dim']}): {fm}"))
        reports.append(fm)
    code = exit_code(reports)
    out["outcome"] = next(o.value for o in Outcome if o.exit_code == code)
    if args.json:
        _print_json(out, sys.stdout)
    else:
        print("\n".join(lines))
    return code


def _cmd_unbiased(args: argparse.Namespace) -> int:
    from kernelcheck._src.mc.distributed import suggested_shards
    from kernelcheck._src.verify.unbiased.command import run_unbiased_cli

    _check_out(args)
    _check_scheduler(args)
    with _executor(args) as executor:
        report = run_unbiased_cli(
            estimator=args.features,
            dim=args.dim,
            num_features=args.num_features,
            orthogonal=args.orthogonal,
            scale=args.scale,
            points=args.num_points,
            trials=args.trials,
            seed=args.seed,
            alpha=args.alpha,
            out=None,
            progress=False,
            executor=executor,
            shards=suggested_shards(executor),
        )
    written = []
    if args.out is not None:
        from kernelcheck._src.core.report import written_summary
        from kernelcheck.verify import write_report

        written = write_report(report, args.out)
    if args.json:
        _print_json(report.to_dict(), sys.stdout)
    else:
        print(_verdict_line(report))
        if args.out is not None:
            print(written_summary(written, args.out))
    return report.outcome.exit_code


def _cmd_scaling(args: argparse.Namespace) -> int:
    from kernelcheck.scaling import run_scaling

    _check_out(args)

    def progress(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    kwargs: dict[str, Any] = {}
    if args.sizes is not None:
        kwargs["sizes"] = args.sizes
    if args.repeats is not None:
        kwargs["repeats"] = args.repeats
    report = run_scaling(
        quick=args.quick,
        out=args.out,
        seed=args.seed,
        progress=progress,
        bar=False if args.quiet or args.json else None,
        yes=args.yes,
        **kwargs,
    )
    if args.json:
        _print_json(report.to_dict(), sys.stdout)
    else:
        print(report.summary_table())
        print(_verdict_line(report))
        if args.out is not None:
            from kernelcheck._src.core.report import written_summary

            names = ["scaling.json", "scaling.md"]
            if report.plot_path:
                names.insert(0, Path(report.plot_path).name)
            print(written_summary([Path(args.out) / n for n in names], args.out))
    return report.outcome.exit_code


# ---------------------------------------------------------------------------
# Parser


def _int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= ``minimum``, named ``what`` in the message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_nonnegative_int = _int_at_least(0, "a non-negative integer")


def _finite_float(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _probability(text: str) -> float:
    value = _finite_float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a number strictly between 0 and 1, got {text!r}"
        )
    return value


def _size_list(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    try:
        return tuple(_positive_int(p) for p in parts)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers, got {text!r}"
        ) from None


#: Random-feature estimators ``kernelcheck unbiased --features`` accepts.
UNBIASED_FEATURES = ("positive", "trigonometric", "hyperbolic", "optimal-positive")

#: The exit codes every command's help ends with (the mapping of core/outcome.py).
_EPILOG = (
    f"exit codes: {EXIT_VERIFIED} verified, {EXIT_REFUTED} refuted, "
    f"{EXIT_USAGE} bad usage, {EXIT_INCONCLUSIVE} inconclusive (or --timeout reached), "
    f"{EXIT_INTERRUPTED} interrupted"
)


def _add_timeout_option(p: argparse.ArgumentParser) -> None:
    """``--timeout SECONDS``: a deadline for the whole command (see :func:`_start_deadline`)."""
    p.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="stop after SECONDS, exit code 3 (a report being written is finished first)",
    )


def _add_dask_options(p: argparse.ArgumentParser) -> None:
    """``--scheduler ADDRESS`` / ``--workers N``: run the Monte Carlo work on Dask."""
    dist = p.add_mutually_exclusive_group()
    dist.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the trials on the Dask cluster at ADDRESS, e.g. tcp://host:8786 "
        "(needs kernelcheck[distributed]; the report is the same as a local run)",
    )
    dist.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="run the trials on a local Dask cluster of N worker processes",
    )


def _executor(args: argparse.Namespace):
    """A Dask executor for ``--scheduler`` / ``--workers``, else a null context (in-process)."""
    import contextlib

    if getattr(args, "scheduler", None) is None and getattr(args, "workers", None) is None:
        return contextlib.nullcontext(None)
    from kernelcheck.distributed import dask_executor

    return dask_executor(scheduler=args.scheduler, workers=args.workers)


#: Seconds ``--scheduler`` waits for a TCP connection before the address is refused.
SCHEDULER_PROBE_SECONDS = 5.0


def _check_scheduler(args: argparse.Namespace) -> None:
    """``--scheduler ADDRESS``: well formed and answering, checked before any work.

    A malformed address is refused by its form; for a TCP-like address a
    connection is opened (and closed) with a deadline of
    :data:`SCHEDULER_PROBE_SECONDS`, so an address where nothing listens is
    refused at once with one line instead of after Dask's 30 s wait.
    """
    address = getattr(args, "scheduler", None)
    if address is None:
        return
    from kernelcheck._src.core.validate import as_scheduler_address, scheduler_host_port

    address = as_scheduler_address(address, "--scheduler")
    target = scheduler_host_port(address)
    if target is not None:
        try:
            socket.create_connection(target, timeout=SCHEDULER_PROBE_SECONDS).close()
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise UsageError(
                f"no Dask scheduler answers at --scheduler {address!r} ({reason})"
            ) from None
    args.scheduler = address


def _kernel_names() -> str:
    from kernelcheck._src.kernels.expr import language_names

    return language_names()


def _psd_methods() -> str:
    from kernelcheck._src.psd.ladder import METHODS

    return ", ".join(METHODS)


def _size_grid(sizes) -> str:
    """``{kind: sizes}`` in words: ``exact attention n = 1024..8192, 7 lengths ...``."""
    words = {"quadratic": "exact attention", "linear": "linear attention"}
    parts = []
    for kind, ns in sizes.items():
        ratio = (ns[-1] / ns[0]) ** (1 / (len(ns) - 1)) if len(ns) > 1 else 1.0
        apart = "sqrt(2)" if abs(ratio - 2**0.5) < 0.01 else f"{ratio:.3g}"
        grid = f"n = {ns[0]}..{ns[-1]}, {len(ns)} lengths a factor {apart} apart"
        parts.append(f"{words.get(kind, kind)} {grid}")
    return "; ".join(parts)


def _scaling_sizes() -> str:
    from kernelcheck._src.scaling.experiment import DEFAULT_SIZES

    return _size_grid(DEFAULT_SIZES)


def _scaling_quick_sizes() -> str:
    from kernelcheck._src.scaling.experiment import QUICK_SIZES

    return _size_grid(QUICK_SIZES)


#: Placeholders in help texts, filled in when the help is shown (not when the parser is
#: built), so that ``kernelcheck --help`` loads neither the kernels nor NumPy.
_LAZY_HELP = {
    "<the names of the kernel language>": _kernel_names,
    "<the rungs of check_psd>": _psd_methods,
    "<the default sizes>": _scaling_sizes,
    "<the quick sizes>": _scaling_quick_sizes,
}

#: Stands in the help of ``kernelcheck kernel`` for the names of the kernel language.
_KERNEL_NAMES = "<the names of the kernel language>"


class _LazyHelpFormatter(argparse.HelpFormatter):
    """Writes the lists that live in the library (kernel names, PSD rungs, sizes) into the help."""

    @staticmethod
    def _fill(text: str | None) -> str | None:
        for placeholder, fill in _LAZY_HELP.items():
            if text and placeholder in text:
                text = text.replace(placeholder, fill())
        return text

    def add_text(self, text: str | None) -> None:
        super().add_text(self._fill(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return self._fill(super()._expand_help(action)) or ""


class _RenamedOption(argparse.Action):
    """An option that moved: using it is bad usage, with the new name in the message."""

    def __init__(self, option_strings, dest, message: str = "", **kwargs):
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.message = message

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(self.message)


def build_parser() -> argparse.ArgumentParser:
    """The ``kernelcheck`` argument parser (subcommands essay, psd, kernel, unbiased, scaling)."""
    from kernelcheck._src.core.version import __version__

    parser = _Parser(
        prog="kernelcheck",
        description="Numerical verification of the mathematics of linear attention.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"kernelcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser(
        "essay",
        help="check every claim C1..C20 of the essay and print the table",
        description="Run every registered claim check (C1..C20) on built-in defaults and "
        "print a table: claim, the claim in a few words, verdict, key number.",
        epilog=_EPILOG,
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
    p.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")
    _add_dask_options(p)
    _add_timeout_option(p)
    p.set_defaults(func=_cmd_essay)

    p = sub.add_parser(
        "psd",
        formatter_class=_LazyHelpFormatter,
        help="decide whether a matrix in a file is positive semi-definite",
        description="Decide whether the square matrix in FILE is positive (semi-)definite, "
        "with evidence (claims C5, C6). Formats: .npy, .npz (with --key when it holds "
        "several arrays), .csv (comma separated), .txt (whitespace separated).",
        epilog=_EPILOG,
    )
    p.add_argument("file", metavar="FILE", help="the matrix file")
    p.add_argument("--key", metavar="NAME", help="the array's name inside an .npz file")
    p.add_argument(
        "--tol",
        type=_finite_float,
        metavar="T",
        help="absolute tolerance on lambda_min (default: from the error model of K)",
    )
    p.add_argument(
        "--method",
        default="auto",
        metavar="M",
        help="one of <the rungs of check_psd>: auto runs the ladder, any other forces that "
        "one rung (default auto)",
    )
    p.add_argument(
        "--symmetrize",
        action="store_true",
        help="decide the exact symmetric part (K + K^T)/2 of a K asymmetric beyond rounding "
        "level (an asymmetry at rounding level, max|K - K^T| <= 1024 u max|K|, is decided "
        "that way without it, and the result says so)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_timeout_option(p)
    p.set_defaults(func=_cmd_psd)

    p = sub.add_parser(
        "kernel",
        help="decide whether a kernel expression is a kernel",
        description='Parse EXPR (a kernel expression such as "exp(linear, order=3) + '
        '0.5*poly(2)", "gaussian(lengthscale=2)", "laplacian", "linear**2") and check '
        "that it is a kernel in dimension d: PSD Gram matrices (C5) and, when its feature "
        "space is finite, that its exact feature map reproduces it (C4, C7, C8). Names: "
        f"{_KERNEL_NAMES}; operators + - * / **.",
        epilog=_EPILOG,
        formatter_class=_LazyHelpFormatter,
    )
    p.add_argument("expr", metavar="EXPR", help="the kernel expression (quote it)")
    p.add_argument(
        "--dim", type=_positive_int, required=True, metavar="d", help="input dimension d"
    )
    p.add_argument(
        "--points",
        metavar="FILE",
        help="a matrix file of points (n, d) to judge the Gram matrix on, instead of a search",
    )
    p.add_argument(
        "--seed", type=_nonnegative_int, default=0, metavar="S", help="root seed (default 0)"
    )
    p.add_argument(
        "--budget",
        type=_positive_int,
        metavar="B",
        help="restarts of the counterexample search (default 32)",
    )
    p.add_argument(
        "--symmetrize",
        action="store_true",
        help="judge the exact symmetric part of a Gram asymmetric beyond rounding level",
    )
    p.add_argument(
        "--form",
        choices=("symmetric", "tensor"),
        default="symmetric",
        metavar="FORM",
        help="symmetric or tensor: the feature map form to check (default symmetric)",
    )
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    _add_timeout_option(p)
    p.set_defaults(func=_cmd_kernel)

    p = sub.add_parser(
        "unbiased",
        help="test a random-feature estimator of exp(x.y) for bias",
        description="Monte Carlo test that a random-feature map estimates the softmax "
        "kernel exp(x.y) without bias, with confidence intervals, a family-wise test and "
        "the smallest detectable bias (claims C13, C17, C18).",
        epilog=_EPILOG,
    )
    p.add_argument(
        "--features",
        default="positive",
        choices=UNBIASED_FEATURES,
        metavar="KIND",
        help=f"the random-feature estimator: {', '.join(UNBIASED_FEATURES)} (default positive)",
    )
    p.add_argument(
        "--dim", type=_positive_int, default=4, metavar="d", help="input dimension d (default 4)"
    )
    p.add_argument(
        "--num-features",
        type=_positive_int,
        default=16,
        metavar="m",
        help="number of random features m (default 16)",
    )
    p.add_argument(
        "--trials",
        type=_positive_int,
        default=20000,
        metavar="N",
        help="Monte Carlo trials (default 20000)",
    )
    p.add_argument(
        "--num-points",
        type=_positive_int,
        default=4,
        metavar="N",
        help="points in each of X and Y, so N^2 pairs (default 4)",
    )
    p.add_argument(
        "--points",
        action=_RenamedOption,
        message="--points is a file of points in kernelcheck; the number of points of "
        "`unbiased` is --num-points N",
    )
    p.add_argument(
        "--scale",
        type=_finite_float,
        default=1.0,
        metavar="S",
        help="the kernel is exp(S x.y) (default 1)",
    )
    p.add_argument(
        "--alpha",
        type=_probability,
        default=0.01,
        metavar="A",
        help="family-wise false-alarm rate (default 0.01)",
    )
    p.add_argument("--orthogonal", action="store_true", help="orthogonal random features (C18)")
    p.add_argument(
        "--seed", type=_nonnegative_int, default=0, metavar="S", help="root seed (default 0)"
    )
    p.add_argument("--out", metavar="DIR", help="write report.md, report.json and the plots to DIR")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_dask_options(p)
    _add_timeout_option(p)
    p.set_defaults(func=_cmd_unbiased)

    p = sub.add_parser(
        "scaling",
        help="measure how softmax and linear attention scale with n",
        description="Time softmax and linear attention over a grid of sequence lengths "
        "(interleaved rounds, one BLAS thread, CPU time) and judge each time exponent against "
        "the accepted range of the operation count (claims C2, C3, C11); fewer than 5 sizes or "
        "a span below 8x is not judged.",
        epilog=_EPILOG,
        formatter_class=_LazyHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes (<the quick sizes>)")
    p.add_argument(
        "--sizes",
        type=_size_list,
        metavar="N1,N2,...",
        help="sequence lengths to time for every form (at least three, five to be judged; default: "
        "<the default sizes>)",
    )
    p.add_argument(
        "--repeats",
        type=_positive_int,
        metavar="R",
        help="timed rounds over every size (default 9)",
    )
    p.add_argument(
        "--yes", action="store_true", help="run even when the estimate is over 5 min or 2 GiB"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")
    p.add_argument(
        "--out", metavar="DIR", help="write scaling.md, scaling.json and scaling.png to DIR"
    )
    p.add_argument(
        "--seed", type=_nonnegative_int, default=0, metavar="S", help="root seed (default 0)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_timeout_option(p)
    p.set_defaults(func=_cmd_scaling)
    return parser


def _protect_expression(argv: list[str]) -> list[str]:
    """``kernelcheck kernel -linear``: an expression that starts with ``-`` is not an option.

    The first token after ``kernel`` that starts with a single ``-`` and is
    not ``-h`` or the value of an option is prefixed with a blank, which
    argparse reads as a positional argument (the command strips it).
    """
    if "kernel" not in argv:
        return argv
    i = argv.index("kernel") + 1
    takes_value = {"--dim", "--points", "--seed", "--budget", "--form", "--timeout"}
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv
        if token in takes_value:
            i += 2
            continue
        if token.startswith("-") and not token.startswith("--") and token != "-h":
            return [*argv[:i], " " + token, *argv[i + 1 :]]
        if not token.startswith("-"):
            return argv  # the expression is already there
        i += 1
    return argv


def _start_deadline(seconds: float | None, prog: str, out: Any) -> threading.Event:
    """``--timeout``: end the process ``seconds`` from now unless the returned event is set.

    Why a process exit: a deadline inside the process can interrupt only
    Python code (a signal reaches the interpreter between byte codes), not
    a LAPACK call or a blocked read; ``os._exit`` ends everything.  It waits
    for :data:`~kernelcheck._src.core.atomic.BUNDLE_LOCK`, so a report that is
    being written is finished (or, on an error, rolled back) first, and the
    message says whether ``--out`` holds this run's report.  Exit code 3
    (inconclusive): no verdict was reached in time.
    """
    done = threading.Event()
    if seconds is None:
        return done

    def fire() -> None:
        if done.wait(seconds):
            return
        from kernelcheck._src.core.atomic import BUNDLE_LOCK
        from kernelcheck._src.core.report import written_folders

        with BUNDLE_LOCK:
            if done.is_set():
                return
            where = ""
            if out is not None:
                complete = any(Path(f) == Path(out) for f in written_folders())
                where = (
                    f"; the report in {out} was already complete"
                    if complete
                    else f"; nothing was written to {out}"
                )
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            with contextlib.suppress(Exception):
                sys.stderr.write(f"{prog}: timed out after {seconds:g} s{where}\n")
                sys.stderr.flush()
            os._exit(EXIT_INCONCLUSIVE)

    threading.Thread(target=fire, name="kernelcheck --timeout", daemon=True).start()
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code.

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
    argv = _protect_expression(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if getattr(args, "func", None) is None:
        print(
            "kernelcheck: error: a command is required: essay, psd, kernel, unbiased or "
            "scaling (see 'kernelcheck --help')",
            file=sys.stderr,
        )
        return EXIT_USAGE
    prog = f"kernelcheck {args.command}"
    done = _start_deadline(args.timeout, prog, getattr(args, "out", None))
    try:
        return _run_command(args, prog)
    finally:
        done.set()


def _reader_gone() -> int:
    """Standard output's reader went away (``kernelcheck essay | head``): stop quietly."""
    # Point stdout at /dev/null so the interpreter's final flush stays quiet.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_INTERRUPTED


def _import_numpy_deferring_ctrl_c() -> None:
    """Import NumPy with Ctrl-C held until it is in, then raise it as KeyboardInterrupt.

    A SIGINT while NumPy's compiled core initialises comes out as an
    ``ImportError`` with the interrupt lost: the core imports ``datetime``
    from C, and CPython's ``PyCapsule_Import`` replaces the KeyboardInterrupt
    raised there with "could not import module datetime".  So the import
    runs with the signal recorded instead of raised (a fraction of a second),
    and a recorded Ctrl-C is raised once NumPy is in, where the command's
    handler turns it into one line and exit 130.  Only in the main thread
    (the only one that may set a signal handler), and only before NumPy is
    imported.
    """
    if "numpy" in sys.modules or threading.current_thread() is not threading.main_thread():
        return
    import signal

    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        import numpy  # noqa: F401
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _run_command(args: argparse.Namespace, prog: str) -> int:
    try:
        _import_numpy_deferring_ctrl_c()
        return int(args.func(args))
    except (UsageError, InvalidArgument) as exc:
        if isinstance(exc.__cause__, BrokenPipeError):  # the CLI's own progress printer's
            return _reader_gone()
        message = " ".join(str(exc).split())
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except NumericalFailure as exc:  # e.g. a Gram entry beyond the float64 range
        message = " ".join(str(exc).split())
        print(f"{prog}: cannot decide: {message}", file=sys.stderr)
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
        return _reader_gone()
    except OSError as exc:  # a report that could not be written, a scheduler that went away
        message = " ".join(str(getattr(exc, "strerror", None) or exc).split())
        if not isinstance(exc, ReportNotWritten) and getattr(exc, "filename", None):
            message = f"{message}: {exc.filename}"
        print(f"{prog}: error: {message or type(exc).__name__}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:  # a size check missed: still one line, never a traceback
        print(f"{prog}: cannot decide: ran out of memory; use smaller inputs", file=sys.stderr)
        return EXIT_INCONCLUSIVE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
