"""Seeds (kernelcheck._src.core.seeds): what a seed argument may be, and the one derivation rule."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from kernelcheck._src.core.seeds import as_rng, as_seed_sequence, child_seed
from kernelcheck.errors import InvalidArgument

PACKAGE = Path(__file__).resolve().parents[2] / "kernelcheck"
#: The one module allowed to build a SeedSequence from a spawn key.
HOME = PACKAGE / "_src" / "core" / "seeds.py"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: as_rng(None), "must be given"),
        (lambda: as_rng(-1), "non-negative int"),
        (lambda: as_rng(1.5), "non-negative int"),
        (lambda: as_seed_sequence(True), "non-negative int"),
        (lambda: child_seed(3, 1), "`root` must be a numpy.random.SeedSequence"),
        (lambda: child_seed(np.random.default_rng(0), 1), "`root` must be a numpy.random"),
        (lambda: child_seed(np.random.SeedSequence(0), -1), "`path` must be >= 0, got -1"),
        (lambda: child_seed(np.random.SeedSequence(0), 1.0), "`path` must be an integer"),
    ],
)
def test_bad_seeds_and_paths_are_refused_naming_the_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_rng_is_reproducible_and_passes_generators_through():
    g = np.random.default_rng(3)
    assert as_rng(g) is g
    assert as_rng(7).random() == as_rng(7).random()
    assert as_rng(np.random.SeedSequence(7)).random() == np.random.default_rng(7).random()


@pytest.mark.parametrize("pool_size", [4, 8])
def test_a_child_is_what_spawn_gives_at_each_level(pool_size):
    root = np.random.SeedSequence(11, pool_size=pool_size)
    spawned = np.random.SeedSequence(11, pool_size=pool_size).spawn(3)
    for k in range(3):
        grand = np.random.SeedSequence(11, pool_size=pool_size).spawn(3)[k].spawn(2)
        assert np.array_equal(child_seed(root, k).generate_state(4), spawned[k].generate_state(4))
        assert np.array_equal(child_seed(root, k, 1).generate_state(4), grand[1].generate_state(4))
        assert child_seed(root, k).pool_size == pool_size


def test_a_child_does_not_depend_on_who_asked_first():
    root = np.random.SeedSequence(5)
    first = child_seed(root, 0).generate_state(2)
    root.spawn(4)  # advances spawn's counter; the rule ignores it
    assert np.array_equal(child_seed(root, 0).generate_state(2), first)
    assert root.n_children_spawned == 4


def test_the_streams_of_different_paths_differ():
    root = np.random.SeedSequence(0)
    states = {child_seed(root, *p).generate_state(2).tobytes() for p in [(), (0,), (1,), (0, 0)]}
    assert len(states) == 4  # the root's own stream is none of its children's


def _derivations(source: str) -> list[str]:
    """Places in ``source`` that derive a seed other than through :func:`child_seed`.

    Found: ``SeedSequence([...])`` or ``SeedSequence(..., spawn_key=...)``,
    ``default_rng([...])`` (an entropy list built by hand), ``.spawn(...)``,
    and ``seed + k`` / ``seed - k`` for a name containing "seed".
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            listed = any(isinstance(a, (ast.List, ast.Tuple)) for a in node.args)
            keyed = any(k.arg == "spawn_key" for k in node.keywords)
            if name in ("SeedSequence", "default_rng") and (listed or keyed):
                found.append(f"line {node.lineno}: {name}(...)")
            if name == "spawn" and isinstance(func, ast.Attribute):
                found.append(f"line {node.lineno}: .spawn(...)")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            for side in (node.left, node.right):
                ident = side.id if isinstance(side, ast.Name) else getattr(side, "attr", "")
                if "seed" in ident.lower():
                    found.append(f"line {node.lineno}: {ident} {type(node.op).__name__}")
    return found


@pytest.mark.parametrize(
    "planted",
    [
        "rng = np.random.default_rng(seed + 1)\n",
        "rng = np.random.default_rng([self.seed, 3])\n",
        "ss = np.random.SeedSequence([15, m, r])\n",
        "ss = np.random.SeedSequence(e, spawn_key=(1,))\n",
        "kids = np.random.SeedSequence(4).spawn(3)\n",
        "y = points(n, seed=args.seed - 2)\n",
    ],
)
def test_the_derivation_scan_finds_a_planted_derivation(planted):
    assert _derivations(planted), planted
    assert not _derivations("rng = np.random.default_rng(child_seed(root, 3))\n")


def test_no_module_derives_a_child_seed_but_through_child_seed():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        found = _derivations(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(PACKAGE.parent))] = found
    assert not offenders, offenders
