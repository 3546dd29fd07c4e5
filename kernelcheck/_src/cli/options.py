"""The options several commands share: how each is added to a parser, and checked before work.

``--timeout SECONDS`` (every command), ``--seed S``, ``--quiet``, ``--out DIR``,
``--scheduler ADDRESS`` / ``--workers N`` (the Monte Carlo work on Dask), and
flags named in the library's advice (``--symmetrize``).  An
option means the same in every command that has it; its help text is
written once, here.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from kernelcheck._src.cli.arguments import (
    UsageError,
    nonnegative_int,
    positive_int,
    positive_seconds,
)
from kernelcheck.errors import InvalidArgument

__all__ = [
    "SCHEDULER_PROBE_SECONDS",
    "add_timeout_option",
    "add_seed_option",
    "add_quiet_option",
    "add_dask_options",
    "check_out",
    "check_scheduler",
    "executor",
    "flag_named",
]

#: Seconds ``--scheduler`` waits for a TCP connection before the address is refused.
SCHEDULER_PROBE_SECONDS = 5.0


def add_timeout_option(p: argparse.ArgumentParser) -> None:
    """Add ``--timeout SECONDS``: a deadline for the whole command.

    See :func:`~kernelcheck._src.cli.process.start_deadline`.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    """
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="stop after SECONDS, exit code 3 (a report being written is finished first)",
    )


def add_seed_option(p: argparse.ArgumentParser) -> None:
    """Add ``--seed S``: the root seed every random draw of the run derives from (default 0).

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    """
    p.add_argument(
        "--seed", type=nonnegative_int, default=0, metavar="S", help="root seed (default 0)"
    )


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    """Add ``--quiet``: no progress bar (one is drawn only when standard error is a terminal).

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    """
    p.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")


def add_dask_options(p: argparse.ArgumentParser) -> None:
    """Add ``--scheduler ADDRESS`` / ``--workers N``: run the Monte Carlo work on Dask.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    """
    dist = p.add_mutually_exclusive_group()
    dist.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the trials on the Dask cluster at ADDRESS, e.g. tcp://host:8786 "
        "(needs kernelcheck-attention[distributed]; the report is the same as a local run)",
    )
    dist.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="run the trials on a local Dask cluster of N worker processes",
    )


def check_out(args: argparse.Namespace) -> None:
    """``--out DIR``: a folder that can be written into, checked before any work.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments; ``args.out`` is the folder or None.

    Raises
    ------
    InvalidArgument
        When the folder cannot be written into (see
        :func:`~kernelcheck._src.core.validate.as_output_folder`).
    """
    if args.out is not None:
        from kernelcheck._src.core.files import as_output_folder

        as_output_folder(args.out, "--out")


def check_scheduler(args: argparse.Namespace) -> None:
    """``--scheduler ADDRESS``: well formed and answering, checked before any work.

    A malformed address is refused by its form; for a TCP-like address a
    connection is opened (and closed) with a deadline of
    :data:`SCHEDULER_PROBE_SECONDS`, so an address where nothing listens is
    refused at once with one line instead of after Dask's 30 s wait.
    ``args.scheduler`` is replaced by the address as checked.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments; ``args.scheduler`` is the address or None.

    Raises
    ------
    InvalidArgument
        For a malformed address.
    UsageError
        When nothing answers at the address.
    """
    address = getattr(args, "scheduler", None)
    if address is None:
        return
    from kernelcheck._src.core.addresses import as_scheduler_address, scheduler_host_port

    address = as_scheduler_address(address, "--scheduler")
    target = scheduler_host_port(address)
    if target is not None:
        import socket

        try:
            socket.create_connection(target, timeout=SCHEDULER_PROBE_SECONDS).close()
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise UsageError(
                f"no Dask scheduler answers at --scheduler {address!r} ({reason})"
            ) from None
    args.scheduler = address


def executor(args: argparse.Namespace) -> Any:
    """A Dask executor for ``--scheduler`` / ``--workers``, else a null context (in-process).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments (``scheduler`` and ``workers``, each possibly absent).

    Returns
    -------
    context manager
        Yields the executor, or None to run in-process.
    """
    scheduler = getattr(args, "scheduler", None)
    workers = getattr(args, "workers", None)
    if scheduler is None and workers is None:
        return contextlib.nullcontext(None)
    from kernelcheck._src.mc.distributed import dask_executor

    return dask_executor(scheduler=scheduler, workers=workers)


@contextlib.contextmanager
def flag_named(keyword: str, flag: str) -> Iterator[None]:
    """An error that tells the caller to pass ``keyword`` names the command-line ``flag`` instead.

    The library's messages speak Python (``pass symmetrize=True``); on the
    command line the same advice is a flag (``pass --symmetrize``).

    Parameters
    ----------
    keyword : str
        The Python spelling in the library's message (``"symmetrize=True"``).
    flag : str
        The command line's spelling (``"--symmetrize"``).

    Raises
    ------
    InvalidArgument
        The error raised inside the block, its message with ``keyword``
        replaced by ``flag``.
    """
    try:
        yield
    except InvalidArgument as exc:
        text = str(exc)
        if keyword not in text:
            raise
        raise InvalidArgument(text.replace(keyword, flag)) from None
