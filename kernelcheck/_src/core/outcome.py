"""The one outcome vocabulary of kernelcheck and its command-line exit codes.

Every verifier's result says, beside its own detail, one :class:`Outcome`
(``verified``, ``refuted`` or ``inconclusive``) through its ``outcome``
property; :func:`exit_code` is the one mapping of outcomes to exit codes
(0 verified, 1 refuted, 3 inconclusive; 2 is bad usage, 130 an interrupt).
This module imports nothing heavy, so the command line can read it before
deciding what else to load.
"""

from __future__ import annotations

import enum
from typing import Any

from kernelcheck.errors import InvalidArgument

__all__ = [
    "Outcome",
    "outcome_of",
    "exit_code",
    "EXIT_VERIFIED",
    "EXIT_REFUTED",
    "EXIT_USAGE",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
]


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:57] + '...' if len(text) > 60 else text}"


#: Exit code: every check verified.
EXIT_VERIFIED = 0
#: Exit code: a check was refuted (a counterexample or a significant deviation).
EXIT_REFUTED = 1
#: Exit code: bad usage (arguments, files, expressions).
EXIT_USAGE = 2
#: Exit code: the evidence could not decide.
EXIT_INCONCLUSIVE = 3
#: Exit code: interrupted by SIGINT (Ctrl-C).
EXIT_INTERRUPTED = 130


class Outcome(str, enum.Enum):
    """What a check concluded: the one vocabulary of every verifier and claim.

    ``VERIFIED``: the evidence supports the claim within the stated error model
    or statistical test; ``REFUTED``: a counterexample or a significant
    deviation was found; ``INCONCLUSIVE``: the evidence cannot decide (for
    example, too few Monte Carlo trials for the test to have power, or a
    quantity within rounding of its threshold).

    Examples
    --------
    >>> Outcome("refuted").exit_code
    1
    """

    VERIFIED = "verified"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"

    def __str__(self) -> str:
        return self.value

    @property
    def exit_code(self) -> int:
        """0 verified, 1 refuted, 3 inconclusive."""
        return _EXIT_CODES[self]


def outcome_of(passed: bool | None) -> Outcome:
    """``True`` verified, ``False`` refuted, ``None`` (not judged) inconclusive."""
    if passed is None:
        return Outcome.INCONCLUSIVE
    return Outcome.VERIFIED if passed else Outcome.REFUTED


_EXIT_CODES = {
    Outcome.VERIFIED: EXIT_VERIFIED,
    Outcome.REFUTED: EXIT_REFUTED,
    Outcome.INCONCLUSIVE: EXIT_INCONCLUSIVE,
}


def exit_code(outcomes: Any, *, name: str = "outcomes") -> int:
    """The command-line exit code of a set of outcomes (the one mapping of kernelcheck).

    1 when any is refuted, else 3 when any is inconclusive, else 0 (an empty
    set is 0).  ``outcomes`` is an iterable of :class:`Outcome` (or their
    values), or of results with an ``outcome`` property; a bare string or a
    non-iterable raises :class:`~kernelcheck.errors.InvalidArgument` naming
    ``name``.  The exit code of one outcome is ``outcome.exit_code``.

    Examples
    --------
    >>> exit_code(["verified", "inconclusive"])
    3
    >>> exit_code(["inconclusive", "refuted"])
    1
    """
    if isinstance(outcomes, (str, bytes)) or not hasattr(outcomes, "__iter__"):
        raise InvalidArgument(
            f"`{name}` must be a list of outcomes (verified, refuted, inconclusive), "
            f"got {_describe(outcomes)}"
        )
    codes = set()
    for i, v in enumerate(outcomes):
        v = getattr(v, "outcome", v)
        try:
            codes.add(Outcome(v).exit_code)
        except ValueError:
            known = ", ".join(repr(c.value) for c in Outcome)
            raise InvalidArgument(
                f"`{name}[{i}]` must be an Outcome or one of {known}; got {v!r}"
            ) from None
    if EXIT_REFUTED in codes:
        return EXIT_REFUTED
    if EXIT_INCONCLUSIVE in codes:
        return EXIT_INCONCLUSIVE
    return EXIT_VERIFIED
