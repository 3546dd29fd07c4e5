"""The claims of the essay (C1..C24), the checks that decide them, and the essay report.

One registry serves the ``kernelcheck essay`` command, the command line and
the documentation: :func:`registry` lists every :class:`Claim` (C1..C24),
each with ``check(level)`` returning a :class:`ClaimResult` (verdict
verified / refuted / inconclusive, the key measured number, the evidence).
:func:`run_essay` runs them all and returns an :class:`EssayReport`;
:func:`write_report` writes ``report.md``, ``report.json`` and the plots
atomically.

Examples
--------
>>> from kernelcheck.claims import get_claim
>>> claim = get_claim("C7")
>>> claim.title
'linear kernel: phi(x) = x'
>>> claim.check("quick").verdict.value
'verified'
"""

from kernelcheck._src.claims.essay import EssayReport, exit_code_for, run_essay, write_report
from kernelcheck._src.claims.registry import (
    GROUPS,
    LEVELS,
    STATEMENTS,
    Claim,
    ClaimResult,
    ClaimVerdict,
    get_claim,
    registry,
    run_claims,
)

__all__ = [
    "LEVELS",
    "GROUPS",
    "STATEMENTS",
    "Claim",
    "ClaimResult",
    "ClaimVerdict",
    "registry",
    "get_claim",
    "run_claims",
    "EssayReport",
    "run_essay",
    "write_report",
    "exit_code_for",
]
