"""Report folders are written whole or not at all, whatever fails on the way (fault injection).

Whatever happens during :func:`write_bundle` -- SIGINT or SIGTERM at any step of either
phase, a full filesystem, a read-only folder, a failing rename -- the folder afterwards
holds the old complete report or the new complete report, never a mix, and no temporary
file; how the write ended (the exception, or the child's exit code) says which.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from kernelcheck._src.core import report
from kernelcheck._src.core.atomic import ReportNotWritten

NAMES = [f"plot{i}.png" for i in range(4)] + ["report.md"]
ROOT = Path(__file__).resolve().parents[2]


def _bundle(tag: str, big: int = 0) -> dict[str, str]:
    files = {name: f"{tag} {name}\n" for name in NAMES}
    if big:
        files["plot0.png"] = tag + "x" * big
    return files


def _state(folder: Path) -> str:
    """'old' or 'new' when the folder holds exactly one whole bundle; else what is wrong."""
    present = sorted(p.name for p in folder.iterdir())
    if present != sorted(NAMES):
        return f"files {present}"
    tags = {(folder / n).read_text().split(" ", 1)[0][:3] for n in NAMES}
    return tags.pop() if len(tags) == 1 else f"a mix of {sorted(tags)}"


#: The child: write the old bundle, then the new one with ``sig`` sent to itself at the
#: ``point``-th step (each fsync of phase 1, each rename of phase 2, the folder's fsync).
CHILD = textwrap.dedent(
    """
    import os, sys
    from kernelcheck._src.core import report
    from kernelcheck._src.core.atomic import InterruptedAfterWrite
    folder, sig, point = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    names = [f"plot{i}.png" for i in range(4)] + ["report.md"]
    report.write_bundle(folder, {n: f"old {n}\\n" for n in names})
    steps = [0]
    real_fsync, real_move = os.fsync, report._move
    def tick():
        steps[0] += 1
        if steps[0] == point:
            os.kill(os.getpid(), sig)
    def fsync(fd):
        real_fsync(fd)
        tick()
    def move(src, dest):
        tick()
        real_move(src, dest)
    os.fsync, report._move = fsync, move
    try:
        report.write_bundle(folder, {n: f"new {n}\\n" for n in names})
    except InterruptedAfterWrite:
        sys.exit(10)  # the new report is complete
    except KeyboardInterrupt:
        sys.exit(11)  # nothing was written: the old report stands
    sys.exit(0 if steps[0] < point else 12)
    """
)

#: steps of a five-file write: 5 fsyncs, 5 renames, 1 fsync of the folder
STEPS = 2 * len(NAMES) + 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_at_any_step_leaves_the_old_or_the_new_report_whole(tmp_path, sig):
    seen = set()
    for point in range(1, STEPS + 2):
        folder = tmp_path / f"at{point}"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder), str(int(sig)), str(point)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        state = _state(folder)
        expected = {10: "new", 11: "old", 0: "new"}.get(proc.returncode)
        assert state == expected, (point, proc.returncode, state, proc.stderr[-500:])
        seen.add(proc.returncode)
    assert seen == {0, 10, 11}  # every outcome was reached: the points span both phases


def test_an_error_at_any_step_leaves_the_old_report_whole(tmp_path, monkeypatch):
    """ENOSPC at each fsync of phase 1, EIO at each rename of phase 2 (undone from links)."""
    real_fsync, real_move = os.fsync, report._move
    for point in range(1, 2 * len(NAMES) + 1):
        folder = tmp_path / f"at{point}"
        report.write_bundle(folder, _bundle("old"))
        steps = [0]

        def fail(code, steps=steps, point=point):
            steps[0] += 1
            if steps[0] == point:
                raise OSError(code, os.strerror(code))

        monkeypatch.setattr(os, "fsync", lambda fd: (fail(errno.ENOSPC), real_fsync(fd)))
        monkeypatch.setattr(report, "_move", lambda s, d: (fail(errno.EIO), real_move(s, d)))
        with pytest.raises(ReportNotWritten, match="keeps its previous report"):
            report.write_bundle(folder, _bundle("new"))
        monkeypatch.undo()
        assert _state(folder) == "old", point


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs, where this machine lets the tests mount one."""
    where = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode:
        pytest.skip("cannot mount a tmpfs here (the simulated ENOSPC test covers this)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_full_filesystem_keeps_the_old_report(small_tmpfs):
    folder = small_tmpfs / "out"
    report.write_bundle(folder, _bundle("old"))
    with pytest.raises(ReportNotWritten, match="No space left on device"):
        report.write_bundle(folder, _bundle("new", big=200_000))
    assert _state(folder) == "old"


def test_a_read_only_folder_is_refused_before_writing_and_keeps_the_old_report(small_tmpfs):
    folder = small_tmpfs / "out"
    report.write_bundle(folder, _bundle("old"))
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    from kernelcheck.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="Read-only file system|cannot write"):
        report.write_bundle(folder, _bundle("new"))
    assert _state(folder) == "old"


def test_files_get_the_mode_of_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        paths = report.write_bundle(tmp_path, _bundle("new"))
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in paths} == {0o640}
