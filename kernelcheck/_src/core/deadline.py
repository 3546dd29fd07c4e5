"""Deadlines for user callables: the ``timeout=`` of the verifiers.

A verifier declared with :func:`honours_timeout` runs under
:func:`user_deadline`; every call of user code made through
:func:`kernelcheck._src.core.calls.call_user` or :func:`run_user` while it
runs waits at most until that deadline.  See :func:`run_user` for how, and
for what a deadline cannot do.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from kernelcheck._src.core.threadstate import capture
from kernelcheck._src.core.validate import as_real
from kernelcheck._src.core.waits import wait_until
from kernelcheck.errors import InvalidArgument

__all__ = [
    "as_timeout",
    "honours_timeout",
    "user_deadline",
    "run_user",
    "current_deadline",
    "within_deadline",
]

#: ``(monotonic deadline, timeout in seconds)`` of the enclosing :func:`user_deadline`.
_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "kernelcheck_user_deadline", default=None
)


def current_deadline() -> tuple[float, float] | None:
    """``(monotonic deadline, timeout)`` of the enclosing :func:`user_deadline`, or None."""
    return _DEADLINE.get()


@contextlib.contextmanager
def user_deadline(timeout: float | None) -> Iterator[None]:
    """Within the block, user callables may run until ``timeout`` seconds from now.

    ``None`` sets no deadline (and keeps an enclosing one).  Deadlines nest:
    an inner block can only shorten the time left.

    Parameters
    ----------
    timeout : float or None
        Seconds from now (positive and finite, see :func:`as_timeout`), or
        None for no deadline of this block's own.
    """
    if timeout is None:
        yield
        return
    deadline = time.monotonic() + timeout
    outer = _DEADLINE.get()
    if outer is not None and outer[0] < deadline:
        deadline, timeout = outer
    token = _DEADLINE.set((deadline, timeout))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@contextlib.contextmanager
def within_deadline(limit: tuple[float, float] | None) -> Iterator[None]:
    """Within the block, the deadline ``limit`` (a :func:`current_deadline` taken earlier) holds.

    For work handed to another thread or process of this machine (an
    executor's shard), which does not inherit the caller's context: the
    deadline is the same instant (``time.monotonic`` counts from one origin
    on a machine), never restarted.  ``None``, or a context already under a
    deadline, changes nothing.

    Parameters
    ----------
    limit : tuple of (float, float) or None
        ``(monotonic deadline, timeout)`` as :func:`current_deadline` gave it.
    """
    if limit is None or _DEADLINE.get() is not None:
        yield
        return
    token = _DEADLINE.set(limit)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def run_user(fn: Callable, label: str, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` under the deadline of the enclosing :func:`user_deadline`.

    Without a deadline this is the plain call.  With one, ``fn`` runs in a
    daemon thread and the caller waits until the deadline (any finite one:
    see :func:`wait_for`); a call still running then raises
    :class:`InvalidArgument` naming ``label`` and the timeout.  Exceptions
    of ``fn`` pass through unchanged (:func:`~kernelcheck._src.core.calls.call_user`
    converts them); a thread that cannot be started is an
    :class:`InvalidArgument` naming ``timeout``, never an error of ``fn``.

    The thread runs ``fn`` in the caller's state: a copy of its context
    variables, NumPy's error state, and the thread-local modes of PyTorch and
    JAX that :func:`kernelcheck._src.core.threadstate.capture` lists (x64,
    matmul precision, grad mode, autocast, ...), so ``fn`` computes there what
    it would compute in the caller's thread.

    Limits (why a thread, and what it cannot do).  Python cannot stop a
    thread, and a signal (``SIGALRM``) interrupts neither C code -- a BLAS
    call, a lock, a blocking read -- nor anything outside the main thread.
    A thread with a deadline returns control to the caller on time wherever
    ``fn`` is stuck, from any thread; the price is that the abandoned call is
    not stopped: it runs on in the background until it returns (its result
    is dropped; it holds only copies of the caller's arrays).  To bound a
    process whatever it runs, bound the process (the command line's
    ``--timeout`` exits).

    Parameters
    ----------
    fn : callable
        The user's callable.
    label : str
        How the messages name the call.
    *args : object
        Its positional arguments.
    **kwargs : object
        Its keyword arguments.

    Returns
    -------
    object
        What ``fn`` returned.
    """
    limit = _DEADLINE.get()
    if limit is None:
        return fn(*args, **kwargs)
    deadline, timeout = limit
    result: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()
    errstate = np.geterr()
    modes = capture()

    def target() -> None:
        try:
            with np.errstate(**errstate), modes():
                result["value"] = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc
        finally:
            done.set()

    if deadline > time.monotonic():
        try:
            threading.Thread(target=target, name=f"kernelcheck: {label}", daemon=True).start()
        except RuntimeError as exc:  # no thread left to run it in
            raise InvalidArgument(
                f"`timeout`: no thread could be started to run {label} under "
                f"timeout={timeout:g} s ({exc}); call without `timeout`, or with fewer "
                "threads running"
            ) from exc
    if not wait_until(done, deadline):
        raise InvalidArgument(
            f"{label} did not return within timeout={timeout:g} s; the call is abandoned "
            "(it may run on in the background: Python cannot stop it). Raise `timeout`, or "
            "check the callable on smaller inputs"
        )
    if "error" in result:
        raise result["error"]
    return result["value"]


def as_timeout(value: Any, name: str = "timeout") -> float | None:
    """``None`` (no limit) or a positive finite number of seconds.

    Parameters
    ----------
    value : float or None
        The caller's timeout in seconds.
    name : str, default "timeout"
        The argument's name, used in messages.

    Returns
    -------
    float or None
        ``value`` as a float; None for no limit.
    """
    if value is None:
        return None
    return as_real(value, name, positive=True)


def honours_timeout(func: Callable) -> Callable:
    """Decorator: run ``func`` under :func:`user_deadline` of its ``timeout=`` argument.

    ``func`` declares (and documents) a keyword argument ``timeout`` and may
    ignore it: the decorator validates it (:func:`as_timeout`) and bounds
    every user call made through :func:`~kernelcheck._src.core.calls.call_user`
    or :func:`run_user` while ``func`` runs.

    Parameters
    ----------
    func : callable
        A verifier with a keyword argument ``timeout``.

    Returns
    -------
    callable
        ``func`` running under the deadline of its ``timeout``.
    """
    default = inspect.signature(func).parameters["timeout"].default

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        timeout = as_timeout(kwargs.get("timeout", default))
        with user_deadline(timeout):
            return func(*args, **kwargs)

    return wrapper
