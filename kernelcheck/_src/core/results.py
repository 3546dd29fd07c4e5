"""The one protocol of kernelcheck's results: verdicts, text, JSON and their ``assert_*`` twins.

Results are frozen dataclasses.  Those that carry a verdict derive from
:class:`Result`, which gives all of them the same behaviour:

* ``bool(result)`` is ``result.passed``: ``assert verify.attention(fn)``
  fails on a refuted layer and on an inconclusive run, and passes only when
  the check verified the claim (the alternative, raising on ``bool``, would
  break ``if result:``, which reads naturally for a verdict);
* ``result.outcome`` is one word of the vocabulary of
  :mod:`kernelcheck._src.core.outcome` (``verified``, ``refuted``,
  ``inconclusive``), and ``passed`` is true exactly when it is ``verified``;
* ``str(result)`` is one line that starts with that word
  (``"refuted: ..."``) and, when the result is not verified, says what to do
  (:meth:`Result.advice`); :meth:`Result.description` is the line without
  the word;
* ``repr(result)`` is short (at most :data:`REPR_WIDTH` characters): the
  class, the outcome and the start of the line; the evidence is in
  :meth:`Result.details`, ``to_dict()`` and the fields;
* ``to_dict()`` starts with ``"outcome"``, then every field.

:func:`assert_result` is the one body of the ``assert_*`` twins of
:mod:`kernelcheck.testing`: a verified result is returned; a refuted one
raises ``AssertionError`` whose first line is the outcome and the first
failing place (:meth:`Result.first_failure`); an inconclusive one raises
:class:`~kernelcheck.errors.Inconclusive` (not an ``AssertionError``: the
code was not shown wrong), carrying the advice, unless the caller allows
inconclusive results.  kernelcheck's frames are hidden from pytest's
traceback (``__tracebackhide__``).

``to_dict`` turns NumPy arrays into nested lists, enums into their values,
non-finite floats into the strings ``"nan"``, ``"inf"``, ``"-inf"`` (strict
JSON has no NaN), and nested results into dicts.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any, TypeVar

import numpy as np

from kernelcheck._src.core.outcome import Outcome, outcome_of
from kernelcheck.errors import Inconclusive

__all__ = ["to_jsonable", "ResultMixin", "Result", "assert_result", "REPR_WIDTH"]

#: The longest ``repr`` of a :class:`Result`, in characters.
REPR_WIDTH = 160

_R = TypeVar("_R", bound="Result")


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` into plain JSON types (see module docstring).

    Parameters
    ----------
    value : object
        A result, dataclass, enum, NumPy array or scalar, float, sequence,
        dict or plain JSON value.

    Returns
    -------
    object
        The same value in plain JSON types; anything else becomes its ``repr``.
    """
    if hasattr(value, "to_dict") and callable(value.to_dict) and not isinstance(value, type):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.generic,)):
        return to_jsonable(value.item())
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


class ResultMixin:
    """Mixin for frozen-dataclass results: ``to_dict()`` and ``to_json()``."""

    def to_dict(self) -> dict:
        """A JSON-ready dict: the ``outcome`` first (if any), then every field (arrays as lists)."""
        fields = {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        outcome = getattr(type(self), "outcome", None)
        if isinstance(outcome, property) and "outcome" not in fields:
            return {"outcome": to_jsonable(self.outcome), **fields}  # type: ignore[attr-defined]
        return fields

    def to_json(self, **kwargs: Any) -> str:
        """``json.dumps(self.to_dict())``.

        Parameters
        ----------
        **kwargs
            Passed on to :func:`json.dumps` (``indent``, ``allow_nan``, ...).

        Returns
        -------
        str
        """
        return json.dumps(self.to_dict(), **kwargs)


class Result(ResultMixin):
    """Base of every result that carries a verdict (the protocol of the module docstring).

    A subclass is a frozen dataclass declared with ``repr=False`` (so that
    this class's short ``repr`` is used) with a ``passed`` field or property.
    It gives its one-line text after the outcome word in :meth:`_text`, and
    may refine :attr:`outcome` (when ``passed`` alone cannot tell refuted
    from inconclusive), :meth:`advice`, :meth:`first_failure` and
    :meth:`details`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import check_psd
    >>> r = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    >>> bool(r), r.passed, str(r.outcome)
    (False, False, 'refuted')
    >>> str(r).startswith("refuted: ")
    True
    """

    @property
    def outcome(self) -> Outcome:
        """``verified`` when ``passed``, ``refuted`` when not, ``inconclusive`` when None."""
        passed = self.passed  # type: ignore[attr-defined]
        return outcome_of(None if passed is None else bool(passed))

    def __bool__(self) -> bool:
        return bool(self.passed)  # type: ignore[attr-defined]

    def _text(self) -> str:
        """The one line after the outcome word (subclasses give theirs)."""
        return type(self).__name__

    def description(self) -> str:
        """What the result found, in one line, without the outcome word in front.

        ``str(result)`` is ``f"{result.outcome}: {result.description()}"`` (plus
        what to do, when not verified); a caller that words the outcome itself
        (the command line) prints this.

        Returns
        -------
        str
        """
        return self._text()

    def advice(self) -> str:
        """What to do next, in one sentence ("" when there is nothing to do).

        Returns
        -------
        str
        """
        return ""

    def first_failure(self) -> str:
        """The first failing place, in words ("" when nothing failed).

        Returns
        -------
        str
        """
        return ""

    def details(self) -> str:
        """The evidence below the one line, one item per line ("" when there is none).

        Returns
        -------
        str
        """
        return ""

    def __str__(self) -> str:
        text = f"{self.outcome}: {self.description()}"
        advice = self.advice() if self.outcome is not Outcome.VERIFIED else ""
        if advice and advice not in text:
            text += f"; what to do: {advice}"
        return text

    def __repr__(self) -> str:
        head = f"<{type(self).__name__} "
        line = " ".join(str(self).split())
        room = REPR_WIDTH - len(head) - 1
        if len(line) > room:
            line = line[: room - 3] + "..."
        return f"{head}{line}>"


def assert_result(result: _R, *, allow_inconclusive: bool = False, details: str = "") -> _R:
    """The body of every ``assert_*`` twin: return a verified ``result``, else raise.

    Parameters
    ----------
    result : Result
        A verifier's result.
    allow_inconclusive : bool, default False
        Return an inconclusive result instead of raising
        :class:`~kernelcheck.errors.Inconclusive`.
    details : str, default ""
        Evidence to print below the result's one line (defaults to
        ``result.details()``).

    Returns
    -------
    Result
        ``result``, when it is verified (or inconclusive and allowed).

    Raises
    ------
    AssertionError
        For a refuted result: ``"refuted: <first failing place>"``, then the
        result's line and its details.
    kernelcheck.errors.Inconclusive
        For an inconclusive result (unless ``allow_inconclusive``): its line,
        what to do, and the result as ``.result``.
    """
    __tracebackhide__ = True
    outcome = result.outcome
    if outcome is Outcome.VERIFIED or (allow_inconclusive and outcome is Outcome.INCONCLUSIVE):
        return result
    first = result.first_failure()
    lines = [f"{outcome}: {first}" if first else str(result)]
    if first:
        lines.append(str(result))
    evidence = details or result.details()
    if evidence:
        lines.append(evidence)
    message = "\n".join(lines)
    if outcome is Outcome.INCONCLUSIVE:
        raise Inconclusive(message, result=result, advice=result.advice())
    raise AssertionError(message)
