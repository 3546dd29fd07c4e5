"""The documentation site, built once per test session (``mkdocs build --strict``).

The build needs the ``docs`` extra (mkdocs-material, mkdocstrings, quickjax),
which the ``test`` extra installs; without it the site tests skip and say
which package is missing.  The browser tests also need Chromium
(``/usr/bin/chromium``, Debian's package) and playwright.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Python modules the site build needs (the ``docs`` extra).
BUILD_MODULES = ("mkdocs", "material", "mkdocstrings_handlers.python", "quickjax", "quickjs")


def missing_modules(names) -> list[str]:
    """The modules of ``names`` that cannot be imported here."""
    out = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            out.append(name)
    return out


def chromium_path() -> str | None:
    """Debian's Chromium, or ``$KERNELCHECK_CHROMIUM``, when it is installed."""
    candidate = os.environ.get("KERNELCHECK_CHROMIUM") or shutil.which("chromium")
    return candidate if candidate and os.access(candidate, os.X_OK) else None


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site: ``mkdocs build --strict`` of this repository into a temporary folder."""
    missing = missing_modules(BUILD_MODULES)
    if missing:
        pytest.skip(
            f"the docs extra is not installed (missing {', '.join(missing)}): "
            "python3 -m pip install -e '.[docs]'"
        )
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}")
    return out
