"""The claims registry: one entry per claim of the essay (C1..C18) with the check that decides it.

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

import enum
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck._src.results import ResultMixin, to_jsonable
from kernelcheck._src.validate import check_choice
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

#: The check levels, from fastest to most thorough.
LEVELS = ("quick", "default", "thorough")

#: Claim groups, in essay order: (slug, title, claim ids).
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("attention-and-cost", "Attention and its cost", ("C1", "C2", "C3")),
    ("kernels", "Kernels", ("C4", "C5", "C6", "C7", "C8", "C9")),
    ("attention-with-kernels", "Attention with kernels", ("C10", "C11", "C12", "C13")),
    ("recurrence", "The recurrence", ("C14", "C15")),
    ("beyond-the-essay", "Beyond the essay", ("C16", "C17", "C18")),
)


class ClaimVerdict(str, enum.Enum):
    """Outcome of a claim check.

    ``VERIFIED``: the evidence supports the claim within the stated error model
    or statistical test; ``REFUTED``: a counterexample or a significant
    deviation was found; ``INCONCLUSIVE``: the evidence at this level cannot
    decide (for example, too few Monte Carlo trials for the test to have power).
    """

    VERIFIED = "verified"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ClaimResult(ResultMixin):
    """The outcome of one claim's check.

    Attributes
    ----------
    claim : str
        The claim id, ``"C1"`` .. ``"C18"``.
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

    def __str__(self) -> str:
        return f"{self.claim} {self.verdict.value}: {self.key_number} ({self.duration:.2g} s)"


@dataclass(frozen=True)
class Claim:
    """One claim of the essay and the check that decides it.

    Attributes
    ----------
    id : str
        ``"C1"`` .. ``"C18"``.
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
        _ENTRIES.append(
            _Entry(cid, fn, tuple(requires), tuple(checked_by), title)
        )
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
    base = Path(root) if root is not None else Path(__file__).resolve().parents[2]
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
    """The registered claims, in order C1..C18 (a claim whose capability is missing is absent).

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


def run_claims(
    claim_ids: Iterable[str] | None = None,
    level: str = "default",
    *,
    on_result: Callable[[ClaimResult], Any] | None = None,
) -> list[ClaimResult]:
    """Run the checks of ``claim_ids`` (default: every registered claim) at ``level``.

    A check that raises is reported as ``inconclusive`` with the error in its
    details, so one broken check does not hide the others.  ``KeyboardInterrupt``
    propagates.

    Parameters
    ----------
    claim_ids : iterable of str, optional
        Ids such as ``["C1", "C5"]``.
    level : {"quick", "default", "thorough"}
    on_result : callable, optional
        Called with each :class:`ClaimResult` as soon as it is known (progress).

    Returns
    -------
    list of ClaimResult
        In claim order.
    """
    check_choice(level, "level", LEVELS)
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
            on_result(result)
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


def _statement(statement: str, ok: bool | None, evidence: str) -> dict:
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
    dims_text = ", ".join(f"d={r['d']},m={r['m']}: {r['tensor_dim']} vs {r['unique_monomials']}"
                          for r in rows)
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
            f"min over s in [-12, 12]: "
            + ", ".join(f"T_{M} {fmt(v)}" for M, v, _ in even_min),
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
    return _all_verdict(statements), key, {
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
    }
