"""Every public callable of kernelcheck has a bad-input table somewhere in the suite.

The contract (``docs/reliability.md``): a public callable either answers or
raises a clean error -- ``InvalidArgument`` (or its subclass
``InfiniteFeatureSpace``) whose message opens with the argument in backticks,
or names the size an intermediate would need -- never a bare ``TypeError`` /
``ValueError`` / ``IndexError`` / ``AttributeError`` from NumPy or Python,
never a verdict computed from NaN, never a silent acceptance.  The tables live
in the rooms they test (``tests/<room>/test_bad_input.py``,
``tests/verify/test_*_bad_input.py``, the bad-input tables of
``tests/attention/families/``).

``test_every_public_callable_has_a_bad_input_table`` parses every test file
with :mod:`ast` and fails when a public function or user-constructed class has
no row in any bad-input table (see :func:`_tabled_objects` for what counts as
one); a test that takes a catalogue argument of ``tests/conftest.py`` counts as
a table of the catalogue's entries.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path

from kernelcheck import scaling as S
from kernelcheck.attention import Form
from kernelcheck.kernels import (
    Sum,
)
from tests.conftest import CATALOGUE_ARGUMENTS

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]


# ---------------------------------------------------------------------------
# Every public callable has a bad-input table
# ---------------------------------------------------------------------------

#: Public names with no bad-input table, each with the reason.
EXEMPT = {
    "kernelcheck.kernels.Kernel": "abstract base; every concrete node has rows",
    "kernelcheck.features.FeatureMap": "abstract base users subclass; verify.feature_map has rows",
    "kernelcheck.psd.PSDResult": "result built by check_psd",
    "kernelcheck.psd.Verdict": "enum of PSD verdicts",
    "kernelcheck.psd.MercerFeatures": "result built by mercer_features",
    "kernelcheck.attention.AttentionOutput": "result built by the attention forms",
    "kernelcheck.attention.AttentionCost": "result built by cost_model",
    "kernelcheck.attention.Form": "registry entry kernelcheck builds; get_form has rows",
    "kernelcheck.attention.Family": "registry entry kernelcheck builds; get_family has rows",
    "kernelcheck.attention.Recurrence": (
        "pair built by linear_recurrence and gated_recurrence, whose parts have rows"
    ),
    "kernelcheck.strategies.register_profiles": "takes no arguments",
    "kernelcheck.strategies.AttentionInputs": "record drawn by attention_inputs",
    "kernelcheck.attention.VJP": "result built by the *_vjp functions",
    "kernelcheck.attention.GatedVJP": "result built by gated_vjp and its bound",
    "kernelcheck.attention.ChannelVJP": "result built by channel_gated_vjp and its bound",
    "kernelcheck.claims.Claim": "registry entry kernelcheck builds; Claim.check has a row",
    "kernelcheck.claims.ClaimResult": "result built by Claim.check",
    "kernelcheck.claims.ClaimVerdict": "enum of claim verdicts",
    "kernelcheck.claims.EssayReport": "result built by run_essay",
    "kernelcheck.claims.registry": "takes no arguments",
    "kernelcheck.errors.InvalidArgument": "exception",
    "kernelcheck.errors.InfiniteFeatureSpace": "exception",
    "kernelcheck.errors.BadNormalizer": "exception",
    "kernelcheck.errors.NumericalFailure": "exception",
    "kernelcheck.errors.Inconclusive": "exception",
    "kernelcheck.scaling.Measurement": "result built by measure; plot_measurements checks its type",
    "kernelcheck.scaling.ExponentFit": "result built by fit_exponent",
    "kernelcheck.scaling.AcceptedRange": "result built by accepted_range",
    "kernelcheck.scaling.FormScaling": "result built by run_scaling",
    "kernelcheck.scaling.ScalingReport": "result built by run_scaling",
    "kernelcheck.verify.KernelReport": "report built by verify.kernel",
    "kernelcheck.verify.FeatureMapReport": "report built by verify.feature_map",
    "kernelcheck.verify.UnbiasedReport": "report built by verify.unbiased",
    "kernelcheck.verify.PairResult": "part of UnbiasedReport",
    "kernelcheck.verify.SweepPoint": "part of UnbiasedReport",
    "kernelcheck.verify.RatioBiasResult": "result built by verify.ratio_bias",
    "kernelcheck.verify.RandomFeatureAttentionReport": "report of verify.random_feature_attention",
    "kernelcheck.verify.AttentionReport": "report built by verify.attention",
    "kernelcheck.verify.AttentionCase": "part of AttentionReport",
}

#: Public modules without a table of their own: the command line and the pytest plugin.
NOT_TABLED_MODULES = {"cli", "pytest_plugin", "__main__"}
_MISSING = object()


def _public_modules() -> list[types.ModuleType]:
    names = ["kernelcheck"] + [
        f"kernelcheck.{p.stem}"
        for p in sorted((ROOT / "kernelcheck").glob("*.py"))
        if not p.stem.startswith("_") and p.stem not in NOT_TABLED_MODULES
    ]
    return [importlib.import_module(n) for n in names]


def _public_callables(modules) -> dict[int, tuple[object, list[str]]]:
    """``{id(obj): (obj, public dotted names)}`` of every function and class in an ``__all__``."""
    found: dict[int, tuple[object, list[str]]] = {}
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found.setdefault(id(obj), (obj, []))[1].append(f"{module.__name__}.{name}")
    return found


def _is_parametrize(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "parametrize"
    )


def _resolve(node: ast.expr, env: dict) -> object:
    """The object a Name or dotted Attribute denotes through the file's imports."""
    if isinstance(node, ast.Name):
        return env.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, env)
        return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
    return _MISSING


