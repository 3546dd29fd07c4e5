"""File paths: a folder to write a report into, a file to read a matrix from.

Both are checked before any work, without reading or writing anything the
caller asked for (a folder's writability is probed with an empty file that
is removed at once).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from kernelcheck._src.core.validate import describe
from kernelcheck.errors import InvalidArgument

__all__ = ["as_output_folder", "as_input_file"]


def as_output_folder(value: Any, name: str = "out") -> Path:
    """A folder a report can be written into, checked before any work.

    The path must be a non-empty string or path-like; if it exists it must be
    a folder this process can write into; if not, its nearest existing parent
    must be such a folder (the report writer creates the rest).  Writability
    is probed by creating (and removing) an empty file, so read-only mounts
    and special file systems are refused as well as permissions.
    """
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidArgument(f"`{name}` must be a folder path, got {describe(value)}")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise InvalidArgument(f"`{name}` must be a folder, but {str(path)!r} is a file")
    probe = path
    while not probe.exists():
        if probe.is_symlink():
            raise InvalidArgument(f"`{name}` {str(path)!r}: {str(probe)!r} is a dangling link")
        probe = probe.parent
    if not probe.is_dir():
        raise InvalidArgument(
            f"`{name}` {str(path)!r} cannot be created: {str(probe)!r} is not a folder"
        )
    try:  # a real probe: permissions, read-only mounts and /proc all refuse a file
        fd, tmp = tempfile.mkstemp(prefix=".kernelcheck-probe.", dir=probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidArgument(
            f"`{name}` {str(path)!r}: cannot write into {str(probe)!r} ({reason})"
        ) from None
    os.close(fd)
    os.unlink(tmp)
    return path


def as_input_file(value: Any, name: str = "file") -> Path:
    """An existing regular file to read, checked without opening it.

    Folders, FIFOs, sockets and devices (``/dev/zero``, a terminal) are
    refused at once: reading a FIFO blocks until a writer comes, a device
    can be endless.  ``os.stat`` does neither.
    """
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidArgument(f"`{name}` must be a file path, got {describe(value)}")
    path = Path(value)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InvalidArgument(f"no such file: {str(path)!r}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidArgument(f"cannot read {str(path)!r}: {reason}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidArgument(f"{str(path)!r} is a folder, not a matrix file")
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "a device"
        )
        raise InvalidArgument(
            f"{str(path)!r} is {kind}, not a regular file; save the matrix to a file first"
        )
    return path
