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
import pytest

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


def _run(folder, *extra, ini=None, test_file=TEST_FILE):
    out = folder / "out.jsonl"
    (folder / "test_sample.py").write_text(test_file)
    if ini is not None:
        (folder / "pytest.ini").write_text("[pytest]\n" + ini)
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


PINNED_FILE = """
import json, os
import pytest

@pytest.mark.kernelcheck_seed(1234)
def test_pinned(kernelcheck_seed, kernelcheck_rng):
    record("pinned", kernelcheck_seed, kernelcheck_rng.integers(0, 2**62))

@pytest.mark.kernelcheck_seed(1234)
def test_pinned_under_another_name(kernelcheck_seed):
    record("renamed", kernelcheck_seed, 0)

def test_derived(kernelcheck_seed):
    record("derived", kernelcheck_seed, 0)

class TestPinnedClass:
    pytestmark = pytest.mark.kernelcheck_seed(99)

    def test_in_class(self, kernelcheck_seed):
        record("class", kernelcheck_seed, 0)

def record(name, seed, draw):
    with open(os.environ["KC_OUT"], "a") as fh:
        fh.write(json.dumps([name, int(seed), int(draw)]) + "\\n")
"""


def test_seeds_are_pinned_by_a_marker_and_by_ini_options(tmp_path):
    folders = [tmp_path / name for name in ("marker", "ini", "fixed", "override")]
    for f in folders:
        f.mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [
            pool.submit(_run, folders[0], test_file=PINNED_FILE),
            pool.submit(_run, folders[1], test_file=PINNED_FILE, ini="kernelcheck_seed = 7\n"),
            pool.submit(
                _run,
                folders[2],
                test_file=PINNED_FILE,
                ini="kernelcheck_seed = 7\nkernelcheck_seed_mode = fixed\n",
            ),
            pool.submit(
                _run,
                folders[3],
                "--kernelcheck-seed=5",
                test_file=PINNED_FILE,
                ini="kernelcheck_seed = 7\n",
            ),
        ]
        (marker, out0), (ini, out1), (fixed, out2), (override, _) = [r.result() for r in runs]
    # the marker pins the seed, whatever the test's name, class, base seed or mode
    for rows in (marker, ini, fixed, override):
        assert rows["pinned"][0] == rows["renamed"][0] == 1234
        assert rows["class"][0] == 99
    assert marker["pinned"][1] == int(np.random.default_rng(1234).integers(0, 2**62))
    # the ini option sets the base seed; the command line overrides it
    assert marker["derived"][0] == seed_for("test_sample.py::test_derived", 0)
    assert ini["derived"][0] == seed_for("test_sample.py::test_derived", 7)
    assert override["derived"][0] == seed_for("test_sample.py::test_derived", 5)
    # mode 'fixed': the base seed itself, so renaming a test cannot change it
    assert fixed["derived"][0] == 7
    assert "kernelcheck: base seed 7 (seeds derived" in out1
    assert "kernelcheck: base seed 7 (every test's seed is the base seed" in out2
    assert "@pytest.mark.kernelcheck_seed" in out0


def _pytest_usage_error(folder, ini=None, test_file="def test_x():\n    pass\n"):
    (folder / "test_sample.py").write_text(test_file)
    if ini is not None:
        (folder / "pytest.ini").write_text("[pytest]\n" + ini)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *_plugin_args(),
         "test_sample.py"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


BAD_SEED_CONFIG = [
    ("kernelcheck_seed = -1\n", None, "kernelcheck_seed must be an integer >= 0, got '-1'"),
    ("kernelcheck_seed = abc\n", None, "kernelcheck_seed must be an integer >= 0, got 'abc'"),
    ("kernelcheck_seed_mode = random\n", None, "must be one of node-id, fixed, got 'random'"),
    (
        None,
        "import pytest\n@pytest.mark.kernelcheck_seed('x')\n"
        "def test_x(kernelcheck_seed):\n    pass\n\n"
        "@pytest.mark.kernelcheck_seed(1, 2)\n"
        "def test_y(kernelcheck_seed):\n    pass\n",
        ("kernelcheck_seed must be an integer >= 0, got 'x'", "takes one integer (the seed)"),
    ),
]


@pytest.mark.parametrize("ini, test_file, message", BAD_SEED_CONFIG)
def test_bad_seed_configuration_is_a_clear_usage_error(tmp_path, ini, test_file, message):
    kwargs = {} if test_file is None else {"test_file": test_file}
    code, out = _pytest_usage_error(tmp_path, ini, **kwargs)
    messages = (message,) if isinstance(message, str) else message
    assert code != 0 and all(m in out for m in messages), out


def test_seed_for_is_stable_and_in_range():
    s = seed_for("x::y", 3)
    assert s == seed_for("x::y", 3)
    assert 0 <= s < 2**63
    assert len({seed_for(f"t::{i}") for i in range(200)}) == 200


PROBE = """
import json, sys
from hypothesis import settings

def test_hypothesis_own_ci_profile_is_untouched():
    ci = settings.get_profile("ci")
    print("CI-PROFILE", ci.max_examples, ci.derandomize, sorted(map(str, ci.suppress_health_check)))
    d = settings.default
    print("LOADED", settings._current_profile, d.max_examples, d.derandomize, d.deadline,
          d.database is None, sorted(map(str, d.suppress_health_check)))
    print("MODULES", json.dumps(sorted(sys.modules)))
"""

#: What loading the plugin may add to a pytest run that uses none of kernelcheck's
#: fixtures: the plugin, the package's lazy top level and its error classes -- no
#: NumPy, SciPy, Hypothesis profiles or any room of kernelcheck._src beyond core.version.
LIGHT_MODULES = {
    "kernelcheck",
    "kernelcheck.pytest_plugin",
    "kernelcheck.errors",
    "kernelcheck._src",
    "kernelcheck._src.core",
    "kernelcheck._src.core.version",
}


def test_plugin_only_adds_under_ci_true(tmp_path):
    """A project without kernelcheck tests, CI=true, kernelcheck installed: Hypothesis
    loads and runs its own 'ci' profile unchanged, and the plugin imports nothing heavy.

    The start-up time this saves is measured by benchmarks/bench_plugin_startup.py.
    """

    def probe(*plugin_args):
        (tmp_path / "test_probe.py").write_text(PROBE)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", *plugin_args,
             "test_probe.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "CI": "true"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr

        def line(tag):  # pytest may print the file name before a test's output
            text = next(x for x in proc.stdout.splitlines() if tag in x)
            return text[text.index(tag) :]

        modules = json.loads(line("MODULES")[len("MODULES") :])
        return line("CI-PROFILE"), line("LOADED"), set(modules), proc.stdout

    assert _plugin_args() == [], "kernelcheck's pytest11 entry point must be installed"
    ci, loaded, with_plugin, stdout = probe()
    ci0, loaded0, without, stdout0 = probe("-p", "no:kernelcheck")
    assert "kernelcheck: base seed" in stdout and "kernelcheck: base seed" not in stdout0
    assert loaded.startswith("LOADED ci ")  # Hypothesis' own choice under CI=true
    assert (ci, loaded) == (ci0, loaded0)
    assert with_plugin - without <= LIGHT_MODULES, sorted(with_plugin - without)


def test_importing_the_plugin_loads_neither_hypothesis_nor_numpy():
    code = (
        "import sys, kernelcheck.pytest_plugin; "
        "print(sorted(m for m in ('hypothesis', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
