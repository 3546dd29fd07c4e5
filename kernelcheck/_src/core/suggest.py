"""Suggestions for a mistyped name: the ``did you mean ...?`` of every message.

:func:`did_you_mean` is the one rule for proposing a known name in place of
an unknown one (a command-line flag, a choice value, a name of the kernel
expression language): the closest known name by
:func:`difflib.get_close_matches`, when it is close enough to be a typo.
Names that differ only in case are always proposed.  This module imports
nothing heavy (difflib only when a name is looked up), so the command line
can build its parser with it before anything else is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SIMILARITY", "closest", "did_you_mean"]

#: Smallest :class:`difflib.SequenceMatcher` ratio at which a known name is proposed,
#: :func:`difflib.get_close_matches`'s own default (``--tol`` for ``--tool`` is 0.91,
#: ``run`` for ``rnu`` 0.67; ``positive`` for ``cosine``, 0.57, is not proposed).
SIMILARITY = 0.6


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word``, or None when none is close enough.

    Parameters
    ----------
    word : str
        The unknown name, as typed.
    known : iterable of str
        The names that would have been accepted.

    Returns
    -------
    str or None
        A name of ``known`` whose similarity to ``word`` is at least
        :data:`SIMILARITY` (the most similar one; the first in ``known`` on
        a tie), or the name equal to ``word`` but for case; None otherwise.

    Examples
    --------
    >>> closest("--tool", ["--tol", "--method", "--key"])
    '--tol'
    >>> closest("Gaussian", ["gaussian", "laplacian"])
    'gaussian'
    >>> closest("frobnicate", ["essay", "psd"]) is None
    True
    """
    import difflib  # here, not at the top: ``kernelcheck --help`` never needs it

    names = [str(name) for name in known]
    for name in names:
        if name.lower() == word.lower() and name != word:
            return name
    matches = difflib.get_close_matches(word, names, n=1, cutoff=SIMILARITY)
    return matches[0] if matches else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name, or ``""``.

    The text is meant to end a message that already says what was wrong
    (``unknown name 'gausian' (known: ...)``).

    Parameters
    ----------
    word : str
        The unknown name, as typed.
    known : iterable of str
        The names that would have been accepted.

    Returns
    -------
    str
        ``"; did you mean 'x'?"`` where :func:`closest` finds ``x``, else
        the empty string.

    Examples
    --------
    >>> did_you_mean("positve", ["positive", "trigonometric"])
    "; did you mean 'positive'?"
    >>> did_you_mean("xyz", ["positive"])
    ''
    """
    match = closest(word, known)
    return "" if match is None else f"; did you mean {match!r}?"
