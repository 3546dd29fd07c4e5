"""What ``pip install`` gets: the distribution's name, its files and its extras.

The distribution has a name of its own on the package index (``kernelcheck``
there is an unrelated program), while the import name stays ``kernelcheck``;
the wheel ships ``py.typed`` (PEP 561) and the MIT licence; the install
lines of the README and the docs name the distribution; the ``test`` extra
installs both frameworks on every Python the package supports.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from kernelcheck._src.core.version import __version__

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NAME = PROJECT["name"]


def _supported_pythons() -> list[str]:
    """Every minor version from ``requires-python`` to 3.14."""
    spec = SpecifierSet(PROJECT["requires-python"])
    return [f"3.{m}" for m in range(8, 15) if f"3.{m}" in spec]


def _active(extra: str, python: str) -> set[str]:
    """Names of the requirements of ``extra`` that apply on ``python``."""
    out = set()
    for text in PROJECT["optional-dependencies"][extra]:
        req = Requirement(text)
        env = {"python_version": python, "extra": extra}
        if req.marker is None or Marker(str(req.marker)).evaluate(env):
            out.add(req.name)
    return out


def test_the_distribution_has_a_name_of_its_own_and_the_import_name_is_kernelcheck():
    assert NAME != "kernelcheck" and NAME.startswith("kernelcheck")
    assert (ROOT / "kernelcheck" / "__init__.py").is_file()
    for extra, reqs in PROJECT["optional-dependencies"].items():
        for text in reqs:
            req = Requirement(text)
            assert req.name != "kernelcheck", f"extra {extra!r} installs {text!r} from the index"


def test_install_lines_name_the_distribution():
    for page in ("README.md", "docs/index.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert f"pip install {NAME}" in text, f"{page} has no 'pip install {NAME}'"
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        bad = re.findall(r"pip install [\"']?kernelcheck(?![-\w])", text)
        assert not bad, f"{page.relative_to(ROOT)} installs the index's other 'kernelcheck'"


@pytest.mark.parametrize("python", _supported_pythons())
def test_the_test_extra_installs_both_frameworks_on_every_supported_python(python):
    names = _active("test", python)
    assert {"torch", "jax"} <= names, f"Python {python}: the test extra installs {sorted(names)}"
    assert "torch" in _active("torch", python) and "jax" in _active("jax", python)


def test_the_docs_extra_installs_a_signature_formatter():
    """mkdocstrings formats separate signatures only with Black or Ruff installed."""
    assert {"ruff", "black"} & {
        Requirement(t).name for t in PROJECT["optional-dependencies"]["docs"]
    }


def test_license_and_changelog():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and PROJECT["license"] == {"text": "MIT"}
    log = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## Unreleased" in log or f"## {__version__}" in log


@pytest.mark.slow
def test_the_wheel_ships_py_typed_and_the_license(tmp_path):
    source = tmp_path / "source"  # a copy: the build writes build/ and *.egg-info beside it
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "kernelcheck", source / "kernelcheck",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(NAME.replace("-", "_") + "-")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert "kernelcheck/py.typed" in names
        assert any(n.endswith("/LICENSE") for n in names), names[-10:]
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {NAME}\n" in meta
