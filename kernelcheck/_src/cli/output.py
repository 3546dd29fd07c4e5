"""What a command prints: its verdict lines, notes, and the one JSON envelope of ``--json``.

Every command speaks the one outcome vocabulary: :func:`verdict_line` starts
each verdict line with ``verified``, ``refuted`` or ``inconclusive``.  With
``--json`` every command prints one object, :func:`envelope`::

    {"schema": "kernelcheck/1", "command": "psd", "outcome": "refuted",
     "exit_code": 1, "result": {...}}

``outcome`` is the word the text output's verdict line starts with,
``exit_code`` the exit code of the process, ``result`` what the command
found (its shape is the command's; see ``docs/cli.md``).  ``schema`` names
the envelope's version, :data:`SCHEMA_VERSION`: it grows when a field of
the envelope changes meaning or goes away.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

from kernelcheck._src.core.outcome import Outcome

__all__ = ["SCHEMA_VERSION", "SCHEMA", "verdict_line", "envelope", "print_json", "print_note"]

#: Version of the ``--json`` envelope of every command.
SCHEMA_VERSION = 1
#: The ``schema`` field of the ``--json`` envelope.
SCHEMA = f"kernelcheck/{SCHEMA_VERSION}"

#: Verdict words some results' ``__str__`` start with, which the command line replaces by
#: the one vocabulary (``verified`` / ``refuted`` / ``inconclusive``).
LEGACY_HEAD = re.compile(
    r"^(?:(?:unbiased|scaling|ratio bias \(C16\)):?\s+)?"
    r"(?:NOT PASSED|PASSED|FAILED|PASS|FAIL|verified|refuted|inconclusive)\b\s*(?:--|:)?\s*",
    re.IGNORECASE,
)


def verdict_line(result: Any, detail: str | None = None) -> str:
    """The line a command prints for one result: ``"<outcome>: <detail>"``.

    Parameters
    ----------
    result : object
        A result with an ``outcome`` (verified, refuted or inconclusive): the
        word whose exit code the command returns.
    detail : str, optional
        What follows the outcome (default None: ``str(result)``).  A verdict
        word of its own at its front (PASSED, FAILED, ...) is dropped, so one
        line never carries two vocabularies.

    Returns
    -------
    str

    Examples
    --------
    >>> from kernelcheck.claims import ClaimVerdict
    >>> class R:
    ...     outcome = ClaimVerdict.INCONCLUSIVE
    ...     def __str__(self): return "FAILED: too few trials"
    >>> verdict_line(R())
    'inconclusive: too few trials'
    """
    text = str(result) if detail is None else detail
    return f"{result.outcome}: {LEGACY_HEAD.sub('', text, count=1)}"


def envelope(command: str, outcome: Outcome | str, result: dict) -> dict:
    """The ``--json`` object of a command: schema, command, outcome, exit code, result.

    Parameters
    ----------
    command : str
        The command's name (``"psd"``).
    outcome : Outcome or str
        The command's outcome, the one its text output and exit code give.
    result : dict
        What the command found, JSON-ready or convertible by
        :func:`~kernelcheck._src.core.results.to_jsonable`.

    Returns
    -------
    dict

    Examples
    --------
    >>> envelope("psd", "refuted", {"n": 2})["exit_code"]
    1
    """
    outcome = Outcome(outcome)
    return {
        "schema": SCHEMA,
        "command": command,
        "outcome": outcome.value,
        "exit_code": outcome.exit_code,
        "result": result,
    }


def print_json(
    command: str, outcome: Outcome | str, result: dict, stream: TextIO | None = None
) -> None:
    """Print the :func:`envelope` of a command as indented JSON.

    Parameters
    ----------
    command : str
        The command's name.
    outcome : Outcome or str
        The command's outcome.
    result : dict
        What the command found.
    stream : text stream, optional
        Where to print (default None: standard output).
    """
    import json

    from kernelcheck._src.core.results import to_jsonable

    stream = sys.stdout if stream is None else stream
    stream.write(json.dumps(to_jsonable(envelope(command, outcome, result)), indent=2) + "\n")


def print_note(command: str, line: str) -> None:
    """Print ``kernelcheck <command>: note: <line>`` on standard error.

    A note says what the command did that the user did not ask for (a
    header row skipped); standard output keeps the verdict (or the JSON).

    Parameters
    ----------
    command : str
        The command's name.
    line : str
        The note.
    """
    print(f"kernelcheck {command}: note: {line}", file=sys.stderr)
