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
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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
        The property-test files that test the claim over generated inputs.
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
    properties: tuple[str, ...]
    title: str | None = None


_ENTRIES: list[_Entry] = []


def _register(
    cid: str,
    *,
    requires: Iterable[str],
    checked_by: Iterable[str],
    properties: Iterable[str] = (),
    title: str | None = None,
) -> Callable:
    """Decorator: register ``fn`` as the check of ``cid``.

    ``requires`` lists ``"module:attribute"`` capabilities; the claim is in the
    registry only when all of them import (a capability still being built
    leaves its claim out instead of breaking the essay).
    """

    def deco(fn):
        _ENTRIES.append(
            _Entry(cid, fn, tuple(requires), tuple(checked_by), tuple(properties), title)
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
                properties=entry.properties,
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
