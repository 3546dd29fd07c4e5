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
import errno
import io
import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelcheck._src.core.atomic import (
    BUNDLE_LOCK,
    ReportNotWritten,
    signals_deferred,
    terminate_raises,
)
from kernelcheck._src.core.files import as_output_folder
from kernelcheck._src.core.validate import describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "PlotsUnavailable",
    "PLOTS_SKIPPED",
    "new_figure",
    "png_bytes",
    "size_ticks",
    "render_plots",
    "json_text",
    "environment",
    "write_bundle",
    "written_folders",
    "written_summary",
]

#: The note a report carries when its plots could not be drawn.
PLOTS_SKIPPED = (
    "plots skipped: matplotlib is not installed "
    "(pip install 'kernelcheck-attention[plots]' installs it)"
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


def size_ticks(ax, values, *, fontsize: float = 8.0) -> None:
    """Label a log x axis at the sizes ``values`` (n, m) so that no two labels overlap.

    Every value gets a tick.  A greedy pass keeps powers of two first (the
    library's grids double), then any other value, as long as its label
    clears every label kept: each label's width on the axis is estimated from
    its characters (0.6 em each, rotated 30 degrees) against the axis's width
    in the figure, less 15% for the margins a tight layout takes.  Kept
    values get plain integer labels, the rest an unlabelled minor tick, so two
    grids merged on one axis (sizes a factor sqrt(2) apart beside sizes a
    factor 2 apart) never print labels over each other.  Call it after the
    data are plotted (the axis limits are then known).
    """
    from matplotlib.ticker import FixedLocator, NullFormatter

    ticks = sorted({int(v) for v in values if v > 0})
    lo, hi = (math.log(v) for v in ax.get_xlim())
    fig = ax.get_figure()
    axis_px = 0.85 * ax.get_position().width * fig.get_figwidth() * fig.dpi
    em = fontsize * fig.dpi / 72.0
    cos, sin = math.cos(math.radians(30)), math.sin(math.radians(30))

    def half_width(v: int) -> float:  # in log units of the axis, with a quarter-em gap
        px = 0.6 * em * len(str(v)) * cos + em * sin + 0.25 * em
        return 0.5 * px / axis_px * (hi - lo)

    kept: list[int] = []
    for v in sorted(ticks, key=lambda v: (v & (v - 1) != 0, v)):
        if all(abs(math.log(v / k)) >= half_width(v) + half_width(k) for k in kept):
            kept.append(v)
    kept.sort()
    ax.set_xticks(kept)
    ax.set_xticklabels([str(v) for v in kept], rotation=30, fontsize=fontsize)
    ax.xaxis.set_minor_locator(FixedLocator([v for v in ticks if v not in kept]))
    ax.xaxis.set_minor_formatter(NullFormatter())


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
    """The process umask, read without changing it where Linux allows (``/proc``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    mask = os.umask(0o022)  # pragma: no cover - the portable way, briefly racy
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


def _bundle_contents(files: Mapping[str, bytes | str]) -> list[tuple[str, bytes]]:
    contents: list[tuple[str, bytes]] = []
    for fname, data in files.items():
        if (
            not isinstance(fname, str)
            or not fname
            or Path(fname).name != fname
            or fname in (".", "..")
        ):
            raise InvalidArgument(f"a bundle file name must be a plain file name, got {fname!r}")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise InvalidArgument(
                f"bundle file {fname!r} must be bytes or str, got {describe(data)}"
            )
        contents.append((fname, bytes(data)))
    if not contents:
        raise InvalidArgument("a bundle must hold at least one file")
    return contents


class _Bundle:
    """One transactional write of a bundle into ``folder`` (see :func:`write_bundle`)."""

    def __init__(self, folder: Path, contents: list[tuple[str, bytes]]):
        self.folder = folder
        self.contents = contents
        self.staged: list[tuple[str, Path]] = []  # (temporary file, destination)
        self.backups: dict[Path, str] = {}  # replaced or removed file -> hard link to it
        self.existed: set[Path] = set()  # destinations there before phase 2
        self.token = os.urandom(4).hex()

    def stage(self) -> None:
        """Phase 1: every file on disk under a temporary name; links to what it replaces."""
        mode = 0o666 & ~_umask()
        for fname, data in self.contents:
            fd, tmp = tempfile.mkstemp(prefix=f".{fname}.", suffix=".tmp", dir=self.folder)
            self.staged.append((tmp, self.folder / fname))
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        for dest in [d for _, d in self.staged]:
            if os.path.lexists(dest):
                self.existed.add(dest)
            if dest.is_file() and not dest.is_symlink():
                backup = str(dest.with_name(f".{dest.name}.{self.token}.old"))
                try:
                    os.link(dest, backup)
                except OSError as exc:  # no hard links here: phase 2 cannot be undone
                    if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                        raise
                    continue
                self.backups[dest] = backup

    def commit(self) -> None:
        """Phase 2: the renames; undone if one fails."""
        done: list[Path] = []
        try:
            while self.staged:
                tmp, dest = self.staged[0]
                _move(tmp, dest)
                self.staged.pop(0)
                done.append(dest)
        except BaseException:
            self._undo(done)
            raise
        with contextlib.suppress(OSError):  # make the renames durable
            fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _undo(self, done: list[Path]) -> None:
        for path in reversed(done):
            backup = self.backups.pop(path, None)
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, path)
                elif path not in self.existed:  # new in this write: take it away
                    path.unlink(missing_ok=True)

    def cleanup(self) -> None:
        for tmp in [t for t, _ in self.staged] + list(self.backups.values()):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self.staged.clear()
        self.backups.clear()


def write_bundle(
    out_dir: Any, files: Mapping[str, bytes | str], *, name: str = "out_dir"
) -> list[Path]:
    """Write every file of a report bundle into ``out_dir``, all or none.

    Phase 1 writes every file under a temporary name beside its destination
    (mode ``0o666`` less the umask, flushed and fsync-ed) and makes a hard
    link to each file it will replace; a full disk, a read-only folder or an
    interrupt (SIGINT, or SIGTERM, raised as an exception here) removes the
    temporary files and links and leaves the folder as it was.  Phase 2
    renames the files onto their destinations (``os.replace``, atomic on
    POSIX) in the mapping's order; SIGINT and SIGTERM are held until it
    ends and then raised as
    :class:`~kernelcheck._src.core.atomic.InterruptedAfterWrite`, and a
    rename that fails puts back every file already replaced (from its link).
    So the folder holds the old report or the new one, whole, and no
    temporary file, whatever the signal or the error.  What remains open: a
    reader looking during the microseconds of phase 2 may see part of each,
    and ``SIGKILL`` or a power cut during phase 2 can leave a mix (only one
    rename of a whole folder avoids that, and it would replace every other
    file of a folder the report shares).  Other files in the folder are
    never touched.

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
    ReportNotWritten
        An :class:`OSError` (``ENOSPC``, ``EROFS``, ``EIO``, ...) during either
        phase: no destination file is changed and no temporary file is left.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> [p.name for p in write_bundle(folder, {"a.json": "{}", "report.md": "# r"})]
    ['a.json', 'report.md']
    """
    folder = as_output_folder(out_dir, name)
    contents = _bundle_contents(files)
    with BUNDLE_LOCK:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            bundle = _Bundle(folder, contents)
        except OSError as exc:
            raise _not_written(exc, folder) from exc
        try:
            with terminate_raises():
                bundle.stage()
                with signals_deferred():
                    bundle.commit()
                    _WRITTEN.append(str(folder))
        except OSError as exc:
            raise _not_written(exc, folder) from exc
        finally:
            bundle.cleanup()
    return [folder / fname for fname, _ in contents]


#: Folders this process has written a bundle into (read by the command line's --timeout).
_WRITTEN: list[str] = []


def written_folders() -> tuple[str, ...]:
    """The folders :func:`write_bundle` has completed a bundle in, in this process."""
    return tuple(_WRITTEN)


def _not_written(exc: OSError, folder: Path) -> ReportNotWritten:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return ReportNotWritten(
        exc.errno,
        f"could not write the report into {str(folder)!r} ({reason}); the folder keeps its "
        "previous report",
        exc.filename,
    )


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
