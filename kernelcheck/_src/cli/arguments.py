"""Argument types of the command line, checked by the library's own input checks.

argparse calls a type with the text typed after an option.  Each type here
reads the text as a number and hands it to the check of its kind in
:mod:`kernelcheck._src.core.validate` (:func:`~kernelcheck._src.core.validate.as_int`,
:func:`~kernelcheck._src.core.validate.as_real`,
:func:`~kernelcheck._src.core.validate.as_probability`), so a bound (``--dim``
at least 1, ``--alpha`` strictly between 0 and 1) means the same on the command
line as in the library.  A refusal
(:class:`~kernelcheck.errors.InvalidArgument`) becomes argparse's one-line usage
error, ``argument --dim: expected a positive integer, got '0'``.

:class:`CatalogueChoices` are the choices of an option read from a catalogue
of the library (the estimators, the rungs of ``check_psd``) the first time
they are needed, so building the parser, and ``kernelcheck --help``, import
neither the catalogue nor NumPy.

Both import NumPy (through ``validate`` or the catalogue) with Ctrl-C held
until it is in (:func:`~kernelcheck._src.cli.process.import_numpy_deferring_ctrl_c`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

from kernelcheck._src.cli.process import import_numpy_deferring_ctrl_c

__all__ = [
    "UsageError",
    "ArgumentType",
    "positive_int",
    "nonnegative_int",
    "finite_float",
    "positive_seconds",
    "probability",
    "size_list",
    "CatalogueChoices",
]


class UsageError(Exception):
    """Bad usage found after argument parsing (a missing or malformed file, a bad option value).

    The command line prints its message as one line on standard error and
    exits with code 2.
    """


def _validate() -> Any:
    """:mod:`kernelcheck._src.core.validate`, imported with Ctrl-C held while NumPy loads."""
    import_numpy_deferring_ctrl_c()
    from kernelcheck._src.core import validate

    return validate


class ArgumentType:
    """An argparse type: the text read by ``read``, then checked by ``check``.

    Parameters
    ----------
    read : callable
        ``read(text)`` turns the text into a value (``int``, ``float``); it
        raises ``ValueError`` on text that is not one.
    check : callable
        ``check(validate, value)`` returns the checked value, calling the
        checks of the module ``validate`` (:mod:`kernelcheck._src.core.validate`);
        they raise :class:`~kernelcheck.errors.InvalidArgument`.
    expected : str
        What the option takes, for the message (``"a positive integer"``).
    """

    def __init__(self, read: Callable[[str], Any], check: Callable[[Any, Any], Any], expected: str):
        self.read, self.check, self.expected = read, check, expected

    def __call__(self, text: str) -> Any:
        try:
            return self.check(_validate(), self.read(text))
        except ValueError:  # InvalidArgument is a ValueError too
            raise argparse.ArgumentTypeError(f"expected {self.expected}, got {text!r}") from None

    def __repr__(self) -> str:
        return f"ArgumentType({self.expected!r})"


#: ``--dim d``, ``--trials N``, ...: an integer >= 1.
positive_int = ArgumentType(int, lambda v, x: v.as_int(x, "value", minimum=1), "a positive integer")
#: ``--seed S``: an integer >= 0.
nonnegative_int = ArgumentType(
    int, lambda v, x: v.as_int(x, "value", minimum=0), "a non-negative integer"
)
#: ``--tol T``, ``--scale S``: a finite number.
finite_float = ArgumentType(float, lambda v, x: v.as_real(x, "value"), "a finite number")
#: ``--timeout SECONDS``: a finite number > 0.
positive_seconds = ArgumentType(
    float, lambda v, x: v.as_real(x, "value", positive=True), "a positive number of seconds"
)
#: ``--alpha A``: a number strictly between 0 and 1.
probability = ArgumentType(
    float, lambda v, x: v.as_probability(x, "value"), "a number strictly between 0 and 1"
)


def _integers(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


#: ``--sizes N1,N2,...``: comma-separated integers, each >= 1.
size_list = ArgumentType(
    _integers,
    lambda v, xs: tuple(v.as_int(x, "value", minimum=1) for x in xs),
    "comma-separated positive integers",
)


class CatalogueChoices(Sequence[str]):
    """The choices of an option, read from a catalogue of the library when first needed.

    argparse reads them to check a value and to list them in an error; the
    help shows them through a placeholder
    (:class:`~kernelcheck._src.cli.parser.HelpFormatter`).  Neither happens
    while the parser is built, so the catalogue (and NumPy) is imported only
    when a value is checked or the command's help is shown.

    Parameters
    ----------
    load : callable
        ``load()`` returns the names, in the order the catalogue lists them.
    """

    def __init__(self, load: Callable[[], Iterable[str]]):
        self._load = load

    def _all(self) -> tuple[str, ...]:
        # read every time, not kept: the catalogue is the one list (its import is cached)
        import_numpy_deferring_ctrl_c()
        return tuple(self._load())

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def __repr__(self) -> str:
        return f"CatalogueChoices({self._all()!r})"
