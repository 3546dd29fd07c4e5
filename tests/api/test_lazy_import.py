"""What each entry point imports: a project pays only for the kernelcheck it uses.

Each check runs a fresh interpreter (``sys.modules`` of this test process
already holds everything), imports one entry point and reads back which heavy
third-party packages it loaded.  A lazy ``__getattr__`` that started importing
eagerly, or a module-level ``import matplotlib`` in the core, fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

import kernelcheck

HEAVY = ("numpy", "scipy", "scipy.stats", "hypothesis", "matplotlib", "torch", "jax", "dask")

CLI_HELP = "from kernelcheck.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit: pass"


def loaded_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport sys, json\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("code", "allowed"),
    [
        ("import kernelcheck", ()),
        ("import kernelcheck.errors", ()),
        (
            "from kernelcheck.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit: pass",
            (),
        ),
        ("import kernelcheck.kernels", ("numpy", "scipy")),
        ("import kernelcheck.psd", ("numpy", "scipy")),
        ("import kernelcheck.attention", ("numpy", "scipy")),
        ("import kernelcheck.verify", ("numpy", "scipy", "scipy.stats")),
    ],
    ids=["kernelcheck", "errors", "cli --help", "kernels", "psd", "attention", "verify"],
)
def test_an_entry_point_loads_only_what_it_needs(code, allowed):
    extra = sorted(set(loaded_after(code)) - set(allowed))
    assert extra == [], f"{code!r} imported {extra}"


def test_the_probe_sees_an_eager_import():
    # The check can fail: an entry point that does import NumPy is reported.
    assert "numpy" in loaded_after("import kernelcheck\nkernelcheck.Linear")


def test_every_lazy_name_resolves_and_is_listed():
    names = set(dir(kernelcheck))
    public = [getattr(kernelcheck, m) for m in kernelcheck.__all__]
    modules = [m for m in public if isinstance(m, types.ModuleType)]
    for name in kernelcheck.__all__:
        assert name in names, name
        value = getattr(kernelcheck, name)
        if isinstance(value, types.ModuleType):  # a submodule, under its own name
            assert value.__name__ == f"kernelcheck.{name}", name
        elif name != "__version__":  # a name is the object a public submodule exports
            assert any(getattr(m, name, None) is value for m in modules), name
    # A name outside __all__ is an AttributeError, as for a plain module.
    with pytest.raises(AttributeError, match="no_such_name"):
        kernelcheck.no_such_name  # noqa: B018


def test_a_lazy_name_is_the_submodules_own_object():
    from kernelcheck import kernels, psd

    assert kernelcheck.Linear is kernels.Linear
    assert kernelcheck.check_psd is psd.check_psd
