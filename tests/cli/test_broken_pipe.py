"""A reader that goes away (``kernelcheck ... | head -1``) stops the command quietly.

The scaling command prints each form's line from its progress callback, which
runs through the wrapper of user callables; a broken pipe there must not be
reported as an error of ``progress``, nor print a traceback.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelcheck._src.core.outcome import EXIT_INTERRUPTED


@pytest.mark.parametrize(
    "argv",
    [
        ["scaling", "--sizes", "64,128,256", "--repeats", "1"],
        ["essay", "--quick", "--claims", "C7,C8,C12"],
    ],
    ids=["scaling", "essay"],
)
def test_a_closed_stdout_ends_the_command_without_an_error(argv):
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
