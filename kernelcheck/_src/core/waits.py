"""Waiting on a thread event for any finite time, without importing NumPy.

Used by the deadlines of user calls (:mod:`kernelcheck._src.core.deadline`)
and by the command line's ``--timeout`` watchdog, which must start before
NumPy is imported (a Ctrl-C inside NumPy's import is deferred by the
command line, never by this module).
"""

from __future__ import annotations

import threading
import time

__all__ = ["WAIT_SLICE", "wait_for", "wait_until"]

#: The longest single wait on an event, in seconds.  A wait of ``t`` seconds
#: is turned into an absolute time, which the platform's ``time_t`` (and
#: :data:`threading.TIMEOUT_MAX`) cannot hold for every finite ``t``
#: (``Event.wait(1e10)`` raises :class:`OverflowError`); a longer deadline is
#: waited for in slices of at most this length, one wake-up an hour.
WAIT_SLICE = min(3600.0, threading.TIMEOUT_MAX)


def wait_for(event: threading.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` have passed; True if it was set.

    :meth:`threading.Event.wait` for any finite ``seconds``, however large:
    the wait is cut into slices of at most :data:`WAIT_SLICE` seconds, so no
    timeout the platform cannot represent is ever handed to it.

    Parameters
    ----------
    event : threading.Event
        The event to wait for.
    seconds : float
        How long to wait at most (finite; zero or less does not wait).

    Returns
    -------
    bool
        Whether ``event`` is set.

    Examples
    --------
    >>> done = threading.Event()
    >>> done.set()
    >>> wait_for(done, 1e300)
    True
    >>> wait_for(threading.Event(), 0.0)
    False
    """
    return wait_until(event, time.monotonic() + float(seconds))


def wait_until(event: threading.Event, deadline: float) -> bool:
    """Wait until ``event`` is set or ``time.monotonic()`` reaches ``deadline``; True if set.

    Parameters
    ----------
    event : threading.Event
        The event to wait for.
    deadline : float
        The :func:`time.monotonic` time to give up at.

    Returns
    -------
    bool
        Whether ``event`` is set.
    """
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return event.is_set()
        if event.wait(min(left, WAIT_SLICE)):
            return True
