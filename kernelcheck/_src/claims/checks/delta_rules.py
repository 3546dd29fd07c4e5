"""Claim checks of the group "The recurrences people ship": the delta rule and its kin (C22-C24).

The delta rule (DeltaNet), Gated DeltaNet, Kimi Delta Attention and the
diagonal-plus-rank-one transition of RWKV-7: each is C14/C19 with a
transition ``M_t`` in place of the identity.  The checks call the forms of
:mod:`kernelcheck.attention` on inputs from fixed seeds and compare them
within their normwise error bounds (C24), which also carry the claims about
rounding: linear growth of the error while the transitions do not expand,
exponential growth, and no bound at all, where they do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.transition_bound import transition_norms
from kernelcheck._src.attention.common.transitions import Transitions, delta_step, run_steps
from kernelcheck._src.attention.common.types import State
from kernelcheck._src.attention.families.delta import bound as delta_bound
from kernelcheck._src.attention.families.delta import forms as delta
from kernelcheck._src.attention.families.dplr import bound as dplr_bound
from kernelcheck._src.attention.families.dplr import forms as dplr
from kernelcheck._src.attention.families.gated import bound as gated_bound
from kernelcheck._src.attention.families.gated import forms as gated
from kernelcheck._src.attention.families.gated_delta import bound as gated_delta_bound
from kernelcheck._src.attention.families.gated_delta import forms as gated_delta
from kernelcheck._src.attention.families.kda import bound as kda_bound
from kernelcheck._src.attention.families.kda import forms as kda
from kernelcheck._src.attention.families.linear import bound as linear_bound
from kernelcheck._src.attention.families.linear import forms as linear
from kernelcheck._src.claims.checks.common import Check, agree, all_verdict, fmt, pick, statement
from kernelcheck._src.core.rounding import gamma

__all__ = ["CHECKS", "check_c22", "check_c23", "check_c24"]


def _inputs(seed: int, n: int, D: int, d_v: int, *, unit: bool = True):
    """Gaussian queries and values, keys of norm 1 (or Gaussian), steps in (0.1, 1)."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n, D))
    if unit:
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return q, k, rng.standard_normal((n, d_v)), rng.uniform(0.1, 1.0, n), rng


def _gradient_step_rows(rng) -> list[dict]:
    """One step is gradient descent on 1/2 |S^T k - v|^2; unit keys and beta = 1 return v."""
    D, d_v = 6, 3
    S, k, v = rng.standard_normal((D, d_v)), rng.standard_normal(D), rng.standard_normal(d_v)
    beta = 0.37
    rec = delta.delta_recurrence()
    new, _ = rec.step(State(S), k, k, v, beta)
    step = S - beta * np.outer(k, S.T @ k - v)
    err = float(np.abs(new.S - step).max())
    tol = float(gamma(D + 6) * (np.abs(S) + beta * np.outer(np.abs(k), np.abs(S.T) @ np.abs(k)
                                                               + np.abs(v))).max())  # fmt: skip
    rows = [statement("one step is S - beta grad(1/2 |S^T k - v|^2)", err <= tol,
                      f"max |difference| {fmt(err)} <= {fmt(tol)}")]  # fmt: skip
    n = 24
    keys = np.eye(D)[rng.integers(0, D, n)]
    values = rng.integers(-9, 9, (n, d_v)).astype(float)
    read = delta.delta_chunked(keys, keys, values, np.ones(n), chunk_size=5)
    rows.append(statement("|k_t| = 1, beta_t = 1: the state returns v_t exactly at k_t",
                          bool(np.array_equal(read, values)),
                          f"{n} tokens, unit keys, chunked form: max |S_t^T k_t - v_t| "
                          f"{fmt(np.abs(read - values).max())}"))  # fmt: skip
    return rows