def _tabled_objects(source: str, bad_input_file: bool = True) -> set[int]:
    """Ids of the kernelcheck objects named inside the bad-input tables of one test file.

    A table is a module-level assignment whose target name contains ``BAD``;
    the argument values of a ``pytest.mark.parametrize`` decorator of a test
    whose name says it tests bad input (``..._bad_input...``), or of any test
    of a file named so (``bad_input_file``); and the catalogue arguments
    (``tests/conftest.py``) such a test takes.  Names are resolved through the
    file's ``kernelcheck`` imports (``A.softmax`` with ``from kernelcheck
    import attention as A``), and module-level helpers a table refers to (row
    builders, example lists) are followed.
    """
    tree = ast.parse(source)
    catalogued: set[int] = set()
    env: dict[str, object] = {}
    helpers: dict[str, ast.AST] = {}
    tables: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelcheck"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                env[alias.asname or alias.name] = getattr(module, alias.name, _MISSING)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kernelcheck"):
                    top = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else top
                    env[top] = importlib.import_module(target)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    helpers.setdefault(target.id, node.value)
                    if "BAD" in target.id:
                        tables.append(node.value)
        elif isinstance(node, ast.FunctionDef):
            helpers[node.name] = node
            if not (bad_input_file or "bad_input" in node.name):
                continue
            for dec in node.decorator_list:
                if _is_parametrize(dec):
                    assert isinstance(dec, ast.Call)
                    tables.extend(dec.args[1:])
                    tables.extend(k.value for k in dec.keywords if k.arg == "argvalues")
            for arg in node.args.args:
                catalogued |= _catalogue_objects(arg.arg)
    found: set[int] = set(catalogued)
    followed: set[str] = set()
    todo = list(tables)
    while todo:
        for sub in ast.walk(todo.pop()):
            if isinstance(sub, (ast.Name, ast.Attribute)):
                obj = _resolve(sub, env)
                if obj is not _MISSING:
                    found.add(id(obj))
            if isinstance(sub, ast.Name) and sub.id in helpers and sub.id not in followed:
                followed.add(sub.id)
                todo.append(helpers[sub.id])
    return found


