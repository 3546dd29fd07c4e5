"""The essay's wall time: ``kernelcheck essay --quick`` and ``kernelcheck essay``.

Each benchmark times a fresh interpreter running the command with ``--json``
(the report on standard output, no files written), side by side with the
interpreter's own start-up (``python -c pass``, the floor no command can
shorten).  Targets (docs/performance.md): ``--quick`` at most 3 s and the
default at most 20 s on the project's 2-core machine, every claim verified:
each run's report must give the outcome ``verified`` with every claim it ran
verified, so a run that checked less, or failed, is not a time.

Under ``--benchmark-disable`` (the CI run) both run once on one claim
(``--quick --claims C1``): a correctness test of the command and of the
report's fields this file reads; the whole essay is tested in tests/cli.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelcheck import claims

ESSAY = [sys.executable, "-m", "kernelcheck", "essay", "--json"]
COMMANDS = {
    "python (floor)": [sys.executable, "-c", "pass"],
    "--quick": ESSAY + ["--quick"],
    "default": ESSAY,
}


def run_essay(cmd: list[str]) -> dict:
    """Run an essay command; its JSON report, after checking that every claim was verified."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    envelope = json.loads(proc.stdout)
    assert envelope["outcome"] == "verified", envelope["outcome"]
    report = envelope["result"]
    summary = report["summary"]
    assert summary["verified"] == summary["total"] > 0, summary
    return report


def run_floor(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, timeout=120)


@pytest.mark.benchmark(group="essay")
@pytest.mark.parametrize("name", list(COMMANDS))
def test_essay(benchmark, name):
    cmd = COMMANDS[name]
    if name == "python (floor)":
        benchmark.pedantic(run_floor, args=(cmd,), rounds=5)
        return
    if benchmark.disabled:
        cmd = ESSAY + ["--quick", "--claims", "C1"]
    report = benchmark.pedantic(run_essay, args=(cmd,), rounds=3 if name == "default" else 5)
    benchmark.extra_info["claims_verified"] = report["summary"]["verified"]
    if not benchmark.disabled:
        assert report["summary"]["total"] == len(report["claims"]) == len(claims.registry())
