"""Reading a matrix from a file: ``.npy``, ``.npz``, ``.csv`` and ``.txt``.

:func:`load_matrix` is what ``kernelcheck psd FILE`` and ``--points FILE`` read
with.  Every refusal (a missing, special, oversized, truncated or malformed
file, a pickle) is a :class:`~kernelcheck._src.cli.arguments.UsageError`
with a one-line message, raised before the bulk of the file is read where
the header or the size of the file already tells.
"""

from __future__ import annotations

import itertools
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kernelcheck._src.cli.arguments import UsageError
from kernelcheck.errors import InvalidArgument

__all__ = ["MATRIX_SUFFIXES", "load_matrix", "header_row"]

#: The file name endings :func:`load_matrix` reads.
MATRIX_SUFFIXES = (".npy", ".npz", ".csv", ".txt")


def load_matrix(
    path: str | Path, key: str | None = None, *, note: Callable[[str], Any] | None = None
) -> Any:
    """Read a matrix from ``.npy``, ``.npz`` (array ``key``), ``.csv`` or ``.txt``.

    ``.csv`` is comma separated, ``.txt`` whitespace separated; ``#`` starts
    a comment.  A first row of a text file in which no field is a number
    (the column names a spreadsheet writes) is a header: it is skipped, and
    ``note`` is told.  Pickled objects are refused.  Before anything
    is read, the file must be a regular file (a FIFO, a device such as
    ``/dev/zero`` or a folder is refused at once) and the array must fit in
    memory: the shape in a ``.npy`` header (or in each ``.npz`` member's, so
    a small compressed file that unpacks to gigabytes is refused before it
    is unpacked), the most numbers a text file of its size can hold, checked
    with :func:`kernelcheck._src.core.validate.check_size`.  A text file with
    NUL bytes (a binary or sparse file) is refused.

    Parameters
    ----------
    path : str or Path
        The file.
    key : str or None, default None
        The array's name inside an ``.npz`` file (default None: needed only
        when the archive holds more than one array).
    note : callable or None, default None
        Called with one line when a header row was skipped (default None:
        skipped without a word).

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    UsageError
        With a one-line message, for a missing, unreadable, special, oversized
        or malformed file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "k.csv")
    >>> np.savetxt(f, np.eye(2), delimiter=",", header="a,b", comments="")
    >>> load_matrix(f, note=print).tolist()
    skipped the header row of ... (a,b)
    [[1.0, 0.0], [0.0, 1.0]]
    """
    from kernelcheck._src.core.files import as_input_file

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in MATRIX_SUFFIXES:
        raise UsageError(
            f"cannot read {str(path)!r}: the file name must end in one of "
            f"{', '.join(MATRIX_SUFFIXES)}"
        )
    try:
        as_input_file(path, "FILE")
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    if key is not None and suffix != ".npz":
        raise UsageError(f"--key applies to .npz files only, not to {str(path)!r}")
    try:
        if suffix == ".npy":
            return _load_npy(path)
        if suffix == ".npz":
            return _load_npz(path, key)
        return _load_text(path, "," if suffix == ".csv" else None, note)
    except UsageError:
        raise
    except InvalidArgument as exc:  # a size refusal
        raise UsageError(str(exc)) from None
    except (ValueError, OSError, EOFError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(f"cannot read a matrix from {str(path)!r}: {reason}") from None


def _load_npy(path: Path) -> Any:
    import numpy as np

    with open(path, "rb") as fh:
        _check_npy_header(fh, str(path), path.stat().st_size)
    return np.load(path, allow_pickle=False)


def _check_npy_header(fh: IO[bytes], what: str, available: int | None) -> None:
    """Refuse an ``.npy`` stream whose header promises an array too large to hold.

    ``available``: the bytes the stream holds (None inside a compressed
    archive, whose members are sized by their header alone).
    """
    from numpy.lib import format as npy

    from kernelcheck._src.core.memory import check_size

    version = npy.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = npy.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = npy.read_array_header_2_0(fh)
    else:
        raise UsageError(f"cannot read {what}: .npy format version {version} is not supported")
    count = 1
    for n in shape:
        count *= int(n)
    itemsize = max(int(dtype.itemsize), 8)  # the matrix is read as float64
    check_size(count, f"the {shape} array in {what}", itemsize=itemsize)
    if available is not None and dtype.kind != "O":
        need = fh.tell() + count * int(dtype.itemsize)
        if need > available:
            raise UsageError(
                f"cannot read a matrix from {what}: its header promises {need} bytes, the "
                f"file holds {available} (truncated?)"
            )


def _load_npz(path: Path, key: str | None) -> Any:
    import numpy as np

    with zipfile.ZipFile(path) as zf:
        names = [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
        if not names:
            raise UsageError(f"{str(path)!r} holds no array")
        if key is None:
            if len(names) > 1:
                raise UsageError(
                    f"{str(path)!r} holds {len(names)} arrays ({', '.join(names)}); "
                    "choose one with --key NAME"
                )
            key = names[0]
        if key not in names:
            raise UsageError(f"{str(path)!r} has no array {key!r} (it has: {', '.join(names)})")
        with zf.open(f"{key}.npy") as fh:
            _check_npy_header(fh, f"{str(path)!r} (array {key!r})", None)
    with np.load(path, allow_pickle=False) as archive:
        return archive[key]


def _load_text(path: Path, delimiter: str | None, note: Callable[[str], Any] | None) -> Any:
    """A ``.csv`` (``delimiter=","``) or ``.txt`` (white space) matrix, its header row skipped."""
    import numpy as np

    _check_text_file(path)
    with open(path, encoding="utf-8") as fh:
        skip, header = header_row(fh, delimiter)
    if header is not None and note is not None:
        note(f"skipped the header row of {str(path)!r} ({header})")
    with open(path, encoding="utf-8") as fh:  # none: NumPy would warn and return an empty array
        if not any(_fields(line, delimiter) for line in itertools.islice(fh, skip, None)):
            below = " below its header row" if header is not None else ""
            raise UsageError(f"{str(path)!r} holds no numbers{below}")
    with open(path, encoding="utf-8") as fh:
        return np.loadtxt(
            fh, delimiter=delimiter, dtype=np.float64, ndmin=2, comments="#", skiprows=skip
        )


def _fields(line: str, delimiter: str | None) -> list[str]:
    """The fields of one line of a text matrix, its comment cut off (none for a blank line)."""
    text = line.split("#", 1)[0]
    if not text.strip():
        return []
    return [field.strip() for field in text.split(delimiter)]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def header_row(lines: Any, delimiter: str | None) -> tuple[int, str | None]:
    """Find a header row: the first row with fields, when none of its fields is a number.

    Parameters
    ----------
    lines : iterable of str
        The lines of the file (an open text file).
    delimiter : str or None
        The field separator (``","``), or None for white space.

    Returns
    -------
    (int, str or None)
        The number of lines to skip (through the header row; 0 when there is
        none) and the header row as written, without its line end (None when
        there is none).  A first row with one number among its fields
        (``1,2,x``) is a malformed row, not a header: it is not skipped.

    Examples
    --------
    >>> header_row(["# a comment", "x,y", "1,2"], ",")
    (2, 'x,y')
    >>> header_row(["1,2", "3,4"], ",")
    (0, None)
    """
    for i, line in enumerate(lines):
        fields = _fields(line, delimiter)
        if not fields:
            continue
        if any(_is_number(field) for field in fields):
            return 0, None
        return i + 1, line.split("#", 1)[0].strip()
    return 0, None


def _check_text_file(path: Path) -> None:
    """A text matrix file: no NUL byte in its first 64 KiB, and its numbers fit in memory."""
    from kernelcheck._src.core.memory import check_size

    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if b"\0" in head:
        raise UsageError(
            f"cannot read a matrix from {str(path)!r}: it holds NUL bytes, so it is not a "
            "text file (a binary or sparse file?)"
        )
    # every number takes at least two characters ("0,", "0\n")
    check_size((size + 1) // 2, f"reading {str(path)!r} ({size} bytes of text)")
