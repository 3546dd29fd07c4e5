"""Atomic file output: a report file is whole or absent, never half written.

Each writer writes to a temporary file in the destination folder, flushes and
fsyncs it, then ``os.replace``-s it onto the final name (atomic on POSIX).  An
interrupted run (SIGINT, an exception) removes the temporary file.

A report made of several files is written by
:func:`kernelcheck._src.core.report.write_bundle` in two phases: the files
are written under temporary names with SIGTERM turned into an exception
(:func:`terminate_raises`, so the temporary files are removed on the way
out, as for SIGINT), then renamed into place under :func:`signals_deferred`:
SIGINT and SIGTERM are held until the last file is in place and then raised
as :class:`InterruptedAfterWrite`.  So an interrupt leaves either the whole
new set or (when it comes before the renames) the old one.  The whole write
holds :data:`BUNDLE_LOCK`, which the command line's ``--timeout`` takes
before it ends the process, so a deadline never cuts a write in half.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = [
    "atomic_write",
    "write_text_atomic",
    "write_bytes_atomic",
    "signals_deferred",
    "sigint_deferred",
    "InterruptedAfterWrite",
    "Terminated",
    "ReportNotWritten",
    "terminate_raises",
    "BUNDLE_LOCK",
]

#: Held while a report bundle is written (both phases); see the module notes.
BUNDLE_LOCK = threading.RLock()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it to ``path``.

    ``mode`` is ``"w"`` (text, UTF-8 unless ``encoding`` is given) or ``"wb"``.
    On any exception, including :class:`KeyboardInterrupt`, the temporary file
    is removed and ``path`` is left as it was.
    """
    if mode not in ("w", "wb"):
        raise ValueError("atomic_write mode must be 'w' or 'wb'")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode == "w":
            kwargs.setdefault("encoding", "utf-8")
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically; return the path."""
    with atomic_write(path, "w") as fh:
        fh.write(text)
    return Path(path)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    return Path(path)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while :func:`terminate_raises` was active (handled like Ctrl-C)."""


class ReportNotWritten(OSError):
    """A report bundle could not be written (a full disk, a read-only folder, an I/O error).

    Raised after every temporary file is removed and every file the write
    had replaced is restored: the folder holds its previous report, whole.
    ``errno``, ``strerror`` and ``filename`` are those of the failure.
    """


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated` (like SIGINT's KeyboardInterrupt).

    The default action of SIGTERM ends the process at once, skipping every
    ``finally`` block and so leaving temporary files behind.  Outside the
    main thread the block runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class InterruptedAfterWrite(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived while report files were moved into place; they are all complete."""


#: The signals held while a bundle's files are moved into place.
DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_deferred(signals=DEFERRED_SIGNALS) -> Iterator[None]:
    """Hold ``signals`` (SIGINT, SIGTERM) until the block ends, then raise if one came.

    A held signal is raised as :class:`InterruptedAfterWrite` when the block
    has completed.  Outside the main thread (where Python cannot install signal handlers) the
    block runs as is.  An exception raised inside the block propagates
    unchanged; a held signal is then dropped with it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handler(signum, frame):
        received.append(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if received:
        raise InterruptedAfterWrite


def sigint_deferred() -> contextlib.AbstractContextManager[None]:
    """:func:`signals_deferred` for SIGINT and SIGTERM (the name kept for callers)."""
    return signals_deferred()