def _norm_rows(rng) -> list[dict]:
    """The transition's spectral norm is max(1, |1 - beta |k|^2|), non-expansive iff <= 2."""
    D, m = 5, 200
    k = rng.standard_normal((m, D))
    beta = rng.uniform(0.0, 4.0, m) / np.sum(k * k, axis=-1)
    T = Transitions(k, k, np.zeros((m, 1)), -beta[:, None] * k)
    rho, _ = transition_norms(T)
    x = beta * np.sum(k * k, axis=-1)
    svd = np.array([np.linalg.norm(np.eye(D) - b * np.outer(y, y), 2) for b, y in zip(beta, k)])
    err = float(np.abs(rho - np.maximum(1.0, np.abs(1.0 - x))).max())
    expands = svd > 1.0 + 1e-12
    return [
        statement("|I - beta k k^T|_2 = max(1, |1 - beta |k|^2|) (LAPACK's SVD)",
                  bool(np.allclose(svd, np.maximum(1.0, np.abs(1.0 - x)), rtol=1e-12)
                       and err <= 1e-12), f"{m} transitions, max |rho - formula| {fmt(err)}"),
        statement("non-expansive exactly when 0 <= beta |k|^2 <= 2",
                  bool(np.array_equal(expands, x > 2.0 + 1e-9) or not (expands ^ (x > 2)).any()),
                  f"{int(expands.sum())} of {m} expand, all with beta |k|^2 > 2"),
    ]  # fmt: skip


def _forms_rows(label, forms, bound, args, n) -> tuple[list[dict], float]:
    """Every chunk size and the parallel form (if any) against the recurrence, within the bound."""
    tol = bound(*args)
    ref, state = forms["recurrent"](*args, return_state=True)
    rows, worst = [], 0.0
    outs = {f"chunked C={c}": forms["chunked"](*args, chunk_size=c) for c in (1, 7, 64, n)}
    if "parallel" in forms:
        outs["parallel"] = forms["parallel"](*args)
    for name, out in outs.items():
        row, r = agree(f"{label}: {name} = recurrent", out, ref, tol)
        rows.append(row)
        worst = max(worst, r)
    for cut in (1, 37, n - 1):  # 37: inside a chunk of 64 (and of 7)
        first, mid = forms["chunked"](*(a[:cut] for a in args), return_state=True)
        rest, end = forms["recurrent"](*(a[cut:] for a in args), initial_state=mid,
                                       return_state=True)  # fmt: skip
        row, r = agree(f"{label}: prefill {cut} (chunked), decode the rest = one pass",
                       np.concatenate([first, rest]), ref, tol)  # fmt: skip
        rows.append(row)
        serr = float(np.abs(end.S - state.S).max())
        room = 4.0 * float(np.abs(tol).max())
        rows.append(
            statement(
                f"{label}: hand-over at {cut}: final state = one pass",
                serr <= room,
                f"max |S difference| {fmt(serr)} <= {fmt(room)}",
            )
        )
        worst = max(worst, r)
    return rows, worst


def check_c22(level: str):
    """The delta rule: gradient descent, exact recall, transition norms, WY chunks = recurrence."""
    n, D, d_v = pick(level, (80, 4, 2), (300, 8, 4), (1200, 16, 8))
    q, k, v, beta, rng = _inputs(22, n, D, d_v)
    rows = _gradient_step_rows(rng) + _norm_rows(rng)
    forms = {"recurrent": delta.delta_recurrent, "chunked": delta.delta_chunked,
             "parallel": lambda *a, **kw: delta.delta_parallel(*a)}  # fmt: skip
    args = (q, k, v, beta)
    more, worst = _forms_rows("delta rule", forms, delta_bound.delta_error_bound, args, n)
    rows += more
    key = (f"gradient step, exact recall, |M|_2 formula; WY chunks, parallel and hand-over "
           f"agree (n = {n}): worst {fmt(worst)} x 2 tol")  # fmt: skip
    return all_verdict(rows), key, {"n": n, "statements": rows}


