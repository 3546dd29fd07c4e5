"""Progress on long work, and estimates before it: the one helper of every long run.

:func:`progress_bar` gives a tqdm bar with an ETA on standard error when it is
a terminal (and the caller did not ask for quiet), or a silent stand-in with
the same methods, so code that reports progress never asks where it runs.
:func:`check_budget` is the one rule for a run that would be long or large:
it says the estimate and asks for an explicit yes above the soft limits
(:data:`SOFT_SECONDS`, :data:`SOFT_BYTES`) and refuses above the hard ones.
This module imports nothing heavy (tqdm only when a bar is drawn).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from kernelcheck.errors import InvalidArgument

__all__ = [
    "SOFT_SECONDS",
    "HARD_SECONDS",
    "SOFT_BYTES",
    "hard_bytes",
    "is_terminal",
    "progress_bar",
    "check_budget",
    "fmt_duration",
    "fmt_bytes",
]

#: A run estimated to take longer than this (seconds) asks for an explicit yes.
SOFT_SECONDS = 300.0
#: A run estimated to take longer than this (seconds) is refused.
HARD_SECONDS = 24 * 3600.0
#: A run estimated to hold more than this (bytes) asks for an explicit yes.
SOFT_BYTES = 2 * 1024**3


def hard_bytes() -> int:
    """A run estimated to hold more than this is refused: 80% of the physical memory.

    64 GiB where the platform does not say how much memory it has.
    """
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 64 * 1024**3
    return int(0.8 * total)


def is_terminal(stream: Any = None) -> bool:
    """Whether ``stream`` (default: standard error) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed stream
        return False


class _Silent:
    """The stand-in when no bar is drawn: the same methods, doing nothing."""

    #: Whether a bar is drawn (lines then go through :meth:`write`, above it).
    drawn = False

    def update(self, n: float = 1) -> None:
        """Nothing to advance."""

    def set_description(self, desc: str) -> None:
        """Nothing to describe."""

    def write(self, line: str, file: TextIO | None = None) -> None:
        """Nothing to write (the caller prints its own lines)."""

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Bar(_Silent):
    """A tqdm bar; :meth:`write` prints a line above it."""

    drawn = True

    def __init__(self, total: float, desc: str, unit: str, stream: TextIO):
        from tqdm.auto import tqdm

        # delay: a run shorter than a second never draws a bar; leave=False: the
        # bar disappears when done, so the printed report is what stays.  An
        # estimate in seconds is shown as a percentage (its counts mean little).
        fmt = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]" if unit == "s" else None
        self._bar = tqdm(
            total=total,
            desc=desc,
            unit=unit,
            delay=1.0,
            file=stream,
            leave=False,
            dynamic_ncols=True,
            bar_format=fmt,
        )

    def update(self, n: float = 1) -> None:
        self._bar.update(n)

    def set_description(self, desc: str) -> None:
        self._bar.set_description(desc, refresh=False)

    def write(self, line: str, file: TextIO | None = None) -> None:
        # tqdm clears the bar, prints the line to ``file`` and redraws the bar
        self._bar.write(line, file=self._bar.fp if file is None else file)

    def close(self) -> None:
        self._bar.close()


def progress_bar(
    total: float,
    desc: str,
    *,
    enabled: bool | None = None,
    unit: str = "step",
    stream: TextIO | None = None,
) -> _Silent:
    """A progress bar with an ETA, or a silent stand-in.

    Parameters
    ----------
    total : float
        The work to do, in ``unit`` (the ETA is the rate so far times what is left).
    desc : str
        What the bar is for.
    enabled : bool, optional
        Draw the bar (True), never (False), or only when ``stream`` is a
        terminal (None, the default).
    unit : str
        The unit of ``total``; ``"s"`` (an estimate in seconds) shows the
        percentage done and the time left instead of counts.
    stream : text stream, optional
        Where the bar is drawn (default standard error).

    Returns
    -------
    object
        With ``update(n)``, ``set_description(text)``, ``write(line, file)``
        (a line printed above the bar), ``close()`` and ``drawn``; usable as
        a context manager.

    Examples
    --------
    >>> with progress_bar(3, "work", enabled=False) as bar:
    ...     for _ in range(3):
    ...         bar.update(1)
    """
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = is_terminal(stream)
    if not enabled:
        return _Silent()
    return _Bar(total, desc, unit, stream)


def fmt_duration(seconds: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def fmt_bytes(nbytes: float) -> str:
    """``"512 MiB"``, ``"3.2 GiB"``."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def check_budget(
    *,
    seconds: float,
    nbytes: float,
    yes: bool,
    what: str,
    how: str,
    flag: str = "yes=True",
) -> None:
    """Refuse a run past the hard limits; ask for ``yes`` past the soft ones.

    Parameters
    ----------
    seconds, nbytes : float
        The estimated duration and memory of the run.
    yes : bool
        The caller's explicit agreement to a long or large run.
    what : str
        The run, for the message (``"this scaling run"``).
    how : str
        How the estimate was made, for the message.
    flag : str
        How the caller says yes (``"--yes"`` on the command line).

    Raises
    ------
    InvalidArgument
        Past a hard limit (:data:`HARD_SECONDS`, :func:`hard_bytes`), or
        past a soft one (:data:`SOFT_SECONDS`, :data:`SOFT_BYTES`) without
        ``yes``; the message gives the estimate and what to do.

    Examples
    --------
    >>> check_budget(seconds=20, nbytes=1e6, yes=False, what="this run", how="a guess")
    """
    estimate = f"{what} would take about {fmt_duration(seconds)} and hold {fmt_bytes(nbytes)}"
    limit = hard_bytes()
    if seconds > HARD_SECONDS or nbytes > limit:
        raise InvalidArgument(
            f"{estimate} ({how}), beyond the limits of {fmt_duration(HARD_SECONDS)} and "
            f"{fmt_bytes(limit)}; use fewer or smaller sizes"
        )
    if (seconds > SOFT_SECONDS or nbytes > SOFT_BYTES) and not yes:
        raise InvalidArgument(
            f"{estimate} ({how}); pass {flag} to run it, or use fewer or smaller sizes"
        )
