"""A command interrupted, timed out, or left by its reader: one line, the right exit code.

Ctrl-C (SIGINT) at any moment, from start-up (NumPy's compiled import
included) to the renames of the report files, exits 130 with one line that
says whether ``--out`` holds the report; ``--timeout`` exits 3; a reader that
goes away (``kernelcheck ... | head -1``) ends the command quietly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.core.atomic import InterruptedAfterWrite
from kernelcheck._src.core.outcome import EXIT_INCONCLUSIVE, EXIT_INTERRUPTED
from tests.cli.commandline import TIMEOUT

ROOT = Path(__file__).resolve().parents[2]


def test_sigint_during_essay_leaves_no_file(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernelcheck",
            "essay",
            "--thorough",
            "--claims",
            "C12,C15",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        header = proc.stdout.readline()  # printed before the first check starts
        assert header.startswith("claim"), header
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert stderr.strip() == f"kernelcheck essay: interrupted; nothing was written to {out}"
    assert not out.exists() or not any(out.iterdir())


def test_sigint_while_writing_completes_the_report_then_exits(tmp_path, monkeypatch):
    """SIGINT arriving while the files are moved into place is held until every one is."""
    from kernelcheck._src.claims import essay
    from kernelcheck._src.core import report as bundle

    report = essay.run_essay(["C7", "C12"], "quick")
    calls = _interrupt_on_first_call(bundle, "_move", monkeypatch)
    with pytest.raises(InterruptedAfterWrite):
        essay.write_report(report, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(Path(c).name for c in calls)
    assert {"report.md", "report.json"} <= set(names)
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["total"] == 2


def test_interrupt_before_writing_leaves_the_folder_untouched(tmp_path, monkeypatch):
    from kernelcheck._src.claims import essay

    report = essay.run_essay(["C12"], "quick")
    (tmp_path / "report.md").write_text("previous report\n")

    def interrupted(_report):
        raise KeyboardInterrupt

    monkeypatch.setattr(essay, "render_plots", interrupted)
    with pytest.raises(KeyboardInterrupt):
        essay.write_report(report, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    assert (tmp_path / "report.md").read_text() == "previous report\n"


_UNBIASED_SMALL = ["unbiased", "--trials", "2000", "--num-features", "8", "--dim", "2"]
_SCALING_SMALL = ["scaling", "--sizes", "32,64,128", "--repeats", "1", "--json"]


def _interrupt_on_first_call(module, name, monkeypatch):
    """Make ``module.name`` deliver a real SIGINT to this process on its first call.

    Records the destination (second argument) of every call, else the first.
    """
    real = getattr(module, name)
    calls = []

    def wrapped(*args, **kwargs):
        if not calls:
            os.kill(os.getpid(), signal.SIGINT)
        calls.append(args[1] if len(args) > 1 else (args[0] if args else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.mark.parametrize("command", ["unbiased", "scaling"])
def test_sigint_during_the_writes_completes_the_report(command, tmp_path, monkeypatch, capsys):
    """SIGINT while ``--out`` files are written: every file lands whole, then exit 130."""
    from kernelcheck._src.core import report as bundle

    out = tmp_path / "out"
    calls = _interrupt_on_first_call(bundle, "_move", monkeypatch)
    if command == "unbiased":
        argv, expected = _UNBIASED_SMALL, {"report.json", "report.md"}
    else:
        argv, expected = _SCALING_SMALL, {"scaling.md", "scaling.json"}
    code = cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED, err
    assert err.strip() == (
        f"kernelcheck {command}: interrupted; the report in {out} was already complete"
    )
    assert calls, "the interrupt was never sent"
    names = {p.name for p in out.iterdir()}
    assert expected <= names
    assert not any(n.endswith(".tmp") for n in names)
    json.loads((out / next(n for n in expected if n.endswith(".json"))).read_text())


@pytest.mark.parametrize("command", ["unbiased", "scaling"])
def test_interrupt_before_the_writes_leaves_no_file(command, tmp_path, monkeypatch, capsys):
    """KeyboardInterrupt during the run: exit 130, a message saying so, no file in ``--out``."""
    from kernelcheck._src.scaling import experiment as scaling
    from kernelcheck._src.verify.unbiased import api as verify_unbiased
    from kernelcheck._src.verify.unbiased import writer as unbiased_report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "out"
    if command == "unbiased":
        monkeypatch.setattr(unbiased_report, "render_plots", interrupted)
        monkeypatch.setattr(verify_unbiased.UnbiasedReport, "to_markdown", interrupted)
        argv = _UNBIASED_SMALL
    else:
        monkeypatch.setattr(scaling, "_measure_form", interrupted)
        argv = _SCALING_SMALL
    code = cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED, err
    assert err.strip() == f"kernelcheck {command}: interrupted; nothing was written to {out}"
    assert not out.exists() or not any(out.iterdir())


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
    "sys.argv = ['kernelcheck', *sys.argv[1:]]\n"
    "from kernelcheck.__main__ import run\n"
    "raise SystemExit(run())\n"
)


@pytest.mark.parametrize(
    "argv",
    [["psd", "m.csv"], ["kernel", "linear", "--dim", "2"], ["unbiased", "--features", "positive"]],
    ids=["running-a-command", "reading-a-value", "reading-a-catalogue"],
)
def test_ctrl_c_inside_numpys_compiled_import_exits_130_with_one_line(argv, tmp_path):
    """SIGINT exactly inside NumPy's C initialisation (its import of datetime): the
    command exits 130 with one line, not a traceback of the ImportError it becomes,
    wherever NumPy is first imported (a command, a value's check, a catalogue)."""
    (tmp_path / "m.csv").write_text("1,0\n0,1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", SIGINT_IN_NUMPY_CHILD, *argv],
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


def test_timeout_ends_the_command_with_exit_code_3_and_one_line(tmp_path):
    out = tmp_path / "out"
    argv = ["essay", "--thorough", "--claims", "C15", "--out", str(out), "--timeout", "0.5"]
    proc = subprocess.run(
        [sys.executable, "-m", "kernelcheck", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"kernelcheck essay: timed out after 0.5 s; nothing was written to {out}"
    )
    assert not out.exists() or not any(out.iterdir())


def test_a_timeout_beyond_the_clock_s_range_still_holds_and_lets_the_command_finish(tmp_path):
    """``--timeout 1e10``: longer than ``threading`` can wait at once; the watchdog lives on.

    The run ends on its own with its verdict (exit 0), no traceback from the
    watchdog thread on stderr.
    """
    K = tmp_path / "K.npy"
    np.save(K, np.eye(3))
    proc = subprocess.run(
        [sys.executable, "-m", "kernelcheck", "psd", str(K), "--timeout", "1e10"],
        capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["scaling", "--sizes", "64,128,256", "--repeats", "1"],
        ["essay", "--quick", "--claims", "C7,C8,C12"],
    ],
    ids=["scaling", "essay"],
)
def test_a_closed_stdout_ends_the_command_without_an_error(argv):
    """The scaling command prints each form's line from its progress callback, which runs
    through the wrapper of user callables; a broken pipe there is not reported as an
    error of ``progress``, nor with a traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelcheck", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line
    err = proc.stderr.read()
    code = proc.wait(timeout=120)
    assert first.strip()
    assert err == "", err
    assert code == EXIT_INTERRUPTED