def _special_case_rows(q, k, v, beta, g, G) -> tuple[list[dict], float]:
    """The families (and C19, C20) as the DPLR transition with their factors.

    Each pair is within the sum of the two forms' bounds; the DPLR side's
    factors are products formed in float64 (two more roundings a term).
    """
    n, D = k.shape
    ones = np.ones((n, D))
    b = beta[:, None]
    pq, pk = np.abs(q), np.abs(k)
    cases: dict[str, tuple[tuple[Any, Any, tuple], tuple]] = {
        "the delta rule = DPLR(w = 1, a = k, b = -beta k), value beta v": (
            (delta.delta_recurrent, delta_bound.delta_error_bound, (q, k, v, beta)),
            (q, k, b * v, k, -b * k, ones),
        ),
        "Gated DeltaNet = DPLR(w = alpha, a = alpha k, b = -beta k)": (
            (gated_delta.gated_delta_recurrent, gated_delta_bound.gated_delta_error_bound,
             (q, k, v, g, beta)),
            (q, k, b * v, g[:, None] * k, -b * k, g[:, None] * ones),
        ),
        "Kimi Delta Attention = DPLR(w = alpha, a = alpha o k, b = -beta k)": (
            (kda.kda_recurrent, kda_bound.kda_error_bound, (q, k, v, G, beta)),
            (q, k, b * v, G * k, -b * k, G),
        ),
        "C19 (unnormalised linear attention) = DPLR(w = 1, a = b = 0)": (
            (lambda *a: linear.recurrent(*a, normalize=False),
             lambda *a: linear_bound.linear_error_bound(*a, causal=True, normalize=False),
             (pq, pk, v)),
            (pq, pk, v, 0 * k, 0 * k, ones),
        ),
        "C20 (gated, one decay per token) = DPLR(w = g, a = b = 0)": (
            (gated.gated_recurrent, gated_bound.gated_error_bound, (pq, pk, v, g)),
            (pq, pk, v, 0 * k, 0 * k, g[:, None] * ones),
        ),
    }  # fmt: skip
    rows, worst = [], 0.0
    for label, ((form, bound, args), dplr_args) in cases.items():
        ref, got = form(*args), dplr.dplr_chunked(*dplr_args)
        tol = bound(*args) + dplr_bound.dplr_error_bound(*dplr_args, extra_ops=2)
        row, r = agree(label, got, ref, tol)
        rows.append(row)
        worst = max(worst, r)
    return rows, worst


def check_c23(level: str):
    """One transition for all: the families as DPLR; every family's forms agree and hand over."""
    n, D, d_v = pick(level, (80, 4, 2), (200, 8, 4), (800, 16, 8))
    q, k, v, beta, rng = _inputs(23, n, D, d_v)
    g = rng.uniform(0.8, 1.0, n)
    G = rng.uniform(0.8, 1.0, (n, D))
    kappa = k
    a, b = -kappa, kappa * rng.uniform(0.0, 1.0, (n, D))
    rows, worst = _special_case_rows(q, k, v, beta, g, G)
    families = {
        "Gated DeltaNet": ({"recurrent": gated_delta.gated_delta_recurrent,
                            "chunked": gated_delta.gated_delta_chunked},
                           gated_delta_bound.gated_delta_error_bound, (q, k, v, g, beta)),
        "Kimi Delta Attention": ({"recurrent": kda.kda_recurrent, "chunked": kda.kda_chunked},
                                 kda_bound.kda_error_bound, (q, k, v, G, beta)),
        "RWKV-7 (DPLR)": ({"recurrent": dplr.dplr_recurrent, "chunked": dplr.dplr_chunked},
                          dplr_bound.dplr_error_bound, (q, k, v, a, b, G)),
    }  # fmt: skip
    for label, (forms, bound, args) in families.items():
        more, w = _forms_rows(label, forms, bound, args, n)
        rows += more
        worst = max(worst, w)
    key = (f"the delta families, C19 and C20 are DPLR; 3 families' forms agree and hand over "
           f"inside a chunk (n = {n}): worst {fmt(worst)} x 2 tol")  # fmt: skip
    return all_verdict(rows), key, {"n": n, "statements": rows}


