"""What every claim check shares: the entry record, sizes by level, inputs, statements.

A check module exposes ``CHECKS``, a tuple of :class:`Check` records in
claim order; :mod:`kernelcheck._src.claims.registry` builds the registry from
them.  A check is ``fn(level) -> (verdict, key number text, details)``, or
``fn(level, executor=None)`` when its entry says ``uses_executor`` (the Monte
Carlo and counterexample-search checks): :func:`engine_kwargs` turns the
executor into the ``executor=`` / ``shards=`` of the engine calls.

Every random input comes from a fixed seed (:func:`points`, :func:`qkv`), so
a check gives the same verdict and numbers at the same level in every run.

The scaling fits (``run_scaling``, ``geometric_sizes``, ``fit_exponent``) are
imported here once and re-exported to the checks that use them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.kernels.leaves import Exponential
from kernelcheck._src.mc.distributed import suggested_shards
from kernelcheck._src.scaling.experiment import run_scaling
from kernelcheck._src.scaling.fit import fit_exponent
from kernelcheck._src.scaling.sizes import geometric_sizes
from kernelcheck._src.verify.unbiased.api import unbiased

__all__ = [
    "Check",
    "pick",
    "points",
    "qkv",
    "statement",
    "all_verdict",
    "fmt",
    "agree",
    "first_sentence",
    "taylor_remainder_bound",
    "engine_kwargs",
    "unbiased_run",
    "relative_ci",
    "fit_exponent",
    "geometric_sizes",
    "run_scaling",
]


class Check(NamedTuple):
    """One registry entry: the claim id, its check and the library functions it calls.

    Attributes
    ----------
    id : str
        ``"C1"`` .. ``"C21"``.
    fn : callable
        ``fn(level)`` (or ``fn(level, executor=None)`` when ``uses_executor``)
        returning ``(verdict, key number text, details)``.
    checked_by : tuple of str
        The library functions the check calls (for the documentation).
    uses_executor : bool
        True for the checks that run Monte Carlo trials or a search on an executor.
    """

    id: str
    fn: Callable[..., tuple[Outcome, str, dict]]
    checked_by: tuple[str, ...]
    uses_executor: bool = False


def pick(level: str, quick, default, thorough):
    """The value for ``level`` (one of ``quick``, ``default``, ``thorough``)."""
    return {"quick": quick, "default": default, "thorough": thorough}[level]


def points(seed: int, n: int, d: int, scale: float = 1.0) -> np.ndarray:
    """``n`` standard normal points in ``d`` dimensions times ``scale``, from ``seed``."""
    return scale * np.random.default_rng(seed).standard_normal((n, d))


def qkv(seed: int, n: int, d: int, d_v: int, scale: float = 1.0):
    """Queries and keys (``n x d``, times ``scale``) and values (``n x d_v``) from ``seed``."""
    rng = np.random.default_rng(seed)
    return (
        scale * rng.standard_normal((n, d)),
        scale * rng.standard_normal((n, d)),
        rng.standard_normal((n, d_v)),
    )


def statement(text: str, ok: bool | None | str, evidence: str) -> dict:
    """A sub-statement of a claim: ok True / False / None (inconclusive) / "not run"."""
    if isinstance(ok, str):
        verdict = ok
    else:
        verdict = "inconclusive" if ok is None else ("verified" if ok else "refuted")
    return {"statement": text, "verdict": verdict, "evidence": evidence}


def all_verdict(statements: list[dict]) -> Outcome:
    """Refuted if a sub-statement is, else inconclusive if one is, else verified."""
    verdicts = {s["verdict"] for s in statements}
    if "refuted" in verdicts:
        return Outcome.REFUTED
    if "inconclusive" in verdicts:
        return Outcome.INCONCLUSIVE
    return Outcome.VERIFIED


def fmt(x: float, digits: int = 2) -> str:
    """Format a number for a key-number text: ``2e-16``, ``0.31``, ``1.2e+03``."""
    x = float(x)
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def agree(label: str, out, ref, tol) -> tuple[dict, float]:
    """A statement "out = ref": both forms within their error bound of the exact value.

    ``tol`` bounds each form's distance from the exact value, so the two
    computed forms differ by at most ``2 tol`` (triangle inequality).
    """
    err = np.abs(out - ref)
    ratio = float((err / (2.0 * tol)).max())
    row = statement(
        label, bool((err <= 2.0 * tol).all()), f"max |error| {fmt(err.max())}, {fmt(ratio)} x 2 tol"
    )
    return row, ratio


def first_sentence(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def taylor_remainder_bound(s, order: int):
    """|exp(s) - T_M(s)| <= |s|^(M+1) e^max(s,0) / (M+1)! (Lagrange remainder, C12)."""
    s = np.asarray(s, dtype=float)
    return np.abs(s) ** (order + 1) * np.exp(np.maximum(s, 0.0)) / math.factorial(order + 1)


def engine_kwargs(executor: Any) -> dict:
    """``executor=`` and ``shards=`` for the engine calls of a check (empty in-process)."""
    if executor is None:
        return {}
    return {"executor": executor, "shards": suggested_shards(executor)}


def unbiased_run(
    features: Any,
    *,
    d: int,
    m: int,
    X,
    Y,
    trials: int,
    seed: int,
    orthogonal: bool = False,
    executor: Any = None,
):
    """``verify.unbiased`` of the random ``features`` class against exp(x.y) (C13, C17, C18)."""
    sampler = features.sampler(d, m, orthogonal=orthogonal)
    return unbiased(
        sampler,
        Exponential(),
        X,
        Y,
        trials=trials,
        seed=seed,
        progress=False,
        **engine_kwargs(executor),
    )


def relative_ci(report) -> tuple[float, float]:
    """Smallest lower and largest upper end of the pairs' relative-bias intervals."""
    lows = [(p.ci_low - p.target) / abs(p.target) for p in report.pairs if p.target != 0]
    highs = [(p.ci_high - p.target) / abs(p.target) for p in report.pairs if p.target != 0]
    return min(lows), max(highs)
