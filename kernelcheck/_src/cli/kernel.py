"""``kernelcheck kernel EXPR --dim d``: decide whether a kernel expression is a kernel.

Parses EXPR with the expression language of
:mod:`kernelcheck._src.kernels.expr` (whose names are the kernel catalogue's,
:data:`kernelcheck._src.kernels.catalog.LEAVES`), then runs
:func:`~kernelcheck._src.verify.kernels.kernel.kernel` and, when the feature space is
finite, :func:`~kernelcheck._src.verify.kernels.feature_map.feature_map` on its
exact feature map: one verdict line per check.
"""

from __future__ import annotations

import argparse
from typing import Any

from kernelcheck._src.cli.arguments import positive_int
from kernelcheck._src.cli.files import load_matrix
from kernelcheck._src.cli.options import add_seed_option, add_timeout_option, flag_named
from kernelcheck._src.cli.output import print_json, print_note, verdict_line
from kernelcheck._src.cli.parser import EPILOG, lazy_help

__all__ = ["NAME", "add_parser", "run", "protect_expression"]

#: The command's name.
NAME = "kernel"

#: Stands in the help for the names of the kernel language (the catalogue's leaves).
KERNEL_NAMES = "<the names of the kernel language>"


def _kernel_names() -> str:
    from kernelcheck._src.kernels.expr import language_names

    return language_names()


def add_parser(sub: Any) -> None:
    """Add ``kernel`` and its options to the commands ``sub`` (``add_subparsers()``).

    Parameters
    ----------
    sub : argparse subparsers action
        What ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        NAME,
        help="decide whether a kernel expression is a kernel",
        description='Parse EXPR (a kernel expression such as "exp(linear, order=3) + '
        '0.5*poly(2)", "gaussian(lengthscale=2)", "laplacian", "linear**2") and check '
        "that it is a kernel in dimension d: PSD Gram matrices (C5) and, when its feature "
        "space is finite, that its exact feature map reproduces it (C4, C7, C8). Names: "
        f"{KERNEL_NAMES}; operators + - * / **.",
        epilog=EPILOG,
        formatter_class=lazy_help({KERNEL_NAMES: _kernel_names}),
    )
    p.add_argument("expr", metavar="EXPR", help="the kernel expression (quote it)")
    p.add_argument("--dim", type=positive_int, required=True, metavar="d", help="input dimension d")
    p.add_argument(
        "--points",
        metavar="FILE",
        help="a matrix file of points (n, d) to judge the Gram matrix on, instead of a search",
    )
    add_seed_option(p)
    p.add_argument(
        "--budget",
        type=positive_int,
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
    add_timeout_option(p)
    p.set_defaults(func=run)


#: The options of ``kernel`` that take a value (the token after one is not the expression).
_TAKES_VALUE = {"--dim", "--points", "--seed", "--budget", "--form", "--timeout"}


def protect_expression(argv: list[str]) -> list[str]:
    """``kernelcheck kernel -linear``: an expression that starts with ``-`` is not an option.

    The first token after ``kernel`` that starts with a single ``-`` and is
    not ``-h`` or the value of an option is prefixed with a blank, which
    argparse reads as a positional argument (:func:`run` strips it).

    Parameters
    ----------
    argv : list of str
        The command line's arguments.

    Returns
    -------
    list of str
        ``argv``, or a copy with the expression protected.
    """
    if NAME not in argv:
        return argv
    i = argv.index(NAME) + 1
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv
        if token in _TAKES_VALUE:
            i += 2
            continue
        if token.startswith("-") and not token.startswith("--") and token != "-h":
            return [*argv[:i], " " + token, *argv[i + 1 :]]
        if not token.startswith("-"):
            return argv  # the expression is already there
        i += 1
    return argv


def run(args: argparse.Namespace) -> int:
    """Run ``kernelcheck kernel`` with the parsed ``args``; return the exit code.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    int
        The most severe outcome's exit code of the kernel check and the
        feature-map check.
    """
    import numpy as np

    from kernelcheck._src.core.outcome import Outcome, exit_code
    from kernelcheck._src.core.validate import as_points
    from kernelcheck._src.kernels.expr import parse_kernel
    from kernelcheck._src.verify.kernels.feature_map import feature_map
    from kernelcheck._src.verify.kernels.kernel import kernel as verify_kernel

    args.expr = args.expr.strip()  # protect_expression may have put a blank before it
    kernel = parse_kernel(args.expr)
    X = None
    if args.points is not None:
        points = load_matrix(args.points, note=lambda line: print_note(NAME, line))
        X = as_points(points, "points", dim=args.dim)
    kwargs: dict[str, Any] = {"dim": args.dim, "seed": args.seed}
    if args.budget is not None:
        kwargs["budget"] = args.budget
    if args.symmetrize:
        kwargs["symmetrize"] = True
    with flag_named("symmetrize=True", "--symmetrize"):
        report = verify_kernel(kernel, X, **kwargs)
    reports: list[Any] = [report]
    found: dict[str, Any] = {
        "expression": args.expr,
        "kernel": repr(kernel),
        "dim": args.dim,
        "kernel_report": report.to_dict(),
    }
    lines = [verdict_line(report)]
    if kernel.has_finite_features:
        if X is None:
            X = np.random.default_rng(args.seed).standard_normal((16, args.dim))
        fm = feature_map(kernel.features(args.form), X)
        found["feature_map_report"] = fm.to_dict()
        found["feature_dim"] = kernel.feature_dim(args.dim, args.form)
        detail = f"features ({args.form}, D = {found['feature_dim']}): {fm.description()}"
        lines.append(verdict_line(fm, detail))
        reports.append(fm)
    code = exit_code(reports)
    if args.json:
        print_json(NAME, next(o for o in Outcome if o.exit_code == code), found)
    else:
        print("\n".join(lines))
    return code
