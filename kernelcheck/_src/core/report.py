"""Report bundles: the one writer of every report folder (essay, unbiased, scaling).

A report is a *bundle*: a few files (Markdown, JSON, PNG plots) rendered in
memory first and then written together by :func:`write_bundle`, in two
phases:

1. every file is written to a temporary name beside its destination,
   flushed and fsync-ed (a full disk or a read-only folder fails here, and
   every temporary file is removed: the folder keeps its old report whole);
2. the temporary files are renamed onto their destinations (``os.replace``,
   atomic on POSIX) with SIGINT and SIGTERM held until the last one is in
   place; a held signal is then raised as
   :class:`~kernelcheck._src.core.atomic.InterruptedAfterWrite`.

Plots go through one matplotlib guard: :func:`new_figure` builds a figure
with the object-oriented API (no pyplot, no global state, any backend) or
raises :class:`PlotsUnavailable` with the command that installs matplotlib;
:func:`render_plots` turns that into "no plots, and a note saying so", the
one behaviour when matplotlib is missing.  :func:`environment` is the one
record of the machine a report was made on.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelcheck._src.core.atomic import signals_deferred
from kernelcheck._src.core.validate import as_output_folder, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "PlotsUnavailable",
    "PLOTS_SKIPPED",
    "new_figure",
    "png_bytes",
    "render_plots",
    "json_text",
    "environment",
    "write_bundle",
    "written_summary",
]

#: The note a report carries when its plots could not be drawn.
PLOTS_SKIPPED = (
    "plots skipped: matplotlib is not installed (pip install 'kernelcheck[plots]' installs it)"
)


class PlotsUnavailable(ImportError):
    """matplotlib is not installed; the message says how to install it."""


def new_figure(figsize: tuple[float, float] = (5.5, 3.8), dpi: int = 110):
    """A new :class:`matplotlib.figure.Figure` with an Agg canvas attached.

    Raises
    ------
    PlotsUnavailable
        When matplotlib cannot be imported.
    """
    try:
        import matplotlib  # noqa: F401 - honours a None sentinel in sys.modules
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotsUnavailable(PLOTS_SKIPPED) from exc
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig, *, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (``bbox_inches="tight"``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def render_plots(render: Callable[[], dict[str, bytes]]) -> tuple[dict[str, bytes], str | None]:
    """Run a plot renderer; without matplotlib, no plots and :data:`PLOTS_SKIPPED`.

    Returns ``(plots, note)``: the renderer's ``{file name: PNG bytes}`` and
    ``None``, or ``({}, PLOTS_SKIPPED)`` when it raised :class:`PlotsUnavailable`.
    """
    try:
        return render(), None
    except PlotsUnavailable:
        return {}, PLOTS_SKIPPED


def json_text(obj: Any) -> str:
    """``obj`` as indented JSON text with a final newline (``to_dict()`` first if it has one)."""
    from kernelcheck._src.core.results import to_jsonable

    return json.dumps(to_jsonable(obj), indent=2) + "\n"


def environment(**extra: Any) -> dict[str, Any]:
    """The machine a report was made on: versions, platform, CPUs, load, start time.

    ``extra`` entries are added (and win over the defaults).  The load
    average is ``None`` where the platform has none.
    """
    import numpy

    from kernelcheck._src.core.version import __version__

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    env: dict[str, Any] = {
        "kernelcheck": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "executable": Path(sys.executable).name,
        "load_average": load,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    env.update(extra)
    return env


def _move(src: str, dest: Path) -> None:
    """Phase 2 of :func:`write_bundle`: one atomic rename."""
    os.replace(src, dest)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bundle(
    out_dir: Any, files: Mapping[str, bytes | str], *, name: str = "out_dir"
) -> list[Path]:
    """Write every file of a report bundle into ``out_dir``, all or none (see module docstring).

    Parameters
    ----------
    out_dir : str or path-like
        The folder (created with its parents when missing).
    files : mapping of str to bytes or str
        File name (no folder part) to content; text is written as UTF-8.
        Files are moved into place in the mapping's order, so put the file a
        reader opens first (``report.md``) last.
    name : str
        The argument's name in error messages.

    Returns
    -------
    list of pathlib.Path
        The files written, in order.

    Raises
    ------
    InvalidArgument
        For a folder that cannot be written into, or a bad file name.
    OSError
        When a write fails in phase 1 (e.g. ``ENOSPC``): no destination file
        has been touched and no temporary file is left.
    """
    folder = as_output_folder(out_dir, name)
    contents: list[tuple[str, bytes]] = []
    for fname, data in files.items():
        if not isinstance(fname, str) or not fname or Path(fname).name != fname:
            raise InvalidArgument(f"a bundle file name must be a plain file name, got {fname!r}")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise InvalidArgument(
                f"bundle file {fname!r} must be bytes or str, got {describe(data)}"
            )
        contents.append((fname, bytes(data)))
    folder.mkdir(parents=True, exist_ok=True)
    mode = 0o666 & ~_umask()
    staged: list[tuple[str, Path]] = []
    try:
        for fname, data in contents:  # phase 1: everything on disk under temporary names
            fd, tmp = tempfile.mkstemp(prefix=f".{fname}.", suffix=".tmp", dir=folder)
            staged.append((tmp, folder / fname))
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        with signals_deferred():  # phase 2: renames only
            while staged:
                tmp, dest = staged[0]
                _move(tmp, dest)
                staged.pop(0)
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return [folder / fname for fname, _ in contents]


def written_summary(paths: Any, out_dir: Any) -> str:
    """What a command prints after writing a report bundle: the files, and skipped plots.

    ``"wrote report.json, report.md, bias.png to DIR"``; when a Markdown file
    of the bundle carries :data:`PLOTS_SKIPPED` (matplotlib is missing), that
    note follows on its own line.  The one wording of every ``--out``.

    Examples
    --------
    >>> written_summary([], "out")
    'wrote nothing to out'
    """
    paths = [Path(p) for p in paths]
    names = ", ".join(p.name for p in paths) or "nothing"
    text = f"wrote {names} to {out_dir}"
    for p in paths:
        if p.suffix == ".md" and p.is_file() and PLOTS_SKIPPED in p.read_text(encoding="utf-8"):
            return f"{text}\n{PLOTS_SKIPPED}"
    return text
