"""Exceptions raised by kernelcheck.

Every error a caller can provoke with bad input is an :class:`InvalidArgument`,
a :class:`ValueError` whose message names the argument, describes the value it
got (shape, dtype, the offending entry) and says what was expected.
"""

from __future__ import annotations

__all__ = [
    "InvalidArgument",
    "InfiniteFeatureSpace",
    "BadNormalizer",
    "NumericalFailure",
    "Inconclusive",
]


class InvalidArgument(ValueError):
    """Bad input: the message names the argument and what was expected.

    Examples
    --------
    >>> from kernelcheck.errors import InvalidArgument
    >>> issubclass(InvalidArgument, ValueError)
    True
    """


class InfiniteFeatureSpace(InvalidArgument):
    """A kernel whose feature space is infinite was asked for its exact feature map.

    The message says how to truncate (``exp(k, order=M)``) or sample (random
    features) instead (claims C9, C12).
    """


class BadNormalizer(ArithmeticError):
    """An attention normaliser ``phi(q) . z`` is zero or negative (claim C12).

    Attributes
    ----------
    positions : numpy.ndarray
        Integer indices (one row per bad entry, one column per axis of the
        normaliser array) where the normaliser is ``<= 0``.
    values : numpy.ndarray
        The normaliser values at those positions.
    """

    def __init__(self, message: str, positions=None, values=None):
        super().__init__(message)
        self.positions = positions
        self.values = values


class NumericalFailure(ArithmeticError):
    """A computation cannot be carried out faithfully in the requested precision.

    Raised instead of returning overflowed, underflowed or NaN results; the
    message gives the reason and, where there is one, the remedy.
    """


class Inconclusive(Exception):
    """A check could not decide: raised by the ``assert_*`` twins of :mod:`kernelcheck.testing`.

    Not an :class:`AssertionError`: an inconclusive verdict does not say the
    code under test is wrong, only that the evidence (trials, sizes, the
    regime of an asymptotic law) cannot decide.  The message is the
    result's one line and what to do; pass ``allow_inconclusive=True`` to a
    twin to get the result back instead.

    Parameters
    ----------
    message : str
        The result's line and its details.
    result : object, default None
        The inconclusive result.
    advice : str, default ""
        What to do to get a verdict (more trials, another seed, other sizes).

    Attributes
    ----------
    result : object
        The inconclusive result (its ``to_dict()`` has the numbers).
    advice : str
        What to do to get a verdict.

    Examples
    --------
    >>> from kernelcheck.errors import Inconclusive
    >>> issubclass(Inconclusive, AssertionError)
    False
    """

    def __init__(self, message: str, result=None, advice: str = ""):
        super().__init__(message)
        self.result = result
        self.advice = advice
