"""``kernelcheck psd FILE``: decide whether the matrix in a file is positive semi-definite.

Runs :func:`~kernelcheck._src.psd.ladder.check_psd` on the matrix that
:func:`~kernelcheck._src.cli.files.load_matrix` reads.  The text line and the
JSON envelope report one enclosure of ``lambda_min``:
:meth:`~kernelcheck._src.psd.result.PSDResult.eigenvalue_interval`, the proven
bounds (``lower_bound``, ``upper_bound``: a certificate, a diagonal entry, a
witness) intersected with the estimate's interval under its error model.
"""

from __future__ import annotations

import argparse
from typing import Any

from kernelcheck._src.cli.arguments import CatalogueChoices, UsageError, finite_float
from kernelcheck._src.cli.files import load_matrix
from kernelcheck._src.cli.options import add_timeout_option, flag_named
from kernelcheck._src.cli.output import print_json, print_note, verdict_line
from kernelcheck._src.cli.parser import EPILOG, lazy_help

__all__ = ["NAME", "METHOD_NAMES", "add_parser", "run"]

#: The command's name.
NAME = "psd"


def _methods() -> tuple[str, ...]:
    from kernelcheck._src.psd.inputs import METHODS

    return METHODS


#: ``--method`` choices: the rungs of ``check_psd`` (``psd.inputs.METHODS``), read when needed.
METHOD_NAMES = CatalogueChoices(_methods)


def add_parser(sub: Any) -> None:
    """Add ``psd`` and its options to the commands ``sub`` (``add_subparsers()``).

    Parameters
    ----------
    sub : argparse subparsers action
        What ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        NAME,
        formatter_class=lazy_help({"<the rungs of check_psd>": lambda: ", ".join(METHOD_NAMES)}),
        help="decide whether a matrix in a file is positive semi-definite",
        description="Decide whether the square matrix in FILE is positive (semi-)definite, "
        "with evidence (claims C5, C6). Formats: .npy, .npz (with --key when it holds "
        "several arrays), .csv (comma separated), .txt (whitespace separated); a first row "
        "of a text file with no number in it is a header and is skipped.",
        epilog=EPILOG,
    )
    p.add_argument("file", metavar="FILE", help="the matrix file")
    p.add_argument("--key", metavar="NAME", help="the array's name inside an .npz file")
    p.add_argument(
        "--tol",
        type=finite_float,
        metavar="T",
        help="absolute tolerance on lambda_min (default: from the error model of K)",
    )
    p.add_argument(
        "--method",
        default="auto",
        choices=METHOD_NAMES,
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
    add_timeout_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``kernelcheck psd`` with the parsed ``args``; return the exit code.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    int
        0 PSD, 1 not PSD, 3 undecided.
    """
    K = load_matrix(args.file, args.key, note=lambda line: print_note(NAME, line))
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise UsageError(f"{args.file!r} holds an array of shape {K.shape}, not a square matrix")
    from kernelcheck._src.psd.ladder import check_psd

    kwargs: dict[str, Any] = {"method": args.method}
    if args.tol is not None:
        kwargs["tol"] = args.tol
    if args.symmetrize:
        kwargs["symmetrize"] = True
    with flag_named("symmetrize=True", "--symmetrize"):
        result = check_psd(K, **kwargs)
    if args.json:
        found = {
            "file": str(args.file),
            **result.to_dict(),
            "lambda_min_interval": list(result.eigenvalue_interval()),
        }
        print_json(NAME, result.outcome, found)
    else:
        print(verdict_line(result, f"{args.file} is {result.description()}"))
    return result.outcome.exit_code
