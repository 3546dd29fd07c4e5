"""Hostile input to the command line (issue 17, classes 5, 7, 9, 12): output folders checked
before any work, special and oversized input files, malformed or silent schedulers, an
expression that looks like an option, Ctrl-C during start-up.  Every row: exit 2 and one
line on stderr naming the problem, never a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A folder holding a file, a FIFO, a dangling link, a sparse .csv and a matrix."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo.csv")
    os.symlink(tmp_path / "nowhere" / "x", tmp_path / "dangling")
    with open(tmp_path / "sparse.csv", "wb") as fh:
        fh.truncate(2 * 1024**3)  # 2 GiB of holes: no disk behind it
    np.save(tmp_path / "m.npy", np.eye(3))
    np.savez(tmp_path / "big.npz", K=np.broadcast_to(np.zeros((1, 1)), (1, 1)))
    return tmp_path


#: id -> (argv, what stderr's one line says)
ROWS = {
    "essay-out-under-a-file": (["essay", "--quick", "--out", "afile/sub"], "is not a folder"),
    "unbiased-out-dangling": (["unbiased", "--out", "dangling"], "dangling link"),
    "scaling-out-proc": (["scaling", "--out", "/proc/kernelcheck"], "cannot write into"),
    "essay-out-empty": (["essay", "--quick", "--out", ""], "must be a folder path"),
    "psd-fifo": (["psd", "fifo.csv"], "is a FIFO, not a regular file"),
    "psd-sparse": (["psd", "sparse.csv"], "NUL bytes"),
    "psd-device": (["psd", "/dev/zero"], "/dev/zero"),
    "psd-missing": (["psd", "missing.npy"], "no such file"),
    "scheduler-not-a-url": (
        ["essay", "--quick", "--claims", "C1", "--scheduler", "not a url"],
        "must be a scheduler address",
    ),
    "scheduler-silent": (
        ["essay", "--quick", "--claims", "C1", "--scheduler", "tcp://127.0.0.1:1"],
        "no Dask scheduler answers",
    ),
    "timeout-zero": (["psd", "m.npy", "--timeout", "0"], "positive number of seconds"),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_hostile_command_lines_exit_2_with_one_line(name, place, capsys):
    argv, says = ROWS[name]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (place / "afile").is_dir()


def test_an_expression_starting_with_a_minus_is_an_expression(capsys):
    assert cli.main(["kernel", "-linear", "--dim", "2"]) == 1  # refuted: -x.y is no kernel
    assert "(-1.0) * Linear()" in capsys.readouterr().out


#: The child runs the script's entry point and announces itself from inside it: the
#: first import inside ``run``'s ``try`` (``kernelcheck.cli``) writes "ready", so a
#: signal sent on "ready" never lands in the child's own lines before ``run`` (out of
#: kernelcheck's reach).  The command (the quick essay, about 2 s) outlasts every delay,
#: so no signal lands after ``run`` has returned either.
STARTUP_CHILD = (
    "import builtins, sys\n"
    "sys.argv = ['kernelcheck', 'essay', '--quick']\n"
    "real_import = builtins.__import__\n"
    "def announce(name, *args, **kwargs):\n"
    "    if name == 'kernelcheck.cli':\n"
    "        builtins.__import__ = real_import\n"
    "        sys.stderr.write('ready\\n'); sys.stderr.flush()\n"
    "    return real_import(name, *args, **kwargs)\n"
    "from kernelcheck.__main__ import run\n"
    "builtins.__import__ = announce\n"
    "raise SystemExit(run())\n"
)


#: The child delivers SIGINT to itself exactly while NumPy's compiled core imports
#: ``datetime`` (a finder on sys.meta_path sees that import), the moment at which the
#: interrupt used to come out as an ImportError with a traceback.
SIGINT_IN_NUMPY_CHILD = (
    "import os, signal, sys\n"
    "assert 'numpy' not in sys.modules and 'datetime' not in sys.modules\n"
    "class Trap:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'datetime' and 'numpy' in sys.modules:\n"
    "            sys.meta_path.remove(self)\n"
    "            os.kill(os.getpid(), signal.SIGINT)\n"
    "        return None\n"
    "sys.meta_path.insert(0, Trap())\n"
    "sys.argv = ['kernelcheck', 'psd', 'm.csv']\n"
    "from kernelcheck.__main__ import run\n"
    "raise SystemExit(run())\n"
)


def test_ctrl_c_inside_numpys_compiled_import_exits_130_with_one_line(tmp_path):
    """SIGINT exactly inside NumPy's C initialisation (its import of datetime): the
    command exits 130 with one line, not a traceback of the ImportError it becomes."""
    (tmp_path / "m.csv").write_text("1,0\n0,1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", SIGINT_IN_NUMPY_CHILD],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 130, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_ctrl_c_while_importing_prints_one_line_and_exits_130():
    """SIGINT at several moments of start-up: exit 130, one line, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    interrupted = 0
    for delay in (0.0, 0.05, 0.15, 0.4):
        proc = subprocess.Popen(
            [sys.executable, "-c", STARTUP_CHILD],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None and proc.stderr.readline() == "ready\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:  # finished before the signal: nothing to check
            continue
        interrupted += 1
        assert proc.returncode == 130, (delay, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (delay, err)
    assert interrupted  # at least one signal came while it ran
