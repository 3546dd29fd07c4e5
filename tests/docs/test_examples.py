"""Every example of the documentation runs, and imports public names only.

Two kinds of examples:

* the ``python`` code blocks of the pages under ``docs/``: the blocks of one
  page run in order in one namespace, as a reader would paste them;
* the ``Examples`` sections of the docstrings of every public name (the API
  reference renders them): each runs as a doctest, in the namespace of the
  public module that documents it (``from kernelcheck.psd import *`` for a
  name of the ``kernelcheck.psd`` page, plus the object under its own name),
  so an example may use its module's names as the reference page shows them.

No example may import from ``kernelcheck._src``: users import public names.
The few blocks that cannot run as written are listed in ``FRAGMENTS`` with the
setup they run after, or the reason they do not run.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PUBLIC = ["kernelcheck"] + [
    f"kernelcheck.{p.stem}"
    for p in sorted((ROOT / "kernelcheck").glob("*.py"))
    if not p.stem.startswith("_")
]

_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: (page, block index) -> (setup code run first, or None to not run the block; why).
FRAGMENTS = {
    ("psd.md", 0): (
        "K = np.array([[2.0, 1.0], [1.0, 2.0]])",
        "K is the reader's matrix; the block runs on a 2 x 2 one",
    ),
    ("distributed.md", 1): (
        None,
        "needs a Dask scheduler at the address shown; the same call on a local "
        "cluster is the page's first block, and tests/mc runs it",
    ),
}

#: Pages whose blocks a test of their own runs (with checks of what they show).
OWN_TESTS = {
    "examples/pytorch.md": "tests/examples/test_pytorch_example.py",
    "examples/jax.md": "tests/examples/test_jax_example.py",
}


def _pages() -> list[str]:
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        rel = page.relative_to(DOCS).as_posix()
        if rel.startswith("img/") or not _BLOCK.search(page.read_text(encoding="utf-8")):
            continue
        out.append(rel)
    return out


PAGES = _pages()


def _blocks(rel: str) -> list[str]:
    return _BLOCK.findall((DOCS / rel).read_text(encoding="utf-8"))


def _run_python(code: str, namespace: dict, label: str) -> None:
    if code.lstrip().startswith(">>>"):  # a doctest-style block: run it, compare nothing
        parser = doctest.DocTestParser()
        code = "\n".join(ex.source for ex in parser.get_examples(code))
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, label, "exec"), namespace)  # the docs' own code


def test_the_pages_with_examples_are_found():
    assert {"index.md", "attention.md", "claims/index.md"} <= set(PAGES)
    assert set(OWN_TESTS) <= set(PAGES)
    for page, test in OWN_TESTS.items():  # the test that runs the page names it
        assert f"docs/{page}" in (ROOT / test).read_text(encoding="utf-8"), (page, test)


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_import_public_names_only(page):
    for i, code in enumerate(_blocks(page)):
        assert "_src" not in code, f"docs/{page} block {i} imports a private module"


@pytest.mark.parametrize("page", [p for p in PAGES if p not in OWN_TESTS])
def test_page_examples_run(page):
    namespace: dict = {"__name__": f"docs_{Path(page).stem}", "np": np}
    for i, code in enumerate(_blocks(page)):
        setup, _why = FRAGMENTS.get((page, i), ("", ""))
        if setup is None:
            continue
        _run_python(setup + "\n" + code, namespace, f"docs/{page}[{i}]")
    if page == "index.md":
        # the verdicts the home page's comments announce
        assert namespace["gram"].outcome == "verified"
        assert namespace["search"].outcome == "refuted"
        assert namespace["features"].outcome == "verified"
        assert namespace["layer"].outcome == "verified"
        assert namespace["estimate"].outcome == "verified"
        namespace["test_my_kernel_is_psd"](np.random.default_rng(0))


def test_fragments_name_real_blocks():
    for (page, i), (_setup, why) in FRAGMENTS.items():
        assert page in PAGES and i < len(_blocks(page)), (page, i)
        assert why


# ---------------------------------------------------------------------------
# Docstring examples of the public names


def _doctests() -> list[tuple[str, doctest.DocTest]]:
    """One doctest per documented public object, in its documenting module's namespace."""
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    seen: dict[tuple, tuple[str, doctest.DocTest]] = {}
    # The room's own facade first, the top-level package (re-exports) last.
    for module_name in sorted(PUBLIC, key=lambda m: m == "kernelcheck"):
        module = importlib.import_module(module_name)
        globs = dict(vars(module))
        for t in finder.find(module, module_name, globs=dict(globs)):
            if t.name == module_name:  # the module docstring itself
                seen.setdefault(("module", module_name), (module_name, t))
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                continue
            # an object exported under another name (ClaimVerdict is Outcome) keeps its own
            own = {getattr(obj, "__name__", name): obj}
            for t in finder.find(
                obj, f"{module_name}.{name}", globs={**globs, **own}, module=False
            ):
                key = (t.docstring, t.lineno)
                seen.setdefault(key, (module_name, t))
    return sorted(seen.values(), key=lambda p: p[1].name)


DOCTESTS = [(m, t) for m, t in _doctests() if t.examples]


def test_every_public_module_has_examples():
    examples = sum(len(t.examples) for _, t in DOCTESTS)
    assert len(DOCTESTS) > 60 and examples > 250, (len(DOCTESTS), examples)
    documented = {m for m, _ in DOCTESTS}
    for module in ("kernelcheck.psd", "kernelcheck.verify", "kernelcheck.kernels"):
        assert module in documented


@pytest.mark.parametrize(("module", "test"), DOCTESTS, ids=[t.name for _, t in DOCTESTS])
def test_docstring_example(module, test):
    for example in test.examples:
        assert "_src" not in example.source, (
            f"{test.name}: the example imports a private module: {example.source.strip()}"
        )
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    out = io.StringIO()
    result = runner.run(test, out=out.write, clear_globs=True)
    assert result.failed == 0, out.getvalue()
