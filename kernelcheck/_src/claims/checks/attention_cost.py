"""Claim checks of the group "Attention and its cost" (C1, C2, C3).

C1 reads the softmax weights from the library's own softmax; C2 and C3 fit
the exponent in n of the attention cost model and, above the quick level, of
measured times (one scaling measurement per level, shared by C2 and C3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.families.softmax.bound import softmax_error_bound
from kernelcheck._src.attention.families.softmax.forms import softmax
from kernelcheck._src.attention.registry import cost_model
from kernelcheck._src.claims.checks.common import (
    Check,
    all_verdict,
    fit_exponent,
    fmt,
    pick,
    qkv,
    run_scaling,
    statement,
)
from kernelcheck._src.core.rounding import matmul_error_bound
from kernelcheck._src.scaling.forms import EXPECTED_EXPONENTS

__all__ = ["CHECKS", "check_c1", "check_c2", "check_c3"]


def _softmax_row(causal: bool, scale: float, n: int, d: int, d_v: int) -> tuple[dict, dict]:
    """One mask and logit scale of C1: its statement and its extreme numbers."""
    Q, K, V = qkv(100 + int(scale), n, d, d_v, scale)
    eye = np.eye(n)
    W = softmax(Q, K, eye, causal=causal)
    EW = softmax_error_bound(Q, K, eye, causal=causal)
    ones = softmax(Q, K, np.ones((n, 1)), causal=causal)[:, 0]
    E1 = softmax_error_bound(Q, K, np.ones((n, 1)), causal=causal)[:, 0]
    A = softmax(Q, K, V, causal=causal)
    EA = softmax_error_bound(Q, K, V, causal=causal)
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
    kind = "causal" if causal else "bidirectional"
    row = statement(
        f"{kind}, logit scale {scale:g}: w_ij >= 0, rows sum to 1, "
        "a_i = sum_j w_ij v_j in the hull of its v_j",
        nonneg and masked and sums and inside and bool(combo.all()),
        f"min w {fmt(W.min())}, max |sum - 1| {fmt(np.abs(ones - 1).max())} <= tol {fmt(E1.max())}",
    )
    extremes = {
        "sum": float(np.abs(ones - 1.0).max()),
        "weight": float(W.min()),
        "excess": float((np.maximum(lo - A, A - hi)).max()),
    }
    return row, extremes


def check_c1(level: str):
    """Softmax weights are non-negative and sum to one; outputs lie in the convex hull.

    The weights are read from the library's own softmax: with ``V = I_n`` the
    output *is* the weight matrix W.  Then ``A = W V`` is compared with the
    output for the real V, and each output coordinate is checked to lie
    between the smallest and largest value of the v_j it averages (j <= i when
    causal), every comparison within ``softmax_error_bound``.
    """
    n, d, d_v = pick(level, (24, 4, 3), (96, 16, 8), (256, 32, 16))
    rows = []
    worst_sum, min_weight, hull_excess = 0.0, np.inf, -np.inf
    for causal in (False, True):
        for scale in (1.0, 30.0):  # 30: logits in the hundreds, the overflow regime
            row, ext = _softmax_row(causal, scale, n, d, d_v)
            rows.append(row)
            worst_sum = max(worst_sum, ext["sum"])
            min_weight = min(min_weight, ext["weight"])
            hull_excess = max(hull_excess, ext["excess"])
    key = (
        f"min weight {fmt(min_weight)} >= 0; max |row sum - 1| {fmt(worst_sum)} <= tol; "
        f"outputs inside the hull (max excess {fmt(hull_excess)})"
    )
    return all_verdict(rows), key, {"n": n, "d": d, "d_v": d_v, "statements": rows}


_SCALING_CACHE: dict[str, Any] = {}
#: The forms the essay times: exact attention both ways (C2), linear parallel and chunked (C3).
ESSAY_FORMS = ("softmax", "softmax-causal", "parallel", "chunked")


def _scaling_run(level: str):
    """One scaling measurement per level, shared by C2 and C3 (None at ``quick``).

    ``default`` runs :func:`kernelcheck.scaling.run_scaling` with
    ``quick=True``: n = 512..4096 (exact) and 512..16384 (linear), 9
    interleaved rounds on one BLAS thread, CPU time, no memory pass;
    ``thorough`` runs its default grid with the memory pass.  Only the
    forms of :data:`ESSAY_FORMS` are timed.
    """
    if level == "quick":
        return None
    if level not in _SCALING_CACHE:
        quick = level == "default"
        _SCALING_CACHE[level] = run_scaling(
            quick=quick, forms=ESSAY_FORMS, seed=0, memory=not quick
        )
    return _SCALING_CACHE[level]


def _model_exponent(form: str, causal: bool, sizes, d: int, D: int, d_v: int):
    """Exponent in n of the cost model's flops and of its flops per token (Theil-Sen)."""
    flops = [cost_model(form, n, d, D, d_v, 64, causal=causal).flops for n in sizes]
    per_token = [f / n for f, n in zip(flops, sizes, strict=True)]
    return fit_exponent(sizes, flops).slope, fit_exponent(sizes, per_token).slope


