"""The API reference cannot lie: every documented parameter matches the signature.

For every public callable reachable from the facades (``kernelcheck/*.py``):
its functions, the classes a user constructs (their ``__init__``, documented
in the class docstring, as mkdocstrings renders it) and the public methods
of every public class, the numpydoc ``Parameters`` section must have

* exactly one entry per parameter (``a, b : int`` is two parameters on one
  line: the reference then shows one description for both and the wrong
  default for one of them), and no entry for a parameter that does not exist;
* a type for each entry (the text after ``" : "``);
* for a parameter with a default, ``default VALUE`` in the type line, with
  ``VALUE`` equal to the default in :func:`inspect.signature` (a literal,
  compared by value; a name, compared with the default's name, or a module
  constant such as ``DEFAULT_FORMS``, compared by value); for a parameter
  without one, no ``default``.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _facades() -> list[str]:
    names = ["kernelcheck"]
    for path in sorted((ROOT / "kernelcheck").glob("*.py")):
        if not path.stem.startswith("_"):
            names.append(f"kernelcheck.{path.stem}")
    return names


def _is_record(cls: type) -> bool:
    """Classes kernelcheck builds for the user, not the other way round."""
    from kernelcheck._src.core.results import ResultMixin

    return (
        issubclass(cls, (ResultMixin, BaseException, enum.Enum))
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
        or (
            dataclasses.is_dataclass(cls)
            and not cls.__dict__.get("__doc__", "").count("Parameters")
        )
    )


def _own_methods(cls: type):
    for name, member in vars(cls).items():
        if name.startswith("_") or isinstance(member, property):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member):
            yield name, member


def _callables() -> dict[str, tuple[object, str | None]]:
    """``{public name: (callable whose signature is checked, docstring)}``."""
    out: dict[str, tuple[object, str | None]] = {}
    seen: set[int] = set()
    for facade in _facades():
        module = importlib.import_module(facade)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if id(obj) in seen or isinstance(obj, types.ModuleType):
                continue
            seen.add(id(obj))
            qual = f"{facade}.{name}"
            if inspect.isfunction(obj):
                out[qual] = (obj, obj.__doc__)
            elif inspect.isclass(obj) and obj.__module__.startswith("kernelcheck"):
                init = getattr(obj, "__init__", None)
                own = inspect.isfunction(init) and init.__module__.startswith("kernelcheck")
                if not _is_record(obj) and own:
                    out[qual] = (init, obj.__dict__.get("__doc__"))
                for mname, method in _own_methods(obj):
                    out[f"{qual}.{mname}"] = (method, method.__doc__)
    return out


def _sections(doc: str) -> dict[str, list[str]]:
    lines = inspect.cleandoc(doc).splitlines()
    out: dict[str, list[str]] = {}
    current = None
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not line.startswith(" ") and re.fullmatch(r"-{3,}", nxt.strip()):
            current = line.strip()
            out[current] = []
            continue
        if current is not None and not re.fullmatch(r"-{3,}", line.strip()):
            out[current].append(line)
    return out


def parameter_entries(doc: str | None) -> list[tuple[str, str]] | None:
    """``[(names, type text)]`` of the Parameters section (None when there is none)."""
    if not doc:
        return None
    section = _sections(doc).get("Parameters")
    if section is None:
        return None
    out = []
    for line in section:
        if line and not line.startswith(" "):
            names, _, kind = line.partition(" : ")
            out.append((names.strip(), kind.strip()))
    return out


_DEFAULT = re.compile(r"\bdefault(?:s to|:|=)?\s+(.+?)\s*$")


def _matches(text: str, default: object, module: object = None) -> bool:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", text) and hasattr(module, text):
            return getattr(module, text) == default  # a documented module constant
        name = getattr(default, "__name__", None)
        qualified = f"{getattr(default, '__module__', '')}.{name}"
        return text.strip("`") in (repr(default), str(default), name, qualified)
    if isinstance(value, float) or isinstance(default, float):
        return isinstance(default, (int, float)) and float(value) == float(default)
    return type(value) is type(default) and value == default


def problems(name: str, fn: object, doc: str | None) -> list[str]:
    """What is wrong with the documented parameters of ``fn`` (empty when nothing)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    entries = parameter_entries(doc)
    if not params:
        return []
    if entries is None:
        return [f"{name}: no Parameters section for {[p.name for p in params]}"]
    bad = []
    documented: dict[str, str] = {}
    for names, kind in entries:
        if "," in names:
            bad.append(f"{name}: {names!r} documents several parameters on one line")
            continue
        documented[names.lstrip("*")] = kind
    for p in params:
        kind = documented.pop(p.name, None)
        if kind is None:
            bad.append(f"{name}: parameter {p.name!r} is not documented")
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue  # numpydoc: "**kwargs" alone, no type
        if not kind:
            bad.append(f"{name}: parameter {p.name!r} has no type")
            continue
        m = _DEFAULT.search(kind)
        if p.default is p.empty:
            if m:
                bad.append(f"{name}: {p.name!r} has no default but is documented '{kind}'")
        elif not m:
            bad.append(f"{name}: {p.name!r} defaults to {p.default!r}, not said in '{kind}'")
        elif not _matches(m.group(1), p.default, inspect.getmodule(inspect.unwrap(fn))):
            bad.append(f"{name}: {p.name!r} documented default {m.group(1)} is {p.default!r}")
    bad += [f"{name}: {extra!r} is documented but not a parameter" for extra in documented]
    return bad


CALLABLES = _callables()


def test_the_public_surface_is_found():
    assert "kernelcheck.check_psd" in CALLABLES and "kernelcheck.verify.attention" in CALLABLES
    assert "kernelcheck.Polynomial" in CALLABLES  # a class the user constructs
    assert "kernelcheck.verify.UnbiasedReport.trials_to_detect" in CALLABLES  # a method
    assert len(CALLABLES) > 100


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_every_parameter_is_documented_once_with_its_type_and_default(name):
    fn, doc = CALLABLES[name]
    bad = problems(name, fn, doc)
    assert not bad, "\n".join(bad)


def _sample(a, b=16, *, c="...nd", d=1e-9, e=None, f=(), **kw):
    """A function to check the checker on."""


_GOOD = """Sample.

Parameters
----------
a : int
    First.
b : int, default 16
    Second.
c : str, default "...nd"
    Third.
d : float, default 1e-09
    Fourth.
e : object, default None
    Fifth.
f : tuple, default ()
    Sixth.
**kw
    Rest.
"""


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (("b : int, default 16", "b : int, default 0"), "documented default 0 is 16"),
        (('c : str, default "...nd"', "c : str"), "defaults to '...nd', not said"),
        (("a : int", "a, b : int"), "several parameters on one line"),
        (("e : object, default None\n    Fifth.\n", ""), "'e' is not documented"),
        (("a : int", "a : int, default 3"), "has no default"),
        (("f : tuple, default ()", "f : tuple, default None"), "documented default None"),
        (("**kw\n    Rest.\n", "**kw\n    Rest.\ng : int\n    Gone.\n"), "'g' is documented"),
        (("Parameters\n----------", "Notes\n-----"), "no Parameters section"),
    ],
)
def test_the_check_finds_each_kind_of_lie(edit, found):
    assert problems("sample", _sample, _GOOD) == []
    bad = problems("sample", _sample, _GOOD.replace(*edit))
    assert any(found in b for b in bad), bad
