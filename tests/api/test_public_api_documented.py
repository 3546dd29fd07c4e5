"""Every public name is documented: it has a docstring and a page of the API reference.

Public modules are ``kernelcheck`` and every ``kernelcheck/<name>.py`` whose
name does not start with an underscore (``__main__`` excluded).  For each
name in a module's ``__all__``:

* classes, functions and modules must carry their own docstring;
* data (constants, tuples, dicts) cannot carry one at run time, so the
  assignment that defines them must be documented in the source, by a ``#:``
  comment right above it or a string literal right after it (the two forms
  Sphinx and mkdocstrings read);
* the name must appear in the API reference: ``docs/reference/*.md`` has a
  ``::: module`` directive (rendering every name of its ``__all__``) for the
  module, or, for the top-level package, for another public module that
  exports the same object.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kernelcheck"
REFERENCE = ROOT / "docs" / "reference"


def _public_modules() -> list[str]:
    names = ["kernelcheck"]
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        names.append(f"kernelcheck.{path.stem}")
    return names


PUBLIC = _public_modules()


@cache
def _directives() -> dict[str, str]:
    """``{module: options text}`` of every ``::: module`` directive in the reference."""
    found: dict[str, str] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^::: ([\w.]+)\n((?:[ \t]+.*\n?)*)", text, re.MULTILINE):
            found[m.group(1)] = m.group(2)
    return found


def _renders_members(module: str) -> bool:
    options = _directives().get(module)
    return options is not None and "members: false" not in options


def _pairs():
    for mod in PUBLIC:
        module = importlib.import_module(mod)
        for name in getattr(module, "__all__", []):
            yield mod, name


PAIRS = list(_pairs())


@cache
def _source_docs() -> dict[str, set[str]]:
    """Names whose defining assignment is documented, per source file of the package."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        documented: set[str] = set()
        body = list(tree.body)
        for i, node in enumerate(body):
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            if not targets:
                continue
            above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
            after = body[i + 1] if i + 1 < len(body) else None
            string_after = (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            )
            if above.startswith("#:") or string_after:
                documented.update(targets)
        out[str(path)] = documented
    return out


def _documented_data(name: str) -> bool:
    return any(name in names for names in _source_docs().values())


def test_public_modules_are_found():
    assert "kernelcheck.kernels" in PUBLIC and "kernelcheck.claims" in PUBLIC
    assert "kernelcheck.__main__" not in PUBLIC


@pytest.mark.parametrize("module", PUBLIC)
def test_module_has_docstring_and_reference_page(module):
    mod = importlib.import_module(module)
    assert (mod.__doc__ or "").strip(), f"{module} has no module docstring"
    assert hasattr(mod, "__all__"), f"{module} has no __all__"
    assert module in _directives(), f"no '::: {module}' in docs/reference/*.md"


@pytest.mark.parametrize(("module", "name"), PAIRS, ids=[f"{m}.{n}" for m, n in PAIRS])
def test_public_name_has_a_docstring(module, name):
    obj = getattr(importlib.import_module(module), name)
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        doc = obj.__doc__ if not isinstance(obj, type) else obj.__dict__.get("__doc__")
        assert doc and doc.strip(), f"{module}.{name} has no docstring"
        assert not (isinstance(obj, type) and doc.startswith(f"{name}(")), (
            f"{module}.{name} has only the generated docstring"
        )
    elif callable(obj) and not isinstance(obj, (int, float, str, tuple, list, dict)):
        assert inspect.getdoc(obj), f"{module}.{name} has no docstring"
    else:
        assert _documented_data(name), (
            f"{module}.{name} is data without a '#:' comment above or a string after its assignment"
        )


@pytest.mark.parametrize(("module", "name"), PAIRS, ids=[f"{m}.{n}" for m, n in PAIRS])
def test_public_name_is_in_the_reference(module, name):
    if _renders_members(module):
        return
    obj = getattr(importlib.import_module(module), name)
    if isinstance(obj, types.ModuleType):
        assert obj.__name__ in _directives(), f"{obj.__name__} has no reference page"
        return
    for other in PUBLIC:
        if other == module or not _renders_members(other):
            continue
        mod = importlib.import_module(other)
        if any(getattr(mod, n, None) is obj for n in getattr(mod, "__all__", [])):
            return
    pytest.fail(f"{module}.{name} appears on no page of docs/reference")


def _exports() -> dict[str, list[tuple[str, object]]]:
    """``{name: [(module, object), ...]}`` over the ``__all__`` of every public module."""
    found: dict[str, list[tuple[str, object]]] = {}
    for module in PUBLIC:
        if module == "kernelcheck.cli":
            continue  # the command line exports no library names
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", ()):
            found.setdefault(name, []).append((module, getattr(mod, name)))
    return found


def test_a_public_table_means_one_thing_in_every_module_that_exports_it():
    """``kernelcheck.X.NAME`` and ``kernelcheck.Y.NAME`` of data (a tuple, a table) are one object.

    Functions and classes may share a verb across modules (``verify.write_report``
    and ``claims.write_report`` write their own reports); a constant under one
    name in two modules would be read as the same list of kinds.
    """
    clashes = {
        name: [module for module, _ in places]
        for name, places in _exports().items()
        if not callable(places[0][1])
        and not isinstance(places[0][1], types.ModuleType)
        and any(obj is not places[0][1] for _, obj in places[1:])
    }
    assert not clashes, clashes
