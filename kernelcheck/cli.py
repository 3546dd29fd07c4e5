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
usage, 130 interrupted).  With ``--json`` every command prints one envelope,
``{"schema": "kernelcheck/1", "command", "outcome", "exit_code", "result"}``.
An option means the same in every command that has it (``--points`` is
always a file of points, ``--out`` a report folder, ``--seed`` the root
seed).  Bad usage (an unknown subcommand or option, a missing or malformed
file, a malformed kernel expression) prints one line on standard error,
naming the command's help and the closest known flag, value or name, and
never a traceback.
"""

from kernelcheck._src.cli.arguments import UsageError
from kernelcheck._src.cli.files import load_matrix
from kernelcheck._src.cli.main import COMMANDS, build_parser, main
from kernelcheck._src.cli.output import SCHEMA
from kernelcheck._src.cli.unbiased import UNBIASED_FEATURES
from kernelcheck._src.core.outcome import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_REFUTED,
    EXIT_USAGE,
    EXIT_VERIFIED,
)

__all__ = [
    "main",
    "COMMANDS",
    "UNBIASED_FEATURES",
    "SCHEMA",
    "UsageError",
    "build_parser",
    "load_matrix",
    "EXIT_VERIFIED",
    "EXIT_REFUTED",
    "EXIT_USAGE",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
]
