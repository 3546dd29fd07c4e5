"""The pytest plugin (``kernelcheck.pytest_plugin``): profiles and seeded fixtures.

Runs pytest in a subprocess on a small test file in a temporary folder (so
this repository's own conftest is not involved), loading the plugin through
its ``pytest11`` entry point when installed, else with ``-p``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points

import numpy as np

from kernelcheck.pytest_plugin import seed_for

TEST_FILE = """
import json, os
import numpy as np
from hypothesis import settings

def test_a(kernelcheck_seed, kernelcheck_rng):
    assert isinstance(kernelcheck_rng, np.random.Generator)
    record("a", kernelcheck_seed, kernelcheck_rng.integers(0, 2**62))

def test_b(kernelcheck_seed, kernelcheck_rng):
    record("b", kernelcheck_seed, kernelcheck_rng.integers(0, 2**62))

def test_profiles_are_registered():
    import kernelcheck.strategies  # registers the kernelcheck-* profiles

    for name in ("kernelcheck-ci", "kernelcheck-dev", "kernelcheck-thorough"):
        settings.get_profile(name)
    record("profile", settings.default.max_examples, 0)

def record(name, seed, draw):
    with open(os.environ["KC_OUT"], "a") as fh:
        fh.write(json.dumps([name, int(seed), int(draw)]) + "\\n")
"""


def _plugin_args() -> list[str]:
    registered = any(
        ep.value == "kernelcheck.pytest_plugin" for ep in entry_points(group="pytest11")
    )
    return [] if registered else ["-p", "kernelcheck.pytest_plugin"]


def _run(folder, *extra):
    out = folder / "out.jsonl"
    (folder / "test_sample.py").write_text(TEST_FILE)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *_plugin_args(),
            *extra,
            "test_sample.py",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "KC_OUT": str(out)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {name: (seed, draw) for name, seed, draw in rows}, proc.stdout


def test_fixtures_are_seeded_per_test_and_reproducible(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        f1 = pool.submit(_run, tmp_path / "one")
        f2 = pool.submit(
            _run,
            tmp_path / "two",
            "--kernelcheck-seed=7",
            "--hypothesis-profile=kernelcheck-thorough",
        )
        (first, stdout), (other, stdout7) = f1.result(), f2.result()
    # The seed is seed_for(node id, base seed) and the generator is default_rng(seed):
    # the same on every run and machine.
    assert first["a"][0] == seed_for("test_sample.py::test_a", 0)
    assert first["b"][0] == seed_for("test_sample.py::test_b", 0) != first["a"][0]
    assert first["a"][1] == int(np.random.default_rng(first["a"][0]).integers(0, 2**62))
    assert "kernelcheck: base seed 0" in stdout
    # --kernelcheck-seed changes the base seed; --hypothesis-profile picks a plugin profile.
    assert other["a"][0] == seed_for("test_sample.py::test_a", 7) != first["a"][0]
    assert "kernelcheck: base seed 7" in stdout7
    assert other["profile"][0] == 2000 and first["profile"][0] != 2000


def test_seed_for_is_stable_and_in_range():
    s = seed_for("x::y", 3)
    assert s == seed_for("x::y", 3)
    assert 0 <= s < 2**63
    assert len({seed_for(f"t::{i}") for i in range(200)}) == 200


PROBE = """
import sys
from hypothesis import settings

def test_hypothesis_own_ci_profile_is_untouched():
    ci = settings.get_profile("ci")
    print("CI-PROFILE", ci.max_examples, ci.derandomize, sorted(map(str, ci.suppress_health_check)))
"""


def test_plugin_leaves_hypothesis_ci_profile_as_hypothesis_defines_it(tmp_path):
    """With kernelcheck installed, CI=true pytest runs Hypothesis' own 'ci' profile unchanged."""

    def ci_profile(*plugin_args):
        (tmp_path / "test_probe.py").write_text(PROBE)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", *plugin_args,
             "test_probe.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "CI": "true"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return next(line for line in proc.stdout.splitlines() if "CI-PROFILE" in line)

    with_plugin = ci_profile(*_plugin_args())
    without = ci_profile("-p", "no:kernelcheck")
    assert with_plugin == without


def test_importing_the_plugin_loads_neither_hypothesis_nor_numpy():
    code = (
        "import sys, kernelcheck.pytest_plugin; "
        "print(sorted(m for m in ('hypothesis', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
