"""``kernelcheck scaling``: measure how softmax and linear attention scale with n.

Runs :func:`~kernelcheck._src.scaling.experiment.run_scaling`, which estimates
the run before it starts (and asks for ``--yes`` past 5 minutes or 2 GiB),
prints a line per form as it is measured, and draws a progress bar with the
time left on a terminal (unless ``--quiet`` or ``--json``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelcheck._src.cli.arguments import positive_int, size_list
from kernelcheck._src.cli.options import (
    add_quiet_option,
    add_seed_option,
    add_timeout_option,
    check_out,
)
from kernelcheck._src.cli.output import print_json, verdict_line
from kernelcheck._src.cli.parser import EPILOG, lazy_help

__all__ = ["NAME", "add_parser", "run", "size_grid"]

#: The command's name.
NAME = "scaling"


def size_grid(sizes: Mapping[str, Sequence[int]]) -> str:
    """``{kind: sizes}`` in words: ``exact attention n = 1024..8192, 7 lengths ...``.

    Parameters
    ----------
    sizes : mapping of str to sequence of int
        The sequence lengths of each kind of form (``"quadratic"``, ``"linear"``).

    Returns
    -------
    str
    """
    words = {"quadratic": "exact attention", "linear": "linear attention"}
    parts = []
    for kind, ns in sizes.items():
        ratio = (ns[-1] / ns[0]) ** (1 / (len(ns) - 1)) if len(ns) > 1 else 1.0
        apart = "sqrt(2)" if abs(ratio - 2**0.5) < 0.01 else f"{ratio:.3g}"
        grid = f"n = {ns[0]}..{ns[-1]}, {len(ns)} lengths a factor {apart} apart"
        parts.append(f"{words.get(kind, kind)} {grid}")
    return "; ".join(parts)


def _default_sizes() -> str:
    from kernelcheck._src.scaling.experiment import DEFAULT_SIZES

    return size_grid(DEFAULT_SIZES)


def _quick_sizes() -> str:
    from kernelcheck._src.scaling.experiment import QUICK_SIZES

    return size_grid(QUICK_SIZES)


def add_parser(sub: Any) -> None:
    """Add ``scaling`` and its options to the commands ``sub`` (``add_subparsers()``).

    Parameters
    ----------
    sub : argparse subparsers action
        What ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        NAME,
        help="measure how softmax and linear attention scale with n",
        description="Time softmax and linear attention over a grid of sequence lengths "
        "(interleaved rounds, one BLAS thread, CPU time) and judge each time exponent against "
        "the accepted range of the operation count (claims C2, C3, C11); fewer than 5 sizes or "
        "a span below 8x is not judged.",
        epilog=EPILOG,
        formatter_class=lazy_help(
            {"<the default sizes>": _default_sizes, "<the quick sizes>": _quick_sizes}
        ),
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes (<the quick sizes>)")
    p.add_argument(
        "--sizes",
        type=size_list,
        metavar="N1,N2,...",
        help="sequence lengths to time for every form (at least three, five to be judged; default: "
        "<the default sizes>)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        metavar="R",
        help="timed rounds over every size (default 9)",
    )
    p.add_argument(
        "--yes", action="store_true", help="run even when the estimate is over 5 min or 2 GiB"
    )
    add_quiet_option(p)
    p.add_argument(
        "--out", metavar="DIR", help="write scaling.md, scaling.json and scaling.png to DIR"
    )
    add_seed_option(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_timeout_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``kernelcheck scaling`` with the parsed ``args``; return the exit code.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    int
        0 every exponent in its accepted range, 1 one outside it, else 3.
    """
    from kernelcheck._src.scaling.experiment import run_scaling

    check_out(args)

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
        print_json(NAME, report.outcome, report.to_dict())
    else:
        print(report.summary_table())
        print(verdict_line(report))
        if args.out is not None:
            from kernelcheck._src.core.report import written_summary

            names = ["scaling.json", "scaling.md"]
            if report.plot_path:
                names.insert(0, Path(report.plot_path).name)
            print(written_summary([Path(args.out) / n for n in names], args.out))
    return report.outcome.exit_code
