"""``kernelcheck unbiased``: test a random-feature estimator of exp(x.y) for bias.

The estimators are the catalogue's,
:data:`kernelcheck._src.features.random.ESTIMATORS`, read when a value is
checked or the help is shown.  The trials run through
:func:`~kernelcheck._src.verify.unbiased.command.run_unbiased_cli`, with a
progress bar and an estimate of the time left on a terminal (unless
``--quiet``).
"""

from __future__ import annotations

import argparse
from typing import Any

from kernelcheck._src.cli.arguments import (
    CatalogueChoices,
    finite_float,
    positive_int,
    probability,
)
from kernelcheck._src.cli.options import (
    add_dask_options,
    add_quiet_option,
    add_seed_option,
    add_timeout_option,
    check_out,
    check_scheduler,
    executor,
)
from kernelcheck._src.cli.output import print_json, verdict_line
from kernelcheck._src.cli.parser import EPILOG, RenamedOption, lazy_help

__all__ = ["NAME", "UNBIASED_FEATURES", "add_parser", "run"]

#: The command's name.
NAME = "unbiased"


def _estimators() -> tuple[str, ...]:
    from kernelcheck._src.features.random import ESTIMATORS

    return tuple(ESTIMATORS)


#: Random-feature estimators ``kernelcheck unbiased --features`` accepts: the names of
#: ``features.random.ESTIMATORS``, in its order, read when first needed.
UNBIASED_FEATURES = CatalogueChoices(_estimators)


def add_parser(sub: Any) -> None:
    """Add ``unbiased`` and its options to the commands ``sub`` (``add_subparsers()``).

    Parameters
    ----------
    sub : argparse subparsers action
        What ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        NAME,
        help="test a random-feature estimator of exp(x.y) for bias",
        description="Monte Carlo test that a random-feature map estimates the softmax "
        "kernel exp(x.y) without bias, with confidence intervals, a family-wise test and "
        "the smallest detectable bias (claims C13, C17, C18).",
        epilog=EPILOG,
        formatter_class=lazy_help({"<the estimators>": lambda: ", ".join(UNBIASED_FEATURES)}),
    )
    p.add_argument(
        "--features",
        default="positive",
        choices=UNBIASED_FEATURES,
        metavar="KIND",
        help="the random-feature estimator: <the estimators> (default positive)",
    )
    p.add_argument(
        "--dim", type=positive_int, default=4, metavar="d", help="input dimension d (default 4)"
    )
    p.add_argument(
        "--num-features",
        type=positive_int,
        default=16,
        metavar="m",
        help="number of random features m (default 16)",
    )
    p.add_argument(
        "--trials",
        type=positive_int,
        default=20000,
        metavar="N",
        help="Monte Carlo trials (default 20000)",
    )
    p.add_argument(
        "--num-points",
        type=positive_int,
        default=4,
        metavar="N",
        help="points in each of X and Y, so N^2 pairs (default 4)",
    )
    p.add_argument(
        "--points",
        action=RenamedOption,
        message="--points is a file of points in kernelcheck; the number of points of "
        "`unbiased` is --num-points N",
    )
    p.add_argument(
        "--scale",
        type=finite_float,
        default=1.0,
        metavar="S",
        help="the kernel is exp(S x.y) (default 1)",
    )
    p.add_argument(
        "--alpha",
        type=probability,
        default=0.01,
        metavar="A",
        help="family-wise false-alarm rate (default 0.01)",
    )
    p.add_argument("--orthogonal", action="store_true", help="orthogonal random features (C18)")
    add_seed_option(p)
    p.add_argument("--out", metavar="DIR", help="write report.md, report.json and the plots to DIR")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet_option(p)
    add_dask_options(p)
    add_timeout_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``kernelcheck unbiased`` with the parsed ``args``; return the exit code.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    int
        0 unbiased, 1 a significant bias, 3 some pairs untestable.
    """
    from kernelcheck._src.mc.distributed import suggested_shards
    from kernelcheck._src.verify.unbiased.command import run_unbiased_cli

    check_out(args)
    check_scheduler(args)
    with executor(args) as pool:
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
            progress=False if args.quiet else None,
            executor=pool,
            shards=suggested_shards(pool),
        )
    written = []
    if args.out is not None:
        from kernelcheck._src.verify.unbiased.writer import write_report

        written = write_report(report, args.out)
    if args.json:
        print_json(NAME, report.outcome, report.to_dict())
    else:
        print(verdict_line(report))
        if args.out is not None:
            from kernelcheck._src.core.report import written_summary

            print(written_summary(written, args.out))
    return report.outcome.exit_code