def _catalogue_objects(argument: str) -> set[int]:
    """Ids of the kernelcheck objects a catalogue argument (tests/conftest.py) runs over.

    A test taking ``random_feature_map`` is parametrized over the random feature classes
    of tests/catalog.py, as if they were listed in its ``parametrize``; a kernel (or the
    kernel of an exact map) contributes the classes of its nodes; an attention family or
    form of the registry (``attention_family``, ``attention_form``) contributes each of
    its forms' functions and error bounds.
    """
    found: set[int] = set()
    for param in CATALOGUE_ARGUMENTS.get(argument, []):
        (value,) = param.values
        todo = list(value) if isinstance(value, tuple) else [value]
        while todo:
            obj = todo.pop()
            if isinstance(obj, str):
                continue
            if inspect.isclass(obj):
                found.add(id(obj))
                continue
            if isinstance(obj, Form):
                found |= {id(obj.function), id(obj.error_bound)}
                continue
            found.add(id(type(obj)))
            todo += [getattr(obj, a) for a in ("left", "right", "kernel") if hasattr(obj, a)]
            todo += list(getattr(obj, "forms", ()))
    return found


def _untabled(modules, test_files) -> list[str]:
    tabled: set[int] = set()
    for path in test_files:
        tabled |= _tabled_objects(path.read_text(encoding="utf-8"), "bad_input" in path.stem)
    return sorted(
        names[0]
        for key, (_, names) in _public_callables(modules).items()
        if key not in tabled and not any(n in EXEMPT for n in names)
    )


#: Every test file of the suite; the bad-input files are named ``test_*bad_input*.py``.
TEST_FILES = sorted((ROOT / "tests").rglob("test_*.py"))
BAD_INPUT_FILES = [p for p in TEST_FILES if "bad_input" in p.stem]


def test_every_public_callable_has_a_bad_input_table():
    """Every public function and user-built class appears in a bad-input table, or in EXEMPT."""
    rooms = {p.parent.name for p in BAD_INPUT_FILES}
    assert {"kernels", "features", "psd", "mc", "scaling", "testing", "claims", "verify"} <= rooms
    missing = _untabled(_public_modules(), TEST_FILES)
    assert not missing, f"public callables without a bad-input table (or EXEMPT entry): {missing}"


def test_exemptions_name_current_public_callables():
    """A stale EXEMPT entry (renamed or removed name) is an error, not a silent pass."""
    public = {n for _, names in _public_callables(_public_modules()).values() for n in names}
    assert sorted(set(EXEMPT) - public) == []


def test_the_coverage_check_fails_for_a_public_function_without_a_table():
    """A new public function with no row is reported; adding a row makes it pass."""

    def brand_new(x):
        """A public function nobody has tabled yet."""

    module = types.ModuleType("kernelcheck.brand_new_module")
    module.__all__ = ["brand_new"]
    module.brand_new = brand_new  # type: ignore[attr-defined]
    assert _untabled([module], TEST_FILES) == ["kernelcheck.brand_new_module.brand_new"]

    tabled = _tabled_objects(
        "from kernelcheck.kernels import Sum\n"
        "import kernelcheck.scaling as S\n"
        "NEW_BAD = [(lambda: Sum(1, 'a'), '`right`'), (lambda: S.measure(5), '`fn`')]\n"
    )
    assert id(Sum) in tabled and id(S.measure) in tabled and id(S.run_scaling) not in tabled


def _table_ids(module) -> dict[str, list[str]]:
    """``{table name: row ids}`` of a test module's bad-input tables whose rows have ids."""
    out = {}
    for name, value in vars(module).items():
        if "BAD" in name and isinstance(value, (list, tuple)) and value:
            if all(isinstance(r, tuple) and r and isinstance(r[0], str) for r in value):
                out[name] = [r[0] for r in value]
    return out


def test_table_ids_are_unique():
    """No two rows of a bad-input table share an id (pytest would rename one silently,
    and a row copied over another would hide it); a table made of others is one table."""
    checked = set()
    for path in BAD_INPUT_FILES:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for table, ids in _table_ids(importlib.import_module(name)).items():
            twice = sorted({i for i in ids if ids.count(i) > 1})
            assert not twice, (name, table, twice)
            checked.add(path.parent.name)
    assert {"kernels", "testing", "mc", "scaling", "claims"} <= checked