def _timing_row(f) -> dict:
    """The statement on one form's measured time exponent, judged against its accepted range.

    Timing corroborates the operation count; it cannot refute an asymptotic
    count (fixed overheads, caches and machine load bend small-n times), so a
    slope outside the range leaves the claim inconclusive, never refuted, and
    too few sizes or rounds leave it not judged (inconclusive) with the reason.
    """
    t = f.time_fit
    n = f.measurement.sizes
    p = f"{t.slope:.3f} [{t.low:.3f}, {t.high:.3f}]"
    if f.accepted is None:
        text = f"measured time of {f.name} ~ n^p, p near {EXPECTED_EXPONENTS[f.kind]:g}"
        return statement(text, None, f"p = {p} over n = {n[0]}..{n[-1]}: {f.reason}")
    lo, hi = f.accepted
    ok = True if f.verdict == "pass" else None
    evidence = (
        f"p = {p} ({t.coverage:.1%} interval, median of {len(t.round_slopes)} rounds) over "
        f"n = {n[0]}..{n[-1]}; accepted [{lo:.3f}, {hi:.3f}]; time/op spread "
        f"{f.cost_spread:.2f}: {f.verdict}"
    )
    if f.reason:
        evidence += f" ({f.reason})"
    return statement(f"measured time of {f.name} ~ n^p, p in [{lo:.3f}, {hi:.3f}]", ok, evidence)


def _measured_rows(report, claim: str):
    """Statements on the measured time exponents of ``claim``'s forms, and the plot data."""
    rows, measured, series = [], [], []
    for f in report.forms:
        t = f.time_fit
        x = [float(n) for n in f.measurement.sizes]
        series.append({"label": f.name, "x": x, "y": [float(v) for v in f.measurement.times]})
        if f.claim != claim:
            continue
        fitted = [float(v) for v in t.predict(f.measurement.sizes)]
        series.append(
            {"label": f"{f.name}: fit p = {t.slope:.2f}", "x": x, "y": fitted, "style": "line"}
        )
        mid = float(np.sqrt(x[0] * x[-1]))
        p0 = EXPECTED_EXPONENTS[f.kind]
        ref = [float(t.predict(mid)) * (n / mid) ** p0 for n in x]
        series.append({"label": f"{f.name}: theory n^{p0:g}", "x": x, "y": ref, "style": "dashed"})
        rng = "-" if f.accepted is None else f"[{f.accepted[0]:.2f}, {f.accepted[1]:.2f}]"
        measured.append(f"{f.name} {t.slope:.2f} [{t.low:.2f}, {t.high:.2f}] in {rng}")
        rows.append(_timing_row(f))
    plot = {
        "title": f"measured time against n ({claim})",
        "xlabel": "sequence length n",
        "ylabel": "CPU seconds per call (one BLAS thread)",
        "xscale": "log",
        "yscale": "log",
        "series": series,
    }
    return rows, measured, plot


def _cost_claim(level: str, claim: str, forms, per_seq: int, per_token: int):
    sizes = (1024, 2048, 4096, 8192, 16384, 32768)
    d, D, d_v = 64, 256, 64
    rows = []
    model_slopes = []
    for form, causal in forms:
        slope, tok = _model_exponent(form, causal, sizes, d, D, d_v)
        model_slopes.append(slope)
        kind = "causal" if causal else "bidirectional"
        rows.append(
            statement(
                f"{form} ({kind}): operation count ~ n^{per_seq} per sequence, "
                f"n^{per_token} per token (cost model)",
                abs(slope - per_seq) < 0.05 and abs(tok - per_token) < 0.05,
                f"flops exponent {slope:.3f}, per-token exponent {tok:.3f} over n = "
                f"{sizes[0]}..{sizes[-1]} (d = {d}, D = {D})",
            )
        )
    report = _scaling_run(level)
    measured: list[str] = []
    plot = None
    if report is None:
        rows.append(
            statement(
                "measured time exponent",
                "not run",
                "not measured at the quick level (run the default level or `kernelcheck scaling`)",
            )
        )
    else:
        more, measured, plot = _measured_rows(report, claim)
        rows += more
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
    return all_verdict(rows), key, details


def check_c2(level: str):
    """Softmax attention: n^2 operations per sequence, n per token; measured slope ~2."""
    return _cost_claim(level, "C2", [("softmax", False), ("softmax", True)], 2, 1)


def check_c3(level: str):
    """Linear attention: n operations per sequence, constant per token; measured slope ~1."""
    return _cost_claim(
        level,
        "C3",
        [("parallel", False), ("parallel", True), ("recurrent", True), ("chunked", True)],
        1,
        0,
    )


#: The checks of this group, in claim order.
CHECKS: tuple[Check, ...] = (
    Check(
        "C1",
        check_c1,
        ("kernelcheck.attention.softmax", "kernelcheck.attention.softmax_error_bound"),
    ),
    Check("C2", check_c2, ("kernelcheck.attention.cost_model", "kernelcheck.scaling.run_scaling")),
    Check("C3", check_c3, ("kernelcheck.attention.cost_model", "kernelcheck.scaling.run_scaling")),
)
