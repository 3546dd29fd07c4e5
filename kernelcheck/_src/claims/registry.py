"""The claims registry: one entry per claim of the essay (C1..C20) with the check that decides it.

The registry is the single place the ``kernelcheck essay`` report, the command
line and the documentation read claims from.  Each :class:`Claim` carries its
id, a few words, the full statement (from the project's ``CLAIMS.md``), its
group (the section of the essay) and a ``check(level)`` function.  A check
*calls* the library's verifiers, attention forms, PSD ladder, Monte Carlo
engine and scaling fits: it never re-implements one, and it returns a
:class:`ClaimResult` with a verdict, the key measured number as text and a
JSON-ready ``details`` dict.

Levels trade time for evidence:

* ``"quick"``: small inputs and few trials; the whole essay runs in under 30 s;
* ``"default"``: the sizes of the report (under 3 minutes on 2 cores);
* ``"thorough"``: larger inputs and more Monte Carlo trials.

Every check is deterministic: its random inputs come from fixed seeds, so two
runs at the same level give the same verdicts and numbers (timings aside).
"""

from __future__ import annotations

import contextvars
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.core.results import ResultMixin, to_jsonable
from kernelcheck._src.core.validate import check_callable, check_choice, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "LEVELS",
    "GROUPS",
    "ClaimVerdict",
    "ClaimResult",
    "Claim",
    "STATEMENTS",
    "registry",
    "get_claim",
    "run_claims",
    "property_tests",
]

#: Executor for the Monte Carlo and counterexample-search checks, set by
#: ``run_claims(executor=...)`` for the duration of a run (None: in-process).
#: A contextvar, so concurrent runs in threads do not see each other's.
_EXECUTOR: contextvars.ContextVar = contextvars.ContextVar("kernelcheck_executor", default=None)


def _executor_kwargs() -> dict:
    """``executor=`` and ``shards=`` for the engine calls of a check (empty in-process)."""
    ex = _EXECUTOR.get()
    if ex is None:
        return {}
    from kernelcheck._src.mc.distributed import suggested_shards

    return {"executor": ex, "shards": suggested_shards(ex)}


#: The check levels, from fastest to most thorough.
LEVELS = ("quick", "default", "thorough")

#: Claim groups, in essay order: (slug, title, claim ids).
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("attention-and-cost", "Attention and its cost", ("C1", "C2", "C3")),
    ("kernels", "Kernels", ("C4", "C5", "C6", "C7", "C8", "C9")),
    ("attention-with-kernels", "Attention with kernels", ("C10", "C11", "C12", "C13")),
    ("recurrence", "The recurrence", ("C14", "C15")),
    ("beyond-the-essay", "Beyond the essay", ("C16", "C17", "C18")),
    ("recurrence-today", "The recurrence, as users build it today", ("C19", "C20")),
)


#: The verdict of a claim check: the one outcome vocabulary of kernelcheck
#: (``verified``, ``refuted``, ``inconclusive``; see
#: :class:`~kernelcheck._src.core.results.Outcome`).
ClaimVerdict = Outcome


@dataclass(frozen=True)
class ClaimResult(ResultMixin):
    """The outcome of one claim's check.

    Attributes
    ----------
    claim : str
        The claim id, ``"C1"`` .. ``"C20"``.
    verdict : ClaimVerdict
        verified, refuted or inconclusive.
    key_number : str
        The measured number behind the verdict, as a short text
        (e.g. ``"min eigenvalue -2e-16 >= -tol 4e-13"``).
    details : dict
        JSON-ready evidence: the numbers, tolerances and their sources, the
        sub-statements checked (``details["statements"]``: a list of dicts with
        ``statement``, ``verdict``, ``evidence``) and optional plot data
        (``details["plot"]``).
    duration : float
        Wall-clock seconds the check took.
    level : str
        The level it ran at.

    Examples
    --------
    >>> r = ClaimResult("C7", ClaimVerdict.VERIFIED, "max error 0 <= tol 1e-15", {}, 0.01)
    >>> r.passed
    True
    >>> str(r)
    'C7 verified: max error 0 <= tol 1e-15 (0.01 s)'
    """

    claim: str
    verdict: ClaimVerdict
    key_number: str
    details: dict = field(default_factory=dict)
    duration: float = 0.0
    level: str = "default"

    @property
    def passed(self) -> bool:
        """True when the verdict is ``verified``."""
        return self.verdict is ClaimVerdict.VERIFIED

    @property
    def outcome(self) -> Outcome:
        """The verdict (already in the one outcome vocabulary)."""
        return self.verdict

    def __str__(self) -> str:
        return f"{self.claim} {self.verdict.value}: {self.key_number} ({self.duration:.2g} s)"


@dataclass(frozen=True)
class Claim:
    """One claim of the essay and the check that decides it.

    Attributes
    ----------
    id : str
        ``"C1"`` .. ``"C20"``.
    title : str
        The claim in a few words (the essay table's second column).
    statement : str
        The full statement.
    group : str
        The slug of its group in :data:`GROUPS`.
    check_fn : callable
        ``check_fn(level) -> (verdict, key_number, details)``; wrapped by
        :meth:`check`, which adds the timing.
    checked_by : tuple of str
        The library functions the check calls (for the documentation).
    properties : tuple of str
        The property tests (``file::name``) that test the claim over generated
        inputs (see :func:`property_tests`).
    """

    id: str
    title: str
    statement: str
    group: str
    check_fn: Callable[[str], tuple[ClaimVerdict, str, dict]] = field(repr=False, compare=False)
    checked_by: tuple[str, ...] = ()
    properties: tuple[str, ...] = ()

    def check(self, level: str = "default") -> ClaimResult:
        """Run the check at ``level`` (one of :data:`LEVELS`) and time it.

        Returns
        -------
        ClaimResult
        """
        check_choice(level, "level", LEVELS)
        start = time.perf_counter()
        verdict, key, details = self.check_fn(level)
        duration = time.perf_counter() - start
        return ClaimResult(
            claim=self.id,
            verdict=ClaimVerdict(verdict),
            key_number=key,
            details=to_jsonable(details),
            duration=duration,
            level=level,
        )


#: Every claim's (title, statement), whether or not its check is registered yet.
STATEMENTS: dict[str, tuple[str, str]] = {
    "C1": (
        "softmax attention is a weighted average",
        "A = softmax(Q K^T / sqrt d) V: each row a_i = sum_j w_ij v_j with w_ij >= 0 and "
        "sum_j w_ij = 1, so a_i lies in the convex hull of the v_j (j <= i when causal).",
    ),
    "C2": (
        "exact attention costs O(n^2 d)",
        "Exact attention costs O(n d) per token and O(n^2 d) per sequence.",
    ),
    "C3": (
        "linear attention costs O(n d)",
        "Linear attention costs O(d) per token (independent of n) and O(n d) per sequence "
        "(O(D d_v) per token for feature dimension D).",
    ),
    "C4": (
        "a kernel is an inner product of features",
        "kappa is a kernel iff kappa(x, x') = <phi(x), phi(x')> for some phi into a Hilbert space.",
    ),
    "C5": (
        "kernels are PSD (Theorem 1)",
        "For every finite point set and every v, sum_ij v_i v_j kappa(x_i, x_j) >= 0: "
        "Gram matrices of kernels are positive semi-definite.",
    ),
    "C6": (
        "symmetric PSD functions are kernels (Theorem 2)",
        "A PSD Gram matrix M = U Lambda U^T factors as M = Phi^T Phi with "
        "Phi = Lambda^(1/2) U^T: the columns of Phi are features reproducing M.",
    ),
    "C7": ("linear kernel: phi(x) = x", "The linear kernel x.x' has the feature map phi(x) = x."),
    "C8": (
        "polynomial kernel feature maps",
        "(x.x')^m has phi(x) = x (tensor) ... (tensor) x with d^m coordinates; the map of unique "
        "degree-m monomials has C(d+m-1, m) coordinates and needs the weights "
        "sqrt(m! / alpha!), without which it is wrong.",
    ),
    "C9": (
        "exp(x.y) is a kernel with infinite features",
        "exp(x.x') = sum_m (x.x')^m / m! is a positive-weighted sum of PSD kernels, hence a "
        "kernel, with the infinite feature map [1, x, x(x)x / sqrt(2!), ...].",
    ),
    "C10": (
        "kernelized attention factorizes",
        "a_i = sum_j kappa(q_i, k_j) v_j / sum_j kappa(q_i, k_j) = phi(q_i)^T S / phi(q_i)^T z "
        "with S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j); exp(q.k / sqrt d) = "
        "SM(q / d^(1/4), k / d^(1/4)).",
    ),
    "C11": (
        "running sums: per-token work independent of n",
        "S_t = S_{t-1} + phi(k_t) v_t^T and z_t = z_{t-1} + phi(k_t): the state and the work "
        "per new token do not depend on n.",
    ),
    "C12": (
        "truncated Taylor maps: bound and sign",
        "The order-M Taylor map of exp is a valid kernel for every M, with error at most "
        "|s|^(M+1) e^max(s,0) / (M+1)!; even M gives positive kernel values, odd M does not, so "
        "normalisers can be zero or negative.",
    ),
    "C13": (
        "Performer positive features are unbiased",
        "phi(x) = m^(-1/2) [exp(w_i.x - ||x||^2 / 2)]_i with w_i ~ N(0, I) gives "
        "E[phi(x).phi(x')] = exp(x.x').",
    ),
    "C14": (
        "linear attention is a recurrence",
        "The recurrence over the state (S_t, z_t) with output S_t^T phi(q_t) / z_t.phi(q_t) "
        "equals the causal parallel form.",
    ),
    "C15": (
        "linear attention converges to softmax",
        "As the Taylor order M (or the number of random features m) grows, linear attention "
        "converges to softmax attention.",
    ),
    "C16": (
        "ratio of unbiased estimates is biased",
        "Performer attention outputs carry a bias of order 1/m although numerator and "
        "denominator are unbiased.",
    ),
    "C17": (
        "random-feature MSE matches closed form",
        "Random-feature estimators have closed-form mean squared errors (Choromanski et al. "
        "2021); positive features beat trigonometric ones where the kernel value is small.",
    ),
    "C18": (
        "orthogonal features: unbiased, no more MSE",
        "Orthogonal random features stay unbiased and do not raise the mean squared error.",
    ),
    "C19": (
        "unnormalised attention is the same recurrence",
        "Unnormalised linear attention y_t = S_t^T phi(q_t) (S_t = S_{t-1} + phi(k_t) v_t^T): "
        "its recurrent, parallel and chunked forms agree, and a state handed over at any cut "
        "point gives the same outputs and final state as one pass.",
    ),
    "C20": (
        "the gated recurrence is decayed attention",
        "S_t = g_t S_{t-1} + phi(k_t) v_t^T with g_t in (0, 1] equals parallel attention with "
        "weights phi(q_i).phi(k_j) prod_{l=j+1..i} g_l (j <= i); its chunked form agrees with "
        "both, and g = 1 gives C14/C19.",
    ),
}

