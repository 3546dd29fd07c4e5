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

    The path must be a non-empty string or path-like that the file system
    can name (no NUL byte, encodable, no name longer than the file system
    allows); if it exists it must be a folder this process can write into;
    if not, its nearest existing parent must be such a folder (the report
    writer creates the rest).  Writability is probed by creating (and
    removing) an empty file, so read-only mounts and special file systems
    are refused as well as permissions.

    Parameters
    ----------
    value : str or os.PathLike
        The folder.
    name : str, default "out"
        The argument's name, used in messages.

    Returns
    -------
    pathlib.Path
        ``value`` as a path.

    Raises
    ------
    InvalidArgument
        Naming ``name`` and the path, for every folder a report could not be
        written into.
    """
    path = _as_path(value, name, "folder")
    try:
        if path.exists() and not path.is_dir():
            raise InvalidArgument(f"`{name}` must be a folder, but {str(path)!r} is a file")
        probe = path
        while not probe.exists():
            if probe.is_symlink():
                raise InvalidArgument(
                    f"`{name}` {str(path)!r}: {str(probe)!r} is a dangling link (or a loop "
                    "of links)"
                )
            probe = probe.parent
    except OSError as exc:  # a name too long for the file system, a path too long
        reason = exc.strerror or type(exc).__name__
        raise InvalidArgument(f"`{name}` {str(path)!r}: {reason}") from None
    if not probe.is_dir():
        raise InvalidArgument(
            f"`{name}` {str(path)!r} cannot be created: {str(probe)!r} is not a folder"
        )
    _check_name_lengths(path, probe, name)
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


def _as_path(value: Any, name: str, what: str) -> Path:
    """``value`` as a :class:`~pathlib.Path` the operating system can be handed.

    A NUL byte ends a C string, so no file name holds one (``os.stat``
    raises :class:`ValueError`); a string with a lone surrogate has no bytes
    to name a file by (:class:`UnicodeEncodeError`).  Both are refused here,
    naming ``name``, before anything is read, rendered or written.
    """
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidArgument(f"`{name}` must be a {what} path, got {describe(value)}")
    text = os.fspath(value)
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"`{name}` {text!r} cannot be encoded as a file name on this system ({exc.reason} "
            f"at position {exc.start})"
        ) from None
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InvalidArgument(
            f"`{name}` {text!r} holds a NUL byte at position {nul}; no file name can hold one"
        )
    return Path(os.fsdecode(raw))


def _check_name_lengths(path: Path, probe: Path, name: str) -> None:
    """Each part of ``path`` below its existing parent ``probe`` fits the file system's names.

    ``os.stat`` of a missing folder stops at the first missing part, so a
    part too long further down is only met when the writer creates it.
    """
    try:
        limit = os.pathconf(probe, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # pragma: no cover - not POSIX
        return
    for part in path.relative_to(probe).parts:
        size = len(os.fsencode(part))
        if size > limit:
            raise InvalidArgument(
                f"`{name}` {str(path)!r}: the name {part[:20]!r}... is {size} bytes long; "
                f"the file system in {str(probe)!r} takes names of at most {limit} bytes"
            )


def as_input_file(value: Any, name: str = "file") -> Path:
    """An existing regular file to read, checked without opening it.

    Folders, FIFOs, sockets and devices (``/dev/zero``, a terminal) are
    refused at once: reading a FIFO blocks until a writer comes, a device
    can be endless.  ``os.stat`` does neither.

    Parameters
    ----------
    value : str or os.PathLike
        The file.
    name : str, default "file"
        The argument's name, used in messages.

    Returns
    -------
    pathlib.Path
        ``value`` as a path.

    Raises
    ------
    InvalidArgument
        For a path that names no regular file this process can read.
    """
    path = _as_path(value, name, "file")
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
