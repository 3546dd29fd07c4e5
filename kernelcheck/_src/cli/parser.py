"""The parser of the command line: one-line errors, suggestions, and help filled in late.

:class:`CommandParser` is the argparse parser of ``kernelcheck`` and of each
command.  Its usage errors are one line on standard error, exit code 2, and
name the help of the command that was typed (``see 'kernelcheck psd
--help'``), also for an option the command does not know; a mistyped flag,
choice or command gets the closest known one
(:func:`~kernelcheck._src.core.suggest.did_you_mean`).

:class:`HelpFormatter` writes the lists that live in the library (kernel
names, PSD rungs, estimators, size grids) into a command's help when the
help is shown, in place of a placeholder such as ``<the rungs of
check_psd>``, so building the parser loads none of them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from kernelcheck._src.core.outcome import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_REFUTED,
    EXIT_USAGE,
    EXIT_VERIFIED,
)
from kernelcheck._src.core.suggest import closest, did_you_mean

__all__ = ["EPILOG", "CommandParser", "HelpFormatter", "lazy_help", "RenamedOption"]

#: The exit codes every command's help ends with (the mapping of core/outcome.py).
EPILOG = (
    f"exit codes: {EXIT_VERIFIED} verified, {EXIT_REFUTED} refuted, "
    f"{EXIT_USAGE} bad usage, {EXIT_INCONCLUSIVE} inconclusive (or --timeout reached), "
    f"{EXIT_INTERRUPTED} interrupted"
)


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming its help, with suggestions.

    The top-level parser learns its commands' parsers (:attr:`commands`,
    set by :func:`~kernelcheck._src.cli.main.build_parser`), so that an
    option unknown to a command is reported by that command's parser.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        #: The parser of each command, by name (empty for a command's own parser).
        self.commands: Mapping[str, CommandParser] = {}

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (see '<prog> --help')`` and exit with code 2."""
        message = " ".join(message.split())
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """Parse ``args``; arguments no parser knows are an error of the command typed."""
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self.commands.get(getattr(namespace, "command", None) or "", self)
            parser.error(f"unrecognized arguments: {' '.join(extras)}{parser.suggest(extras)}")
        return namespace

    def suggest(self, extras: Sequence[str]) -> str:
        """``"; did you mean '--tol'?"`` for the first unknown flag close to a known one."""
        known = [flag for flag in self._option_string_actions if flag.startswith("--")]
        for token in extras:
            if token.startswith("--"):
                match = closest(token.partition("=")[0], known)
                if match is not None:
                    return f"; did you mean {match!r}?"
        return ""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check, with the closest choice proposed
        choices = action.choices
        if choices is not None and value not in choices:
            names = [str(c) for c in choices]
            listed = ", ".join(repr(name) for name in names)
            hint = did_you_mean(str(value), names)
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r} (choose from {listed}){hint}"
            )


def lazy_help(fills: Mapping[str, Callable[[], str]]) -> Callable[..., HelpFormatter]:
    """A ``formatter_class`` for ``add_parser`` that fills ``fills``'s placeholders.

    Parameters
    ----------
    fills : mapping of str to callable
        ``{placeholder: fill}``: each placeholder in the help texts is
        replaced by ``fill()`` when the help is shown.

    Returns
    -------
    callable
        Builds a :class:`HelpFormatter` with these fills, as argparse calls it.
    """

    def formatter(*args: Any, **kwargs: Any) -> HelpFormatter:
        return HelpFormatter(*args, fills=fills, **kwargs)

    return formatter


class HelpFormatter(argparse.HelpFormatter):
    """Writes lists that live in the library into a command's help when it is shown.

    Parameters
    ----------
    prog : str
        The program name, as argparse passes it.
    fills : mapping of str to callable, optional
        ``{placeholder: fill}``: each placeholder in a description or an
        option's help is replaced by ``fill()`` (default None: none).
    **kwargs
        The other arguments of :class:`argparse.HelpFormatter`.
    """

    def __init__(
        self, prog: str, *, fills: Mapping[str, Callable[[], str]] | None = None, **kwargs: Any
    ):
        super().__init__(prog, **kwargs)
        self.fills = fills or {}

    def _fill(self, text: str | None) -> str | None:
        for placeholder, fill in self.fills.items():
            if text and placeholder in text:
                text = text.replace(placeholder, fill())
        return text

    def add_text(self, text: str | None) -> None:
        """Add a description or epilog, with its placeholders filled."""
        super().add_text(self._fill(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return self._fill(super()._expand_help(action)) or ""


class RenamedOption(argparse.Action):
    """An option that means something else here: using it is bad usage, the message says why.

    Parameters
    ----------
    option_strings : list of str
        The option's flags, as argparse passes them.
    dest : str
        The attribute name, as argparse passes it.
    message : str
        The one-line error (default empty).
    **kwargs
        The other arguments of :class:`argparse.Action`; ``help`` defaults to
        :data:`argparse.SUPPRESS` (the option is not listed).
    """

    def __init__(self, option_strings: Sequence[str], dest: str, message: str = "", **kwargs: Any):
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.message = message

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        parser.error(self.message)
