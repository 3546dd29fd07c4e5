"""Start-up cost: ``import kernelcheck`` and ``kernelcheck --help`` in a fresh interpreter.

Each benchmark times a whole subprocess, side by side with its floor: the
same interpreter running ``pass`` (Python's own start-up, which kernelcheck
cannot shorten).  Targets (docs/performance.md): ``import kernelcheck`` at
most 0.25 s and ``kernelcheck --help`` at most 0.4 s on the project's 2-core
machine.  The eager import of every public module, what ``import kernelcheck``
did before it became lazy, runs in the same session as the peer.
:func:`test_import_time_report` also records what
``python -X importtime`` attributes to kernelcheck itself, in microseconds,
in the benchmark's ``extra_info``.

Under ``--benchmark-disable`` each runs once as a correctness test: the
command must succeed (and ``--help`` must print the usage).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = {
    "python (floor)": [sys.executable, "-c", "pass"],
    "import kernelcheck": [sys.executable, "-c", "import kernelcheck"],
    "kernelcheck --help": [sys.executable, "-m", "kernelcheck", "--help"],
    # what `import kernelcheck` loaded before the package became lazy: every
    # public module and the heavy dependencies they pull in (the peer the
    # lazy import is measured against, in the same run)
    "every public module (eager)": [
        sys.executable,
        "-c",
        "import kernelcheck.attention, kernelcheck.claims, kernelcheck.features, "
        "kernelcheck.kernels, kernelcheck.psd, kernelcheck.scaling, kernelcheck.stats, "
        "kernelcheck.strategies, kernelcheck.testing, kernelcheck.verify",
    ],
}


def run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout


@pytest.mark.benchmark(group="start-up")
@pytest.mark.parametrize("name", list(COMMANDS))
def test_start_up(benchmark, name):
    out = benchmark.pedantic(run, args=(COMMANDS[name],), rounds=15, warmup_rounds=2)
    if name.endswith("--help"):
        assert "usage: kernelcheck" in out


def importtime_of(module: str) -> int:
    """Cumulative microseconds ``python -X importtime`` reports for ``module``."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stderr  # fmt: skip
    for line in err.splitlines():
        fields = [f.strip() for f in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == module:
            return int(fields[1])
    raise AssertionError(f"-X importtime printed no line for {module}:\n{err[-2000:]}")


@pytest.mark.benchmark(group="start-up")
def test_import_time_report(benchmark):
    us = benchmark.pedantic(importtime_of, args=("kernelcheck",), rounds=5)
    benchmark.extra_info["importtime_us"] = us
    assert us > 0
