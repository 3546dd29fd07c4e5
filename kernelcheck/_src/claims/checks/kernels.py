"""Claim checks of the group "Kernels" (C4 .. C9).

Feature maps are decided by ``verify.feature_map``, Gram matrices by the PSD
ladder (``check_psd``) and its Mercer factorisation, non-kernels by the
counterexample search of ``verify.kernel``; the examples come from
:mod:`kernelcheck._src.claims.examples`.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from kernelcheck._src.claims.checks.common import (
    Check,
    all_verdict,
    first_sentence,
    fmt,
    pick,
    points,
    statement,
)
from kernelcheck._src.claims.examples import FINITE_KERNELS, NON_KERNELS, PSD_KERNELS
from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.kernels.combinators import exp
from kernelcheck._src.kernels.function import kernel_from_function
from kernelcheck._src.kernels.leaves import Exponential, Linear, Polynomial
from kernelcheck._src.kernels.monomials import monomial_dim, unweighted_monomials
from kernelcheck._src.psd.ladder import check_psd
from kernelcheck._src.psd.mercer import mercer_features
from kernelcheck._src.verify.kernels.feature_map import feature_map
from kernelcheck._src.verify.kernels.kernel import kernel as verify_kernel
from kernelcheck.errors import InfiniteFeatureSpace

__all__ = ["CHECKS", "check_c4", "check_c5", "check_c6", "check_c7", "check_c8", "check_c9"]


def check_c4(level: str):
    """Every finite kernel of the algebra equals the inner product of its exact features."""
    n, d = pick(level, (12, 3), (40, 4), (120, 5))
    X = points(4, n, d, 0.7)
    Y = points(5, n + 3, d, 0.7)
    rows, worst = [], 0.0
    for k in FINITE_KERNELS:
        for form in ("symmetric", "tensor"):
            rep = feature_map(k.features(form), X, Y)
            worst = max(worst, rep.worst_ratio)
            rows.append(
                statement(
                    f"{k!r} = <phi(x), phi(y)> ({form}, D = {rep.D})",
                    rep.passed,
                    f"max |error| {fmt(rep.max_abs_error)}, {fmt(rep.worst_ratio)} x tol",
                )
            )
    verdict = all_verdict(rows)
    key = f"{len(rows)} kernel/form pairs: worst error {fmt(worst)} x tolerance"
    return verdict, key, {"n": n, "m": n + 3, "d": d, "statements": rows}


def check_c7(level: str):
    """phi(x) = x for the linear kernel: the map returns its input and reproduces x.y."""
    n, d = pick(level, (16, 3), (64, 8), (256, 16))
    X = points(7, n, d)
    phi = Linear().features()
    identical = bool(np.array_equal(phi(X), X))
    rep = feature_map(phi, X)
    rows = [
        statement("phi(x) = x (bit for bit)", identical, f"phi(X) == X on {n} x {d} points"),
        statement("x.y = phi(x).phi(y)", rep.passed, str(rep)),
    ]
    key = (
        f"phi(X) == X exactly; max |error| {fmt(rep.max_abs_error)} "
        f"<= tol {fmt(rep.tolerance.value)}"
    )
    return all_verdict(rows), key, {"report": rep.to_dict(), "statements": rows}


def _polynomial_pair(d: int, m: int, n: int) -> tuple[dict[str, Any], bool, float]:
    """The three feature maps of (x.y)^m in dimension d (C8).

    Returns the row of the details, whether every dimension is as stated, and
    the unweighted map's error over its tolerance.
    """
    X = points(80 + d + 10 * m, n, d, 0.8)
    k = Polynomial(m)
    t = feature_map(k.features("tensor"), X)
    s = feature_map(k.features("symmetric"), X)
    # Independent count of unique monomials: distinct multisets of variable indices.
    unique = len({tuple(sorted(c)) for c in itertools.product(range(d), repeat=m)})
    dims = (
        t.D == d**m
        and s.D == unique == math.comb(d + m - 1, m) == monomial_dim(d, m)
        and k.feature_dim(d, "tensor") == d**m
        and k.feature_dim(d, "symmetric") == unique
    )
    u = feature_map(lambda Z, m=m: unweighted_monomials(Z, m), X, kernel=k, feature_ops=2 * m)
    row = {
        "d": d,
        "m": m,
        "tensor_dim": t.D,
        "unique_monomials": unique,
        "tensor_passed": t.passed,
        "weighted_passed": s.passed,
        "unweighted_passed": u.passed,
        "unweighted_max_error": u.max_abs_error,
    }
    return row, dims, u.worst_ratio


def check_c8(level: str):
    """Both feature maps of (x.y)^m, their dimensions, and the unweighted map's failure.

    Verified means: the tensor map (d^m coordinates) and the weighted
    unique-monomial map (C(d+m-1, m) coordinates) reproduce the kernel, and
    the unweighted monomial map does not (for d, m >= 2), as the claims page on kernels states.
    """
    grid = pick(
        level,
        [(2, 2), (3, 3)],
        [(2, 2), (3, 2), (3, 3), (4, 3), (5, 4)],
        [(2, 2), (3, 2), (3, 3), (4, 3), (5, 4), (6, 4), (4, 6)],
    )
    n = pick(level, 10, 30, 80)
    pairs = [_polynomial_pair(d, m, n) for d, m in grid]
    rows = [row for row, _dims, _ratio in pairs]
    tensor_ok = all(r["tensor_passed"] for r in rows)
    sym_ok = all(r["weighted_passed"] for r in rows)
    dims_ok = all(dims for _row, dims, _ratio in pairs)
    unweighted_wrong = not any(r["unweighted_passed"] for r in rows)
    unweighted_worst = min([math.inf] + [ratio for _row, _dims, ratio in pairs])
    dims_text = ", ".join(
        f"d={r['d']},m={r['m']}: {r['tensor_dim']} vs {r['unique_monomials']}" for r in rows
    )
    statements = [
        statement(
            "tensor map x(x)...(x)x reproduces (x.y)^m with d^m coordinates",
            tensor_ok and dims_ok,
            f"{len(grid)} (d, m) pairs; dims {dims_text}",
        ),
        statement(
            "weighted unique monomials sqrt(m!/alpha!) x^alpha reproduce (x.y)^m with "
            "C(d+m-1, m) coordinates",
            sym_ok and dims_ok,
            "verify.feature_map passed on every pair; dimension = count of distinct multisets",
        ),
        statement(
            "unweighted unique monomials reproduce (x.y)^m (the essay's wording)",
            not unweighted_wrong,
            f"fails on every pair with d, m >= 2; smallest error {fmt(unweighted_worst)} x tol",
        ),
        statement(
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
    verdict = Outcome.VERIFIED if holds else Outcome.REFUTED
    return verdict, key, {"pairs": rows, "statements": statements}


def check_c5(level: str, executor: Any = None):
    """Gram matrices of true kernels are PSD; non-kernels get exactly verified witnesses."""
    grow = pick(level, 0.5, 1.0, 3.0)
    rows, worst = [], -np.inf
    for i, (name, k, (n, d, scale)) in enumerate(PSD_KERNELS):
        X = points(50 + i, max(d + 1, int(n * grow)), d, scale)
        r = check_psd(k(X))
        rel = r.min_eigenvalue / max(r.tol.value, np.finfo(float).tiny)
        worst = max(worst, -rel)
        rows.append(
            statement(
                f"{name}: Gram matrix PSD",
                bool(r.is_psd),
                f"{r.verdict.name} by {r.method}; min eigenvalue {fmt(r.min_eigenvalue)} "
                f">= -tol {fmt(r.tol.value)}",
            )
        )
    # The other direction of the definition: functions that are not kernels.
    found = 0
    for name, f in NON_KERNELS[: pick(level, 2, 4, 4)]:
        kern = kernel_from_function(f, name=name)
        rep = verify_kernel(kern, dim=2, seed=5, executor=executor)
        refuted = not rep.passed
        found += refuted
        rows.append(
            statement(
                f"{name} is refuted (a witness v with v^T K v < 0)",
                refuted,
                first_sentence(str(rep)),
            )
        )
    key = (
        f"{len(PSD_KERNELS)} kernels PSD (min eigenvalue >= {fmt(-worst)} x tol); "
        f"{found} non-kernels refuted by exactly verified witnesses"
    )
    return all_verdict(rows), key, {"statements": rows}


def check_c6(level: str):
    """Phi = Lambda^(1/2) U^T reproduces PSD Gram matrices, for infinite-feature kernels too."""
    grow = pick(level, 0.5, 1.0, 3.0)
    rows = []
    worst = 0.0
    for i, (name, k, (n, d, scale)) in enumerate(PSD_KERNELS):
        X = points(60 + i, max(d + 1, int(n * grow)), d, scale)
        m = mercer_features(k(X))
        worst = max(worst, m.residual / m.error_bound if m.error_bound > 0 else 0.0)
        rows.append(
            statement(
                f"{name}: Phi Phi^T = K with Phi from the eigendecomposition",
                bool(m.passed and m.residual <= m.error_bound),
                f"rank {m.rank} of {X.shape[0]}; ||Phi Phi^T - K|| {fmt(m.residual)} "
                f"<= bound {fmt(m.error_bound)}",
            )
        )
    key = f"{len(rows)} Gram matrices factored: worst residual {fmt(worst)} x its bound"
    return all_verdict(rows), key, {"statements": rows}


def _exp_maps_row(level: str, X, Y) -> dict:
    """Truncated maps of exp(x.y) reproduce the series and converge (C9)."""
    errs = []
    maps_ok = True
    for M in range(0, pick(level, 6, 12, 16) + 1, 2):
        kM = exp(Linear(), order=M)
        maps_ok &= feature_map(kM.features(), X, Y).passed
        errs.append(float(np.abs(kM(X, Y) - Exponential()(X, Y)).max()))
    return statement(
        "the maps [1, x, x(x)x/sqrt 2!, ...] truncated at M reproduce the series and "
        "converge to exp(x.y)",
        maps_ok and errs[-1] < errs[0],
        f"max |exp - T_M| {fmt(errs[0])} (M=0) -> {fmt(errs[-1])} (M={2 * (len(errs) - 1)})",
    )


def check_c9(level: str):
    """exp(x.y) is PSD, a positive-weighted sum of PSD terms, with no finite feature map."""
    sets = pick(
        level,
        [(20, 2, 0.8)],
        [(40, 2, 1.0), (60, 4, 0.8), (40, 8, 0.5)],
        [(80, 2, 1.2), (120, 4, 1.0), (150, 8, 0.6), (100, 16, 0.4)],
    )
    rows = []
    psd_ok, worst = True, -math.inf
    for i, (n, d, scale) in enumerate(sets):
        X = points(90 + i, n, d, scale)
        r = check_psd(Exponential()(X))
        psd_ok &= bool(r.is_psd)
        worst = max(worst, -r.min_eigenvalue / r.tol.value)
    rows.append(
        statement(
            "the Gram matrices of exp(x.y) are PSD",
            psd_ok,
            f"{len(sets)} point sets (d up to {sets[-1][1]}); worst min eigenvalue "
            f"{fmt(-worst)} x tol",
        )
    )
    X = points(99, 30, 3, 0.8)
    terms_ok = all(check_psd(Polynomial(m)(X) / math.factorial(m)).is_psd for m in range(0, 7))
    rows.append(
        statement(
            "each term (x.y)^m / m! is PSD (so is their positive-weighted sum)",
            terms_ok,
            "check_psd on m = 0..6",
        )
    )
    try:
        Exponential().features()
        raised = False
    except InfiniteFeatureSpace:
        raised = True
    rows.append(
        statement(
            "the feature space is infinite: Exponential().features() refuses",
            raised,
            "raises InfiniteFeatureSpace, pointing to exp(Linear(), order=M) and random features",
        )
    )
    rows.append(_exp_maps_row(level, X, points(98, 30, 3, 0.8)))
    key = (
        f"exp Gram matrices PSD (min eigenvalue >= {fmt(-worst)} x tol); no finite map; "
        "Taylor maps converge"
    )
    return all_verdict(rows), key, {"statements": rows}


#: The checks of this group, in claim order.
CHECKS: tuple[Check, ...] = (
    Check("C4", check_c4, ("kernelcheck.verify.feature_map", "Kernel.features")),
    Check(
        "C5",
        check_c5,
        ("kernelcheck.psd.check_psd", "kernelcheck.verify.kernel"),
        uses_executor=True,
    ),
    Check("C6", check_c6, ("kernelcheck.psd.mercer_features",)),
    Check("C7", check_c7, ("kernelcheck.verify.feature_map", "Linear.features")),
    Check(
        "C8",
        check_c8,
        (
            "kernelcheck.verify.feature_map",
            "Polynomial.features",
            "kernelcheck.kernels.unweighted_monomials",
            "kernelcheck.kernels.monomial_dim",
        ),
    ),
    Check("C9", check_c9, ("kernelcheck.psd.check_psd", "kernelcheck.kernels.exp")),
)
