"""Claim checks of the group "Attention with kernels" (C10 .. C13).

Kernelized attention is compared with the factorized feature form within the
two forms' error bounds (C10), the recurrent state is counted (C11), the
truncated Taylor maps are checked against the Lagrange remainder and for the
sign of T_M (C12), and Performer positive features are tested for
unbiasedness by ``verify.unbiased`` (C13).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernelcheck._src.attention.families.kernelized.bound import kernelized_error_bound
from kernelcheck._src.attention.families.kernelized.forms import kernelized
from kernelcheck._src.attention.families.linear.bound import linear_error_bound
from kernelcheck._src.attention.families.linear.forms import parallel, recurrent
from kernelcheck._src.attention.families.softmax.bound import softmax_error_bound
from kernelcheck._src.attention.families.softmax.forms import softmax
from kernelcheck._src.attention.registry import cost_model
from kernelcheck._src.claims.checks.common import (
    Check,
    all_verdict,
    first_sentence,
    fmt,
    pick,
    points,
    qkv,
    relative_ci,
    statement,
    taylor_remainder_bound,
    unbiased_run,
)
from kernelcheck._src.claims.examples import FACTORIZED_KERNELS
from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck._src.kernels.combinators import exp
from kernelcheck._src.kernels.leaves import Exponential, Linear
from kernelcheck._src.verify.kernels.feature_map import feature_map

__all__ = ["CHECKS", "check_c10", "check_c11", "check_c12", "check_c13"]


def _scale_identity_row(n: int, d_v: int) -> dict:
    """exp(q.k / sqrt d) = SM(q / d^(1/4), k / d^(1/4)) through softmax and kernelized (C10).

    With d = 16 and 256 the factor d^(-1/4) is a power of two, so scaling q
    and k is exact and the two error models alone bound the difference.
    """
    checks = []
    for dd in (16, 256):
        Qb, Kb, Vb = qkv(11 + dd, n, dd, d_v, 1.0)
        s = dd**-0.25
        sm = softmax(Qb, Kb, Vb)
        via_exp = kernelized(Qb * s, Kb * s, Vb, Exponential())
        via_scale = kernelized(Qb, Kb, Vb, Exponential(scale=1.0 / math.sqrt(dd)))
        base = softmax_error_bound(Qb, Kb, Vb)
        tol = base + kernelized_error_bound(Qb * s, Kb * s, Vb, Exponential())
        tol2 = base + kernelized_error_bound(Qb, Kb, Vb, Exponential(scale=1.0 / math.sqrt(dd)))
        e1, e2 = np.abs(sm - via_exp), np.abs(sm - via_scale)
        checks.append((bool((e1 <= tol).all() and (e2 <= tol2).all()), max(e1.max(), e2.max())))
    return statement(
        "softmax(QK^T/sqrt d) V = kernelized attention with SM(q/d^(1/4), k/d^(1/4)) "
        "and with exp(q.k/sqrt d)",
        all(ok for ok, _ in checks),
        f"d = 16, 256: max |error| {fmt(max(e for _, e in checks))}",
    )


def check_c10(level: str):
    """Kernelized attention = the factorized feature form; the 1/sqrt(d) scale identity."""
    n, d, d_v = pick(level, (20, 3, 2), (80, 4, 6), (200, 6, 8))
    Q, K_, V = qkv(10, n, d, d_v, 0.5)
    rows, worst = [], 0.0
    for k in FACTORIZED_KERNELS:
        phi = k.features()
        for causal in (False, True):
            exact = kernelized(Q, K_, V, k, causal=causal)
            fact = parallel(phi(Q), phi(K_), V, causal=causal)
            tol = kernelized_error_bound(Q, K_, V, k, causal=causal) + linear_error_bound(
                phi(Q), phi(K_), V, causal=causal
            )
            err = np.abs(exact - fact)
            ratio = float((err / tol).max())
            worst = max(worst, ratio)
            kind = "causal" if causal else "bidirectional"
            rows.append(
                statement(
                    f"{k!r} ({kind}): sum_j kappa v_j / sum_j kappa = phi(q)^T S / phi(q)^T z",
                    bool((err <= tol).all()),
                    f"max |error| {fmt(err.max())}, {fmt(ratio)} x tol",
                )
            )
    rows.append(_scale_identity_row(n, d_v))
    key = (
        f"{len(FACTORIZED_KERNELS)} kernels x 2 masks: worst error {fmt(worst)} x tol; "
        "scale identity holds"
    )
    return all_verdict(rows), key, {"n": n, "d": d, "d_v": d_v, "statements": rows}


def check_c11(level: str):
    """The recurrent state (S, z) and the work per token do not depend on n."""
    d, d_v = 4, 3
    lengths = pick(level, (1, 8, 64), (1, 16, 256, 1024), (1, 16, 256, 4096))
    phi = exp(Linear(), order=2).features()
    D = phi.output_dim(d)
    sizes, per_token = [], []
    for n in lengths:
        Q, K_, V = qkv(20 + n, n, d, d_v, 0.5)
        _out, state = recurrent(phi(Q), phi(K_), V, return_state=True)
        sizes.append(state.size)
        per_token.append(cost_model("recurrent", n, d, D, d_v).flops_per_token())
    expected = D * (d_v + 1)
    state_ok = all(s == expected for s in sizes)
    # flops per token: constant in n up to the one-off n d_v output term
    work_ok = max(per_token) == min(per_token)
    softmax_state = [cost_model("softmax", n, d, D, d_v, causal=True).state_size for n in lengths]
    rows = [
        statement(
            "the state (S, z) holds D (d_v + 1) numbers whatever n",
            state_ok,
            f"n = {', '.join(map(str, lengths))}: state sizes {sizes} (D = {D}, d_v = {d_v})",
        ),
        statement(
            "the work per new token does not depend on n (cost model)",
            work_ok,
            f"flops per token {', '.join(fmt(p, 4) for p in per_token)}; the exact form's "
            f"key/value cache grows: {softmax_state}",
        ),
    ]
    key = f"state {sizes[0]} numbers for n = {lengths[0]}..{lengths[-1]}; flops/token constant"
    return all_verdict(rows), key, {"state_sizes": sizes, "statements": rows}


def _scalar_taylor(order: int, s):
    """T_M evaluated by the library at the scalars ``s`` (x = s, y = 1 in d = 1)."""
    k = exp(Linear(), order=order)
    x = np.asarray(s, dtype=float)[:, None]
    one = np.ones((1, 1))
    return k(x, one)[:, 0], k.error_bound(x, one)[:, 0]


def _taylor_remainders(orders, X, Y) -> dict[str, Any]:
    """The Taylor maps of every order against exp(x.y) and the remainder bound (C12)."""
    exact = Exponential()(X, Y)
    exact_err = Exponential().error_bound(X, Y)
    s = Linear()(X, Y)
    s_err = Linear().error_bound(X, Y)
    maps_ok, bound_ok, tightness = True, True, []
    max_err, max_bound = [], []
    for M in orders:
        kM = exp(Linear(), order=M)
        maps_ok &= feature_map(kM.features(), X, Y).passed
        err = np.abs(kM(X, Y) - exact)
        # The remainder at the computed s, widened by s's own rounding bound.
        bound = taylor_remainder_bound(np.abs(s) + s_err, M)
        allowed = bound + kM.error_bound(X, Y) + exact_err
        bound_ok &= bool((err <= allowed).all())
        tightness.append(float((err / allowed).max()))
        max_err.append(float(err.max()))
        max_bound.append(float(bound.max()))
    return {
        "maps_ok": maps_ok,
        "bound_ok": bound_ok,
        "tightness": tightness,
        "max_err": max_err,
        "max_bound": max_bound,
    }


def _taylor_signs(level: str, orders):
    """min T_M for even M and a witness T_M(s) <= 0 for odd M on s in [-12, 12] (C12)."""
    grid = np.linspace(-12.0, 12.0, pick(level, 241, 961, 4801))
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
    return even_min, odd_witness


def check_c12(level: str):
    """Taylor maps are kernels; the remainder bound holds; the sign of T_M by parity of M."""
    orders = pick(level, range(0, 5), range(0, 9), range(0, 13))
    n, d = pick(level, (12, 3), (40, 4), (100, 6))
    r = _taylor_remainders(orders, points(12, n, d, 0.6), points(13, n, d, 0.6))
    tightness = r["tightness"]
    even_min, odd_witness = _taylor_signs(level, orders)
    m1 = next(w for w in odd_witness if w[0] == 1)
    statements = [
        statement(
            "the order-M Taylor map reproduces T_M (so T_M is a kernel) for every M",
            r["maps_ok"],
            f"M = {min(orders)}..{max(orders)}, verify.feature_map on {n} x {n} pairs",
        ),
        statement(
            "|exp(s) - T_M(s)| <= |s|^(M+1) e^max(s,0) / (M+1)!",
            r["bound_ok"],
            f"largest error / (bound + rounding) {fmt(max(tightness))} over M and {n * n} pairs",
        ),
        statement(
            "even M: T_M(s) > 0 for every s",
            all(ok for _m, _v, ok in even_min),
            "min over s in [-12, 12]: " + ", ".join(f"T_{M} {fmt(v)}" for M, v, _ in even_min),
        ),
        statement(
            "odd M: T_M(s) <= 0 for some s (normalisers can vanish or turn negative)",
            all(ok for *_rest, ok in odd_witness),
            ", ".join(f"T_{M}({x:.6g}) = {fmt(v, 3)}" for M, x, v, _ in odd_witness)
            + " (grid points of s, shown in full)",
        ),
    ]
    key = (
        f"remainder bound holds (error <= {fmt(max(tightness))} x bound); "
        f"odd M: T_1({m1[1]:.6g}) = {fmt(m1[2], 3)} < 0; even M: min T_M > 0"
    )
    details = {
        "orders": list(orders),
        "error_over_bound": tightness,
        "max_error": r["max_err"],
        "max_bound": r["max_bound"],
        "statements": statements,
        "plot": {
            "title": "Taylor remainder: error and bound",
            "xlabel": "order M",
            "ylabel": "max over pairs",
            "yscale": "log",
            "series": [
                {"label": "|exp(s) - T_M(s)|", "x": list(orders), "y": r["max_err"]},
                {
                    "label": "remainder bound",
                    "x": list(orders),
                    "y": r["max_bound"],
                    "style": "dashed",
                },
            ],
        },
    }
    return all_verdict(statements), key, details


def check_c13(level: str, executor: Any = None):
    """Monte Carlo test of E[phi(x).phi(y)] = exp(x.y) for Performer positive features.

    Every pair's mean is tested against exp(x.y) with the closed-form
    variance; Holm's procedure keeps the family-wise false-alarm rate at 1%.
    The report's detectable relative bias states the power of the run.
    """
    d, m, n, trials = pick(level, (2, 16, 3, 20000), (4, 16, 4, 100000), (8, 32, 6, 400000))
    X = points(130, n, d, 0.5 / math.sqrt(d))
    Y = points(131, n, d, 0.5 / math.sqrt(d))
    rep = unbiased_run(
        PositiveRandomFeatures, d=d, m=m, X=X, Y=Y, trials=trials, seed=13, executor=executor
    )
    lo, hi = relative_ci(rep)
    verdict = rep.outcome
    key = (
        f"{rep.counts.get('pass', 0) + rep.counts.get('exact', 0)}/{len(rep.pairs)} pairs "
        f"unbiased; relative bias CI [{lo:+.2%}, {hi:+.2%}]; detectable "
        f"{rep.detectable_relative_bias:.2%} ({trials} trials)"
    )
    rows = [
        statement(
            "E[phi(x).phi(y)] = exp(x.y) on every pair",
            verdict is Outcome.VERIFIED if verdict is not Outcome.INCONCLUSIVE else None,
            first_sentence(str(rep)),
        )
    ]
    return verdict, key, {"report": rep.to_dict(), "statements": rows}


#: The checks of this group, in claim order.
CHECKS: tuple[Check, ...] = (
    Check(
        "C10",
        check_c10,
        (
            "kernelcheck.attention.kernelized",
            "kernelcheck.attention.parallel",
            "kernelcheck.attention.softmax",
            "Kernel.features",
        ),
    ),
    Check(
        "C11",
        check_c11,
        (
            "kernelcheck.attention.recurrent",
            "kernelcheck.attention.State",
            "kernelcheck.attention.cost_model",
        ),
    ),
    Check(
        "C12",
        check_c12,
        (
            "kernelcheck.kernels.exp(k, order=M)",
            "kernelcheck.verify.feature_map",
            "Kernel.error_bound",
        ),
    ),
    Check(
        "C13",
        check_c13,
        ("kernelcheck.verify.unbiased", "kernelcheck.features.PositiveRandomFeatures"),
        uses_executor=True,
    ),
)
