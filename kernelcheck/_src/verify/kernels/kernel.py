"""``verify.kernel``: is this similarity function a kernel? (claims C5, C6)

Two modes.

**With points** ``X``: the Gram matrix ``G = k(X)`` is judged by
:func:`~kernelcheck.psd.check_psd` at a tolerance that covers the kernel's own
rounding (``||k.error_bound(X)||_F``, plus the float resolution of the
test).  A negative eigenvalue of the float Gram is then put through the
*precision ladder*: the Gram is re-evaluated with ``k.gram_mp(X, dps=...)``
at increasing precision and the Rayleigh quotient ``q = v^T G v / v^T v`` of
the witness ``v`` is recomputed.  For a true kernel ``q`` of the exact Gram is
``>= 0``, so the negative value shrinks with precision (it was rounding); for
a non-kernel it converges to a fixed negative number (a real violation).

**Without points** (``dim=d``): a counterexample search.  ``budget``
independent restarts, each seeded from ``numpy.random.SeedSequence(seed)
.spawn(budget)``; a restart draws point sets with Hypothesis (targeted at
the smallest normalised eigenvalue ``lambda_min / max |lambda|``), then pushes
that quantity down with ``scipy.optimize.minimize`` (L-BFGS-B).  Restarts run
in fixed rounds of :data:`ROUND`; after each round the most negative
candidates are confirmed with the points mode (so rounding never flags a
true kernel).  The restarts are independent tasks, so they can be handed to
a :class:`concurrent.futures.Executor`; the results are gathered by restart
index, so the report does not depend on how they were scheduled.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize

from kernelcheck._src.core.deadline import honours_timeout
from kernelcheck._src.core.outcome import Outcome, outcome_of
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.core.seeds import child_seed
from kernelcheck._src.core.validate import (
    as_bool,
    as_executor,
    as_int,
    as_points,
    check_choice,
    describe,
)
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.function import kernel_from_function
from kernelcheck._src.psd.ladder import check_psd
from kernelcheck._src.psd.result import PSDResult, Verdict
from kernelcheck._src.psd.tolerance import default_tolerance, frobenius
from kernelcheck._src.verify.kernels.domain import Domain, as_domain
from kernelcheck._src.verify.kernels.precision import (
    precision_ladder,
    rounding_reason,
    unmodelled_witness,
)
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = ["kernel", "KernelReport"]

#: Largest number of points for which the ladder re-evaluates the Gram in mpmath.
LADDER_MAX_N = 200
#: Restarts per round of the counterexample search (fixed, so that early
#: stopping does not depend on scheduling).
ROUND = 8
#: Point-set sizes and scales cycled through by the restarts.
_SIZES = (2, 3, 4, 6, 8)
_SCALES = (1.0, 0.5, 2.0, 0.25, 4.0)
#: Starting point sets and L-BFGS-B iterations per restart.
_EXAMPLES = 10
_MAXITER = 80
#: Candidates confirmed per round (most negative first).
_CONFIRM = 3

VERDICTS = ("psd", "rounding", "violation", "no_counterexample", "inconclusive")


@dataclass(frozen=True, repr=False)
class KernelReport(Result):
    """What :func:`kernel` found (claims C5, C6).

    Attributes
    ----------
    passed : bool
        No violation: the Gram is PSD within tolerance, its negative
        eigenvalue is rounding, or the search found no counterexample.
    verdict : str
        ``"psd"``, ``"rounding"`` (negative eigenvalue of the float Gram that
        shrinks with precision), ``"violation"`` (a real one: not a kernel),
        ``"no_counterexample"`` (search mode) or ``"inconclusive"``.
    kernel : str
        ``repr`` of the kernel.
    mode : str
        ``"points"`` or ``"search"``.
    points : ndarray or None
        The points judged (points mode) or the witness points (search mode).
    witness : ndarray or None
        A vector ``v`` with ``v^T G v < 0`` on ``points`` (violation), or the
        float witness whose value shrank (rounding).
    witness_value : float or None
        ``v^T G v / v^T v`` at the highest precision evaluated.
    ladder : tuple of (precision, value)
        The Rayleigh quotient of the witness at each precision: ``"float64"``
        then each ``dps``.
    tol : Tolerance
        Tolerance on ``lambda_min`` of the float Gram, with its source.
    psd : PSDResult or None
        The verdict on the float Gram.
    min_eigenvalue : float
        Smallest eigenvalue of the float Gram (``nan`` when not computed).
    budget : str
        The search budget as spent (search mode).
    restarts : int
        Restarts run (search mode).
    reason : str
        One sentence on why.
    """

    passed: bool
    verdict: str
    kernel: str
    mode: str
    points: Any = None
    witness: Any = None
    witness_value: float | None = None
    ladder: tuple = field(default_factory=tuple)
    tol: Tolerance | None = None
    psd: PSDResult | None = None
    min_eigenvalue: float = math.nan
    budget: str = ""
    restarts: int = 0
    reason: str = ""

    @property
    def outcome(self) -> Outcome:
        """``violation`` refuted, ``inconclusive`` inconclusive, every other verdict verified."""
        if self.verdict == "inconclusive":
            return Outcome.INCONCLUSIVE
        return outcome_of(self.passed)

    def _text(self) -> str:
        text = f"{self.kernel} -- {self.verdict} ({self.mode}"
        if self.points is not None:
            text += f", {self.points.shape[0]} points in R^{self.points.shape[1]}"
        if self.witness_value is not None:
            text += f", v^T G v / v^T v = {self.witness_value:.3g}"
        return text + f"): {self.reason}"

    def first_failure(self) -> str:
        """For a violation: the witness points' count and ``v^T G v / v^T v`` against ``-tol``.

        Returns
        -------
        str
            Empty unless the verdict is ``"violation"``.
        """
        if self.verdict != "violation" or self.points is None:
            return ""
        tol = "" if self.tol is None else f" < -tol = {-self.tol.value:.3g}"
        value = "" if self.witness_value is None else f" = {self.witness_value:.6g}"
        return (
            f"{self.kernel} is not a kernel: on {self.points.shape[0]} points in "
            f"R^{self.points.shape[1]} (below) the witness v has v^T G v / v^T v{value}{tol}"
        )

    def advice(self) -> str:
        """For an inconclusive report: why, and what to try; else empty."""
        if self.outcome is not Outcome.INCONCLUSIVE:
            return ""
        if self.mode == "search":
            return "search again with a larger budget or another seed"
        return "evaluate the Gram in higher precision (a kernel with _mp) or use fewer points"

    def details(self) -> str:
        """The points, the witness, ``v^T G v / v^T v`` per precision, the tolerance, the budget."""
        lines = []
        if self.points is not None:
            pts = np.array2string(np.asarray(self.points), precision=6, threshold=40)
            lines.append(f"points ({self.points.shape[0]} x {self.points.shape[1]}):\n{pts}")
        if self.witness is not None:
            lines.append(
                "witness v = "
                + np.array2string(np.asarray(self.witness, dtype=float), precision=6, threshold=40)
            )
        if self.ladder:
            lines.append(
                "v^T G v / v^T v by precision: "
                + ", ".join(f"{p}: {v:.6g}" for p, v in self.ladder)
            )
        if self.tol is not None:
            lines.append(f"tolerance on lambda_min: {self.tol}")
        if self.budget:
            lines.append(f"budget: {self.budget}")
        return "\n".join(lines)

    def shrinks(self) -> bool | None:
        """Whether the witness value is >= 0 or moved toward it as precision rose.

        None without a ladder.  A float64 value already ``>= 0`` (the
        eigenvalue was negative, its eigenvector's quotient is not) counts
        when the highest precision keeps it ``>= 0``.
        """
        if len(self.ladder) < 2:
            return None
        first, last = self.ladder[0][1], self.ladder[-1][1]
        return bool(last > first or last >= 0)


# ---------------------------------------------------------------------------
# Points mode
# ---------------------------------------------------------------------------


def _kernel_tolerance(k, X: np.ndarray, G: np.ndarray) -> tuple[Tolerance, bool]:
    """``||k.error_bound(X)||_F`` plus the check_psd default; (tol, has_model)."""
    base = default_tolerance(G)
    try:
        E = np.asarray(k.error_bound(X), dtype=np.float64)
    except (InvalidArgument, AttributeError, NotImplementedError):
        return (
            Tolerance(
                base.value,
                "kernel has no rounding-error model; only the float resolution: " + base.source,
            ),
            False,
        )
    eb = frobenius(E)
    return (
        Tolerance(
            eb + base.value,
            f"||k.error_bound(X)||_F = {eb:.3g} (bounds ||G_computed - G_exact||_2) "
            f"+ {base.source}",
        ),
        True,
    )


def _points_report(
    k, X: np.ndarray, *, mode="points", extra="", symmetrize: bool = False
) -> KernelReport:
    try:
        G = np.asarray(k(X), dtype=np.float64)
    except (InvalidArgument, NumericalFailure):
        raise
    except Exception as exc:
        raise InvalidArgument(f"`kernel` raised {type(exc).__name__} on the points: {exc}") from exc
    n = G.shape[0]
    tol, has_model = _kernel_tolerance(k, X, G)
    r = check_psd(G, tol=tol, symmetrize=symmetrize)
    lam = r.min_eigenvalue
    w_vec = None
    use_mp = getattr(k, "supports_mp", False) and n <= LADDER_MAX_N
    if r.verdict is Verdict.NOT_PSD:
        w_vec = r.witness
        q64 = r.witness_value
    elif use_mp:  # a negative eigenvalue of the float Gram goes through the precision ladder
        G = 0.5 * (G + G.T)
        wv, V = scipy.linalg.eigh(G, subset_by_index=[0, 0])
        lam = float(wv[0])
        if lam < 0:
            w_vec = V[:, 0]
            q64 = float(w_vec @ G @ w_vec / (w_vec @ w_vec))
    common = dict(kernel=repr(k), mode=mode, points=X, tol=tol, psd=r, min_eigenvalue=float(lam))
    use_ladder = use_mp and w_vec is not None
    if use_ladder:
        assert q64 is not None  # set together with w_vec
        steps, verdict, qlast = precision_ladder(k, X, w_vec, q64)
        if verdict == "violation":
            reason = (
                f"negative value stays as precision rises ({steps[-1][0]}: {qlast:.6g}): "
                "a real violation of positive semi-definiteness"
            )
            return KernelReport(
                False,
                "violation",
                witness=w_vec,
                witness_value=qlast,
                ladder=steps,
                reason=reason + extra,
                **common,
            )
        if verdict == "rounding":
            reason = rounding_reason(lam, q64, steps[-1][0], qlast)
            return KernelReport(
                True,
                "rounding",
                witness=w_vec,
                witness_value=qlast,
                ladder=steps,
                reason=reason + extra,
                **common,
            )
        return KernelReport(
            False,
            "inconclusive",
            witness=w_vec,
            witness_value=qlast,
            ladder=steps,
            reason="the precision ladder neither converged nor shrank" + extra,
            **common,
        )
    if r.verdict is Verdict.NOT_PSD and not has_model:
        return _unmodelled_report(k, X, G, r, tol, extra, common)
    if r.verdict is Verdict.NOT_PSD:
        return KernelReport(
            False,
            "violation",
            witness=w_vec,
            witness_value=r.witness_value,
            ladder=(("float64", r.witness_value),),
            reason=f"v^T G v / v^T v = {r.witness_value:.6g} < -tol = {-tol.value:.3g}, "
            "exact on the float Gram" + extra,
            **common,
        )
    if r.is_psd:
        why = (
            f"Gram PSD within tol ({r.verdict.name}, {'certified' if r.certified else 'estimated'})"
        )
        if w_vec is not None:
            why += f"; lambda_min = {lam:.3g} >= -tol (mpmath ladder unavailable)"
        return KernelReport(True, "psd", reason=why + extra, **common)
    return KernelReport(False, "inconclusive", reason=r.reason + extra, **common)


def _unmodelled_report(k, X, G, r: PSDResult, tol: Tolerance, extra: str, common) -> KernelReport:
    """A float witness of a kernel without an error model, confirmed or not.

    Rounding-level evidence cannot convict a function whose error is unknown:
    :func:`~kernelcheck._src.verify.kernels.precision.unmodelled_witness`
    re-evaluates it in long double where it keeps that format, else asks
    for a margin beyond any rounding; unconfirmed, the report is
    ``"rounding"`` (passed) or ``"inconclusive"``, never ``"violation"``.
    """
    steps, verdict, value, why = unmodelled_witness(k, X, G, r.witness, tol.value)
    reason = (
        f"v^T G v / v^T v = {r.witness_value:.6g} < -tol = {-tol.value:.3g} on the float Gram, "
        f"and the kernel has no rounding-error model: {why}"
    )
    return KernelReport(
        verdict == "rounding",
        verdict,
        witness=r.witness,
        witness_value=value,
        ladder=steps,
        reason=reason + extra,
        **common,
    )


# ---------------------------------------------------------------------------
# Search mode
# ---------------------------------------------------------------------------


def _normalized_min_eig(k, P: np.ndarray, errors: list | None = None) -> float:
    """``lambda_min / max |lambda|`` of the Gram on P; NaN where it cannot be evaluated.

    The first reason a point set could not be evaluated is appended to ``errors``.
    """
    try:
        G = np.asarray(k(P), dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - a point set the kernel cannot evaluate is skipped
        if errors is not None and not errors:
            errors.append(f"{type(exc).__name__}: {exc}")
        return math.nan
    if G.shape != (P.shape[0], P.shape[0]) or not np.isfinite(G).all():
        if errors is not None and not errors:
            errors.append(f"the Gram on {P.shape[0]} points is {describe(G)} (non-finite?)")
        return math.nan
    G = 0.5 * (G + G.T)
    w = np.linalg.eigvalsh(G)
    top = max(abs(w[0]), abs(w[-1]))
    if top == 0 or not math.isfinite(top):
        return 1.0
    return float(w[0] / top)


@dataclass(frozen=True)
class _Candidate:
    index: int
    value: float
    points: np.ndarray
    error: str = ""  # why a point set could not be evaluated (the first one seen)


def _restart(
    k,
    dim: int,
    seedseq: np.random.SeedSequence,
    index: int,
    examples: int,
    maxiter: int,
    explore: str = "seeded",
    space: Domain | None = None,
) -> _Candidate:
    """One independent restart: Hypothesis-targeted draw, then L-BFGS-B.

    Deterministic given (kernel, dim, seedseq, index): the Hypothesis phase
    is seeded from ``seedseq`` and runs without a database.  With a box
    ``space`` every latent point set is mapped into it
    (:meth:`~kernelcheck._src.verify.kernels.domain.Domain.map`); with a sampler the
    starting sets are its draws and the optimiser does not run.
    """
    rng = np.random.default_rng(seedseq)
    n = _SIZES[index % len(_SIZES)]
    scale = _SCALES[(index // len(_SIZES)) % len(_SCALES)]
    best: dict[str, Any] = {"value": math.inf, "points": None, "latent": None}
    errors: list[str] = []

    def consider(Z):
        P = space.map(np.asarray(Z, dtype=np.float64)) if space is not None else Z
        val = _normalized_min_eig(k, P, errors)
        if math.isnan(val):
            return 1.0  # not evaluable: the largest normalised value, so the optimiser moves on
        if val < best["value"]:
            best["value"], best["points"] = val, np.array(P, dtype=np.float64)
            best["latent"] = np.array(Z, dtype=np.float64)
        return val

    if space is not None and space.sampler is not None:
        for _ in range(max(examples, 1)):
            consider(space.sample(rng, n, dim))
        if best["points"] is None:
            return _Candidate(index, math.inf, np.empty((0, dim)), errors[0] if errors else "")
        return _Candidate(index, float(best["value"]), best["points"])
    if examples > 0 and explore == "hypothesis":
        _hypothesis_phase(consider, n, dim, scale, int(rng.integers(2**31)), examples)
    elif examples > 0:
        _seeded_phase(consider, rng, n, dim, scale, examples)
    if best["points"] is None:
        consider(rng.normal(scale=scale, size=(n, dim)))
    if best["points"] is None:  # the kernel could not be evaluated anywhere
        return _Candidate(index, math.inf, np.empty((0, dim)), errors[0] if errors else "")
    x0 = best["latent"].ravel()
    bound = 8.0 * scale

    def f(x):
        return consider(x.reshape(n, dim))

    try:
        scipy.optimize.minimize(
            f,
            x0,
            method="L-BFGS-B",
            bounds=[(-bound, bound)] * x0.size,
            options={"maxiter": maxiter},
        )
    except (ValueError, FloatingPointError):  # pragma: no cover - optimiser edge cases
        pass
    return _Candidate(index, float(best["value"]), best["points"])


def _seeded_phase(consider, rng: np.random.Generator, n, dim, scale, examples):
    """Seeded starting point sets from families that break non-kernels.

    Cycles through: a Gaussian cloud, near-duplicate pairs (a point and a
    1e-3 perturbation), collinear points, two tight clusters, points on a
    sphere of radius ``2 scale`` and a cloud at mixed scales.  Every draw
    comes from ``rng``, so a restart is reproducible bit for bit in any
    process (Hypothesis' own generation is not reproducible across process
    state even under ``@seed``, which is why it is opt-in).
    """
    for e in range(examples):
        family = e % 6
        if family == 0:
            P = rng.normal(scale=scale, size=(n, dim))
        elif family == 1:
            base = rng.normal(scale=scale, size=((n + 1) // 2, dim))
            P = np.concatenate([base, base + 1e-3 * scale * rng.normal(size=base.shape)])[:n]
        elif family == 2:
            direction = rng.normal(size=dim)
            direction /= np.linalg.norm(direction)
            P = rng.normal(scale=scale, size=(n, 1)) * direction[None, :]
        elif family == 3:
            centres = rng.normal(scale=2 * scale, size=(2, dim))
            P = centres[np.arange(n) % 2] + 0.05 * scale * rng.normal(size=(n, dim))
        elif family == 4:
            P = rng.normal(size=(n, dim))
            P *= 2 * scale / np.linalg.norm(P, axis=1, keepdims=True)
        else:
            P = rng.normal(size=(n, dim)) * (scale * np.exp(rng.uniform(-2, 1, size=(n, 1))))
        consider(P)


def _hypothesis_phase(consider, n, dim, scale, hseed, examples):
    """Hypothesis-drawn point sets of n points, targeted at a small normalised eigenvalue."""
    try:
        from hypothesis import HealthCheck, Phase, given, seed, settings, target
        from hypothesis import strategies as st

        from kernelcheck._src.testing.strategies import point_sets
    except ImportError:  # pragma: no cover
        return
    strategy = point_sets(min_points=n, max_points=n, dim=dim, max_norm=3.0 * scale)

    @seed(hseed)
    @settings(
        max_examples=examples,
        database=None,
        derandomize=False,
        deadline=None,
        phases=[Phase.generate, Phase.target],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(strategy, st.just(None))
    def run(P, _):
        val = consider(P)
        target(-val)

    try:
        run()
    except Exception:  # noqa: BLE001 - a failing draw only loses that phase; the optimiser follows
        return


def _search(
    k, dim: int, seed, budget: int, executor, explore: str = "seeded", space=None
) -> KernelReport:
    if isinstance(seed, np.random.SeedSequence):
        ss = seed
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        ss = np.random.SeedSequence(int(seed))
    else:
        raise InvalidArgument(
            "`seed` must be a non-negative int or a numpy.random.SeedSequence, "
            f"got {describe(seed)}"
        )
    children = [child_seed(ss, i) for i in range(budget)]
    best: _Candidate | None = None
    done = 0
    for start in range(0, budget, ROUND):
        idx = range(start, min(start + ROUND, budget))
        args = [(k, dim, children[i], i, _EXAMPLES, _MAXITER, explore, space) for i in idx]
        if executor is None:
            cands = [_restart(*a) for a in args]
        else:
            futures = [executor.submit(_restart, *a) for a in args]
            cands = [fut.result() for fut in futures]  # by index: schedule-independent
        done += len(cands)
        ordered = sorted(cands, key=lambda c: (c.value, c.index))
        for c in ordered:
            if best is None or (c.value, c.index) < (best.value, best.index):
                best = c
        for c in ordered[:_CONFIRM]:
            if not c.value < 0:
                break
            rep = _points_report(k, c.points, mode="search")
            if rep.verdict == "violation":
                return _with_budget(
                    rep, budget, done, dim, f"; found by restart {c.index} of {done} run"
                )
    assert best is not None
    spent = _budget_text(budget, done, dim)
    if space is not None:
        spent += f", in {space.text}"
    if best.points.shape[0] == 0:
        first = best.error or "every call raised or returned non-finite or wrongly shaped values"
        return KernelReport(
            False,
            "inconclusive",
            kernel=repr(k),
            mode="search",
            budget=spent,
            restarts=done,
            reason=f"the kernel could not be evaluated on any point set of the search ({spent}); "
            f"the first failure: {first}",
        )
    return KernelReport(
        True,
        "no_counterexample",
        kernel=repr(k),
        mode="search",
        points=best.points,
        min_eigenvalue=best.value,
        budget=spent,
        restarts=done,
        reason=f"no point set with a real negative eigenvalue in {spent}; most negative "
        f"normalised lambda_min seen {best.value:.3g} (restart {best.index})",
    )


def _budget_text(budget, done, dim):
    return (
        f"{done} of {budget} restarts x ({_EXAMPLES} starting sets + L-BFGS-B <= {_MAXITER} "
        f"iterations) on sets of {min(_SIZES)}..{max(_SIZES)} points in R^{dim}"
    )


def _with_budget(rep: KernelReport, budget, done, dim, extra) -> KernelReport:
    import dataclasses

    return dataclasses.replace(
        rep, budget=_budget_text(budget, done, dim), restarts=done, reason=rep.reason + extra
    )


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------


#: How a plain function passed as ``kernel`` was read, for the report.
_PLAIN = (
    "; `kernel` is a plain function, judged as {how} "
    "(no rounding-error model unless kernel_from_function(..., error_bound=) is used)"
)


def _probe(f, args) -> tuple[Any, Exception | None]:
    try:
        return f(*(np.array(a) for a in args)), None
    except Exception as exc:  # noqa: BLE001 - reported to the caller below
        return None, exc


def _as_kernel(k, d: int) -> tuple[Any, str]:
    """A kernelcheck kernel for ``k``, and a note when a plain function was wrapped.

    A plain callable is probed once on fixed points in ``R^d``: ``f(X, Y)`` on
    point sets of shapes (2, d) and (3, d) returning a (2, 3) block means
    ``kernel_from_function(f, blocks=True)``; ``f(x, y)`` on two points returning
    a real number means ``kernel_from_function(f)``.  Otherwise the error (with
    what each call raised) names the fix.
    """
    if isinstance(k, Kernel):
        return k, ""
    if not callable(k):
        raise InvalidArgument(
            f"`kernel` must be a kernel (callable on point sets), got {describe(k)}"
        )
    base = np.linspace(-0.5, 0.5, 5 * d).reshape(5, d)
    out, e1 = _probe(k, (base[:2], base[2:]))
    if e1 is None and np.shape(out) == (2, 3) and np.asarray(out).dtype.kind in "biuf":
        return kernel_from_function(k, blocks=True), _PLAIN.format(
            how="kernel_from_function(f, blocks=True)"
        )
    out2, e2 = _probe(k, (base[0], base[1]))
    if e2 is None and np.ndim(out2) == 0 and np.asarray(out2).dtype.kind in "biuf":
        return kernel_from_function(k), _PLAIN.format(
            how="kernel_from_function(f) of f(x, y) -> float"
        )
    out3, e3 = _probe(k, (base[:3],))
    if e3 is None and np.shape(out3) == (3, 3):
        return k, _PLAIN.format(how="f(X) -> Gram matrix")
    said = [
        f"raised {type(e).__name__}: {e}" if e else f"returned {describe(o)}"
        for o, e in ((out, e1), (out2, e2), (out3, e3))
    ]
    raise InvalidArgument(
        f"`kernel` is a plain function, not a kernelcheck kernel, and no reading works: "
        f"on point sets of shapes (2, {d}) and (3, {d}) it {said[0]}; on two points of "
        f"length {d} it {said[1]}; on one point set of shape (3, {d}) it {said[2]}.  Wrap it: "
        "kernel_from_function(f, blocks=True) for f(X, Y) -> (n, m) Gram blocks, "
        "kernel_from_function(f) for f(x, y) -> float"
    )


def _kernel_iv(k, X, dim, budget):
    if not callable(k):
        raise InvalidArgument(
            f"`kernel` must be a kernel (callable on point sets), got {describe(k)}"
        )
    budget = as_int(budget, "budget", minimum=1, maximum=100000)
    if X is None:
        if dim is None:
            raise InvalidArgument(
                "`dim` must be given when `X` is None (the search needs a dimension)"
            )
        dim = as_int(dim, "dim", minimum=1, maximum=64)
        return None, dim, budget
    X = as_points(X, "X", dim=None)
    if dim is not None and as_int(dim, "dim", minimum=1) != X.shape[1]:
        raise InvalidArgument(f"`dim` = {dim} does not match `X` with d = {X.shape[1]} columns")
    return np.asarray(X, dtype=np.float64), X.shape[1], budget


@honours_timeout
def kernel(
    kernel,
    X=None,
    *,
    dim: int | None = None,
    seed=0,
    budget: int = 32,
    executor=None,
    explore: str = "seeded",
    symmetrize: bool = False,
    domain=None,
    timeout: float | None = None,
) -> KernelReport:
    r"""Is ``kernel`` positive semi-definite -- a kernel (claims C5, C6)?

    Parameters
    ----------
    kernel : Kernel or callable
        A kernelcheck kernel (built-in, algebra tree or
        :func:`~kernelcheck.kernels.kernel_from_function`).  A plain function
        is accepted with a note in the report: ``f(X, Y) -> (n, m)`` on two
        point sets, or ``f(x, y) -> float`` on two points (probed once); one
        that fits neither is refused at once with what each call raised.
    X : array_like (n, d) or None, default None
        Points.  Given: judge the Gram ``kernel(X)`` with the precision ladder.
        None: search for a counterexample in ``R^dim``.
    dim : int or None, default None
        Dimension for the search (required when ``X`` is None).
    seed : int or numpy.random.SeedSequence, default 0
        Seeds the search; restart ``i`` uses ``SeedSequence(seed).spawn(budget)[i]``.
    budget : int, default 32
        Number of restarts of the search (default 32); each restart costs at
        most ``10`` starting point sets plus ``80`` L-BFGS-B iterations on
        2..8 points (a few hundred Gram evaluations).
    executor : concurrent.futures.Executor or None, default None
        Runs the restarts of a round in parallel (a process pool needs a
        picklable kernel).  The report is the same for any executor.
    explore : {"seeded", "hypothesis"}, default "seeded"
        How each restart picks its starting sets.  ``"seeded"`` (default):
        seeded families (Gaussian clouds, near duplicates, collinear points,
        clusters, spheres, mixed scales), reproducible bit for bit in any
        process.  ``"hypothesis"``: Hypothesis-targeted draws (``target`` on
        the normalised smallest eigenvalue); wider, but Hypothesis' generation
        depends on process state even under ``@seed``, so the report may
        differ between processes (not for the verdict on a clear violation).
    symmetrize : bool, default False
        A Gram asymmetric beyond rounding level (``max |G - G^T| > 1024 u
        max |G|``) is an error naming this option; with ``symmetrize=True`` its
        exact symmetric part is judged (see :func:`~kernelcheck.psd.check_psd`).
    domain : (low, high) or callable or None, default None
        Search mode only: where the points live.  ``(low, high)``: a box,
        each a number or an array of length ``dim`` with ``low < high``
        (``-inf`` / ``inf`` allowed for a half-line, e.g. ``(0, inf)`` for
        histogram kernels); every point searched is strictly inside.  A
        callable ``sampler(rng, n) -> (n, dim)`` array: the starting sets are
        drawn from it and not moved by the optimiser.
    timeout : float or None, default None
        Seconds from the start of the check within which every call of a
        user's kernel function must return (in this process:
        :func:`~kernelcheck._src.core.deadline.run_user`; a late call is
        abandoned, not stopped); None (default) waits for ever.

    Returns
    -------
    KernelReport
        ``passed``, ``verdict``, the witness points and vector, the precision
        ladder and the tolerance used.

    Notes
    -----
    Tolerance on the float Gram: ``||kernel.error_bound(X)||_F`` (a bound on
    ``||G_float - G_exact||_2``) plus the
    :func:`~kernelcheck.psd.default_tolerance`.  A witness ``v`` is a real
    violation when ``v^T G v / v^T v`` stays negative as the Gram is
    re-evaluated at 30, 60, 120 digits (consecutive values agree to 1e-3
    relative, beyond the mpmath error bound ``10^(3-dps) |v|^T |G| |v| / v^T v``);
    it is rounding when the value rises above ``-bound``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import Gaussian, kernel_from_function
    >>> from kernelcheck.verify import kernel
    >>> kernel(Gaussian(1.0), np.linspace(0, 1, 5)[:, None]).passed
    True
    >>> neg = kernel_from_function(lambda X, Y: -np.linalg.norm(X - Y, axis=-1), vectorized=True)
    >>> report = kernel(neg, dim=1, budget=8)
    >>> report.verdict, report.passed
    ('violation', False)
    """
    X, dim, budget = _kernel_iv(kernel, X, dim, budget)
    executor = as_executor(executor)
    check_choice(explore, "explore", ("seeded", "hypothesis"))
    symmetrize = as_bool(symmetrize, "symmetrize")
    if domain is not None and X is not None:
        raise InvalidArgument("`domain` restricts the search: pass it without `X`")
    space = as_domain(domain, dim) if X is None else None
    k, note = _as_kernel(kernel, dim)
    if X is not None:
        return _points_report(k, X, symmetrize=symmetrize, extra=note)
    rep = _search(k, dim, seed, budget, executor, explore, space)
    return dataclasses.replace(rep, reason=rep.reason + note) if note else rep