_GROUP_OF = {cid: slug for slug, _title, ids in GROUPS for cid in ids}


@dataclass(frozen=True)
class _Entry:
    id: str
    fn: Callable[[str], tuple[ClaimVerdict, str, dict]]
    requires: tuple[str, ...]
    checked_by: tuple[str, ...]
    title: str | None = None


_ENTRIES: list[_Entry] = []


def _register(
    cid: str,
    *,
    requires: Iterable[str],
    checked_by: Iterable[str],
    title: str | None = None,
) -> Callable:
    """Decorator: register ``fn`` as the check of ``cid``.

    ``requires`` lists ``"module:attribute"`` capabilities; the claim is in the
    registry only when all of them import (a capability still being built
    leaves its claim out instead of breaking the essay).
    """

    def deco(fn):
        _ENTRIES.append(_Entry(cid, fn, tuple(requires), tuple(checked_by), title))
        return fn

    return deco


def _available(requirement: str) -> bool:
    import importlib

    module, _, attr = requirement.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    obj: Any = mod
    for part in filter(None, attr.split(".")):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _claim_key(cid: str) -> int:
    return int(cid[1:])


_TEST_NAME = re.compile(r"^def (test_((?:c\d\d_)+)\w*)\(", re.MULTILINE)


def property_tests(root: str | Path | None = None) -> dict[str, tuple[str, ...]]:
    """Property tests per claim, read from the names in ``properties/*.py``.

    A property test opens its name with the ids of the claims it checks
    (``test_c09_c12_...`` checks C9 and C12); this scans a source checkout's
    ``properties/`` folder (default: the one beside the package) and returns
    ``{"C9": ("properties/test_x.py::test_c09_c12_...", ...), ...}``.  An
    installed package without the folder gives an empty dict.
    """
    base = Path(root) if root is not None else Path(__file__).resolve().parents[3]
    folder = base / "properties"
    found: dict[str, list[str]] = {}
    if not folder.is_dir():
        return {}
    for path in sorted(folder.glob("test_*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in _TEST_NAME.finditer(text):
            name, prefix = m.group(1), m.group(2)
            for num in re.findall(r"c(\d\d)_", prefix):
                cid = f"C{int(num)}"
                found.setdefault(cid, []).append(f"properties/{path.name}::{name}")
    return {cid: tuple(v) for cid, v in found.items()}


def registry() -> dict[str, Claim]:
    """The registered claims, in order C1..C20 (a claim whose capability is missing is absent).

    Returns
    -------
    dict
        ``{"C1": Claim, ...}``; a fresh dict, so the caller may filter it.

    Examples
    --------
    >>> from kernelcheck.claims import registry
    >>> all(cid.startswith("C") for cid in registry())
    True
    """
    claims = []
    props = property_tests()
    for entry in _ENTRIES:
        if not all(_available(req) for req in entry.requires):
            continue
        default_title, statement = STATEMENTS[entry.id]
        claims.append(
            Claim(
                id=entry.id,
                title=entry.title or default_title,
                statement=statement,
                group=_GROUP_OF[entry.id],
                check_fn=entry.fn,
                checked_by=entry.checked_by,
                properties=props.get(entry.id, ()),
            )
        )
    claims.sort(key=lambda c: _claim_key(c.id))
    return {c.id: c for c in claims}


def get_claim(claim_id: str) -> Claim:
    """The registered claim with id ``claim_id`` (case-insensitive, e.g. ``"c5"``).

    Raises
    ------
    InvalidArgument
        When no claim has that id, or its check is not registered.
    """
    if not isinstance(claim_id, str):
        raise InvalidArgument(f"`claim_id` must be a string like 'C5', got {claim_id!r}")
    cid = claim_id.strip().upper()
    claims = registry()
    if cid not in claims:
        if cid in STATEMENTS:
            raise InvalidArgument(f"`claim_id` {cid} has no registered check")
        raise InvalidArgument(f"`claim_id` must be one of {', '.join(claims)}; got {claim_id!r}")
    return claims[cid]


def _claim_ids_iv(claim_ids: Any) -> list[str] | None:
    """Check a list of claim ids up front; the canonical ids (``"c5"`` -> ``"C5"``), or None.

    A string is refused (it would be read letter by letter), as is an empty
    list (a verdict on no claim); None means every registered claim.
    """
    if claim_ids is None:
        return None
    if isinstance(claim_ids, (str, bytes)) or not hasattr(claim_ids, "__iter__"):
        raise InvalidArgument(
            f"`claim_ids` must be a list of claim ids such as ['C1', 'C5'], got "
            f"{describe(claim_ids)}"
        )
    ids = []
    for i, cid in enumerate(claim_ids):
        try:
            ids.append(get_claim(cid).id)
        except InvalidArgument as exc:
            raise InvalidArgument(str(exc).replace("`claim_id`", f"`claim_ids[{i}]`", 1)) from None
    if not ids:
        raise InvalidArgument("`claim_ids` must name at least one claim (None runs every claim)")
    return ids


def run_claims(
    claim_ids: Iterable[str] | None = None,
    level: str = "default",
    *,
    on_result: Callable[[ClaimResult], Any] | None = None,
    executor: Any = None,
) -> list[ClaimResult]:
    """Run the checks of ``claim_ids`` (default: every registered claim) at ``level``.

    A check that raises is reported as ``inconclusive`` with the error in its
    details, so one broken check does not hide the others.  ``KeyboardInterrupt``
    propagates.

    Parameters
    ----------
    claim_ids : iterable of str, optional
        Ids such as ``["C1", "C5"]`` (at least one; checked before any check
        runs).  A bare string is refused: it would be read letter by letter.
    level : {"quick", "default", "thorough"}
    on_result : callable, optional
        Called with each :class:`ClaimResult` as soon as it is known
        (progress); an exception it raises becomes :class:`InvalidArgument`.
    executor : concurrent.futures.Executor, optional
        Runs the Monte Carlo trials (C13, C16, C17, C18) and the counterexample
        search (C5) on it, e.g. ``kernelcheck.distributed.dask_executor()``.
        The verdicts and numbers are identical to an in-process run.

    Returns
    -------
    list of ClaimResult
        In claim order.
    """
    check_choice(level, "level", LEVELS)
    claim_ids = _claim_ids_iv(claim_ids)
    if on_result is not None:
        check_callable(on_result, "on_result")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise InvalidArgument(
            "`executor` must be a concurrent.futures.Executor (an object with submit)"
        )
    token = _EXECUTOR.set(executor)
    try:
        return _run_claims(claim_ids, level, on_result)
    finally:
        _EXECUTOR.reset(token)


def _run_claims(claim_ids, level, on_result) -> list[ClaimResult]:
    if claim_ids is None:
        claims = list(registry().values())
    else:
        claims = [get_claim(cid) for cid in claim_ids]
        claims.sort(key=lambda c: _claim_key(c.id))
    results = []
    for claim in claims:
        start = time.perf_counter()
        try:
            result = claim.check(level)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # reported, not hidden: the verdict says it could not decide
            result = ClaimResult(
                claim=claim.id,
                verdict=ClaimVerdict.INCONCLUSIVE,
                key_number=f"check failed: {type(exc).__name__}: {_first_line(exc)}",
                details={"error": f"{type(exc).__name__}: {exc}"},
                duration=time.perf_counter() - start,
                level=level,
            )
        results.append(result)
        if on_result is not None:
            try:
                on_result(result)
            except (KeyboardInterrupt, SystemExit, InvalidArgument):
                raise
            except Exception as exc:
                raise InvalidArgument(f"`on_result` raised {type(exc).__name__}: {exc}") from exc
    return results


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def fmt(x: float, digits: int = 2) -> str:
    """Format a number for a key-number text: ``2e-16``, ``0.31``, ``1.2e+03``."""
    x = float(x)
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


# ---------------------------------------------------------------------------
# Checks.  Each returns (verdict, key number text, details); sizes by level.

V = ClaimVerdict


def _pick(level: str, quick, default, thorough):
    return {"quick": quick, "default": default, "thorough": thorough}[level]


def _points(seed: int, n: int, d: int, scale: float = 1.0):
    import numpy as np

    return scale * np.random.default_rng(seed).standard_normal((n, d))


def _statement(statement: str, ok: bool | None | str, evidence: str) -> dict:
    """A sub-statement of a claim: ok True / False / None (inconclusive) / "not run"."""
    if isinstance(ok, str):
        verdict = ok
    else:
        verdict = "inconclusive" if ok is None else ("verified" if ok else "refuted")
    return {"statement": statement, "verdict": verdict, "evidence": evidence}


def _all_verdict(statements: list[dict]) -> ClaimVerdict:
    verdicts = {s["verdict"] for s in statements}
    if "refuted" in verdicts:
        return V.REFUTED
    if "inconclusive" in verdicts:
        return V.INCONCLUSIVE
    return V.VERIFIED


def _finite_examples():
    """Kernels with finite feature spaces used by C4 (leaves and every combinator)."""
    from kernelcheck import kernels as K

    return [
        K.Linear(),
        K.Constant(2.0),
        K.Polynomial(2),
        K.Polynomial(3, c=1.0),
        0.5 * K.Polynomial(2) + K.Linear(),
        K.Linear() * K.Polynomial(2, c=0.5),
        K.Linear() ** 3,
        K.exp(K.Linear(), order=3),
        K.exp(0.5 * K.Linear(), order=4) + K.Constant(1.0),
    ]


@_register(
    "C4",
    requires=("kernelcheck.kernels:Linear", "kernelcheck.verify:feature_map"),
    checked_by=("kernelcheck.verify.feature_map", "Kernel.features"),
)
def _check_c4(level: str):
    """Every finite kernel of the algebra equals the inner product of its exact features."""
    from kernelcheck import verify

    n, d = _pick(level, (12, 3), (40, 4), (120, 5))
    X = _points(4, n, d, 0.7)
    Y = _points(5, n + 3, d, 0.7)
    rows, worst = [], 0.0
    for k in _finite_examples():
        for form in ("symmetric", "tensor"):
            rep = verify.feature_map(k.features(form), X, Y)
            worst = max(worst, rep.worst_ratio)
            rows.append(
                _statement(
                    f"{k!r} = <phi(x), phi(y)> ({form}, D = {rep.D})",
                    rep.passed,
                    f"max |error| {fmt(rep.max_abs_error)}, {fmt(rep.worst_ratio)} x tol",
                )
            )
    verdict = _all_verdict(rows)
    key = f"{len(rows)} kernel/form pairs: worst error {fmt(worst)} x tolerance"
    return verdict, key, {"n": n, "m": n + 3, "d": d, "statements": rows}


@_register(
    "C7",
    requires=("kernelcheck.kernels:Linear", "kernelcheck.verify:feature_map"),
    checked_by=("kernelcheck.verify.feature_map", "Linear.features"),
)
def _check_c7(level: str):
    """phi(x) = x for the linear kernel: the map returns its input and reproduces x.y."""
    import numpy as np

    from kernelcheck import kernels as K
    from kernelcheck import verify

    n, d = _pick(level, (16, 3), (64, 8), (256, 16))
    X = _points(7, n, d)
    phi = K.Linear().features()
    identical = bool(np.array_equal(phi(X), X))
    rep = verify.feature_map(phi, X)
    rows = [
        _statement("phi(x) = x (bit for bit)", identical, f"phi(X) == X on {n} x {d} points"),
        _statement("x.y = phi(x).phi(y)", rep.passed, str(rep)),
    ]
    key = (
        f"phi(X) == X exactly; max |error| {fmt(rep.max_abs_error)} "
        f"<= tol {fmt(rep.tolerance.value)}"
    )
    return _all_verdict(rows), key, {"report": rep.to_dict(), "statements": rows}


@_register(
    "C8",
    requires=(
        "kernelcheck.kernels:Polynomial",
        "kernelcheck.kernels:unweighted_monomials",
        "kernelcheck.verify:feature_map",
    ),
    checked_by=(
        "kernelcheck.verify.feature_map",
        "Polynomial.features",
        "kernelcheck.kernels.unweighted_monomials",
        "kernelcheck.kernels.monomial_dim",
    ),
)
def _check_c8(level: str):
    """Both feature maps of (x.y)^m, their dimensions, and the unweighted map's failure.

    Verified means: the tensor map (d^m coordinates) and the weighted
    unique-monomial map (C(d+m-1, m) coordinates) reproduce the kernel, and
    the unweighted monomial map does not (for d, m >= 2), as CLAIMS.md states.
    """
    import itertools
    import math

    from kernelcheck import kernels as K
    from kernelcheck import verify

    grid = _pick(
        level,
        [(2, 2), (3, 3)],
        [(2, 2), (3, 2), (3, 3), (4, 3), (5, 4)],
        [(2, 2), (3, 2), (3, 3), (4, 3), (5, 4), (6, 4), (4, 6)],
    )
    n = _pick(level, 10, 30, 80)
    tensor_ok = sym_ok = True
    unweighted_wrong = True
    dims_ok = True
    unweighted_worst = math.inf
    rows = []
    for d, m in grid:
        X = _points(80 + d + 10 * m, n, d, 0.8)
        k = K.Polynomial(m)
        t = verify.feature_map(k.features("tensor"), X)
        s = verify.feature_map(k.features("symmetric"), X)
        # Independent count of unique monomials: distinct multisets of variable indices.
        unique = len({tuple(sorted(c)) for c in itertools.product(range(d), repeat=m)})
        dims = (
            t.D == d**m
            and s.D == unique == math.comb(d + m - 1, m) == K.monomial_dim(d, m)
            and k.feature_dim(d, "tensor") == d**m
            and k.feature_dim(d, "symmetric") == unique
        )
        u = verify.feature_map(
            lambda Z, m=m: K.unweighted_monomials(Z, m), X, kernel=k, feature_ops=2 * m
        )
        tensor_ok &= t.passed
        sym_ok &= s.passed
        dims_ok &= dims
        unweighted_wrong &= not u.passed
        unweighted_worst = min(unweighted_worst, u.worst_ratio)
        rows.append(
            {
                "d": d,
                "m": m,
                "tensor_dim": t.D,
                "unique_monomials": unique,
                "tensor_passed": t.passed,
                "weighted_passed": s.passed,
                "unweighted_passed": u.passed,
                "unweighted_max_error": u.max_abs_error,
            }
        )
    dims_text = ", ".join(
        f"d={r['d']},m={r['m']}: {r['tensor_dim']} vs {r['unique_monomials']}" for r in rows
    )
    statements = [
        _statement(
            "tensor map x(x)...(x)x reproduces (x.y)^m with d^m coordinates",
            tensor_ok and dims_ok,
            f"{len(grid)} (d, m) pairs; dims {dims_text}",
        ),
        _statement(
            "weighted unique monomials sqrt(m!/alpha!) x^alpha reproduce (x.y)^m with "
            "C(d+m-1, m) coordinates",
            sym_ok and dims_ok,
            "verify.feature_map passed on every pair; dimension = count of distinct multisets",
        ),
        _statement(
            "unweighted unique monomials reproduce (x.y)^m (the essay's wording)",
            not unweighted_wrong,
            f"fails on every pair with d, m >= 2; smallest error {fmt(unweighted_worst)} x tol",
        ),
        _statement(
            "the unique-monomial map has d^m ('n^m') coordinates",
            all(r["tensor_dim"] == r["unique_monomials"] for r in rows),
            "C(d+m-1, m) < d^m for d, m >= 2: " + dims_text,
        ),
    ]
    holds = tensor_ok and sym_ok and dims_ok and unweighted_wrong
    key = (
        "holds: tensor d^m, weighted C(d+m-1,m); does not: unweighted monomials "
        f"({fmt(unweighted_worst)} x tol), 'n^m unique monomials'"
    )
    return (V.VERIFIED if holds else V.REFUTED), key, {"pairs": rows, "statements": statements}


def _taylor_remainder_bound(s, order: int):
    """|exp(s) - T_M(s)| <= |s|^(M+1) e^max(s,0) / (M+1)! (Lagrange remainder, C12)."""
    import numpy as np

    s = np.asarray(s, dtype=float)
    return np.abs(s) ** (order + 1) * np.exp(np.maximum(s, 0.0)) / math.factorial(order + 1)


def _scalar_taylor(order: int, s):
    """T_M evaluated by the library at the scalars ``s`` (x = s, y = 1 in d = 1)."""
    import numpy as np

    from kernelcheck import kernels as K

    k = K.exp(K.Linear(), order=order)
    x = np.asarray(s, dtype=float)[:, None]
    one = np.ones((1, 1))
    return k(x, one)[:, 0], k.error_bound(x, one)[:, 0]


@_register(
    "C12",
    requires=("kernelcheck.kernels:exp", "kernelcheck.verify:feature_map"),
    checked_by=(
        "kernelcheck.kernels.exp(k, order=M)",
        "kernelcheck.verify.feature_map",
        "Kernel.error_bound",
    ),
)
def _check_c12(level: str):
    """Taylor maps are kernels; the remainder bound holds; the sign of T_M by parity of M."""
    import numpy as np

    from kernelcheck import kernels as K
    from kernelcheck import verify

    orders = _pick(level, range(0, 5), range(0, 9), range(0, 13))
    n, d = _pick(level, (12, 3), (40, 4), (100, 6))
    X = _points(12, n, d, 0.6)
    Y = _points(13, n, d, 0.6)
    exact = K.Exponential()(X, Y)
    exact_err = K.Exponential().error_bound(X, Y)
    s = K.Linear()(X, Y)
    s_err = K.Linear().error_bound(X, Y)
    maps_ok, bound_ok, tightness = True, True, []
    max_err, max_bound = [], []
    for M in orders:
        kM = K.exp(K.Linear(), order=M)
        maps_ok &= verify.feature_map(kM.features(), X, Y).passed
        err = np.abs(kM(X, Y) - exact)
        # The remainder at the computed s, widened by s's own rounding bound.
        bound = _taylor_remainder_bound(np.abs(s) + s_err, M)
        allowed = bound + kM.error_bound(X, Y) + exact_err
        bound_ok &= bool((err <= allowed).all())
        tightness.append(float((err / allowed).max()))
        max_err.append(float(err.max()))
        max_bound.append(float(bound.max()))
    grid = np.linspace(-12.0, 12.0, _pick(level, 241, 961, 4801))
    even_min, odd_witness = [], []
    for M in orders:
        if M == 0:
            continue
        T, E = _scalar_taylor(M, grid)
        if M % 2 == 0:
            even_min.append((M, float(T.min()), bool((T - E > 0).all())))
        else:
            # The largest s with T_M(s) <= 0 even after its rounding bound: near the root.
            bad = np.flatnonzero(T + E <= 0)
            i = int(bad[-1]) if bad.size else int(np.argmin(T))
            odd_witness.append((M, float(grid[i]), float(T[i]), bool(T[i] + E[i] <= 0)))
    even_ok = all(ok for _m, _v, ok in even_min)
    odd_ok = all(ok for *_rest, ok in odd_witness)
    m1 = next(w for w in odd_witness if w[0] == 1)
    statements = [
        _statement(
            "the order-M Taylor map reproduces T_M (so T_M is a kernel) for every M",
            maps_ok,
            f"M = {min(orders)}..{max(orders)}, verify.feature_map on {n} x {n} pairs",
        ),
        _statement(
            "|exp(s) - T_M(s)| <= |s|^(M+1) e^max(s,0) / (M+1)!",
            bound_ok,
            f"largest error / (bound + rounding) {fmt(max(tightness))} over M and {n * n} pairs",
        ),
        _statement(
            "even M: T_M(s) > 0 for every s",
            even_ok,
            "min over s in [-12, 12]: " + ", ".join(f"T_{M} {fmt(v)}" for M, v, _ in even_min),
        ),
        _statement(
            "odd M: T_M(s) <= 0 for some s (normalisers can vanish or turn negative)",
            odd_ok,
            ", ".join(f"T_{M}({fmt(x)}) = {fmt(v)}" for M, x, v, _ in odd_witness),
        ),
    ]
    key = (
        f"remainder bound holds (error <= {fmt(max(tightness))} x bound); "
        f"odd M: T_1({fmt(m1[1])}) = {fmt(m1[2])} < 0; even M: min T_M > 0"
    )
    return (
        _all_verdict(statements),
        key,
        {
            "orders": list(orders),
            "error_over_bound": tightness,
            "max_error": max_err,
            "max_bound": max_bound,
            "statements": statements,
            "plot": {
                "title": "Taylor remainder: error and bound",
                "xlabel": "order M",
                "ylabel": "max over pairs",
                "yscale": "log",
                "series": [
                    {"label": "|exp(s) - T_M(s)|", "x": list(orders), "y": max_err},
                    {
                        "label": "remainder bound",
                        "x": list(orders),
                        "y": max_bound,
                        "style": "dashed",
                    },
                ],
            },
        },
    )


# ----- attention (C1, C10, C11, C14, C15) ------------------------------------


def _qkv(seed: int, n: int, d: int, d_v: int, scale: float = 1.0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return (
        scale * rng.standard_normal((n, d)),
        scale * rng.standard_normal((n, d)),
        rng.standard_normal((n, d_v)),
    )


@_register(
    "C1",
    requires=("kernelcheck.attention:softmax", "kernelcheck.attention:softmax_error_bound"),
    checked_by=("kernelcheck.attention.softmax", "kernelcheck.attention.softmax_error_bound"),
)
def _check_c1(level: str):
    """Softmax weights are non-negative and sum to one; outputs lie in the convex hull.

    The weights are read from the library's own softmax: with ``V = I_n`` the
    output *is* the weight matrix W.  Then ``A = W V`` is compared with the
    output for the real V, and each output coordinate is checked to lie
    between the smallest and largest value of the v_j it averages (j <= i when
    causal), every comparison within ``softmax_error_bound``.
    """
    import numpy as np

    from kernelcheck import attention as att
    from kernelcheck._src.core.rounding import matmul_error_bound

    n, d, d_v = _pick(level, (24, 4, 3), (96, 16, 8), (256, 32, 16))
    rows = []
    worst_sum, min_weight, hull_excess = 0.0, np.inf, -np.inf
    for causal in (False, True):
        for scale in (1.0, 30.0):  # 30: logits in the hundreds, the overflow regime
            Q, K, V = _qkv(100 + int(scale), n, d, d_v, scale)
            eye = np.eye(n)
            W = att.softmax(Q, K, eye, causal=causal)
            EW = att.softmax_error_bound(Q, K, eye, causal=causal)
            ones = att.softmax(Q, K, np.ones((n, 1)), causal=causal)[:, 0]
            E1 = att.softmax_error_bound(Q, K, np.ones((n, 1)), causal=causal)[:, 0]
            A = att.softmax(Q, K, V, causal=causal)
            EA = att.softmax_error_bound(Q, K, V, causal=causal)
            nonneg = bool((W >= -EW).all())
            masked = bool((np.triu(W, 1) == 0).all()) if causal else True
            sums = bool((np.abs(ones - 1.0) <= E1).all())
            mask = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
            lo = np.where(mask[:, :, None], V[None, :, :], np.inf).min(axis=1)
            hi = np.where(mask[:, :, None], V[None, :, :], -np.inf).max(axis=1)
            excess = np.maximum(lo - A, A - hi) - EA
            inside = bool((excess <= 0).all())
            # A = W V: the output is the weighted average with exactly these weights.
            # |fl(W V) - A| <= |fl(W V) - W V| + |W - W_exact| |V| + |A_exact - A|
            combo = np.abs(W @ V - A) <= EA + EW @ np.abs(V) + matmul_error_bound(W, V)
            worst_sum = max(worst_sum, float(np.abs(ones - 1.0).max()))
            min_weight = min(min_weight, float(W.min()))
            hull_excess = max(hull_excess, float((np.maximum(lo - A, A - hi)).max()))
            kind = "causal" if causal else "bidirectional"
            rows.append(
                _statement(
                    f"{kind}, logit scale {scale:g}: w_ij >= 0, rows sum to 1, "
                    "a_i = sum_j w_ij v_j in the hull of its v_j",
                    nonneg and masked and sums and inside and bool(combo.all()),
                    f"min w {fmt(W.min())}, max |sum - 1| {fmt(np.abs(ones - 1).max())} "
                    f"<= tol {fmt(E1.max())}",
                )
            )
    key = (
        f"min weight {fmt(min_weight)} >= 0; max |row sum - 1| {fmt(worst_sum)} <= tol; "
        f"outputs inside the hull (max excess {fmt(hull_excess)})"
    )
    return _all_verdict(rows), key, {"n": n, "d": d, "d_v": d_v, "statements": rows}


@_register(
    "C10",
    requires=(
        "kernelcheck.attention:kernelized",
        "kernelcheck.attention:parallel",
        "kernelcheck.attention:kernelized_error_bound",
        "kernelcheck.attention:linear_error_bound",
    ),
    checked_by=(
        "kernelcheck.attention.kernelized",
        "kernelcheck.attention.parallel",
        "kernelcheck.attention.softmax",
        "Kernel.features",
    ),
)
def _check_c10(level: str):
    """Kernelized attention = the factorized feature form; the 1/sqrt(d) scale identity."""
    import numpy as np

    from kernelcheck import attention as att
    from kernelcheck import kernels as K

    n, d, d_v = _pick(level, (20, 3, 2), (80, 4, 6), (200, 6, 8))
    Q, K_, V = _qkv(10, n, d, d_v, 0.5)
    examples = [
        K.exp(K.Linear(), order=2),
        K.Polynomial(2, c=1.0),
        K.exp(0.5 * K.Linear(), order=4) + K.Constant(0.5),
        K.Linear() ** 2 + K.Constant(1.0),
    ]
    rows, worst = [], 0.0
    for k in examples:
        phi = k.features()
        for causal in (False, True):
            exact = att.kernelized(Q, K_, V, k, causal=causal)
            fact = att.parallel(phi(Q), phi(K_), V, causal=causal)
            tol = att.kernelized_error_bound(Q, K_, V, k, causal=causal) + att.linear_error_bound(
                phi(Q), phi(K_), V, causal=causal
            )
            err = np.abs(exact - fact)
            ratio = float((err / tol).max())
            worst = max(worst, ratio)
            kind = "causal" if causal else "bidirectional"
            rows.append(
                _statement(
                    f"{k!r} ({kind}): sum_j kappa v_j / sum_j kappa = phi(q)^T S / phi(q)^T z",
                    bool((err <= tol).all()),
                    f"max |error| {fmt(err.max())}, {fmt(ratio)} x tol",
                )
            )
    # Scale identity: exp(q.k / sqrt d) = SM(q / d^(1/4), k / d^(1/4)).  With d = 16
    # and 256 the factor d^(-1/4) is a power of two, so scaling q and k is exact and
    # the two error models alone bound the difference.
    checks = []
    for dd in (16, 256):
        Qb, Kb, Vb = _qkv(11 + dd, n, dd, d_v, 1.0)
        s = dd**-0.25
        sm = att.softmax(Qb, Kb, Vb)
        via_exp = att.kernelized(Qb * s, Kb * s, Vb, K.Exponential())
        via_scale = att.kernelized(Qb, Kb, Vb, K.Exponential(scale=1.0 / math.sqrt(dd)))
        base = att.softmax_error_bound(Qb, Kb, Vb)
        tol = base + att.kernelized_error_bound(Qb * s, Kb * s, Vb, K.Exponential())
        tol2 = base + att.kernelized_error_bound(
            Qb, Kb, Vb, K.Exponential(scale=1.0 / math.sqrt(dd))
        )
        e1, e2 = np.abs(sm - via_exp), np.abs(sm - via_scale)
        checks.append((bool((e1 <= tol).all() and (e2 <= tol2).all()), max(e1.max(), e2.max())))
    e1, e2 = np.abs(sm - via_exp), np.abs(sm - via_scale)
    rows.append(
        _statement(
            "softmax(QK^T/sqrt d) V = kernelized attention with SM(q/d^(1/4), k/d^(1/4)) "
            "and with exp(q.k/sqrt d)",
            all(ok for ok, _ in checks),
            f"d = 16, 256: max |error| {fmt(max(e for _, e in checks))}",
        )
    )
    key = f"{len(examples)} kernels x 2 masks: worst error {fmt(worst)} x tol; scale identity holds"
    return _all_verdict(rows), key, {"n": n, "d": d, "d_v": d_v, "statements": rows}


@_register(
    "C11",
    requires=("kernelcheck.attention:recurrent", "kernelcheck.attention:cost_model"),
    checked_by=(
        "kernelcheck.attention.recurrent",
        "kernelcheck.attention.State",
        "kernelcheck.attention.cost_model",
    ),
)
def _check_c11(level: str):
    """The recurrent state (S, z) and the work per token do not depend on n."""
    from kernelcheck import attention as att
    from kernelcheck import kernels as K

    d, d_v = 4, 3
    lengths = _pick(level, (1, 8, 64), (1, 16, 256, 1024), (1, 16, 256, 4096))
    phi = K.exp(K.Linear(), order=2).features()
    D = phi.output_dim(d)
    sizes, per_token = [], []
    for n in lengths:
        Q, K_, V = _qkv(20 + n, n, d, d_v, 0.5)
        _out, state = att.recurrent(phi(Q), phi(K_), V, return_state=True)
        sizes.append(state.size)
        per_token.append(att.cost_model("recurrent", n, d, D, d_v).flops_per_token())
    expected = D * (d_v + 1)
    state_ok = all(s == expected for s in sizes)
    # flops per token: constant in n up to the one-off n d_v output term
    work_ok = max(per_token) == min(per_token)
    softmax_state = [
        att.cost_model("softmax", n, d, D, d_v, causal=True).state_size for n in lengths
    ]
    rows = [
        _statement(
            "the state (S, z) holds D (d_v + 1) numbers whatever n",
            state_ok,
            f"n = {', '.join(map(str, lengths))}: state sizes {sizes} (D = {D}, d_v = {d_v})",
        ),
        _statement(
            "the work per new token does not depend on n (cost model)",
            work_ok,
            f"flops per token {', '.join(fmt(p, 4) for p in per_token)}; the exact form's "
            f"key/value cache grows: {softmax_state}",
        ),
    ]
    key = f"state {sizes[0]} numbers for n = {lengths[0]}..{lengths[-1]}; flops/token constant"
    return _all_verdict(rows), key, {"state_sizes": sizes, "statements": rows}


@_register(
    "C14",
    requires=(
        "kernelcheck.attention:recurrent",
        "kernelcheck.attention:chunked",
        "kernelcheck.attention:linear_error_bound",
        "kernelcheck._src.features.random:PositiveRandomFeatures",
    ),
    checked_by=(
        "kernelcheck.attention.recurrent",
        "kernelcheck.attention.parallel",
        "kernelcheck.attention.chunked",
        "kernelcheck.attention.linear_error_bound",
    ),
)
def _check_c14(level: str):
    """The recurrence equals the causal parallel form and the chunked form (any chunk size)."""
    import numpy as np

    from kernelcheck import attention as att
    from kernelcheck import kernels as K

    n, d, d_v = _pick(level, (37, 3, 2), (301, 4, 8), (1500, 6, 16))
    Q, K_, V = _qkv(14, n, d, d_v, 0.5)
    rows, worst = [], 0.0
    from kernelcheck._src.features.random import PositiveRandomFeatures

    maps: list[tuple[str, Any]] = [
        ("Taylor order 2", K.exp(K.Linear(), order=2).features()),
        ("positive random features", PositiveRandomFeatures(d, 32, seed=14)),
    ]
    for name, phi in maps:
        pq, pk = phi(Q), phi(K_)
        ref = att.parallel(pq, pk, V, causal=True)
        tol = att.linear_error_bound(pq, pk, V, causal=True)
        rec = att.recurrent(pq, pk, V)
        outs = {"recurrent": rec}
        for c in (1, 7, 64, n):
            outs[f"chunked C={c}"] = att.chunked(pq, pk, V, chunk_size=c)
        for label, out in outs.items():
            err = np.abs(out - ref)
            ratio = float((err / tol).max())
            worst = max(worst, ratio)
            rows.append(
                _statement(
                    f"{label} = parallel causal ({name})",
                    bool((err <= tol).all()),
                    f"max |error| {fmt(err.max())}, {fmt(ratio)} x tol",
                )
            )
    key = f"recurrent = parallel = chunked (C = 1, 7, 64, n) on n = {n}: worst {fmt(worst)} x tol"
    return _all_verdict(rows), key, {"n": n, "statements": rows}


def _agree(label: str, out, ref, tol) -> tuple[dict, float]:
    """A statement "out = ref": both forms within their error bound of the exact value."""
    import numpy as np

    err = np.abs(out - ref)
    ratio = float((err / (2.0 * tol)).max())
    row = _statement(
        label, bool((err <= 2.0 * tol).all()), f"max |error| {fmt(err.max())}, {fmt(ratio)} x 2 tol"
    )
    return row, ratio


def _handover_rows(run, one_pass, state_tol, n: int, label: str) -> tuple[list[dict], float]:
    """Prefill with the chunked form, decode the rest with the recurrence, at several cuts.

    ``run(lo, hi, state, form)`` runs tokens ``lo:hi`` from ``state`` and
    returns ``(out, final state, tol)``; ``one_pass = (out, state, tol)``.
    """
    import numpy as np

    rows, worst = [], 0.0
    out1, state1, tol1 = one_pass
    for cut in sorted({1, n // 3, n - 1}):
        a, sa, ta = run(0, cut, None, "chunked")
        b, sb, tb = run(cut, n, sa, "recurrent")
        row, r = _agree(
            f"{label}: prefill {cut} tokens, decode {n - cut}: outputs = one pass",
            np.concatenate([a, b], axis=-2),
            out1,
            np.maximum(np.concatenate([ta, tb], axis=-2), tol1),
        )
        rows.append(row)
        serr = float(np.abs(sb.S - state1.S).max())
        rows.append(
            _statement(
                f"{label}: prefill {cut} tokens, decode {n - cut}: final state = one pass",
                serr <= 2.0 * state_tol,
                f"max |S difference| {fmt(serr)} <= 2 x {fmt(state_tol)}",
            )
        )
        worst = max(worst, r, serr / (2.0 * state_tol) if state_tol > 0 else 0.0)
    return rows, worst


def _state_tol(pk, V) -> float:
    """Bound on the rounding of ``S = sum_j d_j phi(k_j) v_j^T`` (decays d_j <= 1) in any order."""
    import numpy as np

    from kernelcheck._src.core.rounding import gamma

    n = pk.shape[-2]
    # 3n + 8 roundings per term cover the chunked, recurrent and decayed summation orders
    return float(gamma(3 * n + 8) * (np.abs(pk).T @ np.abs(V)).max())


@_register(
    "C19",
    requires=(),
    checked_by=(
        "kernelcheck.attention.recurrent",
        "kernelcheck.attention.parallel",
        "kernelcheck.attention.chunked",
        "kernelcheck.attention.linear_error_bound",
    ),
)
def _check_c19(level: str):
    """Unnormalised: recurrent = parallel = chunked; a hand-over at any cut = one pass."""
    from kernelcheck._src.attention import bounds, linear
    from kernelcheck._src.kernels.algebra import Linear, exp

    n, d, d_v = _pick(level, (37, 3, 2), (301, 4, 8), (1500, 6, 16))
    Q, K_, V = _qkv(19, n, d, d_v, 0.5)
    phi = exp(Linear(), order=2).features()
    pq, pk = phi(Q), phi(K_)
    tol = bounds.linear_error_bound(pq, pk, V, causal=True, normalize=False)
    ref = linear.parallel(pq, pk, V, causal=True, normalize=False)
    rec, state = linear.recurrent(pq, pk, V, normalize=False, return_state=True)
    rows, worst = [], 0.0
    outs = {"recurrent": rec}
    for c in (1, 7, 64, n):
        outs[f"chunked C={c}"] = linear.chunked(pq, pk, V, chunk_size=c, normalize=False)
    for label, out in outs.items():
        row, r = _agree(f"{label} = parallel causal, unnormalised", out, ref, tol)
        rows.append(row)
        worst = max(worst, r)

    def run(lo, hi, st, form):
        f = linear.chunked if form == "chunked" else linear.recurrent
        a, b, v = pq[lo:hi], pk[lo:hi], V[lo:hi]
        out, new = f(a, b, v, normalize=False, initial_state=st, return_state=True)
        t = bounds.linear_error_bound(a, b, v, causal=True, normalize=False, initial_state=st)
        return out, new, t

    more, w = _handover_rows(run, (rec, state, tol), _state_tol(pk, V), n, "state hand-over")
    rows += more
    worst = max(worst, w)
    key = f"unnormalised forms agree and hand over at 3 cuts, n = {n}: worst {fmt(worst)} x 2 tol"
    return _all_verdict(rows), key, {"n": n, "statements": rows}


@_register(
    "C20",
    requires=(),
    checked_by=(
        "kernelcheck.attention.gated_recurrent",
        "kernelcheck.attention.gated_parallel",
        "kernelcheck.attention.gated_chunked",
        "kernelcheck.attention.gated_error_bound",
    ),
)
def _check_c20(level: str):
    """Gated: recurrent = parallel (decayed weights) = chunked; hand-over; g = 1 is C14/C19."""
    import numpy as np

    from kernelcheck._src.attention import bounds, gated, linear
    from kernelcheck._src.kernels.algebra import Linear, exp

    n, d, d_v = _pick(level, (37, 3, 2), (301, 4, 8), (1500, 6, 16))
    Q, K_, V = _qkv(20, n, d, d_v, 0.5)
    phi = exp(Linear(), order=2).features()
    pq, pk = phi(Q), phi(K_)
    rng = np.random.default_rng(20)
    gate_sets = {
        "per-token gates in (0.3, 1)": rng.uniform(0.3, 1.0, size=n),
        "a constant decay 0.9 (retention)": np.full(n, 0.9),
        "gates within 1e-6 of 0": rng.uniform(1e-7, 1e-6, size=n),
        "gates within 1e-6 of 1": 1.0 - rng.uniform(0.0, 1e-6, size=n),
    }
    rows, worst = [], 0.0
    for gname, g in gate_sets.items():
        for normalize in (False, True):
            kind = "normalised" if normalize else "unnormalised"
            tol = bounds.gated_error_bound(pq, pk, V, g, normalize=normalize)
            ref = gated.gated_parallel(pq, pk, V, g, normalize=normalize)
            rec = gated.gated_recurrent(pq, pk, V, g, normalize=normalize)
            outs = {"recurrent": rec}
            for c in (1, 7, 64):
                outs[f"chunked C={c}"] = gated.gated_chunked(
                    pq, pk, V, g, chunk_size=c, normalize=normalize
                )
            for label, out in outs.items():
                row, r = _agree(f"{label} = parallel ({gname}, {kind})", out, ref, tol)
                rows.append(row)
                worst = max(worst, r)
    g = gate_sets["per-token gates in (0.3, 1)"]
    rec, state = gated.gated_recurrent(pq, pk, V, g, return_state=True)
    tol = bounds.gated_error_bound(pq, pk, V, g)

    def run(lo, hi, st, form):
        f = gated.gated_chunked if form == "chunked" else gated.gated_recurrent
        a, b, v, gg = pq[lo:hi], pk[lo:hi], V[lo:hi], g[lo:hi]
        out, new = f(a, b, v, gg, initial_state=st, return_state=True)
        return out, new, bounds.gated_error_bound(a, b, v, gg, initial_state=st)

    more, w = _handover_rows(run, (rec, state, tol), _state_tol(pk, V), n, "gated hand-over")
    rows += more
    worst = max(worst, w)
    for normalize in (False, True):
        plain = linear.chunked(pq, pk, V, normalize=normalize)
        ones = gated.gated_chunked(pq, pk, V, 1.0, normalize=normalize)
        tol = bounds.linear_error_bound(pq, pk, V, causal=True, normalize=normalize)
        claim = "C14" if normalize else "C19"
        row, r = _agree(f"g = 1 gives {claim} (gated chunked = chunked)", ones, plain, tol)
        rows.append(row)
        worst = max(worst, r)
    key = (
        f"gated forms agree for 4 gate regimes, hand over, reduce to C14/C19 at g = 1 (n = {n}): "
        f"worst {fmt(worst)} x 2 tol"
    )
    return _all_verdict(rows), key, {"n": n, "statements": rows}


# ----- cost (C2, C3) -------------------------------------------------------------

_SCALING_CACHE: dict[str, Any] = {}


def _scaling_run(level: str):
    """One scaling measurement per level, shared by C2 and C3 (None at ``quick``).

    ``default`` runs :func:`kernelcheck.scaling.run_scaling` on seven sizes
    sqrt(2) apart, n = 1024..8192, with 3 repeats (below n = 1024 fixed per-call costs
    bend the softmax times); ``thorough`` runs its full default grid
    (n = 1024..16384, 5 repeats).
    """
    if level == "quick":
        return None
    if level not in _SCALING_CACHE:
        from kernelcheck.scaling import run_scaling

        if level == "default":
            from kernelcheck.scaling import geometric_sizes

            sizes = geometric_sizes(1024, 8192, num=7)  # sqrt(2) apart: Sen's interval needs k >= 7
            report = run_scaling(sizes=sizes, repeats=3, seed=0)
        else:
            report = run_scaling(seed=0)
        _SCALING_CACHE[level] = report
    return _SCALING_CACHE[level]


def _model_exponent(form: str, causal: bool, sizes, d: int, D: int, d_v: int):
    """Exponent in n of the cost model's flops and of its flops per token (Theil-Sen)."""
    from kernelcheck import attention as att
    from kernelcheck.scaling import fit_exponent

    flops = [att.cost_model(form, n, d, D, d_v, 64, causal=causal).flops for n in sizes]
    per_token = [f / n for f, n in zip(flops, sizes, strict=True)]
    return fit_exponent(sizes, flops).slope, fit_exponent(sizes, per_token).slope


def _cost_claim(
    level: str, claim: str, forms, expected: tuple[float, float], per_seq: int, per_token: int
):
    sizes = (1024, 2048, 4096, 8192, 16384, 32768)
    d, D, d_v = 64, 256, 64
    rows = []
    model_slopes = []
    for form, causal in forms:
        slope, tok = _model_exponent(form, causal, sizes, d, D, d_v)
        model_slopes.append(slope)
        kind = "causal" if causal else "bidirectional"
        rows.append(
            _statement(
                f"{form} ({kind}): operation count ~ n^{per_seq} per sequence, "
                f"n^{per_token} per token (cost model)",
                abs(slope - per_seq) < 0.05 and abs(tok - per_token) < 0.05,
                f"flops exponent {slope:.3f}, per-token exponent {tok:.3f} over n = "
                f"{sizes[0]}..{sizes[-1]} (d = {d}, D = {D})",
            )
        )
    report = _scaling_run(level)
    measured = []
    plot = None
    if report is None:
        rows.append(
            _statement(
                "measured time exponent",
                "not run",
                "not measured at the quick level (run the default level or `kernelcheck scaling`)",
            )
        )
    else:
        series = []
        for f in report.forms:
            series.append(
                {"label": f.name, "x": list(f.measurement.sizes), "y": list(f.measurement.times)}
            )
            if f.claim != claim:
                continue
            t = f.time_fit
            measured.append(f"{f.name} {t.slope:.2f} [{t.low:.2f}, {t.high:.2f}]")
            # Timing corroborates the operation count; it cannot refute an asymptotic
            # count (fixed overheads, caches and machine load bend small-n times), so a
            # slope outside the range leaves the claim inconclusive, never refuted.
            ok = True if t.verdict == "pass" else None
            rows.append(
                _statement(
                    f"measured time of {f.name} ~ n^p with p in [{expected[0]}, {expected[1]}]",
                    ok,
                    f"p = {t.slope:.3f}, {t.confidence:.0%} CI [{t.low:.3f}, {t.high:.3f}] over "
                    f"n = {report.sizes[0]}..{report.sizes[-1]}: {t.verdict}",
                )
            )
        plot = {
            "title": "measured time against n",
            "xlabel": "sequence length n",
            "ylabel": "seconds per call",
            "xscale": "log",
            "yscale": "log",
            "series": series,
        }
    if measured:
        key = "time exponent " + "; ".join(measured)
    else:
        key = (
            "flops ~ n^"
            + ", n^".join(f"{s:.2f}" for s in model_slopes)
            + " (cost model); time not measured at --quick"
        )
    details: dict[str, Any] = {"statements": rows}
    if plot is not None:
        details["plot"] = plot
    return _all_verdict(rows), key, details


@_register(
    "C2",
    requires=("kernelcheck.attention:cost_model", "kernelcheck.scaling:run_scaling"),
    checked_by=("kernelcheck.attention.cost_model", "kernelcheck.scaling.run_scaling"),
)
def _check_c2(level: str):
    """Softmax attention: n^2 operations per sequence, n per token; measured slope ~2."""
    return _cost_claim(level, "C2", [("softmax", False), ("softmax", True)], (1.8, 2.2), 2, 1)


@_register(
    "C3",
    requires=("kernelcheck.attention:cost_model", "kernelcheck.scaling:run_scaling"),
    checked_by=("kernelcheck.attention.cost_model", "kernelcheck.scaling.run_scaling"),
)
def _check_c3(level: str):
    """Linear attention: n operations per sequence, constant per token; measured slope ~1."""
    return _cost_claim(
        level,
        "C3",
        [("parallel", False), ("parallel", True), ("recurrent", True), ("chunked", True)],
        (0.85, 1.15),
        1,
        0,
    )


@_register(
    "C15",
    requires=(
        "kernelcheck.attention:parallel",
        "kernelcheck.attention:softmax",
        "kernelcheck.kernels:exp",
        "kernelcheck._src.features.random:PositiveRandomFeatures",
        "kernelcheck.scaling:fit_exponent",
    ),
    checked_by=(
        "kernelcheck.attention.parallel",
        "kernelcheck.attention.softmax",
        "kernelcheck.kernels.exp(Linear(), order=M)",
        "kernelcheck.features.PositiveRandomFeatures",
        "kernelcheck.scaling.fit_exponent",
    ),
)
def _check_c15(level: str):
    """Taylor and random-feature linear attention converge to softmax attention.

    Taylor (even M, so normalisers stay positive): with s_ij = q_i.k_j,
    r_ij the C12 remainder bound of exp(s_ij), Z_i = sum_j exp(s_ij) and a_i the
    softmax output, the order-M output a'_i obeys

        |a'_ic - a_ic| <= sum_j r_ij |v_jc - a_ic| / (Z_i - sum_j r_ij)

    (a' - a = sum_j delta_ij (v_j - a_i) / Z'_i with |delta_ij| <= r_ij), plus
    the two forms' rounding bounds.  Random features: the RMS error over
    independent draws falls with the number of features m; its log-log
    slope (Theil-Sen) must be negative with 95% confidence (theory: -1/2).
    """
    import numpy as np

    from kernelcheck import attention as att
    from kernelcheck import kernels as K
    from kernelcheck._src.core.rounding import gamma
    from kernelcheck._src.features.random import PositiveRandomFeatures
    from kernelcheck.scaling import fit_exponent

    n, d, d_v = _pick(level, (24, 3, 2), (64, 4, 4), (128, 4, 8))
    orders = _pick(level, (0, 2, 4, 6), (0, 2, 4, 6, 8, 10), (0, 2, 4, 6, 8, 10, 12))
    Q, K_, V = _qkv(15, n, d, d_v, 0.45)
    A = att.softmax(Q, K_, V, scale=1.0)
    EA = att.softmax_error_bound(Q, K_, V, scale=1.0)
    S = K.Linear()(Q, K_)
    S_abs = np.abs(S) + K.Linear().error_bound(Q, K_)
    Z = K.Exponential()(Q, K_).sum(axis=1)
    errors, bounds, ok = [], [], True
    for M in orders:
        phi = K.exp(K.Linear(), order=M).features()
        pq, pk = phi(Q), phi(K_)
        out = att.parallel(pq, pk, V)
        tol = att.linear_error_bound(pq, pk, V) + EA
        r = _taylor_remainder_bound(S_abs, M)
        den = Z - r.sum(axis=1)
        if (den <= 0).any():
            bound = np.full_like(A, np.inf)
        else:
            bound = (r[:, :, None] * np.abs(V[None, :, :] - A[:, None, :])).sum(axis=1)
            bound = bound / den[:, None] * (1.0 + gamma(4 * n))
        err = np.abs(out - A)
        ok &= bool((err <= bound + tol).all())
        errors.append(float(err.max()))
        bounds.append(float(bound.max()))
    monotone = all(b <= a for a, b in zip(errors, errors[1:], strict=False))
    ms = _pick(level, (16, 64, 256), (16, 32, 64, 128, 256, 512, 1024), (16, 64, 256, 1024, 4096))
    draws = _pick(level, 3, 6, 12)
    rms = []
    for m in ms:
        sq = []
        for r_ in range(draws):
            rf = PositiveRandomFeatures(d, m, seed=np.random.SeedSequence([15, m, r_]))
            sq.append(np.mean((att.parallel(rf(Q), rf(K_), V) - A) ** 2))
        rms.append(float(np.sqrt(np.mean(sq))))
    fit = fit_exponent(ms, rms, confidence=0.95)
    rows = [
        _statement(
            "Taylor order M (even) -> softmax, within the C12-derived bound at every M",
            ok,
            ", ".join(
                f"M={M}: {fmt(e)} <= {fmt(b)}"
                for M, e, b in zip(orders, errors, bounds, strict=True)
            ),
        ),
        _statement(
            "the Taylor error falls as M grows",
            monotone,
            f"max |error| {fmt(errors[0])} (M={orders[0]}) -> {fmt(errors[-1])} (M={orders[-1]})",
        ),
        _statement(
            "positive random features -> softmax as m grows (RMS error ~ m^p, p < 0)",
            fit.high < 0,
            f"p = {fit.slope:.2f}, 95% CI [{fit.low:.2f}, {fit.high:.2f}] (theory -0.5) over "
            f"m = {ms[0]}..{ms[-1]}, {draws} draws each",
        ),
    ]
    key = (
        f"Taylor error {fmt(errors[0])} (M={orders[0]}) -> {fmt(errors[-1])} (M={orders[-1]}) "
        f"within bound; random features RMS ~ m^{fit.slope:.2f}"
    )
    return (
        _all_verdict(rows),
        key,
        {
            "orders": list(orders),
            "taylor_error": errors,
            "taylor_bound": bounds,
            "num_features": list(ms),
            "random_feature_rms": rms,
            "statements": rows,
            "plot": {
                "title": "linear attention -> softmax",
                "xlabel": "Taylor order M / log2(m) for random features",
                "ylabel": "error against softmax",
                "yscale": "log",
                "series": [
                    {"label": "Taylor max |error|", "x": list(orders), "y": errors},
                    {
                        "label": "C12-derived bound",
                        "x": list(orders),
                        "y": bounds,
                        "style": "dashed",
                    },
                    {
                        "label": "random features RMS (x = log2 m)",
                        "x": [math.log2(m) for m in ms],
                        "y": rms,
                    },
                ],
            },
        },
    )


# ----- PSD (C5, C6, C9) -----------------------------------------------------------


def _psd_examples():
    """(name, kernel, points): true kernels, finite and infinite feature spaces."""
    from kernelcheck import kernels as K

    return [
        ("Linear, n > d (rank deficient)", K.Linear(), (40, 3, 1.0)),
        ("Polynomial(3, c=1)", K.Polynomial(3, c=1.0), (40, 4, 0.6)),
        ("Exponential()", K.Exponential(), (40, 4, 0.6)),
        ("Gaussian(2)", K.Gaussian(lengthscale=2.0), (60, 3, 1.0)),
        ("Laplacian()", K.Laplacian(), (60, 3, 1.0)),
        ("Gaussian(1) * Polynomial(2, c=1)", K.Gaussian() * K.Polynomial(2, c=1.0), (40, 3, 1.0)),
        (
            "exp(Linear(), order=3) + 0.5 Laplacian()",
            K.exp(K.Linear(), order=3) + 0.5 * K.Laplacian(),
            (40, 3, 0.8),
        ),
    ]


@_register(
    "C5",
    requires=(
        "kernelcheck.psd:check_psd",
        "kernelcheck.kernels:kernel_from_function",
        "kernelcheck.verify:kernel",
    ),
    checked_by=("kernelcheck.psd.check_psd", "kernelcheck.verify.kernel"),
)
def _check_c5(level: str):
    """Gram matrices of true kernels are PSD; non-kernels get exactly verified witnesses."""
    import numpy as np

    from kernelcheck import kernels as K
    from kernelcheck import verify
    from kernelcheck.psd import check_psd

    grow = _pick(level, 0.5, 1.0, 3.0)
    rows, worst = [], -np.inf
    for i, (name, k, (n, d, scale)) in enumerate(_psd_examples()):
        X = _points(50 + i, max(d + 1, int(n * grow)), d, scale)
        r = check_psd(k(X))
        rel = r.min_eigenvalue / max(r.tol.value, np.finfo(float).tiny)
        worst = max(worst, -rel)
        rows.append(
            _statement(
                f"{name}: Gram matrix PSD",
                bool(r.is_psd),
                f"{r.verdict.name} by {r.method}; min eigenvalue {fmt(r.min_eigenvalue)} "
                f">= -tol {fmt(r.tol.value)}",
            )
        )
    # The other direction of the definition: functions that are not kernels.
    non_kernels = [
        ("tanh(x.y - 1)", lambda x, y: np.tanh(x @ y - 1.0)),
        ("-||x - y||", lambda x, y: -np.linalg.norm(x - y)),
        ("cos(x.y)", lambda x, y: np.cos(x @ y)),
        ("exp(-||x - y||^4)", lambda x, y: np.exp(-(np.linalg.norm(x - y) ** 4))),
    ]
    found = 0
    for name, f in non_kernels[: _pick(level, 2, 4, 4)]:
        kern = K.kernel_from_function(f, name=name)
        rep = verify.kernel(kern, dim=2, seed=5, executor=_EXECUTOR.get())
        refuted = not rep.passed
        found += refuted
        rows.append(
            _statement(
                f"{name} is refuted (a witness v with v^T K v < 0)",
                refuted,
                _first_sentence(str(rep)),
            )
        )
    key = (
        f"{len(_psd_examples())} kernels PSD (min eigenvalue >= {fmt(-worst)} x tol); "
        f"{found} non-kernels refuted by exactly verified witnesses"
    )
    return _all_verdict(rows), key, {"statements": rows}


def _first_sentence(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@_register(
    "C6",
    requires=("kernelcheck.psd:mercer_features",),
    checked_by=("kernelcheck.psd.mercer_features",),
)
def _check_c6(level: str):
    """Phi = Lambda^(1/2) U^T reproduces PSD Gram matrices, for infinite-feature kernels too."""
    from kernelcheck.psd import mercer_features

    grow = _pick(level, 0.5, 1.0, 3.0)
    rows = []
    worst = 0.0
    for i, (name, k, (n, d, scale)) in enumerate(_psd_examples()):
        X = _points(60 + i, max(d + 1, int(n * grow)), d, scale)
        m = mercer_features(k(X))
        worst = max(worst, m.residual / m.error_bound if m.error_bound > 0 else 0.0)
        rows.append(
            _statement(
                f"{name}: Phi Phi^T = K with Phi from the eigendecomposition",
                bool(m.passed and m.residual <= m.error_bound),
                f"rank {m.rank} of {X.shape[0]}; ||Phi Phi^T - K|| {fmt(m.residual)} "
                f"<= bound {fmt(m.error_bound)}",
            )
        )
    key = f"{len(rows)} Gram matrices factored: worst residual {fmt(worst)} x its bound"
    return _all_verdict(rows), key, {"statements": rows}


@_register(
    "C9",
    requires=("kernelcheck.psd:check_psd", "kernelcheck.kernels:Exponential"),
    checked_by=("kernelcheck.psd.check_psd", "kernelcheck.kernels.exp"),
)
def _check_c9(level: str):
    """exp(x.y) is PSD, a positive-weighted sum of PSD terms, with no finite feature map."""
    import numpy as np

    from kernelcheck import kernels as K
    from kernelcheck import verify
    from kernelcheck.errors import InfiniteFeatureSpace
    from kernelcheck.psd import check_psd

    sets = _pick(
        level,
        [(20, 2, 0.8)],
        [(40, 2, 1.0), (60, 4, 0.8), (40, 8, 0.5)],
        [(80, 2, 1.2), (120, 4, 1.0), (150, 8, 0.6), (100, 16, 0.4)],
    )
    rows = []
    psd_ok, worst = True, -math.inf
    for i, (n, d, scale) in enumerate(sets):
        X = _points(90 + i, n, d, scale)
        r = check_psd(K.Exponential()(X))
        psd_ok &= bool(r.is_psd)
        worst = max(worst, -r.min_eigenvalue / r.tol.value)
    rows.append(
        _statement(
            "the Gram matrices of exp(x.y) are PSD",
            psd_ok,
            f"{len(sets)} point sets (d up to {sets[-1][1]}); worst min eigenvalue "
            f"{fmt(-worst)} x tol",
        )
    )
    X = _points(99, 30, 3, 0.8)
    terms_ok = all(check_psd(K.Polynomial(m)(X) / math.factorial(m)).is_psd for m in range(0, 7))
    rows.append(
        _statement(
            "each term (x.y)^m / m! is PSD (so is their positive-weighted sum)",
            terms_ok,
            "check_psd on m = 0..6",
        )
    )
    try:
        K.Exponential().features()
        raised = False
    except InfiniteFeatureSpace:
        raised = True
    rows.append(
        _statement(
            "the feature space is infinite: Exponential().features() refuses",
            raised,
            "raises InfiniteFeatureSpace, pointing to exp(Linear(), order=M) and random features",
        )
    )
    Y = _points(98, 30, 3, 0.8)
    errs = []
    maps_ok = True
    for M in range(0, _pick(level, 6, 12, 16) + 1, 2):
        kM = K.exp(K.Linear(), order=M)
        maps_ok &= verify.feature_map(kM.features(), X, Y).passed
        errs.append(float(np.abs(kM(X, Y) - K.Exponential()(X, Y)).max()))
    rows.append(
        _statement(
            "the maps [1, x, x(x)x/sqrt 2!, ...] truncated at M reproduce the series and "
            "converge to exp(x.y)",
            maps_ok and errs[-1] < errs[0],
            f"max |exp - T_M| {fmt(errs[0])} (M=0) -> {fmt(errs[-1])} (M={2 * (len(errs) - 1)})",
        )
    )
    key = (
        f"exp Gram matrices PSD (min eigenvalue >= {fmt(-worst)} x tol); no finite map; "
        "Taylor maps converge"
    )
    return _all_verdict(rows), key, {"statements": rows}


# ----- random features (C13, C16, C17, C18) ----------------------------------------

_UNBIASED_VERDICT = {"pass": ClaimVerdict.VERIFIED, "fail": ClaimVerdict.REFUTED}


def _unbiased_run(
    cls_name: str, *, d: int, m: int, X, Y, trials: int, seed: int, orthogonal: bool = False
):
    from kernelcheck._src.features import random as rf
    from kernelcheck._src.verify.unbiased import unbiased
    from kernelcheck.kernels import Exponential

    sampler = getattr(rf, cls_name).sampler(d, m, orthogonal=orthogonal)
    return unbiased(
        sampler, Exponential(), X, Y, trials=trials, seed=seed, progress=False, **_executor_kwargs()
    )


def _relative_ci(report) -> tuple[float, float]:
    """Smallest lower and largest upper end of the pairs' relative-bias intervals."""
    lows = [(p.ci_low - p.target) / abs(p.target) for p in report.pairs if p.target != 0]
    highs = [(p.ci_high - p.target) / abs(p.target) for p in report.pairs if p.target != 0]
    return min(lows), max(highs)


@_register(
    "C13",
    requires=(
        "kernelcheck._src.verify.unbiased:unbiased",
        "kernelcheck._src.features.random:PositiveRandomFeatures",
    ),
    checked_by=("kernelcheck.verify.unbiased", "kernelcheck.features.PositiveRandomFeatures"),
)
def _check_c13(level: str):
    """Monte Carlo test of E[phi(x).phi(y)] = exp(x.y) for Performer positive features.

    Every pair's mean is tested against exp(x.y) with the closed-form
    variance; Holm's procedure keeps the family-wise false-alarm rate at 1%.
    The report's detectable relative bias states the power of the run.
    """
    d, m, n, trials = _pick(level, (2, 16, 3, 20000), (4, 16, 4, 100000), (8, 32, 6, 400000))
    X = _points(130, n, d, 0.5 / math.sqrt(d))
    Y = _points(131, n, d, 0.5 / math.sqrt(d))
    rep = _unbiased_run("PositiveRandomFeatures", d=d, m=m, X=X, Y=Y, trials=trials, seed=13)
    lo, hi = _relative_ci(rep)
    verdict = _UNBIASED_VERDICT.get(rep.verdict, ClaimVerdict.INCONCLUSIVE)
    key = (
        f"{rep.counts.get('pass', 0) + rep.counts.get('exact', 0)}/{len(rep.pairs)} pairs "
        f"unbiased; relative bias CI [{lo:+.2%}, {hi:+.2%}]; detectable "
        f"{rep.detectable_relative_bias:.2%} ({trials} trials)"
    )
    rows = [
        _statement(
            "E[phi(x).phi(y)] = exp(x.y) on every pair",
            verdict is V.VERIFIED if verdict is not V.INCONCLUSIVE else None,
            _first_sentence(str(rep)),
        )
    ]
    return verdict, key, {"report": rep.to_dict(), "statements": rows}


@_register(
    "C16",
    requires=(
        "kernelcheck._src.verify.ratio_bias:ratio_bias",
        "kernelcheck._src.features.random:PositiveRandomFeatures",
    ),
    checked_by=("kernelcheck.verify.ratio_bias", "kernelcheck.features.PositiveRandomFeatures"),
)
def _check_c16(level: str):
    """Performer attention outputs are biased, with bias ~ beta / m (ratio_bias)."""
    import numpy as np

    from kernelcheck._src.features.random import PositiveRandomFeatures
    from kernelcheck._src.verify.ratio_bias import ratio_bias

    d = 2
    ms, trials = _pick(
        level, ((8, 16, 32), 20000), ((8, 16, 32, 64), 40000), ((8, 16, 32, 64, 128), 200000)
    )
    rng = np.random.default_rng(16)
    # norms about 0.4: the 1/m law holds once m exceeds the relative variance
    # (reported as relative_variance), which stays below 1 here
    Q, K_ = 0.3 * rng.normal(size=(3, d)), 0.3 * rng.normal(size=(5, d))
    Vals = rng.normal(size=(5, 2))
    r = ratio_bias(
        PositiveRandomFeatures.sampler(d, ms[0]),
        Q,
        K_,
        Vals,
        num_features=ms,
        trials=trials,
        seed=16,
        progress=False,
        **_executor_kwargs(),
    )
    z = r.beta / r.beta_se
    rows = [
        _statement(
            "the attention output is biased (beta != 0 at 1%)",
            bool(abs(z) > 0) and r.passed,
            f"beta = {r.beta:.3g} +- {r.beta_se:.2g} (z = {z:.1f})",
        ),
        _statement(
            "the bias follows beta/m + gamma/m^2 (goodness of fit)",
            r.gof_p > r.alpha,
            f"chi-square p = {r.gof_p:.3g}; log-log slope at the largest m {r.slope:.2f}",
        ),
    ]
    key = (
        f"bias |b| {fmt(r.bias_norm[0])} at m={ms[0]}; b ~ beta/m, beta = {r.beta:.3g} +- "
        f"{r.beta_se:.2g} (z = {z:.0f}), fit p = {r.gof_p:.2f}"
    )
    proj = [abs(b) for b in r.projected_bias]
    return (
        (V.VERIFIED if r.passed else V.REFUTED),
        key,
        {
            "result": r.to_dict(),
            "statements": rows,
            "plot": {
                "title": "Performer attention bias against m",
                "xlabel": "number of random features m",
                "ylabel": "|projected bias|",
                "xscale": "log",
                "yscale": "log",
                "series": [
                    {"label": "measured", "x": list(ms), "y": proj},
                    {
                        "label": "beta / m",
                        "x": list(ms),
                        "y": [abs(r.beta) / m for m in ms],
                        "style": "dashed",
                    },
                ],
            },
        },
    )


@_register(
    "C17",
    requires=(
        "kernelcheck._src.verify.unbiased:unbiased",
        "kernelcheck._src.features.random:TrigonometricRandomFeatures",
    ),
    checked_by=(
        "kernelcheck.verify.unbiased",
        "kernelcheck.features.PositiveRandomFeatures",
        "kernelcheck.features.TrigonometricRandomFeatures",
    ),
)
def _check_c17(level: str):
    """Empirical MSE matches the closed forms; positive beats trigonometric where k is small.

    Agreement: ``verify.unbiased`` tests each pair's variance against the
    closed form (one-sided, "above theory", inside its Holm family at 1%), and
    each pair's empirical MSE must also lie within its simultaneous interval
    around the closed form.  Points have norms about 0.5, where the positive
    estimator's tails are light enough for the interval to be trusted.
    Comparison: on pairs y = -x + small noise (kernel value about
    exp(-|x|^2), small) the positive estimator's MSE must be below the
    trigonometric one's, with non-overlapping intervals.
    """
    import numpy as np

    d, m, n, trials = _pick(level, (2, 16, 3, 20000), (4, 16, 4, 50000), (8, 32, 6, 300000))
    X = _points(170, n, d, 0.5 / math.sqrt(d))
    Y = _points(171, n, d, 0.5 / math.sqrt(d))
    names = ("PositiveRandomFeatures", "TrigonometricRandomFeatures")
    rows = []
    worst = 0.0
    for name in names:
        rep = _unbiased_run(name, d=d, m=m, X=X, Y=Y, trials=trials, seed=17)
        within = [abs(p.mse - p.theory_mse) <= p.mse_halfwidth for p in rep.pairs]
        rel = [abs(p.mse / p.theory_mse - 1) for p in rep.pairs if p.theory_mse > 0]
        worst = max([worst, *rel])
        rows.append(
            _statement(
                f"{name}: empirical MSE = closed form on every pair",
                {"pass": rep.passed and all(within), "fail": False}.get(rep.verdict),
                f"{sum(within)}/{len(within)} pairs within their interval; largest "
                f"|MSE/theory - 1| {fmt(max(rel) if rel else 0.0)}; variance tests {rep.verdict}",
            )
        )
    A = _points(172, n, d, 1.0 / math.sqrt(d))
    B = -A + 0.1 * _points(173, n, d, 1.0 / math.sqrt(d))
    pos, trig = (_unbiased_run(name, d=d, m=m, X=A, Y=B, trials=trials, seed=27) for name in names)
    diag = [(p, t) for p, t in zip(pos.pairs, trig.pairs, strict=True) if p.i == p.j]
    better = all(p.mse + p.mse_halfwidth < t.mse - t.mse_halfwidth for p, t in diag)
    theory_better = all(p.theory_mse < t.theory_mse for p, t in diag)
    rows.append(
        _statement(
            "positive features beat trigonometric ones where exp(x.y) is small (y ~ -x)",
            better and theory_better,
            "; ".join(
                f"k = {fmt(p.target)}: MSE {fmt(p.mse)} vs {fmt(t.mse)} (theory "
                f"{fmt(p.theory_mse)} vs {fmt(t.theory_mse)})"
                for p, t in diag[:3]
            ),
        )
    )
    ratio = max(p.mse / t.mse for p, t in diag)
    key = (
        f"empirical MSE within {worst:.1%} of theory; where k is small positive/trigonometric "
        f"MSE <= {fmt(ratio)}"
    )
    return (
        _all_verdict(rows),
        key,
        {"statements": rows, "max_relative_mse_gap": float(np.max(worst))},
    )


@_register(
    "C18",
    requires=(
        "kernelcheck._src.verify.unbiased:unbiased",
        "kernelcheck._src.features.random:PositiveRandomFeatures",
    ),
    checked_by=(
        "kernelcheck.verify.unbiased",
        "kernelcheck.features.PositiveRandomFeatures",
        "kernelcheck.features.TrigonometricRandomFeatures",
    ),
)
def _check_c18(level: str):
    """Orthogonal features: unbiased (verify.unbiased) and MSE not above i.i.d. features."""
    d, m, n, trials = _pick(level, (4, 8, 3, 20000), (4, 16, 4, 50000), (8, 32, 6, 200000))
    X = _points(180, n, d, 0.6 / math.sqrt(d))
    Y = _points(181, n, d, 0.6 / math.sqrt(d))
    rows = []
    verdicts = []
    ratios = []
    for name in ("PositiveRandomFeatures", "TrigonometricRandomFeatures"):
        orth = _unbiased_run(name, d=d, m=m, X=X, Y=Y, trials=trials, seed=18, orthogonal=True)
        iid = _unbiased_run(name, d=d, m=m, X=X, Y=Y, trials=trials, seed=19)
        verdicts.append(_UNBIASED_VERDICT.get(orth.verdict, ClaimVerdict.INCONCLUSIVE))
        lo, hi = _relative_ci(orth)
        rows.append(
            _statement(
                f"orthogonal {name} are unbiased",
                {"pass": True, "fail": False}.get(orth.verdict),
                f"relative bias CI [{lo:+.2%}, {hi:+.2%}]; {orth.verdict}",
            )
        )
        higher = [
            o.mse - o.mse_halfwidth > i.mse + i.mse_halfwidth
            for o, i in zip(orth.pairs, iid.pairs, strict=True)
        ]
        ratios += [o.mse / i.mse for o, i in zip(orth.pairs, iid.pairs, strict=True) if i.mse > 0]
        rows.append(
            _statement(
                f"orthogonal {name}: MSE not above i.i.d.",
                not any(higher),
                f"{sum(higher)} of {len(higher)} pairs significantly above; MSE ratio "
                f"orthogonal / i.i.d. {fmt(min(ratios))}..{fmt(max(ratios))}",
            )
        )
    key = (
        f"orthogonal positive and trigonometric features unbiased; MSE ratio to i.i.d. "
        f"{fmt(min(ratios))}..{fmt(max(ratios))}"
    )
    return _all_verdict(rows), key, {"statements": rows}
