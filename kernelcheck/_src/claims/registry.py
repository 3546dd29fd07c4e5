"""The claims registry: one entry per claim of the essay (C1..C24) with the check that decides it.

The registry is the single place the ``kernelcheck essay`` report, the command
line and the documentation read claims from.  Each :class:`Claim` carries its
id, a few words, the full statement (as on the claims pages of the docs), its
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

The registry is plain data built once at import: the checks live in one
module per group (:mod:`kernelcheck._src.claims.checks`), each exposing its
``CHECKS`` entries in claim order, and :data:`CLAIMS` joins them with the
statements, the groups and the property tests (``properties/`` is scanned
once per process).  An executor for the Monte Carlo and search checks is an
argument of :func:`run_claims` and :meth:`Claim.check`, handed to the checks
that use one.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from kernelcheck._src.claims.checks import (
    attention_cost,
    attention_kernels,
    beyond,
    kernels,
    recurrence,
    recurrence_today,
    recurrences_shipped,
)
from kernelcheck._src.claims.checks.common import Check
from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.core.results import Result, to_jsonable
from kernelcheck._src.core.validate import check_callable, check_choice, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "LEVELS",
    "GROUPS",
    "ClaimVerdict",
    "ClaimResult",
    "Claim",
    "STATEMENTS",
    "CHECK_MODULES",
    "CLAIMS",
    "registry",
    "get_claim",
    "run_claims",
    "claim_ids_iv",
    "check_executor",
    "property_tests",
    "scan_property_tests",
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
    ("recurrence-today", "The recurrence, as users build it today", ("C19", "C20")),
    ("recurrences-shipped", "The recurrences people ship", ("C21", "C22", "C23", "C24")),
)


#: The verdict of a claim check: the one outcome vocabulary of kernelcheck
#: (``verified``, ``refuted``, ``inconclusive``; see
#: :class:`~kernelcheck._src.core.results.Outcome`).
ClaimVerdict = Outcome


@dataclass(frozen=True, repr=False)
class ClaimResult(Result):
    """The outcome of one claim's check.

    Attributes
    ----------
    claim : str
        The claim id, ``"C1"`` .. ``"C21"``.
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
    details: dict = field(default_factory=dict)  # type: ignore[assignment]  # the evidence, as data
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
        ``"C1"`` .. ``"C21"``.
    title : str
        The claim in a few words (the essay table's second column).
    statement : str
        The full statement.
    group : str
        The slug of its group in :data:`GROUPS`.
    check_fn : callable
        ``check_fn(level) -> (verdict, key_number, details)``, or
        ``check_fn(level, executor=None)`` when ``uses_executor``; wrapped by
        :meth:`check`, which adds the timing.
    checked_by : tuple of str
        The library functions the check calls (for the documentation).
    properties : tuple of str
        The property tests (``file::name``) that test the claim over generated
        inputs (see :func:`property_tests`).
    uses_executor : bool
        True for the checks that can run their Monte Carlo trials or search
        on an executor (C5, C13, C16, C17, C18).
    """

    id: str
    title: str
    statement: str
    group: str
    check_fn: Callable[..., tuple[ClaimVerdict, str, dict]] = field(repr=False, compare=False)
    checked_by: tuple[str, ...] = ()
    properties: tuple[str, ...] = ()
    uses_executor: bool = False

    def check(self, level: str = "default", executor: Any = None) -> ClaimResult:
        """Run the check at ``level`` (one of :data:`LEVELS`) and time it.

        Parameters
        ----------
        level : {"quick", "default", "thorough"}, default "default"
        executor : concurrent.futures.Executor or None, default None
            Where a Monte Carlo or search check runs its work (ignored by the
            other checks); the verdict and numbers are the same as in-process.

        Returns
        -------
        ClaimResult
        """
        check_choice(level, "level", LEVELS)
        check_executor(executor)
        start = time.perf_counter()
        if self.uses_executor:
            verdict, key, details = self.check_fn(level, executor=executor)
        else:
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


def check_executor(executor: Any) -> None:
    """Refuse an ``executor`` that is neither None nor an object with ``submit``."""
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise InvalidArgument(
            "`executor` must be a concurrent.futures.Executor (an object with submit)"
        )


#: Every claim's (title, statement), in claim order.
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
    "C21": (
        "per-channel gates are decayed attention too",
        "S_t = Diag(a_t) S_{t-1} + k_t v_t^T with a_t in [0, 1]^D (gates on the key channels; "
        "gates on the value channels multiply from the right, S_{t-1} Diag(b_t)). Its parallel "
        "form weights each pair channel by channel, y_i = sum_{j<=i} (q_i o prod_{l=j+1..i} a_l) "
        ". k_j v_j, computed from differences of cumulative log-gates (never exp(-L_j) alone, "
        "which overflows), with gates of exactly 0 resetting the state; its chunked form agrees "
        "with both, and with a_t = g_t 1 it is C20. RWKV-6 reads the current token through a "
        "bonus instead of the state: y_t = S_{t-1}^T r_t + ((r_t o u) . k_t) v_t.",
    ),
    "C22": (
        "the delta rule",
        "S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T = (I - beta_t k_t k_t^T) S_{t-1} + "
        "beta_t k_t v_t^T: one step of gradient descent on 1/2 |S^T k_t - v_t|^2 with step "
        "beta_t (with |k_t| = 1 and beta_t = 1 the state then returns v_t exactly at k_t). The "
        "transition has spectral norm max(1, |1 - beta_t |k_t|^2|): it never expands when "
        "0 <= beta_t |k_t|^2 <= 2. The chunked form by the WY (UT) representation -- per chunk, "
        "T = (I + strictly-lower(Diag(beta) K K^T))^(-1) Diag(beta), W = T K, U = T V -- agrees "
        "with the recurrence, and so does the quadratic parallel form.",
    ),
    "C23": (
        "one transition for all of them",
        "S_t = M_t S_{t-1} + k_t v_t^T with M_t = Diag(w_t) + a_t b_t^T (diagonal plus rank "
        "one): Gated DeltaNet is M_t = alpha_t (I - beta_t k_t k_t^T) with the value scaled by "
        "beta_t, Kimi Delta Attention (I - beta_t k_t k_t^T) Diag(alpha_t), RWKV-7 the general "
        "case, and C14 and C19-C22 are special cases. Recurrent and chunked forms agree and hand "
        "a state over at any cut, also at a cut inside a chunk.",
    ),
    "C24": (
        "what rounding does to a recurrence",
        "An error made at step j reaches step t through the product of the transitions between "
        "them. With non-negative gates (C14, C19-C21) an entrywise bound holds; with the delta "
        "rule's transitions only a normwise one does, |S_t - fl(S_t)| <= sum_{j<=t} "
        "|M_t ... M_{j+1}|_2 eps_j, which grows linearly in t while every transition is "
        "non-expansive and exponentially otherwise (unnormalised keys with beta |k|^2 near 20 "
        "reach |S| of about 1e10 within 64 tokens).",
    ),
}

_GROUP_OF = {cid: slug for slug, _title, ids in GROUPS for cid in ids}

#: The module of checks of each group, in essay order: ``{group slug: module}``.
CHECK_MODULES: Mapping[str, ModuleType] = MappingProxyType(
    {
        "attention-and-cost": attention_cost,
        "kernels": kernels,
        "attention-with-kernels": attention_kernels,
        "recurrence": recurrence,
        "beyond-the-essay": beyond,
        "recurrence-today": recurrence_today,
        "recurrences-shipped": recurrences_shipped,
    }
)

_TEST_NAME = re.compile(r"^def (test_((?:c\d\d_)+)\w*)\(", re.MULTILINE)

#: The source checkout beside the package (``properties/`` lives there).
_CHECKOUT = Path(__file__).resolve().parents[3]


def scan_property_tests(root: str | Path) -> dict[str, tuple[str, ...]]:
    """Property tests per claim, read from the names in ``root/properties/*.py``.

    A property test opens its name with the ids of the claims it checks
    (``test_c09_c12_...`` checks C9 and C12); this returns
    ``{"C9": ("properties/test_x.py::test_c09_c12_...", ...), ...}``.  A
    folder without ``properties/`` gives an empty dict.
    """
    folder = Path(root) / "properties"
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


@functools.cache
def property_tests() -> Mapping[str, tuple[str, ...]]:
    """The property tests per claim of the source checkout beside the package.

    Scanned once per process (see :func:`scan_property_tests`); an installed
    package without ``properties/`` gives an empty mapping.
    """
    return MappingProxyType(scan_property_tests(_CHECKOUT))


def _build(entries: Iterable[tuple[str, Check]]) -> Mapping[str, Claim]:
    """The claims of ``(group slug, check entry)`` pairs, keyed by id in claim order.

    Raises RuntimeError (at import, a fault of the package) when an entry is
    in the wrong group, is registered twice, or the ids are not C1..C24 in order.
    """
    props = property_tests()
    claims: dict[str, Claim] = {}
    for group, entry in entries:
        if entry.id in claims or _GROUP_OF.get(entry.id) != group:
            raise RuntimeError(f"claim check {entry.id} is registered twice or in group {group}")
        title, statement = STATEMENTS[entry.id]
        claims[entry.id] = Claim(
            id=entry.id,
            title=title,
            statement=statement,
            group=group,
            check_fn=entry.fn,
            checked_by=tuple(entry.checked_by),
            properties=props.get(entry.id, ()),
            uses_executor=entry.uses_executor,
        )
    if list(claims) != list(STATEMENTS):
        raise RuntimeError(f"claim checks {list(claims)} are not the STATEMENTS keys in order")
    return MappingProxyType(claims)


#: Every claim, ``{"C1": Claim, ...}`` in claim order (built once, at import).
CLAIMS: Mapping[str, Claim] = _build(
    (group, entry) for group, module in CHECK_MODULES.items() for entry in module.CHECKS
)


def registry() -> dict[str, Claim]:
    """The claims, in order C1..C24.

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
    return dict(CLAIMS)


def get_claim(claim_id: str) -> Claim:
    """The claim with id ``claim_id`` (case-insensitive, e.g. ``"c5"``).

    Parameters
    ----------
    claim_id : str
        ``"C1"`` .. ``"C20"``, in any case.

    Raises
    ------
    InvalidArgument
        When no claim has that id.
    """
    if not isinstance(claim_id, str):
        raise InvalidArgument(f"`claim_id` must be a string like 'C5', got {claim_id!r}")
    cid = claim_id.strip().upper()
    if cid not in CLAIMS:
        raise InvalidArgument(f"`claim_id` must be one of {', '.join(CLAIMS)}; got {claim_id!r}")
    return CLAIMS[cid]


def claim_ids_iv(claim_ids: Any) -> list[str] | None:
    """Check a list of claim ids up front; the canonical ids (``"c5"`` -> ``"C5"``), or None.

    A string is refused (it would be read letter by letter), as is an empty
    list (a verdict on no claim); None means every claim.
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
    """Run the checks of ``claim_ids`` (default: every claim) at ``level``.

    A check that raises is reported as ``inconclusive`` with the error in its
    details, so one broken check does not hide the others.  ``KeyboardInterrupt``
    propagates.

    Parameters
    ----------
    claim_ids : iterable of str or None, default None
        Ids such as ``["C1", "C5"]`` (at least one; checked before any check
        runs).  A bare string is refused: it would be read letter by letter.
    level : {"quick", "default", "thorough"}, default "default"
    on_result : callable or None, default None
        Called with each :class:`ClaimResult` as soon as it is known
        (progress); an exception it raises becomes :class:`InvalidArgument`.
    executor : concurrent.futures.Executor or None, default None
        Runs the Monte Carlo trials (C13, C16, C17, C18) and the counterexample
        search (C5) on it, e.g. ``kernelcheck.distributed.dask_executor()``.
        The verdicts and numbers are identical to an in-process run.

    Returns
    -------
    list of ClaimResult
        In claim order.
    """
    check_choice(level, "level", LEVELS)
    claim_ids = claim_ids_iv(claim_ids)
    if on_result is not None:
        check_callable(on_result, "on_result")
    check_executor(executor)
    return _run_claims(claim_ids, level, on_result, executor)


def _run_claims(claim_ids, level, on_result, executor) -> list[ClaimResult]:
    if claim_ids is None:
        claims = list(CLAIMS.values())
    else:
        claims = [get_claim(cid) for cid in claim_ids]
        claims.sort(key=lambda c: int(c.id[1:]))
    results = []
    for claim in claims:
        start = time.perf_counter()
        try:
            result = claim.check(level, executor=executor)
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