def _linear_growth_row(bound, q, n) -> tuple[dict, float]:
    """The bound's increments over the last two quarters of the sequence: equal when linear."""
    per_token = np.max(bound / np.linalg.norm(q, axis=-1)[:, None], axis=-1)
    a, b, c = per_token[n // 2 - 1], per_token[3 * n // 4 - 1], per_token[-1]
    ratio = (c - b) / (b - a)
    row = statement(
        "non-expansive (unit keys, beta <= 1): the bound grows linearly in t",
        bool(0.5 < ratio < 2.0),
        f"increments over the last two quarters: ratio {fmt(ratio)} (linear: 1)",
    )
    return row, ratio


def _expansion_rows(rng) -> tuple[list[dict], str]:
    """Unnormalised keys, beta |k|^2 near 20: the state explodes; the bound follows, then stops."""
    m, D = 64, 20
    q, k = rng.standard_normal((2, m, D))
    v, beta = rng.standard_normal((m, 2)), np.ones(m)  # beta |k|^2 = |k|^2, about 20
    _, _, norms = run_steps(delta_step, q, k, v, (beta,), np.zeros((D, 2)), norms=True)
    largest = np.max(norms, axis=-1)
    first = int(np.argmax(largest >= 1e10)) if (largest >= 1e10).any() else m
    b64 = delta_bound.delta_error_bound(q, k, v, beta)
    b32 = delta_bound.delta_error_bound(*(x.astype(np.float32) for x in (q, k, v, beta)))
    inf_from = int(np.argmax(np.isinf(b32).any(axis=-1)))
    rows = [
        statement("beta |k|^2 near 20: |S| reaches about 1e10 within 64 tokens", first < m,
                  f"|S_t| >= 1e10 from token {first}; |S_64| = {fmt(largest[-1])}"),
        statement("expanding: the bound grows exponentially, and then gives none (inf)",
                  bool(np.isinf(b32).any() and np.nanmax(b64[8]) > 1e3 * np.max(b64[0])),
                  f"float64 bound {fmt(np.max(b64[0]))} at t = 0, {fmt(np.max(b64[8]))} at "
                  f"t = 8; float32: inf from token {inf_from}"),
    ]  # fmt: skip
    return rows, f"|S| >= 1e10 at token {first}"


def check_c24(level: str):
    """Rounding through the transitions: linear growth while non-expansive, else exponential."""
    n, D, d_v = pick(level, (128, 8, 2), (512, 16, 4), (2048, 32, 8))
    q, k, v, beta, rng = _inputs(24, n, D, d_v)
    m = min(n, 256)  # float32's bound stays far below the outputs up to here
    low = [x[:m].astype(np.float32) for x in (q, k, v, beta)]
    as64 = [x.astype(np.float64) for x in low]
    exact = delta.delta_recurrent(*as64)  # float64: within its own (far smaller) bound
    bound = delta_bound.delta_error_bound(*low) + delta_bound.delta_error_bound(*as64)
    rows = []
    for name, form in (("recurrent", delta.delta_recurrent), ("chunked", delta.delta_chunked)):
        err = np.abs(form(*low) - exact)
        ok = bool((err <= bound).all() and np.isfinite(bound).all())
        evidence = f"max |error| {fmt(err.max())}, {fmt((err / bound).max())} x bound"
        rows.append(statement(f"float32 {name} error within the normwise bound (n = {m})", ok,
                              evidence))  # fmt: skip
    row, ratio = _linear_growth_row(delta_bound.delta_error_bound(q, k, v, beta), q, n)
    more, explode = _expansion_rows(rng)
    rows += [row] + more
    key = (f"float32 delta rule within its normwise bound (n = {m}), linear growth to n = {n} "
           f"(increment ratio {fmt(ratio)}); beta |k|^2 near 20: {explode}")  # fmt: skip
    return all_verdict(rows), key, {"n": n, "statements": rows}


#: The checks of this group, in claim order.
CHECKS: tuple[Check, ...] = (
    Check(
        "C22",
        check_c22,
        (
            "kernelcheck.attention.delta_recurrence",
            "kernelcheck.attention.delta_recurrent",
            "kernelcheck.attention.delta_chunked",
            "kernelcheck.attention.delta_parallel",
            "kernelcheck.attention.delta_error_bound",
        ),
    ),
    Check(
        "C23",
        check_c23,
        (
            "kernelcheck.attention.dplr_chunked",
            "kernelcheck.attention.dplr_recurrent",
            "kernelcheck.attention.gated_delta_recurrent",
            "kernelcheck.attention.gated_delta_chunked",
            "kernelcheck.attention.kda_recurrent",
            "kernelcheck.attention.kda_chunked",
            "kernelcheck.attention.dplr_error_bound",
        ),
    ),
    Check(
        "C24",
        check_c24,
        (
            "kernelcheck.attention.delta_recurrent",
            "kernelcheck.attention.delta_chunked",
            "kernelcheck.attention.delta_error_bound",
        ),
    ),
)
