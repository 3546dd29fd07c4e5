"""Start-up cost of kernelcheck's pytest plugin in a project that does not use it.

Group ``pytest-startup``: ``python -m pytest`` on a folder with one trivial
test (no kernelcheck fixture, no ``kernelcheck-*`` profile), with the plugin
loaded through its ``pytest11`` entry point and with ``-p no:kernelcheck``,
side by side in the same run.  Target: at most 0.15 s apart (the plugin
imports no NumPy, SciPy or Hypothesis profile at start;
``tests/testing/test_pytest_plugin.py`` asserts which modules it adds).

Each round is a fresh interpreter, so the figures include Python's and
pytest's own start-up; compare the two medians.  Wall time on a loaded
machine mostly measures the load: ``extra_info["cpu_seconds"]`` keeps each
round's CPU time (user + system of the child), the figure to compare there.
Under ``--benchmark-disable`` each runs once, as a check that both runs pass
and only one prints the plugin's header.

Reproduce: ``python3 -m pytest benchmarks/bench_plugin.py --benchmark-only``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

TRIVIAL = "def test_trivial():\n    assert 1 + 1 == 2\n"


def _pytest(folder, *extra, cpu: list | None = None) -> str:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "test_one.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "CI"},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 4))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("plugin", ["with", "without"])
def test_pytest_startup(benchmark, tmp_path, plugin):
    (tmp_path / "test_one.py").write_text(TRIVIAL)
    extra = () if plugin == "with" else ("-p", "no:kernelcheck")
    benchmark.group = "pytest-startup"
    benchmark.extra_info["plugin"] = plugin
    rounds = {"rounds": 1, "iterations": 1} if benchmark.disabled else {"rounds": 9}
    cpu: list = []
    out = benchmark.pedantic(_pytest, args=(tmp_path, *extra), kwargs={"cpu": cpu}, **rounds)
    benchmark.extra_info["cpu_seconds"] = cpu
    assert "1 passed" in out
