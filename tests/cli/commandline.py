"""Helpers of the command-line tests: run ``kernelcheck`` as a subprocess, read a usage error.

Every command runs once for real as a subprocess (``python -m kernelcheck``,
the path a user takes) in :func:`subprocess_cases`; the subprocesses start
together from one fixture (``runs`` in ``conftest.py``), so the start-up cost
is paid in parallel.  Longer tables of argument values run in-process through
:func:`kernelcheck.cli.main` (the same code path, no start-up cost).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelcheck._src.core.outcome import Outcome

#: Seconds a subprocess of the tests may run.
TIMEOUT = 240

#: The outcome word of each exit code.
OUTCOME_OF_CODE = {o.exit_code: o.value for o in Outcome}


def run_kernelcheck(argv, cwd) -> subprocess.CompletedProcess:
    """Run ``python -m kernelcheck *argv`` in ``cwd``; its output captured as text."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "kernelcheck", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def check_usage_error(code, stdout, stderr, command: str | None = None) -> str:
    """Exit code 2, nothing on stdout, one line on stderr naming the help; returns the line.

    ``command``: the command typed (its help is named), or None for the
    top-level ``kernelcheck --help``.
    """
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    prog = "kernelcheck" if command is None else f"kernelcheck {command}"
    assert line.startswith(f"{prog}: error: "), line
    assert line.endswith(f"(see '{prog} --help')"), line
    assert stdout == ""
    return line


def subprocess_cases(f: dict[str, Path]) -> dict[str, tuple[list[str], int | None]]:
    """Run as real subprocesses: one happy path per command, bad usages."""
    return {
        "help": (["--help"], 0),
        "essay": (
            ["essay", "--quick", "--claims", "C1,C7,C8,C12", "--out", str(f["essay_out"])],
            0,
        ),
        "essay_json": (["essay", "--quick", "--claims", "C7,C8", "--json"], 0),
        "psd_npy": (["psd", str(f["pd_npy"])], 0),
        "psd_csv_refuted": (["psd", str(f["notpsd_csv"]), "--json"], 1),
        "kernel_ok": (
            [
                "kernel",
                "exp(linear, order=2) + 0.5*poly(2)",
                "--dim",
                "2",
                "--budget",
                "4",
                "--json",
            ],
            0,
        ),
        "kernel_refuted": (["kernel", "linear - 0.5*poly(2)", "--dim", "2", "--budget", "4"], 1),
        "unbiased": (
            [
                "unbiased",
                "--trials",
                "4000",
                "--num-features",
                "16",
                "--dim",
                "2",
                "--out",
                str(f["unbiased_out"]),
            ],
            0,
        ),
        "scaling": (
            [
                "scaling",
                "--sizes",
                "64,128,256",
                "--repeats",
                "1",
                "--json",
                "--out",
                str(f["scaling_out"]),
            ],
            None,  # a timing verdict on three tiny sizes is not asserted
        ),
        # bad usage
        "unknown_command": (["frobnicate"], 2),
        "missing_file": (["psd", str(f["pd_npy"].with_name("absent.npy"))], 2),
        "malformed_csv": (["psd", str(f["malformed_csv"])], 2),
        "malformed_expr": (["kernel", "poly(2,, c=1)", "--dim", "3"], 2),
        "mistyped_flag": (["psd", str(f["pd_npy"]), "--tool", "1e-9"], 2),
    }
