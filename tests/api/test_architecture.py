"""The architecture of kernelcheck, checked from the source: layers, sizes and one home each.

The private code lives in rooms under ``kernelcheck/_src/``, in layers whose
imports only point downwards:

    core < kernels < features < attention < psd < mc < testing < verify | scaling < claims < cli

(``verify`` and ``scaling`` are siblings: neither imports the other).  The
public facades (``kernelcheck/*.py``) may import any room.  These tests parse
every module with :mod:`ast` (nothing is imported) and fail on:

* an import of a higher layer, or of a sibling, from a room;
* an import cycle between modules (lazy imports inside functions count: a
  cycle is a design fault even when Python tolerates it);
* a module importing another module's private name (``_name``);
* a module over :data:`MAX_MODULE_LINES` lines, a function over
  :data:`MAX_FUNCTION_LINES` lines (docstring included), or an ``*_iv``
  validation helper returning a tuple of more than :data:`MAX_IV_VALUES`
  values (it returns a small named record instead): in every module of the
  package, the facades, ``kernelcheck/cli.py`` and ``pytest_plugin.py``
  included, save the ones :data:`_PENDING_SIZE_EXCEPTIONS` lists while they
  are being split.

Each rule is also run on a planted violation, so the checks can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "kernelcheck"
SRC = ROOT / "_src"

#: The layers, bottom first; rooms in one tuple are siblings.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("kernels",),
    ("features",),
    ("attention",),
    ("psd",),
    ("mc",),
    ("testing",),
    ("verify", "scaling"),
    ("claims",),
    ("cli",),
)
RANK = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120
MAX_IV_VALUES = 4

#: Modules over a size rule while they are being split, each with its measured size:
#: ``{"kernelcheck._src.room.module": lines}`` for a module over MAX_MODULE_LINES,
#: ``{"kernelcheck._src.room.module.function": lines}`` for a function over
#: MAX_FUNCTION_LINES.  An entry excuses that size and no more: the module or function
#: growing past it is reported, and so is an entry that no longer breaks its rule (remove
#: it).  Empty: every module and function of the package is within the rules.
_PENDING_SIZE_EXCEPTIONS: dict[str, int] = {}


def _module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, str | None, int]]:
    """``(imported module, imported name or None, line)`` for every import in ``tree``."""
    out = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.extend((base, alias.name, node.lineno) for alias in node.names)
    return out


def _room(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["kernelcheck", "_src"]:
        return parts[2]
    return None


def _graph(modules: dict[str, Path]):
    """Import edges between kernelcheck modules: {module: [(target, name, line)]}."""
    edges: dict[str, list[tuple[str, str | None, int]]] = {}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = []
        for target, name, line in _imports(tree, mod, path.name == "__init__.py"):
            if not target.startswith("kernelcheck"):
                continue
            # ``from kernelcheck._src.attention import exact``: a submodule, not a name
            if name is not None and f"{target}.{name}" in modules:
                target, name = f"{target}.{name}", None
            found.append((target, name, line))
        edges[mod] = found
    return edges


def layer_violations(modules: dict[str, Path]) -> list[str]:
    bad = []
    for mod, targets in _graph(modules).items():
        room = _room(mod)
        if room is None:
            continue
        for target, _name, line in targets:
            other = _room(target)
            if (
                target.startswith("kernelcheck")
                and other is None
                and target
                not in (
                    "kernelcheck.errors",
                    "kernelcheck",
                )
            ):
                bad.append(f"{mod}:{line} imports the facade {target} (rooms import rooms)")
            if other is None or other == room:
                continue
            if RANK[other] >= RANK[room]:
                kind = "a sibling" if RANK[other] == RANK[room] else "a higher layer"
                bad.append(f"{mod}:{line} imports {target}: {kind} ({other} over {room})")
    return bad


def cycles(modules: dict[str, Path]) -> list[list[str]]:
    graph = {
        m: sorted({t for t, _, _ in ts if t in modules and t != m})
        for m, ts in _graph(modules).items()
    }
    found, state, stack = [], {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, ()):
            if state.get(t) == 1:
                found.append(stack[stack.index(t) :] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)
    return found


def private_imports(modules: dict[str, Path]) -> list[str]:
    bad = []
    for mod, targets in _graph(modules).items():
        if _room(mod) is None:
            continue
        for target, name, line in targets:
            leaf = target.rsplit(".", 1)[-1]
            if name is not None and name.startswith("_") and not name.startswith("__"):
                bad.append(f"{mod}:{line} imports the private name {name} of {target}")
            elif name is None and leaf.startswith("_") and target != "kernelcheck._src":
                bad.append(f"{mod}:{line} imports the private module {target}")
    return bad


def _too_long(name: str, length: int, limit: int, excused: dict[str, int]) -> str | None:
    """The violation of a size rule by ``name`` (``length`` over ``limit``), or None."""
    allowed = excused.get(name)
    if length <= limit:
        return None
    if allowed is not None and length <= allowed:
        return None
    more = f"; the pending exception allows {allowed}" if allowed is not None else ""
    return f"{name}: {length} lines (at most {limit}{more})"


def size_violations(modules: dict[str, Path], excused: dict[str, int] | None = None) -> list[str]:
    """Size rules over every module of ``modules``, facades and top-level modules included.

    ``excused``: the pending exceptions (default :data:`_PENDING_SIZE_EXCEPTIONS`).
    """
    excused = _PENDING_SIZE_EXCEPTIONS if excused is None else excused
    bad = []
    for mod, path in modules.items():
        text = path.read_text()
        lines = text.count("\n")
        bad.append(_too_long(mod, lines, MAX_MODULE_LINES, excused))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                bad.append(_too_long(f"{mod}.{node.name}", length, MAX_FUNCTION_LINES, excused))
                if node.name.endswith("_iv"):
                    for ret in ast.walk(node):
                        if (
                            isinstance(ret, ast.Return)
                            and isinstance(ret.value, ast.Tuple)
                            and len(ret.value.elts) > MAX_IV_VALUES
                        ):
                            bad.append(
                                f"{mod}.{node.name}:{ret.lineno} returns {len(ret.value.elts)} "
                                f"values (at most {MAX_IV_VALUES}; return a named record)"
                            )
    return [v for v in bad if v is not None]


def stale_exceptions(modules: dict[str, Path], excused: dict[str, int]) -> list[str]:
    """Pending exceptions that excuse nothing: the name is gone or within its rule."""
    sizes: dict[str, int] = {}
    for mod, path in modules.items():
        text = path.read_text()
        sizes[mod] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sizes[f"{mod}.{node.name}"] = node.end_lineno - node.lineno + 1
    stale = []
    for name in excused:
        limit = MAX_MODULE_LINES if name in modules else MAX_FUNCTION_LINES
        if sizes.get(name, 0) <= limit:
            stale.append(f"{name}: within its rule (or gone); remove its pending exception")
    return stale


def test_imports_only_point_down_the_layers():
    assert layer_violations(_modules()) == []


def test_there_are_no_import_cycles():
    assert cycles(_modules()) == []


def test_no_module_imports_another_modules_private_name():
    assert private_imports(_modules()) == []


def test_modules_functions_and_iv_helpers_stay_small():
    assert size_violations(_modules()) == []


def test_the_size_rules_read_every_module_of_the_package():
    checked = set(_modules())
    assert {"kernelcheck.cli", "kernelcheck.pytest_plugin", "kernelcheck.verify"} <= checked
    assert {"kernelcheck._src.cli.main", "kernelcheck"} <= checked


def test_every_pending_size_exception_still_excuses_something():
    assert stale_exceptions(_modules(), _PENDING_SIZE_EXCEPTIONS) == []


def test_every_room_of_the_tree_is_in_a_layer():
    rooms = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(RANK)


# ---------------------------------------------------------------------------
# The checks can fail: each rule on a planted violation


@pytest.fixture
def planted(tmp_path):
    """Write a fake kernelcheck tree under tmp_path; returns its modules as the checks see them."""
    root = tmp_path / "kernelcheck"

    def write(files: dict[str, str]) -> dict[str, Path]:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            for parent in path.relative_to(root).parents:
                (root / parent / "__init__.py").touch()
            path.write_text(text)
        return _modules(root)

    return write


def test_an_upward_import_is_reported(planted):
    mods = planted(
        {
            "_src/core/b.py": "from kernelcheck._src.verify.kernels.kernel import kernel\n",
            "_src/verify/kernels/kernel.py": "def kernel(): pass\n",
        }
    )
    assert any("a higher layer" in v for v in layer_violations(mods))


def test_a_sibling_import_is_reported(planted):
    mods = planted(
        {
            "_src/verify/a.py": "from kernelcheck._src.scaling import experiment\n",
            "_src/scaling/experiment.py": "",
        }
    )
    assert any("a sibling" in v for v in layer_violations(mods))


def test_a_cycle_is_reported(planted):
    mods = planted(
        {
            "_src/core/a.py": "from kernelcheck._src.core import b\n",
            "_src/core/b.py": "def f():\n    from kernelcheck._src.core import a\n",
        }
    )
    assert cycles(mods)


def test_a_private_import_is_reported(planted):
    mods = planted(
        {
            "_src/core/a.py": "def _helper(): pass\n",
            "_src/core/b.py": "from kernelcheck._src.core.a import _helper\n",
        }
    )
    assert private_imports(mods)


def test_a_long_function_and_a_wide_iv_are_reported(planted):
    mods = planted(
        {
            "_src/core/a.py": "def long():\n" + "    x = 1\n" * MAX_FUNCTION_LINES,
            "_src/core/b.py": "def f_iv(a):\n    return a, a, a, a, a\n",
        }
    )
    found = size_violations(mods)
    assert any("long" in v for v in found) and any("f_iv" in v for v in found)


def test_a_long_facade_and_a_long_top_level_function_are_reported(planted):
    mods = planted(
        {
            "cli.py": '"""A facade."""\n' + "x = 1\n" * MAX_MODULE_LINES,
            "pytest_plugin.py": "def hook():\n" + "    x = 1\n" * MAX_FUNCTION_LINES,
            "_src/core/a.py": "x = 1\n",
        }
    )
    found = size_violations(mods, excused={})
    assert any(v.startswith("kernelcheck.cli: ") for v in found), found
    assert any(v.startswith("kernelcheck.pytest_plugin.hook: ") for v in found), found


def test_a_pending_exception_excuses_its_size_and_no_more(planted):
    long = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES  # f is MAX_FUNCTION_LINES + 1
    mods = planted({"_src/verify/a.py": long, "_src/verify/b.py": "def g():\n    pass\n"})
    name = "kernelcheck._src.verify.a.f"
    assert size_violations(mods, excused={name: MAX_FUNCTION_LINES + 1}) == []
    grown = size_violations(mods, excused={name: MAX_FUNCTION_LINES})
    assert grown and "the pending exception allows" in grown[0]
    stale = stale_exceptions(mods, {"kernelcheck._src.verify.b.g": 200, name: 200})
    assert stale == [
        "kernelcheck._src.verify.b.g: within its rule (or gone); remove its pending exception"
    ]
