"""What the command line does around a command: the deadline and Ctrl-C while NumPy loads.

:func:`start_deadline` ends the process when ``--timeout`` passes;
:func:`import_numpy_deferring_ctrl_c` imports NumPy with Ctrl-C held until it
is in (every path of the command line that loads NumPy goes through it:
running a command, reading a value with :mod:`kernelcheck._src.core.validate`,
reading a catalogue of the library); :func:`reader_gone` quiets a standard
output whose reader went away.  This module imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

from kernelcheck._src.core.outcome import EXIT_INCONCLUSIVE, EXIT_INTERRUPTED

__all__ = ["start_deadline", "import_numpy_deferring_ctrl_c", "reader_gone"]


def start_deadline(seconds: float | None, prog: str, out: Any) -> threading.Event:
    """``--timeout``: end the process ``seconds`` from now unless the returned event is set.

    Why a process exit: a deadline inside the process can interrupt only
    Python code (a signal reaches the interpreter between byte codes), not
    a LAPACK call or a blocked read; ``os._exit`` ends everything.  It waits
    for :data:`~kernelcheck._src.core.atomic.BUNDLE_LOCK`, so a report that is
    being written is finished (or, on an error, rolled back) first, and the
    message says whether ``--out`` holds this run's report.  Exit code 3
    (inconclusive): no verdict was reached in time.

    Parameters
    ----------
    seconds : float or None
        The deadline in seconds from now; None starts no deadline.
    prog : str
        The command's name for the message (``"kernelcheck psd"``).
    out : str or Path or None
        The command's ``--out`` folder, if any, named in the message.

    Returns
    -------
    threading.Event
        Set it when the command is done; the deadline then never fires.
    """
    from kernelcheck._src.core.waits import wait_for

    done = threading.Event()
    if seconds is None:
        return done

    def fire() -> None:
        try:
            if wait_for(done, seconds):
                return
        except BaseException:  # noqa: BLE001 - a watchdog that cannot wait ends the run
            with contextlib.suppress(Exception):
                sys.stderr.write(f"{prog}: the --timeout watchdog failed; stopping\n")
            os._exit(EXIT_INCONCLUSIVE)
        from kernelcheck._src.core.atomic import BUNDLE_LOCK
        from kernelcheck._src.core.report import written_folders

        with BUNDLE_LOCK:
            if done.is_set():
                return
            where = ""
            if out is not None:
                complete = any(Path(f) == Path(out) for f in written_folders())
                where = (
                    f"; the report in {out} was already complete"
                    if complete
                    else f"; nothing was written to {out}"
                )
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            with contextlib.suppress(Exception):
                sys.stderr.write(f"{prog}: timed out after {seconds:g} s{where}\n")
                sys.stderr.flush()
            os._exit(EXIT_INCONCLUSIVE)

    threading.Thread(target=fire, name="kernelcheck --timeout", daemon=True).start()
    return done


def import_numpy_deferring_ctrl_c() -> None:
    """Import NumPy with Ctrl-C held until it is in, then raise it as KeyboardInterrupt.

    A SIGINT while NumPy's compiled core initialises comes out as an
    ``ImportError`` with the interrupt lost: the core imports ``datetime``
    from C, and CPython's ``PyCapsule_Import`` replaces the KeyboardInterrupt
    raised there with "could not import module datetime".  So the import
    runs with the signal recorded instead of raised (a fraction of a second),
    and a recorded Ctrl-C is raised once NumPy is in, where the command
    line's handler turns it into one line and exit 130.  Only in the main
    thread (the only one that may set a signal handler), and only before
    NumPy is imported.
    """
    if "numpy" in sys.modules or threading.current_thread() is not threading.main_thread():
        return
    import signal

    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        import numpy  # noqa: F401
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def reader_gone() -> int:
    """Standard output's reader went away (``kernelcheck essay | head``): stop quietly.

    Returns
    -------
    int
        The exit code of an interrupted command (130).
    """
    # Point stdout at /dev/null so the interpreter's final flush stays quiet.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_INTERRUPTED
