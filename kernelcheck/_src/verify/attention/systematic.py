"""Systematic errors below the worst-case bound: a sign-flip test over independent replicates.

A layer that is off by a relative ``r`` from some position on, by a constant
shift, or by a scale can stay within the worst-case bound of every entry
when ``r`` is below the bound's few units of the storage format (about 1% in
bfloat16).  Rounding errors do not look like that: on inputs drawn at
random they change sign from one draw to the next, while a systematic error
keeps its sign and size.  This module tests that difference.

**Replicates.**  The law of the judged ``positive values`` case (values in
[0.5, 1.5], small logits: the output is as large as the sums behind it) is
drawn again ``REPLICATES`` times, at the ``across blocks`` case's length
when the layer was judged there (blocks are crossed), else at the case's
own; each draw comes from its own child seed and is handed to the layer in
its own call, so the replicates are independent.  On replicate ``b`` the
residual ``E = got - ref`` is fitted along a few directions ``a_k`` over the
token axis: a relative scale of the output from token ``t`` on (``a = ref``
on rows ``>= t``) and a shift from token ``t`` on (``a = 1`` on rows
``>= t``), ``t`` in ``{0, n/4, n/2, 3n/4}``:

    T_bk = <E, w a_k> / <a_k, w a_k>,    w = 1 / tol^2,

``tol`` the case's entrywise worst-case tolerance (the weights only shape the
power; any weights computed from the replicate's own data keep the test
valid).  Each gradient the gradient check compares (``grad=True``) is
fitted the same way, apart, and so is the hand-over's output with
``state=True`` (the replicate run in pieces, each handed the state the last
returned, as the state check runs it, within the tolerance the handed
state widens): a state dropped or misread at a cut takes a share of the
output with it on every draw, far inside the handed state's worst-case
bound in 16 bits.  Claims C1, C10, C14, C19, C20.

**Null model.**  A correct layer computes the reference formula, and on a
replicate drawn at random its statistic is ``T_bk = mu_bk + Y_bk`` with
``Y_bk`` symmetric about 0 and independent across replicates (independent
draws, separate calls), and a mean ``|mu_bk| <= beta_bk``, the projection of
the entrywise bias allowance

    bias = u_max tol + 16 u_acc |ref|  (+ u_s |ref|)

onto the direction.  The first term covers roundings to nearest: the mean
error of rounding a value drawn from a smooth law is of second order
(``O(u^2)`` where the worst case is ``u``), so their bias is at most ``u``
times their share of the worst-case bound (``u_max``: the largest unit
roundoff of the model).  The second covers elementary functions (exp, log,
division approximations) whose errors may keep one sign: 16 units of the
accumulation format along a term's path, relative to the output.  The third
covers a constant rounded once to the storage format (a logit scale, a
feature scale), whose error is the same on every draw: it applies to the
outputs such a constant multiplies (an unnormalised output; softmax's
``dQ`` and ``dK``, proportional to the logit scale).  Formats whose
roundings may keep a sign are not judged: a 16-bit accumulation (stagnation
of a long sum) and ``"tf32"`` operands (which implementations may truncate:
the mean error of a truncation is about half an ulp, of first order).  TF32
declared rounded to nearest (``dtype="tf32-nearest"``) is judged as the
16-bit formats are, its results taken in float32.
Data that is not drawn at random (repeated tokens, a constant sequence, the
caller's inputs) is never used: the replicates are kernelcheck's own
independent draws, so structure in the data cannot mimic or mask a
systematic error.  A float64 layer is left to the worst-case bound (within
``n`` units of 1e-16 already), and a layer the bound has refuted is not
tested again.

**Test.**  For every direction and sign the one-sided sign-flip test is run
on ``T - beta`` (upper) and ``-(T + beta)`` (lower): its p-value is the
fraction of the ``2^B`` sign patterns ``e`` with ``sum_b e_b |x_b| >=
sum_b x_b``, counted exactly (by halves).  Under the null each is at most
the stated level: for symmetric independent ``Y`` the test on ``Y`` is exact,
and lowering any ``x_b`` (as subtracting ``beta_b - mu_b >= 0`` does) never
lowers the p-value.  The smallest p-value times the number of one-sided
tests (Bonferroni) is compared with ``FALSE_ALARM`` = 1e-6: the probability
that a correct layer fails one such check is at most 1e-6, whatever the
dependence between directions.  With ``B = 24`` the smallest attainable
p-value is ``2^-24 = 6.0e-8``, below the per-test level ``1e-6 / 16``
(eight directions, two signs).

**Power.**  A systematic error is caught when it keeps its sign on
(about) every replicate beyond the bias allowance: roughly from 3-4 times
the standard deviation of ``T_bk`` over draws, which falls like the square
root of the number of entries the direction covers.  A relative error from
n/2 on is caught from about ``3e-4`` in bfloat16, ``5e-5`` in float16 and
``1.2e-6`` in float32 (measured on causal softmax and linear layers, see
docs/verify-comparison.md), where the worst-case bound lets about ``1e-2``,
``1.5e-3`` and ``1e-5`` pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from kernelcheck._src.core.rounding import PRECISIONS, PRODUCT_ONLY, TRUNCATABLE, RoundingModel
from kernelcheck._src.core.seeds import child_seed
from kernelcheck._src.verify.adapters import round_to
from kernelcheck._src.verify.attention.cases import generate_cases
from kernelcheck._src.verify.attention.checks import grad_checks, split_check
from kernelcheck._src.verify.attention.report import AttentionCase, skipped_case
from kernelcheck._src.verify.attention.run import Judged, Run, run_case
from kernelcheck.errors import InvalidArgument

__all__ = [
    "REPLICATES",
    "FALSE_ALARM",
    "TIER_CASES",
    "FUNCTION_BIAS_ULPS",
    "Fit",
    "directions",
    "fit",
    "sign_flip_pvalue",
    "judge",
    "systematic_checks",
]

#: Independent draws per judged case.
REPLICATES = 24

#: The probability that a correct layer fails one systematic-error check (union bound).
FALSE_ALARM = 1e-6

#: The judged cases whose law is drawn again for the test.
TIER_CASES = ("positive values",)

#: Units of the accumulation format an elementary function may err by with one sign.
FUNCTION_BIAS_ULPS = 16


class Fit(NamedTuple):
    """The statistics of one replicate: one fitted effect and bias bound per direction."""

    effect: np.ndarray  # (m,) fitted coefficient along each direction
    bias: np.ndarray  # (m,) the null's bound on its mean
    scale: np.ndarray  # (m,) relative size of a unit coefficient (1 for a scale; 1/mean|ref|)


def change_points(n: int) -> tuple[int, ...]:
    """The first rows of the directions: ``0, n/4, n/2, 3n/4`` (rounded down, distinct)."""
    return tuple(sorted({0, n // 4, n // 2, (3 * n) // 4}))


def directions(n: int) -> list[tuple[str, int]]:
    """The fitted directions as ``(kind, t)``: a relative scale and a shift from row ``t`` on."""
    return [(kind, t) for kind in ("scale", "shift") for t in change_points(n)]


def bias_bound(
    ref: np.ndarray, tol: np.ndarray, model: RoundingModel, constant: bool
) -> np.ndarray:
    """The null's entrywise bound on a correct layer's mean error.

    ``u_max tol + 16 u_acc |ref|``, plus ``u_s |ref|`` for an output that a
    constant factor of the layer multiplies (``constant``): a constant
    rounded once to the storage format keeps its error on every draw.
    """
    u_max = max(model.accumulate.u, model.storage.u)
    rel = FUNCTION_BIAS_ULPS * model.accumulate.u + (model.storage.u if constant else 0.0)
    return u_max * tol + rel * np.abs(ref)


def stored(ref: np.ndarray, model: RoundingModel) -> np.ndarray:
    """The reference rounded once to the layer's storage format: what the residual is taken from.

    A layer hands back its result in its storage format, so its last
    rounding is a function of the exact value.  Where the outputs of every
    draw lie within an ulp of each other next to a power of two, that one
    rounding keeps its sign on every draw: a bfloat16 layer averaging
    values of [0.5, 1.5] over n = 16384 tokens returns 1 +- 0.002, less than
    half a bfloat16 ulp, and rounding it moved every row by -2.8e-4 of its
    size, a systematic error of no bug.  The residual ``got - stored(ref)``
    keeps the rest: a difference the layer's own arithmetic makes (which
    moves its result across a rounding boundary, either way) or a bug's.
    """
    # a product-only format (TF32) rounds operands, never a result: results are float32
    fmt = model.accumulate if model.storage.name in PRODUCT_ONLY else model.storage
    try:
        return round_to(ref, fmt)
    except InvalidArgument:  # beyond the format's range: the layer could not store it either
        return ref


def fit(got: np.ndarray, ref: np.ndarray, tol: np.ndarray, bias: np.ndarray) -> Fit:
    """The residual ``got - ref`` fitted along every direction of :func:`directions`.

    Weighted least squares with weights ``1 / tol^2`` (entries of zero
    tolerance take the smallest positive one's weight); a direction with no
    weight (an all-zero reference tail) has effect and bias 0.
    """
    n = ref.shape[-2]
    E = got - ref
    positive = tol[tol > 0]
    floor = float(positive.min()) if positive.size else 1.0
    w = 1.0 / np.maximum(tol, floor) ** 2
    rows = np.arange(n)[:, None]
    effect, bound, scale = [], [], []
    mean_ref = float(np.mean(np.abs(ref))) or 1.0
    for kind, t in directions(n):
        mask = np.broadcast_to(rows >= t, ref.shape)
        a = np.where(mask, ref if kind == "scale" else 1.0, 0.0)
        wa = w * a
        norm = float(np.sum(wa * a))
        if not norm > 0 or not math.isfinite(norm):
            effect.append(0.0)
            bound.append(0.0)
        else:
            effect.append(float(np.sum(wa * E)) / norm)
            bound.append(float(np.sum(np.abs(wa) * bias)) / norm)
        scale.append(1.0 if kind == "scale" else 1.0 / mean_ref)
    return Fit(np.array(effect), np.array(bound), np.array(scale))


def _pattern_sums(y: np.ndarray) -> np.ndarray:
    """``sum_b e_b y_b`` for every sign pattern ``e`` of ``{-1, 1}^len(y)``."""
    sums = np.zeros(1)
    for v in y:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def sign_flip_pvalue(x: np.ndarray) -> float:
    """Exact one-sided sign-flip p-value: the fraction of patterns with ``sum e |x| >= sum x``.

    For ``x`` independent and symmetric about 0 it is a valid p-value
    (``P(p <= a) <= a``); it never decreases when an entry of ``x`` is
    lowered.  The ``2^B`` pattern sums are formed as two halves of
    ``2^(B/2)`` each and counted by sorting; a relative slack of ``B`` units
    of float64 in the comparison counts ties (the observed pattern among
    them) whatever the order of summation.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.abs(x)
    observed = float(x.sum())
    half = x.size // 2
    first, second = _pattern_sums(y[:half]), np.sort(_pattern_sums(y[half:]))
    slack = (x.size + 1) * np.finfo(np.float64).eps * float(y.sum())
    need = observed - slack - first
    count = second.size - np.searchsorted(second, need, side="left")
    return float(count.sum()) / float(first.size * second.size)


class Verdict(NamedTuple):
    """The test over the replicates: adjusted p-value, the direction and sign it came from."""

    p: float  # the smallest one-sided p-value times the number of one-sided tests
    direction: int  # the index of the direction in :func:`directions`
    sign: int  # +1: the fitted effect is positive; -1: negative
    effect: float  # the mean fitted effect along that direction, relative
    detectable: float  # the smallest relative effect the replicates could show, see below


def judge(fits: list[Fit]) -> Verdict:
    """The sign-flip test of every direction and sign over the replicates' fits.

    ``detectable`` is the mean relative bias allowance plus four standard
    deviations of the fitted effects over the replicates (minimised over the
    directions): roughly the smallest systematic error that would keep its
    sign on every replicate.
    """
    effect = np.array([f.effect for f in fits])  # (B, m)
    bias = np.array([f.bias for f in fits])
    scale = np.array([f.scale for f in fits])
    m = effect.shape[1]
    tests = 2 * m
    rel = effect * scale
    spread = rel.std(axis=0, ddof=1) if rel.shape[0] > 1 else np.full(m, math.inf)
    best = (math.inf, -math.inf, 0, 1)
    for k in range(m):
        for sign in (1, -1):
            p = sign_flip_pvalue(sign * effect[:, k] - bias[:, k])
            # ties (every draw beyond the allowance) go to the clearest direction
            z = abs(float(rel[:, k].mean())) / float(spread[k]) if spread[k] > 0 else 0.0
            if (p, -z) < (best[0], -best[1]):
                best = (p, z, k, sign)
    p, _, k, sign = best
    detectable = float(np.min((bias * scale).mean(axis=0) + 4.0 * spread))
    return Verdict(min(1.0, p * tests), k, sign, float(rel[:, k].mean()), detectable)


def not_judged_reason(model: RoundingModel) -> str:
    """Why the rounding model leaves room for errors of one sign ('' when it does not)."""
    if model.storage.name in TRUNCATABLE:
        return (
            f"{model.storage.name} operands may be truncated rather than rounded to nearest "
            "(errors of one sign): the worst-case check alone judges this precision "
            "(dtype='tf32-nearest' declares products that round their operands to nearest)"
        )
    if model.accumulate.u > PRECISIONS["float32"].u:
        return (
            f"a sum accumulated in {model.accumulate.name} can stagnate (errors of one sign): "
            "the worst-case check alone judges this precision"
        )
    return ""


def _outputs(run: Run, j: Judged, rng, grad: bool, vjp) -> dict[str, tuple]:
    """``{output: (got, ref, tol)}`` of one judged replicate: ``"out"``, the hand-over's, the
    gradients.

    The hand-over (``state=True``) is the state check's, in pieces cut at n/2,
    n - 2 and n - 1; the gradients are those the gradient check compares,
    along a cotangent it draws the same way
    (:func:`~kernelcheck._src.verify.attention.checks.grad_checks`).
    """
    out = {"out": (j.output, j.reference, j.tolerance)}
    pairs: list = []
    if run.state:
        split_check(run, j, collect=pairs)
    if grad:
        grad_checks(run, j, rng, vjp, collect=pairs)
    out.update({name: (g, r, t) for name, g, r, t in pairs})
    return out


def _replicates(run: Run, j0: Judged, n: int, root, extras_for: Callable, grad: bool, vjp):
    """The fits of ``n``-token replicates of ``j0``'s law, by output; the number of draws judged."""
    name, shape = j0.case.name, j0.Q.shape
    batch, d, d_v = shape[:-2], shape[-1], j0.V.shape[-1]
    fits: dict[str, list[Fit]] = {}
    judged, why = 0, ""
    for b in range(REPLICATES):
        rng = np.random.default_rng(child_seed(root, b))
        case = generate_cases(rng, n, d, d_v, batch, fixed_d=False, names=(name,))[0]
        j = run_case(run, case, extras_for(case, rng), explain=False)
        if j.reference is None or j.output is None or j.case.passed is None or j.model is None:
            why = why or j.case.note
            continue
        outputs = _outputs(run, j, rng, grad, vjp)
        judged += 1
        for key, (got, ref, tol) in outputs.items():
            constant = key in ("dQ", "dK") or not run.reference.normalize
            bias = bias_bound(ref, tol, j.model, constant)
            fits.setdefault(key, []).append(fit(got, stored(ref, j.model), tol, bias))
    return fits, judged, why


def _label(output: str, case: str) -> str:
    return (
        f"systematic error ({case})" if output == "out" else f"systematic error {output} ({case})"
    )


def _verdict_case(label: str, shape: tuple, n: int, v: Verdict, draws: int) -> AttentionCase:
    """The test's verdict as a check of the report.

    It has no entrywise numbers: ``ratio`` is 0 (the report's worst entry
    stays an entrywise one), ``max_error`` 0 when it passed and ``inf`` when
    it failed (as the causality check's), and the note carries the fitted
    error, where it lies and the p-value; ``detectable`` the smallest
    relative systematic error the draws could show.
    """
    kind, t = directions(n)[v.direction]
    rows = "every row" if t == 0 else f"rows {t}-{n - 1}"
    what = "relative error" if kind == "scale" else "shift (relative to the mean |output|)"
    passed = v.p > FALSE_ALARM
    if passed:
        note = (
            f"no systematic error: {draws} independent draws, smallest adjusted sign-flip p = "
            f"{v.p:.2g} (fails below {FALSE_ALARM:g})"
        )
    else:
        note = (
            f"a {what} of {v.effect:+.3g} on {rows} keeps its sign on {draws} independent draws "
            f"beyond rounding (sign-flip p = {v.p:.2g} after {2 * len(directions(n))} tests; a "
            f"correct layer fails with probability {FALSE_ALARM:g})"
        )
    return AttentionCase(
        label, shape, passed, 0.0 if passed else math.inf, 0.0, math.nan, None, math.nan, note,
        detectable=v.detectable,
    )  # fmt: skip


def replicate_length(j0: Judged, judged: list[Judged]) -> int:
    """Tokens per replicate: the case's, or the ``across blocks`` case's where the layer took it.

    Blocks are crossed when the layer was judged on the ``across blocks``
    case (it accepts that length); a layer that takes only some lengths (a
    multiple of its chunk) is tested at the length of the case itself.
    """
    n = int(j0.Q.shape[-2])
    across = [
        j.Q.shape[-2] for j in judged if j.case.name == "across blocks" and j.output is not None
    ]
    return max([n, *across])


def systematic_checks(
    run: Run, judged: list[Judged], root, extras_for: Callable, grad: bool, vjp=None
) -> list[AttentionCase]:
    """The systematic-error test (module docstring) on the law of each judged tier case.

    Parameters
    ----------
    run : Run
        The layer and its options.
    judged : list of Judged
        The judged cases; the law of those named in :data:`TIER_CASES` is
        drawn again at :func:`replicate_length` tokens.
    root : numpy.random.SeedSequence
        The seed of the test; replicate ``b`` of the ``i``-th case draws from
        ``child_seed(root, i, b)``.
    extras_for : callable
        ``extras_for(case, rng)``: the per-token inputs of a drawn case.
    grad : bool
        Also test the gradients the family has a reference for.
    vjp : callable, default None
        A NumPy layer's backward pass.

    Returns
    -------
    list of AttentionCase
        One check per case and output, passed True/False, or skipped with the reason.
    """
    out: list[AttentionCase] = []
    for i, j0 in enumerate(judged):
        name = j0.case.name
        if name == "user inputs":
            out.append(skipped_case(_label("out", name), tuple(j0.case.shape), (
                "not judged: the caller's inputs are one draw, and the test needs independent "
                "draws of kernelcheck's own"
            )))  # fmt: skip
            continue
        if name not in TIER_CASES or j0.reference is None or j0.model is None:
            continue
        if max(j0.model.storage.u, j0.model.accumulate.u) < PRECISIONS["float32"].u:
            continue  # float64: the worst-case bound is within n units of 1e-16 already
        n = replicate_length(j0, judged)
        shape = tuple(j0.Q.shape[:-2]) + (n, j0.Q.shape[-1])
        where = f"{name}, n = {n}"
        reason = not_judged_reason(j0.model)
        failed = [j.case.name for j in judged if j.case.passed is False]
        if failed:
            reason = f"the layer already failed case '{failed[0]}' beyond its worst-case bound"
        if reason:
            out.append(skipped_case(_label("out", where), shape, f"not judged: {reason}"))
            continue
        fits, draws, why = _replicates(run, j0, n, child_seed(root, i), extras_for, grad, vjp)
        for key in ("out", *(k for k in fits if k != "out")):
            got = fits.get(key, [])
            if 2.0 ** -len(got) * 2 * len(directions(n)) > FALSE_ALARM:
                out.append(skipped_case(_label(key, where), shape, (
                    f"not judged: {len(got)} of {REPLICATES} independent draws could be "
                    f"judged, too few for a false-alarm rate of {FALSE_ALARM:g}"
                    + (f" (a draw: {why})" if why else "")
                )))  # fmt: skip
                continue
            out.append(_verdict_case(_label(key, where), shape, n, judge(got), draws))
    return out
